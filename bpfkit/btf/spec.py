"""BTF blobs: parse the kernel's binary format into types, look types up, marshal them back.

Layout (include/uapi/linux/btf.h): a 24-byte ``struct btf_header``, then the type section (a
sequence of ``struct btf_type`` each followed by kind-specific data) and the string section
(NUL-separated names, offset 0 is ""). Type id 0 is ``void``; ids count from 1 in section
order. Split BTF (kernel modules) continues the id and string-offset space of a base BTF.
"""

from __future__ import annotations

import struct
from typing import Iterator

from ..errors import NotFoundError, ParseError
from .types import (
    QUALIFIER_KINDS, Array, Const, Datasec, DeclTag, Enum, Enum64, EnumValue, Float, Func,
    FuncProto, Fwd, Int, IntEncoding, Kind, Linkage, Member, Param, Pointer, Restrict, Struct,
    Type, Typedef, TypeTag, Union, Var, VarLinkage, VarSecinfo, Void, Volatile,
)

__all__ = ["BTF", "StringTable", "BTF_MAGIC", "scan_type_id"]

BTF_MAGIC = 0xEB9F
_HEADER = struct.Struct("<HBBIIIII")
_TYPE = struct.Struct("<III")
_U32 = struct.Struct("<I")
_I32 = struct.Struct("<i")
_U32x2 = struct.Struct("<II")
_U32x3 = struct.Struct("<III")
_MAX_RESOLVE_DEPTH = 32


class StringTable:
    """BTF's string section. Offsets of existing strings never change (line info and
    .BTF.ext refer to them); :meth:`add` appends new strings."""

    def __init__(self, data: bytes = b"\0", base: "StringTable | None" = None) -> None:
        if not data:
            data = b"\0"
        if data[-1:] != b"\0":
            raise ParseError("BTF string section is not NUL-terminated")
        if base is None and data[:1] != b"\0":
            raise ParseError("BTF string section does not start with the empty string")
        self.base = base
        self._start = len(base) if base is not None else 0
        self._data = bytearray(data)
        self._index: dict[str, int] | None = None

    def __len__(self) -> int:
        return self._start + len(self._data)

    def offsets(self) -> dict[int, str]:
        """{offset: string} for every string that starts after a NUL (what names point at)."""
        table: dict[int, str] = {}
        pos = self._start
        for piece in bytes(self._data).split(b"\0"):
            table[pos] = piece.decode("utf-8", errors="replace")
            pos += len(piece) + 1
        return table

    def get(self, offset: int) -> str:
        if offset < self._start:
            assert self.base is not None
            return self.base.get(offset)
        local = offset - self._start
        if local >= len(self._data):
            raise ParseError(f"BTF string offset {offset} is past the string section ({len(self)} bytes)")
        end = self._data.index(0, local)
        return self._data[local:end].decode("utf-8", errors="replace")

    def _lookup(self, text: str) -> int | None:
        if self._index is None:
            index: dict[str, int] = {}
            pos = self._start
            for piece in bytes(self._data).split(b"\0"):
                index.setdefault(piece.decode("utf-8", errors="replace"), pos)
                pos += len(piece) + 1
            self._index = index
        return self._index.get(text)

    def add(self, text: str) -> int:
        """The offset of ``text``, appending it when it is not there yet."""
        if not text:
            return 0
        if self.base is not None:
            found = self.base._lookup(text)
            if found is not None:
                return found
        found = self._lookup(text)
        if found is not None:
            return found
        offset = len(self)
        self._data += text.encode() + b"\0"
        assert self._index is not None
        self._index[text] = offset
        return offset

    def to_bytes(self) -> bytes:
        return bytes(self._data)


