# SPDX-License-Identifier: Apache-2.0
"""bpfkit's one ELF reader: BPF objects, executables and shared objects (uprobes, USDT, the
process tracker) and ELF files holding BTF (a vmlinux image, BTFHub-style files).

* :class:`ElfImage` reads any ELF file (32/64-bit, either byte order, any type), given as
  bytes or as an :class:`~bpfkit.elf.image.Image` (a file read with pread: a binary is read
  in the pieces asked for, not whole): section headers, program headers (PT_LOAD segments),
  symbol tables with GNU symbol versions, notes and DT_NEEDED. Its headers are decoded by
  bpfkit.elf.headers (:class:`~bpfkit.elf.headers.ElfHeaders`, which the symbolizer reads
  through too). Every offset and size is checked against the file before it is used, so
  malformed input gives a ParseError naming the problem rather than an IndexError or a
  struct.error (tests/test_fuzz_elf.py feeds it mutated objects, binaries and notes).
* :class:`ElfFile` is an ElfImage held to what a BPF object must be (``clang -target bpf -c``:
  ELF64, little-endian, EM_BPF, ET_REL, one .symtab) with its REL relocations.
* :class:`SymbolTable` is a binary's symbols with address <-> file offset <-> symbol
  resolution, kept without the file's bytes (caches hold many).

Two rules live here and nowhere else:

* **Address -> file offset** (:func:`vaddr_to_offset`): through the PT_LOAD segment holding
  the address, offset = vaddr - p_vaddr + p_offset. That is the file offset the kernel's
  uprobe wants (it places probes by inode + offset) and what libbpf's elf_sym_offset computes
  (it goes through the symbol's section, sh_addr/sh_offset, which lies inside that same
  segment). Uprobes, USDT (note addresses and semaphores) and the process tracker use it;
  :func:`offset_to_vaddr` is its inverse.
* **Symbol versions** (:meth:`SymbolTable.resolve`): an unversioned name binds to the
  default version of the symbol, the one ``nm -D`` shows as ``name@@VERSION`` and whose
  .gnu.version entry lacks VERSYM_HIDDEN (0x8000), as the dynamic linker binds an
  unversioned reference; ``name@VERSION`` (a hidden, compat version) is reached only by
  naming the version. So ``memcpy`` in glibc is ``memcpy@@GLIBC_2.14``, not the compat
  ``memcpy@GLIBC_2.2.5``.

Why hand-written and not pyelftools (which the design names for ELF): it does not meet the
figures. Measured on this machine (Linux 6.18, CPython 3.11, pyelftools 0.33; best of 7 on a
shared 2-core machine; benchmarks/bench_elf.py): glibc's .dynsym with its
versions (3,043 symbols) takes pyelftools 169 ms, plus 26-79 ms to import
``elftools.elf.elffile``, against 3.5 ms here; a 625 KiB BPF object (loader_core: sections,
symbols, relocations) 37 ms against 2.7 ms. Attaching 1,000 uprobes in libc parses that table
inside the timing (benchmarks/bench_attach.py: 0.21 s in all, so pyelftools would add most of
it again), and ``bpfkit load`` and ``bpfkit attach`` parse an object inside a start-up aimed
under 0.3 s (benchmarks/bench_startup.py). Strictness is the other reason: every offset is
checked, and tests/test_fuzz_elf.py holds this reader to raising only ParseError (bpfkit's
error tree) on mutated objects, binaries and notes. The tests keep pyelftools as an
independent check of the offsets this reader computes.
"""

from __future__ import annotations

import bisect
import struct
from collections.abc import Iterator, Sequence

