# SPDX-License-Identifier: Apache-2.0
"""Who is that pid? A process tracker built on perf sideband records.

A BPF program reports a pid and an instruction address; turning that into "``libfoo.so`` +
0x1139, in ``foo()``" needs the process's mappings *at that moment*, and processes fork, exec,
dlopen and exit all the time. Reading /proc when the sample arrives is too late (the process
may be gone or have exec'd). perf tools solve this with sideband records, and so does this
tracker:

1. Open a ``PERF_COUNT_SW_DUMMY`` event on every online CPU for all tasks with ``comm``,
   ``comm_exec``, ``mmap``/``mmap2`` (executable mappings), ``task`` (FORK/EXIT) and
   ``namespaces`` tracking, ``sample_id_all`` and CLOCK_MONOTONIC timestamps (``use_clockid``).
   From now on every change is recorded.
2. Then describe what already exists: scan /proc (each process's status, comm, exe and
   executable mappings) and turn it into synthesized FORK/COMM/MMAP2 records flagged
   status-only (bit 11 of ``misc``, as the RFC "perf: Add ioctl to emit sideband events"
   defined PERF_RECORD_MISC_STATUS_ONLY), timestamped when each process was read. If the
   kernel ever implements that RFC's PERF_EVENT_IOC_EMIT_SIDEBAND (probed conclusively;
   never merged so far), the kernel emits those records itself and /proc is not read.
3. Merge both streams by timestamp and apply them in order. A snapshot of a pid replaces what
   was known before its timestamp, live records after it apply on top; so a change that
   happens while /proc is being read is never lost: there is no race window.

Records from different CPUs are merged as perf does ("finished rounds"): after each pass over
all rings, records up to the newest timestamp seen in the *previous* pass are applied, since
anything older than that has been written everywhere by now. :meth:`ProcessTracker.sync`
drains until quiet and applies everything.

Mappings: without ``mmap_data`` the kernel reports executable mappings only, which is what
symbolization needs. A new mapping replaces whatever overlapped it; exec starts an empty
address space; fork copies the parent's (a new thread shares it).
"""

from __future__ import annotations

import dataclasses
import heapq
import os
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from .._closing import ClosesOnExit
from .._kernel import ring as _ring
from .._kernel.consts import PerfAttrFlag, PerfSample
from .._kernel.cpus import online_cpus
from ..errors import BPFKitError, KernelError, NotSupportedError, UsageError
from ..symbols import Symbolizer, default_symbolizer
from ..symbols.process import PROT_EXEC, Mapping, find_mapping, parse_maps
from .perf import PerfRing
from .records import (
    MISC_MMAP_DATA,
    STATUS_ONLY,
    Comm,
    Decoder,
    Exit,
    Fork,
    Lost,
    Mmap,
    Mmap2,
    Namespaces,
    Record,
    SampleId,
)

__all__ = ["ProcessTracker", "Process", "Mapping", "Resolution", "Symbolizer"]

SAMPLE_TYPE = PerfSample.TID | PerfSample.TIME | PerfSample.CPU
TRACK_FLAGS = (
    PerfAttrFlag.MMAP | PerfAttrFlag.MMAP2 | PerfAttrFlag.COMM | PerfAttrFlag.COMM_EXEC
    | PerfAttrFlag.TASK | PerfAttrFlag.SAMPLE_ID_ALL
)


