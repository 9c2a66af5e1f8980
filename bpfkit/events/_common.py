# SPDX-License-Identifier: Apache-2.0
"""Pieces shared by the perf and ring buffer readers: header validation of fixed-size runs, the
delivery of a validated run (views, decoded records or one batch) with the ring position stored
after it, waiting (sync and asyncio), and how lost records are reported."""

from __future__ import annotations

import struct
import sys
import warnings
from collections import deque
from collections.abc import AsyncIterator, Iterable, Iterator
from itertools import starmap
from operator import length_hint

from .._closing import ClosesOnExit
from .._kernel import ring as _ring
from ..errors import UsageError
from .records import as_format

# typing costs ~2 ms of a first reader's set-up (benchmarks/bench_reader_setup.py): the readers
# are generic through types.GenericAlias at run time (as bpfkit.maps.Map), typing's names are
# for the type checker only.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Generic, TypeVar

    from .records import RecordFormat

    _T = TypeVar("_T")

    class _Generic(Generic[_T]):
        pass
else:  # at run time
    from types import GenericAlias

    class _Generic:
        __slots__ = ()
        __class_getitem__ = classmethod(GenericAlias)

# A fast path starts when at least this many records of one size are waiting; the window
# of records validated at once grows 4x per success up to RUN_MAX and falls back on a miss,
# so a stream of mixed sizes never pays for long validations that fail early.
RUN_MIN = 8
RUN_MAX = 8192
# Validate runs with numpy when it is loaded already (by the caller or a batch); never import
# it just for this: the memoryview fallback is close for per-record sized runs.
USE_NUMPY = True
NUMPY_FROM = 1024  # below this many records numpy's fixed cost (~5 us) exceeds the copy's


class LostRecordsWarning(UserWarning):
    """Records were dropped because a ring was full (a perf PERF_RECORD_LOST record).

    Issued when no lost callback was given; the counts are also kept on the reader."""


def warn_lost(what: str, count: int) -> None:
    warnings.warn(f"{what}: {count} records lost (ring full)", LostRecordsWarning, stacklevel=3)


class RunChecker:
    """Counts how many records of a fixed-size run, starting at a byte offset of a ring's data
    view, carry an expected 32-bit word at a given offset in each record.

    With numpy the words are compared as one strided array; without it, a strided memoryview
    is copied out and compared with the expected bytes (both run at C speed)."""

    __slots__ = ("data", "words", "_expect", "_expect_word")

    def __init__(self, data: memoryview) -> None:
        self.data = data
        self.words = data.cast("I")
        self._expect = b""
        self._expect_word = -1

    def release(self) -> None:
        release(self.words, self.data)

    def count(self, off: int, k: int, stride: int, word: int) -> int:
        """Leading records (of ``k``, every ``stride`` bytes from ``off``) whose u32 at ``off``
        equals ``word``. ``off`` and ``stride`` are multiples of 4."""
        np = sys.modules.get("numpy") if USE_NUMPY and k >= NUMPY_FROM else None
        if np is not None:
            arr = np.ndarray((k,), "<u4", buffer=self.data, offset=off, strides=(stride,))
            eq = arr == word
            if eq.all():
                return k
            return int(eq.argmin())
        step = stride >> 2
        start = off >> 2
        got = self.words[start : start + k * step : step].tobytes()
        if word != self._expect_word or len(self._expect) < 4 * k:
            self._expect = struct.pack("<I", word) * max(k, RUN_MAX)
            self._expect_word = word
        if got == self._expect[: 4 * k]:
            return k
        lo, hi = 0, k  # got[:4*lo] matches, got[:4*hi] does not
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if got[: 4 * mid] == self._expect[: 4 * mid]:
                lo = mid
            else:
                hi = mid
        return lo


# Per-record views of a validated run are cut with slice objects made once per record shape
# (stride, payload offset, payload length) for VIEW_CHUNK records and applied to a view of each
# chunk: no slice arithmetic per record (measured: 169 -> 151 ns per record with the
# benchmark's handler). At most _SLICE_SHAPES shapes are kept (each ~100 KB).
VIEW_CHUNK = 1024
_SLICE_SHAPES = 16
_slices: dict[tuple[int, int, int], list[slice]] = {}


def _record_slices(stride: int, skip: int, length: int) -> list[slice]:
    key = (stride, skip, length)
    got = _slices.get(key)
    if got is None:
        if len(_slices) >= _SLICE_SHAPES:
            _slices.clear()
        got = _slices[key] = [slice(o, o + length) for o in range(skip, skip + VIEW_CHUNK * stride, stride)]
    return got


