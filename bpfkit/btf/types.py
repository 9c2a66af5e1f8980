"""The BTF type model: one small class per BTF kind (include/uapi/linux/btf.h).

Types refer to each other by type id (an ``int``), exactly as BTF does; :class:`bpfkit.btf.BTF`
resolves ids to types, computes sizes and finds types by name. Keeping ids (not object
references) makes marshalling back to the kernel format exact, lets module BTF ("split" BTF)
continue the id space of vmlinux, and gives CO-RE the same view libbpf has.

Kinds by the kernel release that introduced them (the loader sanitises newer kinds away for
older kernels): INT..FUNC_PROTO 4.18-5.0, VAR/DATASEC 5.2, FLOAT 5.13, DECL_TAG 5.16,
TYPE_TAG 5.17, ENUM64 6.0.
"""

from __future__ import annotations

import dataclasses
import enum
from typing import ClassVar

__all__ = [
    "Kind", "IntEncoding", "Linkage", "VarLinkage", "Type", "Void", "Int", "Pointer", "Array",
    "Member", "Struct", "Union", "EnumValue", "Enum", "Fwd", "Typedef", "Volatile", "Const",
    "Restrict", "Param", "Func", "FuncProto", "Var", "VarSecinfo", "Datasec", "Float", "DeclTag",
    "TypeTag", "Enum64", "KIND_CLASSES", "QUALIFIER_KINDS",
]


class Kind(enum.IntEnum):
    """BTF_KIND_*."""

    VOID = 0  # not a real kind: type id 0
    INT = 1
    PTR = 2
    ARRAY = 3
    STRUCT = 4
    UNION = 5
    ENUM = 6
    FWD = 7
    TYPEDEF = 8
    VOLATILE = 9
    CONST = 10
    RESTRICT = 11
    FUNC = 12
    FUNC_PROTO = 13
    VAR = 14
    DATASEC = 15
    FLOAT = 16
    DECL_TAG = 17
    TYPE_TAG = 18
    ENUM64 = 19


class IntEncoding(enum.IntFlag):
    """BTF_INT_* encoding bits."""

    NONE = 0
    SIGNED = 1
    CHAR = 2
    BOOL = 4


class Linkage(enum.IntEnum):
    """enum btf_func_linkage (a FUNC's vlen)."""

    STATIC = 0
    GLOBAL = 1
    EXTERN = 2


class VarLinkage(enum.IntEnum):
    """BTF_VAR_* linkage of a VAR."""

    STATIC = 0
    GLOBAL = 1  # BTF_VAR_GLOBAL_ALLOCATED
    EXTERN = 2  # BTF_VAR_GLOBAL_EXTERN


@dataclasses.dataclass(slots=True, eq=False)
class Type:
    """Base of every kind; ``id`` is the type's id in its BTF, ``name`` '' when anonymous."""

    id: int
    name: str
    kind: ClassVar[Kind] = Kind.VOID

    def __repr__(self) -> str:
        label = f" {self.name!r}" if self.name else ""
        return f"<{self.kind.name}{label} #{self.id}>"


@dataclasses.dataclass(slots=True, eq=False, repr=False)
class Void(Type):
    kind: ClassVar[Kind] = Kind.VOID


@dataclasses.dataclass(slots=True, eq=False, repr=False)
class Int(Type):
    size: int = 0
    encoding: IntEncoding = IntEncoding.NONE
    bit_offset: int = 0
    bits: int = 0
    kind: ClassVar[Kind] = Kind.INT

    @property
    def signed(self) -> bool:
        return bool(self.encoding & IntEncoding.SIGNED)


@dataclasses.dataclass(slots=True, eq=False, repr=False)
class Pointer(Type):
    type: int = 0
    kind: ClassVar[Kind] = Kind.PTR


@dataclasses.dataclass(slots=True, eq=False, repr=False)
class Array(Type):
    type: int = 0
    index_type: int = 0
    nelems: int = 0
    kind: ClassVar[Kind] = Kind.ARRAY


@dataclasses.dataclass(slots=True)
class Member:
    name: str
    type: int
    bit_offset: int  # offset from the start of the struct, in bits
    bitfield_size: int = 0  # 0 unless a bitfield (only with the kind_flag set)

    @property
    def byte_offset(self) -> int:
        return self.bit_offset // 8