from .._record import SlottedRecord
from ..errors import ParseError
from .headers import (
    DT_NEEDED,
    DT_NULL,
    DT_STRTAB,
    EM_BPF,
    ET_DYN,
    ET_EXEC,
    ET_REL,
    PF_X,
    PT_DYNAMIC,
    PT_LOAD,
    SHF_ALLOC,
    SHF_EXECINSTR,
    SHF_WRITE,
    SHN_ABS,
    SHN_COMMON,
    SHN_LORESERVE,
    SHN_UNDEF,
    SHN_XINDEX,
    SHT_DYNSYM,
    SHT_GNU_VERDEF,
    SHT_GNU_VERNEED,
    SHT_GNU_VERSYM,
    SHT_NOBITS,
    SHT_NOTE,
    SHT_NULL,
    SHT_PROGBITS,
    SHT_REL,
    SHT_RELA,
    SHT_STRTAB,
    SHT_SYMTAB,
    STB_GLOBAL,
    STB_LOCAL,
    STB_WEAK,
    STT_FILE,
    STT_FUNC,
    STT_GNU_IFUNC,
    STT_NOTYPE,
    STT_OBJECT,
    STT_SECTION,
    STV_DEFAULT,
    STV_HIDDEN,
    VERSYM_HIDDEN,
    VERSYM_VERSION,
    ElfHeaders,
    Note,
    NotElfError,
    Segment,
    iter_notes,
)
from .image import Image

__all__ = [
    "ElfImage", "ElfFile", "SymbolTable", "Section", "Segment", "Symbol", "Relocation", "Note", "NotElfError",
    "iter_notes", "vaddr_to_offset", "offset_to_vaddr",
]
# The ELF constants (bpfkit.elf.headers), as this module's users import them.
__all__ += [
    "EM_BPF", "ET_REL", "ET_EXEC", "ET_DYN", "SHT_NULL", "SHT_PROGBITS", "SHT_SYMTAB", "SHT_STRTAB", "SHT_RELA",
    "SHT_NOTE", "SHT_NOBITS", "SHT_REL", "SHT_DYNSYM", "SHT_GNU_VERDEF", "SHT_GNU_VERNEED", "SHT_GNU_VERSYM",
    "SHF_WRITE", "SHF_ALLOC", "SHF_EXECINSTR", "STB_LOCAL", "STB_GLOBAL", "STB_WEAK", "STT_NOTYPE", "STT_OBJECT",
    "STT_FUNC", "STT_SECTION", "STT_FILE", "STT_GNU_IFUNC", "SHN_UNDEF", "SHN_LORESERVE", "SHN_ABS", "SHN_COMMON",
    "SHN_XINDEX", "STV_DEFAULT", "STV_HIDDEN", "PT_LOAD", "PT_DYNAMIC", "PF_X", "DT_NULL", "DT_NEEDED", "DT_STRTAB",
    "VERSYM_HIDDEN", "VERSYM_VERSION",
]


class Section(SlottedRecord):
    """A section header with its name and contents: ``data`` is a memoryview into the image's
    bytes, or read (once) when first used if the image is a file."""

    __slots__ = ("index", "name", "type", "flags", "offset", "size", "link", "info", "addralign", "entsize", "_data",
                 "addr", "_image")
    _FIELDS = ("index", "name", "type", "flags", "offset", "size", "link", "info", "addralign", "entsize", "data",
               "addr")

    def __init__(self, index: int, name: str, type: int, flags: int, offset: int, size: int, link: int, info: int,
                 addralign: int, entsize: int, data: memoryview | None, addr: int = 0,
                 image: Image | None = None) -> None:
        self.index = index
        self.name = name
        self.type = type
        self.flags = flags
        self.offset = offset
        self.size = size
        self.link = link
        self.info = info
        self.addralign = addralign
        self.entsize = entsize
        self._data = data  # empty for SHT_NOBITS; None: read from ``image`` when first used
        self.addr = addr
        self._image = image

    @property
    def data(self) -> memoryview:
        got = self._data
        if got is None:
            assert self._image is not None
            got = self._data = memoryview(self._image.read(self.offset, self.size, f"section {self.index}"))
        return got

    def _values(self) -> tuple[object, ...]:
        return tuple(getattr(self, name) for name in self._FIELDS)

    def __repr__(self) -> str:
        fields = ", ".join(f"{name}={getattr(self, name)!r}" for name in self._FIELDS)
        return f"{type(self).__qualname__}({fields})"

    @property
    def executable(self) -> bool:
        return bool(self.flags & SHF_EXECINSTR)


