# SPDX-License-Identifier: Apache-2.0
"""The symbolizer against files other users control (issue 35, items 4 and 5): perf maps that
are FIFOs, links to /dev/zero, sparse files of gigabytes; ELF files crafted here whose headers
claim more than they hold (a thousand symbol tables on one string table, tens of thousands of
section headers, a 3 GiB .symtab and 4 GiB of program headers in sparse files, an xz bomb in
.gnu_debugdata). Each must give unnamed frames for its file and one warning, in bounded time
and memory, while the other files are named. Memory is measured in a subprocess (tracemalloc's
peak, under an address-space limit so that an unbounded read fails fast instead of taking the
machine's memory)."""

from __future__ import annotations

import json
import lzma
import os
import struct
import subprocess
import sys
import time
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bpfkit.symbols import Symbolizer
from bpfkit.symbols import elf as symelf

REPO = Path(__file__).resolve().parent.parent
MiB = 1 << 20
GiB = 1 << 30
BASE = 0x400000  # the crafted files' PT_LOAD vaddr (file offset 0)
SHT_PROGBITS, SHT_SYMTAB, SHT_STRTAB, SHT_DYNSYM = 1, 2, 3, 11
FUNC = 0x12  # STB_GLOBAL << 4 | STT_FUNC


def sym(name_off: int, value: int, size: int) -> bytes:
    """An Elf64_Sym of a defined function."""
    return struct.pack("<IBBHQQ", name_off, FUNC, 0, 1, value, size)


def craft(sections: list[dict[str, Any]], *, phnum: int = 1, phentsize: int = 56, pad: int = 4096) -> bytes:
    """An ELF64 little-endian file: header, ``phnum`` program headers (the first a PT_LOAD of
    the whole file at BASE, R+X), the sections' data, .shstrtab, the section headers. A
    section is a dict: name, type, data (bytes) or same (the index of a section whose data it
    shares), link, entsize, size (an sh_size that overrides the data's length)."""
    shstr = bytearray(b"\0")
    names = []
    for s in sections:
        names.append(len(shstr))
        shstr += s["name"].encode() + b"\0"
    shstr_name = len(shstr)
    shstr += b".shstrtab\0"
    out = bytearray(64 + phnum * phentsize)
    placed: list[tuple[int, int]] = []
    for s in sections:
        if "same" in s:
            placed.append(placed[s["same"] - 1])
            continue
        out += bytes(-len(out) % 8)
        placed.append((len(out), len(s["data"])))
        out += s["data"]
    shstr_off = len(out)
    out += shstr
    out += bytes(-len(out) % 8)
    if len(out) < pad:
        out += bytes(pad - len(out))
    shoff = len(out)
    shdrs = bytearray(64)  # SHN_UNDEF
    for i, s in enumerate(sections):
        off, size = placed[i]
        shdrs += struct.pack("<IIQQQQIIQQ", names[i], s["type"], 0, 0, off, s.get("size", size), s.get("link", 0), 0,
                             8, s.get("entsize", 0))
    shdrs += struct.pack("<IIQQQQIIQQ", shstr_name, SHT_STRTAB, 0, 0, shstr_off, len(shstr), 0, 0, 1, 0)
    shnum = len(sections) + 2
    out += shdrs
    total = len(out)
    struct.pack_into("<4sBBBB8xHHIQQQIHHHHHH", out, 0, b"\x7fELF", 2, 1, 1, 0, 3, 62, 1, 0, 64, shoff, 0, 64,
                     phentsize, phnum, 64, shnum, shnum - 1)
    if phnum:
        struct.pack_into("<IIQQQQQQ", out, 64, 1, 5, 0, BASE, BASE, total, total, 0x1000)
    return bytes(out)


