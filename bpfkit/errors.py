# SPDX-License-Identifier: Apache-2.0
"""One exception tree for every layer of bpfkit.

Every error names what was attempted, on what, and why it failed. Layers add context as an
error travels up (``attach kprobe do_sys_open: open perf event: ...``) with :meth:`BPFKitError.wrap`,
which keeps the original class, errno and log so callers can still match on them.

Errors are data: what a message says is also a field, set when the error is built (``errno``,
``op``, ``feature``, ``min_version``, ``hints``), and the message is rendered from them.

    BPFKitError                          .hints: what to do about it (rendered "; "-separated)
    ├── KernelError            (OSError) a syscall or kernel interface failed; .op, .errno, .strerror
    │   ├── KernelPermissionError   EPERM/EACCES, names the capability needed
    │   ├── BusyError               EBUSY/EEXIST: something is already attached or exists
    │   ├── VerifierError           BPF_PROG_LOAD/BPF_BTF_LOAD rejected; carries the log
    │   └── KernelNotSupportedError EOPNOTSUPP/ENOTSUPP (524): also a NotSupportedError
    ├── NotSupportedError      this kernel cannot: .feature, .reason, .min_version (the release that can)
    │   └── KernelNotSupportedError (the kernel said so, with an errno)
    ├── NotFoundError          symbol, map, program, tracefs event, pin ... does not exist
    ├── ParseError             malformed input: ELF, BTF, probe spec, map definition
    ├── CORERelocationError    a CO-RE relocation that can be neither applied nor poisoned
    ├── RingBufferFullError    a user ring buffer has no room (the BPF side has not drained it)
    └── UsageError             the caller asked for something inconsistent
        └── BTFValueError           a value that does not fit its BTF type (field path, type, range)

So ``except NotSupportedError`` catches "this kernel cannot" whether bpfkit's own probe found
it or the kernel answered EOPNOTSUPP/ENOTSUPP (as cilium/ebpf's ``ErrNotSupported``, which
its feature tests return and its link code returns for those errnos, site by site), and
``except OSError`` catches every kernel failure with its errno. ``KernelError(op, err)`` picks
KernelNotSupportedError by itself for those errnos, as ``OSError(errno.ENOENT, ...)`` gives a
FileNotFoundError; :func:`kernel_error` also picks the permission and busy classes.
"""

from __future__ import annotations

import errno as _errno
import os
from collections.abc import Callable, Iterable

# typing costs ~2 ms to import, on every command's start-up: its names are for the type checker.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Self

__all__ = [
    "BPFKitError",
    "KernelError",
    "KernelPermissionError",
    "BusyError",
    "VerifierError",
    "NotSupportedError",
    "KernelNotSupportedError",
    "NotFoundError",
    "ParseError",
    "CORERelocationError",
    "UsageError",
    "BTFValueError",
    "RingBufferFullError",
    "errno_name",
    "kernel_error",
]


ENOTSUPP = 524  # kernel-internal (include/linux/errno.h), not ENOTSUP; bpf() lets it through

# The errnos that mean "this kernel cannot": EOPNOTSUPP (ENOTSUP is the same number on Linux)
# from UAPI paths, ENOTSUPP from in-kernel ones (a map type without the batch or lookup-and-delete
# operation, an instruction uprobes cannot single-step, a trampoline the arch cannot build).
NOT_SUPPORTED_ERRNOS = frozenset({_errno.EOPNOTSUPP, ENOTSUPP})

# Aliases where Python's errorcode picks the spelling the kernel sources do not use.
_ERRNO_SPELLING = {_errno.EOPNOTSUPP: "EOPNOTSUPP", _errno.EDEADLK: "EDEADLK", ENOTSUPP: "ENOTSUPP"}


def errno_name(err: int) -> str:
    """``EPERM`` for 1: the symbolic name people search for (as the kernel spells it; 524 is
    the kernel-internal ENOTSUPP that bpf() lets through)."""
    return _ERRNO_SPELLING.get(err) or _errno.errorcode.get(err, f"errno {err}")


_STRERROR: dict[int, str] = {}


def strerror(err: int) -> str:
    """os.strerror(err), remembered (it costs ~0.8 us, a third of building a KernelError)."""
    text = _STRERROR.get(err)
    if text is None:
        text = _STRERROR[err] = os.strerror(err)
    return text


def _hint_tuple(hints: Iterable[str]) -> tuple[str, ...]:
    return tuple(h for h in hints if h) if hints else ()


