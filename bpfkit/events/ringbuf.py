# SPDX-License-Identifier: Apache-2.0
"""BPF ring buffers: reading BPF_MAP_TYPE_RINGBUF (5.8), writing BPF_MAP_TYPE_USER_RINGBUF (6.1).

A ring buffer map is one buffer for all CPUs. Each record starts with an 8-byte header
``{u32 len; u32 pg_off}`` and is padded to 8 bytes. ``bpf_ringbuf_reserve`` advances
``producer_pos`` and writes ``len | BUSY``; ``bpf_ringbuf_submit``/``discard`` then clear BUSY
(setting DISCARD for a discard). The reader walks from ``consumer_pos``, stops at the first
BUSY record (later ones may be complete, but the position must advance in order), skips
DISCARD records and stores ``consumer_pos`` to free the space. The kernel maps the data pages
twice back to back, so a record that wraps is contiguous: no copying, ever.

Wakeups: a producer wakes the reader (epoll on the map fd) only when the reader had caught up
when the record was committed (adaptive wakeup), or always with BPF_RB_FORCE_WAKEUP, never
with BPF_RB_NO_WAKEUP (then the reader must poll with a timeout or spin).

The fast path: when many records of one length are waiting (the usual fixed-size event), their
headers are validated together (:class:`~bpfkit.events._common.RunChecker`) and the records
are delivered without parsing each header in Python. A record is a ``memoryview`` into the
ring, valid while the callback runs (or until the iterator advances); ``bytes(rec)`` keeps it.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterable, Iterator

from .._closing import ClosesOnExit
from .._kernel import ring as _ring
from .._kernel.consts import BPF_RINGBUF_BUSY_BIT, BPF_RINGBUF_DISCARD_BIT, BPF_RINGBUF_HDR_SZ, MapType
from ..errors import BPFKitError, ParseError, RingBufferFullError, UsageError
from ._common import RUN_MAX, RUN_MIN, PolledReader, RunChecker, as_callable, deliver_batch, deliver_run, published, release
from .records import HAVE_NUMPY, RecordFormat, collect_batches, decoding, numpy_module, record_decoder, require_format

# typing (through _protocols too) and bpfkit.btf.records for the type checker only: a reader's import stays cheap (issue 38).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from .._protocols import MapLike
    from ..btf.records import CharArrays, RecordDecoder

__all__ = ["RingBuffer", "UserRingBuffer", "Reservation", "RingBufferFullError"]

BUSY = BPF_RINGBUF_BUSY_BIT
DISCARD = BPF_RINGBUF_DISCARD_BIT
LEN_MASK = DISCARD - 1
HDR = BPF_RINGBUF_HDR_SZ
PAGE = _ring.PAGE_SIZE
BATCH_MAX = 1 << 16  # records per zero-copy batch at most (bounds the time space stays held)


def _check_map(rmap: MapLike, want: MapType) -> int:
    mtype = getattr(rmap, "type", None)
    if mtype != want:
        raise UsageError(f"map {getattr(rmap, 'name', rmap)!r} is {getattr(mtype, 'kernel_name', mtype)}, not {want.kernel_name}")
    size = int(rmap.max_entries)
    if size <= 0 or size & (size - 1) or size % PAGE:
        raise UsageError(f"map {rmap.name!r}: ring size {size} is not a power-of-two multiple of the page size")
    return size


class _Ring:
    """One mmapped RINGBUF map: the per-record and batch consumers."""

    def __init__(self, rmap: MapLike, callback: Callable[[memoryview], Any] | None) -> None:
        size = _check_map(rmap, MapType.RINGBUF)
        self._cons: _ring.RingMapping | None
        self._prod: _ring.RingMapping | None
        self._cons, self._prod = _ring.map_ringbuf(rmap.fd, size)
        self._setup(
            rmap,
            callback,
            self._cons.view[:8].cast("Q"),  # consumer_pos (we write it)
            self._prod.view[:8].cast("Q"),  # producer_pos (read-only)
            self._prod.view[PAGE : PAGE + 2 * size],  # the data pages, twice
        )
        self.fd = rmap.fd.raw

    def _setup(self, rmap: MapLike, callback: Any, cq: memoryview, pq: memoryview, data: memoryview) -> None:
        self.map = rmap
        self.size = len(data) // 2
        self.mask = self.size - 1
        self.callback = as_callable(callback, "ring buffer callback")
        self.cq = cq
        self.pq = pq
        self.data = data
        self.words = data.cast("I")
        self.runs = RunChecker(data)
        self.window = RUN_MIN

    @classmethod
    def from_memory(cls, name: str, cq: memoryview, pq: memoryview, data: memoryview, callback: Any = None) -> _Ring:
        """A ring over plain memory laid out like the kernel's (``data`` holds the data area
        twice, as the double mapping shows it): for tests."""
        self = cls.__new__(cls)
        self._cons = self._prod = None
        self.fd = -1
        self._setup(type("_Named", (), {"name": name})(), callback, cq, pq, data)
        return self

    # ------------------------------------------------------------------ helpers
    def available(self) -> int:
        """Bytes published but not consumed yet (records, headers and padding)."""
        return self.pq[0] - self.cq[0]

    def _run(self, off: int, k: int, stride: int, hdr: int, cap: int, most: int = RUN_MAX) -> int:
        """How many records from ``off`` (of ``k`` waiting) have header ``hdr``: galloping."""
        window = min(k, self.window, cap)
        m = self.runs.count(off, window, stride, hdr)
        self.window = min(self.window * 4, most) if m == window else RUN_MIN
        return m

    # --------------------------------------------------------------- consuming
    def consume(self, cb: Callable[[memoryview], Any], limit: int) -> int:
        """Call ``cb(view)`` for every committed record, at most ``limit`` (< 0: no limit)."""
        return self._consume(cb, limit, None, False, None)

    def consume_decoded(self, cb: Callable[..., Any], fmt: RecordFormat, limit: int) -> int:
        """Like :meth:`consume`, calling ``cb(*fields)`` with each record decoded by ``fmt``."""
        return self._consume(cb, limit, fmt, False, None)

    def consume_batch(self, cb: Callable[[Any], Any], fmt: RecordFormat, limit: int, arrays: bool) -> int:
        """Deliver runs of records decoded by ``fmt`` in one call each: ``cb(array)`` with a
        numpy structured array viewing the ring (``arrays``), else ``cb(list_of_tuples)``."""
        np = numpy_module() if arrays else None
        if arrays and np is None:
            raise UsageError("numpy is not installed: install the bpfkit[numpy] extra for arrays")
        return self._consume(cb, limit, fmt, True, np)

    def _consume(self, cb: Callable[..., Any], limit: int, fmt: RecordFormat | None, batches: bool, np: Any) -> int:
        """The one consuming loop. Without ``fmt``: ``cb(view)`` per record; with it,
        ``cb(*fields)`` per record, or (``batches``) ``cb(batch)`` per run of same-sized
        records, ``batch`` a numpy array viewing the ring (``np`` given) or a list of tuples.
        Runs of same-sized records are validated at once and delivered without per-record
        header work; consumer_pos is stored after every delivery, so a callback's exception
        leaves the records before it (and its own) consumed."""
        cq, pq, words, data, mask = self.cq, self.pq, self.words, self.data, self.mask
        single = fmt.record_struct() if fmt is not None and not batches else None
        size = fmt.size if fmt is not None else 0  # 0: a view takes any length
        strides: dict[int, struct.Struct] = {}
        cons = cq[0]
        n = 0
        # published() inline: a call a pass is ~10% of a consume call that finds one record
        while (prod := pq[0]) > cons:
            if _ring.NEEDS_FENCE:
                _ring.fence()
            while cons < prod:
                off = cons & mask
                hdr = words[off >> 2]
                if hdr & BUSY:
                    cq[0] = cons
                    return n
                ln = hdr & LEN_MASK
                stride = (ln + 15) & ~7
                if hdr & DISCARD:
                    cons += stride
                    cq[0] = cons
                    continue
                if ln < size:
                    cons += stride
                    cq[0] = cons
                    raise ParseError(f"ring buffer {self.map.name!r}: record of {ln} bytes is shorter than the {size}-byte format")
                k = (prod - cons) // stride
                if batches:
                    assert fmt is not None
                    if limit >= 0:
                        k = min(k, limit - n)
                    m = self._run(off, k, stride, hdr, k, BATCH_MAX) if k > 1 else 1
                    cons = deliver_batch(cb, np, fmt, data, off, m, stride, HDR, cq, 0, cons)
                    n += m
                    if n == limit:
                        return n
                    continue
                if k >= RUN_MIN:
                    left = limit - n if limit >= 0 else RUN_MAX
                    m = self._run(off, k, stride, hdr, left)
                    if m > 1:
                        cons = deliver_run(cb, None, fmt, strides, data, off, m, stride, HDR, ln, cq, 0, cons)
                        n += m
                        if n == limit:
                            return n
                        continue
                cons += stride
                try:
                    if single is None:
                        cb(data[off + HDR : off + HDR + ln])
                    else:
                        cb(*single.unpack_from(data, off + HDR))
                finally:
                    cq[0] = cons
                n += 1
                if n == limit:
                    return n
        return n

    def iterate(self) -> Iterator[memoryview]:
        """Yield committed records; each is consumed once the caller asks for the next."""
        cq, pq, words, data, mask = self.cq, self.pq, self.words, self.data, self.mask
        cons = cq[0]
        while (prod := published(pq, 0, cons)) > cons:
            while cons < prod:
                off = cons & mask
                hdr = words[off >> 2]
                if hdr & BUSY:
                    return
                ln = hdr & LEN_MASK
                nxt = cons + ((ln + 15) & ~7)
                if not hdr & DISCARD:
                    try:
                        yield data[off + HDR : off + HDR + ln]
                    finally:
                        cq[0] = cons = nxt
                else:
                    cq[0] = cons = nxt

    def close(self) -> None:
        if self.runs is not None:
            self.runs.release()
        release(self.cq, self.pq, self.words, self.data)
        self.runs = None  # type: ignore[assignment]
        if self._cons is not None:
            self._cons.close()
        if self._prod is not None:
            self._prod.close()


class RingBuffer(PolledReader[memoryview]):
    """Reader of one or more BPF_MAP_TYPE_RINGBUF maps, all waited for in one epoll set.

    ::

        with RingBuffer(coll.maps["events"], on_event) as rb:
            rb.add(coll.maps["other"], on_other)      # several rings, one poll
            while running:
                rb.poll(timeout=0.1)                  # calls on_event(view) per record
        for rec in rb.read(timeout=1.0): ...          # or iterate (stops after 1 s idle)
        arr = rb.read_batch("<QQIIQ")                 # or drain all at once, decoded

    Callbacks get a ``memoryview`` into the ring, valid only during the call (copy with
    ``bytes(rec)``), or with ``record="struct event"`` the record decoded (see :meth:`add`).
    An exception from a callback propagates; that record counts as consumed.
    """

    _WHAT = "ring buffer reader"

    def __init__(self, rmap: MapLike | None = None, callback: Callable[[Any], Any] | None = None, *,
                 record: str | RecordDecoder | None = None, char_arrays: CharArrays | None = None) -> None:
        self._rings: list[_Ring] = []
        self._by_fd: dict[int, _Ring] = {}
        self._poller = _ring.Poller()
        if rmap is not None:
            try:
                self.add(rmap, callback, record=record, char_arrays=char_arrays)
            except BaseException:
                self.close()
                raise

    def add(self, rmap: MapLike, callback: Callable[[Any], Any] | None = None, *,
            record: str | RecordDecoder | None = None, char_arrays: CharArrays | None = None) -> None:
        """Also read ``rmap`` (a RINGBUF Map), calling ``callback`` for its records. ``record``
        (``"struct event"``, found in the object's BTF or DWARF, or a RecordDecoder): call it
        with each record decoded (a Record; cut-short records and ``char_arrays``:
        bpfkit.btf.records)."""
        if record is not None:
            callback = decoding(callback, record_decoder(rmap, record, char_arrays), False)
        try:
            ring = _Ring(rmap, callback)
        except BPFKitError as exc:
            raise exc.wrap(f"open ring buffer {getattr(rmap, 'name', rmap)!r}")
        try:
            self._poller.register(ring.fd, _ring.EPOLLIN)
        except BaseException:
            ring.close()
            raise
        self._rings.append(ring)
        self._by_fd[ring.fd] = ring

    # -------------------------------------------------------------------- reading
    def _sources(self) -> Iterator[Iterator[memoryview]]:
        return (ring.iterate() for ring in self._rings)

    def _cb(self, ring: _Ring, callback: Any) -> Any:
        cb = callback or ring.callback
        if cb is None:
            raise UsageError(f"ring buffer {ring.map.name!r}: no callback given")
        return cb

    def _all_rings(self) -> list[_Ring]:
        return self._rings

    def _consume_rings(self, rings: Iterable[_Ring], callback: Any, limit: int, fmt: RecordFormat | None) -> int:
        n = 0
        for ring in rings:
            left = limit - n if limit >= 0 else -1
            if left == 0:
                break
            cb = self._cb(ring, callback)
            n += ring.consume(cb, left) if fmt is None else ring.consume_decoded(cb, fmt, left)
        return n

    def consume_batch(self, callback: Callable[[Any], Any], format: Any, limit: int | None = None,
                      arrays: bool | None = None) -> int:
        """Zero-copy batches: call ``callback(batch)`` once per run of same-sized records
        (usually once per ring per call), with every available record decoded by ``format``.

        ``batch`` is a numpy structured array viewing the ring (valid during the call) when
        numpy is installed, else a list of tuples. Returns the number of records."""
        self._check_readable()
        fmt = require_format(format, "RingBuffer.consume_batch")
        use_arrays = HAVE_NUMPY if arrays is None else arrays
        n = 0
        lim = -1 if limit is None else limit
        for ring in self._rings:
            left = lim - n if lim >= 0 else -1
            if left == 0:
                break
            n += ring.consume_batch(callback, fmt, left, use_arrays)
        return n

    def read_batch(self, format: Any = None, limit: int | None = None) -> Any:
        """Drain everything available now in one call and return it as owned data: a numpy
        structured array for ``format`` (a list of tuples without numpy), or a list of
        ``bytes`` without a format."""
        self._check_readable()
        if format is None:
            out: list[bytes] = []
            self.consume(lambda rec: out.append(bytes(rec)), limit)
            return out
        return collect_batches(self.consume_batch, require_format(format, "RingBuffer.read_batch"), limit)

    # ----------------------------------------------------------------- lifecycle
    def available(self) -> int:
        """Bytes waiting in all rings."""
        return sum(r.available() for r in self._rings)

    def close(self) -> None:
        """Unmap every ring and close the epoll fd (the maps stay open: they are the caller's)."""
        for ring in self._rings:
            ring.close()
        self._rings.clear()
        self._by_fd.clear()
        self._poller.close()



    def __repr__(self) -> str:
        names = ", ".join(repr(r.map.name) for r in self._rings)
        return f"RingBuffer({names})" if not self.closed else "RingBuffer(closed)"


# ------------------------------------------------------------------------ user ring buffer
# RingBufferFullError (reserve() without room) lives in bpfkit.errors with the rest of the
# tree; this module re-exports it (its __all__), where it was first defined.


class Reservation:
    """Space reserved in a user ring buffer: fill ``data``, then :meth:`submit` (or
    :meth:`discard`). Records are consumed by the kernel in reservation order."""

    __slots__ = ("_rb", "_index", "size", "data", "_done")

    def __init__(self, rb: UserRingBuffer, index: int, size: int, data: memoryview) -> None:
        self._rb = rb
        self._index = index
        self.size = size
        self.data = data
        self._done = False

    def submit(self) -> None:
        self._finish(0)

    def discard(self) -> None:
        self._finish(DISCARD)

    def _finish(self, bit: int) -> None:
        if self._done:
            raise UsageError("reservation already submitted or discarded")
        self._done = True
        release(self.data)
        if _ring.NEEDS_FENCE:
            _ring.fence()
        self._rb._words[self._index] = self.size | bit  # clears BUSY: store-release on x86

    def __enter__(self) -> memoryview:
        return self.data

    def __exit__(self, exc_type: object, *rest: object) -> None:
        if not self._done:
            self.discard() if exc_type is not None else self.submit()


class UserRingBuffer(ClosesOnExit):
    """Writer of a BPF_MAP_TYPE_USER_RINGBUF (6.1): user space produces, a BPF program drains
    with ``bpf_user_ringbuf_drain``. One writer at a time (not thread-safe, as in libbpf).

    ::

        with UserRingBuffer(coll.maps["requests"]) as urb:
            urb.write(struct.pack("<QQ", op, arg))
            with urb.reserve(16) as buf:               # or fill in place
                buf[:] = payload
    """

    def __init__(self, rmap: MapLike) -> None:
        self.map = rmap
        self.size = _check_map(rmap, MapType.USER_RINGBUF)
        self._mask = self.size - 1
        self._poller = _ring.Poller()
        try:
            self._cons, self._prod = _ring.map_ringbuf(rmap.fd, self.size, user=True)
        except BPFKitError as exc:
            self._poller.close()
            raise exc.wrap(f"open user ring buffer {rmap.name!r}")
        self._cq = self._cons.view[:8].cast("Q")
        self._pq = self._prod.view[:8].cast("Q")
        self._data = self._prod.view[PAGE : PAGE + 2 * self.size]
        self._words = self._data.cast("I")
        self._poller.register(rmap.fd, _ring.EPOLLOUT)

    def free(self) -> int:
        """Bytes the next reservation may use (header and padding included)."""
        return self.size - (self._pq[0] - self._cq[0])

    def reserve(self, size: int) -> Reservation:
        """Reserve ``size`` bytes; raises RingBufferFullError when there is no room."""
        if self._poller.closed:
            raise UsageError("user ring buffer is closed")
        if size <= 0 or size > LEN_MASK:
            raise UsageError(f"user ring buffer record size {size} out of range")
        total = (size + HDR + 7) & ~7
        if total > self.size:
            raise UsageError(f"record of {size} bytes cannot fit a {self.size}-byte user ring buffer")
        prod = self._pq[0]
        cons = self._cq[0]
        if total > self.size - (prod - cons):
            raise RingBufferFullError(
                f"user ring buffer {self.map.name!r}: no room for {size} bytes "
                f"({self.size - (prod - cons)} free of {self.size}); the BPF side has not drained it"
            )
        off = prod & self._mask
        index = off >> 2
        self._words[index] = size | BUSY
        self._words[index + 1] = 0
        if _ring.NEEDS_FENCE:
            _ring.fence()
        self._pq[0] = prod + total  # publish the reservation (store-release on x86)
        return Reservation(self, index, size, self._data[off + HDR : off + HDR + size])

    def reserve_blocking(self, size: int, timeout: float | None = None) -> Reservation:
        """:meth:`reserve`, waiting up to ``timeout`` s for the BPF side to make room."""
        import time

        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            try:
                return self.reserve(size)
            except RingBufferFullError:
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    raise
                # EPOLLOUT means "not completely full", which may still be too little for
                # this record: then back off briefly instead of spinning.
                if self._poller.wait(left):
                    time.sleep(0.001 if left is None else min(left, 0.001))

    def write(self, data: bytes | bytearray | memoryview, timeout: float | None = 0) -> None:
        """Copy ``data`` in as one record and submit it (waiting up to ``timeout`` s for room)."""
        res = self.reserve(len(data)) if timeout == 0 else self.reserve_blocking(len(data), timeout)
        res.data[:] = data
        res.submit()

    def close(self) -> None:
        if self._poller.closed:
            return
        release(self._cq, self._pq, self._words, self._data)
        self._cons.close()
        self._prod.close()
        self._poller.close()

    @property
    def closed(self) -> bool:
        return self._poller.closed

