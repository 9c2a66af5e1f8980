# SPDX-License-Identifier: Apache-2.0
"""A full BTF parse (BTF.from_bytes without lazy): types built kind by kind with every name
offset and type reference checked up front, members/params/enum values decoded on first use
(bpfkit.btf.spec._build_all, bpfkit.btf.types._Deferred). It must accept and reject exactly
what decoding type by type does (spec._decode_all, the parse before), with the same message,
and build the same types. Pure; the vmlinux test reads /sys/kernel/btf/vmlinux as a file."""

from __future__ import annotations

import copy
import os
import pickle
import random
import struct

import pytest

from bpfkit.btf import (
    BTF, Array, Const, Datasec, DeclTag, Enum, Enum64, EnumValue, Float, Func, FuncProto, Fwd,
    Int, IntEncoding, Linkage, Member, Param, Pointer, Restrict, Struct, Typedef, TypeTag, Union,
    Var, VarLinkage, VarSecinfo, Volatile,
)
from bpfkit.btf.spec import _decode_all
from bpfkit.errors import ParseError

VMLINUX = "/sys/kernel/btf/vmlinux"


def _every_kind() -> BTF:
    btf = BTF()
    u32 = btf.add(Int(0, "unsigned int", 4, IntEncoding.NONE, 0, 32))
    s64 = btf.add(Int(0, "long long", 8, IntEncoding.SIGNED, 0, 64))
    td = btf.add(Typedef(0, "__u32", u32))
    cv = btf.add(Const(0, "", btf.add(Volatile(0, "", td))))
    btf.add(Array(0, "", u32, u32, 4))
    ptr = btf.add(Pointer(0, "", 0))
    st = btf.add(Struct(0, "pair", 16, [Member("a", u32, 0), Member("b", s64, 64)]))
    btf.add(Struct(0, "bits", 4, [Member("x", u32, 0, 3), Member("", u32, 3, 29)], kind_flag=True))
    btf.add(Union(0, "either", 8, [Member("a", u32, 0), Member("b", s64, 0)]))
    btf.add(Struct(0, "empty", 0, []))
    btf.add(Enum(0, "color", 4, [EnumValue("RED", 0), EnumValue("NEG", -1)], signed=True))
    btf.add(Enum64(0, "big", 8, [EnumValue("HUGE", 1 << 40), EnumValue("LOW", -2)], signed=True))
    btf.add(Fwd(0, "later", union=True))
    proto = btf.add(FuncProto(0, "", s64, [Param("x", u32), Param("", ptr)]))
    btf.add(Func(0, "f", proto, Linkage.GLOBAL))
    btf.add(Func(0, "g", btf.add(FuncProto(0, "", 0, [])), Linkage.STATIC))
    var = btf.add(Var(0, "knob", cv, VarLinkage.GLOBAL))
    btf.add(Datasec(0, ".rodata", 4, [VarSecinfo(var, 0, 4)]))
    btf.add(Float(0, "double", 8))
    btf.add(DeclTag(0, "tag", st, 1))
    btf.add(TypeTag(0, "user", ptr))
    btf.add(Restrict(0, "", ptr))
    btf.add(Typedef(0, "pair_t", st))
    return btf


def _fields(t: object) -> list[object]:
    """A type's class and every field (its list decoded), for comparing two parses."""
    out: list[object] = [type(t)]
    for cls in type(t).__mro__:
        out += [(f, getattr(t, f)) for f in cls.__dict__.get("__slots__", ()) if f != "_src"]
    return out


def _outcome(parse):
    try:
        return [_fields(t) for t in parse()]
    except ParseError as e:
        return str(e)


def _one_by_one(blob: bytes) -> list[object]:
    """Own types as decoding them one by one in id order does (header and scan errors as a
    lazy parse reports them: the same checks)."""
    lazy = BTF.from_bytes(blob, lazy=True)
    assert lazy._words is not None and lazy._starts is not None
    return _decode_all(lazy._words, lazy._starts, lazy.first_id, lazy.strings)


def test_full_parse_builds_what_one_by_one_decoding_builds():
    blob = _every_kind().to_bytes()
    full = BTF.from_bytes(blob)
    assert [_fields(t) for t in full.types[1:]] == [_fields(t) for t in _one_by_one(blob)]
    assert full.to_bytes() == blob
    assert [v.value for v in full.lookup("big").values] == [1 << 40, -2]


