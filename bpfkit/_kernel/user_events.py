# SPDX-License-Identifier: Apache-2.0
"""The user_events ABI: tracefs ``user_events_data``, its three ioctls, and the status file.

Linux user_events (CONFIG_USER_EVENTS, usable since 6.4 when it stopped depending on BROKEN and
include/uapi/linux/user_events.h came back) lets a process define trace events and write them:

* ``DIAG_IOCSREG`` on an open ``user_events_data`` takes a packed ``struct user_reg``: the event
  description (``name[ field;field...]``), an address in the caller's memory and a bit. The
  kernel sets that bit, from any context, while a tracer (ftrace, perf, a BPF link) has the event
  enabled, and clears it when the last one goes. It answers with a *write index*.
* ``write()``/``writev()`` on the same fd with the write index first emit one event.
* ``DIAG_IOCSUNREG`` (``struct user_unreg``: address and bit) stops the bit updates and clears
  the bit. The enabler belongs to the process's mm, not to the fd: closing the fd leaves the
  kernel writing into that address until unregister, execve() or exit.
* ``DIAG_IOCSDEL`` (a name) deletes the event when nobody references it (EBUSY otherwise).
  Since 6.5 an event without USER_EVENT_REG_PERSIST is deleted by the kernel itself when its
  last reference goes (kernel/trace/trace_events_user.c, user_event_put()).

Layouts are checked against the UAPI header by tests/test_user_events_layout.py.
"""

from __future__ import annotations

import dataclasses
import enum
import errno
import os
from collections.abc import Sequence
from typing import Any

import cffi

from ..errors import (
    BPFKitError,
    BusyError,
    KernelError,
    KernelPermissionError,
    NotFoundError,
    NotSupportedError,
    UsageError,
    kernel_error,
)
from . import tracefs
from .fd import FD
from .ioctl import IOC_READ, IOC_WRITE, ioc

USER_EVENTS_SYSTEM = "user_events"
USER_EVENTS_MULTI_SYSTEM = "user_events_multi"  # USER_EVENT_REG_MULTI_FORMAT events (6.10)
USER_EVENTS_PREFIX = "u:"  # dynamic_events spelling
DATA_FILE = "user_events_data"
STATUS_FILE = "user_events_status"
MAX_EVENT_DESC = 512  # strndup_user() limit on name_args, NUL included
MAX_FIELD_ARRAY_SIZE = 1024  # char[N]: N at most this
TRACE_ENTRY_SIZE = 8  # struct trace_entry {u16 type; u8 flags, preempt_count; int pid;}
MIN_KERNEL = "6.4"

CDEF = r"""
struct user_reg {
    uint32_t size;
    uint8_t  enable_bit;
    uint8_t  enable_size;
    uint16_t flags;
    uint64_t enable_addr;
    uint64_t name_args;
    uint32_t write_index;
};

struct user_unreg {
    uint32_t size;
    uint8_t  disable_bit;
    uint8_t  __reserved;
    uint16_t __reserved2;
    uint64_t disable_addr;
};

int ioctl(int fd, unsigned long request, ...);
"""

# Both structs are __attribute__((__packed__)) in the header.
CHECKED_TYPES = {"struct user_reg": "struct user_reg", "struct user_unreg": "struct user_unreg"}

ffi = cffi.FFI()
ffi.cdef(CDEF, packed=True)
_libc = ffi.dlopen(None)


class RegFlag(enum.IntFlag):
    """``enum user_reg_flag``: DIAG_IOCSREG ``flags`` (EINVAL from kernels that lack one)."""

    PERSIST = 1 << 0  # 6.5: the event outlives its last reference; needs CAP_PERFMON
    MULTI_FORMAT = 1 << 1  # 6.10: same name, several formats: user_events_multi/<name>.<hex id>

    @property
    def c_name(self) -> str:
        return {1: "USER_EVENT_REG_PERSIST", 2: "USER_EVENT_REG_MULTI_FORMAT"}.get(int(self), str(self))

    @property
    def min_version(self) -> str:
        return {1: "6.5", 2: "6.10"}.get(int(self), "")


class Ioctl(enum.IntEnum):
    """DIAG_IOC* requests. The header encodes a pointer's size (``struct user_reg *``), not the
    struct's, in each number."""

    REG = ioc(IOC_READ | IOC_WRITE, "*", 0, 8)  # _IOWR('*', 0, struct user_reg *)
    DEL = ioc(IOC_WRITE, "*", 1, 8)  # _IOW('*', 1, char *)
    UNREG = ioc(IOC_WRITE, "*", 2, 8)  # _IOW('*', 2, struct user_unreg *)

    @property
    def c_name(self) -> str:
        return {0: "DIAG_IOCSREG", 1: "DIAG_IOCSDEL", 2: "DIAG_IOCSUNREG"}[self.value & 0xFF]


def _unsupported(why: str) -> NotSupportedError:
    return NotSupportedError("user_events", why + " (the kernel lacks CONFIG_USER_EVENTS)", MIN_KERNEL)


def data_path() -> str:
    return os.path.join(tracefs.tracefs_root(), DATA_FILE)


