# SPDX-License-Identifier: Apache-2.0
"""BTF parsing, lookup and marshalling (bpfkit.btf): pure, no kernel needed."""

from __future__ import annotations

import os
import struct

import pytest

from bpfkit.btf import (
    BTF, BTFExt, Array, Const, Datasec, Enum, Enum64, EnumValue, Float, Func, FuncProto, Int,
    IntEncoding, Kind, Linkage, Member, Param, Pointer, Struct, Typedef, Union, Var, VarLinkage,
    VarSecinfo, Volatile, DeclTag, TypeTag, Fwd, Restrict,
)
from bpfkit.elf import ElfFile
from bpfkit.errors import NotFoundError, ParseError


def object_btf(path) -> tuple[BTF, ElfFile]:
    elf = ElfFile(open(path, "rb").read())
    return BTF.from_bytes(elf.by_name[".BTF"].data), elf


def test_round_trip_of_compiled_object(bpf_obj):
    btf, elf = object_btf(bpf_obj("loader_basic"))
    raw = bytes(elf.by_name[".BTF"].data)
    assert btf.to_bytes() == raw
    again = BTF.from_bytes(btf.to_bytes())
    assert [repr(t) for t in again.types] == [repr(t) for t in btf.types]


@pytest.mark.skipif(not os.path.exists("/sys/kernel/btf/vmlinux"), reason="no kernel BTF")
def test_vmlinux_round_trip_and_lookup():
    data = open("/sys/kernel/btf/vmlinux", "rb").read()
    btf = BTF.from_bytes(data)
    assert btf.to_bytes() == data  # every kind, including kind_flag bits, survives
    task = btf.lookup("task_struct", Kind.STRUCT)
    assert isinstance(task, Struct) and task.size > 1000
    pid = task.member("pid")
    assert pid is not None and btf.size_of(pid.type) == 4
    assert btf.type_name(pid.type) == "pid_t"
    assert isinstance(btf.resolve(pid.type), Int)
    kinds = {t.kind for t in btf.types}
    assert {Kind.STRUCT, Kind.UNION, Kind.ENUM, Kind.FUNC, Kind.FUNC_PROTO, Kind.TYPEDEF, Kind.PTR} <= kinds


def _build() -> BTF:
    btf = BTF()
    u32 = btf.add(Int(0, "unsigned int", 4, IntEncoding.NONE, 0, 32))
    s64 = btf.add(Int(0, "long long", 8, IntEncoding.SIGNED, 0, 64))
    td = btf.add(Typedef(0, "__u32", u32))
    cv = btf.add(Const(0, "", btf.add(Volatile(0, "", td))))
    arr = btf.add(Array(0, "", u32, u32, 4))
    ptr = btf.add(Pointer(0, "", 0))
    st = btf.add(Struct(0, "pair", 16, [Member("a", u32, 0), Member("b", s64, 64)]))
    bits = btf.add(Struct(0, "bits", 4, [Member("x", u32, 0, 3), Member("y", u32, 3, 29)], kind_flag=True))
    un = btf.add(Union(0, "either", 8, [Member("a", u32, 0), Member("b", s64, 0)]))
    en = btf.add(Enum(0, "color", 4, [EnumValue("RED", 0), EnumValue("NEG", -1)], signed=True))
    en64 = btf.add(Enum64(0, "big", 8, [EnumValue("HUGE", 1 << 40)]))
    fwd = btf.add(Fwd(0, "later", union=True))
    proto = btf.add(FuncProto(0, "", s64, [Param("x", u32), Param("", ptr)]))
    fn = btf.add(Func(0, "f", proto, Linkage.GLOBAL))
    var = btf.add(Var(0, "knob", cv, VarLinkage.GLOBAL))
    btf.add(Datasec(0, ".rodata", 4, [VarSecinfo(var, 0, 4)]))
    btf.add(Float(0, "double", 8))
    btf.add(DeclTag(0, "tag", st, 1))
    btf.add(TypeTag(0, "user", ptr))
    btf.add(Restrict(0, "", ptr))
    return btf


