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

from .btf import BTF
from .btf.types import Kind, Struct
from .errors import BPFKitError, NotFoundError
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

__all__ = ["StructOpsSpec", "KernelStructOps", "find_kernel_struct_ops", "STRUCT_OPS_SECTIONS"]


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
