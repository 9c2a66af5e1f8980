# SPDX-License-Identifier: Apache-2.0
"""netfilter: a program as a netfilter hook function, beside iptables/nftables chains.

    with link.attach_netfilter(prog, "ipv4", "local_out", priority=100, netns="blue") as lk: ...

BPF_LINK_TYPE_NETFILTER (6.4, 84601d6ee68a): BPF_LINK_CREATE of a ``SEC("netfilter")`` program
with a protocol family (``ipv4``/``ipv6``), a hook (``prerouting``, ``local_in``, ``forward``,
``local_out``, ``postrouting``) and a priority (lower runs first; iptables' filter table sits at
0, conntrack at -200; the kernel refuses INT_MIN and INT_MAX). The program returns NF_ACCEPT (1)
or NF_DROP (0). ``defrag=True`` (BPF_F_NETFILTER_IP_DEFRAG, 6.6) has the kernel reassemble IP
fragments first, which needs a priority after defragmentation (> -400). The hook belongs to the
network namespace of the thread that makes the link, so bpfkit makes it inside ``netns``; the
link then works from anywhere. It pins and detaches; the kernel has no update for it.
"""

from __future__ import annotations

import dataclasses
import enum
import errno
from typing import Any

from .._kernel import bpf as _bpf
from .._kernel import netlink as _nl
from .._kernel.consts import BPF_F_NETFILTER_IP_DEFRAG, AttachType, LinkType, ProgType
from .._kernel.fd import FD
from .._protocols import ProgramArg
from ..errors import BPFKitError, KernelError, NotSupportedError, UsageError
from ._prog_arg import check_program, explained, prog_name
from .base import RawLink, _enum
from .kind import LinkKind

__all__ = ["NetfilterFamily", "NetfilterHook", "NetfilterInfo", "NetfilterLink", "attach_netfilter",
           "have_netfilter_link"]


class NetfilterFamily(enum.IntEnum):
    """NFPROTO_* that netfilter links take."""

    IPV4 = 2
    IPV6 = 10

    @classmethod
    def of(cls, value: NetfilterFamily | str | int) -> NetfilterFamily:
        found: NetfilterFamily = _member(cls, value, "nfproto_", {"inet": "ipv4", "ip": "ipv4", "ip6": "ipv6",
                                                                  "inet6": "ipv6"},
                                         "netfilter family", "ipv4 or ipv6")
        return found


class NetfilterHook(enum.IntEnum):
    """enum nf_inet_hooks."""

    PREROUTING = 0
    LOCAL_IN = 1
    FORWARD = 2
    LOCAL_OUT = 3
    POSTROUTING = 4

    @classmethod
    def of(cls, value: NetfilterHook | str | int) -> NetfilterHook:
        found: NetfilterHook = _member(cls, value, "nf_inet_", {"input": "local_in", "output": "local_out"},
                                       "netfilter hook", "prerouting, local_in (input), forward, local_out (output) "
                                       "or postrouting")
        return found


def _member(cls: Any, value: Any, prefix: str, aliases: dict[str, str], what: str, expected: str) -> Any:
    """The member of IntEnum ``cls`` that ``value`` names: the member, its number, or its name
    (any case, with or without the C prefix, or an alias)."""
    if isinstance(value, cls):
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        if value in cls._value2member_map_:
            return cls(value)
    else:
        text = str(value).lower().removeprefix(prefix)
        text = aliases.get(text, text)
        if text.upper() in cls.__members__:
            return cls[text.upper()]
    raise UsageError(f"unknown {what} {value!r}: expected {expected}")


@dataclasses.dataclass(frozen=True)
class NetfilterInfo:
    """A netfilter link's details, as the kernel reports them."""

    family: NetfilterFamily | int
    hook: NetfilterHook | int
    priority: int
    flags: int

    @property
    def defrag(self) -> bool:
        return bool(self.flags & BPF_F_NETFILTER_IP_DEFRAG)


def _decode_netfilter(raw: Any) -> NetfilterInfo:
    nf = raw.netfilter
    return NetfilterInfo(_enum(NetfilterFamily, int(nf.pf)), _enum(NetfilterHook, int(nf.hooknum)),
                         int(nf.priority), int(nf.flags))