class BTF:
    """A set of BTF types and their strings.

    ``types[i]`` is the type with id ``i`` (``types[0]`` is void). For split BTF the list
    starts with the base's types, and only the types from ``first_id`` on belong to this blob.
    """

    def __init__(self, types: list[Type] | None = None, strings: StringTable | None = None,
                 base: "BTF | None" = None) -> None:
        self.base = base
        self.strings = strings or StringTable(base=base.strings if base else None)
        self.first_id = len(base.types) if base is not None else 1
        if types is None:
            types = list(base.types) if base is not None else [Void(0, "")]
        self.types = types
        self._by_name: dict[str, list[Type]] | None = None

    # ------------------------------------------------------------------------- parsing
    @classmethod
    def from_bytes(cls, data: bytes | memoryview, base: "BTF | None" = None) -> "BTF":
        """Parse a .BTF section or /sys/kernel/btf/* blob (``base`` for module BTF)."""
        data = bytes(data)
        if len(data) < _HEADER.size:
            raise ParseError(f"BTF is {len(data)} bytes, shorter than its {_HEADER.size}-byte header")
        magic, version, _flags, hdr_len, type_off, type_len, str_off, str_len = _HEADER.unpack_from(data)
        if magic != BTF_MAGIC:
            if magic == 0x9FEB:
                raise ParseError("BTF is big-endian: bpfkit reads little-endian BTF")
            raise ParseError(f"bad BTF magic {magic:#06x} (expected {BTF_MAGIC:#06x})")
        if version != 1:
            raise ParseError(f"BTF version {version} is not supported (only 1)")
        if hdr_len < _HEADER.size or hdr_len > len(data):
            raise ParseError(f"BTF header length {hdr_len} is invalid")
        body = len(data) - hdr_len
        if type_off + type_len > body or str_off + str_len > body:
            raise ParseError(
                f"BTF sections (types {type_off}+{type_len}, strings {str_off}+{str_len}) run past the end ({body} bytes)"
            )
        strings_raw = data[hdr_len + str_off : hdr_len + str_off + str_len]
        strings = StringTable(strings_raw, base.strings if base is not None else None)
        btf = cls(strings=strings, base=base)
        btf._parse_types(data, hdr_len + type_off, hdr_len + type_off + type_len)
        return btf

    def _parse_types(self, data: bytes, pos: int, end: int) -> None:
        types = self.types
        known = self.strings.offsets()
        slow = self.strings.get

        def name_of(off: int) -> str:
            text = known.get(off)
            return text if text is not None else slow(off)
        next_id = len(types)
        unpack_type, unpack3, unpack2, unpack1 = _TYPE.unpack_from, _U32x3.unpack_from, _U32x2.unpack_from, _U32.unpack_from
        iter3, iter2 = _U32x3.iter_unpack, _U32x2.iter_unpack

        def need(count: int, what: str) -> None:
            if pos + count > end:
                raise ParseError(f"BTF type {next_id} ({what}) is truncated at offset {pos}")

        while pos < end:
            need(12, "header")
            name_off, info, size_type = unpack_type(data, pos)
            pos += 12
            vlen = info & 0xFFFF
            kind = (info >> 24) & 0x1F
            kflag = bool(info >> 31)
            name = name_of(name_off) if name_off else ""
            tid = next_id
            t: Type
            if kind == Kind.INT:
                need(4, "int")
                (raw,) = unpack1(data, pos)
                pos += 4
                t = Int(tid, name, size_type, IntEncoding((raw >> 24) & 0xF), (raw >> 16) & 0xFF, raw & 0xFF)
            elif kind == Kind.PTR:
                t = Pointer(tid, name, size_type)
            elif kind == Kind.ARRAY:
                need(12, "array")
                elem, index, nelems = unpack3(data, pos)
                pos += 12
                t = Array(tid, name, elem, index, nelems)
            elif kind in (Kind.STRUCT, Kind.UNION):
                need(12 * vlen, "members")
                chunk = data[pos : pos + 12 * vlen]
                if kflag:
                    members = [Member(name_of(mn) if mn else "", mt, mo & 0xFFFFFF, mo >> 24)
                               for mn, mt, mo in iter3(chunk)]
                else:
                    members = [Member(name_of(mn) if mn else "", mt, mo) for mn, mt, mo in iter3(chunk)]
                pos += 12 * vlen
                t = (Struct if kind == Kind.STRUCT else Union)(tid, name, size_type, members, kflag)
            elif kind == Kind.ENUM:
                need(8 * vlen, "enum values")
                values = []
                for i in range(vlen):
                    v_name, v_val = unpack2(data, pos + 8 * i)
                    if kflag and v_val >= 1 << 31:
                        v_val -= 1 << 32
                    values.append(EnumValue(name_of(v_name), v_val))
                pos += 8 * vlen
                t = Enum(tid, name, size_type, values, kflag)
            elif kind == Kind.ENUM64:
                need(12 * vlen, "enum64 values")
                values = []
                for i in range(vlen):
                    v_name, lo, hi = unpack3(data, pos + 12 * i)
                    v_val = (hi << 32) | lo
                    if kflag and v_val >= 1 << 63:
                        v_val -= 1 << 64
                    values.append(EnumValue(name_of(v_name), v_val))
                pos += 12 * vlen
                t = Enum64(tid, name, size_type, values, kflag)
            elif kind == Kind.FWD:
                t = Fwd(tid, name, kflag)
            elif kind == Kind.TYPEDEF:
                t = Typedef(tid, name, size_type)
            elif kind == Kind.VOLATILE:
                t = Volatile(tid, name, size_type)
            elif kind == Kind.CONST:
                t = Const(tid, name, size_type)
            elif kind == Kind.RESTRICT:
                t = Restrict(tid, name, size_type)
            elif kind == Kind.TYPE_TAG:
                t = TypeTag(tid, name, size_type, kflag)
            elif kind == Kind.FUNC:
                try:
                    linkage = Linkage(vlen)
                except ValueError:
                    raise ParseError(f"BTF FUNC {name!r} (type {tid}) has unknown linkage {vlen}") from None
                t = Func(tid, name, size_type, linkage)
            elif kind == Kind.FUNC_PROTO:
                need(8 * vlen, "params")
                params = [Param(name_of(pn) if pn else "", pt) for pn, pt in iter2(data[pos : pos + 8 * vlen])]
                pos += 8 * vlen
                t = FuncProto(tid, name, size_type, params)
            elif kind == Kind.VAR:
                need(4, "var")
                (linkage_raw,) = unpack1(data, pos)
                pos += 4
                try:
                    var_linkage = VarLinkage(linkage_raw)
                except ValueError:
                    raise ParseError(f"BTF VAR {name!r} (type {tid}) has unknown linkage {linkage_raw}") from None
                t = Var(tid, name, size_type, var_linkage)
            elif kind == Kind.DATASEC:
                need(12 * vlen, "datasec entries")
                secinfos = [VarSecinfo(*unpack3(data, pos + 12 * i)) for i in range(vlen)]
                pos += 12 * vlen
                t = Datasec(tid, name, size_type, secinfos)
            elif kind == Kind.FLOAT:
                t = Float(tid, name, size_type)
            elif kind == Kind.DECL_TAG:
                need(4, "decl tag")
                (component,) = _I32.unpack_from(data, pos)
                pos += 4
                t = DeclTag(tid, name, size_type, component, kflag)
            else:
                raise ParseError(f"BTF type {tid} has unknown kind {kind}")
            types.append(t)
            next_id += 1
        if pos != end:
            raise ParseError("BTF type section ends inside a type")
        self._check_references()

    def _check_references(self) -> None:
        count = len(self.types)
        for t in self.types[self.first_id:]:
            ref = getattr(t, "type", 0)
            if type(ref) is int and ref < count and not isinstance(t, (Struct, FuncProto, Datasec, Array)):
                continue  # the common one-reference kinds, checked without a generator
            for ref in _references(t):
                if not 0 <= ref < count:
                    raise ParseError(f"BTF type {t.id} ({t.kind.name} {t.name!r}) refers to type {ref}, which does not exist")

    # ------------------------------------------------------------------------- marshal
    def to_bytes(self) -> bytes:
        """The kernel's binary format of this BTF (only the split part for split BTF)."""
        add = self.strings.add
        out = bytearray()
        pack_type, pack1, pack2, pack3 = _TYPE.pack, _U32.pack, _U32x2.pack, _U32x3.pack
        for t in self.types[self.first_id:]:
            kind = t.kind
            name_off = add(t.name)
            if isinstance(t, Int):
                out += pack_type(name_off, kind << 24, t.size)
                out += pack1((int(t.encoding) << 24) | (t.bit_offset << 16) | t.bits)
            elif isinstance(t, TypeTag):
                out += pack_type(name_off, (t.kind_flag << 31) | (kind << 24), t.type)
            elif isinstance(t, (Pointer, Typedef, Volatile, Const, Restrict)):
                out += pack_type(name_off, kind << 24, t.type)
            elif isinstance(t, Array):
                out += pack_type(name_off, kind << 24, 0) + pack3(t.type, t.index_type, t.nelems)
            elif isinstance(t, Struct):
                out += pack_type(name_off, (t.kind_flag << 31) | (kind << 24) | len(t.members), t.size)
                for m in t.members:
                    off = (m.bitfield_size << 24) | m.bit_offset if t.kind_flag else m.bit_offset
                    out += pack3(add(m.name), m.type, off)
            elif isinstance(t, Enum64):
                out += pack_type(name_off, (t.signed << 31) | (kind << 24) | len(t.values), t.size)
                for v in t.values:
                    raw = v.value & 0xFFFFFFFFFFFFFFFF
                    out += pack3(add(v.name), raw & 0xFFFFFFFF, raw >> 32)
            elif isinstance(t, Enum):
                out += pack_type(name_off, (t.signed << 31) | (kind << 24) | len(t.values), t.size)
                for v in t.values:
                    out += pack2(add(v.name), v.value & 0xFFFFFFFF)
            elif isinstance(t, Fwd):
                out += pack_type(name_off, (t.union << 31) | (kind << 24), 0)
            elif isinstance(t, Func):
                out += pack_type(name_off, (kind << 24) | int(t.linkage), t.type)
            elif isinstance(t, FuncProto):
                out += pack_type(name_off, (kind << 24) | len(t.params), t.return_type)
                for p in t.params:
                    out += pack2(add(p.name), p.type)
            elif isinstance(t, Var):
                out += pack_type(name_off, kind << 24, t.type) + pack1(int(t.linkage))
            elif isinstance(t, Datasec):
                out += pack_type(name_off, (kind << 24) | len(t.vars), t.size)
                for v in t.vars:
                    out += pack3(v.type, v.offset, v.size)
            elif isinstance(t, Float):
                out += pack_type(name_off, kind << 24, t.size)
            elif isinstance(t, DeclTag):
                out += pack_type(name_off, (t.kind_flag << 31) | (kind << 24), t.type) + _I32.pack(t.component_idx)
            else:  # pragma: no cover - every kind is handled above
                raise ParseError(f"cannot marshal BTF kind {kind.name}")
        strings = self.strings.to_bytes()
        header = _HEADER.pack(BTF_MAGIC, 1, 0, _HEADER.size, 0, len(out), len(out), len(strings))
        return header + bytes(out) + strings

    # -------------------------------------------------------------------------- lookup
    def __len__(self) -> int:
        return len(self.types)

    def __iter__(self) -> Iterator[Type]:
        return iter(self.types)

    def type_by_id(self, type_id: int) -> Type:
        if not 0 <= type_id < len(self.types):
            raise NotFoundError(f"BTF has no type with id {type_id} ({len(self.types)} types)")
        return self.types[type_id]

    __getitem__ = type_by_id

    def add(self, t: Type) -> int:
        """Append ``t`` (its ``id`` is set) and return the new id."""
        t.id = len(self.types)
        self.types.append(t)
        if self._by_name is not None and t.name:
            self._by_name.setdefault(t.name, []).append(t)
        return t.id

    def find(self, name: str, kind: Kind | None = None) -> list[Type]:
        """Every type called ``name`` (of ``kind`` when given), in id order."""
        if self._by_name is None:
            index: dict[str, list[Type]] = {}
            for t in self.types:
                if t.name:
                    index.setdefault(t.name, []).append(t)
            self._by_name = index
        found = self._by_name.get(name, [])
        return [t for t in found if kind is None or t.kind == kind]

    def lookup(self, name: str, kind: Kind | None = None) -> Type:
        """The one type called ``name`` (of ``kind``); NotFoundError when there is none."""
        found = self.find(name, kind)
        if not found:
            what = f"{kind.name} " if kind is not None else ""
            raise NotFoundError(f"BTF has no {what}type named {name!r}")
        return found[0]

    def resolve(self, type_id: int) -> Type:
        """The type behind typedefs and const/volatile/restrict/type-tag qualifiers."""
        t = self.type_by_id(type_id)
        for _ in range(_MAX_RESOLVE_DEPTH):
            if t.kind not in QUALIFIER_KINDS:
                return t
            t = self.type_by_id(t.type)  # type: ignore[attr-defined]
        raise ParseError(f"BTF type {type_id}: qualifier chain longer than {_MAX_RESOLVE_DEPTH}")

    def size_of(self, type_id: int) -> int:
        """sizeof() of a type, following typedefs, qualifiers and arrays."""
        t = self.type_by_id(type_id)
        nelems = 1
        for _ in range(_MAX_RESOLVE_DEPTH):
            if isinstance(t, (Int, Struct, Enum, Datasec, Float)):
                return nelems * t.size
            if isinstance(t, Pointer):
                return nelems * 8
            if isinstance(t, Var):
                t = self.type_by_id(t.type)
            elif isinstance(t, Array):
                nelems *= t.nelems
                t = self.type_by_id(t.type)
            elif t.kind in QUALIFIER_KINDS:
                t = self.type_by_id(t.type)  # type: ignore[attr-defined]
            else:
                raise ParseError(f"BTF type {type_id} ({t.kind.name} {t.name!r}) has no size")
        raise ParseError(f"BTF type {type_id}: type chain longer than {_MAX_RESOLVE_DEPTH}")

    def align_of(self, type_id: int) -> int:
        """Natural alignment of a type (as the compiler laid it out for the BPF target)."""
        t = self.resolve(type_id)
        if isinstance(t, (Int, Enum, Float)):
            return min(t.size, 8) or 1
        if isinstance(t, Pointer):
            return 8
        if isinstance(t, Array):
            return self.align_of(t.type)
        if isinstance(t, Struct):
            return max((self.align_of(m.type) for m in t.members if not m.bitfield_size), default=1)
        return 1

    def type_name(self, type_id: int) -> str:
        """A C-like spelling of a type, for people: ``const volatile __u32``, ``char[4]``."""
        return _c_name(self, type_id, 0)

    def copy(self) -> "BTF":
        """An independent copy (types are copied; the base, if any, is shared)."""
        import copy as _copy

        clone = BTF(strings=StringTable(self.strings.to_bytes(), self.strings.base), base=self.base)
        clone.types = list(self.types[: self.first_id]) + [_copy.deepcopy(t) for t in self.types[self.first_id:]]
        return clone


