# SPDX-License-Identifier: Apache-2.0
"""One ELF parser (issue 36, item 1): bpfkit.elf.headers decodes ELF's own layouts (the ELF
header, section and program header tables, symbol-table entries) and holds the ELF magic; no
other module of bpfkit does. The loader, the symbolizer, uprobe offsets (BinaryImage), USDT
notes and BTF files in ELF all read through it. pyelftools is imported by one module only,
bpfkit.btf.dwarf, for what it is made for and bpfkit does not decode: DWARF (.debug_info with
its relocations applied), read on first use for event types BTF lacks (issue 38)."""

from __future__ import annotations

import ast
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import package_dir

PACKAGE = package_dir()
REPO = Path(__file__).resolve().parent.parent
THE_READER = PACKAGE / "elf" / "headers.py"
THE_DWARF_READER = PACKAGE / "btf" / "dwarf.py"  # may import pyelftools, and decodes no ELF layout
# struct formats (without a byte order) of Elf64_/Elf32_ Ehdr, Shdr, Phdr, Sym, and the tail of
# the ELF header from e_phoff (what a second reader unpacks to find the tables).
ELF_LAYOUTS = {
    "16sHHIQQQIHHHHHH", "16sHHIIIIIHHHHHH", "IIQQQQIIQQ", "IIIIIIIIII", "IIQQQQQQ", "IIIIIIII", "IBBHQQ", "IIIBBH",
    "QQIHHHHHH", "IIIHHHHHH",
}


def _elf_decoding(path: Path) -> list[str]:
    """What in ``path`` decodes ELF: the magic, an ELF layout's struct format, pyelftools."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Constant):
            v = node.value
            if isinstance(v, bytes) and v.startswith(b"\x7fELF"):
                found.append(f"line {node.lineno}: the ELF magic")
            elif isinstance(v, str) and v.lstrip("<>=!@") in ELF_LAYOUTS:
                found.append(f"line {node.lineno}: ELF layout {v!r}")
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names = [a.name for a in node.names]
            if isinstance(node, ast.ImportFrom) and node.module:
                names.append(node.module)
            if any(n.split(".")[0] == "elftools" for n in names):
                found.append(f"line {node.lineno}: imports pyelftools")
    return found


def test_only_bpfkit_elf_headers_decodes_elf_layouts() -> None:
    offenders = {str(p.relative_to(PACKAGE.parent)): got for p in sorted(PACKAGE.rglob("*.py"))
                 if p != THE_READER and (got := [g for g in _elf_decoding(p)
                                                  if not (p == THE_DWARF_READER and g.endswith("imports pyelftools"))])}
    assert offenders == {}
    assert _elf_decoding(THE_READER)  # (the scan finds what it looks for)


@pytest.fixture
def header_reads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The path of every image whose ELF header bpfkit.elf.headers decodes."""
    from bpfkit.elf.headers import ElfHeaders

    seen: list[str] = []
    parse = ElfHeaders._parse_header

    def counted(self: ElfHeaders, bounded: bool) -> None:
        seen.append(self.path)
        parse(self, bounded)

    monkeypatch.setattr(ElfHeaders, "_parse_header", counted)
    return seen


def test_every_consumer_reads_through_it(header_reads: list[str], tmp_path: Path) -> None:
    """The loader, uprobe offsets, USDT notes, the symbolizer and BTF files in ELF."""
    import bpfkit
    from bpfkit.btf.file import load_file
    from bpfkit.errors import ParseError
    from bpfkit.link._binary import BinaryImage, resolve_binary
    from bpfkit.symbols.elf import FileSymbols
    from bpfkit.usdt.notes import read_probes

    obj = REPO / "bpf" / ".output" / "minimal.bpf.o"
    if not obj.exists():
        pytest.skip(f"{obj} is not built (make -C bpf)")
    bpfkit.load_spec(obj.read_bytes())
    assert header_reads == [""]  # bytes: no path
    libc = resolve_binary("libc")
    BinaryImage(libc)
    read_probes(libc)
    FileSymbols.load(libc, debug_root=str(tmp_path))
    assert header_reads[1:] == [libc] * 3
    if not shutil.which("gcc"):
        return
    exe = tmp_path / "no_btf"
    src = tmp_path / "x.c"
    src.write_text("int main(void) { return 0; }\n")
    subprocess.run(["gcc", "-o", str(exe), str(src)], check=True)
    with pytest.raises(ParseError, match=r"ELF file without a \.BTF section"):
        load_file(exe)
    assert header_reads[-1] == str(exe)