def test_every_corrupted_word_is_reported_as_one_by_one_decoding_does():
    """Each word of the type section set to values that break a check (the first id past the
    last type, the string section's length, a FUNC info word with linkage 3, ...): a full
    parse raises the message decoding type by type raises, or builds the same types."""
    blob = _every_kind().to_bytes()
    hdr = struct.unpack_from("<HBBIIIII", blob)
    type_len, str_len = hdr[5], hdr[7]
    count = len(BTF.from_bytes(blob, lazy=True))
    values = [count, count - 1, str_len, str_len - 1, 1, 0, (12 << 24) | 3, (14 << 24), 0xFFFFFFFF]
    errors = 0
    for at in range(24, 24 + type_len, 4):
        for value in values:
            bad = bytearray(blob)
            struct.pack_into("<I", bad, at, value)
            got, want = _outcome(lambda: BTF.from_bytes(bytes(bad)).types[1:]), _outcome(lambda: _one_by_one(bytes(bad)))
            assert got == want, (at, value)
            errors += isinstance(got, str)
    assert errors > 100  # the corruptions do break checks


def test_of_several_bad_types_the_first_in_id_order_is_reported():
    blob = _every_kind().to_bytes()
    type_len = struct.unpack_from("<HBBIIIII", blob)[5]
    count = len(BTF.from_bytes(blob, lazy=True))
    rng = random.Random(22)
    for _ in range(300):
        bad = bytearray(blob)
        for at in rng.sample(range(24, 24 + type_len, 4), 2):
            struct.pack_into("<I", bad, at, rng.choice([count, count + 5, 0x7FFFFF, (12 << 24) | 7]))
        got, want = _outcome(lambda: BTF.from_bytes(bytes(bad)).types[1:]), _outcome(lambda: _one_by_one(bytes(bad)))
        assert got == want


def test_split_btf_full_parse_checks_against_the_base():
    base = BTF.from_bytes(_every_kind().to_bytes())
    split = BTF(base=base, name="mod")
    u32 = base.lookup("unsigned int").id
    split.add(Struct(0, "mod_thing", 8, [Member("a", u32, 0), Member("pair", base.lookup("pair").id, 32)]))
    split.add(FuncProto(0, "", u32, [Param("x", u32)]))
    blob = split.to_bytes()
    parsed = BTF.from_bytes(blob, base=base)
    thing = parsed.lookup("mod_thing")
    assert [(m.name, m.type) for m in thing.members] == [("a", u32), ("pair", base.lookup("pair").id)]
    assert parsed.to_bytes() == blob
    bad = bytearray(blob)
    struct.pack_into("<I", bad, 24 + 12 + 12 + 4, len(parsed.types))  # pair's type: one past the last
    with pytest.raises(ParseError, match=f"refers to type {len(parsed.types)}, which does not exist"):
        BTF.from_bytes(bytes(bad), base=base)


def test_lists_are_decoded_once_on_first_use_and_survive_copies():
    full = BTF.from_bytes(_every_kind().to_bytes())
    pair, proto, color = full.lookup("pair"), full.types[full.lookup("f").type], full.lookup("color")
    assert all(hasattr(t, "_src") for t in (pair, proto, color))  # not decoded yet
    clone = copy.deepcopy(pair)  # decodes first: the copy has its own members
    assert [m.name for m in clone.members] == ["a", "b"] and not hasattr(pair, "_src")
    assert pair.members is pair.members and pair.members == clone.members
    assert [p.name for p in pickle.loads(pickle.dumps(proto)).params] == ["x", ""]
    assert [v.name for v in color.values] == ["RED", "NEG"]
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        pair.nope  # noqa: B018
    pair.members = [Member("only", 1, 0)]  # assignable as before
    assert full.lookup("pair").members[0].name == "only"
    assert [t.name for t in full.copy().lookup("either").members] == ["a", "b"]


@pytest.mark.skipif(not os.path.exists(VMLINUX), reason="no kernel BTF")
def test_vmlinux_full_parse_agrees_with_one_by_one_decoding():
    data = open(VMLINUX, "rb").read()
    full = BTF.from_bytes(data, name="vmlinux")
    reference = _one_by_one(data)
    assert len(full.types) == len(reference) + 1
    assert all(_fields(a) == _fields(b) for a, b in zip(full.types[1:], reference))