class NetfilterLink(RawLink):
    """A program attached as a netfilter hook function (BPF_LINK_TYPE_NETFILTER)."""

    kind = "netfilter"

    def __init__(self, fd: FD, pinned_path: str | None = None, *, where: str = "") -> None:
        super().__init__(fd, pinned_path)
        self.where = where  # "ipv4 local_out priority 100 in network namespace blue"

    @property
    def description(self) -> str:
        return f"netfilter {self.where}" if self.where else "netfilter"

    def _where(self) -> str:
        return f"{self.where}, " if self.where else ""



def have_netfilter_link() -> bool:
    """Whether the kernel has netfilter links (6.4+, CONFIG_NETFILTER_BPF_LINK): the cached
    ``netfilter_link`` probe of :mod:`bpfkit.features`."""
    from .. import features

    return features.probe("netfilter_link").supported


def _hint(err: int, defrag: bool) -> str:
    if err == errno.ERANGE:
        if defrag:
            return "with defrag=True the priority must be after IP defragmentation (greater than -400)"
        return "the priority must be between INT_MIN and INT_MAX, exclusive"
    if err == errno.EOPNOTSUPP and defrag:
        return "IP defragmentation for this family is unavailable (nf_defrag_ipv4/ipv6)"
    if err == errno.EINVAL:
        return ("the kernel refused the request (a flag it does not know: defrag needs Linux 6.6; or not a "
                "netfilter program)")
    if err == errno.EAFNOSUPPORT:
        return "the kernel does not take this family"
    if err == errno.EEXIST:
        return "a netfilter hook function with this priority already exists"
    return ""


def attach_netfilter(
    prog: ProgramArg,
    family: NetfilterFamily | str | int,
    hook: NetfilterHook | str | int,
    priority: int,
    *,
    defrag: bool = False,
    netns: Any = None,
) -> NetfilterLink:
    """Run netfilter program ``prog`` at ``hook`` of ``family`` in network namespace ``netns``
    (None: the caller's; a name, path, fd or Netns) with ``priority``. ``defrag`` reassembles IP
    fragments first (6.6)."""
    fam, hk = NetfilterFamily.of(family), NetfilterHook.of(hook)
    if isinstance(priority, bool) or not isinstance(priority, int) or not -(1 << 31) < priority < (1 << 31) - 1:
        raise UsageError(f"netfilter priority must be an int between INT_MIN and INT_MAX, exclusive, not {priority!r}")
    prog_fd = check_program(prog, (ProgType.NETFILTER,), "a netfilter hook")
    if not have_netfilter_link():
        from .. import features

        raise NotSupportedError("netfilter links (BPF_LINK_TYPE_NETFILTER)", features.probe("netfilter_link").reason,
                                "6.4")
    flags = BPF_F_NETFILTER_IP_DEFRAG if defrag else 0

    def fill(attr: Any) -> None:
        attr.link_create.netfilter.pf = int(fam)
        attr.link_create.netfilter.hooknum = int(hk)
        attr.link_create.netfilter.priority = priority
        attr.link_create.netfilter.flags = flags

    with _nl.Netns.open(netns) as ns:
        where = (f"{fam.name.lower()} {hk.name.lower()} priority {priority}" + (" defrag" if defrag else "")
                 + ("" if netns is None else f" in network namespace {ns.name}"))
        try:
            fd = ns.run(_bpf.link_create, prog_fd, 0, int(AttachType.NETFILTER), 0, fill)
        except BPFKitError as exc:
            if isinstance(exc, KernelError):
                exc = explained(exc, _hint(exc.errno, defrag))
            raise exc.wrap(f"attach netfilter program {prog_name(prog)!r} at {where}") from None
    return NetfilterLink(fd, where=where)


# ----------------------------------------------------------------------- the kind's record
KIND = LinkKind(
    "netfilter",
    never_auto={"netfilter": ("a netfilter program needs a family, hook and priority, which a section does not name; "
                              "attach with bpfkit.link.attach_netfilter(prog, family, hook, priority)")},
    link_classes={LinkType.NETFILTER: NetfilterLink},
    info_decoders={LinkType.NETFILTER: _decode_netfilter},
    features=("netfilter_link",),
)
