# SPDX-License-Identifier: Apache-2.0
"""Socket programs: filters on one socket, reuseport selection, and programs of sockmaps.

    with link.attach_socket_filter(sock, prog): ...          # SO_ATTACH_BPF on a socket you pass
    lk = link.attach_reuseport(sock, prog)                   # SO_ATTACH_REUSEPORT_EBPF
    lk = link.attach_sockmap(coll.maps["socks"], verdict)    # sk_skb / sk_msg programs of a sockmap

* **socket filters** (``SEC("socket")``, 3.19): SO_ATTACH_BPF puts a program on one socket; it
  sees every packet the socket would receive and returns how many bytes to keep (0 drops it).
  One filter per socket: attaching another replaces it (:meth:`SocketFilter.update`);
  SO_DETACH_BPF removes it. cilium/ebpf's AttachSocketFilter/DetachSocketFilter.
* **reuseport** (``SEC("sk_reuseport")``, 4.19): SO_ATTACH_REUSEPORT_EBPF on one socket of a
  SO_REUSEPORT group picks, for each new connection or datagram, the group's socket that gets
  it (bpf_sk_select_reuseport with a REUSEPORT_SOCKARRAY). SO_DETACH_REUSEPORT_BPF (5.3) removes it.
* **sockmap programs**: sk_skb stream_parser / stream_verdict / verdict and sk_msg programs run
  for the sockets of a SOCKMAP or SOCKHASH (redirecting data between sockets without a trip
  through user space). They attach to the map: BPF_PROG_ATTACH with the map's fd (4.14), or a
  sockmap link (BPF_LINK_TYPE_SOCKMAP, 6.10, 699c23f02c65) that detaches on close, pins,
  updates, and reports the map id. One program per attach type per map.

Socket filters and reuseport programs have no kernel object of their own: the returned
objects detach on close while the socket is still open, and raise NotSupportedError for pin
and info. bpfkit does not duplicate the socket: closing the socket ends its filter too.
"""

from __future__ import annotations

import dataclasses
import errno
import socket as _socket
from typing import Any

from .. import asm
from .._kernel import bpf as _bpf
from .._kernel.consts import AttachType, LinkType, MapType, ProgType
from .._kernel.fd import FD
from .._protocols import ProgramArg
from ..errors import BPFKitError, KernelError, NotSupportedError, UsageError
from ._prog_arg import HookInfo, check_program, explained, info_attach_type, prog_id_of, prog_name
from .base import FdOnlyLink, RawLink, _prog_fd, raw_fd
from .kind import LinkKind
from .prog_attach import ProgAttachment, ProgAttachMode, raw_attach_program

__all__ = ["SocketFilter", "ReuseportProgram", "SockmapLink", "SockmapProgAttachment", "SockmapInfo",
           "attach_socket_filter", "attach_reuseport", "attach_sockmap", "have_sockmap_link", "SOCKMAP_HOOKS"]

# <asm-generic/socket.h>
SO_ATTACH_BPF = 50
SO_DETACH_BPF = 27  # SO_DETACH_FILTER
SO_ATTACH_REUSEPORT_EBPF = 52
SO_DETACH_REUSEPORT_BPF = 68  # 5.3


def _sock_fd(sock: Any) -> int:
    if isinstance(sock, int) and not isinstance(sock, bool) and sock >= 0:
        return sock
    fileno = getattr(sock, "fileno", None)
    if callable(fileno):
        fd = int(fileno())
        if fd >= 0:
            return fd
        raise UsageError(f"socket {sock!r} is closed")
    raise UsageError(f"not a socket: {sock!r} (pass a socket object or its fd)")


def _setsockopt(fd: int, opt: int, value: int | None, what: str) -> None:
    try:
        s = _socket.socket(fileno=fd)  # checks that fd is a socket (ENOTSOCK)
    except OSError as exc:
        raise KernelError(what, exc.errno or errno.EIO) from None
    try:
        if value is None:
            s.setsockopt(_socket.SOL_SOCKET, opt, 0)
        else:
            s.setsockopt(_socket.SOL_SOCKET, opt, value)
    except OSError as exc:
        raise KernelError(what, exc.errno or errno.EIO) from None
    finally:
        s.detach()  # the fd stays the caller's


