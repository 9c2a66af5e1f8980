# SPDX-License-Identifier: Apache-2.0
"""One binary's symbols, from wherever a distribution keeps them.

A stripped binary keeps only .dynsym (the exported names). The rest is found, in this order
(as gdb, perf and blazesym look for it):

1. a separate debug file by build id: ``<debug root>/.build-id/xx/yyyy….debug`` (``xx``: the
   first byte of the GNU build id in hex, then the rest; Debian's ``*-dbgsym`` packages install
   there, under /usr/lib/debug);
2. a separate debug file by path: ``<debug root><path>.debug``;
3. MiniDebugInfo: a ``.gnu_debugdata`` section holding an xz-compressed ELF whose .symtab has
   the local function symbols .dynsym lacks (Fedora and others; decompressed with the stdlib's
   lzma).

All of them are merged into one :class:`~bpfkit.elf.reader.SymbolTable` of the binary itself
(the debug files have the same addresses), so file offset -> link-time address goes through
the binary's own PT_LOAD segments.
"""

from __future__ import annotations

import lzma
import os
from bisect import bisect_right

from ..elf.reader import SHT_DYNSYM, SHT_NOTE, SHT_SYMTAB, ElfImage, SymbolTable, read_binary
from ..errors import BPFKitError

__all__ = ["FileSymbols", "build_id", "debug_file_candidates", "DEFAULT_DEBUG_ROOT"]

DEFAULT_DEBUG_ROOT = "/usr/lib/debug"
NT_GNU_BUILD_ID = 3
# A MiniDebugInfo section is a few hundred KiB; its ELF a few MiB. Bounded all the same.
_DEBUGDATA_LIMIT = 256 << 20


def build_id(image: ElfImage) -> str | None:
    """The GNU build id (NT_GNU_BUILD_ID in a note section) in hex, or None."""
    for sec in image.sections:
        if sec.type == SHT_NOTE:
            try:
                for note in image.notes(sec):
                    if note.owner == b"GNU" and note.type == NT_GNU_BUILD_ID and note.desc:
                        return note.desc.hex()
            except BPFKitError:
                continue
    return None


def debug_file_candidates(path: str, bid: str | None, root: str = DEFAULT_DEBUG_ROOT) -> list[str]:
    out = []
    if bid and len(bid) > 2:
        out.append(os.path.join(root, ".build-id", bid[:2], bid[2:] + ".debug"))
    if path.startswith("/"):
        out.append(root + path + ".debug")
    return out


class FileSymbols:
    """The symbols of one ELF binary: ``lookup(file_offset)`` -> (function, offset into it).
    ``sources`` says where they came from (".symtab", ".dynsym", a debug file path,
    ".gnu_debugdata")."""

    def __init__(self, table: SymbolTable, build_id: str | None, sources: list[str]) -> None:
        self.table = table
        self.path = table.path
        self.build_id = build_id
        self.sources = sources

    @classmethod
    def load(cls, path: str, debug_root: str = DEFAULT_DEBUG_ROOT, name: str | None = None) -> FileSymbols:
        """Read ``path`` (``name``: the path it is known by, for debug files found by path,
        when ``path`` is reached through /proc/PID/root). Raises bpfkit errors for a missing,
        unreadable or malformed file."""
        image = ElfImage(read_binary(path), path)
        table = SymbolTable(image)
        bid = build_id(image)
        sources = [s.name for s in image.sections if s.type in (SHT_SYMTAB, SHT_DYNSYM)]
        if not any(s.type == SHT_SYMTAB for s in image.sections):
            for candidate in debug_file_candidates(name or path, bid, debug_root):
                extra = _symbols_of(candidate, bid)
                if extra is not None:
                    table.add_symbols(extra.symbols)
                    sources.append(candidate)
                    break
            else:
                mini = _minidebuginfo(image)
                if mini is not None:
                    table.add_symbols(mini.symbols)
                    sources.append(".gnu_debugdata")
        return cls(table, bid, sources)

    def lookup(self, offset: int) -> tuple[str, int] | None:
        """File offset (as /proc/PID/maps and uprobes count) -> (function, offset into it).
        The functions are indexed by file offset on first use (the PT_LOAD rule applied once
        per symbol, not per lookup)."""
        index = self._index
        if index is None:
            index = self._index = self._by_offset()
        starts, ends, names = index
        i = bisect_right(starts, offset) - 1
        if i < 0 or offset >= ends[i]:
            return None
        return names[i], offset - starts[i]

    _index: tuple[list[int], list[int], list[str]] | None = None

    def _by_offset(self) -> tuple[list[int], list[int], list[str]]:
        rows = []
        addrs, syms = self.table.functions_by_address()
        for vaddr, sym in zip(addrs, syms):
            off = self.table.file_offset(vaddr)
            if off is not None:
                rows.append((off, sym.size, sym.name))
        rows.sort()
        starts = [r[0] for r in rows]
        # An unsized symbol reaches the next one (as symbol_at takes it); a sized one its end.
        ends = [r[0] + r[1] if r[1] else (starts[i + 1] if i + 1 < len(rows) else 1 << 64)
                for i, r in enumerate(rows)]
        return starts, ends, [r[2] for r in rows]


def _symbols_of(path: str, bid: str | None) -> SymbolTable | None:
    """A separate debug file's symbols, if it exists, parses, and matches the build id."""
    if not os.path.isfile(path):
        return None
    try:
        image = ElfImage(read_binary(path), path)
    except BPFKitError:
        return None
    if bid is not None and build_id(image) not in (None, bid):
        return None  # a stale debug file of another build
    return SymbolTable(image)


def _minidebuginfo(image: ElfImage) -> SymbolTable | None:
    sec = image.section_named(".gnu_debugdata")
    if sec is None or not sec.size:
        return None
    try:
        dec = lzma.LZMADecompressor(format=lzma.FORMAT_XZ)
        data = dec.decompress(bytes(sec.data), max_length=_DEBUGDATA_LIMIT)
        return SymbolTable(ElfImage(data, f"{image.path}[.gnu_debugdata]"))
    except (lzma.LZMAError, BPFKitError):
        return None
