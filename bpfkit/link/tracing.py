# SPDX-License-Identifier: Apache-2.0
"""Raw tracepoints and BTF-enabled tracing programs (fentry, fexit, fmod_ret, tp_btf, lsm).

Terms:

* A **raw tracepoint** (``SEC("raw_tp/sys_enter")``, BPF_PROG_TYPE_RAW_TRACEPOINT, 4.17) runs on
  a kernel tracepoint with the tracepoint's raw arguments (``ctx->args[i]``), without the
  perf-event and trace-buffer plumbing of ordinary tracepoints. It is attached by name with
  BPF_RAW_TRACEPOINT_OPEN. Since 5.7 (70ed506c3bbc) the fd that returns is a bpf_link (pin,
  info); before, it is a plain anonymous fd that only detaches when closed.
  ``raw_tp.w`` programs (RAW_TRACEPOINT_WRITABLE, 5.2) may write the tracepoint's buffer; only
  tracepoints declared writable accept them (``bpf_test_finish``, ``nbd_*``).
* **BTF-enabled** programs (BPF_PROG_TYPE_TRACING / LSM) name their target when they are
  *loaded* (attach_btf_id, resolved by the loader from the section: ``fentry/do_unlinkat``,
  ``tp_btf/sched_switch``, ``lsm/file_open``), so attaching needs no target at all:
  BPF_RAW_TRACEPOINT_OPEN with a NULL name (5.5) or BPF_LINK_CREATE with the program's expected
  attach type (5.19, 2fcc82411e74, which also brought bpf_cookie to fentry/fexit/fmod_ret/lsm).
  fentry/fexit/fmod_ret/lsm run through BPF trampolines; tp_btf is a raw tracepoint with typed
  arguments (its link is a raw tracepoint link; cookie since 6.10, 68ca5d4eebb8).

Like libbpf, :func:`attach_tracing` uses BPF_LINK_CREATE for trampolines when it can and falls
back to BPF_RAW_TRACEPOINT_OPEN when the kernel refuses it with EINVAL (before 5.19); a cookie
needs the link path and says which kernel has it otherwise. tp_btf always takes
BPF_RAW_TRACEPOINT_OPEN (with its cookie on 6.10+), as libbpf does.
"""

from __future__ import annotations

import dataclasses
import errno
from typing import TYPE_CHECKING, Any

from .._kernel import bpf as _bpf
from .._kernel.consts import AttachType, LinkType, ProgType
from .._kernel.fd import FD
from .._protocols import ProgramArg
from ..errors import BPFKitError, KernelError, NotFoundError, NotSupportedError, UsageError
from .base import FdOnlyLink, Link, RawLink, _prog_fd
from .kind import AttachOptions, LinkKind, Section, SectionTarget

if TYPE_CHECKING:
    from ..freplace import FreplaceTarget
    from ..probespec import ProbeSpec

__all__ = [
    "RawTracepointLink",
    "TracingLink",
    "RawTracepointFd",
    "TracingInfo",
    "raw_tracepoint",
    "attach_tracing",
    "fentry",
    "fexit",
    "fmod_ret",
    "tp_btf",
    "lsm",
    "freplace",
]


@dataclasses.dataclass(frozen=True)
class TracingInfo:
    """A BPF_LINK_TYPE_TRACING link's details: how it is attached and to what.

    ``target_obj_id`` is the id of the BTF object (vmlinux or a module) holding the target, or
    of the target program for freplace; ``target_btf_id`` the target's id in it. Older kernels
    (before about 6.0) report both as 0.
    """

    attach_type: AttachType | int
    target_obj_id: int
    target_btf_id: int


def _decode_tracing(raw: Any) -> TracingInfo:
    t = raw.tracing
    try:
        attach_type: AttachType | int = AttachType(int(t.attach_type))
    except ValueError:
        attach_type = int(t.attach_type)
    return TracingInfo(attach_type, int(t.target_obj_id), int(t.target_btf_id))


class _NoUpdate(RawLink):
    """Raw tracepoint and tracing links cannot swap their program: the kernel's link ops have no
    update_prog, so BPF_LINK_UPDATE gives EINVAL (EOPNOTSUPP on some kinds)."""

    def update(self, prog: ProgramArg, old: ProgramArg | None = None) -> None:
        self._check_open("update")
        try:
            super().update(prog, old)
        except KernelError as exc:
            if exc.errno == errno.EINVAL:
                raise NotSupportedError(
                    f"update of a {self.kind} link",
                    "the kernel cannot replace the program of this link kind; attach the new program, then close the old link",
                ) from None
            raise


