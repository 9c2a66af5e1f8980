# SPDX-License-Identifier: Apache-2.0
"""Kernel ring buffers shared with user space: mmap, memory ordering, epoll, BPF output events.

Getting the terminology right:

* a *perf ring* is the buffer behind one perf event fd: ``mmap(fd)`` of 1 + 2^n pages. Page 0
  is ``struct perf_event_mmap_page`` (the control page: ``data_head`` written by the kernel,
  ``data_tail`` written by the reader); the 2^n pages after it hold ``perf_event_header``
  records that may wrap around the end. A ``PERF_COUNT_SW_BPF_OUTPUT`` event per CPU, stored
  in a ``BPF_MAP_TYPE_PERF_EVENT_ARRAY`` at that CPU's index, is what ``bpf_perf_event_output``
  writes to (4.4).
* a *BPF ring buffer* (``BPF_MAP_TYPE_RINGBUF``, 5.8) is one buffer shared by all CPUs:
  ``mmap(map_fd, offset 0)`` is the consumer page (``consumer_pos``, written by the reader);
  ``mmap(map_fd, offset page)`` is the producer page (``producer_pos``) followed by the data
  pages *mapped twice in a row*, so a record that wraps is still contiguous for the reader.
  The producer side is read-only for user space. A ``BPF_MAP_TYPE_USER_RINGBUF`` (6.1) is
  the mirror image: user space produces, a program drains with ``bpf_user_ringbuf_drain``.

Memory ordering (why plain loads and stores from Python are enough on x86-64):
the kernel publishes records with a store-release of ``data_head``/``producer_pos`` (or of the
record header for BPF ring buffers) after writing the record, and reads the reader's
``data_tail``/``consumer_pos`` with a load-acquire before overwriting space. The reader must
therefore (1) load the head, *then* load the records (acquire), and (2) finish loading the
records, *then* store the tail (release). x86-64 is TSO: loads are not reordered with older
loads, and stores are not reordered with older loads, so program order gives both for free;
what remains is that the compiler emits the accesses in order, which holds for CPython, where
each access is a separate opaque C call doing one aligned 8-byte ``memcpy`` (a single ``mov``,
hence also untorn). arm64 and riscv64 are weakly ordered: they need ``smp_load_acquire`` /
``smp_store_release`` (``ldar``/``stlr`` or ``dmb ish``) around those accesses, which Python
cannot emit. :func:`fence` provides a full barrier there (a two-instruction stub in an
executable page, called through cffi) and the readers call it once per pass: after loading the
head and before storing the tail. On x86-64 :data:`NEEDS_FENCE` is False and it is never called.
"""

from __future__ import annotations

import errno
import mmap
import os
import select

from ..errors import KernelError, NotSupportedError, UsageError
from .abi import ffi
from .fd import FD

# A first reader's set-up is mostly imports (benchmarks/bench_reader_setup.py): typing (~2 ms),
# platform (~1 ms) and the perf enums (bpfkit._kernel.perf_consts, ~1.5 ms) are not loaded
# here for a ring buffer reader; the perf event functions import theirs when called.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

PAGE_SIZE = mmap.PAGESIZE

# Byte offsets in struct perf_event_mmap_page (include/uapi/linux/perf_event.h).
DATA_HEAD: int = ffi.offsetof("struct perf_event_mmap_page", "data_head")
DATA_TAIL: int = ffi.offsetof("struct perf_event_mmap_page", "data_tail")
DATA_OFFSET: int = ffi.offsetof("struct perf_event_mmap_page", "data_offset")
DATA_SIZE: int = ffi.offsetof("struct perf_event_mmap_page", "data_size")

EPOLLIN = select.EPOLLIN
EPOLLOUT = select.EPOLLOUT

# ------------------------------------------------------------------------------ ordering
_ARCH = os.uname().machine  # what platform.machine() returns, without importing platform
NEEDS_FENCE = _ARCH not in ("x86_64", "AMD64", "i386", "i686")

# Machine code of ``full barrier; return`` for the weakly ordered architectures bpfkit knows.
FENCE_CODE = {
    "aarch64": bytes.fromhex("bf3b03d5" "c0035fd6"),  # dmb ish; ret
    "riscv64": bytes.fromhex("0f003003" "67800000"),  # fence rw,rw; ret
}
_fence_fn: Callable[[], None] | None = None
_fence_page: Any = None


