# SPDX-License-Identifier: Apache-2.0
"""Which map an ld_imm64 names (issue #18 item 1).

clang writes a map reference as a relocation against a symbol plus an addend in the
instruction's imm: against the map's own symbol with imm 0 for a global map, against the
*section* symbol with imm = the map's offset for a ``static`` one. The map is the one at
symbol value + imm; binding by the symbol alone put every static map's reference on the
section's first map. Static maps are refused as libbpf and cilium/ebpf refuse them, and a
reference is resolved by value + imm wherever it comes from.
"""

from __future__ import annotations

import bisect
import struct
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import bpfkit
from bpfkit.elf.reader import SHF_EXECINSTR, STT_FUNC, STT_SECTION, ElfFile
from bpfkit.errors import ParseError
from bpfkit.program import RefKind

from .clang_objects import build_c, two_maps

MAP_SECTIONS = (".maps", "maps")
_REL = struct.Struct("<QQ")


@pytest.fixture(scope="module")
def out_dir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("maprefs")


@pytest.mark.parametrize("section", MAP_SECTIONS)
def test_static_maps_are_refused(out_dir, section):
    data = build_c(two_maps(section, static=True), out_dir)
    # clang references static maps through the section symbol (imm = the map's offset);
    # before the fix 'p' parsed and loaded bound to 'first'.
    with pytest.raises(ParseError, match=rf"map 'first': unsupported map linkage static \(in section '{section}'\); "
                                         r"map definitions must be global variables: drop 'static'"):
        bpfkit.load_spec(data)


def test_static_non_map_data_is_still_fine(out_dir):
    # Static variables in data sections use the same section-symbol form and stay supported.
    src = 'static volatile __u64 a, b = 7;\nSEC("xdp") int p(void *c) { a += b; return 2; }'
    spec = bpfkit.load_spec(build_c(src, out_dir))
    assert {r.offset for r in spec.programs["p"].references} == {spec.variables["a"].offset, spec.variables["b"].offset}


# ------------------------------------------------------------------ relocation rewriting
def map_symbols(elf: ElfFile, section: str) -> list[tuple[int, int, str]]:
    """(start, end, name) of the map symbols of ``section``, sorted; the end of a symbol of
    size 0 is the next symbol's start (legacy records are all the same size)."""
    sec = elf.by_name[section]
    syms = sorted((s.value, s.size, s.name) for s in elf.symbols
                  if s.shndx == sec.index and s.type != STT_SECTION and s.name)
    out = []
    for i, (value, size, name) in enumerate(syms):
        end = value + size if size else (syms[i + 1][0] if i + 1 < len(syms) else sec.size)
        out.append((value, end, name))
    return out


def covering(ranges: list[tuple[int, int, str]], offset: int) -> str | None:
    pos = bisect.bisect_right([r[0] for r in ranges], offset) - 1
    if pos >= 0 and ranges[pos][0] <= offset < ranges[pos][1]:
        return ranges[pos][2]
    return None