class _SocketProgram(FdOnlyLink):
    """A program set on one socket with setsockopt (no kernel link object)."""

    kind = "socket"
    _attach_opt = 0
    _detach_opt = 0
    _opt_names = ("", "")
    _prog_types: tuple[ProgType, ...] = ()

    def __init__(self, sock: Any, prog: ProgramArg) -> None:
        self.sock = sock  # the caller's socket (not duplicated: its lifetime stays the caller's)
        self._fd = _sock_fd(sock)
        self.program = prog_name(prog)
        self.prog_id = prog_id_of(_prog_fd(prog))
        self._attached = True
        self._closed = False

    @property
    def description(self) -> str:  # type: ignore[override]
        return f"{self.kind} on socket fd {self._fd}"

    @property
    def closed(self) -> bool:
        return self._closed

    def _unsupported(self, what: str) -> NotSupportedError:
        return NotSupportedError(f"{what} of a {self.kind} program", "it is a socket option, not a bpf_link")

    def _check_open(self, what: str) -> None:
        if self._closed:
            raise UsageError(f"{what} of a closed {self.kind} attachment ({self.program!r})")

    def update(self, prog: ProgramArg, old: ProgramArg | None = None) -> None:
        """Put ``prog`` on the socket instead (``old`` is not checked: the option replaces)."""
        self._check_open("update")
        check_program(prog, self._prog_types, f"a {self.kind}")
        _setsockopt(self._fd, self._attach_opt, _prog_fd(prog),
                    f"{self._opt_names[0]} of {prog_name(prog)!r} on socket fd {self._fd}")
        self.program = prog_name(prog)
        self.prog_id = prog_id_of(_prog_fd(prog))
        self._attached = True

    def _socket_open(self) -> bool:
        fileno = getattr(self.sock, "fileno", None)
        return not callable(fileno) or fileno() == self._fd

    def detach(self) -> None:
        self._check_open("detach")
        if not self._attached:
            return
        self._attached = False
        if not self._socket_open():
            return  # the socket is closed: so is its filter
        try:
            _setsockopt(self._fd, self._detach_opt, None, f"{self._opt_names[1]} on socket fd {self._fd}")
        except KernelError as exc:
            if exc.errno in (errno.ENOENT, errno.EBADF, errno.ENOTSOCK):
                return  # nothing attached any more, or the socket is gone
            raise

    def close(self) -> None:
        if self._closed:
            return
        try:
            self.detach()
        finally:
            self._closed = True

    def __repr__(self) -> str:
        state = "closed" if self._closed else ("attached" if self._attached else "detached")
        return f"{type(self).__name__}({self.program!r} on socket fd {self._fd}, {state})"


class SocketFilter(_SocketProgram):
    """A socket filter set with SO_ATTACH_BPF; close() and detach() remove it (SO_DETACH_BPF)."""

    kind = "socket filter"
    _attach_opt = SO_ATTACH_BPF
    _detach_opt = SO_DETACH_BPF
    _opt_names = ("SO_ATTACH_BPF", "SO_DETACH_BPF")
    _prog_types = (ProgType.SOCKET_FILTER,)


class ReuseportProgram(_SocketProgram):
    """A reuseport program set with SO_ATTACH_REUSEPORT_EBPF on one socket of its group;
    close() and detach() remove it (SO_DETACH_REUSEPORT_BPF, 5.3)."""

    kind = "reuseport"
    _attach_opt = SO_ATTACH_REUSEPORT_EBPF
    _detach_opt = SO_DETACH_REUSEPORT_BPF
    _opt_names = ("SO_ATTACH_REUSEPORT_EBPF", "SO_DETACH_REUSEPORT_BPF")
    _prog_types = (ProgType.SK_REUSEPORT,)


def _attach_sockopt(cls: type[_SocketProgram], sock: Any, prog: ProgramArg, hint: dict[int, str]) -> Any:
    fd = _sock_fd(sock)
    prog_fd = check_program(prog, cls._prog_types, f"a {cls.kind}")
    try:
        _setsockopt(fd, cls._attach_opt, prog_fd, cls._opt_names[0])
    except KernelError as exc:
        raise explained(exc, hint.get(exc.errno, "")).wrap(
            f"attach {cls.kind} program {prog_name(prog)!r} to socket fd {fd}") from None
    return cls(sock, prog)


