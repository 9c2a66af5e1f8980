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
"""

from __future__ import annotations

import lzma
import os
import stat
import struct
import sys
from array import array
from bisect import bisect_right
from collections.abc import Callable
from itertools import compress

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

__all__ = ["FileSymbols", "debug_file_candidates", "DEFAULT_DEBUG_ROOT"]

DEFAULT_DEBUG_ROOT = "/usr/lib/debug"
NT_GNU_BUILD_ID = 3
# A MiniDebugInfo section is a few hundred KiB; its ELF a few MiB. Bounded all the same.
_DEBUGDATA_LIMIT = 256 << 20
# st_info -> 1 for STT_FUNC and STT_GNU_IFUNC (the low nibble is the type), else 0.
_IS_FUNC = bytes(1 if (i & 0xF) in (STT_FUNC, STT_GNU_IFUNC) else 0 for i in range(256))
_NONZERO = bytes([0] + [1] * 255)
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


class _Elf:
    """What the symbolizer needs of one ELF file, read through ``read(offset, size)``: the
    section headers (type, offset, size, link, entsize), PT_LOAD segments, the build id."""

    def __init__(self, read: Callable[[int, int], bytes], size: int, path: str, *, segments: bool = True) -> None:
        self.read, self.size, self.path = read, size, path
        ident = read(0, 64)
        if len(ident) < 52 or ident[:4] != b"\x7fELF" or ident[4] not in (1, 2) or ident[5] not in (1, 2):
            raise ParseError(f"{path}: not an ELF file (bad magic or class)")
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
            raise ParseError(f"{path}: section header size {shentsize}, expected {shdr.size}")
        raw = self._bytes(shoff, shnum * shdr.size, "section headers") if shoff else b""
        # (type, offset, size, link, entsize, name offset)
        self.sections = [(t, off, sz, link, ent, name) for name, t, _, _, off, sz, link, _, _, ent
                         in shdr.iter_unpack(raw)]
        self.shstrndx = shstrndx
        phdr = struct.Struct(e + ("IIQQQQQQ" if self.is64 else "IIIIIIII"))
        self.loads: list[tuple[int, int, int, bool]] = []  # (p_offset, p_filesz, p_vaddr, executable)
        if segments and phoff and phnum and phentsize >= phdr.size:  # (a debug file's are the binary's)
            raw = self._bytes(phoff, phnum * phentsize, "program headers")
            for i in range(phnum):
                f = phdr.unpack_from(raw, i * phentsize)
                ptype, flags, poff, vaddr, filesz = ((f[0], f[1], f[2], f[3], f[5]) if self.is64
                                                     else (f[0], f[6], f[1], f[2], f[4]))
                if ptype == PT_LOAD:
                    self.loads.append((poff, filesz, vaddr, bool(flags & PF_X)))

    def _bytes(self, offset: int, size: int, what: str) -> bytes:
        if offset + size > self.size:
            raise ParseError(f"{self.path}: truncated ELF: {what} ({size} bytes at offset {offset}) run past the "
                             f"end ({self.size} bytes)")
        return self.read(offset, size)

    def section_data(self, index: int) -> bytes:
        t, off, sz, *_ = self.sections[index]
        return b"" if t == SHT_NOBITS else self._bytes(off, sz, f"section {index}")

    def has(self, sh_type: int) -> bool:
        return any(s[0] == sh_type for s in self.sections)

    def section_named(self, name: str) -> int | None:
        if not 0 <= self.shstrndx < len(self.sections):
            return None
        names = self.section_data(self.shstrndx)
        want = name.encode()
        for i, s in enumerate(self.sections):
            if names[s[5]:names.find(b"\0", s[5])] == want:
                return i
        return None

    def build_id(self) -> str | None:
        """The GNU build id (NT_GNU_BUILD_ID in a note section) in hex, or None."""
        for i, s in enumerate(self.sections):
            if s[0] == SHT_NOTE and s[2] <= 1 << 16:
                try:
                    for note in iter_notes(self.section_data(i), little=self.little):
                        if note.owner == b"GNU" and note.type == NT_GNU_BUILD_ID and note.desc:
                            return note.desc.hex()
                except BPFKitError:
                    continue
        return None

    def function_tables(self) -> list[_Table]:
        """The defined functions of every .symtab and .dynsym, in section order."""
        out = []
        for i, (t, _, _, link, _, _) in enumerate(self.sections):
            if t in (SHT_SYMTAB, SHT_DYNSYM) and 0 <= link < len(self.sections):
                out.append(_Table.read(self, i))
        return out


class _Table:
    """One symbol table as columns, entry by entry: st_value (0 for every entry that is not a
    defined function: STT_FUNC or STT_GNU_IFUNC with st_shndx != SHN_UNDEF), st_size,
    st_name; and its string table."""

    def __init__(self, values: array[int], sizes: array[int], names: array[int], strtab: bytes,
                 dynamic: bool) -> None:
        self.values, self.sizes, self.names, self.strtab, self.dynamic = values, sizes, names, strtab, dynamic

    @classmethod
    def read(cls, elf: _Elf, i: int) -> _Table:
        t, _, _, link, _, _ = elf.sections[i]
        ent, word = (24, 8) if elf.is64 else (16, 4)
        raw = elf.section_data(i)
        n = len(raw) // ent
        raw = raw[:n * ent]
        info_at, shndx_at = (4, 6) if elf.is64 else (12, 14)
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
        code = "Q" if elf.is64 else "I"
        cols = memoryview(raw).cast("Q") if elf.is64 else memoryview(raw).cast("I")
        per = ent // word  # words per entry
        value_bytes = cols[1::per].tobytes()
        masked = (int.from_bytes(value_bytes, "little") & int.from_bytes(spread, "little")).to_bytes(
            len(value_bytes), "little")
        values, sizes = array(code, masked), array(code, cols[2::per].tobytes())
        names = array("I", memoryview(raw).cast("I")[0::ent // 4].tobytes())
        if elf.little != (sys.byteorder == "little"):
            for a in (values, sizes, names):
                a.byteswap()
        if code != "Q":
            values, sizes = array("Q", values), array("Q", sizes)
        return cls(values, sizes, names, elf.section_data(link), t == SHT_DYNSYM)

    def name(self, k: int) -> str:
        """The ``k``-th function's name, without the version .symtab may append (``name@@VER``,
        ``name@VER``)."""
        s = self.strtab
        off = self.names[k]
        raw = s[off:s.find(b"\0", off)] if off < len(s) else b""
        at = raw.find(b"@")
        return (raw[:at] if at > 0 else raw).decode("utf-8", "replace")


def _read_file(path: str) -> tuple[Callable[[int, int], bytes], os.stat_result, Callable[[], None]]:
    """(read, stat, close) of the regular file at ``path``, with bpfkit errors."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        raise NotFoundError(f"binary {path} does not exist") from None
    except OSError as exc:
        raise KernelError("open binary", exc.errno or 0, path) from None
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        raise ParseError(f"binary {path}: not a regular file")
    return (lambda off, size: os.pread(fd, size, off)), st, lambda: os.close(fd)


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
        self._scans = 0
        self._raw: bytes | None = None  # _values' bytes, for _scan

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
        unreadable or malformed file."""
        read, st, close = _read_file(path)
        try:
            elf = _Elf(read, st.st_size, path)
            tables = elf.function_tables()
            bid = elf.build_id()
            sources = [".dynsym" if t.dynamic else ".symtab" for t in tables]
            extra = None
            if not elf.has(SHT_SYMTAB):
                extra = _extra_symbols(name or path, bid, debug_root, path, st)
        except OSError as exc:
            raise KernelError("read binary", exc.errno or 0, path) from None
        finally:
            close()
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


def _extra_symbols(path: str, bid: str | None, root: str, opened: str,
                   st: os.stat_result) -> Callable[[], tuple[list[_Table], str] | None]:
    """What a first miss reads: a separate debug file (by build id, then path), else the
    MiniDebugInfo in the .gnu_debugdata section of the binary (``opened`` again, if it is
    still the file ``st`` describes)."""
    def load() -> tuple[list[_Table], str] | None:
        for candidate in debug_file_candidates(path, bid, root):
            tables = _symbols_of(candidate, bid)
            if tables is not None:
                return tables, candidate
        try:
            read, now, close = _read_file(opened)
            try:
                if (now.st_dev, now.st_ino, now.st_mtime_ns) != (st.st_dev, st.st_ino, st.st_mtime_ns):
                    return None  # replaced since it was read
                elf = _Elf(read, now.st_size, opened, segments=False)
                at = elf.section_named(".gnu_debugdata")
                mini = elf.section_data(at) if at is not None else b""
            finally:
                close()
            if not mini:
                return None
            data = lzma.LZMADecompressor(format=lzma.FORMAT_XZ).decompress(mini, max_length=_DEBUGDATA_LIMIT)
            inner = _Elf(lambda off, size: data[off:off + size], len(data), f"{opened}[.gnu_debugdata]",
                         segments=False)
            return inner.function_tables(), ".gnu_debugdata"
        except (lzma.LZMAError, BPFKitError, OSError):
            return None
    return load


def _symbols_of(path: str, bid: str | None) -> list[_Table] | None:
    """A separate debug file's functions, if it exists, parses, and matches the build id."""
    try:
        read, st, close = _read_file(path)  # NotFoundError when there is none
        try:
            elf = _Elf(read, st.st_size, path, segments=False)
            if bid is not None and elf.build_id() not in (None, bid):
                return None  # a stale debug file of another build
            return elf.function_tables()
        finally:
            close()
    except (BPFKitError, OSError):
        return None