def fence() -> None:
    """A full memory barrier (no-op on x86-64, where TSO already orders the ring accesses)."""
    global _fence_fn, _fence_page
    if not NEEDS_FENCE:
        return
    if _fence_fn is None:
        code = FENCE_CODE.get(_ARCH)
        if code is None:
            raise NotSupportedError(
                f"ring buffer memory ordering on {_ARCH}", "bpfkit knows the barrier of x86-64, arm64, riscv64"
            )
        try:
            page = mmap.mmap(-1, PAGE_SIZE, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
        except OSError as exc:
            raise NotSupportedError(
                f"ring buffer memory ordering on {_ARCH}",
                f"mapping an executable page for the barrier stub failed ({exc})",
            ) from None
        page.write(code)
        _fence_page = page
        address = ffi.cast("uintptr_t", ffi.from_buffer(page))
        _fence_fn = ffi.cast("void (*)(void)", address)
    _fence_fn()


# --------------------------------------------------------------------------------- mmap
class RingMapping:
    """One mmap of a kernel ring (``mmap.mmap``), with a memoryview over it.

    Records handed out as memoryviews keep the mapping alive: closing while such a view is
    still referenced cannot unmap (that would leave the view pointing at nothing), so the
    mapping is then released by Python when the last view goes away.
    """

    __slots__ = ("_mm", "view", "length", "what")

    def __init__(self, fd: FD | int, length: int, offset: int, writable: bool, what: str) -> None:
        prot = mmap.PROT_READ | (mmap.PROT_WRITE if writable else 0)
        try:
            self._mm: mmap.mmap | None = mmap.mmap(int(fd), length, mmap.MAP_SHARED, prot, offset=offset)
        except OSError as exc:
            err = exc.errno or errno.EINVAL
            hint = ""
            if err == errno.EPERM:
                hint = "locked memory over perf_event_mlock_kb / RLIMIT_MEMLOCK needs CAP_IPC_LOCK"
            elif err == errno.EINVAL:
                hint = "size or offset rejected (perf rings need 1 + 2^n pages)"
            raise KernelError(f"mmap {what} ({length} bytes at offset {offset})", err, hint) from None
        self.view = memoryview(self._mm)
        self.length = length
        self.what = what

    def close(self) -> None:
        mm, self._mm = self._mm, None
        if mm is None:
            return
        try:
            self.view.release()
            mm.close()
        except BufferError:
            # A caller still holds a record view; Python unmaps when that view dies.
            pass

    @property
    def closed(self) -> bool:
        return self._mm is None


def check_pages(pages: int) -> None:
    if pages <= 0 or pages & (pages - 1):
        raise UsageError(f"perf ring size must be a power of two pages, got {pages}")


def map_perf_ring(fd: FD | int, pages: int, writable: bool = True) -> RingMapping:
    """mmap a perf event's ring: the control page plus ``pages`` (a power of two) data pages.

    ``writable=False`` maps it read-only, which makes a ``write_backward`` ring overwritable
    (the kernel then ignores data_tail and overwrites the oldest records).
    """
    check_pages(pages)
    return RingMapping(fd, (1 + pages) * PAGE_SIZE, 0, writable, "perf ring")


def map_ringbuf(fd: FD | int, size: int, user: bool = False) -> tuple[RingMapping, RingMapping]:
    """mmap a BPF ring buffer map of ``size`` data bytes: (consumer page, producer page + data x2).

    For a RINGBUF the reader may write only the consumer page; for a USER_RINGBUF (``user``)
    only the producer page and data.
    """
    kind = "user ring buffer" if user else "ring buffer"
    consumer = RingMapping(fd, PAGE_SIZE, 0, not user, f"{kind} consumer page")
    try:
        producer = RingMapping(fd, PAGE_SIZE + 2 * size, PAGE_SIZE, user, f"{kind} producer page and data")
    except BaseException:
        consumer.close()
        raise
    return consumer, producer


# -------------------------------------------------------------------------------- epoll
class Poller:
    """An epoll set: which of several ring fds have data (or room, for user ring buffers)."""

    def __init__(self) -> None:
        self._ep: select.epoll | None = select.epoll()

    def fileno(self) -> int:
        if self._ep is None:
            raise UsageError("poller is closed")
        return self._ep.fileno()

    def register(self, fd: FD | int, events: int = EPOLLIN) -> None:
        if self._ep is None:
            raise UsageError("poller is closed")
        try:
            self._ep.register(int(fd), events)
        except OSError as exc:
            raise KernelError("epoll_ctl(EPOLL_CTL_ADD)", exc.errno or errno.EINVAL, f"fd {int(fd)}") from None

    def unregister(self, fd: FD | int) -> None:
        if self._ep is not None:
            try:
                self._ep.unregister(int(fd))
            except (OSError, ValueError):
                pass

    def wait(self, timeout: float | None, max_events: int = -1) -> list[tuple[int, int]]:
        """(fd, events) pairs that are ready; waits up to ``timeout`` s (None: forever).

        An interrupted wait returns an empty list rather than retrying, so a signal handler
        that sets a stop flag is noticed (PEP 475 would otherwise retry).
        """
        if self._ep is None:
            raise UsageError("poller is closed")
        try:
            return self._ep.poll(-1 if timeout is None else timeout, max_events)
        except InterruptedError:
            return []

    def close(self) -> None:
        ep, self._ep = self._ep, None
        if ep is not None:
            ep.close()

    @property
    def closed(self) -> bool:
        return self._ep is None


# ------------------------------------------------------------------------ perf events
def open_bpf_output(
    cpu: int,
    wakeup_events: int = 1,
    wakeup_watermark: int = 0,
    write_backward: bool = False,
) -> FD:
    """A ``PERF_COUNT_SW_BPF_OUTPUT`` event on ``cpu`` (all tasks), the target of
    ``bpf_perf_event_output``: samples carry only PERF_SAMPLE_RAW.

    Wakeups: every ``wakeup_events`` samples, or (``wakeup_watermark`` > 0) once that many
    bytes are waiting. ``write_backward`` (4.10) makes the ring fill from the end backwards so
    it can run in overwrite mode.
    """
    from . import perf as _perf
    from .consts import PerfAttrFlag, PerfSample, PerfSwId, PerfType

    attr = _perf.new_attr()
    attr.type = PerfType.SOFTWARE
    attr.config = PerfSwId.BPF_OUTPUT
    attr.sample_type = PerfSample.RAW
    attr.sample_period = 1
    flags = 0
    if wakeup_watermark:
        flags |= PerfAttrFlag.WATERMARK
        attr.wakeup_watermark = wakeup_watermark
    else:
        attr.wakeup_events = max(1, wakeup_events)
    if write_backward:
        flags |= PerfAttrFlag.WRITE_BACKWARD
    attr.flags = flags
    return _perf.perf_event_open(attr, -1, cpu, what=f"BPF output event on CPU {cpu}")


# CLOCK_MONOTONIC, for sideband timestamps comparable with time.monotonic_ns().
CLOCK_MONOTONIC = 1


def open_sideband(
    cpu: int,
    sample_type: int,
    flags: int,
    wakeup_watermark: int = 0,
    clockid: int = CLOCK_MONOTONIC,
) -> FD:
    """A ``PERF_COUNT_SW_DUMMY`` event on ``cpu`` that only carries sideband records (COMM,
    FORK/EXIT, MMAP2, NAMESPACES, ... as chosen by ``flags``), timestamped with ``clockid``
    (use_clockid, 4.1) and with ``sample_type`` fields appended to each (sample_id_all)."""
    from . import perf as _perf
    from .consts import PerfAttrFlag, PerfSwId, PerfType

    attr = _perf.new_attr()
    attr.type = PerfType.SOFTWARE
    attr.config = PerfSwId.DUMMY
    attr.sample_type = sample_type
    attr.sample_period = 1
    flags |= PerfAttrFlag.USE_CLOCKID
    attr.clockid = clockid
    if wakeup_watermark:
        flags |= PerfAttrFlag.WATERMARK
        attr.wakeup_watermark = wakeup_watermark
    else:
        attr.wakeup_events = 1
    attr.flags = flags
    return _perf.perf_event_open(attr, -1, cpu, what=f"sideband (dummy) event on CPU {cpu}")


# PERF_EVENT_IOC_EMIT_SIDEBAND, _IOW('$', 12, struct perf_event_pid_sb *): proposed in the RFC
# "perf: Add ioctl to emit sideband events" (Adrian Hunter, April 2023), never merged. It asks
# the kernel to write status-only (PERF_RECORD_MISC_STATUS_ONLY, misc bit 11) FORK, NAMESPACES,
# COMM and MMAP records for one pid into an active event's ring, in timestamp order with the
# live records, instead of user space parsing /proc.
PERF_EVENT_IOC_EMIT_SIDEBAND = (1 << 30) | (8 << 16) | (ord("$") << 8) | 12
PERF_RECORD_MISC_STATUS_ONLY = 1 << 11
EMIT_FORK, EMIT_NAMESPACES, EMIT_COMM, EMIT_MMAP = 1, 2, 4, 8


def emit_sideband(fd: FD | int, pid: int, emit_flags: int) -> None:
    """Issue PERF_EVENT_IOC_EMIT_SIDEBAND for ``pid`` (only on a kernel that has it)."""
    arg = ffi.new("uint32_t[2]", [pid, emit_flags])
    from .abi import libc

    ret = libc.ioctl(int(fd), ffi.cast("unsigned long", PERF_EVENT_IOC_EMIT_SIDEBAND), arg)
    if ret < 0:
        raise KernelError("PERF_EVENT_IOC_EMIT_SIDEBAND", ffi.errno, f"pid {pid}")


def probe_emit_sideband(fd: FD | int) -> tuple[bool, str]:
    """Whether this kernel implements the sideband ioctl, judged conclusively on a dummy event:
    an unknown emit flag must give EINVAL and no flags must succeed (an unrelated ioctl that
    ever takes number 12 would not answer both that way)."""
    try:
        emit_sideband(fd, os.getpid(), 1 << 31)
    except KernelError as exc:
        if exc.errno != errno.EINVAL:
            return False, (
                f"PERF_EVENT_IOC_EMIT_SIDEBAND answers {errno.errorcode.get(exc.errno, exc.errno)}: "
                "the RFC (2023) was never merged, so /proc is scanned instead"
            )
    else:
        return False, "PERF_EVENT_IOC_EMIT_SIDEBAND accepted an unknown flag: not the RFC's ioctl"
    try:
        emit_sideband(fd, os.getpid(), 0)
    except KernelError as exc:
        return False, f"PERF_EVENT_IOC_EMIT_SIDEBAND with no flags failed: {exc}"
    return True, ""