@dataclasses.dataclass
class Process:
    """What the tracker knows about one process (thread group) now."""

    pid: int
    ppid: int = 0
    comm: str = ""
    exe: str = ""
    maps: list[Mapping] = dataclasses.field(default_factory=list)
    threads: set[int] = dataclasses.field(default_factory=set)
    namespaces: tuple[tuple[int, int], ...] = ()
    exited: int | None = None  # CLOCK_MONOTONIC ns of the exit
    from_snapshot: bool = False  # first seen in the /proc snapshot (existed at start)
    log: list[tuple[int, str, str]] = dataclasses.field(default_factory=list)  # (time, what, detail)
    _await_exe: bool = False

    LOG_MAX = 64

    def note(self, t: int, what: str, detail: str = "") -> None:
        self.log.append((t, what, detail))
        if len(self.log) > self.LOG_MAX:
            del self.log[: len(self.log) - self.LOG_MAX]

    def find(self, addr: int) -> Mapping | None:
        """The mapping containing ``addr``."""
        return find_mapping(self.maps, addr)

    def add_mapping(self, new: Mapping) -> None:
        """Insert ``new``; older mappings it overlaps are cut back or dropped (mmap over an
        existing range replaces it, MAP_FIXED style)."""
        kept: list[Mapping] = []
        for m in self.maps:
            if m.end <= new.start or m.start >= new.end:
                kept.append(m)
                continue
            if m.start < new.start:
                kept.append(dataclasses.replace(m, end=new.start))
            if m.end > new.end:
                kept.append(dataclasses.replace(m, start=new.end, pgoff=m.pgoff + (new.end - m.start)))
        kept.append(new)
        kept.sort(key=lambda m: m.start)
        self.maps = kept

    @property
    def alive(self) -> bool:
        return self.exited is None


@dataclasses.dataclass(frozen=True)
class Resolution:
    """(pid, address) resolved: the file, the offset in it and, when found, the symbol."""

    pid: int
    addr: int
    path: str
    offset: int
    mapping: Mapping
    symbol: str | None = None
    symbol_offset: int = 0

    def __str__(self) -> str:
        where = f"{self.path}+{self.offset:#x}"
        if self.symbol:
            return f"{self.symbol}+{self.symbol_offset:#x} ({where})"
        return where


# ------------------------------------------------------------------------------- /proc
def _read(path: str) -> str | None:
    try:
        with open(path, "rb") as f:
            return f.read().decode(errors="replace")
    except OSError:
        return None


def snapshot_records(pid: int, cpu: int = -1) -> list[Record]:
    """Status-only FORK, COMM and MMAP2 records describing /proc/PID now (empty if gone)."""
    t = time.monotonic_ns()
    status = _read(f"/proc/{pid}/status")
    maps = _read(f"/proc/{pid}/maps")
    if status is None or maps is None:
        return []
    fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
    try:
        tgid = int(fields.get("Tgid", str(pid)))
        ppid = int(fields.get("PPid", "0"))
    except ValueError:
        return []
    if tgid != pid:
        return []
    comm = (_read(f"/proc/{pid}/comm") or "").rstrip("\n")
    sid = SampleId(pid=pid, tid=pid, time=t, cpu=cpu)
    recs: list[Record] = [Fork(STATUS_ONLY, cpu, sid, pid, ppid, pid, ppid, t), Comm(STATUS_ONLY, cpu, sid, pid, pid, comm)]
    try:
        exe = os.readlink(f"/proc/{pid}/exe")
    except OSError:
        exe = ""
    for m in parse_maps(maps):
        recs.append(Mmap2(STATUS_ONLY, cpu, sid, pid, pid, m.start, m.end - m.start, m.pgoff, m.path,
                          m.maj, m.min, m.ino, 0, b"", m.prot, 0))
    recs.append(_Exe(STATUS_ONLY, cpu, sid, pid, exe.removesuffix(" (deleted)")))
    return recs


@dataclasses.dataclass(slots=True)
class _Exe(Record):
    """Internal: the snapshot's view of /proc/PID/exe."""

    pid: int = 0
    path: str = ""


def _pids() -> Iterator[int]:
    for name in os.listdir("/proc"):
        if name.isdigit():
            yield int(name)


