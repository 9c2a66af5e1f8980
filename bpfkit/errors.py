# SPDX-License-Identifier: Apache-2.0
"""One exception tree for every layer of bpfkit.

Every error names what was attempted, on what, and why it failed. Layers add context as an
error travels up (``attach kprobe do_sys_open: open perf event: ...``) with :meth:`BPFKitError.wrap`,
which keeps the original class, errno and log so callers can still match on them.

    BPFKitError
    ├── KernelError            a syscall or kernel interface failed; carries errno
    │   ├── KernelPermissionError   EPERM/EACCES, names the capability needed
    │   ├── BusyError               EBUSY/EEXIST: something is already attached or exists
    │   └── VerifierError           BPF_PROG_LOAD/BPF_BTF_LOAD rejected; carries the log
    ├── NotSupportedError      this kernel cannot (names the feature and the version that can)
    ├── NotFoundError          symbol, map, program, tracefs event, pin ... does not exist
    ├── ParseError             malformed input: ELF, BTF, probe spec, map definition
    ├── CORERelocationError    a CO-RE relocation that can be neither applied nor poisoned
    └── UsageError             the caller asked for something inconsistent
        └── BTFValueError           a value that does not fit its BTF type (field path, type, range)
"""

from __future__ import annotations

import errno as _errno
import os
from collections.abc import Callable

__all__ = [
    "BPFKitError",
    "KernelError",
    "KernelPermissionError",
    "BusyError",
    "VerifierError",
    "NotSupportedError",
    "NotFoundError",
    "ParseError",
    "CORERelocationError",
    "UsageError",
    "BTFValueError",
    "errno_name",
    "kernel_error",
]


# Aliases where Python's errorcode picks the spelling the kernel sources do not use.
_ERRNO_SPELLING = {_errno.EOPNOTSUPP: "EOPNOTSUPP", _errno.EDEADLK: "EDEADLK", 524: "ENOTSUPP"}


def errno_name(err: int) -> str:
    """``EPERM`` for 1: the symbolic name people search for (as the kernel spells it; 524 is
    the kernel-internal ENOTSUPP that bpf() lets through)."""
    return _ERRNO_SPELLING.get(err) or _errno.errorcode.get(err, f"errno {err}")


class BPFKitError(Exception):
    """Base of every error bpfkit raises."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def __str__(self) -> str:
        return self.message

    def wrap(self, context: str) -> BPFKitError:
        """Prefix ``context: `` to the message, keeping class and attributes; returns self."""
        self.message = f"{context}: {self.message}"
        self.args = (self.message,)
        return self


class KernelError(BPFKitError):
    """A kernel interface failed with ``errno`` while doing ``op`` (e.g. ``BPF_MAP_CREATE``)."""

    def __init__(self, op: str, err: int, detail: str = "") -> None:
        self.op = op
        self.errno = err
        self.detail = detail
        text = f"{op}: {errno_name(err)} ({os.strerror(err)})"
        if detail:
            text += f": {detail}"
        super().__init__(text)


class KernelPermissionError(KernelError):
    """EPERM or EACCES. ``capability`` names what the caller lacks (CAP_BPF, CAP_PERFMON, ...;
    '' when it lacks none and something else refused: lockdown, an LSM, a path outside bpffs);
    ``hint`` says which, in a sentence."""

    def __init__(self, op: str, err: int, capability: str = "", detail: str = "", hint: str | None = None) -> None:
        self.capability = capability
        if hint is None:
            hint = f"needs {capability}" if capability else ""
        self.hint = hint
        text = f"{detail}; {hint}" if detail and hint else (detail or hint)
        super().__init__(op, err, text)


class BusyError(KernelError):
    """EBUSY or EEXIST: the target is in use or the object already exists."""


class VerifierError(KernelError):
    """The kernel rejected a program or BTF blob; ``log`` holds the verifier's whole log."""

    TAIL_LINES = 20

    def __init__(self, op: str, err: int, name: str, log: str, truncated: bool = False) -> None:
        self.name = name
        self.log = log
        self.truncated = truncated
        tail = self.tail()
        detail = f"load {name!r} rejected"
        if tail:
            detail += ":\n" + tail
        elif err == _errno.EPERM:
            detail += " with an empty verifier log (the kernel refused before verification)"
            self.hint = permission_hint(op, err)
            if self.hint:
                detail += f"; {self.hint}"
        super().__init__(op, err, detail)

    def tail(self, lines: int | None = None) -> str:
        """The last ``lines`` lines of the log (where the verifier says what it rejected),
        in :func:`reason_last` order: the reason is the last line."""
        count = self.TAIL_LINES if lines is None else lines
        kept = reason_last(self.log).splitlines()
        return "\n".join(kept[-count:])

    @property
    def reason(self) -> str:
        """The verifier's last message (what it rejected), without its statistics."""
        return self.tail(1)


# The statistics the verifier prints after its verdict (kernel/bpf/verifier.c,
# print_verification_stats(): "processed N insns" always, the other two with BPF_LOG_STATS).
_STATS = ("processed ", "verification time ", "stack depth ")