def available() -> bool:
    """Whether tracefs has ``user_events_data`` (CONFIG_USER_EVENTS)."""
    try:
        return os.path.exists(data_path())
    except NotSupportedError:
        return False


def open_data() -> FD:
    """Open tracefs ``user_events_data`` read-write: the fd that registers, writes and deletes."""
    path = data_path()
    try:
        return FD(os.open(path, os.O_RDWR | os.O_CLOEXEC))
    except FileNotFoundError:
        raise _unsupported(f"{path} does not exist") from None
    except OSError as exc:
        raise kernel_error(f"open {path}", exc.errno or errno.EIO) from None


def _ioctl(fd: FD | int, request: Ioctl, arg: Any) -> None:
    while True:
        if _libc.ioctl(int(fd), ffi.cast("unsigned long", int(request)), arg) >= 0:
            return
        err = ffi.errno
        if err != errno.EINTR:
            raise OSError(err, os.strerror(err))


def _failed(op: str, exc: OSError, missing: str) -> BPFKitError:
    """What a failed DIAG ioctl ``op`` raises: NotFoundError saying ``missing`` for ENOENT,
    else the kernel's error."""
    err = exc.errno or errno.EIO
    if err == errno.ENOENT:
        return NotFoundError(f"{op}: {missing}")
    return kernel_error(op, err)


@dataclasses.dataclass(frozen=True)
class Enabler:
    """Where the kernel reflects the enabled state: ``bit`` of the ``size``-byte word at ``addr``."""

    addr: int
    bit: int = 0
    size: int = 4

    def check(self) -> None:
        if self.size not in (4, 8):
            raise UsageError(f"enable size {self.size}: the kernel takes 4 or 8 bytes")
        if self.addr % self.size:
            raise UsageError(f"enable address {self.addr:#x} is not {self.size}-byte aligned")
        if not 0 <= self.bit < self.size * 8:
            raise UsageError(f"enable bit {self.bit} does not fit a {self.size}-byte word")


class EnableWord:
    """A 4-byte word of its own for the kernel to set bit 0 of while an event is enabled:
    DIAG_IOCSREG's enable address. The memory is owned by this object and never moves, so
    :attr:`enabler` stays valid for as long as the object lives: keep it until the
    registration is undone (and for ever when unregistering failed).

    :attr:`view` is the word as a memoryview of one u32, read at C speed (a check on every
    emit). ``word[0]`` is its value too, as through C's ``uint32_t *`` (writable, for a test
    standing in for the kernel), and ``int(word)`` its address, as a pointer cast to
    ``uintptr_t`` gives."""

    __slots__ = ("view", "enabler")

    def __init__(self) -> None:
        memory = ffi.new("uint32_t[1]")  # the view holds it (through its buffer) and bounds-checks
        self.view = memoryview(ffi.buffer(memory)).cast("I")
        self.enabler = Enabler(int(ffi.cast("uintptr_t", memory)), 0, 4)

    @property
    def address(self) -> int:
        return self.enabler.addr

    @property
    def enabled(self) -> bool:
        """Whether bit 0 is set: a tracer has the event enabled (one read of the word)."""
        return bool(self.view[0] & 1)

    def __getitem__(self, index: int) -> int:
        return self.view[index]

    def __setitem__(self, index: int, value: int) -> None:
        self.view[index] = value

    def __int__(self) -> int:
        return self.enabler.addr


def register(fd: FD | int, name_args: str, enabler: Enabler, flags: int = 0) -> int:
    """DIAG_IOCSREG: register (or join) the event ``name_args`` describes; returns the write index.

    Errors keep the kernel's reasons: EADDRINUSE for a name already registered with another
    format (or an address/bit pair already registered by this process), EINVAL for a malformed
    description or a flag this kernel lacks, EPERM for PERSIST without CAP_PERFMON.
    """
    enabler.check()
    name = name_args.split(" ", 1)[0]
    raw = name_args.encode()
    if len(raw) >= MAX_EVENT_DESC:
        raise UsageError(f"user event description of {len(raw)} bytes: the kernel takes at most {MAX_EVENT_DESC - 1}")
    text = ffi.new("char[]", raw)
    reg = ffi.new("struct user_reg *")
    reg.size = ffi.sizeof("struct user_reg")
    reg.enable_bit = enabler.bit
    reg.enable_size = enabler.size
    reg.flags = flags
    reg.enable_addr = enabler.addr
    reg.name_args = int(ffi.cast("uintptr_t", text))
    op = f"{Ioctl.REG.c_name} {name}"
    try:
        _ioctl(fd, Ioctl.REG, reg)
    except OSError as exc:
        err = exc.errno or errno.EIO
        if err == errno.EINVAL and flags:
            unknown = [f for f in RegFlag if f & flags]
            if _flags_unknown(fd, name_args, enabler, flags):
                raise NotSupportedError(
                    " and ".join(f.c_name for f in unknown), f"{op}: EINVAL for the flags",
                    max(f.min_version for f in unknown),
                ) from None
        if err == errno.EADDRINUSE:
            raise BusyError(op, err, f"event {name!r} exists with another format, or this enable "
                            f"address/bit ({enabler.addr:#x}/{enabler.bit}) is registered already") from None
        if err in (errno.EPERM, errno.EACCES):
            raise KernelPermissionError(op, err, "CAP_PERFMON" if flags & RegFlag.PERSIST else "",
                                        "registering a persistent event" if flags & RegFlag.PERSIST else "") from None
        if err == errno.EINVAL:
            raise KernelError(op, err, f"the kernel refused the description {name_args!r}") from None
        raise kernel_error(op, err) from None
    return int(reg.write_index)


