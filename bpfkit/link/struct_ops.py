# SPDX-License-Identifier: Apache-2.0
"""Registering struct_ops maps (bpfkit.struct_ops): a BPF TCP congestion control, a sched_ext
scheduler, ... goes live when its map is attached.

    coll = bpfkit.Collection.from_file("cc.bpf.o")
    with link.struct_ops(coll.maps["my_cc"]) as lk:    # SEC(".struct_ops.link"): a bpf_link
        ...                                              # setsockopt(TCP_CONGESTION, b"my_cc")

* Every form starts with BPF_MAP_UPDATE_ELEM(key 0, the kernel value with program fds).
* A map created with BPF_F_LINK (``.struct_ops.link``, 6.4, 68b04864ca42) is only made ready by
  that; BPF_LINK_CREATE(map fd, BPF_STRUCT_OPS) registers it and returns a
  BPF_LINK_TYPE_STRUCT_OPS link: closing it unregisters, ``pin`` keeps it past the process,
  ``update(other_map)`` swaps in another ready map of the same type (BPF_LINK_UPDATE with
  new_map_fd, 6.4), ``detach()`` unregisters while the fd lives (6.10, 73287fe22872).
* A map without BPF_F_LINK (``.struct_ops``, or any map before 6.4) is registered by the update
  itself and unregistered by deleting key 0: :class:`StructOpsMapLink` does that on close; it
  cannot be pinned or updated.
"""

from __future__ import annotations

import dataclasses
import errno
from typing import Any, NoReturn, TypeGuard, overload

from .._kernel import bpf as _bpf
from .._kernel import map_elems as _map_elems
from .._kernel.consts import AttachType, LinkType, MapFlag, MapType
from .._protocols import MapLike, ProgramArg
from ..errors import BPFKitError, KernelError, NotSupportedError, UsageError
from .base import Link, LinkInfo, RawLink
from .kind import LinkKind

__all__ = ["StructOpsLink", "StructOpsMapLink", "StructOpsInfo", "struct_ops"]


@dataclasses.dataclass(frozen=True)
class StructOpsInfo:
    """A BPF_LINK_TYPE_STRUCT_OPS link's details: the id of the struct_ops map it registers."""

    map_id: int


def _decode(raw: Any) -> StructOpsInfo:
    return StructOpsInfo(int(raw.struct_ops.map_id))




def _what(m: Any) -> str:
    ops = getattr(m, "struct_ops", None)
    kind = f" (struct {ops.kernel_type_name})" if ops is not None else ""
    return f"struct_ops map {getattr(m, 'name', '')!r}{kind}"

_KEY_0 = bytes(4)  # a struct_ops map has one element, at u32 key 0


def _register_value(m: Any, *, allow_busy: bool) -> None:
    """BPF_MAP_UPDATE_ELEM(0, value): registers a plain struct_ops map, readies a BPF_F_LINK one.
    EBUSY on a BPF_F_LINK map means it was made ready before (its value is set once)."""
    value = getattr(m, "struct_ops_value", None)
    if value is None:
        raise UsageError(f"attach {_what(m)}: not a struct_ops map loaded by a bpfkit Collection "
                         "(its value with program fds is unknown)")
    if getattr(m, "fd", None) is None or m.fd.closed:
        raise UsageError(f"attach {_what(m)}: the map is closed")
    try:
        _map_elems.update(m.fd, _KEY_0, bytes(value))
    except KernelError as exc:
        if exc.errno == errno.EBUSY and allow_busy:
            return
        why = {
            errno.EEXIST: "something of that name is registered already (a struct_ops name must be unique), or "
                          "the kernel allows one at a time (sched_ext)",
            errno.EBUSY: "the map is registered already, or was and has been unregistered (a struct_ops map's value "
                         "is set once: load the object again to register it again)",
            errno.EINVAL: "the kernel refused the table: a member it requires is unset, a data member has a value "
                          "it does not accept, or a program does not fit its member",
            524: "this kernel cannot register this struct_ops type (ENOTSUPP)",
        }.get(exc.errno)
        raise exc.wrap(f"register {_what(m)}" + (f": {why}" if why else "")) from None


class StructOpsLink(RawLink):
    """A BPF_LINK_TYPE_STRUCT_OPS link (6.4): ``info().detail`` is StructOpsInfo."""

    kind = "struct_ops"

    # The one link whose update takes a map (BPF_LINK_UPDATE of a struct_ops link swaps the
    # registered map, new_map_fd): typed so, it still fits the Link protocol, whose update takes
    # a program: that form exists only to raise UsageError.
    @overload
    def update(self, prog: MapLike, old: MapLike | None = None) -> None: ...

    @overload
    def update(self, prog: ProgramArg, old: ProgramArg | None = None) -> NoReturn: ...

    def update(self, prog: MapLike | ProgramArg, old: MapLike | ProgramArg | None = None) -> None:
        """Swap in another struct_ops map of the same type (``prog`` is the new Map; ``old``,
        when given, must be the one registered now: BPF_F_REPLACE). The new map is made ready
        first. Both maps must have been created for links (``.struct_ops.link``)."""
        self._check_open("update")
        new_map = _struct_ops_map(prog)
        old = None if old is None else _struct_ops_map(old)
        _register_value(new_map, allow_busy=True)
        try:
            if old is not None:
                _bpf.link_update(self.fd, new_map.fd, int(old.fd), flags=1 << 2)  # BPF_F_REPLACE
            else:
                _bpf.link_update(self.fd, new_map.fd)
        except KernelError as exc:
            raise exc.wrap(f"update struct_ops link to {_what(new_map)}: the kernel refused it (the new map must be "
                           "a BPF_F_LINK map of the same struct_ops type; with old=, old must be the one attached)") from None

    def detach(self) -> None:
        """Unregister while the link fd lives on (6.10; EOPNOTSUPP before)."""
        super().detach()


