# SPDX-License-Identifier: Apache-2.0
"""netkit: sched_cls programs inside a netkit device pair's transmit routine.

    lk = link.attach_netkit(prog, "nk0")                          # on the primary device
    lk = link.attach_netkit(prog, "nk0", peer=True, anchor=link.Anchor.head())
    link.netkit_query("nk0", peer=True)                           # NetkitQuery: what runs there

A netkit pair (6.7, 35dfaad7188c; CONFIG_NETKIT) is a primary device, usually in the host's
namespace, and its peer, usually moved into a container's. Programs are attached through the
primary's ifindex only (the kernel refuses the peer's with EACCES): BPF_LINK_CREATE with
attach type BPF_NETKIT_PRIMARY puts the program on the primary, BPF_NETKIT_PEER on the peer.
A device's programs run in its ndo_start_xmit, for every packet it sends to the other side:
the primary's for traffic towards the peer, the peer's for traffic the peer sends (a
container's egress). They return NETKIT_PASS (0), NETKIT_DROP (2), NETKIT_REDIRECT (7) or
NETKIT_NEXT (-1, let the next program decide; from the last one it forwards like PASS). The
device's policy (forward or blackhole, set when the pair is made) decides only while it has no
program.
Each device holds an ordered list (bpf_mprog) like a tcx hook: :class:`bpfkit.link.Anchor` and
``expected_revision`` work as for :func:`bpfkit.link.tcx`. The link detaches on close, pins,
updates and detaches like other bpf_links.
"""

from __future__ import annotations

import dataclasses
import enum
import errno
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..probespec import ProbeSpec

from .._kernel import bpf as _bpf
from .._kernel.consts import AttachType, LinkType, ProgType
from .._kernel.fd import FD
from .._protocols import ProgramArg
from ..errors import BPFKitError, KernelError, NotSupportedError, ParseError, UsageError
from ._netdev import NetAttachMode, NetLinkUpdate, by_attach_type, opened_target, resolve_target
from ._prog_arg import check_program, explained, prog_name
from .anchor import Anchor, MprogQuery, mprog_link_args
from .base import Link, RawLink
from .kind import AttachOptions, LinkKind, Section, SectionTarget
from .tc import TcxProgram
from .tc import _hint as _mprog_hint
from .xdp import refuse_xdp_mode

__all__ = ["NetkitRole", "NetkitInfo", "NetkitLink", "NetkitQuery", "attach_netkit", "netkit_query",
           "have_netkit_link"]


class NetkitRole(enum.Enum):
    """Which device of the pair a program runs on."""

    PRIMARY = "primary"
    PEER = "peer"

    @property
    def attach_type(self) -> AttachType:
        return AttachType.NETKIT_PEER if self is NetkitRole.PEER else AttachType.NETKIT_PRIMARY

    @classmethod
    def of(cls, peer: bool | None, prog: ProgramArg | None = None) -> NetkitRole:
        """``peer`` given: that device; None: the program's section (netkit/peer or
        netkit/primary), else the primary."""
        if peer is not None:
            if not isinstance(peer, bool):
                raise UsageError(f"peer= is True (the peer device) or False (the primary), not {peer!r}")
            return cls.PEER if peer else cls.PRIMARY
        return cls.PEER if getattr(prog, "attach_type", None) == AttachType.NETKIT_PEER else cls.PRIMARY


def have_netkit_link() -> bool:
    """Whether the kernel has netkit devices and links (6.7+, CONFIG_NETKIT): the cached
    ``netkit_link`` probe of :mod:`bpfkit.features`."""
    from .. import features

    return features.probe("netkit_link").supported


@dataclasses.dataclass(frozen=True)
class NetkitInfo:
    """A netkit link's details: the primary's ifindex (in its namespace) and the device."""

    ifindex: int
    role: NetkitRole | int  # an int for an attach type bpfkit does not know


def _decode_netkit(raw: Any) -> NetkitInfo:
    return NetkitInfo(int(raw.netkit.ifindex), by_attach_type(NetkitRole, int(raw.netkit.attach_type)))


class NetkitLink(NetLinkUpdate, RawLink):
    """A program attached to a netkit device through a link (BPF_LINK_TYPE_NETKIT)."""

    kind = "netkit"
    _prog_types = (ProgType.SCHED_CLS,)

    def __init__(self, fd: FD, pinned_path: str | None = None, *, iface: str = "", ifindex: int = 0,
                 role: NetkitRole | None = None) -> None:
        super().__init__(fd, pinned_path, iface=iface, ifindex=ifindex)
        self.role = role

    def _place(self) -> str:
        return self.role.value if self.role else ""

    @property
    def description(self) -> str:
        return f"netkit {self.iface} {self._place()}".rstrip() if self.iface else "netkit"


@dataclasses.dataclass(frozen=True)
class NetkitQuery(MprogQuery):
    """The programs of one device of a netkit pair, in run order, and its revision."""

    iface: str
    ifindex: int
    role: NetkitRole
    programs: list[TcxProgram]
    revision: int


