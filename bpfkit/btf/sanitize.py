# SPDX-License-Identifier: Apache-2.0
"""Rewrite an object's BTF into what the running kernel's BTF loader accepts.

clang emits BTF kinds newer than many kernels; the kernel refuses a whole blob over one kind it
does not know, and then programs lose func/line info and maps their types. As libbpf does
(bpf_object__sanitize_btf), each kind the kernel lacks, as told by a feature probe, is replaced
by an older kind of the same size, keeping every type id (func_info, line_info and maps refer to
them):

=============================  =======  ===============================================
what                           since    replaced by
=============================  =======  ===============================================
FUNC, FUNC_PROTO               5.0      TYPEDEF, ENUM (vlen kept, 4 bytes)
global FUNC linkage            5.6      static linkage
VAR, DATASEC                   5.2      INT (1 byte), STRUCT (members at the var offsets)
FLOAT                          5.13     an anonymous empty STRUCT of the same size
DECL_TAG                       5.16     INT (1 byte)
TYPE_TAG                       5.17     CONST
ENUM64 (and signed ENUM)       6.0      UNION of 1-byte ints; ENUM's kind_flag cleared
=============================  =======  ===============================================

Independent of the kernel: extern FUNC/VAR linkage (left by ``__ksym``/``__kconfig``
declarations) becomes global, since no kernel accepts ``extern`` in a loaded blob.

Pure: the caller says which features the kernel has (``bpfkit.features.probe``).
"""

from __future__ import annotations

from collections.abc import Callable

from .spec import BTF
from .types import (
    Const,
    Datasec,
    DeclTag,
    Enum,
    Enum64,
    Float,
    Func,
    FuncProto,
    Int,
    IntEncoding,
    Linkage,
    Member,
    Struct,
    Typedef,
    TypeTag,
    Union,
    Var,
    VarLinkage,
)

TYPE_CHECKING = False
if TYPE_CHECKING:
    from .types import Type  # an annotation only

__all__ = ["sanitize", "FEATURES_BY_KIND", "needed_features"]

# Feature probe names (bpfkit.features) deciding each rewrite.
FEATURES_BY_KIND: dict[type, str] = {
    Func: "btf_func", FuncProto: "btf_func", Var: "btf_datasec", Datasec: "btf_datasec",
    Float: "btf_float", DeclTag: "btf_decl_tag", TypeTag: "btf_type_tag", Enum64: "btf_enum64",
}


def needed_features(btf: BTF) -> set[str]:
    """The feature probes whose answer matters for ``btf`` (only kinds it uses are probed)."""
    found: set[str] = set()
    for t in btf.types[btf.first_id:]:
        name = FEATURES_BY_KIND.get(type(t))
        if name is not None:
            found.add(name)
        if isinstance(t, Func) and t.linkage == Linkage.GLOBAL:
            found.add("btf_func_global")
        if isinstance(t, Datasec) and t.name.startswith("?"):
            found.add("btf_qmark_datasec")  # SEC("?.struct_ops") variables
        if type(t) is Enum and t.signed:
            found.add("btf_enum64")  # signed ENUMs (the kind_flag) came with ENUM64 in 6.0
    return found


def _int(type_id: int, size: int = 1) -> Int:
    return Int(type_id, "", size, IntEncoding.NONE, 0, size * 8)


def sanitize(btf: BTF, has: Callable[[str], bool]) -> tuple[BTF, list[str]]:
    """(the BTF to load, what was rewritten). ``has(feature)`` answers feature probes; the
    original is returned untouched when nothing needs rewriting."""
    features = {name: has(name) for name in needed_features(btf)}

    def ok(name: str) -> bool:
        return features.get(name, True)

    externs = any((isinstance(t, Var) and t.linkage == VarLinkage.EXTERN)
                  or (isinstance(t, Func) and t.linkage == Linkage.EXTERN) for t in btf.types[btf.first_id:])
    if all(features.values()) and not externs:
        return btf, []
    out = btf.copy()
    done: dict[str, int] = {}

    def note(what: str) -> None:
        done[what] = done.get(what, 0) + 1

    placeholder = 0
    types = out.types
    for i in range(out.first_id, len(types)):
        t = types[i]
        new: Type | None = None
        if isinstance(t, Var):
            if t.linkage == VarLinkage.EXTERN:
                t.linkage = VarLinkage.GLOBAL
                note("extern VAR linkage -> global")
            if not ok("btf_datasec"):
                new = _int(i)
                new.name = t.name  # as libbpf's in-place rewrite, which keeps name_off
                note("VAR -> INT")
        elif isinstance(t, Datasec):
            if not ok("btf_datasec"):
                members = [Member(btf.types[v.type].name, v.type, v.offset * 8) for v in t.vars]
                name = t.name.replace(".", "_").replace("?", "_")
                new = Struct(i, name, t.size, members)
                note("DATASEC -> STRUCT")
            elif t.name.startswith("?") and not ok("btf_qmark_datasec"):
                t.name = "_" + t.name[1:]  # as libbpf: the kernel refuses '?' in names before about 6.10
                note("DATASEC '?' name -> '_'")
        elif isinstance(t, FuncProto):
            if not ok("btf_func"):
                new = _proto_as_enum(i, t)
                note("FUNC_PROTO -> ENUM")
        elif isinstance(t, Func):
            if t.linkage == Linkage.EXTERN:
                t.linkage = Linkage.GLOBAL
                note("extern FUNC linkage -> global")
            if not ok("btf_func"):
                new = Typedef(i, t.name, t.type)
                note("FUNC -> TYPEDEF")
            elif t.linkage == Linkage.GLOBAL and not ok("btf_func_global"):
                t.linkage = Linkage.STATIC
                note("global FUNC -> static")
        elif isinstance(t, Float):
            if not ok("btf_float"):
                new = Struct(i, "", t.size, [])
                note("FLOAT -> STRUCT")
        elif isinstance(t, DeclTag):
            if not ok("btf_decl_tag"):
                new = _int(i)
                note("DECL_TAG -> INT")
        elif isinstance(t, TypeTag):
            if not ok("btf_type_tag"):
                new = Const(i, "", t.type)
                note("TYPE_TAG -> CONST")
        elif isinstance(t, Enum64):
            if not ok("btf_enum64"):
                if not placeholder:
                    placeholder = out.add(Int(0, "enum64_placeholder", 1, IntEncoding.NONE, 0, 8))
                new = Union(i, t.name, t.size, [Member(v.name, placeholder, 0) for v in t.values])
                note("ENUM64 -> UNION")
        elif isinstance(t, Enum) and t.signed and not ok("btf_enum64"):
            t.signed = False
            note("signed ENUM -> unsigned")
        if new is not None:
            types[i] = new
    out._by_name = out._by_essential = None
    return out, [f"{what} (x{count})" if count > 1 else what for what, count in done.items()]


def _proto_as_enum(type_id: int, proto: FuncProto) -> Enum:
    """An ENUM standing in for a FUNC_PROTO: same vlen (the params' name offsets survive as
    enumerator names, as in libbpf's in-place rewrite), 4 bytes."""
    from .types import EnumValue

    return Enum(type_id, "", 4, [EnumValue(p.name, 0) for p in proto.params])
