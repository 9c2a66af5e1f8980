# SPDX-License-Identifier: Apache-2.0
"""XDP: programs on a network interface's receive path, before (driver mode) or just after
(generic mode) the kernel builds an skb, or on the NIC itself (offload).

    with link.xdp("eth0", prog) as lk: ...                         # XDP link, else netlink
    lk = link.xdp(3, prog, xdp_mode="generic", netns="blue")       # by ifindex, in a netns
    lk = link.xdp("eth0", new, mode="netlink", replace=old)        # swap what netlink attached
    link.xdp_query("eth0")                                         # XdpQuery: what runs there

Two ways to attach, one interface slot per mode:

* **link** (5.9, aa8d3a716b59): BPF_LINK_CREATE with attach_type BPF_XDP and target_ifindex.
  The attachment lives as long as the link (close, or pin it), can be updated atomically
  (BPF_LINK_UPDATE) and detached (BPF_LINK_DETACH). While a link holds a mode, netlink cannot
  replace or remove the program (EBUSY).
* **netlink**: RTM_SETLINK with IFLA_XDP (pyroute2). The kernel holds the program until someone
  detaches it: closing the returned object detaches it only if it still is the program bpfkit
  attached (XDP_FLAGS_REPLACE with the expected program, 5.7), so a program someone attached
  since is left alone. bpfkit attaches with XDP_FLAGS_UPDATE_IF_NOEXIST (EBUSY rather than
  silently replacing another program); ``replace=old`` swaps ``old`` for the new program.

XDP modes (:class:`XdpMode`): AUTO lets the kernel choose (driver mode when the driver has
native XDP, else generic), GENERIC (XDP_FLAGS_SKB_MODE) works on any device, DRIVER
(XDP_FLAGS_DRV_MODE) needs driver support, OFFLOAD (XDP_FLAGS_HW_MODE) needs a NIC that runs
BPF and a program loaded for it. Driver and generic programs cannot coexist on one device.

ebpf_exporter's ``SEC("xdp/IFACE")`` names the interface in the section:
:func:`bpfkit.link.attach_all` attaches those there (libbpf's ``xdp/devmap`` and ``xdp/cpumap``
keep their meaning: programs run from a map entry, never auto-attached).
"""

from __future__ import annotations

import dataclasses
import enum
import errno
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..probespec import ProbeSpec

from .._kernel import bpf as _bpf
from .._kernel import netlink as _nl
from .._kernel.consts import AttachType, LinkType, ProgType
from .._kernel.fd import FD
from .._protocols import ProgramArg
from ..errors import BPFKitError, KernelError, NotSupportedError, UsageError
from ._netdev import (
    NetAttachMode,
    NetlinkAttachment,
    NetLinkUpdate,
    Target,
    device_hint,
    gone,
    have_xdp_link,
    opened_target,
    probe_reason,
    resolve_target,
)
from ._prog_arg import check_program, dup_prog_fd, explained, prog_id_of, prog_name
from .base import Link, RawLink, _prog_fd, choice_of
from .kind import AttachOptions, LinkKind, Section, SectionTarget

__all__ = ["XdpMode", "XdpInfo", "XdpLink", "XdpNetlinkLink", "XdpQuery", "xdp", "xdp_query", "xdp_detach"]

XdpFlag = _nl.XdpFlag


class XdpMode(enum.Enum):
    """Where an XDP program runs (the XDP_FLAGS_*_MODE bits)."""

    AUTO = "auto"  # no mode flag: driver mode when the driver supports it, else generic
    GENERIC = "generic"  # XDP_FLAGS_SKB_MODE: after the skb is built; any device
    DRIVER = "driver"  # XDP_FLAGS_DRV_MODE: native, in the driver's receive path
    OFFLOAD = "offload"  # XDP_FLAGS_HW_MODE: on the NIC

    @property
    def flag(self) -> XdpFlag:
        return _MODE_FLAGS[self]

    @classmethod
    def of(cls, value: XdpMode | str | None) -> XdpMode:
        if value is None:
            return cls.AUTO
        return choice_of(cls, value, "XDP mode", {"skb": "generic", "xdpgeneric": "generic", "native": "driver",
                                                  "drv": "driver", "hw": "offload", "xdpoffload": "offload"})


