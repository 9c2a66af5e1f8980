# SPDX-License-Identifier: Apache-2.0
"""Names a tool prints for the numbers its programs see: syscalls, errnos (the kernel's
internal ones too), signals; and whether a tracepoint exists on the running kernel.

    from bpfkit import syscalls
    syscalls.syscall_name(257)                            # 'openat' (x86_64; this machine's table)
    syscalls.syscall_number("openat")                     # 257 on x86_64, 56 on arm64
    syscalls.errno_name(-2)                               # 'ENOENT' (a syscall's return, sign ignored)
    syscalls.errno_name(512)                              # 'ERESTARTSYS' (include/linux/errno.h)
    syscalls.signal_name(9)                               # 'SIGKILL'
    syscalls.tracepoint_exists("syscalls", "sys_enter_open")  # False on arm64: no open(2) there

The syscall tables are x86_64's and arm64's, generated from the kernel's own tables
(bpfkit.metrics.syscall_tables, scripts/gen_syscalls.py): a number keeps its syscall, so they
name every older kernel's syscalls too. Other machines have no table: names are None there.
What is asked of these is what libbpf-tools' syscall_helpers.c and trace_helpers.c give their
tools (syscall_name, tracepoint_exists); a name that is not known is None, and the caller
prints the number, as the C tools do.
"""

from __future__ import annotations

import errno as _errno
import os
import signal as _signal
from collections.abc import Mapping

from ._kernel import tracefs as _tracefs
from .errors import KernelPermissionError, NotSupportedError
from .errors import errno_name as _errors_errno_name
from .metrics import syscall_tables as _tables
from .metrics.decoders import KERNEL_ERRNOS
from .metrics.syscall_tables import ARM64, X86_64
from .metrics.syscall_tables import KERNEL as TABLES_KERNEL

__all__ = ["syscall_name", "syscall_number", "syscall_table", "errno_name", "errno_number", "signal_name",
           "tracepoint_exists", "KERNEL_ERRNOS", "SIGNALS", "TABLES_KERNEL", "X86_64", "ARM64"]

# Signals 1-31 as include/uapi/asm-generic/signal.h and arch/x86/include/uapi/asm/signal.h
# number them (the same numbers on x86_64 and arm64; SIGIOT, SIGPOLL, SIGCLD are aliases).
SIGNALS: Mapping[int, str] = {
    1: "SIGHUP", 2: "SIGINT", 3: "SIGQUIT", 4: "SIGILL", 5: "SIGTRAP", 6: "SIGABRT", 7: "SIGBUS", 8: "SIGFPE",
    9: "SIGKILL", 10: "SIGUSR1", 11: "SIGSEGV", 12: "SIGUSR2", 13: "SIGPIPE", 14: "SIGALRM", 15: "SIGTERM",
    16: "SIGSTKFLT", 17: "SIGCHLD", 18: "SIGCONT", 19: "SIGSTOP", 20: "SIGTSTP", 21: "SIGTTIN", 22: "SIGTTOU",
    23: "SIGURG", 24: "SIGXCPU", 25: "SIGXFSZ", 26: "SIGVTALRM", 27: "SIGPROF", 28: "SIGWINCH", 29: "SIGIO",
    30: "SIGPWR", 31: "SIGSYS",
}
_SIGRTMAX = 64  # the kernel's _NSIG on x86_64 and arm64


def _machine(machine: str | None) -> str:
    return os.uname().machine if machine is None else machine


def syscall_table(machine: str | None = None) -> Mapping[int, str]:
    """Every syscall number -> name of ``machine`` (this one's by default, as uname(2) names it:
    x86_64, aarch64; arm64 and amd64 are accepted); empty for a machine without a table."""
    table = _tables._TABLES.get(_machine(machine))  # by uname's machine, and arm64, amd64
    return {} if table is None else table


