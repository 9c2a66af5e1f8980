# SPDX-License-Identifier: Apache-2.0
"""cgroups: programs that run for every process of a cgroup v2 directory and its descendants.

    with link.attach_cgroup("/sys/fs/cgroup/unified/app", prog) as lk: ...   # the section's hook
    lk = link.attach_cgroup(path, prog, "egress")                            # cgroup_skb egress
    lk = link.attach_cgroup(path, prog, mode="prog_attach", flags="override") # legacy, no link
    link.cgroup_query(path, "connect4", effective=True)   # CgroupQuery: what runs there

The hooks (attach types) by program type: cgroup_skb: ingress, egress; cgroup_sock: sock_create,
sock_release, post_bind4/6; cgroup_sock_addr: bind4/6, connect4/6/_unix, sendmsg4/6/_unix,
recvmsg4/6/_unix, getpeername4/6/_unix, getsockname4/6/_unix; sock_ops: sock_ops; cgroup_sockopt:
getsockopt, setsockopt; cgroup_sysctl: sysctl; cgroup_device: device. A program's section
(``cgroup/connect4``, ``cgroup_skb/egress``, ``sockops``...) names its hook; so does its
expected attach type, which cgroup_sock_addr, cgroup_sock and sockopt programs must match.

Two ways to attach:

* **link** (5.7, af6eea57437a): BPF_LINK_CREATE with the cgroup's fd. The program runs beside
  every other program of the hook (as with BPF_F_ALLOW_MULTI) until the link is closed (or its
  pin removed); BPF_LINK_UPDATE swaps it atomically, BPF_LINK_DETACH (5.9) detaches it. Since
  6.16 (cgroup mprog, 4d4d4a0bc1f6) a cgroup hook is an ordered list like tcx: an
  :class:`~bpfkit.link.Anchor` places the program (BPF_F_BEFORE/AFTER with a program or link),
  ``expected_revision`` fails the attach with ESTALE if the hook changed since it was queried.
* **prog_attach** (BPF_PROG_ATTACH, 4.10): the cgroup holds the program until someone detaches
  it. ``flags``: ``multi`` (BPF_F_ALLOW_MULTI, the default: programs of the cgroup and of its
  ancestors all run), ``override`` (BPF_F_ALLOW_OVERRIDE: one program, a sub-cgroup's replaces
  it) or ``none`` (one program, sub-cgroups may attach none); ``replace=old`` swaps ``old`` for
  the new program (BPF_F_REPLACE, 5.6, multi only). The returned object detaches on close.

AUTO (the default) makes a link where the kernel has cgroup links and no prog_attach-only
option is given, else uses BPF_PROG_ATTACH with BPF_F_ALLOW_MULTI (cilium/ebpf's AttachCgroup).
"""

from __future__ import annotations

import dataclasses
import errno
import os
from typing import TYPE_CHECKING, Any

from .._kernel import bpf as _bpf
from .._kernel import caps, cgroupfs
from .._kernel.consts import (
    BPF_F_ALLOW_MULTI,
    BPF_F_ALLOW_OVERRIDE,
    AttachType,
    LinkType,
    ProgType,
)
from .._kernel.fd import FD
from .._protocols import ProgramArg
from ..errors import BPFKitError, KernelError, NotSupportedError, UsageError
from ._prog_arg import attached_at, check_program, explained, info_attach_type, prog_name
from .anchor import Anchor, MprogQuery, mprog_link_args
from .base import Link, RawLink, _prog_fd
from .kind import AttachOptions, LinkKind, Section, SectionTarget
from .prog_attach import ProgAttachment, ProgAttachMode, raw_attach_program

if TYPE_CHECKING:
    from ..features import FeatureResult

__all__ = ["CGROUP_HOOKS", "CgroupInfo", "CgroupLink", "CgroupProgAttachment", "CgroupProgram", "CgroupQuery",
           "attach_cgroup", "cgroup_query", "cgroup_programs", "cgroup_hook", "have_cgroup_link",
           "have_cgroup_mprog"]

