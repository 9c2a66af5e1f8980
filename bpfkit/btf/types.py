# SPDX-License-Identifier: Apache-2.0
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

import enum
from collections.abc import Callable

TYPE_CHECKING = False  # typing costs ~1.5 ms to import; its names here are annotations only
if TYPE_CHECKING:
    from typing import ClassVar, TypeAlias

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


# Plain classes with __slots__ rather than dataclasses: vmlinux has ~130k types with ~500k
# members, and a dataclass costs import time in every process (the loader's CLI path) too.
class _Record:
    """Small value records (members, enum values, params, datasec entries): field equality."""

    __slots__: tuple[str, ...] = ()

    def __eq__(self, other: object) -> bool:
        return type(self) is type(other) and all(getattr(self, f) == getattr(other, f) for f in self.__slots__)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        inner = ", ".join(f"{f}={getattr(self, f)!r}" for f in self.__slots__)
        return f"{type(self).__name__}({inner})"


class Type:
    """Base of every kind; ``id`` is the type's id in its BTF, ``name`` '' when anonymous.
    Types compare by identity."""

    __slots__ = ("id", "name")
    kind: ClassVar[Kind] = Kind.VOID

    def __init__(self, id: int, name: str) -> None:
        self.id = id
        self.name = name

    def __repr__(self) -> str:
        label = f" {self.name!r}" if self.name else ""
        return f"<{self.kind.name}{label} #{self.id}>"


# What a type parsed in full decodes its list from: a decoder of a position in the type
# section, and the type's position.
_Source: TypeAlias = tuple[Callable[[int], object], int]


class _Deferred(Type):
    """A kind whose list (a struct's members, a function prototype's params, an enum's values)
    a full parse of a large BTF leaves undecoded: ``_src`` then holds a decoder and the type's
    position in the type section (the checks a full parse makes are all done up front), and the
    list is decoded, and kept in its slot, the first time it is read. Types built any other way
    have the list from the start."""

    __slots__ = ("_src",)
    _deferred: ClassVar[str]  # the slot decoded on first use

    _src: _Source
    # A full parse makes these with :meth:`_maker`'s function (bpfkit.btf.spec._build_all):
    # one Python call per type that stores each slot (half the time of setting them through
    # their descriptors with one map each, which is a C call per slot and type).

    @classmethod
    def _maker(cls, decode: Callable[[int], object], flag: bool) -> Callable[[int, str, int, int], _Deferred]:
        """A function of (id, name, size or return type, position) making a type of this kind
        with its list left to ``decode`` (``flag``: the kind_flag of them all)."""
        raise NotImplementedError

    if not TYPE_CHECKING:  # mypy would take every missing attribute for one __getattr__ provides
        def __getattr__(self, attr: str) -> object:
            # Only reached when a slot is unset: the list of a type parsed in full, not read yet.
            if attr != self._deferred:
                raise AttributeError(f"{type(self).__name__!r} object has no attribute {attr!r}")
            try:
                decode, pos = self._src
            except AttributeError:  # decoded meanwhile by another thread (or never parsed)
                return object.__getattribute__(self, attr)
            value = decode(pos)
            setattr(self, attr, value)
            try:
                del self._src  # nothing left to decode (and copy.deepcopy/pickle need not see it)
            except AttributeError:  # another thread decoded it at the same time
                pass
            return value

    def __getstate__(self) -> object:
        getattr(self, self._deferred)  # the list decoded before copying or pickling
        return super().__getstate__()


class Void(Type):
    __slots__ = ()
    kind = Kind.VOID


class Int(Type):
    __slots__ = ("size", "encoding", "bit_offset", "bits")
    kind = Kind.INT

    def __init__(self, id: int, name: str, size: int = 0, encoding: IntEncoding = IntEncoding.NONE,
                 bit_offset: int = 0, bits: int = 0) -> None:
        self.id, self.name, self.size, self.encoding, self.bit_offset, self.bits = id, name, size, encoding, bit_offset, bits

    @property
    def signed(self) -> bool:
        return bool(self.encoding & IntEncoding.SIGNED)


