# SPDX-License-Identifier: Apache-2.0
"""Property test: mutated objects go through the parser and only bpfkit errors come out (never
IndexError, struct.error, KeyError, ... nor a hang).

Mutations aim at the structures the parser trusts: the ELF header, section headers, the
symbol table, relocations, BTF, .BTF.ext and the map sections, with interesting values
(0, -1, large, off-by-one sizes) as well as random bytes and truncation.

Each run draws new cases from a seed that pytest's header shows ("bpfkit fuzz seed: N");
``BPFKIT_FUZZ_SEED=N`` replays that run. Every input that ever failed is kept in
tests/corpus/ (the smallest one per failure site: exception type and innermost frame; commit
it with the fix) and replayed by every run, whatever the seed.
"""

from __future__ import annotations

import hashlib
import os
import signal
import struct
import sys
import traceback
from contextlib import contextmanager
from pathlib import Path
from typing import Callable

import pytest
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st

import bpfkit
from bpfkit.elf.reader import SHT_DYNSYM, SHT_GNU_VERDEF, SHT_GNU_VERNEED, SHT_GNU_VERSYM, SHT_NOTE, SHT_SYMTAB, ElfFile, ElfImage, SymbolTable
from bpfkit.errors import BPFKitError
from conftest import fuzz_seed

CORPUS = Path(__file__).resolve().parent / "corpus"
SEED = fuzz_seed()
EXAMPLES = int(os.environ.get("BPFKIT_FUZZ_EXAMPLES", "1000"))  # raise it to hunt longer
PARSE_DEADLINE = 10  # seconds for one input: the largest test object parses in ~50 ms

OBJECTS = ["minimal", "loader_basic", "loader_calls", "loader_mapinmap", "loader_legacy", "loader_elfmap", "loader_core",
           "core_externs", "usdt_args", "tracing_fentry", "hostile_prog_escape"]
INTERESTING = [0, 1, 2, 7, 8, 15, 16, 24, 0x7F, 0x80, 0xFF, 0xFFFF, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFF, 0xFFFFFFFE]


@pytest.fixture(scope="module")
def objects(request):
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
    # A spec that parsed must be usable: touch what inspect shows. BTF is parsed lazily, so a
    # malformed type may first show here (corpus d8e12fa9...: a qualifier loop found by
    # var.value); that is still a bpfkit error, which `bpfkit inspect` reports (exit 2).
    try:
        for prog in spec.programs.values():
            assert len(prog.instructions) % 8 == 0
        for var in spec.variables.values():
            var.value
    except BPFKitError:
        return


class Hang(Exception):
    """The parser took longer than PARSE_DEADLINE on one input."""


@contextmanager
def deadline(seconds: int):
    def expired(signum, frame):
        raise Hang(f"parsing took over {seconds} s")

    previous = signal.signal(signal.SIGALRM, expired)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def _site(exc: BaseException) -> str:
    """Where a failure happened: exception type and innermost frame (file:line)."""
    frames = traceback.extract_tb(exc.__traceback__)
    last = frames[-1] if frames else None
    where = f"{os.path.basename(last.filename)}:{last.lineno}" if last else "?"
    return f"{type(exc).__name__}@{where}"


