# SPDX-License-Identifier: Apache-2.0
"""bpfkit.asm encodings, checked against the instruction-set spec's byte layouts."""

from __future__ import annotations

import struct

import pytest

from bpfkit import asm


def raw(code: int, dst: int, src: int, off: int, imm: int) -> bytes:
    return struct.pack("<BBhi", code, (src << 4) | dst, off, imm)


@pytest.mark.parametrize(
    "got, want",
    [
        (asm.mov64_imm(asm.R0, 0), raw(0xB7, 0, 0, 0, 0)),  # BPF_ALU64|BPF_MOV|BPF_K
        (asm.mov64_imm(asm.R3, -1), raw(0xB7, 3, 0, 0, -1)),
        (asm.mov64_reg(asm.R6, asm.R1), raw(0xBF, 6, 1, 0, 0)),
        (asm.alu64_imm(asm.ADD, asm.R2, -4), raw(0x07, 2, 0, 0, -4)),
        (asm.alu64_reg(asm.SUB, asm.R2, asm.R3), raw(0x1F, 2, 3, 0, 0)),
        (asm.ldx(asm.DW, asm.R0, asm.R1, 8), raw(0x79, 0, 1, 8, 0)),
        (asm.ldx(asm.W, asm.R0, asm.R1, -4), raw(0x61, 0, 1, -4, 0)),
        (asm.stx(asm.DW, asm.R10, asm.R1, -8), raw(0x7B, 10, 1, -8, 0)),
        (asm.st_imm(asm.W, asm.R10, -4, 7), raw(0x62, 10, 0, -4, 7)),
        (asm.atomic_add(asm.DW, asm.R0, asm.R1, 0), raw(0xDB, 0, 1, 0, 0)),
        (asm.jmp_imm(asm.JEQ, asm.R0, 0, 2), raw(0x15, 0, 0, 2, 0)),
        (asm.jmp_reg(asm.JGT, asm.R1, asm.R2, -3), raw(0x2D, 1, 2, -3, 0)),
        (asm.ja(5), raw(0x05, 0, 0, 5, 0)),
        (asm.call(1), raw(0x85, 0, 0, 0, 1)),
        (asm.call_rel(3), raw(0x85, 0, 1, 0, 3)),
        (asm.exit_(), raw(0x95, 0, 0, 0, 0)),
    ],
)
def test_single_instructions(got: bytes, want: bytes) -> None:
    assert got == want


def test_ld_imm64_takes_two_slots() -> None:
    enc = asm.ld_imm64(asm.R1, 0x1122334455667788)
    assert enc == raw(0x18, 1, 0, 0, 0x55667788) + raw(0, 0, 0, 0, 0x11223344)
    neg = asm.ld_imm64(asm.R2, (1 << 64) - 1)
    assert neg == raw(0x18, 2, 0, 0, -1) + raw(0, 0, 0, 0, -1)


def test_map_loads() -> None:
    assert asm.ld_map_fd(asm.R1, 7) == raw(0x18, 1, asm.PSEUDO_MAP_FD, 0, 7) + raw(0, 0, 0, 0, 0)
    assert asm.ld_map_value(asm.R1, 7, 16) == raw(0x18, 1, asm.PSEUDO_MAP_VALUE, 0, 7) + raw(0, 0, 0, 0, 16)


def test_imm_above_int32_wraps_like_u32() -> None:
    assert asm.insn(0xB7, imm=0xFFFFFFFF) == raw(0xB7, 0, 0, 0, -1)


def test_decode_roundtrip() -> None:
    prog = asm.count_in_array(5, index=2)
    assert len(prog) % asm.INSN_SIZE == 0
    assert asm.decode(prog, 0) == (0x62, 10, 0, -4, 2)
    code, dst, src, _off, imm = asm.decode(prog, 3)  # ld_map_fd r1
    assert (code, dst, src, imm) == (0x18, 1, asm.PSEUDO_MAP_FD, 5)
    assert asm.decode(prog, len(prog) // 8 - 1) == (0x95, 0, 0, 0, 0)


def test_return_imm() -> None:
    assert asm.return_imm(2) == asm.mov64_imm(asm.R0, 2) + asm.exit_()


def test_encoding_matches_the_abi_struct() -> None:
    from bpfkit._kernel.abi import ffi

    enc = asm.jmp_reg(asm.JNE, 3, 9, -7)
    insn = ffi.new("struct bpf_insn *")
    ffi.memmove(insn, enc, 8)
    assert insn.code == 0x5D and insn._bits_regs == 0x93 and insn.off == -7 and insn.imm == 0