def map_relocations(elf: ElfFile) -> list[tuple[int, int, int, int, str, int]]:
    """Every ld_imm64 relocation into a map section: (entry file offset, insn file offset,
    insn section index, insn index, map section name, symbol value)."""
    out = []
    for rel_sec, target in elf.relocation_sections():
        if not target.flags & SHF_EXECINSTR:
            continue
        for i, rel in enumerate(elf.relocations(rel_sec)):
            if rel.symbol.shndx >= len(elf.sections):
                continue
            name = elf.sections[rel.symbol.shndx].name
            if name in MAP_SECTIONS and target.data[rel.offset] == 0x18:
                out.append((rel_sec.offset + i * _REL.size, target.offset + rel.offset, target.index,
                            rel.offset // 8, name, rel.symbol.value))
    return out


def expected_bindings(data: bytes) -> dict[tuple[int, int], str]:
    """(section index, insn index) -> the map whose symbol covers symbol value + imm,
    worked out from the ELF alone (independently of bpfkit's loader)."""
    elf = ElfFile(data)
    out = {}
    for _entry, insn_off, sec_index, insn, section, value in map_relocations(elf):
        (imm,) = struct.unpack_from("<i", data, insn_off + 4)
        found = covering(map_symbols(elf, section), value + imm)
        assert found is not None, f"relocation at insn {insn} targets no map symbol"
        out[(sec_index, insn)] = found
    return out


def actual_bindings(data: bytes) -> dict[tuple[int, int], str]:
    """(section index, insn index) -> the map bpfkit's parsed programs reference there."""
    elf = ElfFile(data)
    spec = bpfkit.load_spec(data)
    funcs = {s.name: (s.shndx, s.value // 8) for s in elf.symbols if s.type == STT_FUNC}
    out: dict[tuple[int, int], str] = {}
    for prog in spec.programs.values():
        placed = sorted((start, name) for name, start in prog.functions)
        for ref in prog.references:
            if ref.kind != RefKind.MAP_FD:
                continue
            start, fname = placed[bisect.bisect_right([p[0] for p in placed], ref.insn) - 1]
            shndx, fstart = funcs[fname]
            key = (shndx, fstart + ref.insn - start)
            assert out.setdefault(key, ref.map) == ref.map, f"{key} bound to two maps"
    return out


def retarget(data: bytes, entry_off: int, insn_off: int, symbol: int, imm: int) -> bytes:
    """The object with one relocation entry pointed at ``symbol`` and its insn's imm set."""
    buf = bytearray(data)
    r_offset, info = _REL.unpack_from(buf, entry_off)
    _REL.pack_into(buf, entry_off, r_offset, (symbol << 32) | (info & 0xFFFFFFFF))
    struct.pack_into("<i", buf, insn_off + 4, imm)
    return bytes(buf)


def base_symbol(elf: ElfFile, section: str):
    """The section symbol of ``section`` if clang emitted one, else its lowest map symbol:
    either way a symbol at offset 0 that a reference to a later map must add an imm to."""
    sec = elf.by_name[section]
    syms = [s for s in elf.symbols if s.shndx == sec.index]
    return min(syms, key=lambda s: (s.value, s.type != STT_SECTION))


@pytest.mark.parametrize("section", MAP_SECTIONS)
def test_symbol_plus_imm_binds_the_map_at_that_offset(out_dir, section):
    data = build_c(two_maps(section, static=False), out_dir)
    elf = ElfFile(data)
    ranges = {name: (start, end) for start, end, name in map_symbols(elf, section)}
    base = base_symbol(elf, section)
    second = [r for r in map_relocations(elf) if r[5] == ranges["second"][0]]
    assert len(second) == 1  # the reference in 'p'
    entry, insn_off, *_ = second[0]
    # 'p' now says "base symbol + offset of 'second'", as clang writes a static map's reference.
    patched = retarget(data, entry, insn_off, base.index, ranges["second"][0])
    assert [r.map for r in bpfkit.load_spec(patched).programs["p"].references] == ["second"]
    assert actual_bindings(patched) == expected_bindings(patched)
    # Into the middle of 'second': no map starts there.
    inside = retarget(data, entry, insn_off, base.index, ranges["second"][0] + 8)
    with pytest.raises(ParseError, match=r"program 'p' \(section 'xdp'\): ld_imm64 at instruction \d+ refers to "
                                         rf"'{base.name}'\+{ranges['second'][0] + 8}, byte 8 inside map 'second' "
                                         "rather than the map itself"):
        bpfkit.load_spec(inside)
    past = retarget(data, entry, insn_off, base.index, 4096)
    with pytest.raises(ParseError, match=rf"refers to '{base.name}'\+4096 \(offset 4096 of '{section}'\), which is no map"):
        bpfkit.load_spec(past)


# ------------------------------------------------------------------------ the corpus
def corpus() -> list[str]:
    from conftest import BPF_OUT, bpf_object

    bpf_object("minimal")  # builds bpf/ once
    return sorted(p.name for p in BPF_OUT.glob("*.o"))


@pytest.fixture(scope="module")
def corpus_objects() -> dict[str, bytes]:
    from conftest import BPF_OUT

    out = {}
    for name in corpus():
        data = (BPF_OUT / name).read_bytes()
        try:
            bpfkit.load_spec(data)
        except ParseError:
            continue  # objects made to be refused (loader_bad, core_bad ...) have nothing to bind
        out[name] = data
    return out


def test_every_corpus_map_reference_binds_the_covering_map(corpus_objects):
    checked = 0
    for name, data in corpus_objects.items():
        expected = expected_bindings(data)
        actual = actual_bindings(data)
        # Every reference bpfkit made is the covering map; every relocation in a function some
        # program reaches was made into a reference.
        assert {k: v for k, v in expected.items() if k in actual} == actual, name
        assert set(actual) <= set(expected), name
        checked += len(actual)
    assert checked > 20, "the corpus should hold a good number of map references"


@settings(max_examples=300, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(pick=st.integers(min_value=0, max_value=1 << 30), slack=st.sampled_from([0, 0, 0, 4, 8, 20, -4]),
       map_pick=st.integers(min_value=0, max_value=1 << 30))
def test_rewritten_references_bind_the_covering_map_or_are_refused(corpus_objects, pick, slack, map_pick):
    """Any map reference rewritten to "base symbol + offset of some map (+ slack)" binds that
    map exactly when the offset is the map's start, and is refused otherwise."""
    candidates = [(name, r) for name, data in corpus_objects.items() for r in map_relocations(ElfFile(data))]
    name, (entry, insn_off, sec_index, insn, section, _value) = candidates[pick % len(candidates)]
    data = corpus_objects[name]
    elf = ElfFile(data)
    ranges = map_symbols(elf, section)
    start, _end, target = ranges[map_pick % len(ranges)]
    base = base_symbol(elf, section)
    patched = retarget(data, entry, insn_off, base.index, start - base.value + slack)
    offset = start + slack
    starts_there = [name for begin, _, name in ranges if begin == offset]
    if starts_there:  # slack 0, or a slack that lands exactly on the next map (20-byte legacy maps)
        target = starts_there[0]
        actual = actual_bindings(patched)
        assert actual.get((sec_index, insn), target) == target
        assert actual == {k: v for k, v in expected_bindings(patched).items() if k in actual}
    else:
        hit = covering(ranges, offset)
        with pytest.raises(ParseError, match="rather than the map itself" if hit else "which is no map"):
            actual_bindings(patched)