def remember(data: bytes, exc: BaseException) -> str:
    """Keep ``data`` in the corpus as the input for its failure site (the smallest one seen)."""
    site = _site(exc)
    path = CORPUS / f"{hashlib.sha256(site.encode()).hexdigest()[:16]}.bin"
    try:
        if path.exists() and path.stat().st_size <= len(data):
            return f"{path} (an input of {path.stat().st_size} bytes for {site} is kept there)"
        CORPUS.mkdir(exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_bytes(data)
        tmp.replace(path)
        with (CORPUS / "SITES").open("a") as sites:
            sites.write(f"{path.name} {site}\n")
        return f"{path} ({site})"
    except OSError as err:  # a read-only tree (a VM guest)
        return f"nowhere: {CORPUS} is not writable ({err.strerror})"


def check(data: bytes, parse: Callable[[bytes], None] | None = None) -> None:
    """``parse`` (parse_or_bpfkit_error), bounded in time; a failing input goes to the corpus."""
    try:
        with deadline(PARSE_DEADLINE):
            (parse or parse_or_bpfkit_error)(data)
    except Exception as exc:
        exc.add_note(f"input of {len(data)} bytes kept in {remember(data, exc)}; "
                     f"replay this run with BPFKIT_FUZZ_SEED={SEED}")
        raise


# Each example applies its mutations to three objects: 1000 examples, 3000 mutated objects,
# new ones each run (the seed); BPFKIT_FUZZ_EXAMPLES=N runs N examples.
@seed(SEED)
@settings(max_examples=EXAMPLES, deadline=None, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(which=st.integers(min_value=0, max_value=len(OBJECTS) - 1), mutations=st.lists(mutation, min_size=1, max_size=4))
def test_mutated_objects_raise_only_bpfkit_errors(objects, which, mutations):
    for k in range(3):
        data, regions = objects[(which + 2 * k) % len(objects)]
        check(mutate(data, regions, mutations))


@seed(SEED)
@settings(max_examples=200, deadline=None, database=None)
@given(st.binary(max_size=512))
def test_random_bytes(blob):
    check(blob)
    check(b"\x7fELF\x02\x01\x01" + blob)


def test_corpus() -> None:
    """Every input that ever failed, replayed every run (tests/corpus/*.bin), through both the
    object parser and the binary reader (symbol tables, versions, notes)."""
    failed = []
    for path in sorted(CORPUS.glob("*.bin")):
        try:
            with deadline(PARSE_DEADLINE):
                parse_or_bpfkit_error(path.read_bytes())
                read_binary_or_bpfkit_error(path.read_bytes())
        except Exception as exc:  # noqa: BLE001 - report every input, not just the first
            failed.append(f"{path.name}: {_site(exc)}: {exc}")
    assert not failed, "corpus inputs fail again:\n" + "\n".join(failed)


def test_a_failing_input_is_kept_and_named(tmp_path, monkeypatch) -> None:
    """The harness itself: a parser crash (simulated: the parser has none known) puts the input
    in the corpus, once per failure site, keeping the smallest, and the error names the seed."""
    monkeypatch.setattr(sys.modules[__name__], "CORPUS", tmp_path)

    def crash(data: bytes) -> None:
        raise IndexError("index out of range")

    monkeypatch.setattr(bpfkit, "load_spec", crash)
    for data in (b"\x7fELF" + bytes(60), b"\x7fELF" + bytes(10), b"\x7fELF" + bytes(30)):
        with pytest.raises(IndexError) as info:
            check(data)
        assert f"replay this run with BPFKIT_FUZZ_SEED={SEED}" in info.value.__notes__[0]
    kept = list(tmp_path.glob("*.bin"))
    assert len(kept) == 1 and kept[0].read_bytes() == b"\x7fELF" + bytes(10)
    assert "IndexError@test_fuzz_elf.py:" in (tmp_path / "SITES").read_text()


# ------------------------------------------------------------- binaries: the unified reader
# The same reader serves executables and shared objects (uprobes, USDT, the process tracker):
# their symbol tables, symbol versions, program headers and notes are mutated here too.
BINARY_SECTIONS = (SHT_SYMTAB, SHT_DYNSYM, SHT_GNU_VERSYM, SHT_GNU_VERDEF, SHT_GNU_VERNEED, SHT_NOTE)
BINARY_NAMES = (".dynstr", ".strtab", ".stapsdt.base", ".dynamic", ".probes")


def read_binary_or_bpfkit_error(data: bytes) -> None:
    """Everything uprobes, USDT and the process tracker read from a binary: only bpfkit errors."""
    from bpfkit.usdt.notes import parse_probes

    try:
        table = SymbolTable.from_bytes(data, "<fuzz>")
        for sym in table.symbols[:64]:
            table.resolve(sym.full_name)
            table.resolve(sym.name)
            table.file_offset(sym.value)
            table.symbolize(sym.value)
        table.functions
    except BPFKitError:
        pass
    try:
        for probe in parse_probes(data, "<fuzz>"):
            probe.args_error
    except BPFKitError:
        pass


def _binary_regions(data: bytes) -> list[tuple[int, int]]:
    elf = ElfImage(data)
    regions = [(0, 64), (elf._shoff, elf._shnum * elf._shdr.size), (elf._phoff, elf._phnum * elf._phentsize)]
    regions += [(s.offset, s.size) for s in elf.sections
                if s.size and (s.type in BINARY_SECTIONS or s.name in BINARY_NAMES)]
    return regions


@pytest.fixture(scope="module")
def binaries(tmp_path_factory):
    """A USDT target (notes, a semaphore, .symtab; PIE and not) and the host's libc (.dynsym
    with version definitions, default and hidden versions)."""
    from bpfkit.link._binary import resolve_binary
    from integration.usdt.build import build_usdt_target, missing_tools

    paths = [Path(resolve_binary("libc"))]
    if not missing_tools():
        out = tmp_path_factory.mktemp("fuzz-usdt")
        paths += [build_usdt_target(out), build_usdt_target(out, pie=True)]
    out = []
    for path in paths:
        data = path.read_bytes()
        read_binary_or_bpfkit_error(data)  # the unmutated file parses
        out.append((data, _binary_regions(data)))
    return out


@seed(SEED)
@settings(max_examples=max(EXAMPLES // 4, 50), deadline=None, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(which=st.integers(min_value=0, max_value=2), mutations=st.lists(mutation, min_size=1, max_size=4))
def test_mutated_binaries_raise_only_bpfkit_errors(binaries, which, mutations):
    data, regions = binaries[which % len(binaries)]
    check(mutate(data, regions, mutations), read_binary_or_bpfkit_error)


@seed(SEED)
@settings(max_examples=200, deadline=None, database=None)
@given(st.binary(max_size=512))
def test_random_notes(blob):
    """Note sections of any content: only bpfkit errors out of the note walker."""
    from bpfkit.usdt.notes import parse_notes

    for is64 in (True, False):
        try:
            parse_notes(blob, is64=is64)
        except BPFKitError:
            pass
