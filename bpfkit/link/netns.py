# SPDX-License-Identifier: Apache-2.0
"""Network namespaces: programs that run for a whole namespace rather than one interface.

    with link.attach_netns(prog, netns="blue") as lk: ...      # flow_dissector or sk_lookup
    lk = link.attach_netns(dissector, mode="prog_attach")      # flow_dissector, legacy
    link.netns_query("sk_lookup", netns="blue")                # NetnsQuery: program ids

Two program types attach to a network namespace:

* **flow_dissector** replaces the kernel's packet dissector (flow keys for hashing, RPS, tc
  flower...) for every packet of the namespace. One program per namespace; the root
  namespace's program, if any, wins over every other namespace's (EEXIST for those).
* **sk_lookup** (5.9, e9ddbb7707ff) picks the socket a new connection or datagram goes to,
  before the kernel looks for a listener (bpf_sk_assign with a socket from a SOCKMAP/SOCKHASH):
  one socket can serve many addresses and ports. Several programs run in attach order.

Two ways to attach (:class:`ProgAttachMode`):

* **link** (5.8, 7f045a49fee0 for flow_dissector; sk_lookup has only links): BPF_LINK_CREATE
  with an fd on the namespace (/proc/PID/ns/net, /run/netns/NAME). The link works from any
  namespace, pins, updates (BPF_LINK_UPDATE), detaches; ``info()`` gives the namespace's inode.
* **prog_attach** (flow_dissector only, 4.20): BPF_PROG_ATTACH acts on the calling thread's
  namespace (target_fd must be 0), so bpfkit enters the namespace for it, and for the detach
  on close. The program stays until detached; a link and a prog_attach program exclude each
  other (EEXIST).
"""

from __future__ import annotations

import dataclasses
import errno
from typing import Any

from .._kernel import bpf as _bpf
from .._kernel import netlink as _nl
from .._kernel.consts import AttachType, LinkType, ProgType
from .._kernel.fd import FD
from .._protocols import ProgramArg
from ..errors import BPFKitError, KernelError, NotSupportedError, UsageError
from ._prog_arg import HookInfo, attached_at, check_program, explained, info_attach_type, prog_name
from .base import RawLink, _prog_fd
from .kind import LinkKind
from .prog_attach import ProgAttachment, ProgAttachMode, raw_attach_program

__all__ = ["NETNS_HOOKS", "NetnsInfo", "NetnsLink", "NetnsProgAttachment", "NetnsQuery", "attach_netns",
           "netns_query"]

# hook name -> (attach type, program type, the release that made links for it)
NETNS_HOOKS: dict[str, tuple[AttachType, ProgType, str]] = {
    "flow_dissector": (AttachType.FLOW_DISSECTOR, ProgType.FLOW_DISSECTOR, "5.8"),
    "sk_lookup": (AttachType.SK_LOOKUP, ProgType.SK_LOOKUP, "5.9"),
}
_BY_TYPE = {pt: name for name, (_, pt, _) in NETNS_HOOKS.items()}
_BY_ATTACH = {at: name for name, (at, _, _) in NETNS_HOOKS.items()}


def _hook(prog: ProgramArg | None, hook: str | AttachType | None) -> str:
    if hook is None:
        ptype = getattr(prog, "type", None)
        if ptype in _BY_TYPE:
            return _BY_TYPE[ptype]
        raise UsageError(f"program {prog_name(prog or '')!r} is not a flow_dissector or sk_lookup program: "
                         "name the hook (flow_dissector or sk_lookup)")
    if isinstance(hook, AttachType):
        if hook in _BY_ATTACH:
            return _BY_ATTACH[hook]
    elif str(hook).lower() in NETNS_HOOKS:
        return str(hook).lower()
    raise UsageError(f"unknown network namespace hook {hook!r}: expected flow_dissector or sk_lookup")


def _where(ns: _nl.Netns) -> str:
    return "the current network namespace" if ns.name == "current" else f"network namespace {ns.name}"


# --------------------------------------------------------------------------------- links
@dataclasses.dataclass(frozen=True)
class NetnsInfo(HookInfo):
    """A netns link's details: the namespace's inode (``ls -l /proc/PID/ns/net``) and hook."""

    netns_ino: int
    attach_type: AttachType | int
    _hook_names = _BY_ATTACH


def _decode_netns(raw: Any) -> NetnsInfo:
    return NetnsInfo(int(raw.netns.netns_ino), info_attach_type(raw.netns))




class NetnsLink(RawLink):
    """A flow_dissector or sk_lookup program attached to a network namespace through a bpf_link
    (BPF_LINK_TYPE_NETNS)."""

    kind = "netns"

    def __init__(self, fd: FD, pinned_path: str | None = None, *, netns: str = "", hook: str = "") -> None:
        super().__init__(fd, pinned_path)
        self.netns = netns  # as given at attach time ("" when opened from a pin or id)
        self.hook = hook

    @property
    def description(self) -> str:
        return f"{self.hook} in network namespace {self.netns}" if self.hook else "netns"

    def _where(self) -> str:
        return f"{self.hook} in {self.netns}, " if self.hook else ""




class NetnsProgAttachment(ProgAttachment):
    """A flow_dissector program attached with BPF_PROG_ATTACH: the kernel takes the calling
    thread's namespace, so update and detach run inside the namespace this object holds."""

    kind = "netns prog_attach"

    def __init__(self, ns: _nl.Netns, prog: ProgramArg, attach_type: AttachType, hook: str) -> None:
        super().__init__(None, prog, attach_type, 0, _where(ns), hook)
        self.ns = ns

    def _run(self, fn: Any, *args: Any, **kwargs: Any) -> None:
        self.ns.run(fn, *args, **kwargs)

    def _release(self) -> None:
        self.ns.close()


