# SPDX-License-Identifier: Apache-2.0
"""Perf event arrays: reading what ``bpf_perf_event_output`` sends (4.4).

How it fits together: for every online CPU the reader opens a ``PERF_COUNT_SW_BPF_OUTPUT``
event bound to that CPU, mmaps its ring (1 control page + 2^n data pages), and stores the
event's fd in the BPF_MAP_TYPE_PERF_EVENT_ARRAY at the CPU's index; a program calling
``bpf_perf_event_output(ctx, &map, BPF_F_CURRENT_CPU, data, size)`` then writes a
PERF_RECORD_SAMPLE whose PERF_SAMPLE_RAW payload is ``data`` (the kernel pads it so the record
stays 8-byte aligned: a 32-byte payload arrives as 36 raw bytes in a 48-byte record).

Reading a ring: load ``data_head`` (where the kernel will write next), walk records from
``data_tail`` up to it, then store ``data_tail`` to give the space back; see
:mod:`bpfkit._kernel.ring` for why that order is enough on x86-64 and what arm64 needs.
Unlike BPF ring buffers the data pages are mapped once, so a record may wrap around the end:
only such a record is copied (into bytes) to hand it out in one piece.

When a ring is full the kernel drops the sample, ``bpf_perf_event_output`` returns -ENOSPC,
and the next record that fits is a PERF_RECORD_LOST carrying the count. Lost counts go to the
``lost_callback``; without one they are added to :attr:`PerfBuffer.lost` and a
:class:`LostRecordsWarning` is issued, so losses are never silent.

Wakeups (epoll on the per-CPU fds): after every ``wakeup_events`` samples (1 by default, as
libbpf and bcc do: one interrupt per record, which costs the producer several microseconds),
or once ``wakeup_watermark`` bytes are waiting. With batching wakeups the last few records
of a burst wake no one: poll with a timeout.

Overwrite mode (``overwrite=True``): the rings are written backwards (``write_backward``,
4.10) and mapped read-only, so the kernel never stops for a slow reader but overwrites the
oldest records: a flight recorder. :meth:`PerfBuffer.snapshot` pauses the rings
(PERF_EVENT_IOC_PAUSE_OUTPUT, 4.7), copies the newest records out and resumes.

CPUs: rings exist for the CPUs online when the reader starts (``/sys/devices/system/cpu/
online``, which may be sparse: ``0-3,8-11``), indexed by CPU number, not position.
"""

from __future__ import annotations

import errno
import struct
import warnings
from collections.abc import Callable, Iterable, Iterator

from .._kernel import perf as _kperf
from .._kernel import ring as _ring
from .._kernel.consts import MapType, PerfRecord
from .._kernel.cpus import online_cpus
from .._kernel.fd import FD
from ..errors import BPFKitError, KernelError, ParseError, UsageError
from ._common import RUN_MAX, RUN_MIN, PolledReader, RunChecker, as_callable, deliver_batch, deliver_run, published, release, warn_lost
from .records import HAVE_NUMPY, RecordFormat, collect_batches, decoding, numpy_module, record_decoder, require_format

# typing (through _protocols too) and bpfkit.btf.records for the type checker only: a reader's import stays cheap (issue 38).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from .._protocols import UpdatableMapLike
    from ..btf.records import CharArrays, RecordDecoder

__all__ = ["PerfBuffer", "PerfRing"]

PAGE = _ring.PAGE_SIZE
SAMPLE = int(PerfRecord.SAMPLE)
LOST = int(PerfRecord.LOST)
_HEAD = _ring.DATA_HEAD // 8
_TAIL = _ring.DATA_TAIL // 8
_RAW_AT = 12  # header (8) + u32 raw size
BATCH_MAX = 1 << 16
_U64 = struct.Struct("<Q")