def attach_socket_filter(sock: Any, prog: ProgramArg) -> SocketFilter:
    """Put socket filter ``prog`` on ``sock`` (a socket object or fd; SO_ATTACH_BPF, 3.19).
    Replaces the socket's filter, if any. cilium/ebpf's AttachSocketFilter."""
    made: SocketFilter = _attach_sockopt(SocketFilter, sock, prog, {
        errno.ENOTSOCK: "not a socket", errno.EINVAL: "not a socket filter program",
        errno.EPERM: "the socket's filter is locked (SO_LOCK_FILTER)"})
    return made


def attach_reuseport(sock: Any, prog: ProgramArg) -> ReuseportProgram:
    """Put reuseport program ``prog`` on ``sock``'s SO_REUSEPORT group (SO_ATTACH_REUSEPORT_EBPF,
    4.19 for sk_reuseport programs). The socket must have SO_REUSEPORT set."""
    made: ReuseportProgram = _attach_sockopt(ReuseportProgram, sock, prog, {
        errno.ENOTSOCK: "not a socket",
        errno.EINVAL: "the socket has no SO_REUSEPORT, or the program is not an sk_reuseport/socket filter"})
    return made


# --------------------------------------------------------------------------- sockmaps
SOCKMAP_HOOKS: dict[str, tuple[AttachType, ProgType]] = {
    "stream_parser": (AttachType.SK_SKB_STREAM_PARSER, ProgType.SK_SKB),
    "stream_verdict": (AttachType.SK_SKB_STREAM_VERDICT, ProgType.SK_SKB),
    "skb_verdict": (AttachType.SK_SKB_VERDICT, ProgType.SK_SKB),
    "msg_verdict": (AttachType.SK_MSG_VERDICT, ProgType.SK_MSG),
}
_SOCKMAP_NAMES = {at: name for name, (at, _) in SOCKMAP_HOOKS.items()}
_SOCK_MAPS = (MapType.SOCKMAP, MapType.SOCKHASH)


def _sockmap_hook(value: Any) -> AttachType:
    if isinstance(value, AttachType) and value in _SOCKMAP_NAMES:
        return value
    text = str(value).lower()
    if text in SOCKMAP_HOOKS:
        return SOCKMAP_HOOKS[text][0]
    raise UsageError(f"unknown sockmap hook {value!r}: expected one of {', '.join(SOCKMAP_HOOKS)}")


@dataclasses.dataclass(frozen=True)
class SockmapInfo(HookInfo):
    """A sockmap link's details: the map's id and the hook (attach type)."""

    map_id: int
    attach_type: AttachType | int
    _hook_names = _SOCKMAP_NAMES


def _decode_sockmap(raw: Any) -> SockmapInfo:
    return SockmapInfo(int(raw.sockmap.map_id), info_attach_type(raw.sockmap))




class SockmapLink(RawLink):
    """An sk_skb or sk_msg program attached to a sockmap/sockhash through a bpf_link
    (BPF_LINK_TYPE_SOCKMAP, 6.10)."""

    kind = "sockmap"

    def __init__(self, fd: FD, pinned_path: str | None = None, *, map_name: str = "", hook: str = "") -> None:
        super().__init__(fd, pinned_path)
        self.map_name = map_name
        self.hook = hook

    @property
    def description(self) -> str:
        return f"map {self.map_name} {self.hook}" if self.hook else "sockmap"




class SockmapProgAttachment(ProgAttachment):
    """An sk_skb/sk_msg program attached to a sockmap with BPF_PROG_ATTACH (the map holds it
    until detached, or until the map is freed); close() detaches it."""

    kind = "sockmap prog_attach"


_RET_PASS = asm.return_imm(1)


def have_sockmap_link() -> bool:
    """Whether sk_skb/sk_msg programs attach to sockmaps through links (6.10+): the cached
    ``sockmap_link`` probe of :mod:`bpfkit.features`."""
    from .. import features

    return features.probe("sockmap_link").supported


def _sockmap_reason() -> str:
    from .. import features

    return features.probe("sockmap_link").reason


