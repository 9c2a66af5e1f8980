# SPDX-License-Identifier: Apache-2.0
"""CO-RE relocations (bpfkit.btf.core) against hand-made local/target BTF pairs: every
relocation kind, with the instruction before and after patching; candidate matching
(flavors, anonymous members, arrays, ambiguity, module fallback) and poisoning. Pure: no
kernel needed.
"""

from __future__ import annotations

import pytest

from bpfkit import asm
from bpfkit.btf import BTF, CORERelo
from bpfkit.btf.core import (
    POISON_HELPER, CORERelocationError, CORERelocator, ReloKind, parse_spec, relocate, types_compat,
    types_match,
)
from bpfkit.btf.types import (
    Array, Const, Enum, Enum64, EnumValue, Fwd, Int, IntEncoding, Member, Pointer, Struct, Typedef,
    Union,
)

R0, R1, R2 = 0, 1, 2
W, DW = 0x00, 0x18  # BPF_W, BPF_DW size bits
POISON = asm.insn(0x85, imm=POISON_HELPER)


class Types:
    """A BTF being built, with the basic ints every test needs."""

    def __init__(self, name: str = "") -> None:
        self.btf = BTF(name=name)
        self.u32 = self.add(Int(0, "unsigned int", 4, IntEncoding.NONE, 0, 32))
        self.s32 = self.add(Int(0, "int", 4, IntEncoding.SIGNED, 0, 32))
        self.u64 = self.add(Int(0, "long long unsigned int", 8, IntEncoding.NONE, 0, 64))
        self.s64 = self.add(Int(0, "long int", 8, IntEncoding.SIGNED, 0, 64))
        self.u8 = self.add(Int(0, "unsigned char", 1, IntEncoding.NONE, 0, 8))

    def add(self, t) -> int:
        return self.btf.add(t)

    def struct(self, name: str, members: list[tuple[str, int, int]], size: int = 0, union: bool = False,
               bitfields: bool = False) -> int:
        """``members``: (name, type, bit offset) or (name, type, bit offset, bitfield size)."""
        ms = [Member(m[0], m[1], m[2], m[3] if len(m) > 3 else 0) for m in members]
        if not size:
            size = max((m.bit_offset + 64) // 8 for m in ms) if ms else 0
        cls = Union if union else Struct
        return self.add(cls(0, name, size, ms, kind_flag=bitfields))


def relo(type_id: int, access: str, kind: ReloKind) -> CORERelo:
    return CORERelo(0, type_id, access, int(kind))


def apply(local: Types, target: Types | list[Types], code: bytes, r: CORERelo, fallback=None):
    targets = [t.btf for t in target] if isinstance(target, list) else [target.btf]
    relocator = CORERelocator(local.btf, targets, fallback)
    out, resolutions = relocate("p", code, [(0, r)], relocator)
    return out, resolutions[0]


def mov(imm: int) -> bytes:
    return asm.mov64_imm(R1, imm)


# ------------------------------------------------------------------------ field kinds
@pytest.fixture
def moved():
    """struct task { int pid; int tgid; } locally; the kernel added a u64 in front."""
    local, target = Types(), Types("vmlinux")
    local.task = local.struct("task", [("pid", local.s32, 0), ("tgid", local.s32, 32)], size=8)
    target.task = target.struct("task", [("flags", target.u64, 0), ("pid", target.s32, 64),
                                         ("tgid", target.s32, 96)], size=16)
    return local, target


def test_field_byte_offset_patches_ldx_offset(moved):
    local, target = moved
    out, res = apply(local, target, asm.ldx(W, R0, R1, 4), relo(local.task, "0:1", ReloKind.FIELD_BYTE_OFFSET))
    assert out == asm.ldx(W, R0, R1, 12)
    assert (res.result.orig, res.result.new) == (4, 12)
    assert res.target is not None and res.target.describe() == "[" + str(target.task) + "] struct task.tgid (0:2 @ offset 12) in vmlinux"


def test_field_byte_offset_patches_alu_and_stx(moved):
    local, target = moved
    out, _ = apply(local, target, asm.alu64_imm(0x00, R1, 4), relo(local.task, "0:1", ReloKind.FIELD_BYTE_OFFSET))
    assert out == asm.alu64_imm(0x00, R1, 12)  # r1 += offsetof(tgid)
    out, _ = apply(local, target, asm.stx(W, R1, R2, 0), relo(local.task, "0:0", ReloKind.FIELD_BYTE_OFFSET))
    assert out == asm.stx(W, R1, R2, 8)
    out, _ = apply(local, target, asm.st_imm(W, R1, 4, 7), relo(local.task, "0:1", ReloKind.FIELD_BYTE_OFFSET))
    assert out == asm.st_imm(W, R1, 12, 7)


def test_field_byte_offset_of_a_root_array_element(moved):
    # &tasks[2].pid: the first accessor indexes the root pointer.
    local, target = moved
    out, _ = apply(local, target, mov(16), relo(local.task, "2:0", ReloKind.FIELD_BYTE_OFFSET))
    assert out == mov(2 * 16 + 8)


def test_field_byte_size_and_resized_load():
    local, target = Types(), Types()
    local.s = local.struct("s", [("v", local.u32, 0)], size=4)
    target.s = target.struct("s", [("v", target.u64, 0)], size=8)
    out, _ = apply(local, target, mov(4), relo(local.s, "0:0", ReloKind.FIELD_BYTE_SIZE))
    assert out == mov(8)
    # An unsigned integer that grew: the 4-byte load becomes an 8-byte one.
    out, res = apply(local, target, asm.ldx(W, R0, R1, 0), relo(local.s, "0:0", ReloKind.FIELD_BYTE_OFFSET))
    assert out == asm.ldx(DW, R0, R1, 0) and (res.result.orig_size, res.result.new_size) == (4, 8)


def test_signed_field_of_another_size_is_poisoned():
    local, target = Types(), Types()
    local.s = local.struct("s", [("v", local.s32, 0)], size=4)
    target.s = target.struct("s", [("v", target.s64, 0)], size=8)
    out, res = apply(local, target, asm.ldx(W, R0, R1, 0), relo(local.s, "0:0", ReloKind.FIELD_BYTE_OFFSET))
    assert out == POISON and res.poisoned
    assert "neither a pointer nor an unsigned integer" in res.explain()


def test_field_exists():
    local, target = Types(), Types()
    local.s = local.struct("s___new", [("gone", local.u32, 0), ("here", local.u32, 32)], size=8)
    target.s = target.struct("s", [("here", target.u32, 0)], size=4)
    out, res = apply(local, target, mov(1), relo(local.s, "0:1", ReloKind.FIELD_EXISTS))
    assert out == mov(1) and res.target is not None
    out, res = apply(local, target, mov(1), relo(local.s, "0:0", ReloKind.FIELD_EXISTS))
    assert out == mov(0) and not res.poisoned
    assert res.why == "struct s has no member 'gone'"


def test_field_signed():
    local, target = Types(), Types()
    local.s = local.struct("s", [("v", local.u32, 0)], size=4)
    target.e = target.add(Enum(0, "e", 4, [EnumValue("A", -1)], signed=True))
    target.s = target.struct("s", [("v", target.s32, 0)], size=4)
    out, _ = apply(local, target, mov(0), relo(local.s, "0:0", ReloKind.FIELD_SIGNED))
    assert out == mov(1)
    target2 = Types()
    target2.e = target2.add(Enum(0, "e", 4, [EnumValue("A", -1)], signed=True))
    target2.s = target2.struct("s", [("v", target2.e, 0)], size=4)
    local2 = Types()
    local2.e = local2.add(Enum(0, "e", 4, [EnumValue("A", 1)]))
    local2.s = local2.struct("s", [("v", local2.e, 0)], size=4)
    out, _ = apply(local2, target2, mov(0), relo(local2.s, "0:0", ReloKind.FIELD_SIGNED))
    assert out == mov(1)  # a signed enum (kind_flag) in the kernel


@pytest.fixture
def bitfields():
    """struct flags { unsigned a:3, b:5; } locally; the kernel has x:4 in front and b:7."""
    local, target = Types(), Types()
    local.s = local.struct("flags", [("a", local.u32, 0, 3), ("b", local.u32, 3, 5)], size=4, bitfields=True)
    target.s = target.struct("flags", [("x", target.u32, 0, 4), ("a", target.u32, 4, 3), ("b", target.u32, 30, 7)],
                             size=8, bitfields=True)
    return local, target


@pytest.mark.parametrize("kind, before, after", [
    (ReloKind.FIELD_BYTE_OFFSET, 0, 0),   # b (bits 30..36) needs an 8-byte load from offset 0
    (ReloKind.FIELD_BYTE_SIZE, 4, 8),
    (ReloKind.FIELD_LSHIFT_U64, 64 - 8, 64 - 37),
    (ReloKind.FIELD_RSHIFT_U64, 64 - 5, 64 - 7),
    (ReloKind.FIELD_SIGNED, 0, 0),
])
def test_bitfield_kinds(bitfields, kind, before, after):
    local, target = bitfields
    out, res = apply(local, target, mov(before), relo(local.s, "0:1", kind))
    assert out == mov(after)
    assert (res.result.orig, res.result.new) == (before, after)


def test_bitfield_offset_moves_to_the_containing_word():
    local, target = Types(), Types()
    local.s = local.struct("flags", [("a", local.u32, 0, 3)], size=4, bitfields=True)
    target.s = target.struct("flags", [("pad", target.u64, 0), ("a", target.u32, 64 + 33, 3)], size=16, bitfields=True)
    out, _ = apply(local, target, mov(0), relo(local.s, "0:0", ReloKind.FIELD_BYTE_OFFSET))
    assert out == mov(12)  # bit 97 lives in the u32 at byte 12
    out, _ = apply(local, target, mov(64 - 3), relo(local.s, "0:0", ReloKind.FIELD_LSHIFT_U64))
    assert out == mov(64 - (97 + 3 - 96))


# ------------------------------------------------------------------------- type kinds
@pytest.fixture
def typed():
    local, target = Types(), Types()
    local.s = local.struct("sock", [("a", local.u32, 0)], size=8)
    local.missing = local.struct("nowhere", [("a", local.u32, 0)], size=4)
    target.pad = target.struct("other", [], size=4)
    target.s = target.struct("sock", [("a", target.u32, 0), ("b", target.u64, 64)], size=16)
    return local, target


def test_type_id_local_keeps_the_local_id(typed):
    local, target = typed
    out, res = apply(local, target, mov(local.s), relo(local.s, "0", ReloKind.TYPE_ID_LOCAL))
    assert out == mov(local.s) and res.target is None


def test_type_id_target(typed):
    local, target = typed
    out, _ = apply(local, target, mov(local.s), relo(local.s, "0", ReloKind.TYPE_ID_TARGET))
    assert out == mov(target.s)
    out, _ = apply(local, target, asm.ld_imm64(R1, local.s), relo(local.s, "0", ReloKind.TYPE_ID_TARGET))
    assert out == asm.ld_imm64(R1, target.s)
    out, _ = apply(local, target, mov(local.missing), relo(local.missing, "0", ReloKind.TYPE_ID_TARGET))
    assert out == mov(0)


def test_type_exists(typed):
    local, target = typed
    assert apply(local, target, mov(1), relo(local.s, "0", ReloKind.TYPE_EXISTS))[0] == mov(1)
    out, res = apply(local, target, mov(1), relo(local.missing, "0", ReloKind.TYPE_EXISTS))
    assert out == mov(0) and res.why == "the kernel has no struct named 'nowhere'"


def test_type_size(typed):
    local, target = typed
    assert apply(local, target, mov(8), relo(local.s, "0", ReloKind.TYPE_SIZE))[0] == mov(16)
    assert apply(local, target, mov(4), relo(local.missing, "0", ReloKind.TYPE_SIZE))[0] == mov(0)


def test_type_matches():
    local, target = Types(), Types()
    target.lh = target.add(Struct(0, "list_head", 16, []))
    target_ptr = target.add(Pointer(0, "", target.lh))
    target.btf.types[target.lh].members = [Member("next", target_ptr, 0), Member("prev", target_ptr, 64)]
    good = local.add(Struct(0, "list_head___good", 16, []))
    good_ptr = local.add(Pointer(0, "", good))
    local.btf.types[good].members = [Member("next", good_ptr, 0)]  # a subset is enough
    bad = local.struct("list_head___bad", [("next", local.s32, 0)], size=4)
    assert apply(local, target, mov(1), relo(good, "0", ReloKind.TYPE_MATCHES))[0] == mov(1)
    out, res = apply(local, target, mov(1), relo(bad, "0", ReloKind.TYPE_MATCHES))
    assert out == mov(0) and "does not match" in res.why
    # ...while the looser compatibility of type_exists accepts both.
    assert apply(local, target, mov(1), relo(bad, "0", ReloKind.TYPE_EXISTS))[0] == mov(1)


# ------------------------------------------------------------------------- enum kinds
@pytest.fixture
def enums():
    local, target = Types(), Types()
    local.e = local.add(Enum(0, "state", 4, [EnumValue("RUNNING", 0), EnumValue("STOPPED", 2),
                                             EnumValue("GONE___v1", 9)]))
    target.e = target.add(Enum64(0, "state", 8, [EnumValue("RUNNING", 0), EnumValue("NEW", 1),
                                                 EnumValue("STOPPED", 1 << 40)]))
    return local, target


def test_enumval_exists(enums):
    local, target = enums
    assert apply(local, target, mov(1), relo(local.e, "1", ReloKind.ENUMVAL_EXISTS))[0] == mov(1)
    out, res = apply(local, target, mov(1), relo(local.e, "2", ReloKind.ENUMVAL_EXISTS))
    assert out == mov(0) and res.why == "enum state has no enumerator GONE"


def test_enumval_value(enums):
    local, target = enums
    out, _ = apply(local, target, asm.ld_imm64(R1, 2), relo(local.e, "1", ReloKind.ENUMVAL_VALUE))
    assert out == asm.ld_imm64(R1, 1 << 40)  # ENUM matches ENUM64
    out, res = apply(local, target, mov(9), relo(local.e, "2", ReloKind.ENUMVAL_VALUE))
    assert out == POISON and res.poisoned


# ------------------------------------------------------------------ matching details
def test_flavored_local_type_finds_the_plain_kernel_type():
    local, target = Types(), Types()
    old = local.struct("task_struct___o", [("state", local.s64, 0)], size=8)
    new = local.struct("task_struct___n", [("__state", local.u32, 0)], size=4)
    target.task = target.struct("task_struct", [("pad", target.u64, 0), ("__state", target.u32, 64)], size=16)
    out, _ = apply(local, target, asm.ldx(W, R0, R1, 0), relo(new, "0:0", ReloKind.FIELD_BYTE_OFFSET))
    assert out == asm.ldx(W, R0, R1, 8)
    out, res = apply(local, target, asm.ldx(DW, R0, R1, 0), relo(old, "0:0", ReloKind.FIELD_BYTE_OFFSET))
    assert out == POISON
    explained = res.explain()
    assert "struct task_struct___o.state" in explained and "struct task_struct has no member 'state'" in explained


def test_member_found_through_anonymous_union():
    local, target = Types(), Types()
    local.s = local.struct("s", [("a", local.u32, 0), ("b", local.u32, 32)], size=8)
    anon = target.struct("", [("a", target.u32, 0), ("alias", target.u64, 0)], size=8, union=True)
    target.s = target.struct("s", [("x", target.u64, 0), ("", anon, 64), ("b", target.u32, 128)], size=24)
    out, res = apply(local, target, asm.ldx(W, R0, R1, 0), relo(local.s, "0:0", ReloKind.FIELD_BYTE_OFFSET))
    assert out == asm.ldx(W, R0, R1, 8) and res.target.raw == [0, 1, 0]


def test_array_index_access():
    local, target = Types(), Types()
    arr4 = local.add(Array(0, "", local.u32, local.u32, 4))
    local.s = local.struct("s", [("x", local.u32, 0), ("arr", arr4, 32)], size=20)
    arr2 = target.add(Array(0, "", target.u32, target.u32, 2))
    target.s = target.struct("s", [("pad", target.u64, 0), ("arr", arr2, 64)], size=16)
    out, _ = apply(local, target, mov(4 + 4), relo(local.s, "0:1:1", ReloKind.FIELD_BYTE_OFFSET))
    assert out == mov(8 + 4)
    out, res = apply(local, target, mov(4 + 12), relo(local.s, "0:1:3", ReloKind.FIELD_BYTE_OFFSET))
    assert out == POISON and "past the target array's 2 elements" in res.why


def test_incompatible_member_type_does_not_match():
    local, target = Types(), Types()
    local.s = local.struct("s", [("p", local.add(Pointer(0, "", local.u32)), 0)], size=8)
    target.s = target.struct("s", [("p", target.u64, 0)], size=8)
    out, res = apply(local, target, asm.ldx(DW, R0, R1, 0), relo(local.s, "0:0", ReloKind.FIELD_BYTE_OFFSET))
    assert out == POISON and "incompatible" in res.why


def test_ambiguous_candidates_are_an_error():
    local, target = Types(), Types()
    local.s = local.struct("s", [("v", local.u32, 0)], size=4)
    target.struct("s", [("v", target.u32, 0)], size=4)
    target.struct("s___other", [("pad", target.u32, 0), ("v", target.u32, 32)], size=8)
    with pytest.raises(CORERelocationError, match="ambiguous"):
        apply(local, target, asm.ldx(W, R0, R1, 0), relo(local.s, "0:0", ReloKind.FIELD_BYTE_OFFSET))


def test_agreeing_candidates_are_fine_and_failed_ones_are_dropped():
    local, target = Types(), Types()
    local.s = local.struct("s", [("v", local.u32, 0), ("w", local.u32, 32)], size=8)
    target.struct("s", [("v", target.u32, 0)], size=4)
    target.struct("s___2", [("v", target.u32, 0), ("w", target.u32, 64)], size=12)
    relocator = CORERelocator(local.btf, [target.btf])
    code = asm.ldx(W, R0, R1, 4) + asm.ldx(W, R0, R1, 0)
    out, res = relocate("p", code, [(0, relo(local.s, "0:1", ReloKind.FIELD_BYTE_OFFSET)),
                                    (1, relo(local.s, "0:0", ReloKind.FIELD_BYTE_OFFSET))], relocator)
    assert out == asm.ldx(W, R0, R1, 8) + asm.ldx(W, R0, R1, 0)
    # Only s___2 had 'w': s is no longer a candidate for this root type.
    assert [t for _, t in relocator.candidates(local.s)] == [target.btf.find("s___2")[0].id]


def test_modules_are_searched_only_when_vmlinux_has_no_candidate():
    local, vmlinux = Types(), Types("vmlinux")
    local.s = local.struct("nf_conn", [("mark", local.u32, 0)], size=4)
    module = BTF(base=vmlinux.btf, name="nf_conntrack")
    m_u32 = module.add(Int(0, "u32", 4, IntEncoding.NONE, 0, 32))
    conn = module.add(Struct(0, "nf_conn", 16, [Member("pad", m_u32, 0), Member("mark", m_u32, 96)]))
    asked = []
    out, res = apply(local, vmlinux, asm.ldx(W, R0, R1, 0), relo(local.s, "0:0", ReloKind.FIELD_BYTE_OFFSET),
                     fallback=lambda: asked.append(1) or [module])
    assert out == asm.ldx(W, R0, R1, 12) and asked == [1]
    assert res.target.root_id == conn and res.target.describe().endswith("in nf_conntrack")


def test_unexpected_instruction_value_is_an_error(moved):
    local, target = moved
    with pytest.raises(CORERelocationError, match="holds 5, expected 4"):
        apply(local, target, mov(5), relo(local.task, "0:1", ReloKind.FIELD_BYTE_OFFSET))
    with pytest.raises(CORERelocationError, match="not ALU, LDX/ST/STX or ld_imm64"):
        apply(local, target, asm.ja(4), relo(local.task, "0:1", ReloKind.FIELD_BYTE_OFFSET))


def test_poisoned_ld_imm64_poisons_both_halves(enums):
    local, target = enums
    out, _ = apply(local, target, asm.ld_imm64(R1, 9), relo(local.e, "2", ReloKind.ENUMVAL_VALUE))
    assert out == POISON + POISON


def test_malformed_relocations():
    local = Types()
    s = local.struct("s", [("v", local.u32, 0)], size=4)
    anon = local.struct("", [("v", local.u32, 0)], size=4)
    relocator = CORERelocator(local.btf, [Types().btf])
    for r, message in [
        (relo(s, "0:7", ReloKind.FIELD_BYTE_OFFSET), "has no member #7"),
        (relo(s, "0:x", ReloKind.FIELD_BYTE_OFFSET), "malformed CO-RE access string"),
        (relo(s, "1", ReloKind.TYPE_SIZE), "expected '0'"),
        (relo(s, "0", ReloKind.ENUMVAL_VALUE), "not an enumerator"),
        (relo(999, "0", ReloKind.TYPE_EXISTS), "type 999"),
        (CORERelo(0, s, "0", 42), "unknown CO-RE relocation kind 42"),
        (relo(anon, "0:0", ReloKind.FIELD_BYTE_OFFSET), "anonymous struct"),
    ]:
        with pytest.raises(CORERelocationError, match=message):
            relocator.resolve(r, "p", 0, 0)


def test_parse_spec_skips_anonymous_members_and_typedefs():
    local = Types()
    inner = local.struct("", [("x", local.u32, 0), ("y", local.u32, 32)], size=8)
    outer = local.struct("outer", [("a", local.u64, 0), ("", inner, 64)], size=16)
    td = local.add(Typedef(0, "outer_t", local.add(Const(0, "", outer))))
    spec = parse_spec(local.btf, relo(td, "0:1:1", ReloKind.FIELD_BYTE_OFFSET))
    assert [a.name for a in spec.accessors] == [None, "y"] and spec.bit_offset == 96


def test_compatibility_rules():
    a, b = Types(), Types()
    fwd = b.add(Fwd(0, "thing"))
    thing = a.struct("thing", [], size=4)
    other_thing = b.struct("thing", [("x", b.u64, 0)], size=8)
    # Pointers by what they point at; structs whatever their members; a forward declaration
    # is its own kind.
    assert types_compat(a.btf, a.add(Pointer(0, "", thing)), b.btf, b.add(Pointer(0, "", other_thing)))
    assert not types_compat(a.btf, a.add(Pointer(0, "", thing)), b.btf, b.add(Pointer(0, "", fwd)))
    assert not types_compat(a.btf, a.u32, b.btf, b.add(Pointer(0, "", b.u32)))
    assert types_match(a.btf, a.u32, b.btf, b.u32)
    assert not types_match(a.btf, a.u32, b.btf, b.s32)  # signedness matters for matches
    assert types_compat(a.btf, a.u32, b.btf, b.s64)  # ...not for compatibility
