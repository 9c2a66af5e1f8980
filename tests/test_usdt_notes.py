# SPDX-License-Identifier: Apache-2.0
"""USDT note and argument-spec parsing (bpfkit.usdt.notes/args): no kernel, no root.

The real binary is integration/usdt/usdt_target.c built with gcc and sys/sdt.h; synthetic
notes check what gcc does not produce here (prelinked addresses, a .bss semaphore,
scaled-index operands, 32-bit and big-endian notes).
"""

from __future__ import annotations

import shutil
import struct
import subprocess

import pytest

from bpfkit.errors import NotFoundError, ParseError
from bpfkit.usdt import ArgKind, USDTArg, find_probes, parse_arg, parse_args, parse_notes, parse_probes, read_probes
from bpfkit.link.usdt import SPEC_SIZE, pack_spec
from integration.usdt.build import build_usdt_target, missing_tools


@pytest.fixture(scope="module")
def target(tmp_path_factory):
    why = missing_tools()
    if why:
        pytest.skip(why)
    return build_usdt_target(tmp_path_factory.mktemp("usdt"))


def _nm(path, symbol):
    out = subprocess.run(["nm", str(path)], capture_output=True, text=True, check=True).stdout
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[2] == symbol:
            return int(parts[0], 16)
    raise AssertionError(f"{symbol} not in {path}")


def _section(path, name):
    out = subprocess.run(["readelf", "-SW", str(path)], capture_output=True, text=True, check=True).stdout
    for line in out.splitlines():
        fields = line.replace("[ ", "[").split()
        if len(fields) > 5 and fields[1] == name:
            return int(fields[3], 16), int(fields[4], 16)  # address, file offset
    raise AssertionError(f"{name} not in {path}")


# ------------------------------------------------------------------ the built binary
def test_probes_of_built_binary(target):
    probes = read_probes(str(target))
    assert [p.full_name for p in probes] == ["bpfkit:tick", "bpfkit:twice", "bpfkit:twice"]
    tick = probes[0]
    sema = _nm(target, "bpfkit_tick_semaphore")
    probes_addr, probes_off = _section(target, ".probes")
    assert tick.semaphore == sema
    assert tick.semaphore_offset == sema - probes_addr + probes_off
    assert all(p.semaphore == 0 and p.semaphore_offset == 0 for p in probes[1:])
    assert not tick.shared  # built -no-pie: ET_EXEC
    # file offsets: through the executable PT_LOAD (.text at 0x401xxx, offset 0x1xxx)
    text_addr, text_off = _section(target, ".text")
    assert text_addr != text_off
    assert all(p.file_offset == p.address - text_addr + text_off for p in probes)
    assert probes[1].address != probes[2].address


def test_probes_of_pie_binary(tmp_path):
    why = missing_tools()
    if why:
        pytest.skip(why)
    pie = build_usdt_target(tmp_path, pie=True)
    probes = read_probes(str(pie))
    assert [p.full_name for p in probes] == ["bpfkit:tick", "bpfkit:twice", "bpfkit:twice"]
    assert all(p.shared for p in probes)
    assert probes[0].semaphore == _nm(pie, "bpfkit_tick_semaphore")
    text_addr, text_off = _section(pie, ".text")
    assert all(p.file_offset == p.address - text_addr + text_off for p in probes)


def test_args_of_built_binary(target):
    tick = find_probes(read_probes(str(target)), "bpfkit", "tick")[0]
    args = tick.args
    assert [a.size for a in args] == [4, 4, 4, 4, 8, 1]
    assert all(a.signed for a in args)
    assert args[1].kind == ArgKind.CONST and args[1].value == 5
    assert args[2].kind == ArgKind.REG_DEREF  # a volatile stack slot
    assert {a.kind for a in args} == {ArgKind.CONST, ArgKind.REG, ArgKind.REG_DEREF}
    twice = find_probes(read_probes(str(target)), None, "twice")
    assert [s.args[0].value for s in twice] == [1, 2]