@dataclasses.dataclass(slots=True, eq=False, repr=False)
class Struct(Type):
    size: int = 0
    members: list[Member] = dataclasses.field(default_factory=list)
    kind_flag: bool = False  # members carry bitfield sizes
    kind: ClassVar[Kind] = Kind.STRUCT

    def member(self, name: str) -> Member | None:
        for m in self.members:
            if m.name == name:
                return m
        return None


@dataclasses.dataclass(slots=True, eq=False, repr=False)
class Union(Struct):
    kind: ClassVar[Kind] = Kind.UNION


@dataclasses.dataclass(slots=True)
class EnumValue:
    name: str
    value: int


@dataclasses.dataclass(slots=True, eq=False, repr=False)
class Enum(Type):
    size: int = 4
    values: list[EnumValue] = dataclasses.field(default_factory=list)
    signed: bool = False  # the kind_flag
    kind: ClassVar[Kind] = Kind.ENUM


@dataclasses.dataclass(slots=True, eq=False, repr=False)
class Enum64(Enum):
    size: int = 8
    kind: ClassVar[Kind] = Kind.ENUM64


@dataclasses.dataclass(slots=True, eq=False, repr=False)
class Fwd(Type):
    union: bool = False  # the kind_flag: forward declaration of a union, not a struct
    kind: ClassVar[Kind] = Kind.FWD


@dataclasses.dataclass(slots=True, eq=False, repr=False)
class Typedef(Type):
    type: int = 0
    kind: ClassVar[Kind] = Kind.TYPEDEF


@dataclasses.dataclass(slots=True, eq=False, repr=False)
class Volatile(Type):
    type: int = 0
    kind: ClassVar[Kind] = Kind.VOLATILE


@dataclasses.dataclass(slots=True, eq=False, repr=False)
class Const(Type):
    type: int = 0
    kind: ClassVar[Kind] = Kind.CONST


@dataclasses.dataclass(slots=True, eq=False, repr=False)
class Restrict(Type):
    type: int = 0
    kind: ClassVar[Kind] = Kind.RESTRICT


@dataclasses.dataclass(slots=True, eq=False, repr=False)
class TypeTag(Type):
    type: int = 0
    kind_flag: bool = False  # 6.14+: the tag is a C attribute (__attribute__((...))), not a name
    kind: ClassVar[Kind] = Kind.TYPE_TAG


@dataclasses.dataclass(slots=True)
class Param:
    name: str
    type: int


@dataclasses.dataclass(slots=True, eq=False, repr=False)
class Func(Type):
    type: int = 0  # a FuncProto
    linkage: Linkage = Linkage.STATIC
    kind: ClassVar[Kind] = Kind.FUNC


@dataclasses.dataclass(slots=True, eq=False, repr=False)
class FuncProto(Type):
    return_type: int = 0
    params: list[Param] = dataclasses.field(default_factory=list)
    kind: ClassVar[Kind] = Kind.FUNC_PROTO


@dataclasses.dataclass(slots=True, eq=False, repr=False)
class Var(Type):
    type: int = 0
    linkage: VarLinkage = VarLinkage.STATIC
    kind: ClassVar[Kind] = Kind.VAR


@dataclasses.dataclass(slots=True)
class VarSecinfo:
    type: int  # a Var (or a Func for .ksyms)
    offset: int
    size: int


@dataclasses.dataclass(slots=True, eq=False, repr=False)
class Datasec(Type):
    size: int = 0
    vars: list[VarSecinfo] = dataclasses.field(default_factory=list)
    kind: ClassVar[Kind] = Kind.DATASEC


@dataclasses.dataclass(slots=True, eq=False, repr=False)
class Float(Type):
    size: int = 0
    kind: ClassVar[Kind] = Kind.FLOAT


@dataclasses.dataclass(slots=True, eq=False, repr=False)
class DeclTag(Type):
    type: int = 0
    component_idx: int = -1  # -1: the tag applies to the type itself, else a member/param index
    kind_flag: bool = False  # 6.14+: the tag is a C attribute
    kind: ClassVar[Kind] = Kind.DECL_TAG


KIND_CLASSES: dict[Kind, type[Type]] = {
    cls.kind: cls
    for cls in (Void, Int, Pointer, Array, Struct, Union, Enum, Fwd, Typedef, Volatile, Const,
                Restrict, Func, FuncProto, Var, Datasec, Float, DeclTag, TypeTag, Enum64)
}

# Kinds that only qualify or rename another type: skipped when resolving to the "real" type.
QUALIFIER_KINDS = frozenset({Kind.TYPEDEF, Kind.VOLATILE, Kind.CONST, Kind.RESTRICT, Kind.TYPE_TAG})
