# SPDX-License-Identifier: Apache-2.0
"""perf_event_open(2) and the perf ioctls.

struct perf_event_attr is versioned by size: user space says in ``attr.size`` which layout it
speaks. A kernel older than that layout answers E2BIG and writes the size it knows back into
``attr.size`` (kernel/events/core.c, perf_copy_attr), which means "a field you set is newer than
this kernel". bpfkit sends the smallest size that holds the fields actually set, so an old kernel
only refuses when a new feature was really asked for, and reports E2BIG as NotSupportedError.
"""

from __future__ import annotations

import errno

from ..errors import KernelError, NotSupportedError, kernel_error
from . import consts as _consts
from .abi import ffi, libc
from .consts import PERF_ATTR_SIZES, PERF_EVENT_IOC_FLAG_GROUP, PERF_FLAG_FD_CLOEXEC, syscall_number
from .fd import FD

TYPE_CHECKING = False  # typing costs ~2 ms to import: its names are for the type checker only
if TYPE_CHECKING:
    from typing import Any

    from .consts import PerfIoctl
# PerfIoctl and PERF_IOCTLS_WITH_GROUP_FLAG are read through _consts when used: the perf
# enums are made on first use (consts' module __getattr__), ~2 ms a process that opens a
# perf event without ioctls (bpfkit features) does not need.

_NR_PERF_EVENT_OPEN = syscall_number("perf_event_open")
ATTR_SIZE: int = ffi.sizeof("struct perf_event_attr")

# Where each attr version ends, to pick the smallest size that covers every non-zero byte.
_VERSION_ENDS = sorted(size for size, _ in PERF_ATTR_SIZES.values())


def new_attr() -> Any:
    """A zeroed ``struct perf_event_attr``."""
    return ffi.new("struct perf_event_attr *")


def needed_attr_size(attr: Any) -> int:
    """The smallest PERF_ATTR_SIZE_VER* that holds every non-zero byte of ``attr``."""
    raw = bytes(ffi.buffer(attr, ATTR_SIZE))
    last = len(raw.rstrip(b"\0"))
    for end in _VERSION_ENDS:
        if last <= end:
            return end
    return ATTR_SIZE


def _release_for_size(size: int) -> str:
    for _, (vsize, release) in sorted(PERF_ATTR_SIZES.items()):
        if vsize >= size:
            return release
    return ""


def perf_event_open(attr: Any, pid: int, cpu: int, group_fd: int = -1, flags: int = 0, what: str = "") -> FD:
    """Open a perf event; ``what`` names it in errors (``kprobe do_sys_open``).

    ``attr.size`` is set here from the fields in use. FD_CLOEXEC is always added.
    """
    size = needed_attr_size(attr)
    attr.size = size
    while True:
        ret = libc.syscall(
            _NR_PERF_EVENT_OPEN,
            attr,
            ffi.cast("int", pid),
            ffi.cast("int", cpu),
            ffi.cast("int", group_fd),
            ffi.cast("unsigned long", flags | PERF_FLAG_FD_CLOEXEC),
        )
        if ret >= 0:
            return FD(int(ret))
        err = ffi.errno
        if err == errno.EINTR:
            continue
        if err == errno.E2BIG:
            known = int(attr.size)
            raise NotSupportedError(
                f"perf_event_attr of {size} bytes" + (f" for {what}" if what else ""),
                f"this kernel knows a {known}-byte perf_event_attr (E2BIG): a field it lacks was set",
                _release_for_size(size),
            )
        raise kernel_error("perf_event_open", err, what)


def _ioctl(fd: FD | int, request: int, arg: Any) -> int:
    ret = libc.ioctl(int(fd), ffi.cast("unsigned long", request), arg)
    if ret < 0:
        err = ffi.errno
        ioctls = _consts.PerfIoctl
        name = ioctls(request).c_name if request in ioctls._value2member_map_ else hex(request)
        raise kernel_error(name, err)
    return int(ret)


