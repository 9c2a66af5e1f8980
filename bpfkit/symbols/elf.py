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

These are searched only when a lookup misses in the binary's own tables (a hit in .dynsym is
the function the debug file names there too), so a first lookup reads no more than it needs.

Speed (benchmarks/bench_symbolize.py): only the ELF header, the section headers, the program
headers, the symbol tables and their string tables are read (pread, through bpfkit's one ELF
reader: bpfkit.elf.headers), and a table is read as columns of its defined functions
(bpfkit.elf.columns): no per-symbol Python objects at load. Names are cut out of the string
table at lookup.

Limits (docs/security.md): these files belong to whoever runs the profiled processes, so every
size a header states is checked against the file's size and against a limit before anything is
allocated, and what one binary may cost is bounded (bpfkit.elf.headers' limits and its
:class:`Limits`, counted over the binary and its debug file or MiniDebugInfo together; the
MiniDebugInfo limits are here). A file over a limit, malformed, or that runs out of memory gets
no symbols (its frames show as ``[file]``) and one warning; the rest of the profile is
symbolized. String tables are read once per section and shared by the symbol tables that link
to them; symbol tables are read in chunks.
"""

from __future__ import annotations

import lzma
import os
import sys
import warnings
from array import array
from bisect import bisect_right
from collections.abc import Callable
from itertools import compress

from .._visible import visible
from ..elf.columns import FunctionTable, function_tables
from ..elf.headers import SHT_SYMTAB, ElfHeaders, Limits, NotElfError
from ..elf.image import Image, open_binary
from ..errors import BPFKitError, KernelError, NotFoundError, ParseError

__all__ = ["FileSymbols", "debug_file_candidates", "DEFAULT_DEBUG_ROOT", "Limits", "warn_refused", "NotElfError"]

DEFAULT_DEBUG_ROOT = "/usr/lib/debug"
MiB = 1 << 20
# MiniDebugInfo: a .gnu_debugdata section is a few hundred KiB, its ELF a few MiB (function
# symbols only). The compressed section, its decompressed size (decompressed in pieces of
# _XZ_PIECE into one buffer: what it costs is this, not twice it), and the xz decoder's memory
# (xz -9 needs 65 MiB; a stream may declare a dictionary of up to 1.5 GiB) are bounded.
DEBUGDATA_PACKED_LIMIT = 32 * MiB
DEBUGDATA_LIMIT = 64 * MiB
DEBUGDATA_MEMLIMIT = 80 * MiB
_XZ_PIECE = 4 * MiB
# Lookups answered by a scan before a file's functions are sorted into an index: a profile
# resolves a handful of addresses in most libraries, and a scan of a table costs about a
# fifth of sorting it (benchmarks/bench_symbolize.py's cold rows count both).
_SCANS = 4


def debug_file_candidates(path: str, bid: str | None, root: str = DEFAULT_DEBUG_ROOT) -> list[str]:
    out = []
    if bid and len(bid) > 2:
        out.append(os.path.join(root, ".build-id", bid[:2], bid[2:] + ".debug"))
    if path.startswith("/"):
        out.append(root + path + ".debug")
    return out


def warn_refused(why: object, instead: str) -> None:
    """The one warning about a file not used: ``why`` (an error that names it), and what is
    done ``instead``; names of files are other users' choice, and made visible."""
    warnings.warn(visible(f"bpfkit: {why}; {instead}"), RuntimeWarning, stacklevel=3)


def _elf(image: Image, limits: Limits, *, segments: bool = True) -> ElfHeaders:
    """``image``'s headers, under bpfkit.elf.headers' limits and charged to ``limits`` (a
    debug file's program headers are the binary's: not read)."""
    return ElfHeaders(image, segments=segments, bounded=True, limits=limits)