class RawTracepointLink(_NoUpdate):
    """A bpf_link from BPF_RAW_TRACEPOINT_OPEN (raw_tp, raw_tp.w, tp_btf); info names the
    tracepoint (RawTracepointInfo)."""

    kind = "raw_tracepoint"


class TracingLink(_NoUpdate):
    """A bpf_link of an fentry/fexit/fmod_ret/lsm (BPF_LINK_TYPE_TRACING) or tp_btf program
    (BPF_LINK_TYPE_RAW_TRACEPOINT); ``info().detail`` is TracingInfo or RawTracepointInfo."""

    kind = "tracing"


class RawTracepointFd(FdOnlyLink):
    """An attachment made by BPF_RAW_TRACEPOINT_OPEN on a kernel before 5.7, where the fd is
    not a bpf_link: the program runs until the fd closes. pin, unpin, update, detach and info
    raise NotSupportedError."""

    kind = "raw_tracepoint (fd)"

    def __init__(self, fd: FD, description: str) -> None:
        self.fd = fd
        self.description = description

    @property
    def closed(self) -> bool:
        return self.fd.closed

    def _unsupported(self, what: str) -> NotSupportedError:
        return NotSupportedError(
            f"{what} of {self.description}",
            "BPF_RAW_TRACEPOINT_OPEN gave a plain fd, not a raw_tp bpf_link (raw_tp bpf_link, 5.7)",
            "5.7",
        )

    def close(self) -> None:
        self.fd.close()

    def __repr__(self) -> str:
        return f"RawTracepointFd({self.description}, fd={self.fd!r})"


def _wrap(fd: FD, cls: type[RawLink], description: str) -> RawLink | RawTracepointFd:
    """A link object for a fresh attachment fd: a bpf_link (5.7+) or the pre-5.7 plain fd."""
    if _bpf.obj_kind(fd) == "link":
        return cls(fd)
    return RawTracepointFd(fd, description)


# ------------------------------------------------------------------------ raw tracepoints
_RAW_TP_TYPES = (ProgType.RAW_TRACEPOINT, ProgType.RAW_TRACEPOINT_WRITABLE)


def raw_tracepoint(name: str, prog: ProgramArg, *, cookie: int = 0) -> RawTracepointLink | RawTracepointFd:
    """Attach a raw_tp (or writable raw_tp.w) program to the tracepoint ``name``
    (``sys_enter``, ``sched_switch``: the event name, without its group).

    ``cookie`` (6.10) is what bpf_get_attach_cookie() returns in the program.
    """
    what = f"raw tracepoint {name}"
    ptype = getattr(prog, "type", None)
    if ptype is not None and ptype not in _RAW_TP_TYPES:
        hint = " (tp_btf programs: link.tp_btf(prog))" if ptype == ProgType.TRACING else ""
        raise UsageError(f"attach {what}: program {getattr(prog, 'name', '')!r} is a "
                         f"{getattr(ptype, 'kernel_name', ptype)} program, not raw_tracepoint{hint}")
    if not name:
        raise UsageError(f"attach raw tracepoint: no tracepoint name for program {getattr(prog, 'name', '')!r}")
    try:
        fd = _bpf.raw_tracepoint_open(name, _prog_fd(prog), cookie)
    except KernelError as exc:
        if exc.errno == errno.ENOENT:
            raise NotFoundError(f"attach {what}: the kernel has no tracepoint {name!r} "
                                "(names as in /sys/kernel/tracing/available_events, without the group)") from None
        if exc.errno == errno.EINVAL and cookie:
            raise NotSupportedError(f"bpf_cookie on {what}", "BPF_RAW_TRACEPOINT_OPEN refused the cookie field",
                                    "6.10") from None
        if exc.errno == errno.EINVAL and ptype == ProgType.RAW_TRACEPOINT_WRITABLE:
            raise exc.wrap(f"attach {what}: the tracepoint is not writable, or the program accesses more "
                           "of its buffer than the tracepoint allows") from None
        raise exc.wrap(f"attach {what}")
    return _wrap(fd, RawTracepointLink, what)  # type: ignore[return-value]


# ------------------------------------------------------------------ BTF tracing programs
_TRACING_KINDS = {
    AttachType.TRACE_FENTRY: "fentry",
    AttachType.TRACE_FEXIT: "fexit",
    AttachType.MODIFY_RETURN: "fmod_ret",
    AttachType.TRACE_RAW_TP: "tp_btf",
    AttachType.LSM_MAC: "lsm",
}


