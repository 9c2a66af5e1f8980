# SPDX-License-Identifier: Apache-2.0
"""Network devices as attach targets (xdp.py, tc.py, netkit.py): the attach-path option
(link or netlink), the kernel-feature probes that pick a path, an interface resolved in its
namespace, and what XDP/tcx links and netlink attachments share.
"""

from __future__ import annotations

import contextlib
import enum
import errno
import threading
from collections.abc import Iterator
from typing import Any, Protocol, TypeVar

from .. import asm
from .._kernel import bpf as _bpf
from .._kernel import netlink as _nl
from .._kernel.consts import AttachType, ProgType
from .._kernel.fd import FD
from .._protocols import ProgramArg
from ..errors import BPFKitError, KernelError, NotFoundError, UsageError, errno_name
from ._prog_arg import check_program, prog_name
from .base import HeldProgramAttachment, choice_of

__all__ = ["NetAttachMode", "have_xdp_link", "have_tcx", "Target", "resolve_target"]


class NetAttachMode(enum.Enum):
    """How a network program is attached.

    AUTO takes a bpf_link where the kernel has one for the hook (XDP: 5.9, tc: tcx, 6.6) and
    netlink otherwise; LINK and NETLINK force one path (tests, or to mimic an old kernel).
    """

    AUTO = "auto"
    LINK = "link"  # BPF_LINK_CREATE: an XDP link, or a tcx link
    NETLINK = "netlink"  # rtnetlink through pyroute2: IFLA_XDP, or a cls_bpf filter on clsact

    @classmethod
    def of(cls, value: NetAttachMode | str) -> NetAttachMode:
        return choice_of(cls, value, "network attach mode")


# ------------------------------------------------------------------------ feature probes
_probe_lock = threading.Lock()
_probe_cache: dict[str, tuple[bool, str]] = {}


def _cached(name: str, run: Any) -> tuple[bool, str]:
    with _probe_lock:
        if name not in _probe_cache:
            _probe_cache[name] = run()
        return _probe_cache[name]


def _link_create_probe(ptype: ProgType, what: str, target: int, attach: AttachType, flags: int,
                       answers: dict[int, tuple[bool, str]], attached: tuple[bool, str]) -> tuple[bool, str]:
    """Load a ``ptype`` program and try BPF_LINK_CREATE(``attach``) on ``target``: the errno's
    entry in ``answers`` (else no, naming the errno), or ``attached`` when the kernel took it."""
    try:
        prog = _bpf.prog_load(int(ptype), _RET_PASS, name="bpfkit_probe")
    except KernelError as exc:
        return False, f"cannot load {what} program: {errno_name(exc.errno)}"
    op = f"BPF_LINK_CREATE(BPF_{attach.name})"
    with prog:
        try:
            _bpf.link_create(prog, target, int(attach), flags=flags).close()
        except KernelError as exc:
            if exc.errno in answers:
                return answers[exc.errno]
            return False, f"{op} gave {errno_name(exc.errno)}"
    return attached


def _xdp_link_probe() -> tuple[bool, str]:
    # 5.9: aa8d3a716b59 ("bpf, xdp: Add bpf_link-based XDP attachment API"). An XDP link in
    # offload mode on the loopback device (ifindex 1 in every namespace) gets as far as asking
    # the driver, which has no ndo_bpf: EOPNOTSUPP. Before 5.9 BPF_XDP is an unknown attach
    # type for LINK_CREATE: EINVAL. Nothing is attached either way.
    reached = True, "BPF_LINK_CREATE(BPF_XDP) reached the driver (EOPNOTSUPP from lo in offload mode)"
    return _link_create_probe(
        ProgType.XDP, "an XDP", 1, AttachType.XDP, int(_nl.XdpFlag.HW_MODE),
        {errno.EOPNOTSUPP: reached, 524: reached,
         errno.EINVAL: (False, "BPF_LINK_CREATE(BPF_XDP) gave EINVAL: no XDP links (Linux 5.9+)")},
        (True, "BPF_LINK_CREATE(BPF_XDP) attached to lo in offload mode"))


def _tcx_probe() -> tuple[bool, str]:
    # 6.6: e420bed02507 ("bpf: Add fd-based tcx multi-prog infra with link support"). A tcx
    # link for ifindex 0 is ENODEV once the kernel knows tcx, EINVAL before.
    return _link_create_probe(
        ProgType.SCHED_CLS, "a sched_cls", 0, AttachType.TCX_INGRESS, 0,
        {errno.ENODEV: (True, "BPF_LINK_CREATE(BPF_TCX_INGRESS) on ifindex 0 gave ENODEV: the kernel has tcx"),
         errno.EINVAL: (False, "BPF_LINK_CREATE(BPF_TCX_INGRESS) gave EINVAL: no tcx (Linux 6.6+)")},
        (False, "BPF_LINK_CREATE(BPF_TCX_INGRESS) accepted ifindex 0; cannot tell"))


# r0 = 2; exit (XDP_PASS; the probes never attach anything that runs)
_RET_PASS = asm.return_imm(2)


def have_xdp_link() -> bool:
    """Whether BPF_LINK_CREATE makes XDP links (5.9+); cached per process."""
    return _cached("xdp_link", _xdp_link_probe)[0]


def have_tcx() -> bool:
    """Whether the kernel has tcx, multi-program tc hooks with links (6.6+); cached."""
    return _cached("tcx", _tcx_probe)[0]


