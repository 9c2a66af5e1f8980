# SPDX-License-Identifier: Apache-2.0
"""struct_ops specs: each variable of a ``.struct_ops``/``.struct_ops.link`` section as a
:class:`StructOpsSpec`, and the layout of one as a kernel's value computed against that
kernel's BTF (given, not read here). The spec layer: no syscalls; finding the running kernel's
struct_ops types is bpfkit.struct_ops.find_kernel_struct_ops. What struct_ops are: see there.
"""

from __future__ import annotations

import dataclasses
import struct
from typing import TYPE_CHECKING

from ..btf import BTF
from ..btf.types import Datasec, FuncProto, Kind, Pointer, Struct, Var
from ..errors import NotFoundError, ParseError, UsageError
from .consts import STRUCT_OPS_SECTIONS as STRUCT_OPS_SECTIONS  # re-exported (spec.from_elf needs only it)

if TYPE_CHECKING:  # bpfkit.spec.from_elf imports this module: no import back at run time
    from ..elf.reader import Relocation, Section

__all__ = ["StructOpsSpec", "KernelStructOps", "Plan", "STRUCT_OPS_SECTIONS", "parse_section", "plan",
           "fill_programs", "describe"]

VALUE_PREFIX = "bpf_struct_ops_"  # the kernel's wrapper type: struct bpf_struct_ops_<name>


def essential_name(name: str) -> str:
    """``sched_ext_ops`` for ``sched_ext_ops___v2`` (libbpf's flavor convention)."""
    at = name.find("___")
    return name[:at] if at > 0 else name


@dataclasses.dataclass
class StructOpsSpec:
    """One ``.struct_ops``/``.struct_ops.link`` variable, before it meets the kernel.

    ``data`` is the variable's bytes in the object's layout (function-pointer slots zeroed);
    ``programs`` maps a member name to the program it points to; edit both before loading.
    """

    type_name: str  # the object's struct name (may carry a ___flavor suffix)
    type_id: int  # in the object's BTF
    data: bytes = dataclasses.field(repr=False)
    programs: dict[str, str] = dataclasses.field(default_factory=dict)
    link: bool = False  # from .struct_ops.link: created with BPF_F_LINK, attached as a bpf_link
    section: str = ".struct_ops"
    autocreate: bool = True  # False for SEC("?.struct_ops"): created only if set True
    btf: BTF | None = dataclasses.field(default=None, repr=False)

    @property
    def kernel_type_name(self) -> str:
        return essential_name(self.type_name)

    def copy(self) -> StructOpsSpec:
        return dataclasses.replace(self, programs=dict(self.programs))


def _is_func_ptr(btf: BTF, type_id: int) -> bool:
    t = btf.resolve(type_id)
    return isinstance(t, Pointer) and isinstance(btf.resolve(t.type), FuncProto)


def parse_section(btf: BTF | None, section: Section, relocations: list[Relocation],
                  program_at: dict[tuple[int, int], str], datasec: Datasec | None) -> dict[str, StructOpsSpec]:
    """{variable: StructOpsSpec} of one struct_ops section (ELF loader)."""
    name = section.name
    if btf is None or datasec is None:
        raise ParseError(f"section {name!r} needs BTF to describe its struct_ops variables (compile with -g)")
    plain = name.lstrip("?")
    found: dict[str, StructOpsSpec] = {}
    spans: list[tuple[int, int, str, Struct]] = []
    raw = bytes(section.data)
    for vsi in datasec.vars:
        var = btf.type_by_id(vsi.type)
        if not isinstance(var, Var):
            raise ParseError(f"section {name!r}: BTF entry {vsi.type} of its DATASEC is not a variable")
        t = btf.resolve(var.type)
        if not isinstance(t, Struct) or t.kind != Kind.STRUCT:
            raise ParseError(f"struct_ops variable {var.name!r} in section {name!r} is not a struct")
        found[var.name] = StructOpsSpec(
            t.name, t.id, raw[vsi.offset : vsi.offset + t.size], link=plain == ".struct_ops.link",
            section=plain, autocreate=not name.startswith("?"), btf=btf,
        )
        spans.append((vsi.offset, vsi.offset + t.size, var.name, t))
    for rel in relocations:
        span = next((s for s in spans if s[0] <= rel.offset < s[1]), None)
        if span is None:
            raise ParseError(f"section {name!r}: relocation at offset {rel.offset} is outside every struct_ops variable")
        start, _, var_name, t = span
        moff = rel.offset - start
        member = next((m for m in t.members if m.byte_offset == moff), None)
        if member is None or not _is_func_ptr(btf, member.type):
            raise ParseError(f"struct_ops {var_name!r}: relocation at offset {moff} of struct {t.name} is not at a "
                             "function-pointer member")
        sym = rel.symbol
        target = sym.value
        if sym.type == 3:  # STT_SECTION: the function's offset is the REL addend, stored in place
            target += struct.unpack_from("<Q", raw, rel.offset)[0]
        prog = program_at.get((sym.shndx, target))
        if prog is None:
            raise ParseError(f"struct_ops {var_name!r}: member {member.name!r} points to {sym.name!r}, which is not "
                             "a program (struct_ops callbacks must be SEC(\"struct_ops/...\") programs)")
        spec = found[var_name]
        spec.programs[member.name] = prog
        data = bytearray(spec.data)
        data[moff : moff + 8] = bytes(8)
        spec.data = bytes(data)
    return found