def _describe(prog: ProgramArg, attach_type: AttachType | None) -> str:
    kind = _TRACING_KINDS.get(attach_type, "tracing") if attach_type is not None else "tracing"
    target = getattr(prog, "attach_to", "") or getattr(getattr(prog, "spec", None), "attach_to", "")
    return f"{kind} program {getattr(prog, 'name', '')!r}" + (f" on {target}" if target else "")


def attach_tracing(prog: ProgramArg, *, cookie: int = 0) -> TracingLink | RawTracepointFd:
    """Attach a loaded fentry/fexit/fmod_ret/tp_btf/lsm program at the target it was loaded
    for (its attach_btf_id). ``cookie`` (5.19; tp_btf 6.10) is what bpf_get_attach_cookie()
    returns in the program.

    A tracing program is attached once at a time (EBUSY otherwise); newer kernels (about 6.0)
    let it attach again after its link is closed, older ones need it loaded again.
    """
    ptype = getattr(prog, "type", None)
    if ptype == ProgType.EXT:
        if cookie:
            raise UsageError(f"attach freplace program {getattr(prog, 'name', '')!r}: freplace links take no cookie")
        return freplace(prog)
    attach_type = getattr(prog, "attach_type", None)
    what = _describe(prog, attach_type)
    if ptype is not None and ptype not in (ProgType.TRACING, ProgType.LSM):
        hint = " (raw_tp programs: link.raw_tracepoint(name, prog))" if ptype in _RAW_TP_TYPES else ""
        raise UsageError(f"attach {what}: a {getattr(ptype, 'kernel_name', ptype)} program is not a "
                         f"BTF tracing program (fentry, fexit, fmod_ret, tp_btf, lsm){hint}")
    if attach_type == AttachType.TRACE_ITER:
        raise UsageError(f"attach {what}: iterator programs attach with bpfkit.link.iterate(prog)")
    if attach_type == AttachType.LSM_CGROUP:
        raise NotSupportedError(f"attach {what}", "lsm_cgroup programs attach to a cgroup, which bpfkit does not do yet")
    if attach_type is not None and attach_type not in _TRACING_KINDS:
        raise UsageError(f"attach {what}: attach type {getattr(attach_type, 'name', attach_type)} is not one attach_tracing handles")
    prog_fd = _prog_fd(prog)
    fd: FD | None = None
    try:
        if attach_type == AttachType.TRACE_RAW_TP:
            # Like libbpf, tp_btf goes through BPF_RAW_TRACEPOINT_OPEN: BPF_LINK_CREATE takes
            # tp_btf programs from about 5.19 but ignores a cookie before 6.10, while
            # RAW_TRACEPOINT_OPEN refuses the unknown field (EINVAL) there.
            try:
                fd = _bpf.raw_tracepoint_open(None, prog_fd, cookie)
            except KernelError as exc:
                if exc.errno == errno.EINVAL and cookie:
                    raise NotSupportedError(f"bpf_cookie on {what}", "BPF_RAW_TRACEPOINT_OPEN refused the cookie field",
                                            "6.10") from None
                raise
        elif attach_type is not None:
            try:
                fd = _bpf.link_create_tracing(prog_fd, int(attach_type), cookie=cookie)
            except KernelError as exc:
                if exc.errno != errno.EINVAL:
                    raise
                if cookie:
                    raise NotSupportedError(f"bpf_cookie on {what}",
                                            "BPF_LINK_CREATE refused the tracing program (EINVAL)",
                                            "5.19") from None
        if fd is None:
            if cookie:
                raise UsageError(f"attach {what}: a cookie needs the program's attach type, which is unknown "
                                 "for a program not loaded by bpfkit")
            # 5.5 (fec56f5890d9): a NULL name attaches at the program's own BTF target.
            fd = _bpf.raw_tracepoint_open(None, prog_fd)
    except KernelError as exc:
        if exc.errno == errno.EBUSY:
            raise exc.wrap(f"attach {what}: the program is already attached (a tracing program attaches once at a time)") from None
        if exc.errno in (errno.EINVAL, errno.ENOENT):
            # Before about 6.0 the program's target is consumed by its first attach, so a
            # second attach (even after the first link closed) finds none.
            raise exc.wrap(f"attach {what}: the kernel refused it (a program that was attached before "
                           "can attach again only on kernels since about 6.0; load it again)") from None
        raise exc.wrap(f"attach {what}")
    except BPFKitError as exc:
        raise exc.wrap(f"attach {what}")
    return _wrap(fd, TracingLink, what)  # type: ignore[return-value]