_MODE_FLAGS = {
    XdpMode.AUTO: XdpFlag(0),
    XdpMode.GENERIC: XdpFlag.SKB_MODE,
    XdpMode.DRIVER: XdpFlag.DRV_MODE,
    XdpMode.OFFLOAD: XdpFlag.HW_MODE,
}
_ATTACHED_MODE = {_nl.XdpAttached.DRV: XdpMode.DRIVER, _nl.XdpAttached.SKB: XdpMode.GENERIC,
                  _nl.XdpAttached.HW: XdpMode.OFFLOAD}


# ------------------------------------------------------------------------------- query
@dataclasses.dataclass(frozen=True)
class XdpQuery:
    """What runs at an interface's XDP hook: program id by mode (only attached modes)."""

    iface: str
    ifindex: int
    programs: dict[XdpMode, int]

    @property
    def prog_id(self) -> int:
        """The attached program's id (the driver-mode one when several modes hold one), or 0."""
        for mode in (XdpMode.DRIVER, XdpMode.GENERIC, XdpMode.OFFLOAD):
            if mode in self.programs:
                return self.programs[mode]
        return 0

    @property
    def mode(self) -> XdpMode | None:
        """The mode of :attr:`prog_id`, or None when nothing is attached."""
        for mode in (XdpMode.DRIVER, XdpMode.GENERIC, XdpMode.OFFLOAD):
            if mode in self.programs:
                return mode
        return None

    def __bool__(self) -> bool:
        return bool(self.programs)


def _query(target: Target) -> XdpQuery:
    state = target.netns.run(_nl.xdp_state, target.ifindex)
    programs = {mode: state.prog_id(mode.flag) for mode in (XdpMode.DRIVER, XdpMode.GENERIC, XdpMode.OFFLOAD)}
    return XdpQuery(target.name, target.ifindex, {m: i for m, i in programs.items() if i})


def xdp_query(iface: str | int, *, netns: Any = None) -> XdpQuery:
    """The XDP programs attached to ``iface`` (IFLA_XDP; attached by link or netlink alike)."""
    with opened_target(iface, netns) as target:
        try:
            return _query(target)
        except BPFKitError as exc:
            raise exc.wrap(f"query XDP programs of {target}")


# ---------------------------------------------------------------------- error meanings
def _hint(err: int, mode: XdpMode, path: str, replacing: bool) -> str:
    """What ``err`` means for an XDP attach, in words."""
    if err == errno.EBUSY:
        if path == "link":
            return ("another XDP program is attached in this mode (a link cannot replace a program "
                    "attached through netlink, nor another link)")
        return "another XDP program is attached (detach it first, or pass replace=)"
    if err == errno.EEXIST:
        if replacing:
            return "the attached program is not the expected one given as replace="
        return "a program is attached in another XDP mode (driver and generic XDP cannot be active at once)"
    if err in (errno.EOPNOTSUPP, 524):
        if mode == XdpMode.DRIVER:
            return "driver mode is unsupported by this device (try xdp_mode='generic')"
        if mode == XdpMode.OFFLOAD:
            return "offload is unsupported by this device"
        return "this device does not support XDP in the chosen mode"
    if err == errno.EINVAL:
        if mode == XdpMode.OFFLOAD:
            return "offload needs a NIC that runs BPF and a program loaded for that device"
        return "the kernel refused the request (not an XDP program, a devmap/cpumap program, or bad flags)"
    if err == errno.ERANGE:
        return "the MTU is too large for XDP in driver mode on this device"
    return device_hint(err)


def _fail(exc: BPFKitError, prog: ProgramArg | str, target: Target, mode: XdpMode, path: str, replacing: bool = False,
          what: str = "attach") -> BPFKitError:
    if isinstance(exc, KernelError):
        exc = explained(exc, _hint(exc.errno, mode, path, replacing))
    return exc.wrap(f"{what} XDP program {prog_name(prog)!r} {'to' if what == 'attach' else 'on'} {target} "
                    f"({mode.value} XDP mode, via {path})")


