# SPDX-License-Identifier: Apache-2.0
"""Network namespaces and the rtnetlink requests bpfkit makes, through pyroute2.

Two kernel facts shape this module:

* **Interfaces belong to a network namespace; bpf objects do not.** An ifindex means something
  only inside one namespace, and both BPF_LINK_CREATE (``current->nsproxy->net_ns``) and a
  netlink socket (the namespace it was created in) resolve it in the caller's namespace. A
  :class:`Netns` holds a namespace open by fd and runs a function inside it on a short-lived
  thread that has called setns(2) (setns of CLONE_NEWNET affects only the calling thread);
  program, map and link fds work from any thread, in any namespace.
* **Netlink is the only way to attach XDP before 5.9 and cls_bpf at all.** Requests go through
  pyroute2 (``IPRoute``), opened per call in the thread's namespace; its NetlinkError (with the
  kernel's extended-ack message when there is one) becomes a :class:`bpfkit.errors.KernelError`.

The functions below the Netns class act in the calling thread's namespace: call them through
``netns.run(fn, ...)``.
"""

from __future__ import annotations

import dataclasses
import enum
import errno
import os
import socket
import threading
from collections.abc import Callable
from typing import Any, TypeVar, cast

from .._closing import ClosesOnExit
from ..errors import KernelError, NotFoundError, UsageError, kernel_error
from .abi import ffi, libc
from .fd import FD

__all__ = [
    "Netns",
    "XdpFlag",
    "XdpAttached",
    "XdpState",
    "TcFilter",
    "TC_H_CLSACT",
    "TC_H_INGRESS_PARENT",
    "TC_H_EGRESS_PARENT",
    "ETH_P_ALL",
    "ifindex_of",
    "ifname_of",
    "xdp_set",
    "xdp_state",
    "qdisc_kinds",
    "clsact_add",
    "clsact_del",
    "tc_filters",
    "bpf_filter_add",
    "filter_del",
    "NetkitMode",
    "NetkitPolicy",
    "netkit_add",
]

T = TypeVar("T")

CLONE_NEWNET = 0x40000000
NS_GET_NSTYPE = 0xB703  # _IO(0xb7, 0x3), linux/nsfs.h
NETNS_RUN_DIR = "/run/netns"  # where `ip netns add NAME` bind-mounts the namespace