# Bytes that follow struct btf_type, per kind: (fixed, per vlen entry).
_EXTRA = {
    Kind.INT: (4, 0), Kind.ARRAY: (12, 0), Kind.STRUCT: (0, 12), Kind.UNION: (0, 12),
    Kind.ENUM: (0, 8), Kind.FUNC_PROTO: (0, 8), Kind.VAR: (4, 0), Kind.DATASEC: (0, 12),
    Kind.DECL_TAG: (4, 0), Kind.ENUM64: (0, 12),
}


def scan_type_id(data: bytes | memoryview, name: str, kind: Kind, first_id: int = 1) -> int:
    """The id of the first ``kind`` type called ``name`` in a BTF blob, 0 if none, without
    building the type objects: walking the 5 MB vmlinux blob this way takes a fraction of a
    full parse. ``first_id`` is the blob's first id (the base's type count for split BTF)."""
    data = bytes(data)
    if len(data) < _HEADER.size:
        raise ParseError("BTF blob is shorter than its header")
    magic, _, _, hdr_len, type_off, type_len, str_off, str_len = _HEADER.unpack_from(data)
    if magic != BTF_MAGIC:
        raise ParseError(f"bad BTF magic {magic:#06x}")
    strings = data[hdr_len + str_off : hdr_len + str_off + str_len]
    needle = b"\0" + name.encode() + b"\0"
    offsets = set()
    at = strings.find(needle)
    while at >= 0:
        offsets.add(at + 1)
        at = strings.find(needle, at + 1)
    if not offsets:
        return 0
    pos, end = hdr_len + type_off, hdr_len + type_off + type_len
    unpack, extra, want = _U32x2.unpack_from, _EXTRA, int(kind)
    tid = first_id
    while pos + 12 <= end:
        name_off, info = unpack(data, pos)
        k = (info >> 24) & 0x1F
        if k == want and name_off in offsets:
            return tid
        fixed, per = extra.get(k, (0, 0))  # type: ignore[call-overload]
        pos += 12 + fixed + per * (info & 0xFFFF)
        tid += 1
    return 0