def _checked(kind: AttachType, prog: ProgramArg, cookie: int) -> TracingLink | RawTracepointFd:
    have = getattr(prog, "attach_type", None)
    if have is not None and have != kind:
        raise UsageError(f"attach {_TRACING_KINDS[kind]}: program {getattr(prog, 'name', '')!r} was loaded as "
                         f"{_TRACING_KINDS.get(have, getattr(have, 'name', have))}, not {_TRACING_KINDS[kind]}")
    return attach_tracing(prog, cookie=cookie)


def fentry(prog: ProgramArg, *, cookie: int = 0) -> TracingLink | RawTracepointFd:
    """Attach an fentry program (runs at the entry of the function it was loaded for)."""
    return _checked(AttachType.TRACE_FENTRY, prog, cookie)


def fexit(prog: ProgramArg, *, cookie: int = 0) -> TracingLink | RawTracepointFd:
    """Attach an fexit program (runs at return, with the arguments and the return value)."""
    return _checked(AttachType.TRACE_FEXIT, prog, cookie)


def fmod_ret(prog: ProgramArg, *, cookie: int = 0) -> TracingLink | RawTracepointFd:
    """Attach an fmod_ret program (a non-zero return replaces the function's, which is skipped;
    only functions marked ALLOW_ERROR_INJECTION and security_* hooks accept it)."""
    return _checked(AttachType.MODIFY_RETURN, prog, cookie)


def tp_btf(prog: ProgramArg, *, cookie: int = 0) -> TracingLink | RawTracepointFd:
    """Attach a tp_btf program (a raw tracepoint with typed arguments)."""
    return _checked(AttachType.TRACE_RAW_TP, prog, cookie)


def lsm(prog: ProgramArg, *, cookie: int = 0) -> TracingLink | RawTracepointFd:
    """Attach an LSM program (needs CONFIG_BPF_LSM and ``bpf`` in the kernel's lsm= list)."""
    return _checked(AttachType.LSM_MAC, prog, cookie)


def freplace(prog: ProgramArg, target: FreplaceTarget | None = None, function: str = "", *,
             prog_id: int = 0) -> TracingLink | RawTracepointFd:
    """Attach an ext (``SEC("freplace/FUNC")``) program: from now on calls of the global
    function ``function`` in program ``target`` run ``prog`` instead (cilium's
    link.AttachFreplace). ``target`` is a loaded Program, an FD or fd number, a pinned path,
    or ``prog_id``; by default the program and function ``prog`` was loaded against.

    Both given: BPF_LINK_CREATE with target_fd and the function's BTF id in the target's BTF
    (5.10); another target than the load-time one must have a function of the same prototype.
    Neither: the load-time target (BPF_LINK_CREATE with zeros; BPF_RAW_TRACEPOINT_OPEN before
    5.10). Closing the link restores the original function.
    """
    from ..freplace import describe_target, open_target, target_func_id

    name = getattr(prog, "name", "")
    ptype = getattr(prog, "type", None)
    if ptype is not None and ptype != ProgType.EXT:
        raise UsageError(f"attach freplace: program {name!r} is a {getattr(ptype, 'kernel_name', ptype)} program, "
                         "not ext (SEC(\"freplace/FUNC\"))")
    if target is not None and prog_id:
        raise UsageError(f"attach freplace program {name!r}: give the target program or its id, not both")
    if prog_id:
        target = ("id", prog_id)
    function = function or _spec_target(prog)
    prog_fd = _prog_fd(prog)
    if target is None:
        what = f"freplace program {name!r}" + (f" on {function}" if function else "") + " (its load-time target)"
        try:
            try:
                fd = _bpf.link_create_tracing(prog_fd, 0)
            except KernelError as exc:
                if exc.errno != errno.EINVAL:
                    raise
                fd = _bpf.raw_tracepoint_open(None, prog_fd)  # before 5.10
        except KernelError as exc:
            if exc.errno == errno.ENOENT:
                raise exc.wrap(f"attach {what}: the program has no load-time target left (it was attached before; "
                               "name the target: link.freplace(prog, target, function))") from None
            raise exc.wrap(f"attach {what}")
        return _wrap(fd, TracingLink, what)  # type: ignore[return-value]
    tdesc = describe_target(target)
    if not function:
        raise UsageError(f"attach freplace program {name!r} to {tdesc}: name the function to replace")
    what = f"freplace program {name!r} on {function} of {tdesc}"
    fd_target, owned = open_target(target)
    try:
        btf_id = target_func_id(fd_target, function, tdesc)
        fd = _bpf.link_create_tracing(prog_fd, 0, target_fd=int(fd_target), target_btf_id=btf_id)
    except KernelError as exc:
        if exc.errno == errno.EINVAL:
            raise exc.wrap(f"attach {what}: the kernel refused it (a target other than the load-time one needs "
                           "Linux 5.10+ and a function of the same prototype)") from None
        if exc.errno == errno.EBUSY:
            raise exc.wrap(f"attach {what}: that function is already replaced by another extension") from None
        raise exc.wrap(f"attach {what}")
    except BPFKitError as exc:
        raise exc.wrap(f"attach {what}")
    finally:
        if owned is not None:
            owned.close()
    return _wrap(fd, TracingLink, what)  # type: ignore[return-value]


