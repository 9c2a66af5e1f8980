# SPDX-License-Identifier: Apache-2.0
"""Record types and decoding: PERF_RECORD_* from perf rings, and fixed-layout payloads.

Two kinds of decoding live here:

* :class:`Decoder` turns one ``perf_event_header`` record into a Python object (Sample, Lost,
  Comm, Fork, Exit, Mmap, Mmap2, Namespaces, ...), given the event's ``sample_type`` and
  whether ``sample_id_all`` appended the sample-id trailer to non-sample records
  (include/uapi/linux/perf_event.h, enum perf_event_type documents every layout).
* :class:`RecordFormat` describes a fixed-size payload (what a BPF program sends) with a
  :mod:`struct` format and optional field names, so a whole batch of records decodes in one
  step: ``numpy`` structured arrays when numpy is installed (the ``numpy`` extra), otherwise
  ``struct.iter_unpack`` tuples.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import re
import struct
from collections.abc import Iterable, Sequence
from typing import Any

from .._kernel.consts import PerfRecord, PerfSample
from ..btf.records import CharArrays, RecordDecoder, char_modes, char_value, mode_of
from ..errors import ParseError, UsageError

# numpy is the optional extra that makes batches structured arrays. It is imported on first
# use, not with this module: it costs a few hundred milliseconds.
HAVE_NUMPY = importlib.util.find_spec("numpy") is not None


def numpy_module() -> Any:
    """The numpy module, or None when it is not installed."""
    if not HAVE_NUMPY:
        return None
    import numpy

    return numpy

__all__ = [
    "HAVE_NUMPY",
    "RecordFormat",
    "RecordDecoder",
    "SampleId",
    "PerfEventRecord",
    "Record",
    "Sample",
    "Lost",
    "LostSamples",
    "Comm",
    "Fork",
    "Exit",
    "Mmap",
    "Mmap2",
    "Namespaces",
    "Throttle",
    "Switch",
    "Unknown",
    "Decoder",
    "NAMESPACE_NAMES",
    "STATUS_ONLY",
]

# perf_event_header.misc bits used here.
MISC_COMM_EXEC = 1 << 13  # COMM caused by exec (3.16)
MISC_MMAP_DATA = 1 << 13  # MMAP/MMAP2 of a non-executable mapping
MISC_MMAP_BUILD_ID = 1 << 14  # MMAP2 carries a build id instead of dev/inode (5.12)
MISC_SWITCH_OUT = 1 << 13
# Bit 11 as the sideband-ioctl RFC (2023) defined PERF_RECORD_MISC_STATUS_ONLY: a record that
# describes existing state (synthesized from /proc or emitted on request), not a new event.
STATUS_ONLY = 1 << 11

# enum perf_ns_link_info index order (NET_NS_INDEX = 0 ... CGROUP_NS_INDEX = 6).
NAMESPACE_NAMES = ("net", "uts", "ipc", "pid", "user", "mnt", "cgroup")

_HDR = struct.Struct("<IHH")


# ------------------------------------------------------------------------ payload formats
_STRUCT_TOKEN = re.compile(r"\s*(\d*)([xcbB?hHiIlLqQnNefdspP])")
_NUMPY_CODE = {
    "c": "S1", "b": "i1", "B": "u1", "?": "?", "h": "i2", "H": "u2", "i": "i4", "I": "u4",
    "l": "i8", "L": "u8", "q": "i8", "Q": "u8", "n": "i8", "N": "u8", "e": "f2", "f": "f4",
    "d": "f8", "P": "u8",
}


class RecordFormat:
    """A fixed record layout: a :mod:`struct` format plus field names.

    ``RecordFormat("<QQIIQ", ["seq", "ts", "pid", "cpu", "arg"])``; without names fields are
    ``f0``, ``f1``, ... Padding (``x``) takes no name. A ``numpy.dtype`` works too
    (``RecordFormat(dtype)``). ``size`` is the payload size a record must have at least.
    """

    format: str | None  # None for a numpy dtype with no struct equivalent
    names: list[str]
    size: int
    char_fields: frozenset[str]  # the fields that are char arrays (from_btf knows them)

    def __init__(self, fmt: Any, names: Sequence[str] | None = None) -> None:
        self._dtype: Any = None
        self._fields: list[tuple[int, str, int]] = []
        self.char_fields = frozenset()
        if isinstance(fmt, RecordFormat):
            self.format, self.names, self.size, self._dtype = fmt.format, fmt.names, fmt.size, fmt._dtype
            self._fields, self.char_fields = fmt._fields, fmt.char_fields
            return
        np = numpy_module() if not isinstance(fmt, str) else None
        if np is not None and isinstance(fmt, np.dtype):
            self._dtype = fmt
            self.format = None
            self.names = list(fmt.names or [])
            self.size = fmt.itemsize
            return
        if not isinstance(fmt, str):
            raise UsageError(f"record format must be a struct format or numpy dtype, not {fmt!r}")
        try:
            self.size = struct.calcsize(fmt)
        except struct.error as exc:
            raise UsageError(f"bad struct format {fmt!r}: {exc}") from None
        self.format = fmt
        self._fields = self._parse(fmt)
        count = len(self._fields)
        if names is None:
            names = [f"f{i}" for i in range(count)]
        if len(names) != count:
            raise UsageError(f"struct format {fmt!r} has {count} fields, {len(names)} names given")
        self.names = list(names)

    def record_struct(self) -> struct.Struct:
        """The :class:`struct.Struct` decoding one record (per-record callbacks)."""
        if self.format is None:
            raise UsageError("a record format made from a numpy dtype decodes batches only (read_batch, consume_batch); "
                             "give a struct format to decode record by record")
        return struct.Struct(self.format)

    @staticmethod
    def _parse(fmt: str) -> list[tuple[int, str, int]]:
        """(offset, code, count) of every value-producing field."""
        order = fmt[0] if fmt and fmt[0] in "@=<>!" else "@"
        body = fmt[1:] if fmt and fmt[0] in "@=<>!" else fmt
        fields: list[tuple[int, str, int]] = []
        prefix = order
        pos = 0
        while pos < len(body):
            match = _STRUCT_TOKEN.match(body, pos)
            if not match:
                if body[pos:].strip() == "":
                    break
                raise UsageError(f"cannot read struct format {fmt!r} at {body[pos:]!r}")
            pos = match.end()
            count = int(match.group(1)) if match.group(1) else 1
            code = match.group(2)
            if code == "x":
                prefix += f"{count}x"
                continue
            if code in "sp":
                end = struct.calcsize(prefix + f"{count}{code}")
                fields.append((end - count, code, count))
                prefix += f"{count}{code}"
                continue
            for _ in range(count):
                end = struct.calcsize(prefix + code)
                fields.append((end - struct.calcsize(order + code), code, 1))
                prefix += code
        return fields

    @classmethod
    def from_btf(cls, btf: Any, struct_type: Any) -> RecordFormat:
        """The layout of a BTF struct (a Struct, a type id or a struct name) as a format:
        members in order with explicit padding, little-endian; nested structs are flattened
        into ``outer.inner`` names, arrays of integers into ``name[i]`` fields, byte/char
        arrays and unions become ``bytes``. Bitfields are refused."""
        from ..btf.dwarf import find_struct
        from ..btf.layout import FLOAT_FORMATS, INT_FORMATS, POINTER_FORMAT, leaves
        from ..btf.records import is_char_array
        from ..btf.types import Array, Enum, Float, Int, Pointer, Struct, Union

        if isinstance(struct_type, str):  # the object's BTF, else its DWARF (bpfkit.btf.dwarf)
            btf, struct_type = find_struct(btf, struct_type)
        elif isinstance(struct_type, int):
            struct_type = btf.resolve(struct_type)
        if not isinstance(struct_type, Struct) or isinstance(struct_type, Union):
            raise UsageError(f"{struct_type!r} is not a BTF struct")
        codes: list[tuple[int, str, int, str]] = []  # (offset, code, size, name)
        chars: set[str] = set()

        def scalar(t: Any) -> str | None:
            """Integers and enums by size and sign (a bool as an integer), pointers, floats."""
            if isinstance(t, (Int, Enum)):
                return INT_FORMATS.get((t.size, t.signed))
            if isinstance(t, Pointer):
                return POINTER_FORMAT
            if isinstance(t, Float):
                return FLOAT_FORMATS.get(t.size)
            return None

        for leaf in leaves(btf, struct_type.id):
            path = leaf.path
            if len(path) == 1:
                parts = [path[0].name or f"_anon{leaf.offset}"]
            else:  # ``outer.inner``; an anonymous member is _anon<its offset>
                parts, at = [], 0
                for m in path:
                    at += m.bit_offset // 8
                    parts.append(m.name or f"_anon{at}")
            mt, off, name = leaf.type, leaf.offset, ".".join(parts)
            if leaf.bitfield:
                prefix = "".join(p + "." for p in parts[:-1])
                raise UsageError(f"BTF struct member {prefix}{path[-1].name} is a bitfield: no struct format for it")
            code = scalar(mt)
            if code is not None:
                codes.append((off, code, struct.calcsize("<" + code), name))
            elif isinstance(mt, Union):
                codes.append((off, "s", mt.size, name))
            elif isinstance(mt, Array):
                elem = btf.resolve(mt.type)
                esize = btf.size_of(mt.type)
                ecode = scalar(elem)
                if ecode is None or esize == 1:
                    codes.append((off, "s", esize * mt.nelems, name))
                    if is_char_array(btf, mt):
                        chars.add(name)
                else:
                    for i in range(mt.nelems):
                        codes.append((off + i * esize, ecode, esize, f"{name}[{i}]"))
            else:
                raise UsageError(f"BTF struct member {name}: no struct format for {mt!r}")

        fmt, names, pos = "<", [], 0
        for off, code, size, name in codes:
            if off > pos:
                fmt += f"{off - pos}x"
            fmt += f"{size}s" if code == "s" else code
            names.append(name)
            pos = off + size
        if struct_type.size > pos:
            fmt += f"{struct_type.size - pos}x"
        made = cls(fmt, names)
        made.char_fields = frozenset(chars)
        return made

    @property
    def dtype(self) -> Any:
        """The numpy structured dtype of one record (needs numpy)."""
        np = numpy_module()
        if np is None:
            raise UsageError("numpy is not installed: install the bpfkit[numpy] extra for arrays")
        if self._dtype is None:
            order = self.format[0] if self.format and self.format[0] in "<>!=" else "="
            byteorder = {"<": "<", ">": ">", "!": ">", "=": "="}[order]
            formats = []
            for _, code, count in self._fields:
                if code in "sp":
                    formats.append(f"S{count}")
                elif code in "c?":
                    formats.append(_NUMPY_CODE[code])
                else:
                    formats.append(byteorder + _NUMPY_CODE[code])
            self._dtype = np.dtype(
                {
                    "names": self.names,
                    "formats": formats,
                    "offsets": [off for off, _, _ in self._fields],
                    "itemsize": self.size,
                }
            )
        return self._dtype

    def dtype_for_stride(self, stride: int, skip: int = 0) -> Any:
        """The dtype of one record ``skip`` bytes into each ``stride``-byte slot of a ring
        (header and padding become unnamed gaps), for viewing a run of records in place."""
        if self.size + skip > stride:
            raise UsageError(f"record of {self.size} bytes does not fit a {stride}-byte stride")
        cache = self.__dict__.setdefault("_strided", {})
        key = (stride, skip)
        got = cache.get(key)
        if got is None:
            base = self.dtype
            fields = base.fields
            names = list(base.names)
            got = cache[key] = numpy_module().dtype(
                {
                    "names": names,
                    "formats": [fields[n][0] for n in names],
                    "offsets": [fields[n][1] + skip for n in names],
                    "itemsize": stride,
                }
            )
        return got

    def struct_for_stride(self, stride: int, skip: int = 0) -> struct.Struct:
        """A Struct that unpacks one record every ``stride`` bytes, ``skip`` bytes in."""
        if self.format is None:
            raise UsageError("this RecordFormat came from a numpy dtype: it has no struct format")
        order = self.format[0] if self.format[0] in "@=<>!" else ""
        body = self.format[1:] if order else self.format
        tail = stride - skip - self.size
        if tail < 0:
            raise UsageError(f"record of {self.size} bytes does not fit a {stride}-byte stride")
        # '<' (no alignment) keeps the explicit padding exact; the field offsets of an '@'
        # format are already baked into its size, so re-express it with pad bytes.
        if order in ("", "@"):
            raise UsageError("use an explicit byte order ('<', '>', '=') for batch decoding")
        return struct.Struct(f"{order}{skip}x{body}{tail}x")

    def unpack(self, data: Any) -> tuple[Any, ...]:
        if self.format is None:
            raise UsageError("this RecordFormat came from a numpy dtype: it has no struct format")
        return struct.unpack_from(self.format, data)

    def fields(self, data: Any, char_arrays: CharArrays | None = None) -> dict[str, Any]:
        """One record as {name: value}, whole or cut short (execsnoop sends its struct only up to
        the bytes ``args`` uses): a field starting at or after the record's end is None, a
        ``bytes`` field the end cuts holds the bytes there, another field it cuts is None.
        Char arrays (:attr:`char_fields`) read as ``char_arrays`` says (bpfkit.btf.records:
        ``"text"``, ``"strings"``, ``"bytes"``, or a mode by field name); other bytes fields
        stay bytes."""
        if self.format is None:
            raise UsageError("this RecordFormat came from a numpy dtype: it has no struct format")
        n = len(data)
        if n >= self.size:
            values = list(struct.unpack_from(self.format, data))
        else:
            order = self.format[0] if self.format[0] in "@=<>!" else "@"
            values = []
            for off, code, count in self._fields:
                width = count if code in "sp" else struct.calcsize(order + code)
                if off >= n:
                    values.append(None)
                elif code in "sp":
                    values.append(bytes(data[off:min(off + width, n)]))
                else:
                    values.append(struct.unpack_from(order + code, data, off)[0] if off + width <= n else None)
        out: dict[str, Any] = dict(zip(self.names, values))
        for name in self.char_fields:
            raw = out.get(name)
            mode = self.char_mode(name, char_arrays)
            if isinstance(raw, bytes) and mode is not None:
                out[name] = char_value(raw, mode)
        return out

    def char_mode(self, name: str, char_arrays: CharArrays | None = None) -> str | None:
        """How :meth:`fields` reads field ``name`` given ``char_arrays`` (None: not a char array)."""
        if name not in self.char_fields:
            return None
        return mode_of(name, *char_modes(char_arrays))

    def __repr__(self) -> str:
        return f"RecordFormat({self.format or self._dtype!r}, size={self.size})"


def record_decoder(rmap: Any, record: str | RecordDecoder, char_arrays: CharArrays | None = None) -> RecordDecoder:
    """What ``record=`` of a reader names, as a decoder: a RecordDecoder as it is, or a struct
    name (``"struct event"``) looked up in the BTF of the object ``rmap`` came from, else in its
    DWARF (bpfkit.btf.dwarf)."""
    if isinstance(record, RecordDecoder):
        if char_arrays is not None:
            raise UsageError("give char_arrays to the RecordDecoder itself, not beside it")
        return record
    if not isinstance(record, str):
        raise UsageError(f"record must be a struct name or a RecordDecoder, not {record!r}")
    from ..btf.dwarf import find_struct

    btf = getattr(getattr(rmap, "spec", None), "btf", None)
    found_btf, struct_type = find_struct(btf, record, f"map {getattr(rmap, 'name', rmap)!r}: record type")
    return RecordDecoder(found_btf, struct_type, char_arrays=char_arrays)


def decoding(callback: Any, decoder: RecordDecoder, with_cpu: bool) -> Any:
    """``callback`` called with each record decoded (after the CPU for a perf buffer's)."""
    if not callable(callback):
        raise UsageError(f"a reader given record= needs a callback, not {callback!r}")
    decode = decoder.decode
    if with_cpu:
        return lambda cpu, data: callback(cpu, decode(data))
    return lambda data: callback(decode(data))


def as_format(fmt: Any) -> RecordFormat | None:
    if fmt is None or isinstance(fmt, RecordFormat):
        return fmt
    return RecordFormat(fmt)


def require_format(fmt: Any, what: str) -> RecordFormat:
    """``fmt`` as a RecordFormat, refusing None (``what`` names the call for the message)."""
    if fmt is None:
        raise UsageError(f"{what} needs a record format (a struct format, RecordFormat or numpy dtype), not None")
    return fmt if isinstance(fmt, RecordFormat) else RecordFormat(fmt)


# ----------------------------------------------------------------------- perf records
@dataclasses.dataclass(slots=True)
class SampleId:
    """The sample_id trailer (sample_id_all) or the same fields of a sample."""

    pid: int | None = None
    tid: int | None = None
    time: int | None = None
    id: int | None = None
    stream_id: int | None = None
    cpu: int | None = None


@dataclasses.dataclass(slots=True)
class PerfEventRecord:
    """Base of decoded perf records (PERF_RECORD_*). ``cpu`` is the ring the record came from."""

    misc: int
    cpu: int
    sample_id: SampleId | None

    @property
    def time(self) -> int | None:
        return self.sample_id.time if self.sample_id is not None else None

    @property
    def status_only(self) -> bool:
        """Describes state that existed before tracking started (synthesized), not an event."""
        return bool(self.misc & STATUS_ONLY)


@dataclasses.dataclass(slots=True)
class Sample(PerfEventRecord):
    """PERF_RECORD_SAMPLE. ``raw`` is the PERF_SAMPLE_RAW payload (what a BPF program sent,
    padded by the kernel to keep records 8-byte aligned)."""

    ip: int | None = None
    addr: int | None = None
    period: int | None = None
    callchain: tuple[int, ...] | None = None
    raw: Any = None


@dataclasses.dataclass(slots=True)
class Lost(PerfEventRecord):
    """PERF_RECORD_LOST: ``lost`` records did not fit in the ring and were dropped."""

    id: int = 0
    lost: int = 0


@dataclasses.dataclass(slots=True)
class LostSamples(PerfEventRecord):
    """PERF_RECORD_LOST_SAMPLES (4.2): samples the PMU could not deliver."""

    lost: int = 0


@dataclasses.dataclass(slots=True)
class Comm(PerfEventRecord):
    """PERF_RECORD_COMM: thread ``tid`` of ``pid`` is now called ``comm``; ``exec`` when the
    name changed because the process exec'd (PERF_RECORD_MISC_COMM_EXEC)."""

    pid: int = 0
    tid: int = 0
    comm: str = ""

    @property
    def exec(self) -> bool:
        return bool(self.misc & MISC_COMM_EXEC)


@dataclasses.dataclass(slots=True)
class _TaskRecord(PerfEventRecord):
    """The layout FORK and EXIT share (struct { u32 pid, ppid, tid, ptid; u64 time; })."""

    pid: int = 0
    ppid: int = 0
    tid: int = 0
    ptid: int = 0
    timestamp: int = 0


@dataclasses.dataclass(slots=True)
class Fork(_TaskRecord):
    """PERF_RECORD_FORK: ``tid`` of ``pid`` was created by ``ptid`` of ``ppid`` (a new thread
    when ``pid == ppid``)."""


@dataclasses.dataclass(slots=True)
class Exit(_TaskRecord):
    """PERF_RECORD_EXIT: thread ``tid`` of ``pid`` exited (the process when ``pid == tid``)."""


@dataclasses.dataclass(slots=True)
class Mmap(PerfEventRecord):
    """PERF_RECORD_MMAP: ``filename`` mapped at [addr, addr+len) from file offset ``pgoff``."""

    pid: int = 0
    tid: int = 0
    addr: int = 0
    len: int = 0
    pgoff: int = 0
    filename: str = ""

    @property
    def executable(self) -> bool:
        return not self.misc & MISC_MMAP_DATA


@dataclasses.dataclass(slots=True)
class Mmap2(Mmap):
    """PERF_RECORD_MMAP2 (3.16): MMAP plus device/inode (or build id, 5.12), prot and flags."""

    maj: int = 0
    min: int = 0
    ino: int = 0
    ino_generation: int = 0
    build_id: bytes = b""
    prot: int = 0
    flags: int = 0


@dataclasses.dataclass(slots=True)
class Namespaces(PerfEventRecord):
    """PERF_RECORD_NAMESPACES (4.16): the (dev, inode) of each namespace of ``pid``/``tid``,
    in NAMESPACE_NAMES order."""

    pid: int = 0
    tid: int = 0
    namespaces: tuple[tuple[int, int], ...] = ()

    def get(self, name: str) -> tuple[int, int] | None:
        i = NAMESPACE_NAMES.index(name)
        return self.namespaces[i] if i < len(self.namespaces) else None


@dataclasses.dataclass(slots=True)
class Throttle(PerfEventRecord):
    """PERF_RECORD_THROTTLE / UNTHROTTLE (``throttled`` tells which)."""

    timestamp: int = 0
    id: int = 0
    stream_id: int = 0
    throttled: bool = True


@dataclasses.dataclass(slots=True)
class Switch(PerfEventRecord):
    """PERF_RECORD_SWITCH(_CPU_WIDE) (4.3): a context switch in (or out, ``out``)."""

    next_prev_pid: int | None = None
    next_prev_tid: int | None = None

    @property
    def out(self) -> bool:
        return bool(self.misc & MISC_SWITCH_OUT)


@dataclasses.dataclass(slots=True)
class Unknown(PerfEventRecord):
    """A record type this decoder does not know; ``data`` is the whole record."""

    type: int = 0
    data: bytes = b""


Record = PerfEventRecord  # its first name (bpfkit.events.process uses it)


def _cstring(buf: Any, start: int, end: int) -> str:
    raw = bytes(buf[start:end])
    cut = raw.find(b"\0")
    return (raw if cut < 0 else raw[:cut]).decode(errors="replace")


class Decoder:
    """Decodes records of one perf event configuration.

    ``sample_type`` is the event's PERF_SAMPLE_* mask; ``sample_id_all`` says whether
    non-sample records end with the sample-id trailer (its fields are the TID, TIME, ID,
    STREAM_ID, CPU and IDENTIFIER bits of sample_type, in that order).
    """

    _SUPPORTED = (
        PerfSample.IDENTIFIER | PerfSample.IP | PerfSample.TID | PerfSample.TIME | PerfSample.ADDR
        | PerfSample.ID | PerfSample.STREAM_ID | PerfSample.CPU | PerfSample.PERIOD
        | PerfSample.CALLCHAIN | PerfSample.RAW
    )

    def __init__(self, sample_type: int = PerfSample.RAW, sample_id_all: bool = False) -> None:
        self.sample_type = int(sample_type)
        self.sample_id_all = sample_id_all
        st = self.sample_type
        size = 0
        for bit, width in (
            (PerfSample.TID, 8), (PerfSample.TIME, 8), (PerfSample.ID, 8),
            (PerfSample.STREAM_ID, 8), (PerfSample.CPU, 8), (PerfSample.IDENTIFIER, 8),
        ):
            if st & bit:
                size += width
        self.sample_id_size = size if sample_id_all else 0

    def sample_id(self, buf: Any, end: int) -> SampleId | None:
        """The sample-id trailer that ends at ``end`` (None without sample_id_all)."""
        if not self.sample_id_size:
            return None
        st = self.sample_type
        pos = end - self.sample_id_size
        sid = SampleId()
        if st & PerfSample.TID:
            sid.pid, sid.tid = struct.unpack_from("<II", buf, pos)
            pos += 8
        if st & PerfSample.TIME:
            (sid.time,) = struct.unpack_from("<Q", buf, pos)
            pos += 8
        if st & PerfSample.ID:
            (sid.id,) = struct.unpack_from("<Q", buf, pos)
            pos += 8
        if st & PerfSample.STREAM_ID:
            (sid.stream_id,) = struct.unpack_from("<Q", buf, pos)
            pos += 8
        if st & PerfSample.CPU:
            (sid.cpu,) = struct.unpack_from("<I", buf, pos)
            pos += 8
        if st & PerfSample.IDENTIFIER:
            (sid.id,) = struct.unpack_from("<Q", buf, pos)
        return sid

    def decode(self, buf: Any, cpu: int = -1, copy: bool = True) -> PerfEventRecord:
        """Decode one whole record (header included). Raw sample payloads are copied to
        bytes unless ``copy=False`` (then they are views into ``buf``)."""
        if len(buf) < 8:
            raise ParseError(f"perf record of {len(buf)} bytes is shorter than its header")
        rtype, misc, size = _HDR.unpack_from(buf, 0)
        if size < 8 or size > len(buf):
            raise ParseError(f"perf record type {rtype} claims {size} bytes, {len(buf)} available")
        if rtype == PerfRecord.SAMPLE:
            return self._sample(buf, misc, size, cpu, copy)
        end = size
        sid = self.sample_id(buf, end)
        body_end = end - self.sample_id_size
        if rtype == PerfRecord.LOST:
            rid, lost = struct.unpack_from("<QQ", buf, 8)
            return Lost(misc, cpu, sid, rid, lost)
        if rtype == PerfRecord.COMM:
            pid, tid = struct.unpack_from("<II", buf, 8)
            return Comm(misc, cpu, sid, pid, tid, _cstring(buf, 16, body_end))
        if rtype in (PerfRecord.FORK, PerfRecord.EXIT):
            pid, ppid, tid, ptid, ts = struct.unpack_from("<IIIIQ", buf, 8)
            cls = Fork if rtype == PerfRecord.FORK else Exit
            return cls(misc, cpu, sid, pid, ppid, tid, ptid, ts)
        if rtype == PerfRecord.MMAP:
            pid, tid, addr, length, pgoff = struct.unpack_from("<IIQQQ", buf, 8)
            return Mmap(misc, cpu, sid, pid, tid, addr, length, pgoff, _cstring(buf, 40, body_end))
        if rtype == PerfRecord.MMAP2:
            pid, tid, addr, length, pgoff = struct.unpack_from("<IIQQQ", buf, 8)
            maj = mn = ino = gen = 0
            build_id = b""
            if misc & MISC_MMAP_BUILD_ID:
                bid_size = buf[40]
                build_id = bytes(buf[44 : 44 + min(bid_size, 20)])
            else:
                maj, mn, ino, gen = struct.unpack_from("<IIQQ", buf, 40)
            prot, flags = struct.unpack_from("<II", buf, 64)
            return Mmap2(
                misc, cpu, sid, pid, tid, addr, length, pgoff, _cstring(buf, 72, body_end),
                maj, mn, ino, gen, build_id, prot, flags,
            )
        if rtype == PerfRecord.NAMESPACES:
            pid, tid, nr = struct.unpack_from("<IIQ", buf, 8)
            nr = min(nr, max(0, (body_end - 24) // 16))
            links = tuple(struct.unpack_from("<QQ", buf, 24 + 16 * i) for i in range(nr))
            return Namespaces(misc, cpu, sid, pid, tid, links)
        if rtype == PerfRecord.LOST_SAMPLES:
            (lost,) = struct.unpack_from("<Q", buf, 8)
            return LostSamples(misc, cpu, sid, lost)
        if rtype in (PerfRecord.THROTTLE, PerfRecord.UNTHROTTLE):
            ts, rid, stream = struct.unpack_from("<QQQ", buf, 8)
            return Throttle(misc, cpu, sid, ts, rid, stream, rtype == PerfRecord.THROTTLE)
        if rtype == PerfRecord.SWITCH:
            return Switch(misc, cpu, sid)
        if rtype == PerfRecord.SWITCH_CPU_WIDE:
            npid, ntid = struct.unpack_from("<II", buf, 8)
            return Switch(misc, cpu, sid, npid, ntid)
        return Unknown(misc, cpu, sid, rtype, bytes(buf[:size]))

    def _sample(self, buf: Any, misc: int, size: int, cpu: int, copy: bool) -> Sample:
        # Fields after RAW (branch stacks, registers, ...) are not decoded: RAW's position
        # depends only on the fields before it.
        st = self.sample_type
        pos = 8
        sid = SampleId()
        sample = Sample(misc, cpu, sid)
        if st & PerfSample.IDENTIFIER:
            (sid.id,) = struct.unpack_from("<Q", buf, pos)
            pos += 8
        if st & PerfSample.IP:
            (sample.ip,) = struct.unpack_from("<Q", buf, pos)
            pos += 8
        if st & PerfSample.TID:
            sid.pid, sid.tid = struct.unpack_from("<II", buf, pos)
            pos += 8
        if st & PerfSample.TIME:
            (sid.time,) = struct.unpack_from("<Q", buf, pos)
            pos += 8
        if st & PerfSample.ADDR:
            (sample.addr,) = struct.unpack_from("<Q", buf, pos)
            pos += 8
        if st & PerfSample.ID:
            (sid.id,) = struct.unpack_from("<Q", buf, pos)
            pos += 8
        if st & PerfSample.STREAM_ID:
            (sid.stream_id,) = struct.unpack_from("<Q", buf, pos)
            pos += 8
        if st & PerfSample.CPU:
            (sid.cpu,) = struct.unpack_from("<I", buf, pos)
            pos += 8
        if st & PerfSample.PERIOD:
            (sample.period,) = struct.unpack_from("<Q", buf, pos)
            pos += 8
        if st & PerfSample.READ:
            raise ParseError("PERF_SAMPLE_READ samples are not decoded by bpfkit")
        if st & PerfSample.CALLCHAIN:
            (nr,) = struct.unpack_from("<Q", buf, pos)
            pos += 8
            sample.callchain = struct.unpack_from(f"<{nr}Q", buf, pos)
            pos += 8 * nr
        if st & PerfSample.RAW:
            (raw_size,) = struct.unpack_from("<I", buf, pos)
            pos += 4
            if pos + raw_size > size:
                raise ParseError(f"raw sample of {raw_size} bytes overruns its {size}-byte record")
            raw = buf[pos : pos + raw_size]
            sample.raw = bytes(raw) if copy else raw
        return sample


def decode_all(decoder: Decoder, records: Iterable[tuple[int, Any]]) -> list[PerfEventRecord]:
    """Decode (cpu, whole record) pairs."""
    return [decoder.decode(buf, cpu) for cpu, buf in records]


def collect_batches(consume_batch: Any, fmt: RecordFormat, limit: Any) -> Any:
    """Drain through a reader's ``consume_batch`` into owned data: one numpy structured array
    (copied out of the ring, so it outlives the reader) or, without numpy, a list of tuples."""
    parts: list[Any] = []
    np = numpy_module()
    if np is not None:
        packed = fmt.dtype
        consume_batch(lambda a: parts.append(a.astype(packed)), fmt, limit, True)
        if not parts:
            return np.empty(0, fmt.dtype)
        return parts[0] if len(parts) == 1 else np.concatenate(parts)
    consume_batch(parts.extend, fmt, limit, False)
    return parts