# --------------------------------------------------------------------------- the links
@dataclasses.dataclass(frozen=True)
class XdpInfo:
    """An XDP link's details: the interface (its index, in the namespace it was made in)."""

    ifindex: int


class XdpLink(NetLinkUpdate, RawLink):
    """A program attached to an interface's XDP hook through a bpf_link (BPF_LINK_TYPE_XDP).

    ``iface``/``ifindex``/``mode`` describe the attachment as asked for (for AUTO the kernel
    picked driver mode if the driver has it, else generic: :func:`xdp_query` tells); a link
    opened from a pin or id knows only what :meth:`info` says.
    """

    kind = "xdp"
    _prog_types = (ProgType.XDP,)

    def __init__(self, fd: FD, pinned_path: str | None = None, *, iface: str = "", ifindex: int = 0,
                 mode: XdpMode | None = None) -> None:
        super().__init__(fd, pinned_path, iface=iface, ifindex=ifindex)
        self.mode = mode

    def _where(self) -> str:
        return (f"{self.iface}, " if self.iface else "") + (f"{self.mode.value}, " if self.mode else "")


class XdpNetlinkLink(NetlinkAttachment):
    """A program attached through netlink (IFLA_XDP): no kernel link object.

    close() and detach() remove the program only while it is the one bpfkit attached
    (XDP_FLAGS_REPLACE with the expected program); update() swaps it the same way. There is
    nothing to pin, and no bpf_link info: pin, unpin and info raise NotSupportedError
    (:func:`xdp_query` says what is attached).
    """

    kind = "xdp (netlink)"

    def __init__(self, target: Target, prog_fd: FD, mode: XdpMode, prog: str) -> None:
        super().__init__(target, prog_fd, prog)
        self.mode = mode  # the mode the program runs in (the kernel's choice for AUTO)

    @property
    def prog_id(self) -> int:
        """The id of the program this object attached (and will detach)."""
        self._check_open("prog_id")
        assert self._prog_fd is not None
        return prog_id_of(self._prog_fd)

    def _unsupported(self, what: str) -> NotSupportedError:
        return NotSupportedError(
            f"{what} of an XDP program attached through netlink",
            "there is no bpf_link; attach with mode='link' (XDP links need Linux 5.9+)")

    def query(self) -> XdpQuery:
        """What the interface's XDP hook holds now."""
        self._check_open("query")
        return _query(self.target)

    def update(self, prog: ProgramArg, old: ProgramArg | None = None) -> None:
        """Swap in ``prog`` atomically, only if the attached program is ours (or ``old``)."""
        self._check_open("update")
        assert self._prog_fd is not None
        if not self._attached:
            raise UsageError(f"update of a detached XDP attachment on {self.iface}")
        new_fd = check_program(prog, (ProgType.XDP,), "an XDP hook")
        expected = _prog_fd(old) if old is not None else self._prog_fd.raw
        flags = self.mode.flag | XdpFlag.REPLACE
        try:
            self.target.netns.run(_nl.xdp_set, self.ifindex, new_fd, flags, expected)
        except BPFKitError as exc:
            raise _fail(exc, prog, self.target, self.mode, "netlink", replacing=True, what="update")
        mine = dup_prog_fd(prog)
        self._prog_fd.close()
        self._prog_fd = mine
        self.program = prog_name(prog)

    def _remove(self) -> None:
        """Detach our program if it still is the one attached; quietly nothing otherwise."""
        assert self._prog_fd is not None
        flags = self.mode.flag | XdpFlag.REPLACE
        try:
            self.target.netns.run(_nl.xdp_set, self.ifindex, -1, flags, self._prog_fd.raw)
        except BPFKitError as exc:
            if gone(exc):
                return  # interface gone: nothing left to detach
            if getattr(exc, "errno", None) == errno.EEXIST:
                return  # someone replaced or removed our program: not ours to touch
            if getattr(exc, "errno", None) == errno.EINVAL and self._remove_without_replace():
                return
            raise _fail(exc, self.program, self.target, self.mode, "netlink", what="detach")

    def _remove_without_replace(self) -> bool:
        # Before 5.7 there is no XDP_FLAGS_REPLACE (EINVAL): compare ids, then detach.
        assert self._prog_fd is not None
        state = self.target.netns.run(_nl.xdp_state, self.ifindex)
        if state.prog_id(self.mode.flag) != prog_id_of(self._prog_fd):
            return True
        self.target.netns.run(_nl.xdp_set, self.ifindex, -1, self.mode.flag)
        return True

    def detach(self) -> None:
        """Detach the program now (if still ours); close() is still needed to free fds."""
        self._check_open("detach")
        if self._attached:
            self._remove()
            self._attached = False

    def __repr__(self) -> str:
        state = "closed" if self.closed else ("attached" if self._attached else "detached")
        return f"XdpNetlinkLink({self.target}, {self.mode.value}, {self.program!r}, {state})"