A = AttachType
# Every cgroup hook: short name (bpftool's, and libbpf's section suffix) -> (attach type, program type).
CGROUP_HOOKS: dict[str, tuple[AttachType, ProgType]] = {
    "ingress": (A.CGROUP_INET_INGRESS, ProgType.CGROUP_SKB),
    "egress": (A.CGROUP_INET_EGRESS, ProgType.CGROUP_SKB),
    "sock_create": (A.CGROUP_INET_SOCK_CREATE, ProgType.CGROUP_SOCK),
    "sock_release": (A.CGROUP_INET_SOCK_RELEASE, ProgType.CGROUP_SOCK),
    "post_bind4": (A.CGROUP_INET4_POST_BIND, ProgType.CGROUP_SOCK),
    "post_bind6": (A.CGROUP_INET6_POST_BIND, ProgType.CGROUP_SOCK),
    "bind4": (A.CGROUP_INET4_BIND, ProgType.CGROUP_SOCK_ADDR),
    "bind6": (A.CGROUP_INET6_BIND, ProgType.CGROUP_SOCK_ADDR),
    "connect4": (A.CGROUP_INET4_CONNECT, ProgType.CGROUP_SOCK_ADDR),
    "connect6": (A.CGROUP_INET6_CONNECT, ProgType.CGROUP_SOCK_ADDR),
    "connect_unix": (A.CGROUP_UNIX_CONNECT, ProgType.CGROUP_SOCK_ADDR),
    "sendmsg4": (A.CGROUP_UDP4_SENDMSG, ProgType.CGROUP_SOCK_ADDR),
    "sendmsg6": (A.CGROUP_UDP6_SENDMSG, ProgType.CGROUP_SOCK_ADDR),
    "sendmsg_unix": (A.CGROUP_UNIX_SENDMSG, ProgType.CGROUP_SOCK_ADDR),
    "recvmsg4": (A.CGROUP_UDP4_RECVMSG, ProgType.CGROUP_SOCK_ADDR),
    "recvmsg6": (A.CGROUP_UDP6_RECVMSG, ProgType.CGROUP_SOCK_ADDR),
    "recvmsg_unix": (A.CGROUP_UNIX_RECVMSG, ProgType.CGROUP_SOCK_ADDR),
    "getpeername4": (A.CGROUP_INET4_GETPEERNAME, ProgType.CGROUP_SOCK_ADDR),
    "getpeername6": (A.CGROUP_INET6_GETPEERNAME, ProgType.CGROUP_SOCK_ADDR),
    "getpeername_unix": (A.CGROUP_UNIX_GETPEERNAME, ProgType.CGROUP_SOCK_ADDR),
    "getsockname4": (A.CGROUP_INET4_GETSOCKNAME, ProgType.CGROUP_SOCK_ADDR),
    "getsockname6": (A.CGROUP_INET6_GETSOCKNAME, ProgType.CGROUP_SOCK_ADDR),
    "getsockname_unix": (A.CGROUP_UNIX_GETSOCKNAME, ProgType.CGROUP_SOCK_ADDR),
    "sock_ops": (A.CGROUP_SOCK_OPS, ProgType.SOCK_OPS),
    "getsockopt": (A.CGROUP_GETSOCKOPT, ProgType.CGROUP_SOCKOPT),
    "setsockopt": (A.CGROUP_SETSOCKOPT, ProgType.CGROUP_SOCKOPT),
    "sysctl": (A.CGROUP_SYSCTL, ProgType.CGROUP_SYSCTL),
    "device": (A.CGROUP_DEVICE, ProgType.CGROUP_DEVICE),
}
_HOOK_NAMES = {at: name for name, (at, _) in CGROUP_HOOKS.items()}
# Kernel releases of the newer hooks (attaching them elsewhere gives EINVAL).
_HOOK_SINCE = {A.CGROUP_INET_SOCK_RELEASE: "5.9", A.CGROUP_UNIX_CONNECT: "6.7", A.CGROUP_UNIX_SENDMSG: "6.7",
               A.CGROUP_UNIX_RECVMSG: "6.7", A.CGROUP_UNIX_GETPEERNAME: "6.7", A.CGROUP_UNIX_GETSOCKNAME: "6.7"}
# Program types whose programs carry the hook as their expected attach type (checked at load).
_EXPECTS_ATTACH_TYPE = {ProgType.CGROUP_SOCK_ADDR, ProgType.CGROUP_SOCKOPT, ProgType.CGROUP_SOCK}
CGROUP_PROG_TYPES = frozenset(pt for _, pt in CGROUP_HOOKS.values())