class _Ref(Type):
    """A kind that is a name or qualifier for one other type."""

    __slots__ = ("type",)

    def __init__(self, id: int, name: str, type: int = 0) -> None:
        # One store per field (no tuple): a full parse of vmlinux makes 25k of these.
        self.id = id
        self.name = name
        self.type = type


class Pointer(_Ref):
    __slots__ = ()
    kind = Kind.PTR


class Typedef(_Ref):
    __slots__ = ()
    kind = Kind.TYPEDEF


class Volatile(_Ref):
    __slots__ = ()
    kind = Kind.VOLATILE


class Const(_Ref):
    __slots__ = ()
    kind = Kind.CONST


class Restrict(_Ref):
    __slots__ = ()
    kind = Kind.RESTRICT


class TypeTag(_Ref):
    __slots__ = ("kind_flag",)
    kind = Kind.TYPE_TAG

    def __init__(self, id: int, name: str, type: int = 0, kind_flag: bool = False) -> None:
        # kind_flag (6.14+): the tag is a C attribute (__attribute__((...))), not a name
        self.id, self.name, self.type, self.kind_flag = id, name, type, kind_flag


class Array(Type):
    __slots__ = ("type", "index_type", "nelems")
    kind = Kind.ARRAY

    def __init__(self, id: int, name: str, type: int = 0, index_type: int = 0, nelems: int = 0) -> None:
        self.id, self.name, self.type, self.index_type, self.nelems = id, name, type, index_type, nelems


class Member(_Record):
    """A struct/union member: ``bit_offset`` from the start of the struct; ``bitfield_size``
    is 0 unless the member is a bitfield (only with the struct's kind_flag set)."""

    __slots__ = ("name", "type", "bit_offset", "bitfield_size")

    def __init__(self, name: str, type: int, bit_offset: int, bitfield_size: int = 0) -> None:
        self.name, self.type, self.bit_offset, self.bitfield_size = name, type, bit_offset, bitfield_size

    @property
    def byte_offset(self) -> int:
        return self.bit_offset // 8


class _Sized(_Deferred):
    """A kind with a byte size, a list (a struct's members, an enum's values) and a meaning for
    the kind_flag bit (a struct's members carry bitfield sizes; an enum's values are signed)."""

    __slots__ = ("size", "kind_flag")
    size: int
    kind_flag: bool

    @classmethod
    def _maker(cls, decode: Callable[[int], object], flag: bool) -> Callable[[int, str, int, int], _Sized]:
        new = cls.__new__

        def make(id: int, name: str, size: int, pos: int) -> _Sized:
            t = new(cls)
            t.id = id
            t.name = name
            t.size = size
            t.kind_flag = flag
            t._src = (decode, pos)
            return t
        return make


class Struct(_Sized):
    __slots__ = ("members",)
    kind = Kind.STRUCT
    _deferred = "members"

    def __init__(self, id: int, name: str, size: int = 0, members: list[Member] | None = None,
                 kind_flag: bool = False) -> None:
        # kind_flag: members carry bitfield sizes
        self.id, self.name, self.size, self.kind_flag = id, name, size, kind_flag
        self.members = members if members is not None else []

    def member(self, name: str) -> Member | None:
        for m in self.members:
            if m.name == name:
                return m
        return None


class Union(Struct):
    __slots__ = ()
    kind = Kind.UNION


class EnumValue(_Record):
    __slots__ = ("name", "value")

    def __init__(self, name: str, value: int) -> None:
        self.name, self.value = name, value


class Enum(_Sized):
    __slots__ = ("values",)
    kind = Kind.ENUM
    _deferred = "values"

    def __init__(self, id: int, name: str, size: int = 4, values: list[EnumValue] | None = None,
                 signed: bool = False) -> None:
        self.id, self.name, self.size, self.kind_flag = id, name, size, signed
        self.values = values if values is not None else []

    @property
    def signed(self) -> bool:
        """The values are signed: the kind_flag (6.0+)."""
        return self.kind_flag

    @signed.setter
    def signed(self, value: bool) -> None:
        self.kind_flag = value