def _flags_unknown(fd: FD | int, name_args: str, enabler: Enabler, flags: int) -> bool:
    """Whether EINVAL came from ``flags`` (a flag this kernel lacks) rather than the description.

    user_reg_get() checks, in order: size, flags (EINVAL), enable_size, alignment, bit range
    (EINVAL), then access_ok() (EFAULT). With an aligned enable address that is no user address
    the flags decide: EFAULT when they pass, EINVAL when they do not. Nothing is registered.
    """
    reg = ffi.new("struct user_reg *")
    reg.size = ffi.sizeof("struct user_reg")
    reg.enable_size = 4
    reg.flags = flags
    reg.enable_addr = (1 << 63)  # not a user address: access_ok() fails
    try:
        _ioctl(fd, Ioctl.REG, reg)
    except OSError as exc:
        return exc.errno == errno.EINVAL
    return False


def unregister(fd: FD | int, enabler: Enabler) -> None:
    """DIAG_IOCSUNREG: stop updating ``enabler`` (the kernel clears its bit). ENOENT: not registered."""
    unreg = ffi.new("struct user_unreg *")
    unreg.size = ffi.sizeof("struct user_unreg")
    unreg.disable_bit = enabler.bit
    unreg.disable_addr = enabler.addr
    try:
        _ioctl(fd, Ioctl.UNREG, unreg)
    except OSError as exc:
        raise _failed(Ioctl.UNREG.c_name, exc, f"no enabler at {enabler.addr:#x} bit {enabler.bit}") from None


def delete(fd: FD | int, name: str) -> None:
    """DIAG_IOCSDEL ``name`` (every format of it): NotFoundError if there is no such event,
    BusyError (EBUSY) while anything references it (a registration, an enabler, a tracer)."""
    text = ffi.new("char[]", name.encode())
    op = f"{Ioctl.DEL.c_name} {name}"
    try:
        _ioctl(fd, Ioctl.DEL, text)
    except OSError as exc:
        err = exc.errno or errno.EIO
        if err in (errno.EPERM, errno.EACCES):
            raise KernelPermissionError(op, err, "CAP_PERFMON", "deleting a persistent event") from None
        if err == errno.EBUSY:
            raise BusyError(op, err, "the event is still registered, enabled or traced") from None
        raise _failed(op, exc, f"no user event named {name!r}") from None


def write(fd: FD | int, write_index: bytes, parts: Sequence[bytes | bytearray | memoryview]) -> int:
    """writev(index, *parts): one event. Returns the bytes written (index included).

    user_events_write_core() answers, in order: ENOENT for an unknown index, EINVAL when the
    payload is shorter than the fixed fields, EBADF when no tracer has the event enabled, and
    EFAULT when a dynamic field points outside the payload or a string in one is not
    NUL-terminated (user_event_validate(), run by each tracer's probe).
    """
    try:
        return os.writev(int(fd), [write_index, *parts])
    except OSError as exc:
        raise kernel_error("write user_events_data", exc.errno or errno.EIO) from None


# ----------------------------------------------------------------------- status and listing
@dataclasses.dataclass(frozen=True)
class Status:
    """One line of ``user_events_status``: the tracepoint name and who has it enabled."""

    name: str  # tracepoint name: "name", or "name.<hex id>" for multi-format events
    users: tuple[str, ...] = ()  # "ftrace", "perf", "other"

    @property
    def busy(self) -> bool:
        return bool(self.users)


def parse_status(text: str) -> list[Status]:
    """Parse ``user_events_status``: ``name[ # Used by ftrace perf]`` lines, a blank line, counts."""
    found = []
    for line in text.splitlines():
        if not line.strip():
            break
        name, _, comment = line.partition(" #")
        users: tuple[str, ...] = ()
        comment = comment.strip()
        if comment.startswith("Used by"):
            users = tuple(comment[len("Used by"):].split())
        found.append(Status(name.strip(), users))
    return found


def read_status() -> list[Status]:
    """The user events this kernel has (the status file lists every one, in any order)."""
    try:
        return parse_status(tracefs.read_file(STATUS_FILE))
    except FileNotFoundError:
        raise _unsupported(f"{tracefs.tracefs_root()}/{STATUS_FILE} does not exist") from None


def read_dynamic_events() -> list[str]:
    """The ``u:`` lines of tracefs ``dynamic_events`` without the prefix: ``name field;field``."""
    try:
        text = tracefs.read_file("dynamic_events")
    except FileNotFoundError:
        return []
    return [line[len(USER_EVENTS_PREFIX):] for line in text.splitlines() if line.startswith(USER_EVENTS_PREFIX)]