def probe_reason(name: str) -> str:
    return _cached(name, {"xdp_link": _xdp_link_probe, "tcx": _tcx_probe}[name])[1]


# ----------------------------------------------------------------------- interfaces
class Target:
    """An interface in a network namespace, resolved at attach time."""

    def __init__(self, netns: _nl.Netns, ifindex: int, name: str) -> None:
        self.netns = netns
        self.ifindex = ifindex
        self.name = name

    def __str__(self) -> str:
        where = "" if self.netns.name == "current" else f" in netns {self.netns.name}"
        return f"{self.name} (ifindex {self.ifindex}{where})"


def resolve_target(iface: str | int, netns: Any) -> Target:
    """Open ``netns`` (None: the caller's) and find ``iface`` (a name or an ifindex) in it.
    The Target owns the namespace handle; the caller closes ``target.netns``."""
    if isinstance(iface, bool) or not isinstance(iface, (str, int)) or iface == "":
        raise UsageError(f"interface must be a name or an ifindex, not {iface!r}")
    ns = _nl.Netns.open(netns)
    try:
        ifindex = ns.run(_nl.ifindex_of, iface)
        name = ns.run(_nl.ifname_of, ifindex)
    except NotFoundError:
        where = "the current network namespace" if netns is None else f"network namespace {ns.name}"
        ns.close()
        what = f"index {iface}" if isinstance(iface, int) else repr(iface)
        raise NotFoundError(f"no network interface {what} in {where}") from None
    except BaseException:
        ns.close()
        raise
    return Target(ns, ifindex, name)


@contextlib.contextmanager
def opened_target(iface: str | int, netns: Any) -> Iterator[Target]:
    """resolve_target(``iface``, ``netns``) for a with block, its namespace handle closed after."""
    target = resolve_target(iface, netns)
    try:
        yield target
    finally:
        target.netns.close()


def device_hint(err: int) -> str:
    """What ``err`` means at any interface's hook (the last words of the xdp and tc hints)."""
    if err in (errno.ENODEV, errno.ENXIO):
        return "the interface no longer exists"
    if err in (errno.EPERM, errno.EACCES):
        return "needs CAP_NET_ADMIN (and CAP_BPF)"
    return ""


class _Hook(Protocol):
    @property
    def attach_type(self) -> AttachType: ...


_H = TypeVar("_H", bound=_Hook)


def by_attach_type(hooks: type[_H], at: int) -> _H | int:
    """The member of enum ``hooks`` (a tc direction, a netkit role) whose attach type is
    ``at``, as a link's info reports it; ``at`` itself for one bpfkit does not know."""
    return next((h for h in hooks if int(h.attach_type) == at), at)  # type: ignore[attr-defined]


def gone(exc: BPFKitError) -> bool:
    """Whether an error says the interface (or its namespace) no longer exists."""
    return isinstance(exc, NotFoundError) or getattr(exc, "errno", None) in (errno.ENODEV, errno.ENXIO)


class NetLinkUpdate:
    """What XDP and tcx links share: the interface they were attached to, and update():
    BPF_LINK_UPDATE, with the program type checked first and
    the kernel's EPERM for a wrong ``old`` (bpf_xdp_link_update, tcx_link_update) said as
    what it is rather than as a missing capability."""

    kind: str
    _prog_types: tuple[ProgType, ...] = ()

    def __init__(self, fd: FD, pinned_path: str | None = None, *, iface: str = "", ifindex: int = 0) -> None:
        super().__init__(fd, pinned_path)  # type: ignore[call-arg]  # RawLink, next in the MRO
        self.iface = iface  # as asked for at attach time ("" when opened from a pin or id)
        self.ifindex = ifindex

    def _place(self) -> str:
        """Where on the device the link was asked for (a tc direction, a netkit role; "" if not known)."""
        return ""

    def _where(self) -> str:
        return f"{self.iface} {self._place()}, " if self.iface else ""

    def update(self, prog: ProgramArg, old: ProgramArg | None = None) -> None:
        check_program(prog, self._prog_types, f"a {self.kind} link")
        try:
            super().update(prog, old)  # type: ignore[misc]
        except KernelError as exc:
            if old is None or exc.errno != errno.EPERM:
                raise
            raise KernelError("BPF_LINK_UPDATE", errno.EPERM,
                              f"the link's program is not the expected old one ({prog_name(old)!r})"
                              ).wrap(f"update {self.kind} link") from None


class NetlinkAttachment(HeldProgramAttachment):
    """A program on a network hook through netlink (XDP's IFLA_XDP, a cls_bpf filter): no
    kernel link object, so pin, unpin and info raise NotSupportedError. The object holds a
    duplicate of the program's fd and the interface's namespace handle until close();
    subclasses say how to remove the program (``_remove``: only while it is still ours)."""

    kind = "netlink"

    def __init__(self, target: Target, prog_fd: FD, program: str) -> None:
        self.target = target  # owns the namespace handle until close()
        self.iface = target.name
        self.ifindex = target.ifindex
        self.program = program
        self._prog_fd = prog_fd
        self._attached = True

    def _where(self) -> str:
        return self.iface

    def _check_open(self, what: str) -> None:
        if self._prog_fd is None:
            raise UsageError(f"{what} of a closed {self.kind} attachment on {self._where()}")

    def _release(self) -> None:
        self.target.netns.close()