# --------------------------------------------------------------------------- namespaces
class Netns(ClosesOnExit):
    """A network namespace, held open by an fd on its nsfs file.

    While this object is open the namespace (and its interfaces) lives on even after
    ``ip netns del``. :meth:`run` calls a function inside it.
    """

    def __init__(self, fd: FD, name: str) -> None:
        self.fd = fd
        self.name = name

    @classmethod
    def current(cls) -> Netns:
        """The calling thread's namespace."""
        raw = os.open("/proc/thread-self/ns/net", os.O_RDONLY | os.O_CLOEXEC)
        return cls(FD(raw), "current")

    @classmethod
    def open(cls, spec: Netns | str | int | None) -> Netns:
        """A new holder of ``spec``: None for the calling thread's namespace, a name made by
        ``ip netns add`` (/run/netns/NAME), a path to an nsfs file (/proc/PID/ns/net), an fd
        or another Netns (duplicated)."""
        if spec is None:
            return cls.current()
        if isinstance(spec, Netns):
            return cls(spec.fd.dup(), spec.name)
        if isinstance(spec, int):
            return cls(_dup_raw(spec), f"fd {spec}")
        path = spec if "/" in spec else os.path.join(NETNS_RUN_DIR, spec)
        try:
            raw = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        except FileNotFoundError:
            raise NotFoundError(f"no network namespace {spec!r} ({path} does not exist)") from None
        except OSError as exc:
            raise KernelError(f"open network namespace {path}", exc.errno or errno.EIO) from None
        ns = cls(FD(raw), spec)
        if not ns._is_netns():
            ns.close()
            raise UsageError(f"{path} is not a network namespace")
        return ns

    def _is_netns(self) -> bool:
        import fcntl

        try:  # NS_GET_NSTYPE (4.11) answers CLONE_NEWNET for a network namespace
            return fcntl.ioctl(self.fd.raw, NS_GET_NSTYPE) == CLONE_NEWNET
        except OSError:
            return False

    @property
    def inode(self) -> int:
        """The namespace's inode number (what ``ls -l /proc/PID/ns/net`` shows)."""
        return os.fstat(self.fd.raw).st_ino

    def is_current(self) -> bool:
        """Whether the calling thread already is in this namespace."""
        mine = os.stat("/proc/thread-self/ns/net")
        theirs = os.fstat(self.fd.raw)
        return (mine.st_dev, mine.st_ino) == (theirs.st_dev, theirs.st_ino)

    def run(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """``fn(*args, **kwargs)`` inside this namespace: directly when the caller is already
        there, else on a new thread that enters it first. Exceptions propagate."""
        if self.is_current():
            return fn(*args, **kwargs)
        result: dict[str, Any] = {}

        def body() -> None:
            try:
                if libc.setns(self.fd.raw, CLONE_NEWNET) != 0:
                    raise kernel_error("setns(CLONE_NEWNET)", ffi.errno, f"enter network namespace {self.name}")
                result["value"] = fn(*args, **kwargs)
            except BaseException as exc:  # handed to the caller's thread
                result["error"] = exc

        thread = threading.Thread(target=body, name=f"bpfkit-netns-{self.name}", daemon=True)
        thread.start()
        thread.join()
        if "error" in result:
            raise result["error"]
        return cast(T, result["value"])

    def close(self) -> None:
        self.fd.close()

    @property
    def closed(self) -> bool:
        return self.fd.closed


    def __repr__(self) -> str:
        return f"Netns({self.name!r}, fd={self.fd!r})"


def _dup_raw(raw: int) -> FD:
    import fcntl

    try:
        return FD(fcntl.fcntl(raw, fcntl.F_DUPFD_CLOEXEC, 1))
    except OSError as exc:
        raise KernelError(f"dup network namespace fd {raw}", exc.errno or errno.EBADF) from None


# ---------------------------------------------------------------------------- interfaces
def ifindex_of(iface: str | int) -> int:
    """The ifindex of interface ``iface`` (a name, or an index checked to exist) in the
    calling thread's namespace."""
    if isinstance(iface, int):
        ifname_of(iface)
        return iface
    try:
        return socket.if_nametoindex(iface)
    except OSError:
        raise NotFoundError(f"no network interface {iface!r} in this network namespace") from None


def ifname_of(ifindex: int) -> str:
    try:
        return socket.if_indextoname(ifindex)
    except OSError:
        raise NotFoundError(f"no network interface with index {ifindex} in this network namespace") from None


# ------------------------------------------------------------------------------ pyroute2
def _iproute() -> Any:
    from pyroute2 import IPRoute

    return IPRoute(ext_ack=True)


def _error(op: str, exc: Exception, detail: str) -> KernelError:
    """A NetlinkError as a KernelError naming the request; the kernel's extended-ack message
    (``Parent Qdisc doesn't exists``) joins the detail when it says more than strerror."""
    code = int(getattr(exc, "code", 0) or errno.EIO)
    text = exc.args[1] if len(exc.args) > 1 and isinstance(exc.args[1], str) else ""
    if text and text != os.strerror(code):
        detail = f"{detail}: kernel says {text!r}" if detail else f"kernel says {text!r}"
    return kernel_error(op, code, detail)


def _call(op: str, detail: str, fn: Callable[[Any], T]) -> T:
    from pyroute2.netlink.exceptions import NetlinkError

    try:
        with _iproute() as ipr:
            return fn(ipr)
    except NetlinkError as exc:
        raise _error(op, exc, detail) from None


# ----------------------------------------------------------------------------------- XDP
class XdpFlag(enum.IntFlag):
    """XDP_FLAGS_* of include/uapi/linux/if_link.h (IFLA_XDP_FLAGS, and the mode bits of an
    XDP bpf_link's link_create.flags)."""

    UPDATE_IF_NOEXIST = 1 << 0  # fail with EBUSY when a program is attached (netlink only)
    SKB_MODE = 1 << 1  # generic XDP: after the skb is built, any device
    DRV_MODE = 1 << 2  # native XDP in the driver's receive path
    HW_MODE = 1 << 3  # offloaded to the NIC
    REPLACE = 1 << 4  # 5.7 (92234c8f15c8): only if IFLA_XDP_EXPECTED_FD is what is attached

    @classmethod
    def modes(cls) -> XdpFlag:
        return cls.SKB_MODE | cls.DRV_MODE | cls.HW_MODE


class XdpAttached(enum.IntEnum):
    """IFLA_XDP_ATTACHED: which mode the attached program runs in."""

    NONE = 0
    DRV = 1
    SKB = 2
    HW = 3
    MULTI = 4  # programs in more than one mode (e.g. driver and offload)


@dataclasses.dataclass(frozen=True)
class XdpState:
    """What IFLA_XDP reports for one interface: program ids by mode (0 = none)."""

    attached: XdpAttached
    drv_prog_id: int = 0
    skb_prog_id: int = 0
    hw_prog_id: int = 0

    def prog_id(self, mode: XdpFlag) -> int:
        """The program id attached in ``mode`` (a single mode flag)."""
        return {XdpFlag.DRV_MODE: self.drv_prog_id, XdpFlag.SKB_MODE: self.skb_prog_id,
                XdpFlag.HW_MODE: self.hw_prog_id}.get(XdpFlag(mode), 0)


def xdp_set(ifindex: int, prog_fd: int, flags: int, expected_fd: int | None = None, detail: str = "") -> None:
    """RTM_SETLINK with IFLA_XDP: attach ``prog_fd`` (-1 detaches) with XDP_FLAGS ``flags``;
    with XdpFlag.REPLACE only if ``expected_fd``'s program (or none, for -1) is attached."""
    attrs: list[tuple[str, int]] = [("IFLA_XDP_FD", prog_fd), ("IFLA_XDP_FLAGS", int(flags))]
    if expected_fd is not None:
        attrs.append(("IFLA_XDP_EXPECTED_FD", expected_fd))
    _call("RTM_SETLINK IFLA_XDP", detail, lambda ipr: ipr.link("set", index=ifindex, xdp={"attrs": attrs}))


def xdp_state(ifindex: int) -> XdpState:
    """The XDP programs attached to ``ifindex`` (RTM_GETLINK, IFLA_XDP)."""
    msgs = _call("RTM_GETLINK", f"ifindex {ifindex}", lambda ipr: ipr.link("get", index=ifindex))
    xdp = msgs[0].get_attr("IFLA_XDP") if msgs else None
    if not xdp:
        return XdpState(XdpAttached.NONE)
    values = dict(xdp.get("attrs", []) if isinstance(xdp, dict) else xdp["attrs"])
    raw_mode = values.get("IFLA_XDP_ATTACHED")
    # pyroute2 maps the mode byte to names; map them back.
    names = {None: 0, "xdp": 1, "xdpgeneric": 2, "xdpoffload": 3, "xdpmulti": 4}
    attached = XdpAttached(names.get(raw_mode, raw_mode if isinstance(raw_mode, int) else 0))
    single = int(values.get("IFLA_XDP_PROG_ID") or 0)
    drv = int(values.get("IFLA_XDP_DRV_PROG_ID") or 0)
    skb = int(values.get("IFLA_XDP_SKB_PROG_ID") or 0)
    hw = int(values.get("IFLA_XDP_HW_PROG_ID") or 0)
    # With one mode the kernel sends only IFLA_XDP_PROG_ID.
    if single and not (drv or skb or hw):
        if attached == XdpAttached.DRV:
            drv = single
        elif attached == XdpAttached.SKB:
            skb = single
        elif attached == XdpAttached.HW:
            hw = single
    return XdpState(attached, drv, skb, hw)


# ------------------------------------------------------------------------------------ tc
# TC_H_MAKE(TC_H_CLSACT, TC_H_MIN_INGRESS / TC_H_MIN_EGRESS): the clsact qdisc's two hooks.
TC_H_CLSACT = 0xFFFFFFF1
TC_H_INGRESS_PARENT = 0xFFFFFFF2
TC_H_EGRESS_PARENT = 0xFFFFFFF3
ETH_P_ALL = 0x0003
TCA_BPF_FLAG_ACT_DIRECT = 1 << 0
# TCA_BPF_* attribute numbers pyroute2 does not name (include/uapi/linux/pkt_cls.h).
TCA_BPF_TAG = 10
TCA_BPF_ID = 11


@dataclasses.dataclass(frozen=True)
class TcFilter:
    """One tc filter on a hook: its kind (``bpf``, ``u32``...), priority, handle and protocol;
    for cls_bpf also the program's name, id and whether it runs in direct-action mode."""

    kind: str
    priority: int
    handle: int
    protocol: int
    name: str = ""
    prog_id: int = 0
    direct_action: bool = False


def qdisc_kinds(ifindex: int) -> dict[int, str]:
    """The qdiscs of ``ifindex``: {handle: kind}."""
    msgs = _call("RTM_GETQDISC", f"ifindex {ifindex}", lambda ipr: list(ipr.tc("dump")))
    return {int(m["handle"]): m.get_attr("TCA_KIND") for m in msgs if m["index"] == ifindex}


def clsact_add(ifindex: int, detail: str = "") -> None:
    """Add a clsact qdisc (EEXIST when one exists)."""
    _call("RTM_NEWQDISC clsact", detail, lambda ipr: ipr.tc("add", "clsact", ifindex))


def clsact_del(ifindex: int, detail: str = "") -> None:
    """Delete the clsact qdisc and every filter on it."""
    _call("RTM_DELQDISC clsact", detail, lambda ipr: ipr.tc("del", "clsact", ifindex))


def _nla_raw(nla: Any) -> tuple[int, bytes]:
    """(type, payload) of an attribute pyroute2 did not decode."""
    data = nla.data[nla.offset : nla.offset + nla.length]
    length = int.from_bytes(data[0:2], "little")
    return int.from_bytes(data[2:4], "little") & 0x3FFF, bytes(data[4:length])


def _decode_filter(msg: Any) -> TcFilter | None:
    info = int(msg["info"])
    handle = int(msg["handle"])
    kind = msg.get_attr("TCA_KIND") or ""
    options = msg.get_attr("TCA_OPTIONS")
    if not handle and options is None:
        return None  # the per-(priority, protocol) head entry of a dump
    priority = info >> 16
    protocol = socket.ntohs(info & 0xFFFF)
    name, prog_id, direct = "", 0, False
    if kind == "bpf" and options is not None:
        name = options.get_attr("TCA_BPF_NAME") or ""
        direct = bool((options.get_attr("TCA_BPF_FLAGS") or 0) & TCA_BPF_FLAG_ACT_DIRECT)
        for slot in options["attrs"]:
            if slot[0] == "UNKNOWN":
                ntype, payload = _nla_raw(slot[1])
                if ntype == TCA_BPF_ID and len(payload) >= 4:
                    prog_id = int.from_bytes(payload[:4], "little")
    return TcFilter(kind, priority, handle, protocol, name, prog_id, direct)


def tc_filters(ifindex: int, parent: int) -> list[TcFilter]:
    """The filters on hook ``parent`` of ``ifindex``, by priority then handle. An interface
    without the qdisc has none."""
    from pyroute2.netlink.exceptions import NetlinkError

    try:
        with _iproute() as ipr:
            msgs = list(ipr.get_filters(index=ifindex, parent=parent))
    except NetlinkError as exc:
        if exc.code == errno.EINVAL:  # no qdisc there: nothing to list
            return []
        raise _error("RTM_GETTFILTER", exc, f"ifindex {ifindex}") from None
    found = [f for f in (_decode_filter(m) for m in msgs) if f is not None]
    return sorted(found, key=lambda f: (f.priority, f.handle))


def bpf_filter_add(ifindex: int, parent: int, prog_fd: int, name: str, priority: int, handle: int,
                   replace: bool = False, detail: str = "") -> None:
    """Add (or with ``replace`` swap the program of) a cls_bpf filter in direct-action mode:
    the program's return value is the verdict (TC_ACT_*), no separate action needed."""
    command = "replace-filter" if replace else "add-filter"
    _call("RTM_NEWTFILTER bpf", detail, lambda ipr: ipr.tc(
        command, "bpf", ifindex, handle, parent=parent, prio=priority, protocol=ETH_P_ALL,
        fd=prog_fd, name=name, direct_action=True))


def filter_del(ifindex: int, parent: int, priority: int, handle: int, kind: str = "bpf",
               protocol: int = ETH_P_ALL, detail: str = "") -> None:
    """Delete one filter, named by hook, priority, protocol and handle."""
    _call("RTM_DELTFILTER", detail, lambda ipr: ipr.tc(
        "del-filter", kind, ifindex, handle, parent=parent, prio=priority, protocol=protocol))


# ---------------------------------------------------------------------------------- netkit
class NetkitMode(enum.IntEnum):
    """enum netkit_mode (include/uapi/linux/if_link.h): L3 (the kernel's default) has no
    link-layer addresses and no ARP; L2 is an Ethernet device."""

    L2 = 0
    L3 = 1


class NetkitPolicy(enum.IntEnum):
    """What a netkit device does with a packet when no program is attached (enum
    netkit_action): forward it to the peer, or drop it (``blackhole``)."""

    FORWARD = 0  # NETKIT_PASS
    BLACKHOLE = 2  # NETKIT_DROP


# rtnetlink numbers (include/uapi/linux/rtnetlink.h, if_link.h); pyroute2 0.9 has no netkit kind.
_RTM_NEWLINK = 16
_NLM_F_REQUEST, _NLM_F_ACK, _NLM_F_EXCL, _NLM_F_CREATE = 0x1, 0x4, 0x200, 0x400
_NLMSG_ERROR = 2
_IFLA_IFNAME, _IFLA_LINKINFO, _IFLA_NET_NS_FD = 3, 18, 28
_IFLA_INFO_KIND, _IFLA_INFO_DATA = 1, 2
_IFLA_NETKIT_PEER_INFO, _IFLA_NETKIT_POLICY, _IFLA_NETKIT_PEER_POLICY, _IFLA_NETKIT_MODE = 1, 3, 4, 5
_NLA_F_NESTED = 0x8000
_IFINFOMSG = b"\0" * 16  # struct ifinfomsg: AF_UNSPEC, no type/index/flags


def _nla(kind: int, payload: bytes) -> bytes:
    import struct

    head = struct.pack("=HH", 4 + len(payload), kind)
    return head + payload + b"\0" * (-len(payload) % 4)


def _nla_u32(kind: int, value: int) -> bytes:
    return _nla(kind, int(value).to_bytes(4, "little"))


def _nla_str(kind: int, text: str) -> bytes:
    return _nla(kind, text.encode() + b"\0")


def netkit_add(name: str, peer: str, *, mode: NetkitMode = NetkitMode.L3,
               policy: NetkitPolicy = NetkitPolicy.FORWARD, peer_policy: NetkitPolicy = NetkitPolicy.FORWARD,
               peer_netns: Netns | None = None) -> None:
    """Create a netkit pair (6.7, CONFIG_NETKIT) in the calling thread's namespace: primary
    ``name`` and its peer ``peer``, the peer made in ``peer_netns`` when given (IFLA_NET_NS_FD in
    IFLA_NETKIT_PEER_INFO). Like ``ip link add NAME type netkit MODE POLICY peer POLICY name
    PEER``, by hand: one RTM_NEWLINK on a NETLINK_ROUTE socket."""
    import struct

    peer_attrs = _nla_str(_IFLA_IFNAME, peer)
    if peer_netns is not None:
        peer_attrs += _nla_u32(_IFLA_NET_NS_FD, peer_netns.fd.raw)
    data = (_nla(_IFLA_NETKIT_PEER_INFO, _IFINFOMSG + peer_attrs) + _nla_u32(_IFLA_NETKIT_POLICY, policy)
            + _nla_u32(_IFLA_NETKIT_PEER_POLICY, peer_policy) + _nla_u32(_IFLA_NETKIT_MODE, mode))
    info = _nla_str(_IFLA_INFO_KIND, "netkit") + _nla(_IFLA_INFO_DATA | _NLA_F_NESTED, data)
    body = _IFINFOMSG + _nla_str(_IFLA_IFNAME, name) + _nla(_IFLA_LINKINFO | _NLA_F_NESTED, info)
    flags = _NLM_F_REQUEST | _NLM_F_ACK | _NLM_F_EXCL | _NLM_F_CREATE
    msg = struct.pack("=IHHII", 16 + len(body), _RTM_NEWLINK, flags, 1, 0) + body
    op = f"create netkit pair {name}/{peer}"
    try:
        with socket.socket(socket.AF_NETLINK, socket.SOCK_RAW | socket.SOCK_CLOEXEC, socket.NETLINK_ROUTE) as sock:
            sock.send(msg)
            reply = sock.recv(65536)
    except OSError as exc:
        raise KernelError(op, exc.errno or errno.EIO) from None
    # The ack: nlmsghdr, then struct nlmsgerr whose first field is -errno (0: done).
    if len(reply) < 20 or struct.unpack_from("=H", reply, 4)[0] != _NLMSG_ERROR:
        raise KernelError(op, errno.EPROTO, "unexpected rtnetlink reply")
    err = -struct.unpack_from("=i", reply, 16)[0]
    if err:
        hint = "the kernel has no netkit devices (CONFIG_NETKIT, Linux 6.7+)" if err == errno.EOPNOTSUPP else ""
        raise kernel_error(op, err, hint)
