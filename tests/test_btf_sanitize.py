# SPDX-License-Identifier: Apache-2.0
"""BTF sanitising for older kernels (bpfkit.btf.sanitize): each kind a kernel lacks is
rewritten into an older one, type ids stay, and the result still marshals. Pure."""

from __future__ import annotations

import pytest

from bpfkit.btf import (
    BTF, Datasec, DeclTag, Enum, Enum64, EnumValue, Float, Func, FuncProto, Int, IntEncoding,
    Kind, Linkage, Member, Param, Struct, TypeTag, Union, Var, VarLinkage, VarSecinfo,
)
from bpfkit.btf.sanitize import needed_features, sanitize


def _object_btf() -> BTF:
    btf = BTF()
    i32 = btf.add(Int(0, "int", 4, IntEncoding.SIGNED, 0, 32))
    proto = btf.add(FuncProto(0, "", i32, [Param("ctx", i32)]))
    btf.add(Func(0, "prog", proto, Linkage.GLOBAL))
    btf.add(Func(0, "bpf_rcu_read_lock", proto, Linkage.EXTERN))
    var = btf.add(Var(0, "knob", i32, VarLinkage.GLOBAL))
    btf.add(Datasec(0, ".rodata", 4, [VarSecinfo(var, 0, 4)]))
    btf.add(Var(0, "CONFIG_HZ", i32, VarLinkage.EXTERN))
    btf.add(Float(0, "double", 8))
    st = btf.add(Struct(0, "s", 4, [Member("x", i32, 0)]))
    btf.add(DeclTag(0, "tag", st, 0))
    btf.add(TypeTag(0, "user", i32))
    btf.add(Enum64(0, "big", 8, [EnumValue("HUGE", 1 << 40)]))
    btf.add(Enum(0, "neg", 4, [EnumValue("M1", -1)], signed=True))
    return BTF.from_bytes(btf.to_bytes())


def test_new_kernel_needs_only_extern_linkage_fixed():
    btf = _object_btf()
    clean, done = sanitize(btf, lambda name: True)
    assert done == ["extern FUNC linkage -> global", "extern VAR linkage -> global"]
    assert clean.lookup("bpf_rcu_read_lock").linkage == Linkage.GLOBAL
    assert btf.lookup("bpf_rcu_read_lock").linkage == Linkage.EXTERN  # the original is untouched


def test_nothing_to_do_returns_the_same_object():
    btf = BTF()
    btf.add(Int(0, "int", 4, IntEncoding.SIGNED, 0, 32))
    assert sanitize(btf, lambda name: False) == (btf, [])


def test_needed_features_only_lists_kinds_present():
    assert needed_features(_object_btf()) == {
        "btf_func", "btf_func_global", "btf_datasec", "btf_float", "btf_decl_tag", "btf_type_tag", "btf_enum64"}


@pytest.mark.parametrize("missing, gone, becomes", [
    ("btf_float", Kind.FLOAT, Kind.STRUCT),
    ("btf_decl_tag", Kind.DECL_TAG, Kind.INT),
    ("btf_type_tag", Kind.TYPE_TAG, Kind.CONST),
    ("btf_enum64", Kind.ENUM64, Kind.UNION),
])
def test_single_kinds_are_replaced(missing, gone, becomes):
    btf = _object_btf()
    clean, done = sanitize(btf, lambda name: name != missing)
    (old,) = [t for t in btf.types if t.kind == gone]
    assert clean.types[old.id].kind == becomes
    assert not [t for t in clean.types if t.kind == gone]


def test_a_5_10_kernel():
    # 5.10 knows FUNC/VAR/DATASEC and global funcs, not FLOAT (5.13), DECL_TAG (5.16),
    # TYPE_TAG (5.17) or ENUM64 (6.0).
    btf = _object_btf()
    known = {"btf_func", "btf_func_global", "btf_datasec"}
    clean, done = sanitize(btf, known.__contains__)
    assert set(done) >= {"FLOAT -> STRUCT", "DECL_TAG -> INT", "TYPE_TAG -> CONST", "ENUM64 -> UNION",
                         "signed ENUM -> unsigned"}
    assert len(clean) == len(btf) + 1  # the enum64 placeholder int
    kinds = {t.kind for t in clean.types}
    assert not kinds & {Kind.FLOAT, Kind.DECL_TAG, Kind.TYPE_TAG, Kind.ENUM64}
    big = clean.types[btf.lookup("big").id]
    assert isinstance(big, Union) and big.size == 8 and [m.name for m in big.members] == ["HUGE"]
    assert clean.types[btf.lookup("user").id].kind == Kind.CONST
    assert not clean.lookup("neg").signed
    # Ids are kept: everything that pointed at a type still does.
    for t in btf.types:
        assert clean.types[t.id].id == t.id
    BTF.from_bytes(clean.to_bytes())  # and it marshals


def test_a_kernel_without_func_or_datasec():
    btf = _object_btf()
    clean, done = sanitize(btf, lambda name: False)
    prog = clean.types[btf.lookup("prog").id]
    assert prog.kind == Kind.TYPEDEF and prog.name == "prog"
    proto = clean.types[prog.type]
    assert proto.kind == Kind.ENUM and proto.size == 4 and len(proto.values) == 1
    rodata = clean.types[btf.lookup(".rodata").id]
    assert isinstance(rodata, Struct) and rodata.name == "_rodata" and rodata.members[0].name == "knob"
    assert clean.types[btf.lookup("knob").id].kind == Kind.INT
    BTF.from_bytes(clean.to_bytes())


def test_global_functions_become_static_before_5_6():
    clean, done = sanitize(_object_btf(), lambda name: name != "btf_func_global")
    assert clean.lookup("prog").linkage == Linkage.STATIC and "global FUNC -> static (x2)" in done