class BPFKitError(Exception):
    """Base of every error bpfkit raises. ``hints`` say what to do about it: set when the error
    is built (``hints=``), they end the message, each after ``; ``."""

    hints: tuple[str, ...] = ()

    def __init__(self, message: str, *, hints: Iterable[str] = ()) -> None:
        if hints:
            self.hints = _hint_tuple(hints)
            message = "; ".join((message, *self.hints) if message else self.hints)
        super().__init__(message)
        self.message = message
        self.args = (message,)

    def __str__(self) -> str:
        return self.message

    def __reduce__(self) -> tuple[object, ...]:
        """Pickled with its fields, not its constructor's arguments (a KernelError is built
        from op and errno, but its args hold the message): errors cross process pools and
        multiprocessing queues whole."""
        state = dict(self.__dict__)
        if isinstance(self, OSError):  # OSError's fields are slots, not in __dict__
            state.update(errno=self.errno, strerror=self.strerror, filename=self.filename)
        return (_rebuild, (type(self), self.args, state))

    def wrap(self, context: str) -> BPFKitError:
        """Prefix ``context: `` to the message, keeping class and attributes; returns self."""
        self.message = f"{context}: {self.message}"
        self.args = (self.message,)
        return self

    def add_hint(self, hint: str) -> Self:
        """Record ``hint`` (what a caller knows that the raise site did not: the feature a
        refused program kind needs, how to size a map) in ``hints`` and end the message with
        ``; hint``; returns self. For errors that travel up before the hint is known."""
        if hint:
            self.hints += (hint,)
            self.message = f"{self.message}; {hint}"
            self.args = (self.message,)
        return self

    def replace_hint(self, old: str, new: str) -> Self:
        """Put ``new`` in place of hint ``old``, in ``hints`` and in the message; returns self."""
        if old in self.hints and new and new != old:
            self.hints = tuple(new if h == old else h for h in self.hints)
            self.message = self.message.replace(old, new)
            self.args = (self.message,)
        return self


def _rebuild(cls: type[BPFKitError], args: tuple[object, ...], state: dict[str, object]) -> BPFKitError:
    """An unpickled error: made without its __init__ (see BPFKitError.__reduce__)."""
    error: BPFKitError = (OSError if issubclass(cls, OSError) else Exception).__new__(cls)
    error.args = args
    for name, value in state.items():
        setattr(error, name, value)
    return error


class KernelError(BPFKitError, OSError):
    """A kernel interface failed with ``errno`` while doing ``op`` (e.g. ``BPF_MAP_CREATE``).

    An OSError too: ``errno`` and ``strerror`` are the kernel's (``filename`` the pin path, for
    the operations on one), and ``except OSError`` catches it; ``str()`` stays bpfkit's message
    (``op: ENAME (strerror): detail; hints``), never OSError's ``[Errno N]`` form.
    ``KernelError(op, err)`` with EOPNOTSUPP or ENOTSUPP is a :class:`KernelNotSupportedError`."""

    errno: int
    strerror: str

    def __new__(cls, op: str, err: int, *args: object, **kwargs: object) -> Self:
        # The subclass an errno stands for, as OSError.__new__ does for ENOENT and the like.
        # With __new__ overridden, OSError's own __init__ does nothing: __init__ sets the fields.
        target: type[KernelError] = cls
        if cls is KernelError and err in NOT_SUPPORTED_ERRNOS:
            target = KernelNotSupportedError
        return OSError.__new__(target)  # type: ignore[return-value]

    def __init__(self, op: str, err: int, detail: str = "", *, hints: Iterable[str] = ()) -> None:
        self.op = op
        self.errno = err
        self.strerror = text = _STRERROR.get(err) or strerror(err)
        self.detail = detail
        text = f"{op}: {errno_name(err)} ({text})"
        if hints:  # the detail (or the first hint) after ": ", the rest after "; "
            self.hints = parts = _hint_tuple(hints)
            if detail or parts:
                text += ": " + "; ".join((detail, *parts) if detail else parts)
        elif detail:
            text += f": {detail}"
        # BPFKitError.__init__'s work without its calls: kernel errors are raised often
        # (every missing map key), and OSError.__init__ does nothing here (see __new__).
        self.message = text
        self.args = (text,)