def test_every_kind_marshals_and_parses_back():
    btf = _build()
    parsed = BTF.from_bytes(btf.to_bytes())
    assert len(parsed) == len(btf)
    for a, b in zip(btf.types, parsed.types):
        assert type(a) is type(b) and a.name == b.name
    bits = parsed.lookup("bits", Kind.STRUCT)
    assert [(m.bit_offset, m.bitfield_size) for m in bits.members] == [(0, 3), (3, 29)]
    color = parsed.lookup("color")
    assert [v.value for v in color.values] == [0, -1]
    assert parsed.lookup("big").values[0].value == 1 << 40
    assert parsed.lookup("later").union
    assert parsed.lookup("tag").component_idx == 1
    assert parsed.size_of(parsed.lookup("pair").id) == 16
    assert parsed.size_of(parsed.lookup("knob").id) == 4
    assert parsed.type_name(parsed.lookup("knob").id) == "const volatile __u32"
    assert parsed.align_of(parsed.lookup("pair").id) == 8
    assert parsed.find("nope") == []
    with pytest.raises(NotFoundError, match="no STRUCT type named 'color'"):
        parsed.lookup("color", Kind.STRUCT)


def test_string_offsets_are_stable_when_strings_are_added():
    btf = _build()
    blob = btf.to_bytes()
    parsed = BTF.from_bytes(blob)
    before = parsed.strings.to_bytes()
    parsed.add(Int(0, "brand_new", 4, IntEncoding.NONE, 0, 32))
    after = parsed.strings.to_bytes()
    assert after.startswith(before)
    assert BTF.from_bytes(parsed.to_bytes()).lookup("brand_new").size == 4


def test_split_btf_continues_ids_and_strings():
    base = BTF.from_bytes(_build().to_bytes())
    split = BTF(base=base)
    u32 = base.lookup("unsigned int").id
    new_id = split.add(Pointer(0, "", u32))
    assert new_id == len(base.types)
    blob = split.to_bytes()
    again = BTF.from_bytes(blob, base=base)
    assert again.type_by_id(new_id).type == u32
    assert again.first_id == len(base.types)


@pytest.mark.parametrize(
    "mutate, message",
    [
        (lambda b: b[:10], "shorter than its 24-byte header"),
        (lambda b: b"\x00\x00" + b[2:], "bad BTF magic"),
        (lambda b: b"\xeb\x9f" + b[2:], "big-endian"),
        (lambda b: b[:2] + b"\x02" + b[3:], "version 2"),
        (lambda b: b[:-8], "run past the end"),
    ],
)
def test_malformed_btf(mutate, message):
    blob = bytearray(_build().to_bytes())
    with pytest.raises(ParseError, match=message):
        BTF.from_bytes(bytes(mutate(bytes(blob))))


def test_unknown_kind_and_bad_reference():
    blob = bytearray(_build().to_bytes())
    hdr = 24
    # First type: INT; make its kind 31.
    struct.pack_into("<I", blob, hdr + 4, 31 << 24)
    with pytest.raises(ParseError, match="unknown kind 31"):
        BTF.from_bytes(bytes(blob))
    btf = BTF()
    btf.add(Pointer(0, "", 42))
    with pytest.raises(ParseError, match="refers to type 42"):
        BTF.from_bytes(btf.to_bytes())


def test_btf_ext_func_and_line_info(bpf_obj):
    btf, elf = object_btf(bpf_obj("loader_calls"))
    ext = BTFExt.from_bytes(elf.by_name[".BTF.ext"].data, btf)
    assert set(ext.func_info) >= {"xdp", ".text"}
    funcs = {btf.type_by_id(rec[1]).name for rec in ext.func_info[".text"].records}
    assert {"square", "sum_of_squares", "global_add", "loop_cb", "elem_cb"} <= funcs
    assert ext.line_info["xdp"].rec_size == 16
    assert all(rec[0] % 8 == 0 for rec in ext.line_info["xdp"].records)
    assert ext.core_relos == {}


def test_btf_ext_core_relocations(bpf_obj):
    btf, elf = object_btf(bpf_obj("loader_core"))
    ext = BTFExt.from_bytes(elf.by_name[".BTF.ext"].data, btf)
    relos = [r for rs in ext.core_relos.values() for r in rs]
    assert relos and relos[0].kind_name == "field_byte_offset"
    assert btf.type_by_id(relos[0].type_id).name == "task_struct"
    assert relos[0].access.startswith("0:")


