# SPDX-License-Identifier: Apache-2.0
"""USDT argument specs (x86-64): ``-4@%eax``, ``8@$5``, ``-8@-16(%rbp)``, ``8@(%rsp)``.

sys/sdt.h records each probe argument as ``SIZE@OPERAND``: the size in bytes (negative for
a signed value) and the assembler operand GCC chose for it, which is where the value is when
the probe's ``nop`` runs. The operand is one of

    $IMM             a constant                                  CONST
    %REG             a register (any width: %rax %eax %ax %al)   REG
    OFF(%REG)        memory at REG + OFF                         REG_DEREF
    (%REG)           memory at REG                               REG_DEREF

These are the three kinds libbpf's ``usdt.bpf.h`` can fetch (``enum __bpf_usdt_arg_type``):
it reads a register from ``struct pt_regs`` at a recorded offset, adds a constant and does one
``bpf_probe_read_user()``. Scaled-index operands (``OFF(%BASE,%INDEX,SCALE)``) and symbolic
ones (``counter(%rip)``) need more than that and are refused with a ParseError, as libbpf
refuses them. Pure parsing: no syscalls.
"""

from __future__ import annotations

import dataclasses
import enum
import re
import struct

from ..errors import ParseError

__all__ = ["ArgKind", "USDTArg", "parse_arg", "parse_args", "PT_REGS_OFFSETS", "MAX_ARGS"]

# BPF_USDT_MAX_ARG_CNT in libbpf's usdt.bpf.h.
MAX_ARGS = 12


class ArgKind(enum.IntEnum):
    """Where an argument is; the values are usdt.bpf.h's ``enum __bpf_usdt_arg_type``."""

    CONST = 0
    REG = 1
    REG_DEREF = 2


# offsetof(struct pt_regs, REG) on x86-64 (arch/x86/include/asm/ptrace.h, unchanged since
# the 2.6 days): r15 r14 r13 r12 bp bx r11 r10 r9 r8 ax cx dx si di orig_ax ip cs flags sp ss.
PT_REGS_OFFSETS = {
    "r15": 0, "r14": 8, "r13": 16, "r12": 24, "rbp": 32, "rbx": 40, "r11": 48, "r10": 56,
    "r9": 64, "r8": 72, "rax": 80, "rcx": 88, "rdx": 96, "rsi": 104, "rdi": 112, "rip": 128,
    "rsp": 152,
}
# Every name of a general-purpose register, by width, -> its 64-bit name.
_ALIASES: dict[str, str] = {}
for _r64, _r32, _r16, _r8 in (
    ("rax", "eax", "ax", "al"), ("rbx", "ebx", "bx", "bl"), ("rcx", "ecx", "cx", "cl"),
    ("rdx", "edx", "dx", "dl"), ("rsi", "esi", "si", "sil"), ("rdi", "edi", "di", "dil"),
    ("rbp", "ebp", "bp", "bpl"), ("rsp", "esp", "sp", "spl"), ("rip", "eip", "", ""),
):
    for _n in (_r64, _r32, _r16, _r8):
        if _n:
            _ALIASES[_n] = _r64
for _i in range(8, 16):
    for _suffix in ("", "d", "w", "b"):
        _ALIASES[f"r{_i}{_suffix}"] = f"r{_i}"

_NUM = r"[-+]?(?:0[xX][0-9a-fA-F]+|\d+)"
_SPEC = re.compile(r"^\s*(?P<size>[-+]?\d+)\s*@\s*(?P<op>.+?)\s*$")
# The operands usdt.bpf.h can fetch, one alternative each: $IMM (val), %REG (reg), OFF(%REG) or
# (%REG) (off, base). They start differently ($, %, a number or '('): at most one matches.
_OPERAND = re.compile(rf"^(?:\$(?P<val>{_NUM})|%(?P<reg>[a-z0-9]+)|(?P<off>{_NUM})?\s*\(\s*%(?P<base>[a-z0-9]+)\s*\))$")
_SIB = re.compile(r"^[^(]*\(\s*%?[a-z0-9]*\s*,")


