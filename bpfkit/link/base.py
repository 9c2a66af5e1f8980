# SPDX-License-Identifier: Apache-2.0
"""The Link protocol, RawLink (any bpf_link fd), pinned links and the system's links.

A *link* is what attaching returns: the attachment of one program to one hook. When the kernel
makes a bpf_link for it (BPF_LINK_CREATE and friends, 5.7+), the link is a kernel object with an
fd: closing the last reference detaches the program, pinning it in bpffs keeps it alive past the
process, and BPF_LINK_UPDATE/DETACH/OBJ_GET_INFO work on it where the link kind allows. Older
attachment styles (PERF_EVENT_IOC_SET_BPF) implement the same protocol and say honestly, with
NotSupportedError, what they cannot do.
"""

from __future__ import annotations

import dataclasses
import enum
import errno
import os
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, TypeAlias, TypeVar, overload

from .._closing import ClosesOnExit
from .._kernel import bpf as _bpf
from .._kernel.bpffs import pin_object
from .._kernel.consts import LinkType, PerfEventType
from .._kernel.fd import FD
from .._protocols import ProgramArg
from ..errors import BPFKitError, KernelError, NotFoundError, NotSupportedError, UsageError
from . import _kinds

__all__ = [
    "Link",
    "RawLink",
    "LinkInfo",
    "GroupInfo",
    "PerfEventInfo",
    "KprobeInfo",
    "UprobeInfo",
    "TracepointInfo",
    "EventInfo",
    "RawTracepointInfo",
    "load_pinned_link",
    "link_from_id",
    "link_from_fd",
    "iter_links",
    "register_link_class",
]


E = TypeVar("E", bound=enum.Enum)


def choice_of(cls: type[E], value: E | str, what: str, aliases: Mapping[str, str] | None = None) -> E:
    """A member of the string enum ``cls`` from a member or its value in any case (``"AUTO"``),
    or from one of the ``aliases`` of a value; else a UsageError naming ``what`` and the values
    allowed (the ``of()`` of every mode enum)."""
    if isinstance(value, cls):
        return value
    text = str(value).lower()
    try:
        return cls((aliases or {}).get(text, text))
    except ValueError:
        names = [str(m.value) for m in cls]
        expected = " or ".join([", ".join(names[:-1]), names[-1]] if len(names) > 1 else names)
        raise UsageError(f"unknown {what} {value!r}: expected {expected}") from None


class Link(ClosesOnExit):
    """What every attach function returns: the base of every link class bpfkit has.

    ``close()`` detaches (unless pinned) and frees what the attachment made (perf events,
    tracefs probes); it is idempotent. ``pin``/``unpin``/``update``/``detach``/``info`` raise
    NotSupportedError where the link kind or the kernel cannot. ``info()`` is a
    :class:`LinkInfo` for every link, a group's (:class:`GroupInfo`) included.

    Sealed, as cilium/ebpf's Link interface is (an unexported method): only bpfkit's modules
    subclass it, so code that holds a Link can rely on these methods and on ``info()``'s one
    type. A :class:`~bpfkit.link.LinkGroup` holds any object with ``close()``.
    """

    __slots__ = ()

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if not cls.__module__.startswith("bpfkit."):
            raise TypeError(f"class {cls.__qualname__}: bpfkit.link.Link is sealed (the link classes of bpfkit's link "
                            "kinds subclass it); a LinkGroup holds any object with close()")

    if TYPE_CHECKING:  # properties or attributes of each subclass (a property here would forbid the latter)
        @property
        def closed(self) -> bool: ...

        @property
        def pinned_path(self) -> str | None: ...

    def close(self) -> None:
        raise NotImplementedError

    def pin(self, path: str) -> None:
        raise NotImplementedError

    def unpin(self) -> None:
        raise NotImplementedError

    def update(self, prog: ProgramArg) -> None:
        raise NotImplementedError

    def detach(self) -> None:
        raise NotImplementedError

    def info(self) -> LinkInfo:
        raise NotImplementedError