def reason_last(log: str) -> str:
    """``log`` without blank lines and with the verifier's closing statistics moved before
    its last message, so that the last line says why (what a script or a person reads)."""
    lines = [line for line in log.rstrip("\n").splitlines() if line.strip()]
    stats: list[str] = []
    while lines and lines[-1].startswith(_STATS):
        stats.insert(0, lines.pop())
    if not lines:
        return "\n".join(stats)
    return "\n".join(lines[:-1] + stats + lines[-1:])


class NotSupportedError(BPFKitError):
    """This kernel (or machine) lacks ``feature``; ``min_version`` names the release that has it."""

    def __init__(self, feature: str, reason: str = "", min_version: str = "") -> None:
        self.feature = feature
        self.reason = reason
        self.min_version = min_version
        text = f"{feature} is not supported"
        if reason:
            text += f": {reason}"
        if min_version:
            text += f" (needs Linux {min_version} or newer)"
        super().__init__(text)


class NotFoundError(BPFKitError):
    """A named thing (symbol, program, map, pin, trace event) does not exist."""


class ParseError(BPFKitError):
    """Malformed input: an ELF object, BTF, a probe spec, a map definition."""


class CORERelocationError(BPFKitError):
    """A CO-RE relocation can be neither applied nor poisoned: a malformed record, an
    instruction that does not hold what the compiler computed, or target candidates that
    disagree (ambiguity). A relocation the kernel merely cannot satisfy is poisoned instead."""


class UsageError(BPFKitError):
    """The arguments contradict each other or the object they apply to."""


class BTFValueError(UsageError, ValueError):
    """A Python value that does not fit a BTF type (bpfkit.btf.values): ``path`` names the field
    (``value.comm``, ``key.hops[2].port``), ``expected`` the type and its range, ``value`` what
    was given. Also a ValueError, for code that catches those."""

    def __init__(self, path: str, expected: str, value: object, why: str = "") -> None:
        self.path = path
        self.expected = expected
        self.value = value
        shown = repr(value)
        if len(shown) > 60:
            shown = shown[:57] + "..."
        text = f"{path}: expected {expected}, got {shown}"
        if why:
            text += f" ({why})"
        super().__init__(text)


# Which capability a failing operation needs, for EPERM messages. Since 5.8 CAP_BPF covers
# bpf() map/program creation, CAP_PERFMON tracing programs and perf_event_open; older kernels
# need CAP_SYS_ADMIN for all of it.
_CAPABILITY_FOR_OP = {
    "perf_event_open": "CAP_PERFMON",
    "BPF_PROG_LOAD": "CAP_BPF (+ CAP_PERFMON for tracing, CAP_NET_ADMIN for networking)",
    "BPF_LINK_CREATE": "CAP_BPF and CAP_PERFMON",
    "BPF_RAW_TRACEPOINT_OPEN": "CAP_BPF and CAP_PERFMON",
    "BPF_PROG_GET_NEXT_ID": "CAP_SYS_ADMIN",
    "BPF_MAP_GET_NEXT_ID": "CAP_SYS_ADMIN",
    "BPF_LINK_GET_NEXT_ID": "CAP_SYS_ADMIN",
    "BPF_BTF_GET_NEXT_ID": "CAP_SYS_ADMIN",
    "BPF_PROG_GET_FD_BY_ID": "CAP_SYS_ADMIN",
    "BPF_MAP_GET_FD_BY_ID": "CAP_SYS_ADMIN",
    "BPF_LINK_GET_FD_BY_ID": "CAP_SYS_ADMIN",
    "BPF_BTF_GET_FD_BY_ID": "CAP_SYS_ADMIN",
    "BPF_ENABLE_STATS": "CAP_SYS_ADMIN",
}


_explain_permission: Callable[..., tuple[str, str]] | None = None


def set_permission_explainer(fn: Callable[..., tuple[str, str]]) -> None:
    """Installed by bpfkit._kernel.caps: ``fn(op, err, detail, path)`` -> (missing, hint) from the
    process's real capability sets and the kernel's sysctls."""
    global _explain_permission
    _explain_permission = fn


def permission_hint(op: str, err: int, needs_also: tuple[str, ...] = ()) -> str:
    """What is missing for EPERM/EACCES from ``op``, in a sentence ('' without an explainer)."""
    if _explain_permission is None:
        return ""
    try:
        return _explain_permission(op, err, "", None, needs_also)[1]
    except Exception:
        return ""


def kernel_error(op: str, err: int, detail: str = "", path: str | None = None) -> KernelError:
    """The KernelError subclass that fits ``err`` for operation ``op`` (``path``: the file the
    operation was on, for pins)."""
    if err in (_errno.EPERM, _errno.EACCES):
        if _explain_permission is not None:
            try:
                missing, hint = _explain_permission(op, err, detail, path)
            except Exception:  # a hint must never hide the error itself
                pass
            else:
                return KernelPermissionError(op, err, missing, detail, hint)
        return KernelPermissionError(op, err, _CAPABILITY_FOR_OP.get(op, "CAP_BPF"), detail)
    if err in (_errno.EBUSY, _errno.EEXIST):
        return BusyError(op, err, detail)
    return KernelError(op, err, detail)