# ---------------------------------------------------------------- load-time target
def _spec_target(prog: Any) -> str:
    return getattr(prog, "attach_to", "") or getattr(getattr(prog, "spec", None), "attach_to", "")


# ----------------------------------------------------------------------- the kind's record
def _probe_raw_tracepoint(spec: ProbeSpec, prog: ProgramArg, o: AttachOptions) -> Link:
    """``rawtracepoint:[MODULE:]NAME`` (the kernel finds module tracepoints by name)."""
    return raw_tracepoint(spec.function, prog, cookie=o.cookie)


def _probe_tracing(spec: ProbeSpec, prog: ProgramArg, o: AttachOptions) -> Link:
    """``fentry:[MODULE:]FN`` / ``fexit:[MODULE:]FN``: ``prog`` must have been loaded for that
    function (a tracing program's target is part of the program, fixed at load)."""
    want = AttachType.TRACE_FENTRY if spec.kind == "fentry" else AttachType.TRACE_FEXIT
    name = getattr(prog, "name", "")
    have = getattr(prog, "attach_type", None)
    if have is not None and have != want:
        raise UsageError(f"probe {spec}: program {name!r} was loaded as "
                         f"{_TRACING_KINDS.get(have, getattr(have, 'name', have))}, not {spec.kind}")
    loaded_for = _spec_target(prog)
    wanted = f"{spec.module}:{spec.function}" if spec.module else spec.function
    if loaded_for and loaded_for != wanted and loaded_for.rpartition(":")[2] != wanted:
        raise UsageError(
            f"probe {spec}: program {name!r} was loaded for {loaded_for!r}, and a tracing program's target is "
            f"fixed at load time; load it for {wanted!r} (spec.programs[{name!r}].set_attach_target({wanted!r}))"
        )
    return attach_tracing(prog, cookie=o.cookie)


def _section_raw_tracepoint(prog: ProgramArg, target: SectionTarget, o: AttachOptions) -> Link:
    """``raw_tp/NAME``, ``raw_tracepoint/NAME`` and their ``.w`` forms."""
    name = target.target or _spec_target(prog)
    if not name:
        raise NotSupportedError(f"auto-attach of raw tracepoint program {getattr(prog, 'name', '')!r}",
                                "its section names no tracepoint; attach it with link.raw_tracepoint(name, prog)")
    return raw_tracepoint(name, prog, cookie=o.cookie)


def _section_tracing(prog: ProgramArg, target: SectionTarget, o: AttachOptions) -> Link:
    """tp_btf, fentry, fexit, fmod_ret (and .s), lsm (and .s), freplace: the target was fixed
    at load time (attach_btf_id, and freplace's target program), so the section's text is not
    needed here."""
    return attach_tracing(prog, cookie=o.cookie)


KIND = LinkKind(
    "tracing",
    sections=(
        *(Section(prefix, "raw_tracepoint", _section_raw_tracepoint)
          for prefix in ("raw_tp", "raw_tracepoint", "raw_tp.w", "raw_tracepoint.w")),
        *(Section(prefix, prefix.removesuffix(".s"), _section_tracing)
          for prefix in ("tp_btf", "fentry", "fexit", "fmod_ret", "fentry.s", "fexit.s", "fmod_ret.s", "lsm", "lsm.s",
                         "freplace")),
    ),
    probes={"rawtracepoint": _probe_raw_tracepoint, "fentry": _probe_tracing, "fexit": _probe_tracing},
    link_classes={LinkType.RAW_TRACEPOINT: RawTracepointLink, LinkType.TRACING: TracingLink},
    info_decoders={LinkType.TRACING: _decode_tracing},
    features=("tracing_programs", "raw_tracepoint_link"),
)