# ------------------------------------------------------------------------------- info
@dataclasses.dataclass(frozen=True)
class KprobeInfo:
    function: str
    offset: int
    address: int  # 0 unless kptr_restrict lets this process see kernel addresses
    missed: int
    cookie: int
    retprobe: bool


@dataclasses.dataclass(frozen=True)
class UprobeInfo:
    path: str
    offset: int
    cookie: int
    retprobe: bool


@dataclasses.dataclass(frozen=True)
class TracepointInfo:
    name: str  # the event name (``sys_enter_getppid``): the kernel does not report the group
    cookie: int


@dataclasses.dataclass(frozen=True)
class EventInfo:
    type: int  # perf_event_attr.type
    config: int
    cookie: int


@dataclasses.dataclass(frozen=True)
class PerfEventInfo:
    """A BPF_LINK_TYPE_PERF_EVENT link's details (reported since 6.6, 1b715e1b0ec5; before,
    ``event_type`` is UNSPEC and ``detail`` None)."""

    event_type: PerfEventType | int
    detail: KprobeInfo | UprobeInfo | TracepointInfo | EventInfo | None


@dataclasses.dataclass(frozen=True)
class RawTracepointInfo:
    name: str


@dataclasses.dataclass(frozen=True)
class LinkInfo:
    """The kernel's description of a bpf_link (BPF_OBJ_GET_INFO_BY_FD).

    ``type`` is a LinkType (an int for kinds newer than bpfkit); ``detail`` is the typed
    per-kind part where bpfkit decodes it (PerfEventInfo, RawTracepointInfo), else None.
    """

    type: LinkType | int
    id: int
    program_id: int
    detail: Any = None

    @property
    def type_name(self) -> str:
        return self.type.kernel_name if isinstance(self.type, LinkType) else f"type {self.type}"


@dataclasses.dataclass(frozen=True)
class GroupInfo(LinkInfo):
    """A LinkGroup's info: a LinkInfo (``type`` and ``program_id`` its members' when they all
    share one, else 0; ``id`` 0: a group is no kernel object) that is also the sequence of its
    members' LinkInfo, in member order (a member that is a group gives its GroupInfo)."""

    members: tuple[LinkInfo, ...] = ()

    @classmethod
    def of(cls, members: list[LinkInfo]) -> GroupInfo:
        types = {info.type for info in members}
        programs = {info.program_id for info in members}
        return cls(types.pop() if len(types) == 1 else 0, 0, programs.pop() if len(programs) == 1 else 0, None,
                   tuple(members))

    def __iter__(self) -> Iterator[LinkInfo]:
        return iter(self.members)

    def __len__(self) -> int:
        return len(self.members)

    @overload
    def __getitem__(self, index: int) -> LinkInfo: ...

    @overload
    def __getitem__(self, index: slice) -> tuple[LinkInfo, ...]: ...

    def __getitem__(self, index: int | slice) -> LinkInfo | tuple[LinkInfo, ...]:
        return self.members[index]


# What Link.info() gave before GroupInfo: one type now (the name stays for annotations).
LinkInfos: TypeAlias = LinkInfo


def _enum(cls: Any, value: int) -> Any:
    try:
        return cls(value)
    except ValueError:
        return int(value)