class KernelPermissionError(KernelError):
    """EPERM or EACCES. ``capability`` names what the caller lacks (CAP_BPF, CAP_PERFMON, ...;
    '' when it lacks none and something else refused: lockdown, an LSM, a path outside bpffs);
    ``hint`` says which, in a sentence (also the first of ``hints``)."""

    def __init__(self, op: str, err: int, capability: str = "", detail: str = "", hint: str | None = None, *,
                 hints: Iterable[str] = ()) -> None:
        self.capability = capability
        if hint is None:
            hint = f"needs {capability}" if capability else ""
        self.hint = hint
        super().__init__(op, err, detail, hints=(hint, *hints))


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
        self.hint = ""
        if tail:
            detail += ":\n" + tail
        elif err == _errno.EPERM:
            detail += " with an empty verifier log (the kernel refused before verification)"
            self.hint = permission_hint(op, err)
        super().__init__(op, err, detail, hints=(self.hint,))

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
    """This kernel (or machine) lacks ``feature``; ``reason`` says how that was found out;
    ``min_version`` names the release that has it ('' when none does or it is unknown);
    ``hints`` what to do instead. All are set here and rendered as
    ``feature is not supported: reason (needs Linux V or newer); hint``."""

    feature: str
    reason: str
    min_version: str

    def __init__(self, feature: str, reason: str = "", min_version: str = "", *, hints: Iterable[str] = ()) -> None:
        self.feature = feature
        self.reason = reason
        self.min_version = min_version
        text = f"{feature} is not supported"
        if reason:
            text += f": {reason}"
        if min_version:
            text += f" (needs Linux {min_version} or newer)"
        super().__init__(text, hints=hints)


class KernelNotSupportedError(KernelError, NotSupportedError):
    """EOPNOTSUPP or ENOTSUPP (524) from a kernel interface: a :class:`KernelError` (``op``,
    ``errno``, its message) that is also a :class:`NotSupportedError`. ``feature`` is what the
    raise site names, else ``op``; ``reason`` is the kernel's answer (``EOPNOTSUPP (Operation not
    supported): detail``); ``min_version``, when given, ends the message as NotSupportedError's
    does. ``KernelError(op, err)`` returns one for those errnos. A program or BTF blob the
    kernel rejects stays a :class:`VerifierError` whatever its errno: its log says why."""

    def __init__(self, op: str, err: int, detail: str = "", *, hints: Iterable[str] = (),
                 feature: str = "", min_version: str = "") -> None:
        KernelError.__init__(self, op, err, detail, hints=() if min_version else hints)
        self.feature = feature or op
        said = f"{errno_name(err)} ({self.strerror})"
        self.reason = f"{said}: {detail}" if detail else said
        self.min_version = min_version
        if min_version:  # as NotSupportedError: the release before the hints
            self.message += f" (needs Linux {min_version} or newer)"
            self.args = (self.message,)
            for hint in hints:
                self.add_hint(hint)


class NotFoundError(BPFKitError):
    """A named thing (symbol, program, map, pin, trace event) does not exist."""


class ParseError(BPFKitError):
    """Malformed input: an ELF object, BTF, a probe spec, a map definition."""


class CORERelocationError(BPFKitError):
    """A CO-RE relocation can be neither applied nor poisoned: a malformed record, an
    instruction that does not hold what the compiler computed, or target candidates that
    disagree (ambiguity). A relocation the kernel merely cannot satisfy is poisoned instead."""


class RingBufferFullError(BPFKitError):
    """A USER_RINGBUF has no room for the record (the BPF side has not drained it);
    bpfkit.events.ringbuf's UserRingBuffer.reserve() raises it."""


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


def kernel_error(op: str, err: int, detail: str = "", path: str | None = None, *,
                 hints: Iterable[str] = ()) -> KernelError:
    """The KernelError subclass that fits ``err`` for operation ``op``: KernelPermissionError
    (with the capability it needs), BusyError, KernelNotSupportedError, else KernelError.
    ``path``: the file the operation was on (pins), also the OSError ``filename``; ``hints``
    end the message (a permission error's own hint comes first)."""
    exc: KernelError
    if err in (_errno.EPERM, _errno.EACCES):
        capability, hint = _CAPABILITY_FOR_OP.get(op, "CAP_BPF"), None
        if _explain_permission is not None:
            try:
                capability, hint = _explain_permission(op, err, detail, path)
            except Exception:  # a hint must never hide the error itself
                capability, hint = _CAPABILITY_FOR_OP.get(op, "CAP_BPF"), None
        exc = KernelPermissionError(op, err, capability, detail, hint, hints=hints)
    elif err in (_errno.EBUSY, _errno.EEXIST):
        exc = BusyError(op, err, detail, hints=hints)
    else:
        exc = KernelError(op, err, detail, hints=hints)  # KernelNotSupportedError for EOPNOTSUPP/ENOTSUPP
    if path is not None:
        exc.filename = path
    return exc