def cgroup_hook(value: AttachType | str | int) -> AttachType:
    """A cgroup attach type from its short name (``connect4``), its kernel name
    (``cgroup_inet4_connect``) or the AttachType; UsageError for anything else."""
    if isinstance(value, AttachType):
        at = value
    elif isinstance(value, int) and not isinstance(value, bool):
        try:
            at = AttachType(value)
        except ValueError:
            raise UsageError(f"unknown attach type {value}") from None
    else:
        text = str(value).lower().removeprefix("bpf_")
        if text in CGROUP_HOOKS:
            return CGROUP_HOOKS[text][0]
        matches = [a for a in _HOOK_NAMES if a.kernel_name == text]
        if not matches:
            raise UsageError(f"unknown cgroup hook {value!r}: expected one of {', '.join(CGROUP_HOOKS)}")
        at = matches[0]
    if at not in _HOOK_NAMES:
        raise UsageError(f"{at.kernel_name} is not a cgroup hook (expected one of {', '.join(CGROUP_HOOKS)})")
    return at


def hook_name(at: AttachType | int) -> str:
    """``connect4`` for BPF_CGROUP_INET4_CONNECT (an attach type's kernel name otherwise)."""
    if isinstance(at, AttachType):
        return _HOOK_NAMES.get(at, at.kernel_name)
    try:
        return hook_name(AttachType(at))
    except ValueError:
        return f"attach type {at}"


# ------------------------------------------------------------------------ feature probes
def have_cgroup_link() -> bool:
    """Whether BPF_LINK_CREATE makes cgroup links (5.7+): the cached ``cgroup_link`` probe of
    :mod:`bpfkit.features`."""
    return _feature("cgroup_link").supported


def have_cgroup_mprog() -> bool:
    """Whether cgroup hooks take BPF_F_BEFORE/AFTER and expected_revision (6.16+): the cached
    ``cgroup_mprog`` probe of :mod:`bpfkit.features`."""
    return _feature("cgroup_mprog").supported


def _probe_reason(name: str) -> str:
    return _feature(name).reason


def _feature(name: str) -> FeatureResult:
    from .. import features

    return features.probe(name)


# ------------------------------------------------------------------------------- targets
class _Cgroup:
    """A cgroup directory opened for one attach: our own fd, and how to name it."""

    def __init__(self, cgroup: str | os.PathLike[str] | int | FD) -> None:
        if isinstance(cgroup, (str, os.PathLike)):
            self.name = os.fspath(cgroup)
            self.fd = cgroupfs.open_cgroup(self.name)
        elif isinstance(cgroup, FD) or (isinstance(cgroup, int) and not isinstance(cgroup, bool)):
            import fcntl

            raw = int(cgroup)
            self.name = f"fd {raw}"
            try:
                self.fd = FD(fcntl.fcntl(raw, fcntl.F_DUPFD_CLOEXEC, 1))
            except OSError as exc:
                raise KernelError(f"dup cgroup fd {raw}", exc.errno or errno.EBADF) from None
        else:
            raise UsageError(f"a cgroup is a path or an fd on its directory, not {cgroup!r}")

    def __str__(self) -> str:
        return f"cgroup {self.name}"


# ----------------------------------------------------------------------- error meanings
def _hint(err: int, path: str, at: AttachType, flags: int = 0, anchor: Anchor | None = None,
          expected_revision: int = 0, replacing: bool = False) -> str:
    if err == errno.ESTALE:
        return f"the hook's revision is not {expected_revision}: its programs changed (query it again)"
    if err == errno.ENOENT:
        if anchor is not None:
            return f"the anchor ({anchor}) is not attached to this hook"
        if replacing:
            return "the program given as replace= is not attached to this hook"
    if err == errno.EEXIST:
        return "this program is already attached to this hook of this cgroup"
    if err == errno.E2BIG:
        return "the hook holds as many programs as the kernel allows (64)"
    if err == errno.EBADF:
        return "not a cgroup v2 directory"
    if err == errno.EPERM and path == "prog_attach":
        return (f"the hook holds a program attached with other flags than {_flags_name(flags)!r}, or an ancestor "
                f"cgroup holds one attached without BPF_F_ALLOW_MULTI/OVERRIDE")
    if err == errno.EINVAL:
        if anchor is not None and anchor.position and not anchor.link_id and not isinstance(anchor.target, RawLink) \
                and (anchor.target is not None or anchor.prog_id):
            # cgroup mprog matches an anchor's kind: a program held by a link is anchored by the link.
            return (f"the anchor ({anchor}) must name a link if that program was attached by a link "
                    "(Anchor.before(link) / link_id=), or a program attached with BPF_PROG_ATTACH")
        if at in _HOOK_SINCE:
            return f"the kernel refused the request (the {hook_name(at)} hook needs Linux {_HOOK_SINCE[at]}+)"
        return "the kernel refused the request (a program loaded for another hook, or bad flags)"
    return ""


