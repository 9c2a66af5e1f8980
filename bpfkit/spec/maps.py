# SPDX-License-Identifier: Apache-2.0
"""MapSpec: everything needed to create a map, as plain data (the spec layer: no syscalls).

The kernel object made from it is bpfkit.maps.Map.
"""

from __future__ import annotations

import dataclasses
import enum

from .._record import record_dataclass
from .consts import MapType

TYPE_CHECKING = False  # typing costs ~2 ms to import: its names are for the type checker only
if TYPE_CHECKING:
    from typing import Any

    from ..btf import BTF
    from .struct_ops import StructOpsSpec

__all__ = ["MapSpec", "PinType", "PERCPU_TYPES", "SIZE_FIELDS", "zero_size_fields", "zero_size_hint"]

PERCPU_TYPES = frozenset(
    {MapType.PERCPU_HASH, MapType.PERCPU_ARRAY, MapType.LRU_PERCPU_HASH, MapType.PERCPU_CGROUP_STORAGE}
)


class PinType(enum.IntEnum):
    """libbpf's ``pinning`` attribute (enum libbpf_pin_type)."""

    NONE = 0
    BY_NAME = 1


@record_dataclass  # a dataclass whose methods are not generated: see bpfkit._record
class MapSpec:
    """Everything needed to create a map; edit freely before loading."""

    name: str
    type: MapType
    key_size: int = 0
    value_size: int = 0
    max_entries: int = 0
    flags: int = 0
    numa_node: int = 0
    map_extra: int = 0
    pinning: PinType = PinType.NONE
    inner: MapSpec | None = None
    # Initial contents: (key, value) pairs written after creation (prog-array and map-in-map
    # initialisers hold program/map names as values until the collection resolves them).
    contents: list[tuple[Any, Any]] = dataclasses.field(default_factory=list)
    # BTF type ids in the object's BTF, when the map was declared through BTF.
    btf_key_type_id: int = 0
    btf_value_type_id: int = 0
    # The BTF those ids are in (a Map decodes keys and values through it: bpfkit.btf.values);
    # None for data sections, whose variables are read through CollectionSpec.variables.
    btf: BTF | None = dataclasses.field(default=None, repr=False, compare=False)
    # For data sections (.data, .rodata, .bss): the initial bytes, and whether to freeze.
    data: bytes | None = None
    freeze: bool = False
    key_format: str | None = None
    value_format: str | None = None
    # The name the kernel sees when it differs from ``name`` (libbpf names .rodata of
    # "prog.bpf.o" "prog.rodata"); 15 characters at most.
    kernel_name: str = ""
    # struct_ops maps (BPF_MAP_TYPE_STRUCT_OPS): the section's variable (bpfkit.struct_ops
    # StructOpsSpec), and, once resolved against the kernel, the id of its value type
    # (struct bpf_struct_ops_<name>) in vmlinux or a module's BTF.
    struct_ops: StructOpsSpec | None = None
    btf_vmlinux_value_type_id: int = 0

    def copy(self) -> MapSpec:
        return dataclasses.replace(
            self, contents=list(self.contents), inner=self.inner.copy() if self.inner else None,
            struct_ops=self.struct_ops.copy() if self.struct_ops is not None else None,
        )

    def compatible_with(self, info: Any) -> str:
        """Why an existing map (its bpf_map_info) can't stand in for this spec, or ''."""
        for field, want in (
            ("type", int(self.type)),
            ("key_size", self.key_size),
            ("value_size", self.value_size),
            ("max_entries", self.max_entries),
        ):
            have = int(getattr(info, field))
            if have != want:
                return f"{field} is {have}, the object wants {want}"
        # BPF_F_RDONLY_PROG and friends are reported back; NO_PREALLOC etc. must match.
        if int(info.map_flags) != self.flags:
            return f"map_flags is {int(info.map_flags):#x}, the object wants {self.flags:#x}"
        # bpf_map_info.map_extra exists since 5.16; older kernels leave the field zero, as
        # the map they made has no extra (libbpf's map_is_reuse_compat checks it too).
        if int(info.map_extra) != self.map_extra:
            return f"map_extra is {int(info.map_extra):#x}, the object wants {self.map_extra:#x}"
        return ""


# Map types for which the kernel accepts a size of 0 (kernel/bpf/*.c map_alloc_check):
# no key (queue, stack, bloom filter, ring buffers, arena), no value (ring buffers, arena),
# no max_entries (local storage; perf event arrays get one slot per CPU from the loader).
_ZERO_OK = {
    "key_size": frozenset({MapType.QUEUE, MapType.STACK, MapType.BLOOM_FILTER, MapType.RINGBUF,
                           MapType.USER_RINGBUF, MapType.ARENA}),
    "value_size": frozenset({MapType.RINGBUF, MapType.USER_RINGBUF, MapType.ARENA}),
    "max_entries": frozenset({MapType.SK_STORAGE, MapType.INODE_STORAGE, MapType.TASK_STORAGE,
                              MapType.CGRP_STORAGE, MapType.CGROUP_STORAGE, MapType.PERCPU_CGROUP_STORAGE,
                              MapType.PERF_EVENT_ARRAY}),
}
SIZE_FIELDS = tuple(_ZERO_OK)


def zero_size_fields(spec: MapSpec) -> list[str]:
    """The size fields of ``spec`` that are 0 where its map type needs a number: tools that
    size a map from user space leave them 0 in the object."""
    return [f for f in SIZE_FIELDS if getattr(spec, f) == 0 and spec.type not in _ZERO_OK[f]]


def zero_size_hint(name: str, fields: list[str]) -> str:
    """How to set ``fields`` of map ``name`` before loading, from Python and from the CLI."""
    one = len(fields) == 1
    python = "; ".join(f"spec.maps[{name!r}].{f} = N" for f in fields)
    cli = " ".join(f"--map-size {name}.{f}=N" for f in fields)
    return (f"its {' and '.join(fields)} {'is' if one else 'are'} 0, which this map type does not allow: "
            f"set {'it' if one else 'them'} before loading ({python}; or bpfkit load/attach {cli})")