def test_find_probes_errors(target):
    probes = read_probes(str(target))
    with pytest.raises(NotFoundError, match=r"no USDT probe bpfkit:nope .*it has bpfkit:tick, bpfkit:twice"):
        find_probes(probes, "bpfkit", "nope")
    with pytest.raises(NotFoundError, match="no USDT probe other:tick"):
        find_probes(probes, "other", "tick")


def test_binary_without_notes(tmp_path):
    if not shutil.which("gcc"):
        pytest.skip("gcc is not installed")
    src = tmp_path / "plain.c"
    src.write_text("int main(void) { return 0; }\n")
    subprocess.run(["gcc", "-o", str(tmp_path / "plain"), str(src)], check=True)
    assert read_probes(str(tmp_path / "plain")) == []
    with pytest.raises(NotFoundError, match="no .note.stapsdt notes"):
        find_probes([], "p", "n", str(tmp_path / "plain"))


def test_not_elf(tmp_path):
    (tmp_path / "x").write_bytes(b"#!/bin/sh\n")
    with pytest.raises(ParseError, match="not an ELF file"):
        read_probes(str(tmp_path / "x"))
    with pytest.raises(NotFoundError):
        read_probes(str(tmp_path / "absent"))


# ------------------------------------------------------------------ synthetic notes
def _note(provider, name, args, pc, base, sema, *, is64=True, little=True, owner=b"stapsdt", ntype=3):
    e = "<" if little else ">"
    desc = struct.pack(e + ("QQQ" if is64 else "III"), pc, base, sema) + b"\0".join(
        s.encode() for s in (provider, name, args)) + b"\0"
    owner_z = owner + b"\0"
    pad = lambda b: b + b"\0" * (-len(b) % 4)  # noqa: E731
    return struct.pack(e + "III", len(owner_z), len(desc), ntype) + pad(owner_z) + pad(desc)


def test_parse_notes_raw():
    data = (_note("p", "a", "-4@%eax", 0x1000, 0x2000, 0x3000)
            + _note("gnu", "x", "", 1, 2, 3, owner=b"GNU")  # another owner: skipped
            + _note("p", "b", "", 0x1100, 0x2000, 0))
    notes = parse_notes(data)
    assert [(n.provider, n.name, n.pc, n.base, n.semaphore, n.args) for n in notes] == [
        ("p", "a", 0x1000, 0x2000, 0x3000, "-4@%eax"), ("p", "b", 0x1100, 0x2000, 0, "")]
    assert parse_notes(_note("q", "c", "8@%rdi", 0x10, 0x20, 0, is64=False, little=False), is64=False, little=False)[0].pc == 0x10
    with pytest.raises(ParseError, match="runs past the end"):
        parse_notes(_note("p", "a", "", 1, 2, 3)[:-8])


_ASM = r"""
        .text
        .globl main
main:   nop
site_a: nop
site_b: nop
        xor %eax, %eax
        ret
        .section .stapsdt.base,"aG",@progbits,.stapsdt.base,comdat
        .weak _.stapsdt.base
        .hidden _.stapsdt.base
_.stapsdt.base: .space 1
        .section .probes,"aw",@progbits
        .globl sema_a
sema_a: .2byte 0
        .bss
        .globl sema_bss
sema_bss: .2byte 0
        .section .note.stapsdt,"?","note"
        /* prelinked: every address in the notes is DELTA below the real one */
        NOTE site_a, sema_a, "prov", "a", "-4@-16(%rbp) 8@(%rsp) 2@$-3"
        NOTE site_b, 0, "prov", "sib", "-4@8(%rax,%rdx,4) 8@var(%rip)"
        NOTE site_b, sema_bss, "prov", "bss", ""
"""
_NOTE_MACRO = r"""
        .macro NOTE pc, sema, provider, name, args
        .balign 4
        .4byte 992f-991f, 994f-993f, 3
991:    .asciz "stapsdt"
992:    .balign 4
993:    .8byte \pc - DELTA
        .8byte _.stapsdt.base - DELTA
        .ifc \sema,0
        .8byte 0
        .else
        .8byte \sema - DELTA
        .endif
        .asciz "\provider"
        .asciz "\name"
        .asciz "\args"
994:    .balign 4
        .endm
        .set DELTA, 0x1000
"""


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory):
    if not shutil.which("gcc"):
        pytest.skip("gcc is not installed")
    d = tmp_path_factory.mktemp("usdt_syn")
    (d / "syn.s").write_text(_NOTE_MACRO + _ASM)
    subprocess.run(["gcc", "-o", str(d / "syn"), str(d / "syn.s")], check=True, capture_output=True)
    return d / "syn"