def _flags_name(flags: int) -> str:
    if flags & BPF_F_ALLOW_MULTI:
        return "multi"
    if flags & BPF_F_ALLOW_OVERRIDE:
        return "override"
    return "none"


_FLAG_VALUES = {"multi": BPF_F_ALLOW_MULTI, "override": BPF_F_ALLOW_OVERRIDE, "none": 0, "": 0}


def _flags_of(flags: str | int | None) -> int:
    if flags is None:
        return BPF_F_ALLOW_MULTI
    if isinstance(flags, int) and not isinstance(flags, bool):
        return flags
    try:
        return _FLAG_VALUES[str(flags).lower()]
    except KeyError:
        raise UsageError(f"unknown cgroup attach flags {flags!r}: expected multi, override or none") from None


def _fail(exc: BPFKitError, prog: ProgramArg, cg: _Cgroup, at: AttachType, path: str, **hint: Any) -> BPFKitError:
    if isinstance(exc, KernelError):
        err = exc.errno
        if err == errno.EINVAL and attached_at(cg.fd.raw, at, prog):
            exc = KernelError(exc.op, err, "this program is already attached to this hook of this cgroup")
        elif err == errno.EPERM and path == "prog_attach" and caps.holds("CAP_NET_ADMIN"):
            # Not a capability: __cgroup_bpf_attach's EPERM for flags that do not fit the hook's.
            exc = KernelError(exc.op, err, _hint(err, path, at, **hint))
        else:
            exc = explained(exc, _hint(err, path, at, **hint))
    return exc.wrap(f"attach cgroup program {prog_name(prog)!r} to {cg} {hook_name(at)} via {path}")


# --------------------------------------------------------------------------------- links
@dataclasses.dataclass(frozen=True)
class CgroupInfo:
    """A cgroup link's details: the cgroup's id and the hook (attach type)."""

    cgroup_id: int
    attach_type: AttachType | int

    @property
    def hook(self) -> str:
        return hook_name(self.attach_type)

    def path(self) -> str | None:
        """The cgroup's path under a cgroup2 mount (None once removed); walks the hierarchy."""
        return cgroupfs.cgroup_path(self.cgroup_id)


def _decode_cgroup(raw: Any) -> CgroupInfo:
    return CgroupInfo(int(raw.cgroup.cgroup_id), info_attach_type(raw.cgroup))


class CgroupLink(RawLink):
    """A program attached to a cgroup hook through a bpf_link (BPF_LINK_TYPE_CGROUP)."""

    kind = "cgroup"

    def __init__(self, fd: FD, pinned_path: str | None = None, *, cgroup: str = "",
                 attach_type: AttachType | None = None) -> None:
        super().__init__(fd, pinned_path)
        self.cgroup = cgroup  # as given at attach time ("" when opened from a pin or id)
        self.attach_type = attach_type

    @property
    def description(self) -> str:
        return f"cgroup {self.cgroup} {hook_name(self.attach_type)}" if self.attach_type is not None else "cgroup"

    def _where(self) -> str:
        return f"{self.cgroup} {hook_name(self.attach_type)}, " if self.attach_type is not None else ""


class CgroupProgAttachment(ProgAttachment):
    """A program attached to a cgroup hook with BPF_PROG_ATTACH (no bpf_link): detached on
    close; ``flags`` says how it shares the hook (multi, override, none)."""

    kind = "cgroup prog_attach"
    attached_by = "BPF_PROG_ATTACH, no link"  # how `bpfkit attach` says it was attached


# ------------------------------------------------------------------------------ attaching
def _hook_of(prog: ProgramArg, attach_type: AttachType | str | int | None) -> AttachType:
    loaded_for = getattr(prog, "attach_type", None)
    if attach_type is None:
        if loaded_for in _HOOK_NAMES:
            return AttachType(loaded_for)
        raise UsageError(f"program {prog_name(prog)!r} does not name its cgroup hook (its section does not): pass "
                         f"one of {', '.join(CGROUP_HOOKS)}")
    at = cgroup_hook(attach_type)
    ptype = getattr(prog, "type", None)
    if ptype in _EXPECTS_ATTACH_TYPE and loaded_for is not None and loaded_for in _HOOK_NAMES and loaded_for != at:
        raise UsageError(f"program {prog_name(prog)!r} was loaded for the {hook_name(loaded_for)} hook, not "
                         f"{hook_name(at)} (a {ptype.kernel_name} program's hook is fixed at load)")
    return at