# ------------------------------------------------------------------------------ attaching
_REFUSED = "the kernel refused the request (a program of another type, or a hook newer than this kernel)"
_HINTS: dict[int, tuple[str, str]] = {  # errno -> what it means (for a flow dissector, for sk_lookup)
    errno.EEXIST: ("the namespace already has a flow dissector (one per namespace, link or prog_attach), or the "
                   "root namespace has one, which overrides every other namespace's",
                   "this program is already attached here"),
    errno.E2BIG: ("the namespace already has a flow dissector (one per namespace)",
                  "the namespace holds as many programs as the kernel allows for this hook (64)"),
    errno.EINVAL: (_REFUSED, _REFUSED),
}


def _hint(err: int, hook: str, path: str) -> str:
    if err == errno.EINVAL and path == "prog_attach" and hook == "sk_lookup":
        return "sk_lookup programs attach only through links"
    dissector, other = _HINTS.get(err, ("", ""))
    return dissector if hook == "flow_dissector" else other


def attach_netns(
    prog: ProgramArg,
    netns: Any = None,
    hook: str | AttachType | None = None,
    *,
    mode: ProgAttachMode | str = ProgAttachMode.AUTO,
) -> NetnsLink | NetnsProgAttachment:
    """Attach a flow_dissector or sk_lookup program to network namespace ``netns`` (None: the
    caller's; a name from ``ip netns add``, a path such as /proc/PID/ns/net, an fd, a Netns).
    ``hook`` defaults to the program's type. ``mode``: AUTO (a link, 5.8+/5.9+; else
    BPF_PROG_ATTACH for a flow dissector), ``link`` or ``prog_attach`` (flow_dissector only).
    cilium/ebpf's AttachNetNs."""
    name = _hook(prog, hook)
    at, ptype, since = NETNS_HOOKS[name]
    check_program(prog, (ptype,), f"the {name} hook")
    path_mode = ProgAttachMode.of(mode)
    if path_mode == ProgAttachMode.PROG_ATTACH and name == "sk_lookup":
        raise UsageError("sk_lookup programs attach only through links (mode='link' or 'auto')")
    ns = _nl.Netns.open(netns)
    try:
        if path_mode != ProgAttachMode.PROG_ATTACH:
            try:
                fd = _bpf.link_create(_prog_fd(prog), ns.fd.raw, int(at))
                return NetnsLink(fd, netns=ns.name, hook=name)
            except KernelError as exc:
                # Before 5.8 LINK_CREATE knows no netns attach type: EINVAL.
                if exc.errno != errno.EINVAL or path_mode == ProgAttachMode.LINK or name == "sk_lookup":
                    if exc.errno == errno.EINVAL and name == "sk_lookup":
                        raise NotSupportedError(f"sk_lookup links in {_where(ns)}",
                                                "BPF_LINK_CREATE(BPF_SK_LOOKUP) gave EINVAL", since) from None
                    raise explained(exc, _hint(exc.errno, name, "link")).wrap(
                        f"attach {name} program {prog_name(prog)!r} to {_where(ns)} via link") from None
        try:
            ns.run(raw_attach_program, 0, prog, at)
        except BPFKitError as exc:
            if isinstance(exc, KernelError):
                again = exc.errno == errno.EINVAL and attached_at(ns.fd.raw, at, prog)
                exc = explained(exc, "this program is already attached here" if again
                                else _hint(exc.errno, name, "prog_attach"))
            raise exc.wrap(f"attach {name} program {prog_name(prog)!r} to {_where(ns)} via prog_attach") from None
        return NetnsProgAttachment(_nl.Netns.open(ns), prog, at, name)
    finally:
        ns.close()


# -------------------------------------------------------------------------------- queries
@dataclasses.dataclass(frozen=True)
class NetnsQuery:
    """The programs at one hook of a network namespace, in run order (BPF_PROG_QUERY)."""

    netns: str
    hook: str
    prog_ids: list[int]


def netns_query(hook: str | AttachType, netns: Any = None) -> NetnsQuery:
    """What runs at ``hook`` (flow_dissector or sk_lookup) of network namespace ``netns``."""
    name = _hook(None, hook)
    at = NETNS_HOOKS[name][0]
    with _nl.Netns.open(netns) as ns:
        try:
            ids = _bpf.prog_query_flags(ns.fd.raw, int(at))[0]
        except BPFKitError as exc:
            raise exc.wrap(f"query {name} programs of {_where(ns)}")
        return NetnsQuery(ns.name, name, ids)


# ----------------------------------------------------------------------- the kind's record
KIND = LinkKind(
    "netns",
    never_auto={
        "sk_lookup": ("an sk_lookup program acts on a whole network namespace, which a section does not name; attach "
                      "with bpfkit.link.attach_netns(prog, netns)"),
        "flow_dissector": ("a flow dissector acts on a whole network namespace, which a section does not name; "
                           "attach with bpfkit.link.attach_netns(prog, netns)"),
    },
    link_classes={LinkType.NETNS: NetnsLink},
    info_decoders={LinkType.NETNS: _decode_netns},
    features=("netns_link", "sk_lookup_link"),
)
