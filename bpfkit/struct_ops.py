# SPDX-License-Identifier: Apache-2.0
"""struct_ops: kernel callback tables (struct tcp_congestion_ops, struct sched_ext_ops, ...)
implemented by BPF programs, as libbpf and cilium/ebpf build them.

An object declares the table as a global variable in section ``.struct_ops`` or
``.struct_ops.link``::

    SEC(".struct_ops.link")
    struct tcp_congestion_ops my_cc = { .init = (void *)my_init, ..., .name = "my_cc" };

Each such variable becomes one map (BPF_MAP_TYPE_STRUCT_OPS, 5.6, named after the variable):

* its value is the kernel's ``struct bpf_struct_ops_<name>`` (vmlinux or module BTF): a
  common header (refcnt/state; must be zero from user space) and the kernel's ``struct <name>``
  in its ``data`` member. The map is created with btf_vmlinux_value_type_id = that type's id.
* members are matched to the kernel's by name: function pointers that the object sets to a
  program get that program's fd; data members (``name``, ``flags``) are copied from the object
  (same size required); members the kernel lacks are an error unless zero in the object.
* each program a member points to is loaded with attach_btf_id = the kernel ``struct <name>``'s
  id and expected_attach_type = the member's index; one program may serve several maps at the
  same member.
* registering = BPF_MAP_UPDATE_ELEM(key 0, value). A ``.struct_ops`` map is then live until the
  element is deleted; a ``.struct_ops.link`` map (created with BPF_F_LINK, 6.4) is only made
  ready by the update and goes live with BPF_LINK_CREATE(map fd, BPF_STRUCT_OPS), a bpf_link
  that can be pinned, updated to another map of the same type, detached and closed.

On a kernel before 6.4 a ``.struct_ops.link`` map is created without BPF_F_LINK and registered
by the map update alone (what such kernels offer).
"""

from __future__ import annotations

from typing import Any

from .btf import BTF
from .btf.types import Kind, Struct
from .errors import BPFKitError, NotFoundError, UsageError
from .spec.struct_ops import (  # the spec half, re-exported: bpfkit.struct_ops.StructOpsSpec
    STRUCT_OPS_SECTIONS as STRUCT_OPS_SECTIONS,
)
from .spec.struct_ops import (
    VALUE_PREFIX as VALUE_PREFIX,
)
from .spec.struct_ops import (
    KernelStructOps as KernelStructOps,
)
from .spec.struct_ops import (
    Plan as Plan,
)
from .spec.struct_ops import (
    StructOpsSpec as StructOpsSpec,
)
from .spec.struct_ops import (
    describe as describe,
)
from .spec.struct_ops import (
    essential_name as essential_name,
)
from .spec.struct_ops import (
    fill_programs as fill_programs,
)
from .spec.struct_ops import (
    parse_section as parse_section,
)
from .spec.struct_ops import (
    plan as plan,
)

__all__ = ["StructOpsSpec", "KernelStructOps", "find_kernel_struct_ops", "STRUCT_OPS_SECTIONS", "StructOpsMapInfo",
           "inspect_map", "unregister_map"]


def find_kernel_struct_ops(name: str) -> KernelStructOps:
    """Find ``struct bpf_struct_ops_<name>`` in vmlinux's BTF, then in the modules'."""
    from . import kernel_btf as _kernel_btf
    from ._kernel import sysfs_btf as _sysfs_btf

    wanted = VALUE_PREFIX + name
    try:
        candidates: list[tuple[str, BTF | None]] = [("", _kernel_btf.vmlinux())]
        candidates += [(mod, None) for mod in _sysfs_btf.module_btf_names()]
        for mod, loaded in candidates:
            if loaded is not None:
                btf = loaded
            else:
                try:
                    btf = _kernel_btf.module(mod)
                except NotFoundError:
                    continue  # unloaded meanwhile
            hits = btf.find(wanted, Kind.STRUCT, own_only=True) if mod else btf.find(wanted, Kind.STRUCT)
            if not hits:
                continue
            value = hits[0]
            assert isinstance(value, Struct)
            kern = [t for t in btf.find(name, Kind.STRUCT) if isinstance(t, Struct)]
            if not kern:
                break
            data = next((m for m in value.members if btf.resolve_id(m.type) == kern[0].id), None)
            if data is None:
                raise NotFoundError(f"struct {wanted} in the kernel's BTF has no member of type struct {name}")
            return KernelStructOps(name, mod, btf, value.id, value.size, data.byte_offset, kern[0].id, kern[0])
    except BPFKitError as exc:
        raise exc.wrap(f"find struct {wanted} in the kernel's BTF")
    raise NotFoundError(
        f"struct {wanted} is not in the kernel's BTF: this kernel does not offer struct_ops of type {name!r} "
        f"(no such struct_ops in vmlinux or any loaded module; its subsystem may be disabled or need a newer kernel)"
    )


# ------------------------------------------------------- registered maps (bpfkit struct_ops)
# struct bpf_struct_ops_common_value (include/linux/bpf.h): refcount_t refcnt; enum
# bpf_struct_ops_state state; at the start of every struct_ops map's value, which the kernel
# returns from a lookup of key 0 (bpf_struct_ops_map_sys_lookup_elem).
_STATES = {0: "init", 1: "inuse", 2: "tobefree", 3: "ready"}
_KEY_0 = bytes(4)


