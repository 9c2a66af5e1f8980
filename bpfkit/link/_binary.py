"""User-space binaries for uprobes: symbols to file offsets, and library names to paths.

Pure file parsing (no syscalls beyond reading files): an executable or shared object's
``.symtab`` and ``.dynsym`` give each function's virtual address; the PT_LOAD segment holding
that address turns it into the file offset the kernel's uprobe wants
(offset = st_value - p_vaddr + p_offset). Library names (``libc``, ``libc.so.6``) resolve as
bpftrace resolves them: through the ld.so cache (/etc/ld.so.cache), then the standard
library directories; program names (``bash``) through $PATH.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import functools
import glob
import os
import platform
import shutil
import stat
import struct

from ..elf.reader import read_binary
from ..errors import NotFoundError, ParseError

__all__ = ["ElfSymbol", "BinaryImage", "resolve_binary", "ld_cache_entries", "LIBRARY_DIRS"]

# elf.h
ET_EXEC, ET_DYN = 2, 3
PT_LOAD, PT_DYNAMIC = 1, 2
PF_X = 1
SHT_SYMTAB, SHT_DYNSYM = 2, 11
STT_FUNC, STT_GNU_IFUNC = 2, 10
STB_LOCAL, STB_GLOBAL, STB_WEAK = 0, 1, 2
SHN_UNDEF = 0
DT_NULL, DT_NEEDED, DT_STRTAB = 0, 1, 5


@dataclasses.dataclass(frozen=True)
class ElfSymbol:
    name: str
    value: int  # virtual address (0 for an undefined symbol)
    size: int
    type: int  # STT_*
    bind: int  # STB_*
    defined: bool  # st_shndx != SHN_UNDEF
    table: str  # ".symtab" or ".dynsym"


@dataclasses.dataclass(frozen=True)
class Segment:
    vaddr: int
    offset: int
    filesz: int
    memsz: int
    flags: int



class BinaryImage:
    """The parts of an ELF executable or shared object that uprobes need.

    :meth:`cached` shares one parsed image per file (attaching many probes in libc parses
    its symbol tables once, not once per probe or per Executable)."""

    _CACHE: "dict[str, tuple[tuple[int, int, int, int], BinaryImage]]" = {}
    _CACHE_SIZE = 16

    @classmethod
    def cached(cls, path: str) -> "BinaryImage":
        """The image of ``path``, parsed again only when the file changed (device, inode,
        size or mtime differ) since it was last parsed."""
        try:
            st = os.stat(path)
        except FileNotFoundError:
            raise NotFoundError(f"binary {path} does not exist") from None
        except OSError:
            return cls(path)
        key = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
        hit = cls._CACHE.get(path)
        if hit is not None and hit[0] == key:
            return hit[1]
        image = cls(path)
        if len(cls._CACHE) >= cls._CACHE_SIZE:
            cls._CACHE.pop(next(iter(cls._CACHE)))
        cls._CACHE[path] = (key, image)
        return image

    def __init__(self, path: str) -> None:
        self.path = path
        self._parse(memoryview(read_binary(path)))

    # --------------------------------------------------------------------- parsing
    def _bad(self, why: str) -> ParseError:
        return ParseError(f"{self.path}: {why}")

    def _parse(self, data: memoryview) -> None:
        if len(data) < 16 or bytes(data[:4]) != b"\x7fELF":
            raise self._bad("not an ELF file")
        cls, enc = data[4], data[5]
        if cls not in (1, 2) or enc not in (1, 2):
            raise self._bad(f"unknown ELF class {cls} / data encoding {enc}")
        e = "<" if enc == 1 else ">"
        is64 = cls == 2
        self._e, self._is64, self._data = e, is64, data
        ehdr = struct.Struct(e + ("HHIQQQIHHHHHH" if is64 else "HHIIIIIHHHHHH"))
        if len(data) < 16 + ehdr.size:
            raise self._bad("truncated ELF header")
        (self.type, _machine, _ver, _entry, phoff, shoff, _flags, _ehsize, phentsize, phnum,
         shentsize, shnum, _shstrndx) = ehdr.unpack_from(data, 16)
        if self.type not in (ET_EXEC, ET_DYN):
            raise self._bad(f"ELF type {self.type} is neither an executable nor a shared object")
        phdr = struct.Struct(e + ("IIQQQQQQ" if is64 else "IIIIIIII"))
        self.segments: list[Segment] = []
        dynamic: Segment | None = None
        for i in range(phnum):
            off = phoff + i * phentsize
            if off + phdr.size > len(data):
                raise self._bad("program header table runs past the end of the file")
            fields = phdr.unpack_from(data, off)
            if is64:
                ptype, pflags, poff, vaddr, _paddr, filesz, memsz, _align = fields
            else:
                ptype, poff, vaddr, _paddr, filesz, memsz, pflags, _align = fields
            seg = Segment(vaddr, poff, filesz, memsz, pflags)
            if ptype == PT_LOAD:
                self.segments.append(seg)
            elif ptype == PT_DYNAMIC:
                dynamic = seg
        shdr = struct.Struct(e + ("IIQQQQIIQQ" if is64 else "IIIIIIIIII"))
        sections = []
        for i in range(shnum if shoff else 0):
            off = shoff + i * shentsize
            if off + shdr.size > len(data):
                raise self._bad("section header table runs past the end of the file")
            sections.append(shdr.unpack_from(data, off))
        self.symbols: list[ElfSymbol] = []
        for sh in sections:
            _name, stype, _flags, _addr, soff, ssize, link, _info, _align, entsize = sh
            if stype not in (SHT_SYMTAB, SHT_DYNSYM) or not (0 <= link < len(sections)):
                continue
            strtab = sections[link]
            self._read_symbols(soff, ssize, entsize, strtab[4], strtab[5], ".symtab" if stype == SHT_SYMTAB else ".dynsym")
        self.needed = self._read_needed(dynamic)

    def _string(self, table_off: int, table_size: int, index: int) -> str:
        if index >= table_size:
            return ""
        start = table_off + index
        end = bytes(self._data[start : table_off + table_size]).find(b"\0")
        raw = bytes(self._data[start : start + end]) if end >= 0 else bytes(self._data[start : table_off + table_size])
        return raw.decode(errors="replace")

    def _read_symbols(self, off: int, size: int, entsize: int, str_off: int, str_size: int, table: str) -> None:
        sym = struct.Struct(self._e + ("IBBHQQ" if self._is64 else "IIIBBH"))
        entsize = entsize or sym.size
        if off + size > len(self._data) or str_off + str_size > len(self._data):
            raise self._bad(f"{table} runs past the end of the file")
        strings = bytes(self._data[str_off : str_off + str_size])
        for i in range(1, size // entsize):
            fields = sym.unpack_from(self._data, off + i * entsize)
            if self._is64:
                name_idx, info, _other, shndx, value, ssize = fields
            else:
                name_idx, value, ssize, info, _other, shndx = fields
            if not name_idx or name_idx >= len(strings):
                continue
            end = strings.find(b"\0", name_idx)
            name = strings[name_idx : end if end >= 0 else len(strings)].decode(errors="replace")
            self.symbols.append(
                ElfSymbol(name, value, ssize, info & 0xF, info >> 4, shndx != SHN_UNDEF, table)
            )

    def _read_needed(self, dynamic: Segment | None) -> list[str]:
        if dynamic is None:
            return []
        dyn = struct.Struct(self._e + ("qQ" if self._is64 else "iI"))
        entries = []
        end = min(dynamic.offset + dynamic.filesz, len(self._data))
        for off in range(dynamic.offset, end - dyn.size + 1, dyn.size):
            tag, val = dyn.unpack_from(self._data, off)
            if tag == DT_NULL:
                break
            entries.append((tag, val))
        strtab = next((v for t, v in entries if t == DT_STRTAB), None)
        if strtab is None:
            return []
        str_off = self.file_offset(strtab, executable_only=False)
        if str_off is None:
            return []
        out = []
        for tag, val in entries:
            if tag == DT_NEEDED:
                raw = bytes(self._data[str_off + val : str_off + val + 256])
                out.append(raw.split(b"\0", 1)[0].decode(errors="replace"))
        return out

    # --------------------------------------------------------------------- queries
    def file_offset(self, vaddr: int, executable_only: bool = True) -> int | None:
        """The file offset of virtual address ``vaddr``, through the PT_LOAD holding it."""
        for pass_exec in ((True, False) if executable_only else (False,)):
            for seg in self.segments:
                if pass_exec and not seg.flags & PF_X:
                    continue
                if seg.vaddr <= vaddr < seg.vaddr + seg.memsz:
                    return vaddr - seg.vaddr + seg.offset
        return None

    def lookup(self, name: str) -> list[ElfSymbol]:
        """Every symbol entry named ``name`` (a ``name@VERSION`` entry counts as ``name``)."""
        return [s for s in self.symbols if s.name == name or s.name.split("@", 1)[0] == name]

    @functools.cached_property
    def functions(self) -> dict[str, ElfSymbol]:
        """Defined functions by name; a global definition wins over a local one."""
        found: dict[str, ElfSymbol] = {}
        for s in self.symbols:
            if not s.defined or s.type != STT_FUNC or not s.value:
                continue
            name = s.name.split("@", 1)[0]
            have = found.get(name)
            if have is None or (have.bind == STB_LOCAL and s.bind != STB_LOCAL):
                found[name] = s
        return found


# --------------------------------------------------------------------- library names
def _multiarch() -> str:
    machine = platform.machine()
    return {"x86_64": "x86_64-linux-gnu", "aarch64": "aarch64-linux-gnu", "riscv64": "riscv64-linux-gnu"}.get(
        machine, f"{machine}-linux-gnu"
    )


LIBRARY_DIRS = (
    f"/lib/{_multiarch()}",
    f"/usr/lib/{_multiarch()}",
    "/lib64",
    "/usr/lib64",
    "/lib",
    "/usr/lib",
    "/usr/local/lib",
)

LD_SO_CACHE = "/etc/ld.so.cache"
_OLD_MAGIC = b"ld.so-1.7.0"
_NEW_MAGIC = b"glibc-ld.so.cache1.1"
# flags of a cache entry: FLAG_ELF_LIBC6 (3) with the arch's "required" bits (sysdeps
# dl-cache.h): x86-64 0x0300, aarch64 0x0a00, riscv64 (lp64d) 0x1000.
_ARCH_FLAGS = {"x86_64": 0x0303, "aarch64": 0x0A03, "riscv64": 0x1003}


def parse_ld_cache(data: bytes) -> list[tuple[str, str, int]]:
    """(library name, path, flags) of every entry of an ld.so.cache image, in cache order."""
    start = 0
    if data.startswith(_OLD_MAGIC):
        # Old format first ("ld.so-1.7.0", nlibs, 12-byte entries), new format after it,
        # aligned to 8 bytes; string offsets of the new format count from its header.
        (nlibs,) = struct.unpack_from("<I", data, 12)
        start = (16 + nlibs * 12 + 7) & ~7
    if data[start : start + len(_NEW_MAGIC)] != _NEW_MAGIC:
        raise ParseError(f"{LD_SO_CACHE}: unknown format")
    nlibs, _strlen = struct.unpack_from("<II", data, start + 20)
    entries = []
    base = start + 48
    for i in range(nlibs):
        off = base + i * 24
        if off + 24 > len(data):
            raise ParseError(f"{LD_SO_CACHE}: truncated at entry {i}")
        flags, key, value = struct.unpack_from("<iII", data, off)
        key_abs, value_abs = (key + start, value + start) if start else (key, value)
        name = data[key_abs : data.find(b"\0", key_abs)].decode(errors="replace")
        path = data[value_abs : data.find(b"\0", value_abs)].decode(errors="replace")
        entries.append((name, path, flags))
    return entries


@functools.cache
def ld_cache_entries() -> tuple[tuple[str, str], ...]:
    """(name, path) of the ld.so cache's libraries for this machine's ABI ('' when unreadable)."""
    try:
        with open(LD_SO_CACHE, "rb") as f:
            entries = parse_ld_cache(f.read())
    except (OSError, ParseError, struct.error):
        return ()
    want = _ARCH_FLAGS.get(platform.machine())
    return tuple((n, p) for n, p, fl in entries if want is None or fl == want)


def _library_candidates(name: str) -> list[str]:
    """libc -> [libc.so, libc.so.*]; libc.so.6 -> [libc.so.6]."""
    if ".so" in name:
        return [name]
    base = name if name.startswith("lib") else "lib" + name
    return [base + ".so", base + ".so.*"]


def _is_elf(path: str) -> bool:
    """True for a regular file starting with the ELF magic (never blocks on a FIFO)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        return stat.S_ISREG(os.fstat(fd).st_mode) and os.pread(fd, 4, 0) == b"\x7fELF"
    except OSError:
        return False
    finally:
        os.close(fd)


