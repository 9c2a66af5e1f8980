# SPDX-License-Identifier: Apache-2.0
"""PERF_RECORD_* records and their decoding, apart from the payload formats: a tool reading only
BPF ring buffers or perf samples' payloads never loads this module.

:class:`Decoder` turns one ``perf_event_header`` record into a Python object (Sample, Lost,
Comm, Fork, Exit, Mmap, Mmap2, Namespaces, ...), given the event's ``sample_type`` and whether
``sample_id_all`` appended the sample-id trailer to non-sample records
(include/uapi/linux/perf_event.h, enum perf_event_type documents every layout). Its users
(bpfkit.events.process, PerfRing sideband readers) import it here; everyone else gets these
names from :mod:`bpfkit.events.records`, which loads this module on first use: building the
fifteen record dataclasses and the perf enums was three quarters of a RingBuffer's first set-up
(issue 38, benchmarks/bench_reader_setup.py).
"""

from __future__ import annotations

import dataclasses
import struct
from collections.abc import Iterable

from .._kernel.consts import PerfRecord, PerfSample
from ..errors import ParseError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

# No __all__: bpfkit.events.records lists and re-exports every name (tests/test_startup_imports.py).

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