# ----------------------------------------------------------------------------- tracker
class ProcessTracker(ClosesOnExit):
    """Follows every process's comm, executable and mappings from perf sideband records
    merged with a /proc snapshot (see the module docs).

    ::

        with ProcessTracker() as tracker:          # events first, then the snapshot
            ...                                    # processes fork, exec, dlopen
            tracker.sync()                         # apply everything recorded so far
            print(tracker.resolve(pid, addr))      # foo+0x4 (/usr/lib/libfoo.so+0x1139)

    ``pages`` per CPU ring (a power of two); ``on_record`` sees every applied record in
    timestamp order (status-only ones included); ``keep_exited`` bounds how many exited
    processes are remembered (samples often arrive after their process died).
    """

    def __init__(
        self,
        *,
        pages: int = 64,
        namespaces: bool = True,
        on_record: Callable[[Record], Any] | None = None,
        keep_exited: int = 1024,
        scan: bool = True,
    ) -> None:
        self._init_state(on_record, keep_exited)
        self._poller = _ring.Poller()
        try:
            self._open(pages, namespaces)
            if scan:
                self._describe_existing()
        except BPFKitError as exc:
            self.close()
            raise exc.wrap("start process tracker")
        except BaseException:
            self.close()
            raise

    def _init_state(self, on_record: Callable[[Record], Any] | None, keep_exited: int) -> None:
        self.processes: dict[int, Process] = {}
        self.lost = 0
        self.on_record = on_record
        self.keep_exited = keep_exited
        self.symbolizer: Symbolizer = default_symbolizer()
        self.sideband_ioctl = False
        self.sideband_reason = ""
        self._decoder = Decoder(SAMPLE_TYPE, sample_id_all=True)
        self._rings: list[PerfRing] = []
        self._heap: list[tuple[int, int, int, Record]] = []
        self._seq = 0
        self._flush_upto = -1
        self._exited_order: list[int] = []

    @classmethod
    def offline(cls, on_record: Callable[[Record], Any] | None = None, keep_exited: int = 1024) -> ProcessTracker:
        """A tracker with no perf events: feed it records yourself (:meth:`feed`), e.g.
        sideband records saved earlier, or in tests."""
        self = cls.__new__(cls)
        self._init_state(on_record, keep_exited)
        self._poller = None  # type: ignore[assignment]
        return self

    def feed(self, records: Iterable[Record]) -> int:
        """Merge ``records`` (any order) with what is pending and apply them all by time."""
        for rec in records:
            self._push(rec)
        return self._apply_upto(float("inf"))

    def _open(self, pages: int, namespaces: bool) -> None:
        flags = TRACK_FLAGS | (PerfAttrFlag.NAMESPACES if namespaces else 0)
        watermark = max(PAGE_SIZE, pages * PAGE_SIZE // 4)
        for cpu in online_cpus():
            try:
                fd = _ring.open_sideband(cpu, SAMPLE_TYPE, flags, wakeup_watermark=watermark)
            except KernelError as exc:
                if exc.errno == 19:  # ENODEV: went offline
                    continue
                raise
            except NotSupportedError:
                if not namespaces:
                    raise
                # perf_event_attr.namespaces is 4.16: retry without it on older kernels
                return self._open(pages, False)
            try:
                ring = PerfRing(fd, cpu, pages)
            except BaseException:
                fd.close()
                raise
            self._rings.append(ring)
            self._poller.register(fd)

    def _describe_existing(self) -> None:
        first = self._rings[0].fd if self._rings else None
        ok, reason = _ring.probe_emit_sideband(first) if first is not None else (False, "no CPU")
        self.sideband_ioctl, self.sideband_reason = ok, reason
        if ok:  # pragma: no cover - no kernel has the RFC's ioctl
            self._emit_via_ioctl()
            return
        for pid in _pids():
            for rec in snapshot_records(pid):
                self._push(rec)

    def _emit_via_ioctl(self) -> None:  # pragma: no cover - see probe_emit_sideband
        ring = self._rings[0]
        if ring.fd is None:
            return
        keep = os.sched_getaffinity(0)
        os.sched_setaffinity(0, {ring.cpu})  # the ioctl writes to the event of this CPU
        try:
            flags = _ring.EMIT_FORK | _ring.EMIT_NAMESPACES | _ring.EMIT_COMM | _ring.EMIT_MMAP
            for pid in _pids():
                try:
                    _ring.emit_sideband(ring.fd, pid, flags)
                except KernelError:
                    continue  # exited meanwhile
        finally:
            os.sched_setaffinity(0, keep)

    # ------------------------------------------------------------------ reading
    def _push(self, rec: Record) -> None:
        t = rec.time if rec.time is not None else 0
        self._seq += 1
        # a snapshot's FORK opens it: first among records of the same timestamp
        first = 0 if isinstance(rec, Fork) and rec.misc & STATUS_ONLY else 1
        heapq.heappush(self._heap, (t, first, self._seq, rec))

    def _read_rings(self) -> tuple[int, int]:
        """One pass over every ring: (records read, newest timestamp among them)."""
        n = 0
        newest = -1
        decode = self._decoder.decode
        for ring in self._rings:
            for _, raw in ring.records():
                rec = decode(raw, ring.cpu)
                if isinstance(rec, Lost):
                    self.lost += rec.lost
                    continue
                n += 1
                t = rec.time or 0
                if t > newest:
                    newest = t
                self._push(rec)
        return n, newest

    def _apply_upto(self, limit: float) -> int:
        n = 0
        heap = self._heap
        while heap and heap[0][0] <= limit:
            rec = heapq.heappop(heap)[3]
            self._apply(rec)
            n += 1
        return n

    def update(self) -> int:
        """Read what the rings hold and apply the records that are safe to order (those up to
        the newest timestamp of the previous pass). Returns how many were applied."""
        self._check_open()
        got, newest = self._read_rings()
        if got == 0:
            limit: float = float("inf")  # quiet: everything read so far is complete
        else:
            limit = self._flush_upto
        applied = self._apply_upto(limit)
        if got:
            self._flush_upto = max(self._flush_upto, newest)
        return applied

    def sync(self, max_passes: int = 100) -> int:
        """Drain the rings until a pass finds nothing new, then apply everything."""
        self._check_open()
        applied = 0
        for _ in range(max_passes):
            got, newest = self._read_rings()
            if newest > self._flush_upto:
                self._flush_upto = newest
            if not got:
                break
        applied += self._apply_upto(float("inf"))
        return applied

    def poll(self, timeout: float | None = None) -> int:
        """Wait up to ``timeout`` s for the rings to fill past their watermark, then update.
        (Watermarks keep wakeups rare; call :meth:`sync` when you need everything now.)"""
        self._check_open()
        if self._poller is not None:
            self._poller.wait(timeout)
        return self.update()

    # ------------------------------------------------------------------- applying
    def _get(self, pid: int) -> Process:
        proc = self.processes.get(pid)
        if proc is None:
            proc = self.processes[pid] = Process(pid)
        return proc

    def _apply(self, rec: Record) -> None:
        t = rec.time or 0
        status = bool(rec.misc & STATUS_ONLY)
        if isinstance(rec, Fork):
            self._on_fork(rec, t, status)
        elif isinstance(rec, Comm):
            proc = self._get(rec.pid)
            proc.threads.add(rec.tid)
            if rec.exec:
                proc.maps = [m for m in proc.maps if m.time > t]
                proc.exe = ""
                proc._await_exe = True
                proc.note(t, "exec", rec.comm)
            if rec.tid == rec.pid or rec.exec:
                proc.comm = rec.comm
        elif isinstance(rec, Mmap):
            if rec.misc & MISC_MMAP_DATA:  # a data mapping (only with mmap_data)
                return
            proc = self._get(rec.pid)
            m = Mapping(rec.addr, rec.addr + rec.len, rec.pgoff, rec.filename, time=t)
            if isinstance(rec, Mmap2):
                m.maj, m.min, m.ino, m.prot = rec.maj, rec.min, rec.ino, rec.prot or PROT_EXEC
            proc.add_mapping(m)
            if proc._await_exe and rec.filename.startswith("/"):
                proc.exe = rec.filename
                proc._await_exe = False
            if not status:
                proc.note(t, "mmap", f"{rec.filename} {rec.addr:#x}-{rec.addr + rec.len:#x}")
        elif isinstance(rec, Exit):
            known = self.processes.get(rec.pid)
            if known is None:
                return
            known.threads.discard(rec.tid)
            if rec.tid == rec.pid:
                known.exited = t
                known.note(t, "exit")
                self._exited_order.append(rec.pid)
                self._forget_old()
        elif isinstance(rec, Namespaces):
            self._get(rec.pid).namespaces = rec.namespaces
        elif isinstance(rec, _Exe):
            self._get(rec.pid).exe = rec.path
        if self.on_record is not None and not isinstance(rec, _Exe):
            self.on_record(rec)

    def _on_fork(self, rec: Fork, t: int, status: bool) -> None:
        if status:  # a snapshot of this pid starts: what was known before it is replaced
            proc = Process(rec.pid, rec.ppid, from_snapshot=True)
            old = self.processes.get(rec.pid)
            if old is not None and old.exited is None:
                proc.maps = [m for m in old.maps if m.time > t]  # live changes after the snapshot
                proc.log = old.log
            proc.threads = {rec.pid}
            proc.note(t, "snapshot")
            self.processes[rec.pid] = proc
            return
        if rec.pid == rec.ppid:  # a new thread in an existing process
            self._get(rec.pid).threads.add(rec.tid)
            return
        parent = self.processes.get(rec.ppid)
        child = Process(rec.pid, rec.ppid)
        if parent is not None:
            child.comm, child.exe = parent.comm, parent.exe
            child.maps = [dataclasses.replace(m) for m in parent.maps]
            child.namespaces = parent.namespaces
        child.threads = {rec.tid}
        child.note(t, "fork", f"from {rec.ppid}")
        self.processes[rec.pid] = child

    def _forget_old(self) -> None:
        while len(self._exited_order) > self.keep_exited:
            pid = self._exited_order.pop(0)
            proc = self.processes.get(pid)
            if proc is not None and proc.exited is not None:
                del self.processes[pid]

    # ------------------------------------------------------------------- queries
    def process(self, pid: int) -> Process | None:
        """What is known about ``pid`` (after the records applied so far)."""
        return self.processes.get(pid)

    def resolve(self, pid: int, addr: int) -> Resolution | None:
        """(pid, address) -> file, file offset and symbol; None when no mapping holds it.

        Unknown pids trigger a :meth:`sync` first (the process may be newer than the
        records applied so far)."""
        proc = self.processes.get(pid)
        if proc is None or proc.find(addr) is None:
            self.sync()
            proc = self.processes.get(pid)
            if proc is None:
                return None
        m = proc.find(addr)
        if m is None:
            return None
        offset = m.file_offset(addr)
        path = m.path
        if m.path.startswith("/") and proc.alive and os.path.exists(f"/proc/{pid}/root{m.path}"):
            path = f"/proc/{pid}/root{m.path}"  # the process's own mount namespace
        syms = self.symbolizer.file(path, m.path) if m.path.startswith("/") else None
        found = syms.lookup(offset) if syms is not None else None
        name, sym_off = found if found else (None, 0)
        return Resolution(pid, addr, m.path, offset, m, name, sym_off)

    # ----------------------------------------------------------------- lifecycle
    def fileno(self) -> int:
        if self._poller is None:
            raise UsageError("an offline process tracker has no events to wait for")
        return self._poller.fileno()

    def _check_open(self) -> None:
        if self._poller is not None and self._poller.closed:
            raise UsageError("process tracker is closed")

    def close(self) -> None:
        for ring in self._rings:
            ring.close()
        self._rings.clear()
        if self._poller is not None:
            self._poller.close()

    @property
    def closed(self) -> bool:
        return self._poller is not None and self._poller.closed



PAGE_SIZE = _ring.PAGE_SIZE