def perf_ioctl(fd: FD | int, request: PerfIoctl, arg: int = 0, group: bool = False) -> int:
    """An integer-argument perf ioctl (ENABLE, DISABLE, RESET, REFRESH, SET_OUTPUT, SET_BPF,
    PAUSE_OUTPUT). ``group=True`` applies ENABLE/DISABLE/RESET to the whole event group."""
    if group:
        if request not in _consts.PERF_IOCTLS_WITH_GROUP_FLAG:
            raise KernelError(request.c_name, errno.EINVAL, "this ioctl takes no group flag")
        arg = PERF_EVENT_IOC_FLAG_GROUP
    return _ioctl(fd, request, ffi.cast("unsigned long", arg))


def enable(fd: FD | int) -> None:
    perf_ioctl(fd, _consts.PerfIoctl.ENABLE)


def disable(fd: FD | int) -> None:
    perf_ioctl(fd, _consts.PerfIoctl.DISABLE)


def set_bpf(fd: FD | int, prog_fd: FD | int) -> None:
    """PERF_EVENT_IOC_SET_BPF: the pre-bpf_link way to run a program on a perf event."""
    perf_ioctl(fd, _consts.PerfIoctl.SET_BPF, int(prog_fd))


def set_output(fd: FD | int, target_fd: int) -> None:
    perf_ioctl(fd, _consts.PerfIoctl.SET_OUTPUT, target_fd)


def pause_output(fd: FD | int, paused: bool) -> None:
    perf_ioctl(fd, _consts.PerfIoctl.PAUSE_OUTPUT, 1 if paused else 0)


def set_period(fd: FD | int, period: int) -> None:
    value = ffi.new("uint64_t *", period)
    _ioctl(fd, _consts.PerfIoctl.PERIOD, value)


def set_filter(fd: FD | int, text: str) -> None:
    cstr = ffi.new("char[]", text.encode())
    _ioctl(fd, _consts.PerfIoctl.SET_FILTER, cstr)


def event_id(fd: FD | int) -> int:
    value = ffi.new("uint64_t *")
    _ioctl(fd, _consts.PerfIoctl.ID, value)
    return int(value[0])


def query_bpf(fd: FD | int, max_ids: int = 64) -> list[int]:
    """PERF_EVENT_IOC_QUERY_BPF: ids of the programs attached to a trace event."""
    query = ffi.new("struct perf_event_query_bpf *", {"ids": max_ids})
    query.ids_len = max_ids
    _ioctl(fd, _consts.PerfIoctl.QUERY_BPF, query)
    return [query.ids[i] for i in range(min(query.prog_cnt, max_ids))]


def modify_attributes(fd: FD | int, attr: Any) -> None:
    attr.size = needed_attr_size(attr)
    _ioctl(fd, _consts.PerfIoctl.MODIFY_ATTRIBUTES, attr)


# ---------------------------------------------------------------------------- sysctls
MAX_SAMPLE_RATE_PATH = "/proc/sys/kernel/perf_event_max_sample_rate"
PARANOID_PATH = "/proc/sys/kernel/perf_event_paranoid"


def _read_sysctl(path: str) -> int | None:
    try:
        with open(path) as f:
            return int(f.read().strip())
    except (OSError, ValueError):
        return None


def max_sample_rate() -> int | None:
    """kernel.perf_event_max_sample_rate: the highest attr.sample_freq perf_event_open accepts
    (EINVAL above it). The kernel lowers it by itself when sampling interrupts take longer than
    kernel.perf_cpu_time_max_percent allows ("perf: interrupt took too long"). None if unreadable."""
    return _read_sysctl(MAX_SAMPLE_RATE_PATH)


def paranoid() -> int | None:
    """kernel.perf_event_paranoid: 2 (Debian: 3) keeps unprivileged users to their own user-space
    events; CAP_PERFMON (5.8) or CAP_SYS_ADMIN bypasses it. None if unreadable."""
    return _read_sysctl(PARANOID_PATH)