def test_prelink_adjustment(synthetic):
    """Notes written DELTA below their real addresses: .stapsdt.base's real address corrects them."""
    probes = parse_probes(synthetic.read_bytes(), str(synthetic))
    a = next(p for p in probes if p.name == "a")
    assert a.note.pc == _nm(synthetic, "site_a") - 0x1000
    assert a.address == _nm(synthetic, "site_a")
    assert a.semaphore == _nm(synthetic, "sema_a")
    probes_addr, probes_off = _section(synthetic, ".probes")
    assert a.semaphore_offset == a.semaphore - probes_addr + probes_off
    text_addr, text_off = _section(synthetic, ".text")
    assert a.file_offset == a.address - text_addr + text_off
    assert [(x.kind, x.size, x.signed, x.register, x.offset, x.value) for x in a.args] == [
        (ArgKind.REG_DEREF, 4, True, "rbp", -16, 0), (ArgKind.REG_DEREF, 8, False, "rsp", 0, 0),
        (ArgKind.CONST, 2, False, "", 0, -3)]


def test_sib_args_listed_but_refused(synthetic):
    sib = next(p for p in parse_probes(synthetic.read_bytes(), str(synthetic)) if p.name == "sib")
    assert sib.args_text == "-4@8(%rax,%rdx,4) 8@var(%rip)"
    assert "scaled-index" in sib.args_error
    with pytest.raises(ParseError, match=r"prov:sib .*scaled-index operand"):
        sib.args


def test_semaphore_in_bss_is_refused(synthetic):
    """A site that cannot be attached lists with its problem; check() (attach) raises it."""
    bss = next(p for p in parse_probes(synthetic.read_bytes(), str(synthetic)) if p.name == "bss")
    assert "(no file contents)" in bss.problem
    with pytest.raises(ParseError, match=r"prov:bss .*semaphore .* is in .bss \(no file contents\)"):
        bss.check()


# ------------------------------------------------------------------ argument specs
@pytest.mark.parametrize("text, kind, size, signed, reg, reg_off, offset, value", [
    ("-4@%eax", ArgKind.REG, 4, True, "eax", 80, 0, 0),
    ("8@%rdi", ArgKind.REG, 8, False, "rdi", 112, 0, 0),
    ("4@$5", ArgKind.CONST, 4, False, "", 0, 0, 5),
    ("-4@$-9", ArgKind.CONST, 4, True, "", 0, 0, -9),
    ("-8@-16(%rbp)", ArgKind.REG_DEREF, 8, True, "rbp", 32, -16, 0),
    ("8@8(%rax)", ArgKind.REG_DEREF, 8, False, "rax", 80, 8, 0),
    ("8@(%rsp)", ArgKind.REG_DEREF, 8, False, "rsp", 152, 0, 0),
    ("1@%sil", ArgKind.REG, 1, False, "sil", 104, 0, 0),
    ("-2@%r9w", ArgKind.REG, 2, True, "r9w", 64, 0, 0),
    ("-1@%r15b", ArgKind.REG, 1, True, "r15b", 0, 0, 0),
    ("4@%r8d", ArgKind.REG, 4, False, "r8d", 72, 0, 0),
    ("2@%ax", ArgKind.REG, 2, False, "ax", 80, 0, 0),
    ("-1@%al", ArgKind.REG, 1, True, "al", 80, 0, 0),
    ("8@0x10(%r12)", ArgKind.REG_DEREF, 8, False, "r12", 24, 16, 0),
])
def test_parse_arg(text, kind, size, signed, reg, reg_off, offset, value):
    a = parse_arg(text)
    assert (a.kind, a.size, a.signed, a.register, a.reg_offset, a.offset, a.value) == (
        kind, size, signed, reg, reg_off, offset, value)
    assert a.bitshift == 64 - size * 8