# What an errno from a netkit attach means, in words (the rest, EINVAL, ESTALE, ..., as for tcx).
_NETKIT_HINTS = {
    errno.ENXIO: "not a netkit device",
    errno.EACCES: "this is a peer device: attach through the primary (peer=True puts the program on the peer)",
    errno.EOPNOTSUPP: "a single netkit device (no peer) takes no programs",
    errno.EEXIST: "this program is already attached to this device",
}


def _hint(err: int, anchor: Anchor | None, expected_revision: int) -> str:
    return _NETKIT_HINTS.get(err) or _mprog_hint(err, "tcx", anchor, expected_revision)


def _require() -> None:
    if not have_netkit_link():
        from .. import features

        raise NotSupportedError("netkit links (BPF_LINK_CREATE with BPF_NETKIT_PRIMARY/PEER)",
                                features.probe("netkit_link").reason, "6.7")


def attach_netkit(
    prog: ProgramArg,
    iface: str | int,
    peer: bool | None = None,
    *,
    anchor: Anchor | None = None,
    expected_revision: int = 0,
    netns: Any = None,
) -> NetkitLink:
    """Attach sched_cls program ``prog`` to netkit device ``iface`` (the primary's name or
    ifindex; in network namespace ``netns``, see :func:`bpfkit.link.xdp`): on the primary, or
    with ``peer=True`` on its peer (default: from the program's netkit/primary or netkit/peer
    section, else the primary). ``anchor`` places it (default: the tail), ``expected_revision``
    (non-zero) makes the attach fail with ESTALE if the device's programs changed."""
    role = NetkitRole.of(peer, prog)
    prog_fd = check_program(prog, (ProgType.SCHED_CLS,), "a netkit device")
    _require()
    target = resolve_target(iface, netns)
    try:
        flags, fill = mprog_link_args(anchor, expected_revision)
        try:
            fd = target.netns.run(_bpf.link_create, prog_fd, target.ifindex, int(role.attach_type), flags, fill)
        except BPFKitError as exc:
            raise _fail(exc, f"attach netkit program {prog_name(prog)!r} to {target} {role.value}",
                        anchor, expected_revision) from None
    finally:
        target.netns.close()  # the link works from any namespace
    return NetkitLink(fd, iface=target.name, ifindex=target.ifindex, role=role)


def _fail(exc: BPFKitError, what: str, anchor: Anchor | None = None, expected_revision: int = 0) -> BPFKitError:
    if isinstance(exc, KernelError):
        exc = explained(exc, _hint(exc.errno, anchor, expected_revision))
    return exc.wrap(what)


def netkit_query(iface: str | int, peer: bool = False, *, netns: Any = None) -> NetkitQuery:
    """The programs on netkit device ``iface``'s primary (or, ``peer=True``, its peer), in run
    order, with the revision that ``expected_revision`` compares against (BPF_PROG_QUERY)."""
    role = NetkitRole.of(peer)
    _require()
    with opened_target(iface, netns) as target:
        try:
            progs, links, revision = target.netns.run(_bpf.prog_query_mprog, target.ifindex, int(role.attach_type))
        except BPFKitError as exc:
            raise _fail(exc, f"query netkit programs of {target} {role.value}") from None
    return NetkitQuery(target.name, target.ifindex, role, [TcxProgram(p, lk) for p, lk in zip(progs, links)],
                       revision)



# ----------------------------------------------------------------------- the kind's record
NEEDS_NETKIT = ("a section names the device of the pair, not the pair: pass netkit= (the primary's name; "
                "bpfkit attach --netkit IFACE)")


def _attach_section(prog: ProgramArg, target: SectionTarget, o: AttachOptions) -> Link:
    """``netkit/primary`` and ``netkit/peer`` (libbpf): on the device the caller names."""
    if o.netkit is None:
        raise NotSupportedError(f"auto-attach of netkit program {getattr(prog, 'name', '')!r}", NEEDS_NETKIT)
    if target.target not in ("primary", "peer"):
        raise ParseError(f"section netkit/{target.target}: expected netkit/primary or netkit/peer")
    return attach_netkit(prog, o.netkit, target.target == "peer", netns=o.netns)


def _attach_probe(spec: ProbeSpec, prog: ProgramArg, o: AttachOptions) -> Link:
    refuse_xdp_mode(spec, o)
    if NetAttachMode.of(o.net_mode) == NetAttachMode.NETLINK:
        raise UsageError(f"{spec}: netkit programs attach only through links (no netlink mode)")
    return attach_netkit(prog, spec.iface, spec.direction == "peer", netns=o.netns)


KIND = LinkKind(
    "netkit",
    sections=(Section("netkit", "netkit", _attach_section),),
    needs=("netkit", f"a netkit program: {NEEDS_NETKIT}"),
    probes={"netkit": _attach_probe},
    network=True,
    link_classes={LinkType.NETKIT: NetkitLink},
    info_decoders={LinkType.NETKIT: _decode_netkit},
    features=("netkit_link",),
)