def syscall_name(nr: int, machine: str | None = None) -> str | None:
    """The name of syscall ``nr`` on ``machine`` (this one's by default); None for a number
    without a syscall or a machine without a table."""
    return _tables.syscall_name(nr, _machine(machine))


_BY_NAME: dict[str, dict[str, int]] = {}


def syscall_number(name: str, machine: str | None = None) -> int | None:
    """The number of syscall ``name`` (``openat``; a ``sys_`` prefix, as tracepoints spell it,
    is taken off) on ``machine`` (this one's by default); None if it has no such syscall."""
    key = _machine(machine)
    by_name = _BY_NAME.get(key)
    if by_name is None:
        by_name = _BY_NAME[key] = {v: k for k, v in syscall_table(key).items()}
    found = by_name.get(name)
    if found is None and name.startswith("sys_"):
        found = by_name.get(name[4:])
    return found


def errno_name(n: int) -> str | None:
    """The name of errno ``n`` as the kernel spells it (``ENOENT``; 95 ``EOPNOTSUPP``), the
    kernel-internal ones above 511 included (``ERESTARTSYS``, 524 ``ENOTSUPP``: a syscall's
    exit or a function's return value can hold them). A negative ``n`` (a syscall's return) is
    read as ``-n``. None for a number that is no errno (0 included)."""
    n = abs(n)
    name = KERNEL_ERRNOS.get(n)
    if name is None and n in _errno.errorcode:
        name = _errors_errno_name(n)
    return name


def errno_number(name: str) -> int | None:
    """The errno called ``name`` (``ENOENT`` -> 2; the kernel's internal ones and Python's
    aliases such as ENOTSUP and EWOULDBLOCK too); None if there is none."""
    number = getattr(_errno, name, None)
    if isinstance(number, int):
        return number
    return next((k for k, v in KERNEL_ERRNOS.items() if v == name), None)


def signal_name(n: int) -> str | None:
    """The name of signal ``n``: 1-31 by the kernel's names (``SIGKILL``), real-time signals as
    ``kill -l`` prints them on this host (glibc: ``SIGRTMIN`` is 34, then ``SIGRTMIN+1`` ..
    ``SIGRTMIN+15``, ``SIGRTMAX-14`` .. ``SIGRTMAX`` 64). None for 0, for 32 and 33 (glibc keeps
    them for itself: no name) and numbers past 64."""
    name = SIGNALS.get(n)
    if name is not None:
        return name
    low = int(getattr(_signal, "SIGRTMIN", 34))
    high = int(getattr(_signal, "SIGRTMAX", _SIGRTMAX))
    if not low <= n <= high:
        return None
    if n == low:
        return "SIGRTMIN"
    if n == high:
        return "SIGRTMAX"
    middle = (low + high) // 2  # bash's kill -l names the lower half from SIGRTMIN, the rest from SIGRTMAX
    return f"SIGRTMIN+{n - low}" if n <= middle else f"SIGRTMAX-{high - n}"


def tracepoint_exists(group: str, name: str) -> bool:
    """Whether tracepoint ``group:name`` exists on the running kernel: its ``format`` file is in
    tracefs (libbpf-tools' trace_helpers.c tracepoint_exists, used to pick ``sys_enter_open``
    or ``sys_enter_openat2`` before loading). False when there is no tracefs; a name that
    could not be a trace event (``../x``) is a ParseError; tracefs this user may not read is a
    KernelPermissionError rather than a wrong False."""
    try:
        directory = _tracefs.event_dir(group, name)
    except NotSupportedError:
        return False  # no tracefs at all: no tracepoint can be attached either
    path = os.path.join(directory, "format")
    try:
        os.stat(path)
    except FileNotFoundError:
        return False
    except PermissionError as exc:
        raise KernelPermissionError(f"stat {path}", exc.errno or _errno.EACCES, "",
                                    "tracefs is for root only unless mounted with a gid= or mode= that admits "
                                    "this user") from None
    except NotADirectoryError:
        return False
    return True