@pytest.mark.parametrize("text, message", [
    ("-4@8(%rax,%rdx,4)", "scaled-index operand"),
    ("8@(,%rdx,8)", "scaled-index operand"),
    ("8@counter(%rip)", "must be a number"),
    ("3@%eax", "size 3 is not 1, 2, 4 or 8"),
    ("16@%rax", "size 16"),
    ("%eax", "expected SIZE@OPERAND"),
    ("4@%xmm0", "unknown x86-64 register %xmm0"),
    ("4@eax", "unrecognised operand"),
])
def test_bad_arg_specs(text, message):
    with pytest.raises(ParseError, match=message):
        parse_arg(text)


def test_parse_args_and_limits():
    assert [a.text for a in parse_args("-4@%esi -4@-24(%rbp) 8@$5")] == ["-4@%esi", "-4@-24(%rbp)", "8@$5"]
    assert parse_args("") == ()
    with pytest.raises(ParseError, match="13 arguments, usdt.bpf.h takes at most 12"):
        parse_args(" ".join(["8@%rax"] * 13))


def test_convert_like_usdt_bpf_h():
    assert parse_arg("-4@%eax").convert(0xFFFFFFFF) == -1
    assert parse_arg("4@%eax").convert(0x1_FFFFFFFF) == 0xFFFFFFFF
    assert parse_arg("-1@%al").convert(0x80) == -128
    assert parse_arg("8@%rax").convert(2**64 - 1) == 2**64 - 1


def test_spec_layout():
    """struct __bpf_usdt_spec of libbpf 1.1's usdt.bpf.h: 12 x 16-byte arg specs, u64 cookie, short count."""
    assert USDTArg.SPEC.size == 16
    raw = pack_spec(parse_args("-4@-16(%rbp) 8@%rdi -2@$-3"), usdt_cookie=0x1122)
    assert len(raw) == SPEC_SIZE == 208
    assert struct.unpack_from("<QIhbb", raw, 0) == ((-16) & (2**64 - 1), 2, 32, 1, 32)
    assert struct.unpack_from("<QIhbb", raw, 16) == (0, 1, 112, 0, 0)
    assert struct.unpack_from("<QIhbb", raw, 32) == ((-3) & (2**64 - 1), 0, 0, 1, 48)
    assert raw[48:192] == bytes(144)
    assert struct.unpack_from("<Qh", raw, 192) == (0x1122, 3)


# ------------------------------------------------------------------ bpfkit usdt list
def test_cli_list(target, synthetic, capsys):
    import json

    from bpfkit.cli.main import main

    assert main(["usdt", "list", str(target)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].split()[:3] == ["PROBE", "ADDRESS", "FILE"]
    tick = next(line for line in out if line.startswith("bpfkit:tick"))
    assert "s32@$5" in tick and "s64@" in tick and "s8@" in tick
    assert sum(line.startswith("bpfkit:twice") for line in out) == 2
    assert main(["usdt", "list", str(target), "bpfkit:tick", "--json"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert len(rows) == 1 and rows[0]["name"] == "tick" and rows[0]["semaphore"] == _nm(target, "bpfkit_tick_semaphore")
    assert rows[0]["args"][1] == {"size": 4, "signed": True, "kind": "const", "register": None, "offset": 0, "value": 5}
    assert main(["usdt", "list", str(synthetic)]) == 0
    out = capsys.readouterr().out
    assert "unsupported" in out and "scaled-index" in out and "no file contents" in out
    assert main(["usdt", "list", str(target), "bpfkit:nope"]) == 1
    assert "no USDT probe bpfkit:nope" in capsys.readouterr().err