def published(pos: memoryview[int], at: int, cons: int) -> int:
    """The producer's position, ``pos[at]`` (a ring buffer's producer_pos, a perf ring's
    data_head), loaded before the records up to it are read: when it is past ``cons``, with the
    read barrier a weakly ordered CPU needs in between (bpfkit._kernel.ring.fence; nothing on
    x86-64). The record iterators start each pass here; the consuming loops inline it."""
    prod = pos[at]
    if prod > cons and _ring.NEEDS_FENCE:
        _ring.fence()
    return prod


def deliver_run(cb: Any, cpu: int | None, fmt: RecordFormat | None, strides: dict[int, struct.Struct],
                data: memoryview, off: int, m: int, stride: int, skip: int, length: int,
                pos: memoryview[int], at: int, start: int) -> int:
    """Deliver a validated run of ``m`` records laid out every ``stride`` bytes from ``off`` in
    ``data``, each one's payload ``skip`` bytes in: ``cb(view)`` with its ``length`` bytes
    (``cb(cpu, view)`` when ``cpu`` is not None), or, given ``fmt``, ``cb(*fields)`` (``strides``
    keeps the consume call's Structs by stride). Stores the ring position after the run,
    ``start + m * stride``, into ``pos[at]`` and returns it; if ``cb`` raises, the position after
    the failing record (it and those before it consumed) is stored before the exception
    propagates. Both readers' runs come here: one call per run, never per record."""
    if fmt is not None:
        st = strides.get(stride)
        if st is None:
            st = strides[stride] = fmt.struct_for_stride(stride, skip)
        it = st.iter_unpack(data[off : off + m * stride])
        try:
            deque(starmap(cb, it), 0)
        except BaseException:
            pos[at] = start + (m - length_hint(it)) * stride
            raise
    else:
        whole = _record_slices(stride, skip, length)
        first = 0
        s: slice | None = None
        try:
            while first < m:
                s = None  # nothing of this chunk delivered yet
                c = min(m - first, VIEW_CHUNK)
                base = off + first * stride
                sub = data[base : base + c * stride]
                if cpu is None:
                    for s in whole if c == VIEW_CHUNK else whole[:c]:
                        cb(sub[s])
                else:
                    for s in whole if c == VIEW_CHUNK else whole[:c]:
                        cb(cpu, sub[s])
                first += c
        except BaseException:
            pos[at] = start + (first + (0 if s is None else (s.start - skip) // stride + 1)) * stride
            raise
    end = start + m * stride
    pos[at] = end
    return end


def deliver_batch(cb: Any, np: Any, fmt: RecordFormat, buf: memoryview, base: int, m: int, stride: int, skip: int,
                  pos: memoryview[int], at: int, start: int) -> int:
    """Deliver ``m`` records (every ``stride`` bytes from ``base`` in ``buf``, each ``skip`` bytes
    in) decoded by ``fmt`` in one ``cb(batch)``: a numpy structured array viewing ``buf`` (``np``
    given), else a list of tuples. Stores the ring position after them, ``start + m * stride``,
    into ``pos[at]`` and returns it, also when ``cb`` raises (the batch counts as consumed)."""
    if np is not None:
        # frombuffer (unlike ndarray(buffer=)) keeps an export of the mapping, so an array kept
        # past close() stays valid instead of pointing at unmapped memory
        batch = np.frombuffer(buf, fmt.dtype_for_stride(stride, skip), m, base)
    else:
        batch = list(fmt.struct_for_stride(stride, skip).iter_unpack(buf[base : base + m * stride]))
    end = start + m * stride
    try:
        cb(batch)
    finally:
        del batch
        pos[at] = end
    return end


def release(*views: memoryview | None) -> None:
    """Release our views of a ring; one still exported (a caller kept a numpy array viewing
    the ring) is left to be freed when that goes away."""
    for view in views:
        if view is not None:
            try:
                view.release()
            except BufferError:
                pass


async def wait_readable(fd: int, timeout: float | None) -> bool:
    """Wait in the running asyncio loop until ``fd`` is readable; False on timeout."""
    import asyncio

    loop = asyncio.get_running_loop()
    fut: asyncio.Future[bool] = loop.create_future()

    def ready() -> None:
        if not fut.done():
            fut.set_result(True)

    loop.add_reader(fd, ready)
    try:
        if timeout is None:
            return await fut
        try:
            return await asyncio.wait_for(fut, timeout)
        except TimeoutError:
            return False
    finally:
        loop.remove_reader(fd)


def as_callable(obj: Any, what: str) -> Any:
    if obj is not None and not callable(obj):
        raise UsageError(f"{what} must be callable, not {obj!r}")
    return obj


class PolledReader(_Generic["_T"], ClosesOnExit):
    """What the ring-buffer and perf-buffer readers share: an epoll set (``self._poller``) over
    their rings (``self._by_fd``: each ring by the fd a wakeup names), ``consume`` and ``poll``
    over the rings' own consuming loops, and this lifecycle, iteration and asyncio face. ``_T``
    is what iterating yields: a record's view, or ``(cpu, view)``."""

    _poller: _ring.Poller
    _by_fd: dict[int, Any]
    _WHAT = "reader"  # what "... is closed" names

    def _check_readable(self) -> None:
        if self._poller.closed:
            raise UsageError(f"{self._WHAT} is closed")

    def wait(self, timeout: float | None = None) -> bool:
        """Wait up to ``timeout`` s for a wakeup without consuming anything; True if woken."""
        if self._poller.closed:
            raise UsageError("reader is closed")
        return bool(self._poller.wait(timeout))

    def _all_rings(self) -> Iterable[Any]:  # pragma: no cover - overridden
        """Every ring, in the order they are consumed."""
        raise NotImplementedError

    def _consume_rings(self, rings: Iterable[Any], callback: Any, limit: int, fmt: RecordFormat | None) -> int:
        """Consume ``rings`` in turn (at most ``limit`` records, < 0: no limit); how many."""
        raise NotImplementedError  # pragma: no cover - overridden

    def consume(self, callback: Any = None, limit: int | None = None, format: Any = None) -> int:
        """Process every record available now, on every ring, without waiting; returns how many.

        ``format`` (a struct format, RecordFormat): decode each record and call
        ``callback(*fields)`` instead of passing the view.
        """
        self._check_readable()
        return self._consume_rings(self._all_rings(), callback, -1 if limit is None else limit, as_format(format))

    def poll(self, timeout: float | None = None, callback: Any = None, format: Any = None, limit: int | None = None) -> int:
        """Wait up to ``timeout`` s (None: forever) for a wakeup, then process the rings that
        woke us (after a timeout: every ring holding records). Returns the number processed:
        at most ``limit`` (None: all there are); the rest stay in the rings for the next call."""
        self._check_readable()
        ready = self._poller.wait(timeout)
        if ready:
            rings = [self._by_fd[fd] for fd, _ in ready if fd in self._by_fd]
        else:
            # No wakeup, yet records may be there: a ring buffer's producer may pass
            # BPF_RB_NO_WAKEUP, or a wakeup was lost (the adaptive check in bpf_ringbuf_commit
            # races with our consumer_pos store); a perf buffer with wakeup_events > 1 or a
            # watermark leaves the tail of a burst unannounced. Take what is there, so a missed
            # wakeup costs one timeout, never a stall.
            rings = [r for r in self._all_rings() if r.available()]
        return self._consume_rings(rings, callback, -1 if limit is None else limit, as_format(format))

    def close(self) -> None:  # pragma: no cover - overridden
        raise NotImplementedError

    def available(self) -> int:  # pragma: no cover - overridden
        raise NotImplementedError

    def _sources(self) -> Iterator[Iterator[_T]]:  # pragma: no cover - overridden
        """One iterator per ring over the records available now (each consumed when the next
        is requested)."""
        raise NotImplementedError

    def read(self, timeout: float | None = None) -> Iterator[_T]:
        """Iterate records as they arrive; stops after ``timeout`` s without any (None: never).

        Each record is valid until the next one is requested."""
        self._check_readable()
        while True:
            got = False
            for source in self._sources():
                for item in source:
                    got = True
                    yield item
            if not got and not self._poller.wait(timeout) and not self.available():
                return  # quiet for ``timeout`` (a missed wakeup would still show as data)

    async def aread(self, timeout: float | None = None) -> AsyncIterator[_T]:
        """``async for rec in reader.aread(timeout)``: :meth:`read` for asyncio."""
        # read()'s loop again, not ``for item in self.read(0)``: a generator more to resume
        # costs every record ~15% (duplicates pairs the two loops)
        self._check_readable()
        while True:
            got = False
            for source in self._sources():
                for item in source:
                    got = True
                    yield item
            if not got:
                if not await wait_readable(self._poller.fileno(), timeout) and not self.available():
                    return
                self._poller.wait(0)

    def __iter__(self) -> Iterator[_T]:
        return self.read()

    def __aiter__(self) -> AsyncIterator[_T]:
        return self.aread()

    async def poll_async(self, timeout: float | None = None, callback: Any = None) -> int:
        """``poll`` for asyncio: waits in the event loop, never blocks it."""
        self._check_readable()
        n = self.consume(callback)
        if n:
            return n
        if not await wait_readable(self._poller.fileno(), timeout):
            return 0
        self._poller.wait(0)
        return self.consume(callback)

    def fileno(self) -> int:
        """The epoll fd: readable when a ring woke us (for select/asyncio loops)."""
        return self._poller.fileno()

    @property
    def closed(self) -> bool:
        return self._poller.closed