@dataclasses.dataclass(frozen=True)
class USDTArg:
    """One parsed argument: ``size`` bytes (1, 2, 4 or 8), ``signed``, and where it is.

    ``kind`` CONST: the value is ``value``; REG: register ``register`` (as written, e.g.
    ``eax``); REG_DEREF: memory at ``register`` + ``offset``.
    """

    text: str
    size: int
    signed: bool
    kind: ArgKind
    register: str = ""
    offset: int = 0
    value: int = 0

    @property
    def register64(self) -> str:
        """The full register the operand names (``eax`` -> ``rax``), or ''."""
        return _ALIASES.get(self.register, "")

    @property
    def reg_offset(self) -> int:
        """offsetof(struct pt_regs, register): where the BPF side reads it (0 for CONST)."""
        return PT_REGS_OFFSETS[self.register64] if self.register else 0

    @property
    def bitshift(self) -> int:
        """usdt.bpf.h's arg_bitshift: the bits above ``size`` cleared (or sign-filled)."""
        return 64 - self.size * 8

    @property
    def val_off(self) -> int:
        """usdt.bpf.h's val_off (a u64): the constant, or the dereference offset."""
        raw = self.value if self.kind == ArgKind.CONST else self.offset if self.kind == ArgKind.REG_DEREF else 0
        return raw & 0xFFFFFFFFFFFFFFFF

    # struct __bpf_usdt_arg_spec { __u64 val_off; enum arg_type (4); short reg_off;
    # bool arg_signed; char arg_bitshift; }: 16 bytes, no padding.
    SPEC = struct.Struct("<QIhbb")

    def pack(self) -> bytes:
        """This argument as libbpf's ``struct __bpf_usdt_arg_spec``."""
        return self.SPEC.pack(self.val_off, int(self.kind), self.reg_offset, int(self.signed), self.bitshift)

    def convert(self, raw: int) -> int:
        """What ``bpf_usdt_arg()`` returns for ``raw`` (the 8 bytes it fetched, as an
        unsigned integer): truncated to ``size`` bytes and sign-extended when ``signed``."""
        bits = self.size * 8
        raw &= (1 << bits) - 1
        if self.signed and raw >> (bits - 1):
            raw -= 1 << bits
        return raw

    def __str__(self) -> str:
        return self.text


def _register(name: str, text: str) -> str:
    if name not in _ALIASES:
        raise ParseError(f"USDT argument {text!r}: unknown x86-64 register %{name}")
    return name


def parse_arg(text: str) -> USDTArg:
    """Parse one ``SIZE@OPERAND`` argument spec."""
    m = _SPEC.match(text)
    if not m:
        raise ParseError(f"USDT argument {text!r}: expected SIZE@OPERAND (e.g. -4@%eax, 8@$5, -8@-16(%rbp))")
    size = int(m["size"])
    if abs(size) not in (1, 2, 4, 8):
        raise ParseError(f"USDT argument {text!r}: size {size} is not 1, 2, 4 or 8 bytes (negative: signed)")
    op, signed, nbytes = m["op"], size < 0, abs(size)
    if o := _OPERAND.match(op):
        if o["val"] is not None:
            return USDTArg(text.strip(), nbytes, signed, ArgKind.CONST, value=int(o["val"], 0))
        if o["reg"] is not None:
            return USDTArg(text.strip(), nbytes, signed, ArgKind.REG, register=_register(o["reg"], text))
        return USDTArg(text.strip(), nbytes, signed, ArgKind.REG_DEREF, register=_register(o["base"], text),
                       offset=int(o["off"] or "0", 0))
    if _SIB.match(op):
        raise ParseError(
            f"USDT argument {text!r}: a scaled-index operand (OFFSET(%BASE,%INDEX,SCALE)) is not "
            "supported: libbpf's usdt.bpf.h reads one register plus a constant offset"
        )
    if "(" in op:
        raise ParseError(
            f"USDT argument {text!r}: the offset before '(' must be a number (symbolic, e.g. "
            "RIP-relative 'var(%rip)', operands are not supported by libbpf's usdt.bpf.h)"
        )
    raise ParseError(f"USDT argument {text!r}: unrecognised operand {op!r} (want $IMM, %REG, OFF(%REG) or (%REG))")


def parse_args(text: str) -> tuple[USDTArg, ...]:
    """Parse a probe's space-separated argument specs (``-4@%esi -4@-24(%rbp) 8@%rdx``)."""
    parts = _split(text)
    if len(parts) > MAX_ARGS:
        raise ParseError(f"USDT arguments {text!r}: {len(parts)} arguments, usdt.bpf.h takes at most {MAX_ARGS}")
    return tuple(parse_arg(p) for p in parts)


def _split(text: str) -> list[str]:
    """Split on spaces outside parentheses (``-4@8( %rax )`` stays one argument)."""
    parts: list[str] = []
    cur: list[str] = []
    depth = 0
    for ch in text:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch.isspace() and depth <= 0:
            if cur:
                parts.append("".join(cur))
                cur = []
            continue
        cur.append(ch)
    if cur:
        parts.append("".join(cur))
    return parts