class PerfRing:
    """One mmapped perf event ring (any event): the record walker shared by PerfBuffer and
    the process tracker. ``records()`` yields whole records (header included)."""

    def __init__(self, fd: FD, cpu: int, pages: int, overwrite: bool = False) -> None:
        self.fd: FD | None = fd
        self._map: _ring.RingMapping | None = _ring.map_perf_ring(fd, pages, writable=not overwrite)
        view = self._map.view
        ctl = view[:PAGE].cast("Q")
        # data_offset/data_size exist since 4.1; before, data starts at the next page.
        offset = ctl[_ring.DATA_OFFSET // 8] or PAGE
        size = ctl[_ring.DATA_SIZE // 8] or pages * PAGE
        self._setup(ctl, view[offset : offset + size], cpu, overwrite)

    def _setup(self, ctl: memoryview[int], data: memoryview, cpu: int, overwrite: bool) -> None:
        self.cpu = cpu
        self.overwrite = overwrite
        self.ctl = ctl
        self.size = len(data)
        self.mask = self.size - 1
        self.data = data
        self.words = data.cast("I")
        self.runs = RunChecker(data)
        self.window = RUN_MIN
        self.lost = 0

    @classmethod
    def from_memory(cls, ctl: memoryview, data: memoryview, cpu: int = 0, overwrite: bool = False) -> PerfRing:
        """A ring over memory that is not a kernel mapping (a control page viewed as u64 and
        a power-of-two data area): for tests and for rings saved to files."""
        self = cls.__new__(cls)
        self.fd = None
        self._map = None
        self._setup(ctl, data, cpu, overwrite)
        return self

    # --------------------------------------------------------------------- helpers
    def available(self) -> int:
        return self.ctl[_HEAD] - self.ctl[_TAIL]

    def _whole(self, off: int, size: int) -> Any:
        """The record at ``off``: a view, or a bytes copy when it wraps around the end."""
        end = off + size
        if end <= self.size:
            return self.data[off:end]
        return bytes(self.data[off:]) + bytes(self.data[: end - self.size])

    def _run(self, off: int, k: int, stride: int, raw: int, cap: int, most: int) -> int:
        window = min(k, self.window, cap)
        m = self.runs.count(off, window, stride, SAMPLE)
        if m > 1:
            m = self.runs.count(off + 8, m, stride, raw)
        self.window = min(self.window * 4, most) if m == window else RUN_MIN
        return m

    # ------------------------------------------------------------ BPF output rings
    def consume(self, cb: Callable[[int, memoryview], Any], lost_cb: Callable[[int, int], Any], limit: int) -> int:
        """Call ``cb(cpu, raw)`` per sample and ``lost_cb(cpu, count)`` per LOST record."""
        return self._consume(cb, lost_cb, limit, None, False, None)

    def consume_decoded(self, cb: Callable[..., Any], lost_cb: Callable[[int, int], Any], fmt: RecordFormat,
                        limit: int) -> int:
        """Like :meth:`consume`, calling ``cb(*fields)`` with each payload decoded by ``fmt``."""
        return self._consume(cb, lost_cb, limit, fmt, False, None)

    def consume_batch(self, cb: Callable[[Any], Any], lost_cb: Callable[[int, int], Any], fmt: RecordFormat, limit: int,
                      arrays: bool) -> int:
        """Deliver runs of same-sized samples decoded by ``fmt``, one ``cb(batch)`` per run."""
        np = numpy_module() if arrays else None
        if arrays and np is None:
            raise UsageError("numpy is not installed: install the bpfkit[numpy] extra for arrays")
        return self._consume(cb, lost_cb, limit, fmt, True, np)

    def _consume(self, cb: Callable[..., Any], lost_cb: Callable[[int, int], Any], limit: int,
                 fmt: RecordFormat | None, batches: bool, np: Any) -> int:
        """The one consuming loop. Without ``fmt``: ``cb(cpu, raw)`` per sample; with it,
        ``cb(*fields)`` per sample, or (``batches``) ``cb(batch)`` per run of same-sized
        samples, ``batch`` a numpy array viewing the ring (``np`` given) or a list of tuples.
        LOST records go to ``lost_cb(cpu, count)``; other types carry nothing for a BPF output
        event and are skipped. data_tail is stored after every delivery."""
        ctl, words, data, mask, size, cpu = self.ctl, self.words, self.data, self.mask, self.size, self.cpu
        single = fmt.record_struct() if fmt is not None and not batches else None
        need = fmt.size if fmt is not None else 0  # 0: a view takes any length
        strides: dict[int, struct.Struct] = {}
        tail = ctl[_TAIL]
        n = 0
        # published() inline: a call a pass is ~10% of a consume call that finds one record
        while (head := ctl[_HEAD]) > tail:
            if _ring.NEEDS_FENCE:
                _ring.fence()
            while tail < head:
                off = tail & mask
                w = off >> 2
                rtype = words[w]
                rsize = words[w + 1] >> 16
                if rsize == 0:
                    raise ParseError(f"perf ring of CPU {cpu}: zero-sized record at {tail}")
                if rtype == SAMPLE:
                    if off + rsize <= size:
                        buf, base = data, off
                        raw = words[w + 2]
                    else:  # wraps around the end: a copy
                        buf, base = memoryview(self._whole(off, rsize)), 0
                        (raw,) = struct.unpack_from("<I", buf, 8)
                    if raw < need:
                        tail += rsize
                        ctl[_TAIL] = tail
                        raise ParseError(f"perf sample of {raw} bytes on CPU {cpu} is shorter than the {need}-byte format")
                    if batches:
                        assert fmt is not None
                        m = 1
                        if buf is data:
                            k = min(head - tail, size - off) // rsize
                            if limit >= 0:
                                k = min(k, limit - n)
                            if k > 1:
                                m = self._run(off, k, rsize, raw, k, BATCH_MAX)
                        tail = deliver_batch(cb, np, fmt, buf, base, m, rsize, _RAW_AT, ctl, _TAIL, tail)
                        n += m
                        if n == limit:
                            return n
                        continue
                    # a run needs RUN_MIN records waiting (checked without a call: this is the
                    # per-record path of a trickle, where min() alone is a fifth of the cost)
                    if buf is data and head - tail >= RUN_MIN * rsize:
                        k = (head - tail if head - tail < size - off else size - off) // rsize
                        if k >= RUN_MIN:
                            left = limit - n if limit >= 0 else RUN_MAX
                            m = self._run(off, k, rsize, raw, left, RUN_MAX)
                            if m > 1:
                                tail = deliver_run(cb, cpu, fmt, strides, data, off, m, rsize, _RAW_AT, raw, ctl, _TAIL, tail)
                                n += m
                                if n == limit:
                                    return n
                                continue
                    tail += rsize
                    try:
                        if single is None:
                            cb(cpu, buf[base + _RAW_AT : base + _RAW_AT + raw])
                        else:
                            cb(*single.unpack_from(buf, base + _RAW_AT))
                    finally:
                        ctl[_TAIL] = tail
                    n += 1
                    if n == limit:
                        return n
                    continue
                if rtype == LOST:
                    (count,) = _U64.unpack_from(self._whole(off, rsize), 16)
                    tail += rsize
                    ctl[_TAIL] = tail
                    self.lost += count
                    lost_cb(cpu, count)
                    continue
                tail += rsize  # THROTTLE etc. carry nothing for a BPF output event
                ctl[_TAIL] = tail
        return n

    def samples(self, lost_cb: Callable[[int, int], Any]) -> Iterator[tuple[int, Any]]:
        """Yield ``(cpu, raw)`` per sample; each is consumed when the next is requested."""
        for rtype, rec in self.records():
            if rtype == SAMPLE:
                (raw,) = struct.unpack_from("<I", rec, 8)
                yield self.cpu, rec[_RAW_AT : _RAW_AT + raw]
            elif rtype == LOST:
                (count,) = _U64.unpack_from(rec, 16)
                self.lost += count
                lost_cb(self.cpu, count)

    # ------------------------------------------------------------ any perf ring
    def records(self) -> Iterator[tuple[int, Any]]:
        """Yield ``(type, record)`` for every record (header included) from the tail up to
        the head; a record is consumed when the next one is requested (or on close)."""
        if self.overwrite:
            raise UsageError("an overwritable ring is read with snapshot(), not consumed")
        ctl, words, mask = self.ctl, self.words, self.mask
        tail = ctl[_TAIL]
        while (head := published(ctl, _HEAD, tail)) > tail:
            while tail < head:
                off = tail & mask
                w = off >> 2
                rsize = words[w + 1] >> 16
                if rsize == 0:
                    raise ParseError(f"perf ring of CPU {self.cpu}: zero-sized record at {tail}")
                try:
                    yield words[w], self._whole(off, rsize)
                finally:
                    tail += rsize
                    ctl[_TAIL] = tail

    def read_backward(self) -> list[bytes]:
        """Copies of the records of an overwritable (write_backward) ring, oldest first.

        The kernel writes such a ring from the end towards the start: ``data_head`` counts
        down, the newest record starts at the head and older ones follow at higher positions,
        up to one ring size away or to the first never-written (zero) header. The ring must be
        paused (or quiet) while this runs."""
        head = self.ctl[_HEAD]
        if _ring.NEEDS_FENCE:
            _ring.fence()
        out: list[bytes] = []
        pos = head
        limit = head + self.size
        words, mask = self.words, self.mask
        while pos < limit:
            off = pos & mask
            rsize = words[(off >> 2) + 1] >> 16
            if rsize == 0 or pos + rsize > limit:
                break
            out.append(bytes(self._whole(off, rsize)))
            pos += rsize
        out.reverse()
        return out

    def close(self) -> None:
        if self.runs is not None:
            self.runs.release()
        release(self.ctl, self.words, self.data)
        self.runs = None  # type: ignore[assignment]
        if self._map is not None:
            self._map.close()
        if self.fd is not None:
            self.fd.close()


class PerfBuffer(PolledReader[tuple[int, memoryview]]):
    """Reader of a BPF_MAP_TYPE_PERF_EVENT_ARRAY: one ring per online CPU.

    ::

        with PerfBuffer(coll.maps["events"], on_sample, on_lost, pages=64) as pb:
            while running:
                pb.poll(timeout=0.1)            # on_sample(cpu, view), on_lost(cpu, count)
        for cpu, rec in pb.read(timeout=1.0):   # or iterate
            ...
        arr = pb.read_batch("<QQIIQ")          # or drain all at once, decoded

    ``pages`` per CPU must be a power of two. ``wakeup_events``/``wakeup_watermark`` choose
    when the kernel wakes the reader (see the module docs). ``cpus`` restricts the rings to
    some CPUs (the program's outputs on other CPUs then fail with ENOENT). ``record``
    (``"struct event"``, from the object's BTF or DWARF, or a RecordDecoder): ``on_sample(cpu,
    record)`` gets each record decoded, cut-short ones too (``char_arrays``: bpfkit.btf.records).
    """

    _WHAT = "perf buffer"

    def __init__(
        self,
        pmap: UpdatableMapLike,
        callback: Callable[[int, Any], Any] | None = None,
        lost_callback: Callable[[int, int], Any] | None = None,
        *,
        pages: int = 64,
        wakeup_events: int = 1,
        wakeup_watermark: int = 0,
        overwrite: bool = False,
        cpus: Iterable[int] | None = None,
        record: str | RecordDecoder | None = None,
        char_arrays: CharArrays | None = None,
    ) -> None:
        if getattr(pmap, "type", None) != MapType.PERF_EVENT_ARRAY:
            raise UsageError(f"map {getattr(pmap, 'name', pmap)!r} is not a perf_event_array")
        if record is not None:  # callback(cpu, Record): bpfkit.btf.records
            callback = decoding(callback, record_decoder(pmap, record, char_arrays), True)
        _ring.check_pages(pages)
        if wakeup_watermark and wakeup_watermark >= pages * PAGE:
            raise UsageError(f"wakeup_watermark {wakeup_watermark} must be smaller than the ring ({pages * PAGE} bytes)")
        self.map = pmap
        self.callback = as_callable(callback, "perf buffer callback")
        self.lost_callback = as_callable(lost_callback, "perf buffer lost callback")
        self.pages = pages
        self.overwrite = overwrite
        self.lost = 0
        self.lost_per_cpu: dict[int, int] = {}
        self._rings: dict[int, PerfRing] = {}
        self._by_fd: dict[int, PerfRing] = {}
        self._poller = _ring.Poller()
        self.skipped_cpus: list[int] = []
        try:
            self._open(cpus, wakeup_events, wakeup_watermark)
        except BPFKitError as exc:
            self.close()
            raise exc.wrap(f"open perf buffer on map {pmap.name!r}")
        except BaseException:
            self.close()
            raise

    def _open(self, cpus: Iterable[int] | None, wakeup_events: int, wakeup_watermark: int) -> None:
        online = online_cpus()
        wanted = online if cpus is None else sorted(set(cpus))
        slots = int(self.map.max_entries)
        for cpu in wanted:
            if cpu not in online:
                self.skipped_cpus.append(cpu)
                continue
            if cpu >= slots:
                # The map was sized for fewer CPUs (libbpf sizes it to the possible CPUs):
                # outputs on this CPU fail with E2BIG in the program.
                warnings.warn(
                    f"perf buffer {self.map.name!r}: CPU {cpu} has no slot in a {slots}-entry map; "
                    "its records are lost", RuntimeWarning, stacklevel=3,
                )
                self.skipped_cpus.append(cpu)
                continue
            try:
                fd = _ring.open_bpf_output(cpu, wakeup_events, wakeup_watermark, self.overwrite)
            except KernelError as exc:
                if exc.errno == errno.ENODEV:  # went offline since we read the list
                    self.skipped_cpus.append(cpu)
                    continue
                raise
            try:
                ring = PerfRing(fd, cpu, self.pages, self.overwrite)
            except BaseException:
                fd.close()
                raise
            self._rings[cpu] = ring
            self._by_fd[fd.raw] = ring
            self.map.update(cpu, fd.raw)
            self._poller.register(fd, _ring.EPOLLIN)
        if not self._rings:
            raise UsageError("no online CPU to read from")

    @property
    def cpus(self) -> list[int]:
        """The CPUs that have a ring, ascending."""
        return sorted(self._rings)

    # -------------------------------------------------------------------- reading
    def _sources(self) -> Iterator[Iterator[tuple[int, memoryview]]]:
        return (ring.samples(self._on_lost) for ring in list(self._rings.values()))

    def _on_lost(self, cpu: int, count: int) -> None:
        self.lost += count
        self.lost_per_cpu[cpu] = self.lost_per_cpu.get(cpu, 0) + count
        if self.lost_callback is not None:
            self.lost_callback(cpu, count)
        else:
            warn_lost(f"perf buffer {self.map.name!r} CPU {cpu}", count)

    def _cb(self, callback: Any) -> Any:
        cb = callback or self.callback
        if cb is None:
            raise UsageError(f"perf buffer {self.map.name!r}: no callback given")
        return cb

    def _all_rings(self) -> Iterable[PerfRing]:
        return self._rings.values()

    def _consume_rings(self, rings: Iterable[PerfRing], callback: Any, limit: int, fmt: RecordFormat | None) -> int:
        cb = self._cb(callback)
        n = 0
        for ring in rings:
            left = limit - n if limit >= 0 else -1
            if left == 0:
                break
            if fmt is None:
                n += ring.consume(cb, self._on_lost, left)
            else:
                n += ring.consume_decoded(cb, self._on_lost, fmt, left)
        return n

    def consume_batch(self, callback: Callable[[Any], Any], format: Any, limit: int | None = None, arrays: bool | None = None) -> int:
        """Zero-copy batches: ``callback(batch)`` once per run of same-sized samples (usually
        once per CPU per call), payloads decoded by ``format``: a numpy structured array
        viewing the ring when numpy is installed (valid during the call), else a list of
        tuples. Returns the number of samples."""
        self._check_readable()
        fmt = require_format(format, "PerfBuffer.consume_batch")
        use_arrays = HAVE_NUMPY if arrays is None else arrays
        lim = -1 if limit is None else limit
        n = 0
        for ring in self._rings.values():
            left = lim - n if lim >= 0 else -1
            if left == 0:
                break
            n += ring.consume_batch(callback, self._on_lost, fmt, left, use_arrays)
        return n

    def read_batch(self, format: Any = None, limit: int | None = None) -> Any:
        """Drain everything available now, as owned data: a numpy structured array for
        ``format`` (list of tuples without numpy), or a list of ``(cpu, bytes)``."""
        self._check_readable()
        if format is None:
            out: list[tuple[int, bytes]] = []
            self.consume(lambda cpu, rec: out.append((cpu, bytes(rec))), limit)
            return out
        return collect_batches(self.consume_batch, require_format(format, "PerfBuffer.read_batch"), limit)

    # ----------------------------------------------------------- overwrite mode
    def pause(self) -> None:
        """Stop the kernel writing to every ring (PERF_EVENT_IOC_PAUSE_OUTPUT, 4.7); outputs
        meanwhile fail (and are counted as lost by the kernel)."""
        for ring in self._rings.values():
            if ring.fd is not None:  # None once closed: nothing left to pause
                _kperf.pause_output(ring.fd, True)

    def resume(self) -> None:
        for ring in self._rings.values():
            if ring.fd is not None:
                _kperf.pause_output(ring.fd, False)

    def snapshot(self) -> list[tuple[int, bytes]]:
        """Overwrite mode: the newest records of every CPU as ``(cpu, raw payload)``, oldest
        first per CPU. Pauses the rings while copying, then resumes them."""
        if not self.overwrite:
            raise UsageError("snapshot() needs a perf buffer opened with overwrite=True")
        self.pause()
        out: list[tuple[int, bytes]] = []
        try:
            for cpu, ring in sorted(self._rings.items()):
                for rec in ring.read_backward():
                    rtype = struct.unpack_from("<I", rec, 0)[0]
                    if rtype == SAMPLE:
                        (raw,) = struct.unpack_from("<I", rec, 8)
                        out.append((cpu, rec[_RAW_AT : _RAW_AT + raw]))
        finally:
            self.resume()
        return out

    # ----------------------------------------------------------------- lifecycle
    def available(self) -> int:
        """Bytes waiting over all rings (forward mode)."""
        return sum(r.available() for r in self._rings.values()) if not self.overwrite else 0

    def _check_readable(self) -> None:
        super()._check_readable()
        if self.overwrite:
            raise UsageError("an overwritable perf buffer is read with snapshot()")

    def close(self) -> None:
        """Remove the rings from the map, unmap them and close their events."""
        for cpu, ring in self._rings.items():
            try:
                if not self.map.closed:
                    self.map.delete(cpu)
            except BPFKitError:
                pass
            ring.close()
        self._rings.clear()
        self._by_fd.clear()
        self._poller.close()



    def __repr__(self) -> str:
        return f"PerfBuffer({self.map.name!r}, cpus={self.cpus}, pages={self.pages})"