def _references(t: Type) -> Iterator[int]:
    """Type ids ``t`` refers to."""
    if isinstance(t, (Pointer, Typedef, Volatile, Const, Restrict, TypeTag, Func, Var, DeclTag)):
        yield t.type
    elif isinstance(t, Array):
        yield t.type
        yield t.index_type
    elif isinstance(t, Struct):
        for m in t.members:
            yield m.type
    elif isinstance(t, FuncProto):
        yield t.return_type
        for p in t.params:
            yield p.type
    elif isinstance(t, Datasec):
        for v in t.vars:
            yield v.type


def _c_name(btf: BTF, type_id: int, depth: int) -> str:
    if depth > _MAX_RESOLVE_DEPTH:
        return "..."
    t = btf.types[type_id] if 0 <= type_id < len(btf.types) else None
    if t is None or isinstance(t, Void):
        return "void"
    if isinstance(t, (Struct, Fwd, Enum)):
        if isinstance(t, Fwd):
            word = "union" if t.union else "struct"
        else:
            word = {Kind.STRUCT: "struct", Kind.UNION: "union"}.get(t.kind, "enum")
        return f"{word} {t.name or '(anon)'}"
    if isinstance(t, Const):
        return "const " + _c_name(btf, t.type, depth + 1)
    if isinstance(t, Volatile):
        return "volatile " + _c_name(btf, t.type, depth + 1)
    if isinstance(t, Restrict):
        return _c_name(btf, t.type, depth + 1) + " restrict"
    if isinstance(t, Pointer):
        return _c_name(btf, t.type, depth + 1) + " *"
    if isinstance(t, Array):
        return f"{_c_name(btf, t.type, depth + 1)}[{t.nelems}]"
    if isinstance(t, (Var, TypeTag)):
        return _c_name(btf, t.type, depth + 1)
    if isinstance(t, FuncProto):
        params = ", ".join(_c_name(btf, p.type, depth + 1) for p in t.params)
        return f"{_c_name(btf, t.return_type, depth + 1)} (*)({params})"
    return t.name or t.kind.name.lower()