def _decode_info(raw: Any, name: str) -> LinkInfo:
    _kinds.load_link_type(int(raw.type))  # its record registers its decoder (bpfkit.link.kind)
    ltype = _enum(LinkType, raw.type)
    detail: Any = None
    if ltype == LinkType.PERF_EVENT:
        pe = raw.perf_event
        etype = _enum(PerfEventType, pe.type)
        sub: Any = None
        if etype in (PerfEventType.KPROBE, PerfEventType.KRETPROBE):
            k = pe.kprobe
            sub = KprobeInfo(name, int(k.offset), int(k.addr), int(k.missed), int(k.cookie),
                             etype == PerfEventType.KRETPROBE)
        elif etype in (PerfEventType.UPROBE, PerfEventType.URETPROBE):
            u = pe.uprobe
            sub = UprobeInfo(name, int(u.offset), int(u.cookie), etype == PerfEventType.URETPROBE)
        elif etype == PerfEventType.TRACEPOINT:
            sub = TracepointInfo(name, int(pe.tracepoint.cookie))
        elif etype == PerfEventType.EVENT:
            ev = pe.event
            sub = EventInfo(int(ev.type), int(ev.config), int(ev.cookie))
        detail = PerfEventInfo(etype, sub)
    elif ltype == LinkType.RAW_TRACEPOINT:
        detail = RawTracepointInfo(name)
    elif int(ltype) in _NAMED_DECODERS:
        detail = _NAMED_DECODERS[int(ltype)](raw, name)
    elif int(ltype) in _INFO_DECODERS:
        detail = _INFO_DECODERS[int(ltype)](raw)
    return LinkInfo(ltype, int(raw.id), int(raw.prog_id), detail)


# Decoders of LinkInfo.detail that link kinds' records register (bpfkit.link.kind): raw info -> detail.
_INFO_DECODERS: dict[int, Callable[[Any], Any]] = {}


def register_info_decoder(link_type: LinkType, decode: Callable[[Any], Any]) -> None:
    """Make LinkInfo.detail of ``link_type`` links ``decode(struct bpf_link_info)``."""
    _INFO_DECODERS[int(link_type)] = decode


# Decoders that also take the name string the kernel reported (iter target names).
_NAMED_DECODERS: dict[int, Callable[[Any, str], Any]] = {}


def register_named_info_decoder(link_type: LinkType, decode: Callable[[Any, str], Any]) -> None:
    """Make LinkInfo.detail of ``link_type`` links ``decode(struct bpf_link_info, name)``."""
    _NAMED_DECODERS[int(link_type)] = decode


def query_info(fd: FD | int) -> LinkInfo:
    """Decoded BPF_OBJ_GET_INFO_BY_FD of any link fd."""
    raw, name = _bpf.link_info(fd)
    return _decode_info(raw, name)


def raw_fd(obj: Any, closed: Callable[[], str], refused: Callable[[], str], *, lowest: int = 1) -> int:
    """The fd number of ``obj``: an FD, an object holding one as ``.fd`` (a Program, a Map, a
    cgroup or netns handle), or an int of at least ``lowest``. A closed FD raises UsageError
    with ``closed()``, anything else with ``refused()`` (messages made only on error)."""
    fd = getattr(obj, "fd", obj)
    if isinstance(fd, FD):
        if fd.closed:
            raise UsageError(closed())
        return fd.raw
    if isinstance(fd, int) and not isinstance(fd, bool) and fd >= lowest:
        return fd
    raise UsageError(refused())


def _prog_fd(prog: ProgramArg) -> int:
    """The fd of a Program (or FD, or int), refusing closed programs."""
    return raw_fd(prog, lambda: f"program {getattr(prog, 'name', '')!r} is closed", lambda: f"not a program: {prog!r}")