def test_btf_ext_malformed(bpf_obj):
    btf, elf = object_btf(bpf_obj("loader_calls"))
    raw = bytearray(elf.by_name[".BTF.ext"].data)
    with pytest.raises(ParseError, match="bad magic"):
        BTFExt.from_bytes(b"\0\0" + bytes(raw[2:]), btf)
    with pytest.raises(ParseError):
        BTFExt.from_bytes(bytes(raw[: len(raw) // 2]), btf)
    bad = bytearray(raw)
    hdr_len = struct.unpack_from("<I", bad, 4)[0]
    fi_off = struct.unpack_from("<I", bad, 8)[0]
    struct.pack_into("<I", bad, hdr_len + fi_off, 3)  # func_info record size 3
    with pytest.raises(ParseError, match="record size 3"):
        BTFExt.from_bytes(bytes(bad), btf)


def test_scan_type_id_matches_full_parse(bpf_obj):
    from bpfkit.btf.spec import scan_type_id

    btf, elf = object_btf(bpf_obj("loader_calls"))
    raw = bytes(elf.by_name[".BTF"].data)
    for name, kind in (("global_add", Kind.FUNC), ("out", Kind.VAR), (".maps", Kind.DATASEC)):
        assert scan_type_id(raw, name, kind) == btf.lookup(name, kind).id
    assert scan_type_id(raw, "global_add", Kind.STRUCT) == 0
    assert scan_type_id(raw, "no_such_name", Kind.FUNC) == 0


def test_btf_package_reexports_every_type_class() -> None:
    """bpfkit.btf lists bpfkit.btf.types' names explicitly (ruff cannot check a starred __all__)."""
    import bpfkit.btf
    import bpfkit.btf.types

    assert set(bpfkit.btf.types.__all__) <= set(bpfkit.btf.__all__)
    assert all(getattr(bpfkit.btf, n) is getattr(bpfkit.btf.types, n) for n in bpfkit.btf.types.__all__)


def test_type_table_setitem_replaces_own_types_only() -> None:
    """btf.sanitize rewrites types in place; a split BTF's table refuses to change its base's."""
    from bpfkit.btf import BTF, Int, IntEncoding, TypeTable

    base = BTF()
    base.add(Int(0, "int", 4, IntEncoding.SIGNED, 0, 32))
    split = BTF(base=base)
    split.add(Int(0, "long", 8, IntEncoding.SIGNED, 0, 64))
    assert isinstance(split.types, TypeTable)
    split.types[2] = Int(2, "u64", 8, IntEncoding.NONE, 0, 64)
    assert split.types[2].name == "u64"
    with pytest.raises(IndexError, match="not one of this BTF's own"):
        split.types[1] = Int(1, "x", 4, IntEncoding.NONE, 0, 32)


@pytest.mark.parametrize("lazy", [False, True])
def test_type_section_cut_short(lazy):
    """The scan's end-of-section checks, by how many words of the last type are left: a
    header cut after one word, a type cut after two (of three), a struct cut inside its
    members; and a whole section of 0 types is fine."""
    btf = BTF()
    u32 = btf.add(Int(0, "u32", 4, IntEncoding.NONE, 0, 32))
    btf.add(Struct(0, "s", 8, [Member("a", u32, 0), Member("b", u32, 32)]))
    btf.add(Pointer(0, "", u32))
    full = btf.to_bytes()
    hdr = list(struct.unpack_from("<HBBIIIII", full))
    types, strings = full[24 : 24 + hdr[5]], full[24 + hdr[6] :]

    def cut(words: int) -> bytes:
        body = types[: len(types) - 4 * words]
        return struct.pack("<HBBIIIII", *hdr[:4], 0, len(body), len(body), len(strings)) + body + strings

    with pytest.raises(ParseError, match=r"BTF type 3 \(header\) is truncated at the end of the type section"):
        BTF.from_bytes(cut(2), lazy=lazy)  # 1 word of the pointer's 3
    with pytest.raises(ParseError, match=r"BTF type section ends inside a type \(type 3 is truncated\)"):
        BTF.from_bytes(cut(1), lazy=lazy)  # 2 words of 3
    with pytest.raises(ParseError, match=r"ends inside a type \(type 2 is truncated\)"):
        BTF.from_bytes(cut(3 + 1), lazy=lazy)  # the struct's last member lacks a word
    assert len(BTF.from_bytes(cut(len(types) // 4), lazy=lazy)) == 1