# --------------------------------------------------------------------------- attaching
def _attached_mode(target: Target, prog_fd: int, asked: XdpMode) -> XdpMode:
    """The mode the kernel put our program in (asked, or its choice for AUTO)."""
    if asked != XdpMode.AUTO:
        return asked
    try:
        query = _query(target)
        ours = prog_id_of(prog_fd)
    except BPFKitError:
        return asked
    for mode, prog_id in query.programs.items():
        if prog_id == ours:
            return mode
    return asked


def xdp(
    iface: str | int,
    prog: ProgramArg,
    *,
    mode: NetAttachMode | str = NetAttachMode.AUTO,
    xdp_mode: XdpMode | str | None = XdpMode.AUTO,
    replace: ProgramArg | None = None,
    netns: Any = None,
) -> XdpLink | XdpNetlinkLink:
    """Attach XDP program ``prog`` to interface ``iface`` (name or ifindex).

    ``mode``: AUTO (an XDP link when the kernel has them, 5.9+, else netlink), ``link`` or
    ``netlink``. ``xdp_mode``: auto, generic, driver or offload. ``replace``: the program
    (Program or fd) expected to be attached now, swapped atomically for ``prog``; this is a
    netlink operation (an XDP link is swapped with ``link.update(new, old=...)``). ``netns``:
    the network namespace of ``iface`` (a name from ``ip netns add``, a path such as
    /proc/PID/ns/net, an fd; None for the caller's).
    """
    path_mode = NetAttachMode.of(mode)
    xmode = XdpMode.of(xdp_mode)
    prog_fd = check_program(prog, (ProgType.XDP,), "an XDP hook")
    target = resolve_target(iface, netns)
    try:
        use_link = path_mode == NetAttachMode.LINK or (path_mode == NetAttachMode.AUTO and replace is None and have_xdp_link())
        if use_link:
            if replace is not None:
                raise UsageError("replace= swaps a program attached through netlink; an XDP link is swapped with "
                                 "its update(new, old=...) method (or pass mode='netlink')")
            if not have_xdp_link():
                raise NotSupportedError("XDP links (BPF_LINK_CREATE with BPF_XDP)",
                                        f"{probe_reason('xdp_link')}; use mode='netlink' or 'auto'", "5.9")
            try:
                fd = target.netns.run(_bpf.link_create, prog_fd, target.ifindex, int(AttachType.XDP),
                                      int(xmode.flag))
            except BPFKitError as exc:
                raise _fail(exc, prog, target, xmode, "link")
            target.netns.close()  # the link works from any namespace
            return XdpLink(fd, iface=target.name, ifindex=target.ifindex, mode=xmode)
        flags = xmode.flag | (XdpFlag.REPLACE if replace is not None else XdpFlag.UPDATE_IF_NOEXIST)
        expected = _prog_fd(replace) if replace is not None else None
        mine = dup_prog_fd(prog)
        try:
            target.netns.run(_nl.xdp_set, target.ifindex, prog_fd, flags, expected)
        except BPFKitError as exc:
            mine.close()
            raise _fail(exc, prog, target, xmode, "netlink", replacing=replace is not None)
        return XdpNetlinkLink(target, mine, _attached_mode(target, prog_fd, xmode), prog_name(prog))
    except BaseException:
        target.netns.close()
        raise


