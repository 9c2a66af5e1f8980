# SPDX-License-Identifier: Apache-2.0
"""A small eBPF instruction encoder: enough for feature probes, tests and hand-made programs.

Each helper returns the 8-byte encoding of one instruction (``ld_imm64`` and ``ld_map_fd``
return 16 bytes: the two slots of BPF_LD | BPF_IMM | BPF_DW). Join them with ``b"".join``.
Encoding per Documentation/bpf/standardization/instruction-set.rst, little-endian x86_64/arm64.
"""

from __future__ import annotations

import struct

# Instruction classes.
LD, LDX, ST, STX, ALU, JMP, JMP32, ALU64 = 0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07
# Sizes.
W, H, B, DW = 0x00, 0x08, 0x10, 0x18
# Modes.
IMM, ABS, IND, MEM, ATOMIC = 0x00, 0x20, 0x40, 0x60, 0xC0
# Sources.
K, X = 0x00, 0x08
# ALU operations.
ADD, SUB, MUL, DIV, OR, AND, LSH, RSH, NEG, MOD, XOR, MOV, ARSH, END = (
    0x00, 0x10, 0x20, 0x30, 0x40, 0x50, 0x60, 0x70, 0x80, 0x90, 0xA0, 0xB0, 0xC0, 0xD0,
)
# Jump operations.
JA, JEQ, JGT, JGE, JSET, JNE, JSGT, JSGE, CALL, EXIT, JLT, JLE, JSLT, JSLE = (
    0x00, 0x10, 0x20, 0x30, 0x40, 0x50, 0x60, 0x70, 0x80, 0x90, 0xA0, 0xB0, 0xC0, 0xD0,
)
# src_reg values of LD_IMM64 and CALL.
PSEUDO_MAP_FD = 1
PSEUDO_MAP_VALUE = 2
PSEUDO_BTF_ID = 3
PSEUDO_FUNC = 4
PSEUDO_MAP_IDX = 5
PSEUDO_MAP_IDX_VALUE = 6
PSEUDO_CALL = 1
PSEUDO_KFUNC_CALL = 2

R0, R1, R2, R3, R4, R5, R6, R7, R8, R9, R10 = range(11)
INSN_SIZE = 8
_INSN = struct.Struct("<BBhi")


def insn(code: int, dst: int = 0, src: int = 0, off: int = 0, imm: int = 0) -> bytes:
    """One raw instruction."""
    if imm > 0x7FFFFFFF:
        imm -= 1 << 32
    return _INSN.pack(code, (src << 4) | (dst & 0xF), off, imm)


def decode(raw: bytes, index: int = 0) -> tuple[int, int, int, int, int]:
    """(code, dst, src, off, imm) of instruction ``index`` in ``raw``."""
    code, regs, off, imm = _INSN.unpack_from(raw, index * INSN_SIZE)
    return code, regs & 0xF, regs >> 4, off, imm


def mov64_imm(dst: int, imm: int) -> bytes:
    return insn(ALU64 | MOV | K, dst, imm=imm)


def mov64_reg(dst: int, src: int) -> bytes:
    return insn(ALU64 | MOV | X, dst, src)


def alu64_imm(op: int, dst: int, imm: int) -> bytes:
    return insn(ALU64 | op | K, dst, imm=imm)


def alu64_reg(op: int, dst: int, src: int) -> bytes:
    return insn(ALU64 | op | X, dst, src)


def ld_imm64(dst: int, value: int, src: int = 0) -> bytes:
    """Load a 64-bit immediate (two instruction slots)."""
    lo, hi = value & 0xFFFFFFFF, (value >> 32) & 0xFFFFFFFF
    return insn(LD | DW | IMM, dst, src, imm=lo) + insn(0, imm=hi)


def ld_map_fd(dst: int, map_fd: int) -> bytes:
    """Load a map pointer from an fd (BPF_PSEUDO_MAP_FD)."""
    return ld_imm64(dst, map_fd, PSEUDO_MAP_FD)


def ld_map_value(dst: int, map_fd: int, offset: int = 0) -> bytes:
    """Load a pointer ``offset`` bytes into an array map's only value (BPF_PSEUDO_MAP_VALUE)."""
    return insn(LD | DW | IMM, dst, PSEUDO_MAP_VALUE, imm=map_fd) + insn(0, imm=offset)


def ldx(size: int, dst: int, src: int, off: int) -> bytes:
    return insn(LDX | size | MEM, dst, src, off)


def stx(size: int, dst: int, src: int, off: int) -> bytes:
    return insn(STX | size | MEM, dst, src, off)


def st_imm(size: int, dst: int, off: int, imm: int) -> bytes:
    return insn(ST | size | MEM, dst, off=off, imm=imm)


def atomic_add(size: int, dst: int, src: int, off: int) -> bytes:
    """``lock *(size *)(dst + off) += src``."""
    return insn(STX | size | ATOMIC, dst, src, off, ADD)


def jmp_imm(op: int, dst: int, imm: int, off: int) -> bytes:
    return insn(JMP | op | K, dst, off=off, imm=imm)


def jmp_reg(op: int, dst: int, src: int, off: int) -> bytes:
    return insn(JMP | op | X, dst, src, off)


def ja(off: int) -> bytes:
    return insn(JMP | JA, off=off)


def call(helper: int) -> bytes:
    """Call helper function number ``helper`` (enum bpf_func_id)."""
    return insn(JMP | CALL, imm=int(helper))


def call_rel(offset: int) -> bytes:
    """BPF-to-BPF call ``offset`` instructions after the next one (BPF_PSEUDO_CALL)."""
    return insn(JMP | CALL, src=PSEUDO_CALL, imm=offset)


def exit_() -> bytes:
    return insn(JMP | EXIT)


def return_imm(value: int) -> bytes:
    """``r0 = value; exit``."""
    return mov64_imm(R0, value) + exit_()


def count_in_array(map_fd: int, index: int = 0) -> bytes:
    """A program body that atomically adds 1 to the u64 at ``index`` of an array map, returns 0.

    Used by feature probes and tests to prove that an attached program really ran.
    """
    return b"".join(
        [
            st_imm(W, R10, -4, index),  # *(u32 *)(fp - 4) = index
            mov64_reg(R2, R10),
            alu64_imm(ADD, R2, -4),  # r2 = &key
            ld_map_fd(R1, map_fd),
            call(1),  # bpf_map_lookup_elem
            jmp_imm(JEQ, R0, 0, 2),
            mov64_imm(R1, 1),
            atomic_add(DW, R0, R1, 0),
            mov64_imm(R0, 0),
            exit_(),
        ]
    )