class FileSymbols:
    """The symbols of one ELF binary: ``lookup(file_offset)`` -> (function, offset into it).
    ``sources`` says where they came from (".symtab", ".dynsym", a debug file path,
    ".gnu_debugdata"): the last two are read when a lookup first misses."""

    def __init__(self, path: str, tables: list[FunctionTable], loads: list[tuple[int, int, int, bool]],
                 build_id: str | None, sources: list[str],
                 extra: Callable[[], tuple[list[FunctionTable], str] | None] | None) -> None:
        self.path = path
        self.build_id = build_id
        self.sources = sources
        # file offset -> link-time address: executable PT_LOAD segments first (segments may
        # share a file page; offsets come from executable mappings).
        self._loads = sorted(loads, key=lambda s: not s[3])
        self._tables = tables
        self._extra = extra
        self._gather()

    def _gather(self) -> None:
        """Every table's functions in one pair of arrays (table order), no index yet."""
        self._values: array[int] = array("Q")
        self._sizes: array[int] = array("Q")
        self._bounds = []
        for t in self._tables:
            self._bounds.append(len(self._values))
            self._values += t.values
            self._sizes += t.sizes
        self._starts: array[int] | None = None
        self._order: array[int] = array("I")
        self._scans = 0
        self._raw: bytes | None = None  # _values' bytes, for _scan

    @property
    def nbytes(self) -> int:
        """About the memory it holds: its columns, string tables (each once), index."""
        strtabs = {id(t.strtab): len(t.strtab) for t in self._tables}
        return (sum(t.nbytes for t in self._tables) + sum(strtabs.values()) + 16 * len(self._values)
                + (len(self._raw) if self._raw is not None else 0)
                + (12 * len(self._starts) if self._starts is not None else 0))

    def _index(self) -> None:
        values, sizes = self._values, self._sizes
        n = len(values)
        # One function per address: the earliest sized one (.dynsym before .symtab before a
        # debug file's), else the earliest. Built with dicts over reversed sequences (the
        # earliest written last wins) and one sort of the distinct addresses: C-level loops only.
        at = dict(zip(reversed(values), reversed(range(n))))
        sized = array("I", compress(range(n), sizes))
        at.update(zip(reversed(array("Q", compress(values, sizes))), reversed(sized)))
        at.pop(0, None)  # value 0: not a function's address
        self._starts = array("Q", sorted(at))
        self._order = array("I", map(at.__getitem__, self._starts))

    @classmethod
    def load(cls, path: str, debug_root: str = DEFAULT_DEBUG_ROOT, name: str | None = None) -> FileSymbols:
        """Read ``path`` (``name``: the path it is known by, for debug files found by path,
        when ``path`` is reached through /proc/PID/root). Raises bpfkit errors for a missing,
        unreadable, malformed or too large file (NotElfError: not an ELF file at all)."""
        limits = Limits()
        with open_binary(path) as image:
            try:
                elf = _elf(image, limits)
                tables = function_tables(elf)
                bid = elf.build_id()
            except MemoryError:
                raise ParseError(f"{path}: out of memory reading its symbols") from None
            sources = [".dynsym" if t.dynamic else ".symtab" for t in tables]
            extra = None
            if not elf.has(SHT_SYMTAB):
                assert image.stat is not None
                extra = _extra_symbols(name or path, bid, debug_root, path, image.stat, limits)
        return cls(path, tables, elf.loads, bid, sources, extra)

    def lookup(self, offset: int) -> tuple[str, int] | None:
        """File offset (as /proc/PID/maps and uprobes count) -> (function, offset into it)."""
        found = self._lookup(offset)
        if found is None and self._extra is not None:
            more, self._extra = self._extra(), None
            if more is not None:
                before = len(self._values)
                self._tables += more[0]
                self.sources.append(more[1])
                self._gather()
                # What the binary's own tables missed only the new ones can name: they alone
                # are scanned for it.
                addr = self._vaddr(offset)
                found = self._scan(addr, before) if addr is not None else None
        return found

    def _vaddr(self, offset: int) -> int | None:
        for off, filesz, vaddr, _ in self._loads:
            if off <= offset < off + filesz:
                return offset - off + vaddr
        return None

    def _lookup(self, offset: int) -> tuple[str, int] | None:
        addr = self._vaddr(offset)
        if addr is None:
            return None
        starts = self._starts
        if starts is None:
            if self._scans < _SCANS:
                self._scans += 1
                return self._scan(addr)
            self._index()
            starts = self._starts
            assert starts is not None
        i = bisect_right(starts, addr) - 1
        if i < 0:
            return None
        return self._found(self._order[i], starts[i], addr)

    def _scan(self, addr: int, lo: int = 0) -> tuple[str, int] | None:
        """The first lookups, by one pass over the functions from the ``lo``-th (a generator
        into max; the entries holding that value found by bytes.find in the array's bytes):
        cheaper than sorting them until a few lookups have been made."""
        values = self._values
        start = max((v for v in filter(None, values[lo:] if lo else values) if v <= addr), default=0)
        if not start:
            return None
        raw = self._raw
        if raw is None:
            raw = self._raw = values.tobytes()
        want = start.to_bytes(8, sys.byteorder)
        # Searched for by its significant bytes (the zero bytes of a small value would make
        # the search stop at every zero), then checked whole and aligned.
        sig = (start.bit_length() + 7) // 8
        pattern = want[:sig] if sys.byteorder == "little" else want[8 - sig:]
        shift = 0 if sys.byteorder == "little" else 8 - sig
        k = -1
        at = raw.find(pattern, lo * 8 + shift)
        while at >= 0:
            pos = at - shift
            if pos % 8 == 0 and raw[pos:pos + 8] == want:  # a whole entry
                if k < 0:
                    k = pos // 8
                if self._sizes[pos // 8]:  # a sized one at the same address wins
                    k = pos // 8
                    break
            at = raw.find(pattern, at + 1)
        return self._found(k, start, addr)

    def _found(self, k: int, start: int, addr: int) -> tuple[str, int] | None:
        size = self._sizes[k]
        if size and addr >= start + size:
            return None
        t = bisect_right(self._bounds, k) - 1
        name = self._tables[t].name(k - self._bounds[t])
        return (name, addr - start) if name else None


def _extra_symbols(path: str, bid: str | None, root: str, opened: str, st: os.stat_result,
                   limits: Limits) -> Callable[[], tuple[list[FunctionTable], str] | None]:
    """What a first miss reads: a separate debug file (by build id, then path), else the
    MiniDebugInfo in the .gnu_debugdata section of the binary (``opened`` again, if it is
    still the file ``st`` describes). A file that is there but cannot be used (malformed,
    over a limit) is warned about once (this runs once per binary) and skipped."""
    def load() -> tuple[list[FunctionTable], str] | None:
        for candidate in debug_file_candidates(path, bid, root):
            try:
                tables = _symbols_of(candidate, bid, limits)
            except (BPFKitError, MemoryError) as exc:
                warn_refused(_why(exc, candidate), f"debug file not used: {path} is named by its own symbols only")
                return None
            if tables is not None:
                return tables, candidate
        try:
            return _mini_debug_info(opened, st, limits)
        except (BPFKitError, MemoryError) as exc:
            warn_refused(_why(exc, f"{opened}[.gnu_debugdata]"),
                         f"MiniDebugInfo not used: {path} is named by its own symbols only")
            return None
    return load


def _why(exc: BaseException, path: str) -> str:
    return f"{path}: out of memory reading its symbols" if isinstance(exc, MemoryError) else str(exc)


def _mini_debug_info(opened: str, st: os.stat_result, limits: Limits) -> tuple[list[FunctionTable], str] | None:
    """The functions of the xz-compressed ELF in ``opened``'s .gnu_debugdata section, bounded:
    the section's size, the decoder's memory and the decompressed size."""
    try:
        image = open_binary(opened)
    except (NotFoundError, KernelError):
        return None  # gone, unreadable
    with image:
        now = image.stat
        assert now is not None
        if (now.st_dev, now.st_ino, now.st_mtime_ns) != (st.st_dev, st.st_ino, st.st_mtime_ns):
            return None  # replaced since it was read
        elf = _elf(image, limits, segments=False)
        at = elf.section_index(".gnu_debugdata")
        if at is None:
            return None
        size = elf.shdrs[at][5]
        if size > DEBUGDATA_PACKED_LIMIT:
            raise ParseError(f"{opened}: .gnu_debugdata is {size} bytes, over bpfkit's limit of "
                             f"{DEBUGDATA_PACKED_LIMIT // MiB} MiB")
        packed = elf.section_data(at)
    if not packed:
        return None
    what = f"{opened}[.gnu_debugdata]"
    data = bytearray()
    try:
        xz = lzma.LZMADecompressor(format=lzma.FORMAT_XZ, memlimit=DEBUGDATA_MEMLIMIT)
        while not xz.eof:
            piece = xz.decompress(packed, max_length=min(_XZ_PIECE, DEBUGDATA_LIMIT + 1 - len(data)))
            packed = b""  # (the decoder keeps what it has not used)
            data += piece
            if len(data) > DEBUGDATA_LIMIT:
                raise ParseError(f"{what}: decompresses to over bpfkit's limit of {DEBUGDATA_LIMIT // MiB} MiB")
            if not piece and xz.needs_input:
                raise ParseError(f"{what}: the xz stream is truncated")
    except lzma.LZMAError as exc:
        limit = f" (bpfkit's limit: {DEBUGDATA_MEMLIMIT // MiB} MiB)" if "limit" in str(exc) else ""
        raise ParseError(f"{what}: not valid xz data: {exc}{limit}") from None
    del packed, xz
    with Image.of_bytes(data, what) as inner:
        return function_tables(_elf(inner, limits, segments=False)), ".gnu_debugdata"


def _symbols_of(path: str, bid: str | None, limits: Limits) -> list[FunctionTable] | None:
    """A separate debug file's functions if it exists and matches the build id (None if not
    there, not ELF, or of another build); bpfkit errors if it cannot be used."""
    try:
        image = open_binary(path)  # NotFoundError when there is none
    except (NotFoundError, KernelError):
        return None
    with image:
        try:
            elf = _elf(image, limits, segments=False)
        except NotElfError:
            return None
        if bid is not None and elf.build_id() not in (None, bid):
            return None  # a stale debug file of another build
        return function_tables(elf)