class Symbol(SlottedRecord):
    __slots__ = ("index", "name", "value", "size", "bind", "type", "visibility", "shndx", "table", "version", "hidden")

    def __init__(self, index: int, name: str, value: int, size: int, bind: int, type: int, visibility: int,
                 shndx: int, table: str = ".symtab", version: str = "", hidden: bool = False) -> None:
        self.index = index
        self.name = name  # without a version: "memcpy", never "memcpy@@GLIBC_2.14"
        self.value = value
        self.size = size
        self.bind = bind
        self.type = type
        self.visibility = visibility
        self.shndx = shndx
        self.table = table  # or ".dynsym"
        self.version = version  # "GLIBC_2.14", or "" when unversioned
        self.hidden = hidden  # a non-default version (name@VERSION): only reached by naming it

    @property
    def defined(self) -> bool:
        return self.shndx != SHN_UNDEF

    @property
    def full_name(self) -> str:
        """``name@@VERSION`` (default version), ``name@VERSION`` (hidden) or ``name``."""
        if not self.version:
            return self.name
        return f"{self.name}{'@' if self.hidden else '@@'}{self.version}"


class Relocation(SlottedRecord):
    __slots__ = ("offset", "type", "symbol")

    def __init__(self, offset: int, type: int, symbol: Symbol) -> None:
        self.offset = offset  # byte offset in the section the relocation applies to
        self.type = type  # R_BPF_64_64 (1), R_BPF_64_ABS64 (2), R_BPF_64_ABS32 (3), R_BPF_64_32 (10)
        self.symbol = symbol


# --------------------------------------------------------------------- the two rules
def vaddr_to_offset(segments: Sequence[Segment], vaddr: int) -> int | None:
    """The file offset of virtual address ``vaddr``: vaddr - p_vaddr + p_offset of the PT_LOAD
    segment holding it (p_vaddr <= vaddr < p_vaddr + p_memsz), or None."""
    seg = segment_of(segments, vaddr)
    return None if seg is None else vaddr - seg.vaddr + seg.offset


def segment_of(segments: Sequence[Segment], vaddr: int) -> Segment | None:
    """The PT_LOAD segment holding virtual address ``vaddr`` (segments do not overlap)."""
    for seg in segments:
        if seg.type == PT_LOAD and seg.vaddr <= vaddr < seg.vaddr + seg.memsz:
            return seg
    return None


def offset_to_vaddr(segments: Sequence[Segment], offset: int) -> int | None:
    """The link-time address of file offset ``offset`` (the inverse of :func:`vaddr_to_offset`).
    Segments may share a file page, so an executable one is preferred: offsets come from
    executable mappings (instruction pointers)."""
    for want_exec in (True, False):
        for seg in segments:
            if seg.type == PT_LOAD and seg.executable == want_exec and seg.offset <= offset < seg.offset + seg.filesz:
                return offset - seg.offset + seg.vaddr
    return None


def _better(new: Symbol, old: Symbol) -> bool:
    """Whether ``new`` wins over ``old`` for an unversioned reference to their name: the
    default version over a hidden one, a global over a weak one over a local one (libbpf's
    elf_find_func_offset likewise takes a non-weak definition over a weak one)."""
    def rank(s: Symbol) -> tuple[bool, bool, bool]:
        return (s.hidden, s.bind == STB_LOCAL, s.bind == STB_WEAK)

    return rank(new) < rank(old)


