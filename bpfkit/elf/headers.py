# SPDX-License-Identifier: Apache-2.0
"""ELF's own layouts, decoded in one place: the ELF header, the section header table, the
program header table, symbol-table entries and notes (elf.h; the gABI), of 32- and 64-bit
files in either byte order, read from an :class:`~bpfkit.elf.image.Image` (pread of a file,
or bytes in memory).

:class:`ElfHeaders` reads the ELF header and the two header tables once, checking each size and
offset they state against the image before anything is read; section contents are read when
asked for (:meth:`ElfHeaders.section_data`, :meth:`ElfHeaders.strings`: each string table
once). Everything above it goes through it: the BPF object loader and BinaryImage/USDT (the
records of bpfkit.elf.reader), and the symbolizer (bpfkit.symbols.elf, with the columns of
bpfkit.elf.columns).

Limits (docs/security.md's Limits table): a ``bounded`` image, a binary other users control
(the symbolizer's files, the targets of uprobes and USDT), is refused past
:data:`SECTIONS_LIMIT` section headers and :data:`PHDRS_LIMIT` bytes of program headers; a
:class:`Limits` given with it is charged for every string table read (the symbol-table entries
are charged by bpfkit.elf.columns), over a binary and its debug file together.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator

from .._record import FrozenRecord
from ..errors import BPFKitError, ParseError
from .image import Image

__all__ = ["ElfHeaders", "Segment", "Note", "iter_notes", "is_elf", "NotElfError", "Limits", "ELF_MAGIC"]

# ELF constants (elf.h).
EM_BPF = 247
ET_REL, ET_EXEC, ET_DYN = 1, 2, 3
SHT_NULL, SHT_PROGBITS, SHT_SYMTAB, SHT_STRTAB, SHT_RELA, SHT_NOTE, SHT_NOBITS, SHT_REL = 0, 1, 2, 3, 4, 7, 8, 9
SHT_DYNSYM = 11
SHT_GNU_VERDEF, SHT_GNU_VERNEED, SHT_GNU_VERSYM = 0x6FFFFFFD, 0x6FFFFFFE, 0x6FFFFFFF
SHF_WRITE, SHF_ALLOC, SHF_EXECINSTR = 0x1, 0x2, 0x4
STB_LOCAL, STB_GLOBAL, STB_WEAK = 0, 1, 2
STT_NOTYPE, STT_OBJECT, STT_FUNC, STT_SECTION, STT_FILE, STT_GNU_IFUNC = 0, 1, 2, 3, 4, 10
SHN_UNDEF, SHN_LORESERVE, SHN_ABS, SHN_COMMON, SHN_XINDEX = 0, 0xFF00, 0xFFF1, 0xFFF2, 0xFFFF
STV_DEFAULT, STV_HIDDEN = 0, 2
PT_LOAD, PT_DYNAMIC = 1, 2
PF_X = 1
DT_NULL, DT_NEEDED, DT_STRTAB = 0, 1, 5
NT_GNU_BUILD_ID = 3
# .gnu.version entries (binutils/glibc): the version index, and the bit that hides a
# non-default version from unversioned references.
VERSYM_HIDDEN, VERSYM_VERSION = 0x8000, 0x7FFF

ELF_MAGIC = b"\x7fELF"
# Elf64_Ehdr/Elf32_Ehdr, _Shdr, _Phdr and _Sym (without a byte order), by 64-bit; compiled
# per (64-bit, little-endian) when a file of that kind is first read.
_FORMATS = {True: ("16sHHIQQQIHHHHHH", "IIQQQQIIQQ", "IIQQQQQQ", "IBBHQQ"),
            False: ("16sHHIIIIIHHHHHH", "IIIIIIIIII", "IIIIIIII", "IIIBBH")}
_LAYOUTS: dict[tuple[bool, bool], tuple[struct.Struct, ...]] = {}


def _layouts(is64: bool, little: bool) -> tuple[struct.Struct, ...]:
    got = _LAYOUTS.get((is64, little))
    if got is None:
        got = _LAYOUTS[is64, little] = tuple(struct.Struct(("<" if little else ">") + f) for f in _FORMATS[is64])
    return got


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


def is_elf(head: bytes | bytearray | memoryview) -> bool:
    """Whether ``head`` (a file's first bytes) starts with the ELF magic."""
    return bytes(head[:4]) == ELF_MAGIC


class NotElfError(ParseError):
    """Not an ELF file at all (a PE file mapped by Wine, a data file, a linker script): the
    symbolizer gives it no symbols without a warning."""


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


class Segment(FrozenRecord):
    """A program header (PT_LOAD and PT_DYNAMIC ones are kept)."""

    __slots__ = ("type", "flags", "offset", "vaddr", "filesz", "memsz")
    type: int
    flags: int
    offset: int
    vaddr: int
    filesz: int
    memsz: int

    def __init__(self, type: int, flags: int, offset: int, vaddr: int, filesz: int, memsz: int) -> None:
        self._set_fields(type, flags, offset, vaddr, filesz, memsz)

    @property
    def executable(self) -> bool:
        return bool(self.flags & PF_X)


class Note(FrozenRecord):
    """One ELF note: owner (NUL stripped), type, descriptor and its offset in the section."""

    __slots__ = ("owner", "type", "desc", "offset")
    owner: bytes
    type: int
    desc: bytes
    offset: int

    def __init__(self, owner: bytes, type: int, desc: bytes, offset: int) -> None:
        self._set_fields(owner, type, desc, offset)


def iter_notes(data: bytes | memoryview, *, little: bool = True, what: str = "note section") -> Iterator[Note]:
    """The notes in the contents of a note section or PT_NOTE segment (4-byte aligned name and
    descriptor, as SHT_NOTE sections of 4-byte alignment have them)."""
    raw = bytes(data)
    head = struct.Struct(("<" if little else ">") + "III")  # Elf_Nhdr: namesz, descsz, type
    off = 0
    while off + head.size <= len(raw):
        namesz, descsz, ntype = head.unpack_from(raw, off)
        name_off = off + head.size
        desc_off = name_off + _align4(namesz)
        if desc_off + descsz > len(raw):
            raise ParseError(f"{what}: note at offset {off} runs past the end of the section")
        yield Note(raw[name_off : name_off + namesz].rstrip(b"\0"), ntype, raw[desc_off : desc_off + descsz], off)
        off = desc_off + _align4(descsz)


def _align4(n: int) -> int:
    return (n + 3) & ~3


class ElfHeaders:
    """The headers of one ELF image: ``is64``, ``little``, ``type``, ``machine``; ``shdrs``,
    the section headers as tuples in file order (sh_name, sh_type, sh_flags, sh_addr,
    sh_offset, sh_size, sh_link, sh_info, sh_addralign, sh_entsize); ``segments``, the PT_LOAD
    and PT_DYNAMIC program headers (none when ``segments`` is false: a relocatable object's
    or a debug file's are not to be trusted or not needed).

    Subclasses refine the checks (:meth:`_check_ident`, :meth:`_check_type`) and read the
    sections (:meth:`_parse_sections`, after the section headers, before the program headers)."""

    _require_sections = False

    def __init__(self, image: Image, *, segments: bool = True, bounded: bool = False,
                 limits: Limits | None = None) -> None:
        self.image, self.path, self.size, self.limits = image, image.path, image.size, limits
        self._strings: dict[int, bytes] = {}
        self._parse_header(bounded)
        self._parse_sections()
        # (p_type, p_flags, p_offset, p_vaddr, p_filesz, p_memsz) of PT_LOAD and PT_DYNAMIC
        self._phdrs = self._parse_segments(bounded) if segments else []
        self._segments: list[Segment] | None = None

    def _bad(self, why: str) -> ParseError:
        return self.image.bad(why)

    def _not_elf(self, why: str) -> NotElfError:
        return NotElfError(str(self._bad(why)))

    # ------------------------------------------------------------------------ header
    def _check_ident(self, cls: int, enc: int) -> None:
        if cls not in (1, 2) or enc not in (1, 2):
            raise self._not_elf(f"unknown ELF class {cls} / data encoding {enc}")

    def _check_type(self, e_type: int, e_machine: int) -> None:
        pass

    def _parse_header(self, bounded: bool) -> None:
        size = self.size
        raw = bytes(self.image.read(0, min(64, size), "ELF header"))
        if size < 4 or not is_elf(raw):
            raise self._not_elf("not an ELF file (bad magic)")
        if size < 16:
            raise self._not_elf(f"truncated ELF header ({size} bytes)")
        cls, enc = raw[4], raw[5]
        self._check_ident(cls, enc)
        self.is64, self.little = cls == 2, enc == 1
        self._e = "<" if self.little else ">"
        ehdr, shdr, self._phdr, self._sym = _layouts(self.is64, self.little)
        if size < ehdr.size:
            raise self._not_elf(f"truncated ELF header ({size} bytes, need {ehdr.size})")
        (_, self.type, self.machine, _, _, phoff, shoff, _, _, phentsize, phnum, shentsize, shnum,
         shstrndx) = ehdr.unpack_from(raw, 0)
        self._check_type(self.type, self.machine)
        self._shdr = shdr
        self._phoff, self._phnum, self._phentsize = phoff, phnum, phentsize
        if shoff == 0 or shnum == 0:
            if self._require_sections:
                raise self._bad("ELF object has no section headers")
            shnum = 0
        elif shentsize != shdr.size:
            raise self._bad(f"section header size {shentsize}, expected {shdr.size}")
        elif bounded and shnum > SECTIONS_LIMIT:
            raise self._bad(f"{shnum} section headers, over bpfkit's limit of {SECTIONS_LIMIT}")
        elif shoff + shnum * shdr.size > size:
            raise self._bad(f"truncated ELF: {shnum} section headers at offset {shoff} run past the end ({size} bytes)")
        self._shoff, self._shnum, self._shstrndx = shoff, shnum, shstrndx
        table = self.image.read(shoff, shnum * shdr.size, "section headers") if shnum else b""
        self.shdrs: list[tuple[int, ...]] = list(shdr.iter_unpack(table))

    def _parse_sections(self) -> None:
        pass

    def _parse_segments(self, bounded: bool) -> list[tuple[int, int, int, int, int, int]]:
        phoff, phnum, phentsize = self._phoff, self._phnum, self._phentsize
        out: list[tuple[int, int, int, int, int, int]] = []
        if not phnum or not phoff:
            return out
        if phentsize != self._phdr.size:
            raise self._bad(f"program header size {phentsize}, expected {self._phdr.size}")
        if bounded and phnum * phentsize > PHDRS_LIMIT:
            raise self._bad(f"{phnum} program headers ({phnum * phentsize} bytes), over bpfkit's limit of "
                            f"{PHDRS_LIMIT} bytes (the kernel's ELF loader's)")
        if phoff + phnum * phentsize > self.size:
            raise self._bad("program header table runs past the end of the file")
        for f in self._phdr.iter_unpack(self.image.read(phoff, phnum * phentsize, "program headers")):
            if self.is64:
                ptype, flags, poff, vaddr, _paddr, filesz, memsz, _align = f
            else:
                ptype, poff, vaddr, _paddr, filesz, memsz, flags, _align = f
            if ptype in (PT_LOAD, PT_DYNAMIC):
                out.append((ptype, flags, poff, vaddr, filesz, memsz))
        return out

    @property
    def segments(self) -> list[Segment]:
        """The PT_LOAD and PT_DYNAMIC program headers, in file order."""
        if self._segments is None:
            self._segments = [Segment(*p) for p in self._phdrs]
        return self._segments

    @property
    def loads(self) -> list[tuple[int, int, int, bool]]:
        """(p_offset, p_filesz, p_vaddr, executable) of each PT_LOAD segment."""
        return [(off, filesz, vaddr, bool(flags & PF_X)) for t, flags, off, vaddr, filesz, _ in self._phdrs
                if t == PT_LOAD]

    def sym_struct(self) -> struct.Struct:
        """Elf64_Sym (st_name, st_info, st_other, st_shndx, st_value, st_size) or Elf32_Sym
        (st_name, st_value, st_size, st_info, st_other, st_shndx) in the file's byte order."""
        return self._sym

    # ---------------------------------------------------------------------- sections
    def section_data(self, index: int) -> bytes | memoryview:
        """Section ``index``'s contents (none for SHT_NOBITS), read now."""
        _, t, _, _, off, sz, *_ = self.shdrs[index]
        return b"" if t == SHT_NOBITS else self.image.read(off, sz, f"section {index}")

    def strings(self, index: int) -> bytes:
        """String-table section ``index``, read once (the tables linking to it share it) and
        charged to ``limits``."""
        got = self._strings.get(index)
        if got is None:
            _, t, _, _, off, sz, *_ = self.shdrs[index]
            if t == SHT_NOBITS:
                sz = 0
            if self.limits is not None:
                self.limits.take_strings(sz, self.path, f"string table (section {index})")
            got = self._strings[index] = bytes(self.image.read(off, sz, f"string table (section {index})"))
        return got

    def has(self, sh_type: int) -> bool:
        return any(s[1] == sh_type for s in self.shdrs)

    def section_index(self, name: str) -> int | None:
        """The index of the first section called ``name`` (names compared within
        :data:`NAME_LIMIT` bytes), or None; None too when e_shstrndx names no section."""
        if not 0 <= self._shstrndx < len(self.shdrs):
            return None
        names = self.strings(self._shstrndx)
        want = name.encode()
        for i, s in enumerate(self.shdrs):
            if names[s[0]:names.find(b"\0", s[0], s[0] + NAME_LIMIT)] == want:
                return i
        return None

    def build_id(self) -> str | None:
        """The GNU build id (NT_GNU_BUILD_ID in a note section) in hex, or None; at most
        :data:`NOTES_LIMIT` bytes of notes are read."""
        budget = NOTES_LIMIT
        for i, s in enumerate(self.shdrs):
            if s[1] == SHT_NOTE and s[5] <= budget:
                budget -= s[5]
                try:
                    for note in iter_notes(bytes(self.section_data(i)), little=self.little):
                        if note.owner == b"GNU" and note.type == NT_GNU_BUILD_ID and note.desc:
                            return note.desc.hex()
                except BPFKitError:
                    continue
        return None