# --------------------------------------------------------------------- kernel types
@dataclasses.dataclass
class KernelStructOps:
    """A struct_ops type as the running kernel has it."""

    name: str  # tcp_congestion_ops
    module: str  # '' for vmlinux
    btf: BTF = dataclasses.field(repr=False)
    value_type_id: int  # struct bpf_struct_ops_<name>
    value_size: int
    data_offset: int  # where struct <name> sits in the value
    type_id: int  # struct <name>: programs' attach_btf_id
    type: Struct = dataclasses.field(repr=False)


@dataclasses.dataclass
class Plan:
    """How one struct_ops map is laid out for the running kernel."""

    kernel: KernelStructOps
    value: bytearray  # the kernel value, program slots still zero
    slots: dict[str, tuple[int, int]]  # member -> (member index in the kernel struct, byte offset in value)


def plan(map_name: str, spec: StructOpsSpec, kernel: KernelStructOps) -> Plan:
    """Lay the object's variable out as the kernel's value (libbpf's
    bpf_map__init_kern_struct_ops): match members by name, check kinds and sizes."""
    btf = spec.btf
    assert btf is not None
    obj_type = btf.type_by_id(spec.type_id)
    assert isinstance(obj_type, Struct)
    kbtf, ktype = kernel.btf, kernel.type
    value = bytearray(kernel.value_size)
    slots: dict[str, tuple[int, int]] = {}
    where = f"struct_ops map {map_name!r} (struct {kernel.name})"
    for member in obj_type.members:
        msize = btf.size_of(member.type) if not _is_func_ptr(btf, member.type) else 8
        mdata = spec.data[member.byte_offset : member.byte_offset + msize]
        index, kmember = next(((i, m) for i, m in enumerate(ktype.members) if m.name == member.name), (-1, None))
        if kmember is None:
            if member.name in spec.programs or any(mdata):
                raise NotFoundError(f"{where}: the kernel's struct {kernel.name} has no member {member.name!r}")
            continue  # an unset member this kernel lacks: fine (as libbpf)
        if member.bitfield_size or kmember.bitfield_size:
            raise UsageError(f"{where}: member {member.name!r} is a bitfield, which struct_ops cannot set")
        mkind = btf.resolve(member.type).kind
        kkind = kbtf.resolve(kmember.type).kind
        if mkind != kkind:
            raise UsageError(f"{where}: member {member.name!r} is a {mkind.name} in the object but a {kkind.name} "
                             "in the kernel")
        koff = kernel.data_offset + kmember.byte_offset
        if _is_func_ptr(kbtf, kmember.type):
            if member.name in spec.programs:
                slots[member.name] = (index, koff)
            continue
        ksize = kbtf.size_of(kmember.type)
        if ksize != msize:
            raise UsageError(f"{where}: member {member.name!r} is {msize} bytes in the object, {ksize} in the kernel")
        value[koff : koff + ksize] = mdata
    for name in spec.programs:
        if name not in slots:
            raise UsageError(f"{where}: member {name!r} is set to a program but is not a function pointer here")
    return Plan(kernel, value, slots)


def fill_programs(p: Plan, spec: StructOpsSpec, fds: dict[str, int]) -> bytes:
    """The value with each loaded program's fd in its function-pointer slot (a u64)."""
    value = bytearray(p.value)
    for member, (_, off) in p.slots.items():
        fd = fds.get(spec.programs[member])
        if fd is not None:
            struct.pack_into("<Q", value, off, fd)
    return bytes(value)


def describe(spec: StructOpsSpec) -> str:
    """One line for listings: the type and which member runs which program."""
    members = ", ".join(f"{m}={p}" for m, p in spec.programs.items())
    return f"struct {spec.kernel_type_name} ({spec.section}): {members or 'no programs'}"