def _map_fd(m: Any) -> tuple[int, str]:
    mtype = getattr(m, "type", None)
    if mtype is not None and mtype not in _SOCK_MAPS:
        raise UsageError(f"map {getattr(m, 'name', '')!r} is a {getattr(mtype, 'kernel_name', mtype)} map; "
                         "sk_skb and sk_msg programs attach to a sockmap or sockhash")
    fd = raw_fd(m, lambda: f"map {getattr(m, 'name', '')!r} is closed", lambda: f"not a map: {m!r}")
    return fd, str(getattr(m, "name", "") or f"fd {fd}")


# What an errno from BPF_PROG_ATTACH to a sockmap means, in words.
_SOCKMAP_HINTS = {
    errno.EBUSY: "the map already has a program at this hook (one per attach type per map)",
    errno.EEXIST: "this program is already attached here",
    errno.EINVAL: "the kernel refused the request (not a sockmap/sockhash, or a program loaded for another hook)",
}


def attach_sockmap(
    sockmap: Any,
    prog: ProgramArg,
    hook: AttachType | str | None = None,
    *,
    mode: ProgAttachMode | str = ProgAttachMode.AUTO,
) -> SockmapLink | SockmapProgAttachment:
    """Attach an sk_skb or sk_msg program to ``sockmap`` (a SOCKMAP/SOCKHASH Map, or its fd) at
    ``hook`` (stream_parser, stream_verdict, skb_verdict, msg_verdict; default: the program's
    section). ``mode``: AUTO (a sockmap link on 6.10+, else BPF_PROG_ATTACH), ``link``,
    ``prog_attach``."""
    loaded_for = getattr(prog, "attach_type", None)
    if hook is None:
        if loaded_for not in _SOCKMAP_NAMES:
            raise UsageError(f"program {prog_name(prog)!r} does not name its sockmap hook: pass one of "
                             f"{', '.join(SOCKMAP_HOOKS)}")
        at = AttachType(loaded_for)
    else:
        at = _sockmap_hook(hook)
    name = _SOCKMAP_NAMES[at]
    check_program(prog, (SOCKMAP_HOOKS[name][1],), f"the sockmap {name} hook")
    map_fd, map_name = _map_fd(sockmap)
    path_mode = ProgAttachMode.of(mode)
    use_link = path_mode == ProgAttachMode.LINK or (path_mode == ProgAttachMode.AUTO and have_sockmap_link())
    if use_link and not have_sockmap_link():
        raise NotSupportedError("sockmap links (BPF_LINK_CREATE with a sockmap fd)",
                                f"{_sockmap_reason()}; use mode='prog_attach'", "6.10")
    what = f"attach {name} program {prog_name(prog)!r} to sockmap {map_name} via {'link' if use_link else 'prog_attach'}"
    try:
        if use_link:
            fd = _bpf.link_create(_prog_fd(prog), map_fd, int(at))
            return SockmapLink(fd, map_name=map_name, hook=name)
        raw_attach_program(map_fd, prog, at)
    except BPFKitError as exc:
        if isinstance(exc, KernelError):
            exc = explained(exc, _SOCKMAP_HINTS.get(exc.errno, ""))
        raise exc.wrap(what) from None
    import fcntl

    mine = FD(fcntl.fcntl(map_fd, fcntl.F_DUPFD_CLOEXEC, 1))
    return SockmapProgAttachment(mine, prog, at, 0, f"sockmap {map_name}", name)


# ----------------------------------------------------------------------- the kind's record
KIND = LinkKind(
    "socket",
    never_auto={
        "socket": "a socket filter goes on a socket chosen at run time: attach with bpfkit.link.attach_socket_filter",
        "sk_reuseport": "a reuseport program goes on a socket group: attach with bpfkit.link.attach_reuseport",
        "sk_skb": "sk_skb programs attach to a sockmap: attach with bpfkit.link.attach_sockmap(map, prog)",
        "sk_msg": "sk_msg programs attach to a sockmap: attach with bpfkit.link.attach_sockmap(map, prog)",
    },
    link_classes={LinkType.SOCKMAP: SockmapLink},
    info_decoders={LinkType.SOCKMAP: _decode_sockmap},
    features=("sockmap_link",),
)