def _is_map(m: object) -> TypeGuard[MapLike]:
    return isinstance(getattr(m, "type", None), MapType)


def _struct_ops_map(m: MapLike | ProgramArg) -> MapLike:
    if not _is_map(m):
        raise UsageError(f"update struct_ops link: {getattr(m, 'name', m)!r} is not a map: a struct_ops link "
                         "swaps struct_ops maps (BPF_LINK_UPDATE with new_map_fd), not programs")
    return m




class StructOpsMapLink(Link):
    """A struct_ops map registered without a bpf_link (a ``.struct_ops`` map, or any before
    6.4): it stays registered until :meth:`close` deletes the map's element (the map itself
    belongs to its Collection), even past the process: the kernel holds a registered map.
    :meth:`pin` pins the map and leaves it registered; update and info raise NotSupportedError."""

    attached_by = "map update, no link"  # how `bpfkit attach` says it was attached

    kind = "struct_ops (map)"
    description = ""

    def __init__(self, m: Any) -> None:
        self.map = m
        self._closed = False
        self.pinned_path: str | None = None
        # The kernel holds a registered map past this process: the Collection closing the map
        # unregisters it unless pinned (Collection.close), so nothing outlives it by accident.
        m._struct_ops_registration = self

    @property
    def closed(self) -> bool:
        return self._closed

    def _unsupported(self, what: str) -> NotSupportedError:
        return NotSupportedError(f"{what} of {_what(self.map)} registered without a link",
                                 "only maps from a .struct_ops.link section are registered through a bpf_link (6.4)",
                                 "6.4")

    def pin(self, path: str) -> None:
        """Keep the registration past this process: pin the map at ``path`` (a registered map
        is held by the kernel anyway; the pin is how to find it again) and leave it registered
        on close. Unregister later by deleting key 0 of the pinned map."""
        if self._closed:
            raise UsageError(f"pin {_what(self.map)}: the registration was closed")
        if getattr(self.map, "pinned_path", None) is None:
            self.map.pin(path)
            self.pinned_path = path
        else:
            self.pinned_path = self.map.pinned_path  # pinned already: that pin keeps it

    def unpin(self) -> None:
        """Remove the pin; closing then unregisters again."""
        import os

        if self.pinned_path is None:
            return
        if getattr(self.map, "pinned_path", None) == self.pinned_path:
            self.map.unpin()
        else:
            try:
                os.unlink(self.pinned_path)
            except FileNotFoundError:
                pass
        self.pinned_path = None

    def update(self, prog: ProgramArg, old: ProgramArg | None = None) -> None:
        raise self._unsupported("update")

    def info(self) -> LinkInfo:
        raise self._unsupported("info")

    def detach(self) -> None:
        self.close()

    def close(self) -> None:
        """Unregister (BPF_MAP_DELETE_ELEM of key 0); a no-op once closed or when the map is."""
        if self._closed:
            return
        self._closed = True
        if self.map.fd.closed or self.pinned_path is not None:
            return  # pinned: stays registered (the kernel holds a registered map itself)
        try:
            _map_elems.delete(self.map.fd, _KEY_0)
        except BPFKitError as exc:
            raise exc.wrap(f"unregister {_what(self.map)}")


    def __repr__(self) -> str:
        return f"StructOpsMapLink({self.map.name!r}{', closed' if self._closed else ''})"


def struct_ops(m: Any) -> StructOpsLink | StructOpsMapLink:
    """Register struct_ops map ``m`` (from ``Collection.maps``): through a bpf_link when the map
    was created with BPF_F_LINK (``.struct_ops.link`` on 6.4+), else by the map update alone."""
    if int(getattr(m, "type", 0)) != 26:  # BPF_MAP_TYPE_STRUCT_OPS
        raise UsageError(f"attach struct_ops: map {getattr(m, 'name', m)!r} is not a struct_ops map")
    as_link = bool(int(getattr(m, "flags", 0)) & int(MapFlag.LINK))
    _register_value(m, allow_busy=as_link)
    if not as_link:
        made = StructOpsMapLink(m)
        made.description = _what(m)
        return made
    try:
        fd = _bpf.link_create(m.fd, 0, int(AttachType.STRUCT_OPS), detail=m.name)
    except KernelError as exc:
        why = ""
        if exc.errno == errno.EEXIST:
            why = ": something of that name is registered already, or the kernel allows one at a time (sched_ext)"
        elif exc.errno == errno.EINVAL:
            why = ": the kernel refused the table (a required member unset, or a value it does not accept)"
        raise exc.wrap(f"attach {_what(m)} (BPF_LINK_CREATE)" + why) from None
    lk = StructOpsLink(fd)
    lk.description = _what(m)  # type: ignore[attr-defined]
    return lk


# ----------------------------------------------------------------------- the kind's record
_CALLBACK = "struct_ops callbacks run through their struct_ops map, which attach_all registers (link.struct_ops)"
# struct_ops maps (not programs) are what attach_all registers, by map name: bpfkit.link.attach.
KIND = LinkKind(
    "struct_ops",
    never_auto={"struct_ops": _CALLBACK, "struct_ops.s": _CALLBACK},
    link_classes={LinkType.STRUCT_OPS: StructOpsLink},
    info_decoders={LinkType.STRUCT_OPS: _decode},
    features=("map_type_struct_ops",),
)