class StructOpsMapInfo:
    """A struct_ops map of the system as ``bpfkit struct-ops list|show`` describes it: the map's
    id and name, the kernel struct it implements (``tcp_congestion_ops``; from the map's
    btf_vmlinux_value_type_id, as ``bpftool struct_ops list`` prints it), the registration
    state (``inuse``: registered; ``ready``: a BPF_F_LINK map waiting for or held by its link;
    ``init``/``tobefree``), the table's own ``name`` member when the struct has one (what
    setsockopt(TCP_CONGESTION) and sched_ext know it by), and whether it was created with
    BPF_F_LINK (``.struct_ops.link``: registered through a bpf_link)."""

    __slots__ = ("id", "name", "type_name", "state", "ops_name", "link")

    def __init__(self, id: int, name: str, type_name: str, state: str, ops_name: str | None, link: bool) -> None:
        self.id, self.name, self.type_name, self.state = id, name, type_name, state
        self.ops_name, self.link = ops_name, link


def _value_type(type_id: int, btf_obj_id: int) -> tuple[BTF, Struct] | None:
    """The kernel's ``struct bpf_struct_ops_<name>`` with BTF id ``type_id`` in the kernel BTF
    object ``btf_obj_id`` (bpf_map_info.btf_vmlinux_id, 6.9: vmlinux or the module that defines
    the type; module BTF is split, its ids follow vmlinux's). Without that id (older kernels):
    vmlinux's, or the first loaded module's whose type of that id has the prefix."""
    from . import kernel_btf as _kernel_btf
    from ._kernel import bpf as _bpf

    base = _kernel_btf.vmlinux()
    candidates = [base] if type_id < len(base) else []
    if not candidates and btf_obj_id:
        try:
            with _bpf.fd_by_id("btf", btf_obj_id) as fd:
                module = _bpf.btf_info(fd)[1]
            candidates = [_kernel_btf.module(module)]
        except BPFKitError:  # the module went away meanwhile
            return None
    elif not candidates:
        candidates = _kernel_btf.modules()
    for btf in candidates:
        try:
            t = btf.type_by_id(type_id)
        except NotFoundError:
            continue
        if isinstance(t, Struct) and t.name.startswith(VALUE_PREFIX):
            return btf, t
    return None


def _ops_name(btf: BTF, value_type: Struct, value: bytes) -> str | None:
    """The ``name`` char array of the kernel struct in the value's ``data`` member, if any."""
    data = value_type.member("data")
    kern = btf.type_by_id(btf.resolve_id(data.type)) if data is not None else None
    member = kern.member("name") if isinstance(kern, Struct) else None
    if data is None or member is None:
        return None
    size = btf.size_of(member.type)
    start = data.byte_offset + member.byte_offset
    return value[start:start + size].split(b"\0", 1)[0].decode("utf-8", "replace") or None  # None: never registered


def inspect_map(m: Any) -> StructOpsMapInfo:
    """Describe struct_ops map ``m`` (a bpfkit.maps.Map, e.g. Map.from_id): UsageError for
    another type of map."""
    from ._kernel import map_elems as _map_elems
    from ._kernel.consts import MapFlag, MapType

    info = m.info()
    if info.type != MapType.STRUCT_OPS:
        raise UsageError(f"map {info.id} ({info.name!r}) is not a struct_ops map (its type: {info.type_name}) "
                         "(`bpfkit struct-ops list` shows those)")
    found = _value_type(info.btf_vmlinux_value_type_id, info.btf_vmlinux_id)
    type_name = found[1].name.removeprefix(VALUE_PREFIX) if found else ""
    value = _map_elems.lookup(m.fd, _KEY_0, info.value_size) or b""
    state = _STATES.get(int.from_bytes(value[4:8], "little"), "unknown") if len(value) >= 8 else "unknown"
    ops_name = _ops_name(found[0], found[1], value) if found and value else None
    return StructOpsMapInfo(int(info.id), info.name, type_name, state, ops_name,
                            bool(info.map_flags & int(MapFlag.LINK)))


def unregister_map(m: Any) -> None:
    """Unregister struct_ops map ``m`` registered without a bpf_link (a ``.struct_ops`` map):
    BPF_MAP_DELETE_ELEM of key 0, as ``bpftool struct_ops unregister`` does. A BPF_F_LINK map
    refuses that (EOPNOTSUPP, bpf_struct_ops_map_delete_elem): detach its link instead."""
    import errno as _errno

    from ._kernel import map_elems as _map_elems
    from ._kernel.consts import MapFlag
    from .errors import KernelError

    info = m.info()
    what = f"struct_ops map {info.id} ({info.name!r})"
    if info.map_flags & int(MapFlag.LINK):
        raise UsageError(f"unregister {what}: it was created for a bpf_link (BPF_F_LINK): detach its link")
    try:
        if not _map_elems.delete(m.fd, _KEY_0):
            raise NotFoundError(f"unregister {what}: it is not registered (key 0 holds nothing)")
    except KernelError as exc:
        if exc.errno == _errno.EINPROGRESS:  # state TOBEFREE: a delete came first
            raise NotFoundError(f"unregister {what}: it was unregistered already") from None
        raise exc.wrap(f"unregister {what}") from None