def _find_library(name: str) -> str | None:
    patterns = _library_candidates(name)
    # The ld.so cache lists the versioned names (libc.so.6), which is what programs load.
    for pattern in patterns:
        for entry, path in ld_cache_entries():
            if fnmatch.fnmatchcase(entry, pattern) and os.path.exists(path):
                return path
    for d in LIBRARY_DIRS:
        for pattern in patterns:
            hits = sorted(glob.glob(os.path.join(d, pattern)))
            hits = [h for h in hits if _is_elf(h)]  # libc.so itself is a linker script
            if hits:
                return hits[0]
    return None


# Library names already resolved (libc -> its path): the ld.so cache scan costs milliseconds,
# and attaching many probes resolves the same name each time. Checked to exist on every use.
_RESOLVED: dict[str, str] = {}


def resolve_binary(name: str) -> str:
    """An absolute, existing path for a binary named like bpftrace accepts it.

    ``/usr/bin/bash`` or ``./a.out`` (anything with a ``/``) is taken as a path; ``libc``,
    ``libc.so.6`` or ``c`` ... are libraries looked up in the ld.so cache then the standard
    directories; anything else is looked up in $PATH first, then as a library.
    """
    if not name:
        raise ParseError("empty binary name")
    if "/" in name:
        path = os.path.abspath(name)
        if not os.path.exists(path):
            raise NotFoundError(f"binary {name} does not exist")
        return os.path.realpath(path)
    cached = _RESOLVED.get(name)
    if cached is not None and os.path.exists(cached):
        return cached
    looks_like_lib = name.startswith("lib") or ".so" in name
    if not looks_like_lib:
        found = shutil.which(name)
        if found:
            return os.path.realpath(found)
    lib = _find_library(name)
    if lib:
        _RESOLVED[name] = os.path.realpath(lib)
        return _RESOLVED[name]
    where = "the ld.so cache and " + ", ".join(LIBRARY_DIRS)
    if not looks_like_lib:
        where = "$PATH, " + where
    raise NotFoundError(f"binary {name!r} not found in {where}")