# ------------------------------------------------------------------------- the reader
class ElfImage(ElfHeaders):
    """Any ELF file: ``data`` its bytes (``path`` only names it in errors), or an
    :class:`~bpfkit.elf.image.Image` (a file, read in the pieces asked for; ``bounded``: a
    binary other users control, held to bpfkit.elf.headers' limits on its headers).

    ``sections`` in file order (``by_name``), ``segments`` (PT_LOAD and PT_DYNAMIC program
    headers), :meth:`read_symbols` of a symbol table, :meth:`notes` of a note section,
    :meth:`needed` (DT_NEEDED), and the address rules (:meth:`file_offset`, ...)."""

    _read_segments = True

    def __init__(self, data: bytes | bytearray | memoryview | Image, path: str = "", *, bounded: bool = False) -> None:
        image = data if isinstance(data, Image) else Image.of_bytes(data, path)
        super().__init__(image, segments=self._read_segments, bounded=bounded)

    # ---------------------------------------------------------------------- sections
    def _parse_sections(self) -> None:
        image, headers = self.image, self.shdrs
        if headers and self._shstrndx >= len(headers):
            raise self._bad(f"section name table index {self._shstrndx} out of range ({len(headers)} sections)")
        memory = image.memory  # None: a file, whose sections are read when first used
        empty = memoryview(b"")
        datas: list[memoryview | None] = []
        for index, (_, sh_type, _, _, offset, size, *_rest) in enumerate(headers):
            if sh_type in (SHT_NOBITS, SHT_NULL):
                datas.append(empty)
                continue
            if offset + size > image.size:
                raise self._bad(f"truncated ELF: section {index} ({size} bytes at offset {offset}) runs past the end")
            datas.append(None if memory is None else memory[offset : offset + size])
        names = b""
        if headers and headers[self._shstrndx][1] not in (SHT_NOBITS, SHT_NULL):
            names = self.strings(self._shstrndx)
        self.sections: list[Section] = [
            Section(index, _cstr(names, name_off, "section name"), sh_type, flags, offset, size, link, info, align,
                    entsize, datas[index], addr, image)
            for index, (name_off, sh_type, flags, addr, offset, size, link, info, align, entsize) in enumerate(headers)
        ]
        self.by_name = {s.name: s for s in self.sections}

    def section(self, index: int, what: str = "section") -> Section:
        if not 0 <= index < len(self.sections):
            raise self._bad(f"{what} index {index} out of range ({len(self.sections)} sections)")
        return self.sections[index]

    def section_named(self, name: str) -> Section | None:
        """The first section called ``name``."""
        return next((s for s in self.sections if s.name == name), None)

    def section_of(self, vaddr: int) -> Section | None:
        """The allocated section holding virtual address ``vaddr``."""
        for s in self.sections:
            if s.flags & SHF_ALLOC and s.addr and s.addr <= vaddr < s.addr + s.size:
                return s
        return None

    # ---------------------------------------------------------------------- segments
    def segment_of(self, vaddr: int) -> Segment | None:
        return segment_of(self.segments, vaddr)

    def file_offset(self, vaddr: int) -> int | None:
        """See :func:`vaddr_to_offset`."""
        return vaddr_to_offset(self.segments, vaddr)

    # ----------------------------------------------------------------------- symbols
    def read_symbols(self, table: Section, *, versions: bool = True, strict: bool = False) -> list[Symbol]:
        """The entries of symbol table ``table`` (.symtab or .dynsym), entry 0 included.

        ``versions``: names like ``memcpy@@GLIBC_2.14`` (a .symtab of an unstripped library)
        are split into name and version, and .dynsym entries get theirs from .gnu.version.
        ``strict``: a size that is not a whole number of entries is an error."""
        sym = self.sym_struct()
        entsize = table.entsize or sym.size
        if entsize != sym.size or (strict and table.size % sym.size):
            raise self._bad(f"symbol table size {table.size} is not a multiple of {sym.size}")
        strtab = self._strtab(table.link, "symbol string table")
        kind = ".dynsym" if table.type == SHT_DYNSYM else ".symtab"
        data = table.data[: len(table.data) - len(table.data) % sym.size]
        out: list[Symbol] = []
        append = out.append
        if self.is64:
            for index, (name_off, info, other, shndx, value, size) in enumerate(sym.iter_unpack(data)):
                append(Symbol(index, _cstr(strtab, name_off, "symbol name"), value, size, info >> 4, info & 0xF,
                              other & 0x3, shndx, kind))
        else:
            for index, (name_off, value, size, info, other, shndx) in enumerate(sym.iter_unpack(data)):
                append(Symbol(index, _cstr(strtab, name_off, "symbol name"), value, size, info >> 4, info & 0xF,
                              other & 0x3, shndx, kind))
        if versions:
            self._apply_versions(table, out)
        return out

    def _apply_versions(self, table: Section, syms: list[Symbol]) -> None:
        for s in syms:
            at = s.name.find("@")
            if at > 0:  # "name@@VER" (default) or "name@VER" (hidden), as written in .symtab
                default = s.name.startswith("@@", at)
                s.name, s.version, s.hidden = s.name[:at], s.name[at + (2 if default else 1):], not default
        versym = next((v for v in self.sections if v.type == SHT_GNU_VERSYM and v.link == table.index), None)
        if versym is None:
            return
        names = self._version_names()
        entries = struct.unpack_from(f"{self._e}{min(len(versym.data) // 2, len(syms))}H", versym.data, 0)
        for s, ver in zip(syms, entries):
            if not s.version and (ver & VERSYM_VERSION) > 1:  # 0: local, 1: the base (no version)
                s.version = names.get(ver & VERSYM_VERSION, "")
                s.hidden = bool(ver & VERSYM_HIDDEN)

    def _version_names(self) -> dict[int, str]:
        """Version index -> name, from .gnu.version_d (definitions) and .gnu.version_r (needs)."""
        names: dict[int, str] = {}
        for sec in self.sections:
            if sec.type not in (SHT_GNU_VERDEF, SHT_GNU_VERNEED):
                continue
            strtab = self._strtab(sec.link, "version string table")
            data = bytes(sec.data)
            off, seen = 0, 0
            while off + 16 <= len(data) and seen < max(sec.info, 1) and seen < len(data) // 16:
                seen += 1
                if sec.type == SHT_GNU_VERDEF:  # Elf_Verdef, then its first Elf_Verdaux names it
                    if off + 20 > len(data):
                        break
                    _ver, _flags, ndx, cnt, _hash, aux, nxt = struct.unpack_from(self._e + "HHHHIII", data, off)
                    if cnt and off + aux + 8 <= len(data):
                        (name_off,) = struct.unpack_from(self._e + "I", data, off + aux)
                        names[ndx & VERSYM_VERSION] = _cstr(strtab, name_off, "version name")
                else:  # Elf_Verneed, then its Elf_Vernaux entries (vna_other: the index)
                    _ver, cnt, _file, aux, nxt = struct.unpack_from(self._e + "HHIII", data, off)
                    a = off + aux
                    for _ in range(min(cnt, len(data) // 16)):
                        if a + 16 > len(data):
                            break
                        _hash, _flags, other, name_off, anext = struct.unpack_from(self._e + "IHHII", data, a)
                        names[other & VERSYM_VERSION] = _cstr(strtab, name_off, "version name")
                        if not anext:
                            break
                        a += anext
                if not nxt:
                    break
                off += nxt
        return names

    # ------------------------------------------------------------------- notes, needs
    def notes(self, section: Section) -> Iterator[Note]:
        return iter_notes(section.data, little=self.little, what=f"{self.path or 'ELF'}: {section.name}")

    def needed(self) -> list[str]:
        """The DT_NEEDED names of the dynamic segment (libraries this binary links)."""
        dynamic = next((s for s in self.segments if s.type == PT_DYNAMIC), None)
        if dynamic is None:
            return []
        dyn = struct.Struct(self._e + ("qQ" if self.is64 else "iI"))  # Elf_Dyn: d_tag, d_val
        table = self.image.read_upto(dynamic.offset, dynamic.filesz, "dynamic segment")
        entries = []
        for off in range(0, len(table) - dyn.size + 1, dyn.size):
            tag, val = dyn.unpack_from(table, off)
            if tag == DT_NULL:
                break
            entries.append((tag, val))
        strtab = next((v for t, v in entries if t == DT_STRTAB), None)
        str_off = None if strtab is None else self.file_offset(strtab)
        if str_off is None:
            return []
        return [bytes(self.image.read_upto(str_off + val, 256, "DT_NEEDED name")).split(b"\0", 1)[0]
                .decode(errors="replace") for tag, val in entries if tag == DT_NEEDED]

    def _strtab(self, index: int, what: str) -> bytes:
        """String-table section ``index`` (ParseError naming ``what`` if there is none)."""
        sec = self.section(index, what)
        return b"" if sec.type == SHT_NULL else self.strings(index)


class ElfFile(ElfImage):
    """A relocatable ELF64 BPF object (what ``clang -target bpf -c`` writes): ``sections`` in
    file order, ``symbols`` from its one .symtab, REL relocations. Section contents are
    memoryviews into the caller's bytes: nothing is copied until a consumer asks."""

    _require_sections = True
    _read_segments = False  # a relocatable object has no program headers to trust

    def __init__(self, data: bytes | bytearray | memoryview) -> None:
        super().__init__(data)
        symtabs = [s for s in self.sections if s.type == SHT_SYMTAB]
        if not symtabs:
            raise ParseError("ELF object has no symbol table (.symtab)")
        if len(symtabs) > 1:
            raise ParseError("ELF object has more than one symbol table")
        self.symtab = symtabs[0]
        # names as written: a BPF object's symbols carry no versions
        self.symbols = self.read_symbols(self.symtab, versions=False, strict=True)

    def _check_ident(self, cls: int, enc: int) -> None:
        if self.size < 64:
            raise ParseError(f"truncated ELF header ({self.size} bytes, need 64)")
        if cls != 2:
            raise ParseError(f"ELF class {cls} is not ELFCLASS64: BPF objects are 64-bit")
        if enc != 1:
            raise ParseError("big-endian ELF (ELFDATA2MSB): bpfkit loads little-endian BPF objects (-target bpfel)")

    def _check_type(self, e_type: int, e_machine: int) -> None:
        if e_machine != EM_BPF:
            raise ParseError(f"ELF machine is {e_machine}, not EM_BPF ({EM_BPF}): not a BPF object")
        if e_type != ET_REL:
            raise ParseError(f"ELF type is {e_type}, not ET_REL: expected a relocatable object (clang -c)")

    # ------------------------------------------------------------------- relocations
    def relocation_sections(self) -> list[tuple[Section, Section]]:
        """(REL section, section it applies to) pairs. RELA is refused: clang emits REL for BPF."""
        pairs = []
        for sec in self.sections:
            if sec.type == SHT_RELA:
                raise ParseError(f"section {sec.name!r} has RELA relocations; BPF objects use REL")
            if sec.type != SHT_REL:
                continue
            if sec.link != self.symtab.index:
                raise ParseError(f"relocation section {sec.name!r} refers to symbol table {sec.link}, not .symtab")
            pairs.append((sec, self.section(sec.info, f"target of relocation section {sec.name!r}")))
        return pairs

    def relocations(self, rel: Section) -> list[Relocation]:
        if rel.size % 16:
            raise ParseError(f"relocation section {rel.name!r} size {rel.size} is not a multiple of 16")
        out = []
        nsyms = len(self.symbols)
        for offset, info in _REL.iter_unpack(rel.data):
            sym = info >> 32
            if sym >= nsyms:
                raise ParseError(f"relocation in {rel.name!r} at {offset:#x} names symbol {sym}, out of range")
            out.append(Relocation(offset, info & 0xFFFFFFFF, self.symbols[sym]))
        return out


_REL = struct.Struct("<QQ")  # Elf64_Rel


class SymbolTable:
    """An executable's or shared object's symbols (.symtab and .dynsym, with versions) and
    PT_LOAD segments: name -> symbol (:meth:`resolve`, :attr:`functions`), address -> file
    offset (:meth:`file_offset`), file offset -> function (:meth:`symbolize`). Holds no file
    bytes, so caches of many tables stay small."""

    def __init__(self, image: ElfImage) -> None:
        self.path = image.path
        self.type = image.type
        self.segments = [s for s in image.segments if s.type == PT_LOAD]
        self.symbols: list[Symbol] = []
        for sec in image.sections:
            if sec.type in (SHT_SYMTAB, SHT_DYNSYM) and 0 <= sec.link < len(image.sections):
                self.symbols.extend(s for s in image.read_symbols(sec)[1:] if s.name)
        self.needed = image.needed()
        self._functions: dict[str, Symbol] | None = None
        self._by_addr: tuple[list[int], list[Symbol]] | None = None

    @classmethod
    def from_bytes(cls, data: bytes | memoryview, path: str = "") -> SymbolTable:
        return cls(ElfImage(data, path))

    def add_symbols(self, symbols: Sequence[Symbol]) -> None:
        """Merge symbols read from elsewhere for this same file (a separate debug file, the
        MiniDebugInfo of .gnu_debugdata): same addresses, more names."""
        self.symbols.extend(symbols)
        self._functions = None
        self._by_addr = None

    # ----------------------------------------------------------------- names
    def lookup(self, name: str) -> list[Symbol]:
        """Every entry of ``name`` (any version); ``name@VER`` / ``name@@VER`` only that version."""
        base, _, ver = name.partition("@")
        ver = ver.lstrip("@")
        return [s for s in self.symbols if s.name == base and (not ver or s.version == ver)]

    def resolve(self, name: str) -> Symbol | None:
        """The defined symbol an unversioned reference to ``name`` binds to (the default
        version; see the module docs), or the one version ``name@VERSION`` names."""
        best: Symbol | None = None
        for s in self.lookup(name):
            if s.defined and s.value and (best is None or _better(s, best)):
                best = s
        return best

    @property
    def functions(self) -> dict[str, Symbol]:
        """Defined functions by (unversioned) name: the symbol each name resolves to, when that
        is an STT_FUNC (an IFUNC or data default version leaves the name out)."""
        if self._functions is None:
            best: dict[str, Symbol] = {}
            for s in self.symbols:
                if s.defined and s.value:
                    have = best.get(s.name)
                    if have is None or _better(s, have):
                        best[s.name] = s
            self._functions = {n: s for n, s in best.items() if s.type == STT_FUNC}
        return self._functions

    # ----------------------------------------------------------------- addresses
    def file_offset(self, vaddr: int) -> int | None:
        """See :func:`vaddr_to_offset`."""
        return vaddr_to_offset(self.segments, vaddr)

    def vaddr(self, offset: int) -> int | None:
        """See :func:`offset_to_vaddr`."""
        return offset_to_vaddr(self.segments, offset)

    def functions_by_address(self) -> tuple[list[int], list[Symbol]]:
        """(addresses, symbols), sorted: one function (STT_FUNC or IFUNC) per address, the one
        :meth:`symbol_at` names there."""
        if self._by_addr is None:
            self.symbol_at(0)
        assert self._by_addr is not None
        return self._by_addr

    def symbol_at(self, vaddr: int) -> tuple[Symbol, int] | None:
        """The function (STT_FUNC or IFUNC) holding ``vaddr`` and the offset into it. At an
        address several names share, a sized one, then the default version, wins."""
        if self._by_addr is None:
            at: dict[int, Symbol] = {}
            for s in self.symbols:
                if s.type not in (STT_FUNC, STT_GNU_IFUNC) or not s.value or not s.defined:
                    continue
                have = at.get(s.value)
                if have is None or (not have.size and s.size) or (bool(have.size) == bool(s.size) and have.hidden
                                                                  and not s.hidden):
                    at[s.value] = s
            addrs = sorted(at)
            self._by_addr = (addrs, [at[a] for a in addrs])
        addrs, syms = self._by_addr
        i = bisect.bisect_right(addrs, vaddr) - 1
        if i < 0:
            return None
        sym = syms[i]
        if sym.size and vaddr >= sym.value + sym.size:
            return None
        return sym, vaddr - sym.value

    def symbolize(self, offset: int) -> tuple[str, int] | None:
        """File offset -> (function name, offset into it)."""
        vaddr = self.vaddr(offset)
        found = None if vaddr is None else self.symbol_at(vaddr)
        return None if found is None else (found[0].name, found[1])


def _cstr(table: bytes, offset: int, what: str) -> str:
    if offset >= len(table):
        if offset == 0:
            return ""
        raise ParseError(f"{what} offset {offset} is outside its string table ({len(table)} bytes)")
    end = table.find(b"\0", offset)
    if end < 0:
        raise ParseError(f"{what} at offset {offset} is not NUL-terminated")
    return table[offset:end].decode("utf-8", errors="replace")