# ----------------------------------------------------------------------------- RawLink
class RawLink(Link):
    """Any bpf_link fd: pin, unpin, update, detach, info, close.

    Classes for specific link kinds subclass it; :func:`link_from_fd` picks the right class
    from the kernel's info.
    """

    kind = "link"

    def __init__(self, fd: FD, pinned_path: str | None = None) -> None:
        self.fd = fd
        self._pinned_path = pinned_path

    # -- state
    @property
    def closed(self) -> bool:
        return self.fd.closed

    @property
    def pinned_path(self) -> str | None:
        return self._pinned_path

    @property
    def id(self) -> int:
        return self.info().id

    def _check_open(self, what: str) -> None:
        if self.fd.closed:
            raise UsageError(f"{what} of a closed {self.kind} link")

    # -- operations
    def pin(self, path: str) -> None:
        """Pin in bpffs at ``path``: the link (and the program attached) outlives this process
        and this object's close() until the pin is removed. A link pinned elsewhere moves."""
        self._check_open("pin")
        old = self._pinned_path
        if old == path:
            return
        if old:
            try:
                os.rename(old, path)
            except OSError as exc:
                raise KernelError(f"rename pin {old} -> {path}", exc.errno or errno.EIO) from None
        else:
            pin_object(self.fd, path, f"{self.kind} link")  # makes missing bpffs directories
        self._pinned_path = path

    def unpin(self) -> None:
        """Remove the pin (the link then lives as long as this object keeps it open)."""
        path = self._pinned_path
        if path is None:
            return
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass
        except OSError as exc:
            raise KernelError(f"unpin {path}", exc.errno or errno.EIO) from None
        self._pinned_path = None

    def update(self, prog: ProgramArg, old: ProgramArg | None = None) -> None:
        """Replace the attached program atomically (BPF_LINK_UPDATE); with ``old`` only if it
        still is the one attached (BPF_F_REPLACE)."""
        self._check_open("update")
        try:
            if old is not None:
                _bpf.link_update(self.fd, _prog_fd(prog), _prog_fd(old), flags=1 << 2)  # BPF_F_REPLACE
            else:
                _bpf.link_update(self.fd, _prog_fd(prog))
        except KernelError as exc:
            if exc.errno == errno.EOPNOTSUPP:
                raise NotSupportedError(f"update of a {self.kind} link", "the kernel has no update for this link kind") from None
            raise exc.wrap(f"update {self.kind} link")

    def detach(self) -> None:
        """Detach the program while the link object lives on (BPF_LINK_DETACH, 5.9); the link
        becomes defunct and closing it later is still needed."""
        self._check_open("detach")
        try:
            _bpf.link_detach(self.fd)
        except KernelError as exc:
            if exc.errno == errno.EOPNOTSUPP:
                raise NotSupportedError(f"detach of a {self.kind} link",
                                        "the kernel cannot detach this link kind (close it instead)") from None
            if exc.errno == errno.EINVAL:
                raise NotSupportedError("BPF_LINK_DETACH", "the kernel does not know the command", "5.9") from None
            raise exc.wrap(f"detach {self.kind} link")

    def info(self) -> LinkInfo:
        self._check_open("info")
        try:
            return query_info(self.fd)
        except BPFKitError as exc:
            raise exc.wrap(f"info of {self.kind} link")

    def close(self) -> None:
        """Release this process's reference: the link ends unless it is pinned."""
        self.fd.close()


    def _where(self) -> str:
        """What ``repr`` says of the attachment before the fd ("" or text ending in ", ")."""
        return ""

    def __repr__(self) -> str:
        pinned = f", pinned at {self._pinned_path}" if self._pinned_path else ""
        return f"{type(self).__name__}({self._where()}fd={self.fd!r}{pinned})"


class FdOnlyLink(Link):
    """An attachment that is a plain fd, not a bpf_link (PERF_EVENT_IOC_SET_BPF, a pre-5.7
    raw tracepoint): the program runs until the fd closes, and pin, unpin, update, detach and
    info raise the NotSupportedError that :meth:`_unsupported` describes."""

    description = ""

    @property
    def pinned_path(self) -> str | None:
        return None

    def _unsupported(self, what: str) -> NotSupportedError:
        raise NotImplementedError

    def pin(self, path: str) -> None:
        raise self._unsupported("pin")

    def unpin(self) -> None:
        raise self._unsupported("unpin")

    def update(self, prog: ProgramArg, old: ProgramArg | None = None) -> None:
        raise self._unsupported("update")

    def detach(self) -> None:
        raise self._unsupported("detach")

    def info(self) -> LinkInfo:
        raise self._unsupported("info")

    def close(self) -> None:
        raise NotImplementedError