def attach_cgroup(
    cgroup: str | os.PathLike[str] | int | FD,
    prog: ProgramArg,
    attach_type: AttachType | str | None = None,
    *,
    mode: ProgAttachMode | str = ProgAttachMode.AUTO,
    flags: str | int | None = None,
    replace: ProgramArg | None = None,
    anchor: Anchor | None = None,
    expected_revision: int = 0,
) -> CgroupLink | CgroupProgAttachment:
    """Attach ``prog`` to ``cgroup`` (a cgroup v2 directory's path, or an fd on it) at
    ``attach_type`` (a hook name such as ``connect4``/``egress``/``sysctl``, or an AttachType;
    default: the hook the program's section names).

    ``mode``: AUTO (a link where the kernel has cgroup links, 5.7+, and neither ``flags`` nor
    ``replace`` is given; else BPF_PROG_ATTACH), ``link``, ``prog_attach``. prog_attach only:
    ``flags`` (multi, the default; override; none) and ``replace`` (swap that program for this
    one). link only (6.16+): ``anchor`` and ``expected_revision`` order the hook's programs.
    """
    path_mode = ProgAttachMode.of(mode)
    at = _hook_of(prog, attach_type)
    check_program(prog, (CGROUP_HOOKS[hook_name(at)][1],), f"the cgroup {hook_name(at)} hook")
    prog_fd = _prog_fd(prog)
    legacy_only = flags is not None or replace is not None
    ordered = anchor is not None or bool(expected_revision)
    if path_mode == ProgAttachMode.LINK and legacy_only:
        raise UsageError("flags= and replace= are for mode='prog_attach'; a link shares its hook like flags='multi' "
                         "(swap its program with update())")
    if legacy_only and ordered:
        raise UsageError("anchor=/expected_revision= order cgroup links; flags=/replace= are for BPF_PROG_ATTACH")
    use_link = path_mode == ProgAttachMode.LINK or (path_mode == ProgAttachMode.AUTO and not legacy_only and
                                                    (have_cgroup_link() or ordered))
    if use_link and not have_cgroup_link():
        raise NotSupportedError("cgroup links (BPF_LINK_CREATE with a cgroup fd)",
                                f"{_probe_reason('cgroup_link')}; use mode='prog_attach'", "5.7")
    if use_link and ordered and not have_cgroup_mprog():
        raise NotSupportedError("ordered cgroup programs (anchor=, expected_revision=)",
                                _probe_reason("cgroup_mprog"), "6.16")
    if path_mode == ProgAttachMode.PROG_ATTACH and ordered:
        raise UsageError("anchor=/expected_revision= order cgroup links (mode='link')")
    cg = _Cgroup(cgroup)
    try:
        if use_link:
            return _attach_link(cg, prog, prog_fd, at, anchor, expected_revision)
        return _attach_legacy(cg, prog, at, _flags_of(flags), replace)
    finally:
        cg.fd.close()


def _attach_link(cg: _Cgroup, prog: ProgramArg, prog_fd: int, at: AttachType, anchor: Anchor | None,
                 expected_revision: int) -> CgroupLink:
    aflags, fill = mprog_link_args(anchor, expected_revision)  # link_create.cgroup (6.16): tcx's layout
    try:
        fd = _bpf.link_create(prog_fd, cg.fd.raw, int(at), aflags, fill)
    except BPFKitError as exc:
        raise _fail(exc, prog, cg, at, "link", anchor=anchor, expected_revision=expected_revision)
    return CgroupLink(fd, cgroup=cg.name, attach_type=at)


def _attach_legacy(cg: _Cgroup, prog: ProgramArg, at: AttachType, flags: int,
                   replace: ProgramArg | None) -> CgroupProgAttachment:
    if replace is not None and not flags & BPF_F_ALLOW_MULTI:
        raise UsageError("replace= needs flags='multi' (BPF_F_REPLACE works on multi-program cgroup hooks)")
    try:
        raw_attach_program(cg.fd, prog, at, flags=flags, replace=replace)
    except BPFKitError as exc:
        raise _fail(exc, prog, cg, at, "prog_attach", flags=flags, replacing=replace is not None)
    try:
        return CgroupProgAttachment(cg.fd.dup(), prog, at, flags, str(cg), hook_name(at))
    except BaseException:
        from .prog_attach import raw_detach_program

        raw_detach_program(cg.fd, prog, at)
        raise


