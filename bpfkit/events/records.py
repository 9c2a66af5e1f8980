# SPDX-License-Identifier: Apache-2.0
"""Record types and decoding: fixed-layout payloads, and PERF_RECORD_* from perf rings.

Two kinds of decoding live here:

* :class:`RecordFormat` describes a fixed-size payload (what a BPF program sends) with a
  :mod:`struct` format and optional field names, so a whole batch of records decodes in one
  step: ``numpy`` structured arrays when numpy is installed (the ``numpy`` extra), otherwise
  ``struct.iter_unpack`` tuples.
* :class:`Decoder` turns one ``perf_event_header`` record into a Python object (Sample, Lost,
  Comm, Fork, Exit, Mmap, Mmap2, Namespaces, ...), given the event's ``sample_type`` and
  whether ``sample_id_all`` appended the sample-id trailer to non-sample records
  (include/uapi/linux/perf_event.h, enum perf_event_type documents every layout).

Every reader imports this module; the perf record classes and Decoder are defined in
``bpfkit.events._perf_records`` and load on first use of one of their names here, as does
bpfkit.btf.records (record decoders, char arrays): a RingBuffer or PerfBuffer that reads
payloads pays for neither (issue 38: they were most of a first reader's set-up).
tests/test_startup_imports.py pins what a reader's import loads.
"""

from __future__ import annotations

import importlib.util
import re
import struct

from .._lazy import lazy_getattr
from ..errors import UsageError

# typing (~3 ms to import) for the type checker only; mypy treats TYPE_CHECKING as true.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Any

    from ..btf.records import CharArrays
    from ..btf.records import RecordDecoder as RecordDecoder
    from ._perf_records import MISC_COMM_EXEC as MISC_COMM_EXEC
    from ._perf_records import MISC_MMAP_BUILD_ID as MISC_MMAP_BUILD_ID
    from ._perf_records import MISC_MMAP_DATA as MISC_MMAP_DATA
    from ._perf_records import MISC_SWITCH_OUT as MISC_SWITCH_OUT
    from ._perf_records import NAMESPACE_NAMES as NAMESPACE_NAMES
    from ._perf_records import STATUS_ONLY as STATUS_ONLY
    from ._perf_records import Comm as Comm
    from ._perf_records import Decoder as Decoder
    from ._perf_records import Exit as Exit
    from ._perf_records import Fork as Fork
    from ._perf_records import Lost as Lost
    from ._perf_records import LostSamples as LostSamples
    from ._perf_records import Mmap as Mmap
    from ._perf_records import Mmap2 as Mmap2
    from ._perf_records import Namespaces as Namespaces
    from ._perf_records import PerfEventRecord as PerfEventRecord
    from ._perf_records import Record as Record
    from ._perf_records import Sample as Sample
    from ._perf_records import SampleId as SampleId
    from ._perf_records import Switch as Switch
    from ._perf_records import Throttle as Throttle
    from ._perf_records import Unknown as Unknown
    from ._perf_records import decode_all as decode_all

# The names defined elsewhere, loaded on first use (PEP 562, as bpfkit.events' own names).
_PERF_RECORDS = (
    "MISC_COMM_EXEC", "MISC_MMAP_BUILD_ID", "MISC_MMAP_DATA", "MISC_SWITCH_OUT", "NAMESPACE_NAMES", "STATUS_ONLY",
    "Comm", "Decoder", "Exit", "Fork", "Lost", "LostSamples", "Mmap", "Mmap2", "Namespaces", "PerfEventRecord",
    "Record", "Sample", "SampleId", "Switch", "Throttle", "Unknown", "decode_all",
)
_LAZY = dict.fromkeys(_PERF_RECORDS, "bpfkit.events._perf_records") | {"RecordDecoder": "bpfkit.btf.records"}
__getattr__ = lazy_getattr("bpfkit.events.records", _LAZY, globals())

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
        if not self.char_fields:
            return out
        from ..btf.records import char_value  # (from_btf, which names char arrays, has loaded it)

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
        from ..btf.records import char_modes, mode_of

        return mode_of(name, *char_modes(char_arrays))

    def __repr__(self) -> str:
        return f"RecordFormat({self.format or self._dtype!r}, size={self.size})"


def record_decoder(rmap: Any, record: str | RecordDecoder, char_arrays: CharArrays | None = None) -> RecordDecoder:
    """What ``record=`` of a reader names, as a decoder: a RecordDecoder as it is, or a struct
    name (``"struct event"``) looked up in the BTF of the object ``rmap`` came from, else in its
    DWARF (bpfkit.btf.dwarf)."""
    from ..btf.records import RecordDecoder

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