class HeldProgramAttachment(FdOnlyLink):
    """An attachment without a kernel link that holds its own fd on the program until close()
    (netlink XDP/cls_bpf, BPF_PROG_ATTACH): ``_remove`` takes the program off its hook (only
    while it is still ours), ``_release`` frees what else the object holds."""

    _prog_fd: FD | None
    _attached: bool

    @property
    def closed(self) -> bool:
        return self._prog_fd is None

    @property
    def attached(self) -> bool:
        return self._attached

    def _remove(self) -> None:
        raise NotImplementedError

    def _release(self) -> None:
        pass

    def _check_open(self, what: str) -> None:
        raise NotImplementedError

    def detach(self) -> None:
        """Take the program off its hook now (if still ours); close() still frees the fds."""
        self._check_open("detach")
        if self._attached:
            self._attached = False
            self._remove()

    def close(self) -> None:
        """Remove the program if it is still ours, and release the fds this object holds."""
        if self._prog_fd is None:
            return
        try:
            if self._attached:
                self._attached = False
                self._remove()
        finally:
            self._prog_fd.close()
            self._prog_fd = None
            self._release()


# ----------------------------------------------------------- pinned links, ids, iteration
_LINK_CLASSES: dict[int, Callable[[FD, str | None], RawLink]] = {}


def register_link_class(link_type: LinkType, factory: Callable[[FD, str | None], RawLink]) -> None:
    """Make :func:`link_from_fd` wrap links of ``link_type`` with ``factory(fd, pinned_path)``."""
    _LINK_CLASSES[int(link_type)] = factory


def link_from_fd(fd: FD, pinned_path: str | None = None) -> RawLink:
    """Wrap a bpf_link fd (ownership moves) in the class for its kind (RawLink if none)."""
    try:
        raw, _ = _bpf.link_info(fd)
    except BPFKitError:
        fd.close()
        raise
    _kinds.load_link_type(int(raw.type))
    factory = _LINK_CLASSES.get(int(raw.type), RawLink)
    return factory(fd, pinned_path)


def load_pinned_link(path: str) -> RawLink:
    """Open the link pinned at ``path`` (5.7+); closing the result leaves the pin in place."""
    try:
        fd = _bpf.obj_get(path)
    except KernelError as exc:
        if exc.errno == errno.ENOENT:
            raise NotFoundError(f"no pinned object at {path}") from None
        raise exc.wrap(f"open pinned link {path}")
    kind = _bpf.obj_kind(fd)
    if kind != "link":
        fd.close()
        raise UsageError(f"{path} is pinned {('a ' + kind) if kind else 'something'}, not a link")
    return link_from_fd(fd, path)


def link_from_id(link_id: int) -> RawLink:
    """Open the link with kernel id ``link_id`` (needs CAP_SYS_ADMIN)."""
    try:
        fd = _bpf.fd_by_id("link", link_id)
    except KernelError as exc:
        if exc.errno == errno.ENOENT:
            raise NotFoundError(f"no link with id {link_id}") from None
        raise exc.wrap(f"open link id {link_id}")
    return link_from_fd(fd)


def iter_links() -> Iterator[LinkInfo]:
    """Every bpf_link in the system (BPF_LINK_GET_NEXT_ID, 5.8), as typed info, by id.

    Links that vanish between listing and opening are skipped, and so are links another process
    is making: the kernel gives a link its id before it is settled and answers EAGAIN for it
    until then (bpf_link_by_id, kernel/bpf/syscall.c).
    """
    for link_id in _bpf.iter_ids("link"):
        try:
            fd = _bpf.fd_by_id("link", link_id)
        except KernelError as exc:
            if exc.errno in (errno.ENOENT, errno.EAGAIN):
                continue
            raise
        with fd:
            yield query_info(fd)
