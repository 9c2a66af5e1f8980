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
headers, the symbol tables and their string tables are read (pread), and a table is filtered
to its defined functions with bytes-level operations (st_info through a translation table,
st_shndx tested non-zero, itertools.compress over memoryview casts): no per-symbol Python
objects at load. Names are cut out of the string table at lookup.

Limits (docs/security.md): these files belong to whoever runs the profiled processes, so every
size a header states is checked against the file's size and against a limit before anything is
allocated, and what one binary may cost is bounded (:class:`Limits`, counted over the binary
and its debug file or MiniDebugInfo together). A file over a limit, malformed, or that runs
out of memory gets no symbols (its frames show as ``[file]``) and one warning; the rest of the
profile is symbolized. String tables are read once per section and shared by the symbol
tables that link to them; symbol tables are read in chunks of :data:`_CHUNK` entries.
"""

from __future__ import annotations

import lzma
import os
import struct
import sys
import warnings
from array import array
from bisect import bisect_right
from collections.abc import Callable
from itertools import compress

from .._files import BINARY_LIMIT
from .._visible import visible
from ..elf.reader import (
    PF_X,
    PT_LOAD,
    SHT_DYNSYM,
    SHT_NOBITS,
    SHT_NOTE,
    SHT_SYMTAB,
    STT_FUNC,
    STT_GNU_IFUNC,
    iter_notes,
)
from ..errors import BPFKitError, KernelError, NotFoundError, ParseError
from .image import Image

__all__ = ["FileSymbols", "debug_file_candidates", "DEFAULT_DEBUG_ROOT", "Limits", "warn_refused"]

DEFAULT_DEBUG_ROOT = "/usr/lib/debug"
NT_GNU_BUILD_ID = 3
MiB = 1 << 20
# Section headers of one file: linked binaries have 30-40, debug files about as many; only
# relocatable objects built with -ffunction-sections reach thousands.
SECTIONS_LIMIT = 16384
# Program headers, in bytes: the kernel's ELF loader refuses more than 64 KiB (and more than
# a page) of them, and both it and ld.so refuse an e_phentsize other than the struct's
# (fs/binfmt_elf.c elf_read_phdrs; glibc elf/dl-load.c): no binary that runs has more.
PHDRS_LIMIT = 64 << 10
# Symbol-table entries of one binary with its debug file or MiniDebugInfo: libc's debug file
# has ~10,000, Chrome's few millions. 20 bytes are kept per entry (address, size, name offset).
SYMBOLS_LIMIT = 1 << 23
# String-table bytes of one binary with its debug file (kept: names are cut out at lookup).
STRINGS_LIMIT = 256 * MiB
# A name is cut at this length (a string table without a NUL would make every lookup scan it).
NAME_LIMIT = 64 << 10
# Note sections read while looking for the build id (.note.gnu.build-id is 36 bytes).
NOTES_LIMIT = 1 * MiB
# MiniDebugInfo: a .gnu_debugdata section is a few hundred KiB, its ELF a few MiB (function
# symbols only). The compressed section, its decompressed size (decompressed in pieces of
# _XZ_PIECE into one buffer: what it costs is this, not twice it), and the xz decoder's memory
# (xz -9 needs 65 MiB; a stream may declare a dictionary of up to 1.5 GiB) are bounded.
DEBUGDATA_PACKED_LIMIT = 32 * MiB
DEBUGDATA_LIMIT = 64 * MiB
DEBUGDATA_MEMLIMIT = 80 * MiB
_XZ_PIECE = 4 * MiB
# st_info -> 1 for STT_FUNC and STT_GNU_IFUNC (the low nibble is the type), else 0.
_IS_FUNC = bytes(1 if (i & 0xF) in (STT_FUNC, STT_GNU_IFUNC) else 0 for i in range(256))
_NONZERO = bytes([0] + [1] * 255)
# Symbol-table entries converted at a time (1.5 MiB of a 64-bit table): what a table costs
# while read is this, not its size.
_CHUNK = 1 << 16
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


class NotElfError(ParseError):
    """Not an ELF file at all (a PE file mapped by Wine, a data file): no symbols, no warning."""


class Limits:
    """What is left of one binary's allowance (:data:`SYMBOLS_LIMIT` entries,
    :data:`STRINGS_LIMIT` bytes), taken as tables are read (by the binary and its debug file)."""

    def __init__(self) -> None:
        self.symbols, self.strings = SYMBOLS_LIMIT, STRINGS_LIMIT

    def take_symbols(self, n: int, path: str, what: str) -> None:
        if n > self.symbols:
            raise ParseError(f"{path}: {what} has {n} entries, over bpfkit's limit of {SYMBOLS_LIMIT} symbols "
                             "per binary")
        self.symbols -= n

    def take_strings(self, n: int, path: str, what: str) -> None:
        if n > self.strings:
            raise ParseError(f"{path}: {what} is {n} bytes, over bpfkit's limit of {STRINGS_LIMIT // MiB} MiB "
                             "of string tables per binary")
        self.strings -= n


class _Elf:
    """What the symbolizer needs of one ELF image: the section headers (type, offset, size,
    link, entsize, name), PT_LOAD segments, the build id; string tables read once each."""

    def __init__(self, image: Image, limits: Limits, *, segments: bool = True) -> None:
        self.image, self.limits, self.path = image, limits, image.path
        self.size = image.size
        read = image.read
        ident = bytes(read(0, min(64, image.size), "ELF header"))
        if len(ident) < 52 or ident[:4] != b"\x7fELF" or ident[4] not in (1, 2) or ident[5] not in (1, 2):
            raise NotElfError(f"{self.path}: not an ELF file (bad magic or class)")
        self.is64, self.little = ident[4] == 2, ident[5] == 1
        e = "<" if self.little else ">"
        if self.is64:
            (phoff, shoff, _, _, phentsize, phnum, shentsize, shnum, shstrndx) = struct.unpack_from(
                e + "QQIHHHHHH", ident, 32)
        else:
            (phoff, shoff, _, _, phentsize, phnum, shentsize, shnum, shstrndx) = struct.unpack_from(
                e + "IIIHHHHHH", ident, 28)
        shdr = struct.Struct(e + ("IIQQQQIIQQ" if self.is64 else "IIIIIIIIII"))
        if shoff and shnum and shentsize != shdr.size:
            raise ParseError(f"{self.path}: section header size {shentsize}, expected {shdr.size}")
        if shoff and shnum > SECTIONS_LIMIT:
            raise ParseError(f"{self.path}: {shnum} section headers, over bpfkit's limit of {SECTIONS_LIMIT}")
        raw = read(shoff, shnum * shdr.size, "section headers") if shoff else b""
        # (type, offset, size, link, entsize, name offset)
        self.sections = [(t, off, sz, link, ent, name) for name, t, _, _, off, sz, link, _, _, ent
                         in shdr.iter_unpack(raw)]
        self.shstrndx = shstrndx
        self._strings: dict[int, bytes] = {}
        phdr = struct.Struct(e + ("IIQQQQQQ" if self.is64 else "IIIIIIII"))
        self.loads: list[tuple[int, int, int, bool]] = []  # (p_offset, p_filesz, p_vaddr, executable)
        if segments and phoff and phnum:  # (a debug file's are the binary's)
            if phentsize != phdr.size:
                raise ParseError(f"{self.path}: program header size {phentsize}, expected {phdr.size}")
            if phnum * phentsize > PHDRS_LIMIT:
                raise ParseError(f"{self.path}: {phnum} program headers ({phnum * phentsize} bytes), over "
                                 f"bpfkit's limit of {PHDRS_LIMIT} bytes (the kernel's ELF loader's)")
            for f in phdr.iter_unpack(read(phoff, phnum * phentsize, "program headers")):
                ptype, flags, poff, vaddr, filesz = ((f[0], f[1], f[2], f[3], f[5]) if self.is64
                                                     else (f[0], f[6], f[1], f[2], f[4]))
                if ptype == PT_LOAD:
                    self.loads.append((poff, filesz, vaddr, bool(flags & PF_X)))

    def section_data(self, index: int) -> bytes | memoryview:
        t, off, sz, *_ = self.sections[index]
        return b"" if t == SHT_NOBITS else self.image.read(off, sz, f"section {index}")

    def strings(self, index: int) -> bytes:
        """String-table section ``index``, read once (the tables linking to it share it)."""
        got = self._strings.get(index)
        if got is None:
            t, off, sz, *_ = self.sections[index]
            if t == SHT_NOBITS:
                sz = 0
            self.limits.take_strings(sz, self.path, f"string table (section {index})")
            got = self._strings[index] = bytes(self.image.read(off, sz, f"string table (section {index})"))
        return got

    def has(self, sh_type: int) -> bool:
        return any(s[0] == sh_type for s in self.sections)

    def section_named(self, name: str) -> int | None:
        if not 0 <= self.shstrndx < len(self.sections):
            return None
        names = self.strings(self.shstrndx)
        want = name.encode()
        for i, s in enumerate(self.sections):
            if names[s[5]:names.find(b"\0", s[5], s[5] + NAME_LIMIT)] == want:
                return i
        return None

    def build_id(self) -> str | None:
        """The GNU build id (NT_GNU_BUILD_ID in a note section) in hex, or None."""
        budget = NOTES_LIMIT
        for i, s in enumerate(self.sections):
            if s[0] == SHT_NOTE and s[2] <= budget:
                budget -= s[2]
                try:
                    for note in iter_notes(bytes(self.section_data(i)), little=self.little):
                        if note.owner == b"GNU" and note.type == NT_GNU_BUILD_ID and note.desc:
                            return note.desc.hex()
                except BPFKitError:
                    continue
        return None

    def function_tables(self) -> list[_Table]:
        """The defined functions of .dynsym and .symtab, in section order: the first section of
        each type (the gABI allows one of each; more are ignored, not each read)."""
        out, seen = [], set()
        for i, (t, _, _, link, _, _) in enumerate(self.sections):
            if t in (SHT_SYMTAB, SHT_DYNSYM) and t not in seen and 0 <= link < len(self.sections):
                seen.add(t)
                out.append(_Table.read(self, i))
        return out


class _Table:
    """One symbol table as columns, entry by entry: st_value (0 for every entry that is not a
    defined function: STT_FUNC or STT_GNU_IFUNC with st_shndx != SHN_UNDEF), st_size,
    st_name; and its string table (shared with the other tables linking to it)."""

    def __init__(self, values: array[int], sizes: array[int], names: array[int], strtab: bytes,
                 dynamic: bool) -> None:
        self.values, self.sizes, self.names, self.strtab, self.dynamic = values, sizes, names, strtab, dynamic

    @classmethod
    def read(cls, elf: _Elf, i: int) -> _Table:
        t, off, size, link, _, _ = elf.sections[i]
        ent = 24 if elf.is64 else 16
        n = size // ent
        what = f"symbol table (section {i})"
        elf.limits.take_symbols(n, elf.path, what)
        elf.image.check(off, n * ent, what)  # all of it, before the first chunk is read
        code = "Q" if elf.is64 else "I"
        values, sizes, names = array(code), array(code), array("I")
        for lo in range(0, n, _CHUNK):
            m = min(_CHUNK, n - lo)
            _columns(bytes(elf.image.read(off + lo * ent, m * ent, what)), m, elf.is64, values, sizes, names)
        if elf.little != (sys.byteorder == "little"):
            for a in (values, sizes, names):
                a.byteswap()
        if code != "Q":
            values, sizes = array("Q", values), array("Q", sizes)
        return cls(values, sizes, names, elf.strings(link), t == SHT_DYNSYM)

    @property
    def nbytes(self) -> int:
        """The memory its columns hold (the string table is counted by FileSymbols, once)."""
        return sum(a.itemsize * len(a) for a in (self.values, self.sizes, self.names))

    def name(self, k: int) -> str:
        """The ``k``-th function's name, without the version .symtab may append (``name@@VER``,
        ``name@VER``)."""
        s = self.strtab
        off = self.names[k]
        if off >= len(s):
            return ""
        end = s.find(b"\0", off, off + NAME_LIMIT)
        raw = s[off:end if end >= 0 else off + NAME_LIMIT]
        at = raw.find(b"@")
        return (raw[:at] if at > 0 else raw).decode("utf-8", "replace")


def _columns(raw: bytes, n: int, is64: bool, values: array[int], sizes: array[int], names: array[int]) -> None:
    """Append the ``n`` entries of ``raw`` to the columns (in the file's byte order)."""
    ent, word = (24, 8) if is64 else (16, 4)
    info_at, shndx_at = (4, 6) if is64 else (12, 14)
    # One byte per entry, 1 where it is a defined function: st_info's type through _IS_FUNC,
    # AND st_shndx != 0 (either byte non-zero), as big integers (one C operation each);
    # times 0xFF, and spread over a word per entry: a mask that zeroes the other entries'
    # st_value. Columns come out of the entries as strided memoryviews: no per-entry code.
    func = int.from_bytes(raw[info_at::ent].translate(_IS_FUNC), "little")
    defined = (int.from_bytes(raw[shndx_at::ent].translate(_NONZERO), "little")
               | int.from_bytes(raw[shndx_at + 1::ent].translate(_NONZERO), "little"))
    keep = ((func & defined) * 0xFF).to_bytes(n, "little")
    spread = bytearray(word * n)
    for b in range(word):
        spread[b::word] = keep
    cols = memoryview(raw).cast("Q") if is64 else memoryview(raw).cast("I")
    per = ent // word  # words per entry
    value_bytes = cols[1::per].tobytes()
    values.frombytes((int.from_bytes(value_bytes, "little") & int.from_bytes(spread, "little")).to_bytes(
        len(value_bytes), "little"))
    sizes.frombytes(cols[2::per].tobytes())
    names.frombytes(memoryview(raw).cast("I")[0::ent // 4].tobytes())


class FileSymbols:
    """The symbols of one ELF binary: ``lookup(file_offset)`` -> (function, offset into it).
    ``sources`` says where they came from (".symtab", ".dynsym", a debug file path,
    ".gnu_debugdata"): the last two are read when a lookup first misses."""

    def __init__(self, path: str, tables: list[_Table], loads: list[tuple[int, int, int, bool]],
                 build_id: str | None, sources: list[str], extra: Callable[[], tuple[list[_Table], str] | None] | None
                 ) -> None:
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
        with _open(path) as image:
            try:
                elf = _Elf(image, limits)
                tables = elf.function_tables()
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


def _open(path: str) -> Image:
    """``path`` as an :class:`Image` (bpfkit's regular-file checks), with bpfkit errors."""
    try:
        return Image.open(path, "binary", BINARY_LIMIT)
    except NotFoundError:
        raise NotFoundError(f"binary {path} does not exist") from None


def _extra_symbols(path: str, bid: str | None, root: str, opened: str, st: os.stat_result,
                   limits: Limits) -> Callable[[], tuple[list[_Table], str] | None]:
    """What a first miss reads: a separate debug file (by build id, then path), else the
    MiniDebugInfo in the .gnu_debugdata section of the binary (``opened`` again, if it is
    still the file ``st`` describes). A file that is there but cannot be used (malformed,
    over a limit) is warned about once (this runs once per binary) and skipped."""
    def load() -> tuple[list[_Table], str] | None:
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


def _mini_debug_info(opened: str, st: os.stat_result, limits: Limits) -> tuple[list[_Table], str] | None:
    """The functions of the xz-compressed ELF in ``opened``'s .gnu_debugdata section, bounded:
    the section's size, the decoder's memory and the decompressed size."""
    try:
        image = _open(opened)
    except (NotFoundError, KernelError):
        return None  # gone, unreadable
    with image:
        now = image.stat
        assert now is not None
        if (now.st_dev, now.st_ino, now.st_mtime_ns) != (st.st_dev, st.st_ino, st.st_mtime_ns):
            return None  # replaced since it was read
        elf = _Elf(image, limits, segments=False)
        at = elf.section_named(".gnu_debugdata")
        if at is None:
            return None
        size = elf.sections[at][2]
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
        return _Elf(inner, limits, segments=False).function_tables(), ".gnu_debugdata"


def _symbols_of(path: str, bid: str | None, limits: Limits) -> list[_Table] | None:
    """A separate debug file's functions if it exists and matches the build id (None if not
    there, not ELF, or of another build); bpfkit errors if it cannot be used."""
    try:
        image = _open(path)  # NotFoundError when there is none
    except (NotFoundError, KernelError):
        return None
    with image:
        try:
            elf = _Elf(image, limits, segments=False)
        except NotElfError:
            return None
        if bid is not None and elf.build_id() not in (None, bid):
            return None  # a stale debug file of another build
        return elf.function_tables()