# -------------------------------------------------------------------------------- queries
@dataclasses.dataclass(frozen=True)
class CgroupProgram:
    """One program at a cgroup hook: its id and the flags it was attached with (``multi``,
    ``override`` or ``none``; '' in an effective query, where the kernel reports none)."""

    attach_type: AttachType
    prog_id: int
    flags: str

    @property
    def hook(self) -> str:
        return hook_name(self.attach_type)


@dataclasses.dataclass(frozen=True)
class CgroupQuery(MprogQuery):
    """The programs at one hook of a cgroup, in run order (BPF_PROG_QUERY), and the hook's
    revision (6.16+; 0 before)."""

    cgroup: str
    attach_type: AttachType
    effective: bool
    programs: list[CgroupProgram]
    revision: int


def _query(fd: FD, name: str, at: AttachType, effective: bool) -> CgroupQuery:
    ids, per_prog, hook_flags, revision = _bpf.prog_query_flags(fd.raw, int(at), effective)
    progs = []
    for pid, pflags in zip(ids, per_prog):
        # Per-program flags since 5.19 (prog_attach_flags); the hook's flags before that.
        progs.append(CgroupProgram(at, pid, "" if effective else _flags_name(pflags or hook_flags)))
    return CgroupQuery(name, at, effective, progs, revision)


def cgroup_query(cgroup: str | os.PathLike[str] | int | FD, attach_type: AttachType | str, *,
                 effective: bool = False) -> CgroupQuery:
    """The programs at ``cgroup``'s ``attach_type`` hook: attached to it, or with ``effective``
    every program that runs for its processes (its ancestors' included)."""
    at = cgroup_hook(attach_type)
    cg = _Cgroup(cgroup)
    try:
        return _query(cg.fd, cg.name, at, effective)
    except BPFKitError as exc:
        raise exc.wrap(f"query {hook_name(at)} programs of {cg}")
    finally:
        cg.fd.close()


def cgroup_programs(cgroup: str | os.PathLike[str] | int | FD, *, effective: bool = False) -> list[CgroupProgram]:
    """Every program at every hook of ``cgroup`` (bpftool cgroup show), hook by hook. Hooks
    this kernel does not have are passed over."""
    cg = _Cgroup(cgroup)
    found: list[CgroupProgram] = []
    try:
        for at, _ in CGROUP_HOOKS.values():
            try:
                found += _query(cg.fd, cg.name, at, effective).programs
            except KernelError as exc:
                if exc.errno == errno.EINVAL:
                    continue  # a hook newer than this kernel
                raise exc.wrap(f"query {hook_name(at)} programs of {cg}")
    finally:
        cg.fd.close()
    return found


# ----------------------------------------------------------------------- the kind's record
NEEDS_CGROUP = "a section names the hook, not the cgroup: pass cgroup= (bpfkit attach --cgroup PATH)"


def _attach_section(prog: ProgramArg, target: SectionTarget, o: AttachOptions) -> Link:
    """``cgroup/HOOK``, ``cgroup_skb/ingress|egress``, ``sockops``: to the cgroup the caller
    names (a section names the hook, never the cgroup)."""
    if o.cgroup is None:
        raise NotSupportedError(f"auto-attach of cgroup program {getattr(prog, 'name', '')!r}", NEEDS_CGROUP)
    if getattr(prog, "attach_type", None) is None:
        raise NotSupportedError(f"auto-attach of section {target.kind}/{target.target}",
                                "the section names no hook (use cgroup_skb/ingress or cgroup_skb/egress); "
                                "attach with bpfkit.link.attach_cgroup(path, prog, hook)")
    return attach_cgroup(o.cgroup, prog)


KIND = LinkKind(
    "cgroup",
    sections=tuple(Section(prefix, "cgroup", _attach_section) for prefix in ("cgroup", "cgroup_skb", "sockops")),
    needs=("cgroup", f"a cgroup program: {NEEDS_CGROUP}"),
    link_classes={LinkType.CGROUP: CgroupLink},
    info_decoders={LinkType.CGROUP: _decode_cgroup},
    features=("cgroup_link",),
)