def good_elf(func: str = "good_func", strtab_pad: int = 0, at: int = 0x100) -> bytes:
    """A file naming ``func`` at BASE + ``at`` (0x40 bytes) in its .symtab."""
    strtab = b"\0" + func.encode() + b"\0" + bytes(strtab_pad)
    return craft([{"name": ".strtab", "type": SHT_STRTAB, "data": strtab},
                  {"name": ".symtab", "type": SHT_SYMTAB, "data": bytes(24) + sym(1, BASE + at, 0x40), "link": 1,
                   "entsize": 24}])


def many_symtabs(n: int, strtab_size: int) -> bytes:
    """``n`` symbol tables (one .symtab, the rest copies of its headers) all linking to one
    string table of ``strtab_size`` bytes."""
    strtab = b"\0good_func\0" + bytes(strtab_size)
    table = {"name": ".symtab", "type": SHT_SYMTAB, "data": bytes(24) + sym(1, BASE + 0x100, 0x40), "link": 1,
             "entsize": 24}
    copies = [{"name": ".symtab", "type": SHT_SYMTAB, "same": 2, "link": 1, "entsize": 24} for _ in range(n - 1)]
    return craft([{"name": ".strtab", "type": SHT_STRTAB, "data": strtab}, table, *copies])


def run_measured(code: str, timeout: float = 120, address_space: int = 3 * GiB // 2) -> dict[str, Any]:
    """Run ``code`` (which sets ``result``) in a subprocess under an address-space limit, with
    tracemalloc on and warnings recorded: {"result", "peak", "warnings", "seconds"}."""
    prelude = f"""
import json, resource, sys, time, tracemalloc, warnings
resource.setrlimit(resource.RLIMIT_AS, ({address_space}, {address_space}))
from bpfkit.symbols import Symbolizer
warnings.simplefilter("always")
tracemalloc.start()
t0 = time.monotonic()
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
"""
    body = "".join(f"    {line}\n" for line in code.strip().splitlines())
    tail = """
print(json.dumps({"result": result, "peak": tracemalloc.get_traced_memory()[1], "seconds": time.monotonic() - t0,
                  "warnings": [str(w.message) for w in caught]}))
"""
    env = dict(os.environ, PYTHONPATH=str(REPO))
    try:
        p = subprocess.run([sys.executable, "-c", prelude + body + tail], capture_output=True, text=True,
                           timeout=timeout, env=env, check=False)
    except subprocess.TimeoutExpired:
        pytest.fail(f"the symbolizer did not finish in {timeout} s")
    assert p.returncode == 0, p.stderr[-3000:]
    out: dict[str, Any] = json.loads(p.stdout.splitlines()[-1])
    return out


def lookup_code(path: Path, offsets: list[int]) -> str:
    return (f"sym = Symbolizer()\nfs = sym.file({str(path)!r})\n"
            f"result = [fs.lookup(o) if fs is not None else 'no symbols' for o in {offsets!r}]")


# ------------------------------------------------------------------ ELF files


def test_symbol_tables_share_one_string_table(tmp_path: Path) -> None:
    """300 SHT_SYMTAB headers linking to one 1 MiB string table: the table is read once (each
    symbol table kept its own copy: 300 MiB), and only the first .symtab is read (the gABI
    allows one)."""
    path = tmp_path / "many.so"
    path.write_bytes(many_symtabs(300, MiB))
    got = run_measured(lookup_code(path, [0x110, 0x150]))
    assert got["result"] == [["good_func", 0x10], None], got
    assert got["peak"] < 8 * MiB, got
    assert got["warnings"] == []


def test_too_many_section_headers(tmp_path: Path) -> None:
    path = tmp_path / "headers.so"
    path.write_bytes(many_symtabs(20_000, 0))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        sym = Symbolizer()
        assert sym.file(str(path)) is None
        assert sym.file(str(path)) is None  # cached: no second warning
    assert [str(w.message) for w in caught] == [
        f"bpfkit: {path}: 20003 section headers, over bpfkit's limit of 16384; no symbols read from it: its frames "
        "show as [headers.so]"]


def test_warning_shows_a_hostile_name_escaped(tmp_path: Path) -> None:
    """The file's name is its owner's choice: a newline or ESC in it is escaped in the warning."""
    path = tmp_path / "evil\n\x1b[2J.so"
    path.write_bytes(many_symtabs(20_000, 0))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert Symbolizer().file(str(path)) is None
    (message,) = [str(w.message) for w in caught]
    assert "\n" not in message and "\x1b" not in message
    assert "evil\\x0a\\x1b[2J.so: 20003 section headers" in message, message


def sparse(path: Path, head: bytes, size: int) -> None:
    with open(path, "wb") as f:
        f.write(head)
        f.truncate(size)


def test_sparse_file_with_a_3_gib_symtab(tmp_path: Path) -> None:
    """.symtab's sh_size is 3 GiB in a sparse file that long: refused by the symbol count
    before anything is read (it was read whole: 3 GiB)."""
    path = tmp_path / "huge.so"
    head = craft([{"name": ".strtab", "type": SHT_STRTAB, "data": b"\0f\0"},
                  {"name": ".symtab", "type": SHT_SYMTAB, "data": bytes(48), "size": 3 * GiB, "link": 1,
                   "entsize": 24}])
    sparse(path, head, 3 * GiB + 8192)
    got = run_measured(lookup_code(path, [0x110]))
    assert got["result"] == ["no symbols"]
    assert got["peak"] < 4 * MiB and got["seconds"] < 10, got
    assert len(got["warnings"]) == 1 and "entries, over bpfkit's limit of 8388608 symbols" in got["warnings"][0]


@pytest.mark.parametrize("phnum,phentsize,why", [
    (65535, 65535, "program header size 65535, expected 56"),
    (2000, 56, "2000 program headers (112000 bytes), over bpfkit's limit of 65536 bytes"),
])
def test_sparse_file_with_gigabytes_of_program_headers(tmp_path: Path, phnum: int, phentsize: int, why: str) -> None:
    """e_phnum x e_phentsize is up to 4 GiB (it was read whole); the kernel's and ld.so's
    loaders take only 56-byte entries and at most 64 KiB of them."""
    path = tmp_path / "phdrs.so"
    head = craft([{"name": ".strtab", "type": SHT_STRTAB, "data": b"\0good_func\0"},
                  {"name": ".symtab", "type": SHT_SYMTAB, "data": bytes(24) + sym(1, BASE + 0x100, 0x40), "link": 1,
                   "entsize": 24}], phnum=1)
    # The program headers claimed start past the real file: a sparse tail holds them.
    raw = bytearray(head)
    struct.pack_into("<Q", raw, 32, len(raw))  # e_phoff
    struct.pack_into("<HH", raw, 54, phentsize, phnum)  # e_phentsize, e_phnum
    sparse(path, bytes(raw), len(raw) + phnum * phentsize)
    got = run_measured(lookup_code(path, [0x110]))
    assert got["result"] == ["no symbols"]
    assert got["peak"] < 4 * MiB, got
    assert len(got["warnings"]) == 1 and why in got["warnings"][0], got


def mini_debug_info_bomb(decompressed: int) -> bytes:
    """A stripped file (.dynsym names exported_func) whose .gnu_debugdata decompresses to
    ``decompressed`` bytes (an ELF header, then zeros)."""
    inner = good_elf("hidden_func", at=0x300)
    xz = lzma.LZMACompressor(format=lzma.FORMAT_XZ, preset=9)
    packed = xz.compress(inner)
    zeros = bytes(16 * MiB)
    for _ in range((decompressed - len(inner)) // len(zeros)):
        packed += xz.compress(zeros)
    packed += xz.flush()
    return craft([{"name": ".dynstr", "type": SHT_STRTAB, "data": b"\0exported_func\0"},
                  {"name": ".dynsym", "type": SHT_DYNSYM, "data": bytes(24) + sym(1, BASE + 0x100, 0x40), "link": 1,
                   "entsize": 24},
                  {"name": ".gnu_debugdata", "type": SHT_PROGBITS, "data": packed}])


def test_mini_debug_info_bomb(tmp_path: Path) -> None:
    """An xz stream of ~40 KB that expands to 240 MiB (it was decompressed up to 256 MiB, and
    the inner file's pieces copied: ~1 GB at the peak): decompressed up to 64 MiB, refused
    with one warning; the file's own .dynsym still names its function."""
    path = tmp_path / "bomb.so"
    path.write_bytes(mini_debug_info_bomb(240 * MiB))
    assert path.stat().st_size < 100_000
    got = run_measured(lookup_code(path, [0x110, 0x200, 0x300]))
    assert got["result"] == [["exported_func", 0x10], None, None], got
    assert got["peak"] < 150 * MiB, got  # 64 MiB, and the decoder's 65 MiB for xz -9
    assert got["warnings"] == [
        f"bpfkit: {path}[.gnu_debugdata]: decompresses to over bpfkit's limit of 64 MiB; MiniDebugInfo not used: "
        f"{path} is named by its own symbols only"], got


def test_mini_debug_info_within_limits_is_read(tmp_path: Path) -> None:
    path = tmp_path / "mini.so"
    path.write_bytes(mini_debug_info_bomb(32 * MiB))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fs = Symbolizer(debug_root=str(tmp_path / "none")).file(str(path))
        assert fs is not None and fs.lookup(0x110) == ("exported_func", 0x10)
        assert fs.lookup(0x310) == ("hidden_func", 0x10)
    assert not caught
    assert fs.sources == [".dynsym", ".gnu_debugdata"]


def test_memory_error_is_one_warning(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A MemoryError while a file is read gives that file no symbols and one warning, not a
    traceback. Mocked: the limits above keep a real one from happening."""
    path = tmp_path / "good.so"
    path.write_bytes(good_elf())

    def no_memory(*args: object, **kwargs: object) -> None:
        raise MemoryError

    monkeypatch.setattr(symelf.FileSymbols, "load", no_memory)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        sym = Symbolizer()
        assert sym.file(str(path)) is None and sym.file(str(path)) is None
    assert [str(w.message) for w in caught] == [
        f"bpfkit: {path}: out of memory reading its symbols; no symbols read from it: its frames show as [good.so]"]


def test_symbol_cache_is_bounded_by_bytes(tmp_path: Path) -> None:
    """Files are evicted past ``max_bytes`` of symbols, not only past ``max_files``; a file
    larger than the whole budget is refused with one warning."""
    paths = []
    for i in range(8):
        p = tmp_path / f"lib{i}.so"
        p.write_bytes(good_elf(f"func{i}", strtab_pad=MiB))
        paths.append(p)
    sym = Symbolizer(max_bytes=3 * MiB)
    for _ in range(2):
        for i, p in enumerate(paths):
            fs = sym.file(str(p))
            assert fs is not None and fs.lookup(0x110) == (f"func{i}", 0x10)
            held = sum(e.nbytes for e in sym._files.values())
            assert held <= 3 * MiB, held
    assert len(sym._files) <= 3
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert Symbolizer(max_bytes=MiB // 2).file(str(paths[0])) is None
    assert len(caught) == 1 and "over the symbol cache's 524288" in str(caught[0].message)


def test_long_name_without_nul_is_cut(tmp_path: Path) -> None:
    """A string table with no NUL after a name: the name is cut at 64 KiB (a lookup scanned
    the whole table)."""
    path = tmp_path / "nonul.so"
    strtab = b"\0" + b"x" * (8 * MiB)
    path.write_bytes(craft([{"name": ".strtab", "type": SHT_STRTAB, "data": strtab},
                            {"name": ".symtab", "type": SHT_SYMTAB, "data": bytes(24) + sym(1, BASE + 0x100, 0x40),
                             "link": 1, "entsize": 24}]))
    fs = Symbolizer().file(str(path))
    assert fs is not None
    found = fs.lookup(0x110)
    assert found is not None and found[0] == "x" * (64 << 10)


@pytest.fixture
def mapper(tmp_path: Path) -> Iterator[Any]:
    """A function that starts a process mapping the given files executable, and returns (pid,
    {path: mapping start})."""
    procs = []

    def start(*paths: Path) -> tuple[int, dict[Path, int]]:
        code = ("import mmap, os, sys, time\nkeep = []\nfor p in sys.argv[1:]:\n"
                "    fd = os.open(p, os.O_RDONLY)\n"
                "    keep.append(mmap.mmap(fd, 4096, flags=mmap.MAP_PRIVATE, prot=mmap.PROT_READ | mmap.PROT_EXEC))\n"
                "print('ready', flush=True)\ntime.sleep(60)\n")
        proc = subprocess.Popen([sys.executable, "-c", code, *map(str, paths)], stdout=subprocess.PIPE, text=True)
        procs.append(proc)
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        starts = {}
        for line in Path(f"/proc/{proc.pid}/maps").read_text().splitlines():
            parts = line.split(None, 5)
            if len(parts) == 6 and "x" in parts[1] and Path(parts[5]) in paths:
                starts[Path(parts[5])] = int(parts[0].split("-")[0], 16)
        assert set(starts) == set(paths), starts
        return proc.pid, starts

    yield start
    for proc in procs:
        proc.kill()
        proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()


def test_hostile_files_leave_the_others_named(tmp_path: Path, mapper: Any) -> None:
    """One process maps a good file and three hostile ones, another the good one only: every
    frame in a hostile file is unnamed (shown as [file]), with one warning per file however
    many frames; the good file's frames are named in both processes."""
    good = tmp_path / "good.so"
    good.write_bytes(good_elf())
    headers = tmp_path / "headers.so"
    headers.write_bytes(many_symtabs(20_000, 0))
    bomb = tmp_path / "bomb.so"
    bomb.write_bytes(mini_debug_info_bomb(80 * MiB))
    huge = tmp_path / "huge.so"
    sparse(huge, craft([{"name": ".strtab", "type": SHT_STRTAB, "data": b"\0f\0"},
                        {"name": ".symtab", "type": SHT_SYMTAB, "data": bytes(48), "size": 3 * GiB, "link": 1,
                         "entsize": 24}]), 3 * GiB + 8192)
    pid, starts = mapper(good, headers, bomb, huge)
    other, other_starts = mapper(good)
    sym = Symbolizer(debug_root=str(tmp_path / "none"))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        t0 = time.monotonic()
        for _ in range(50):
            for path in (headers, huge):
                f = sym.user_frame(pid, starts[path] + 0x110)
                assert f.name is None and f.label == f"[{path.name}]", f
            assert sym.user_frame(pid, starts[bomb] + 0x110).name == "exported_func"  # its .dynsym
            f = sym.user_frame(pid, starts[bomb] + 0x300)
            assert f.name is None and f.label == "[bomb.so]", f
            assert sym.user_frame(pid, starts[good] + 0x110)[1:3] == ("good_func", 0x10)
            assert sym.user_frame(other, other_starts[good] + 0x120)[1:3] == ("good_func", 0x20)
        assert time.monotonic() - t0 < 30
    messages = sorted(str(w.message) for w in caught)
    assert len(messages) == 3, messages
    assert "bomb.so[.gnu_debugdata]: decompresses to over" in messages[0], messages
    assert "headers.so: 20003 section headers" in messages[1] and "huge.so: symbol table" in messages[2], messages


# ------------------------------------------------------------------ perf maps


@pytest.fixture
def perf_map() -> Iterator[tuple[int, Path]]:
    """A child process (``sleep``) and the path of its perf map, /tmp/perf-<pid>.map, removed
    after the test."""
    proc = subprocess.Popen(["sleep", "60"])
    path = Path(f"/tmp/perf-{proc.pid}.map")
    try:
        yield proc.pid, path
    finally:
        proc.kill()
        proc.wait()
        if path.is_symlink() or path.exists():
            path.unlink()


PERF_CODE = """
sym = Symbolizer()
sym.REREAD_AFTER = 0  # every miss reads /proc/PID/maps and the perf map again
frames = [sym.user_frame({pid}, 0x10 + i) for i in range(200)]
result = sorted({{f.label for f in frames}})
"""


@pytest.mark.parametrize("kind,why", [
    ("fifo", "is a FIFO, not a regular file"),
    ("dev-zero", "is a character device, not a regular file"),
    ("sparse", "is 8589934592 bytes, over bpfkit's size limit for it (128 MiB)"),
])
def test_hostile_perf_map_is_skipped_with_one_warning(perf_map: tuple[int, Path], kind: str, why: str) -> None:
    """A FIFO (open() waited for a writer forever, SIGINT ignored while a profile is written),
    a link to /dev/zero or an 8 GiB sparse file (read whole until memory ran out): skipped
    with one warning, the frames [unknown]."""
    pid, path = perf_map
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "dev-zero":
        os.symlink("/dev/zero", path)
    else:
        sparse(path, b"10 20 f\n", 8 * GiB)
    got = run_measured(PERF_CODE.format(pid=pid), timeout=30)
    assert got["result"] == ["[unknown]"]
    assert got["peak"] < 4 * MiB and got["seconds"] < 10, got
    assert got["warnings"] == [f"bpfkit: perf map {path} {why}; skipped: process {pid}'s frames outside its files "
                               "show as [unknown]"], got


def test_large_perf_map_is_compact(perf_map: tuple[int, Path]) -> None:
    """A 28 MB perf map (400,000 functions, out of order) is parsed line by line into columns:
    it keeps about its size, and takes under three times it while read (the text decoded whole
    and a list of (start, size, name) tuples: 3.1 times kept, 5.8 at the peak)."""
    pid, path = perf_map
    n = 400_000
    order = list(range(n))
    order[::7] = order[::7][::-1]
    with open(path, "w") as f:
        for i in order:
            f.write(f"{0x7f0000000000 + i * 0x100:x} 80 LJava/util/concurrent/Thing{i};::method_{i}(I)V\n")
    size = path.stat().st_size
    got = run_measured(f"""
sym = Symbolizer()
result = [list(sym.user_frame({pid}, 0x7f0000000000 + i * 0x100 + 0x10)[1:3]) for i in (0, 1, {n // 2}, {n - 1})]
result.append(list(sym.user_frame({pid}, 0x7f0000000000 + 0x90)[1:3]))
result.append(tracemalloc.get_traced_memory()[0])
""")
    kept = got["result"].pop()
    assert got["result"] == [[f"LJava/util/concurrent/Thing{i};::method_{i}(I)V", 0x10] for i in (0, 1, n // 2, n - 1)] + [
        [None, 0x7f0000000090]], got["result"]
    assert kept < 1.3 * size and got["peak"] < 3 * size, (kept, got["peak"], size)


def test_perf_map_later_line_wins_and_bad_lines_skipped(tmp_path: Path, perf_map: tuple[int, Path]) -> None:
    pid, path = perf_map
    path.write_text("1000 100 old\nzz 10 bad\n-10 10 negative\n10000000000000000 1 too-large\n"
                    "500 10 first\n1000 100 new\r\n")
    sym = Symbolizer()
    assert sym.user_frame(pid, 0x1010)[1:4] == ("new", 0x10, "[perf-map]")
    assert sym.user_frame(pid, 0x505).name == "first"
    assert sym.user_frame(pid, 0x50F).name == "first" and sym.user_frame(pid, 0x510).name is None