def xdp_detach(iface: str | int, *, xdp_mode: XdpMode | str | None = XdpMode.AUTO, expected: Any = None,
               netns: Any = None) -> bool:
    """Detach the XDP program attached through netlink to ``iface`` in ``xdp_mode`` (AUTO: the
    mode the program runs in); with ``expected`` only if that program is the one attached.
    A program held by an XDP link cannot be removed this way (EBUSY): close the link.
    Returns False when nothing was attached."""
    with opened_target(iface, netns) as target:
        xmode = XdpMode.of(xdp_mode)
        query = _query(target)
        if xmode == XdpMode.AUTO:
            xmode = query.mode or XdpMode.AUTO
        if xmode not in query.programs:
            return False
        flags = xmode.flag
        exp = None
        if expected is not None:
            flags |= XdpFlag.REPLACE
            exp = _prog_fd(expected)
        try:
            target.netns.run(_nl.xdp_set, target.ifindex, -1, flags, exp)
        except BPFKitError as exc:
            if isinstance(exc, KernelError):
                hint = ("the program is held by an XDP link: close (or unpin) the link" if exc.errno == errno.EBUSY
                        else _hint(exc.errno, xmode, "netlink", expected is not None))
                exc = explained(exc, hint)
            raise exc.wrap(f"detach XDP program from {target} in {xmode.value} mode")
        return True


# ----------------------------------------------------------------------- the kind's record
def refuse_xdp_mode(spec: ProbeSpec, options: AttachOptions) -> None:
    """xdp_mode= is for xdp specs: the other network kinds refuse one."""
    if XdpMode.of(options.xdp_mode) != XdpMode.AUTO:
        raise UsageError(f"xdp_mode= applies to xdp specs, not {spec}")


def _attach_probe(spec: ProbeSpec, prog: ProgramArg, o: AttachOptions) -> Link:
    return xdp(spec.iface, prog, mode=o.net_mode, xdp_mode=o.xdp_mode, netns=o.netns)


def _attach_section(prog: ProgramArg, target: SectionTarget, o: AttachOptions) -> Link:
    """``SEC("xdp/IFACE")``, ebpf_exporter's (exporter/xdp.go): the program on interface IFACE
    of the caller's network namespace, the kernel choosing the XDP mode (an XDP link where the
    kernel has them, as libbpf's bpf_program__attach_xdp). libbpf's ``xdp/devmap`` and
    ``xdp/cpumap`` never get here (attach.py passes them over: they name no interface)."""
    if not target.target:  # attach_section refuses a bare SEC("xdp") before this
        raise NotSupportedError("auto-attach of section 'xdp'", KIND.never_auto["xdp"])
    try:
        return xdp(target.target, prog, mode=o.net_mode, xdp_mode=o.xdp_mode, netns=o.netns)
    except BPFKitError as exc:
        raise exc.wrap(f"section 'xdp/{target.target}'")


KIND = LinkKind(
    "xdp",
    sections=(Section("xdp", "xdp", _attach_section),),
    never_auto={"xdp": ("an XDP program goes on an interface, which SEC(\"xdp\") does not name, and an "
                        "xdp/devmap or xdp/cpumap program runs from a devmap/cpumap entry: attach with "
                        "bpfkit.link.xdp (or an xdp:IFACE probe spec), or name the interface in the section "
                        "as ebpf_exporter's objects do: xdp/IFACE")},
    probes={"xdp": _attach_probe},
    network=True,
    link_classes={LinkType.XDP: XdpLink},
    info_decoders={LinkType.XDP: lambda raw: XdpInfo(int(raw.xdp.ifindex))},
    features=("prog_type_xdp",),
)
