"""Property test: thousands of mutated objects go through the parser and only bpfkit errors
come out (never IndexError, struct.error, KeyError, ... nor a hang).

Mutations aim at the structures the parser trusts: the ELF header, section headers, the
symbol table, relocations, BTF, .BTF.ext and the map sections, with interesting values
(0, -1, large, off-by-one sizes) as well as random bytes and truncation.
"""

from __future__ import annotations

import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import bpfkit
from bpfkit.elf.reader import ElfFile
from bpfkit.errors import BPFKitError

OBJECTS = ["minimal", "loader_basic", "loader_calls", "loader_mapinmap", "loader_legacy", "loader_elfmap", "loader_core"]
INTERESTING = [0, 1, 2, 7, 8, 15, 16, 24, 0x7F, 0x80, 0xFF, 0xFFFF, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFF, 0xFFFFFFFE]


@pytest.fixture(scope="module")
def corpus(request):
    from conftest import bpf_object

    out = []
    for name in OBJECTS:
        data = bpf_object(name).read_bytes()
        elf = ElfFile(data)
        regions = [(0, 64), (elf._shoff, elf._shnum * 64)]
        for sec in elf.sections:
            if sec.name in (".symtab", ".BTF", ".BTF.ext", ".maps", "maps", "license", "version", ".strtab") or \
                    sec.name.startswith(".rel") and not sec.name.startswith(".rel.debug"):
                if sec.size:
                    regions.append((sec.offset, sec.size))
            elif sec.executable and sec.size:
                regions.append((sec.offset, sec.size))
        out.append((data, regions))
    return out


mutation = st.tuples(
    st.sampled_from(["u8", "u16", "u32", "u64", "byte", "truncate", "zero"]),
    st.integers(min_value=0, max_value=1 << 30),  # region choice / offset seed
    st.integers(min_value=0, max_value=1 << 30),
    st.one_of(st.sampled_from(INTERESTING), st.integers(min_value=0, max_value=0xFFFFFFFF)),
)


def mutate(data: bytes, regions, mutations) -> bytes:
    buf = bytearray(data)
    for kind, pick, seed, value in mutations:
        start, size = regions[pick % len(regions)]
        pos = start + seed % max(size, 1)
        if kind == "truncate":
            del buf[pos:]
            continue
        if pos >= len(buf):
            continue
        if kind == "byte":
            buf[pos] = value & 0xFF
        elif kind == "zero":
            buf[pos : pos + 8] = bytes(min(8, len(buf) - pos))
        else:
            fmt = {"u8": "<B", "u16": "<H", "u32": "<I", "u64": "<Q"}[kind]
            width = struct.calcsize(fmt)
            if pos + width <= len(buf):
                struct.pack_into(fmt, buf, pos, value & ((1 << (8 * width)) - 1))
    return bytes(buf)


def parse_or_bpfkit_error(data: bytes) -> None:
    try:
        spec = bpfkit.load_spec(data)
    except BPFKitError:
        return
    # A spec that parsed must be usable: touch what inspect shows.
    for prog in spec.programs.values():
        assert len(prog.instructions) % 8 == 0
    for var in spec.variables.values():
        var.value


# Each example applies its mutations to three objects: 1000 examples, 3000 mutated objects.
@settings(max_examples=1000, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(which=st.integers(min_value=0, max_value=len(OBJECTS) - 1), mutations=st.lists(mutation, min_size=1, max_size=4))
def test_mutated_objects_raise_only_bpfkit_errors(corpus, which, mutations):
    for k in range(3):
        data, regions = corpus[(which + 2 * k) % len(corpus)]
        parse_or_bpfkit_error(mutate(data, regions, mutations))


@settings(max_examples=200, deadline=None, derandomize=True)
@given(st.binary(max_size=512))
def test_random_bytes(blob):
    parse_or_bpfkit_error(blob)
    parse_or_bpfkit_error(b"\x7fELF\x02\x01\x01" + blob)