class Enum64(Enum):
    __slots__ = ()
    kind = Kind.ENUM64

    def __init__(self, id: int, name: str, size: int = 8, values: list[EnumValue] | None = None,
                 signed: bool = False) -> None:
        super().__init__(id, name, size, values, signed)


class Fwd(Type):
    __slots__ = ("union",)
    kind = Kind.FWD

    def __init__(self, id: int, name: str, union: bool = False) -> None:
        # union is the kind_flag: a forward declaration of a union, not a struct
        self.id, self.name, self.union = id, name, union


class Param(_Record):
    __slots__ = ("name", "type")

    def __init__(self, name: str, type: int) -> None:
        self.name, self.type = name, type


class Func(Type):
    __slots__ = ("type", "linkage")
    kind = Kind.FUNC

    def __init__(self, id: int, name: str, type: int = 0, linkage: Linkage = Linkage.STATIC) -> None:
        # type is a FuncProto. One store per field (no tuple): vmlinux has 56k FUNCs.
        self.id = id
        self.name = name
        self.type = type
        self.linkage = linkage


class FuncProto(_Deferred):
    __slots__ = ("return_type", "params")
    kind = Kind.FUNC_PROTO
    _deferred = "params"

    def __init__(self, id: int, name: str, return_type: int = 0, params: list[Param] | None = None) -> None:
        self.id, self.name, self.return_type = id, name, return_type
        self.params = params if params is not None else []

    @classmethod
    def _maker(cls, decode: Callable[[int], object], flag: bool) -> Callable[[int, str, int, int], FuncProto]:
        new = cls.__new__

        def make(id: int, name: str, return_type: int, pos: int) -> FuncProto:
            t = new(cls)
            t.id = id
            t.name = name
            t.return_type = return_type
            t._src = (decode, pos)
            return t
        return make


class Var(Type):
    __slots__ = ("type", "linkage")
    kind = Kind.VAR

    def __init__(self, id: int, name: str, type: int = 0, linkage: VarLinkage = VarLinkage.STATIC) -> None:
        self.id, self.name, self.type, self.linkage = id, name, type, linkage


class VarSecinfo(_Record):
    """A DATASEC entry: ``type`` is a Var (or a Func for .ksyms)."""

    __slots__ = ("type", "offset", "size")

    def __init__(self, type: int, offset: int, size: int) -> None:
        self.type, self.offset, self.size = type, offset, size


class Datasec(Type):
    __slots__ = ("size", "vars")
    kind = Kind.DATASEC

    def __init__(self, id: int, name: str, size: int = 0, vars: list[VarSecinfo] | None = None) -> None:
        self.id, self.name, self.size = id, name, size
        self.vars = vars if vars is not None else []


class Float(Type):
    __slots__ = ("size",)
    kind = Kind.FLOAT

    def __init__(self, id: int, name: str, size: int = 0) -> None:
        self.id, self.name, self.size = id, name, size


class DeclTag(Type):
    __slots__ = ("type", "component_idx", "kind_flag")
    kind = Kind.DECL_TAG

    def __init__(self, id: int, name: str, type: int = 0, component_idx: int = -1, kind_flag: bool = False) -> None:
        # component_idx -1: the tag applies to the type itself, else a member/param index;
        # kind_flag (6.14+): the tag is a C attribute
        self.id, self.name, self.type, self.component_idx, self.kind_flag = id, name, type, component_idx, kind_flag


KIND_CLASSES: dict[Kind, type[Type]] = {
    cls.kind: cls
    for cls in (Void, Int, Pointer, Array, Struct, Union, Enum, Fwd, Typedef, Volatile, Const,
                Restrict, Func, FuncProto, Var, Datasec, Float, DeclTag, TypeTag, Enum64)
}

# Kinds that only qualify or rename another type: skipped when resolving to the "real" type.
QUALIFIER_KINDS = frozenset({Kind.TYPEDEF, Kind.VOLATILE, Kind.CONST, Kind.RESTRICT, Kind.TYPE_TAG})
