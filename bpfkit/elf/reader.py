"""A small, strict reader of relocatable ELF64 BPF objects (what ``clang -target bpf -c`` writes).

Only what the loader needs: section headers, the symbol table and REL relocations. Every offset
and size is checked against the file before it is used, so malformed input gives a ParseError
naming the problem rather than an IndexError or a struct.error. Section contents are
memoryviews into the caller's bytes: nothing is copied until a consumer asks.
"""

from __future__ import annotations

import dataclasses
import struct

from ..errors import NotFoundError, ParseError

__all__ = ["ElfFile", "Section", "Symbol", "Relocation"]

# ELF constants (elf.h).
EM_BPF = 247
ET_REL = 1
SHT_NULL, SHT_PROGBITS, SHT_SYMTAB, SHT_STRTAB, SHT_RELA, SHT_NOBITS, SHT_REL = 0, 1, 2, 3, 4, 8, 9
SHF_WRITE, SHF_ALLOC, SHF_EXECINSTR = 0x1, 0x2, 0x4
STB_LOCAL, STB_GLOBAL, STB_WEAK = 0, 1, 2
STT_NOTYPE, STT_OBJECT, STT_FUNC, STT_SECTION, STT_FILE = 0, 1, 2, 3, 4
SHN_UNDEF, SHN_LORESERVE, SHN_ABS, SHN_COMMON, SHN_XINDEX = 0, 0xFF00, 0xFFF1, 0xFFF2, 0xFFFF
STV_DEFAULT, STV_HIDDEN = 0, 2

_EHDR = struct.Struct("<16sHHIQQQIHHHHHH")  # Elf64_Ehdr
_SHDR = struct.Struct("<IIQQQQIIQQ")  # Elf64_Shdr
_SYM = struct.Struct("<IBBHQQ")  # Elf64_Sym
_REL = struct.Struct("<QQ")  # Elf64_Rel


@dataclasses.dataclass(slots=True)
class Section:
    index: int
    name: str
    type: int
    flags: int
    offset: int
    size: int
    link: int
    info: int
    addralign: int
    entsize: int
    data: memoryview  # empty for SHT_NOBITS

    @property
    def executable(self) -> bool:
        return bool(self.flags & SHF_EXECINSTR)


@dataclasses.dataclass(slots=True)
class Symbol:
    index: int
    name: str
    value: int
    size: int
    bind: int
    type: int
    visibility: int
    shndx: int


@dataclasses.dataclass(slots=True)
class Relocation:
    offset: int  # byte offset in the section the relocation applies to
    type: int  # R_BPF_64_64 (1), R_BPF_64_ABS64 (2), R_BPF_64_ABS32 (3), R_BPF_64_32 (10)
    symbol: Symbol


class ElfFile:
    """A parsed ELF object. ``sections`` in file order, ``symbols`` from .symtab."""

    def __init__(self, data: bytes | bytearray | memoryview) -> None:
        self.raw = memoryview(data).cast("B") if not isinstance(data, memoryview) else data.cast("B")
        self._parse_header()
        self._parse_sections()
        self._parse_symbols()

    # ------------------------------------------------------------------------ header
    def _parse_header(self) -> None:
        raw = self.raw
        if len(raw) < 4 or bytes(raw[:4]) != b"\x7fELF":
            raise ParseError("not an ELF file (bad magic)")
        if len(raw) < _EHDR.size:
            raise ParseError(f"truncated ELF header ({len(raw)} bytes, need {_EHDR.size})")
        ident = bytes(raw[:16])
        if ident[4] != 2:
            raise ParseError(f"ELF class {ident[4]} is not ELFCLASS64: BPF objects are 64-bit")
        if ident[5] != 1:
            raise ParseError("big-endian ELF (ELFDATA2MSB): bpfkit loads little-endian BPF objects (-target bpfel)")
        (
            _, e_type, e_machine, _, _, _, e_shoff, _, _, _, _, e_shentsize, e_shnum, e_shstrndx,
        ) = _EHDR.unpack_from(raw, 0)
        if e_machine != EM_BPF:
            raise ParseError(f"ELF machine is {e_machine}, not EM_BPF ({EM_BPF}): not a BPF object")
        if e_type != ET_REL:
            raise ParseError(f"ELF type is {e_type}, not ET_REL: expected a relocatable object (clang -c)")
        if e_shoff == 0 or e_shnum == 0:
            raise ParseError("ELF object has no section headers")
        if e_shentsize != _SHDR.size:
            raise ParseError(f"section header size {e_shentsize}, expected {_SHDR.size}")
        if e_shoff + e_shnum * _SHDR.size > len(raw):
            raise ParseError(
                f"truncated ELF: {e_shnum} section headers at offset {e_shoff} run past the end ({len(raw)} bytes)"
            )
        if e_shstrndx >= e_shnum:
            raise ParseError(f"section name table index {e_shstrndx} out of range ({e_shnum} sections)")
        self._shoff, self._shnum, self._shstrndx = e_shoff, e_shnum, e_shstrndx

    # ---------------------------------------------------------------------- sections
    def _parse_sections(self) -> None:
        raw = self.raw
        headers = [
            _SHDR.unpack_from(raw, self._shoff + i * _SHDR.size) for i in range(self._shnum)
        ]
        datas = []
        for index, (_, sh_type, _, _, offset, size, *_rest) in enumerate(headers):
            if sh_type in (SHT_NOBITS, SHT_NULL):
                datas.append(raw[0:0])
                continue
            if offset + size > len(raw):
                raise ParseError(
                    f"truncated ELF: section {index} ({size} bytes at offset {offset}) runs past the end"
                )
            datas.append(raw[offset : offset + size])
        names = bytes(datas[self._shstrndx])
        self.sections: list[Section] = []
        for index, (name_off, sh_type, flags, _, offset, size, link, info, align, entsize) in enumerate(headers):
            self.sections.append(
                Section(index, _cstr(names, name_off, "section name"), sh_type, flags, offset, size,
                        link, info, align, entsize, datas[index])
            )
        self.by_name = {s.name: s for s in self.sections}

    def section(self, index: int, what: str = "section") -> Section:
        if not 0 <= index < len(self.sections):
            raise ParseError(f"{what} index {index} out of range ({len(self.sections)} sections)")
        return self.sections[index]

    # ----------------------------------------------------------------------- symbols
    def _parse_symbols(self) -> None:
        self.symbols: list[Symbol] = []
        symtabs = [s for s in self.sections if s.type == SHT_SYMTAB]
        if not symtabs:
            raise ParseError("ELF object has no symbol table (.symtab)")
        if len(symtabs) > 1:
            raise ParseError("ELF object has more than one symbol table")
        symtab = self.symtab = symtabs[0]
        if symtab.entsize not in (0, _SYM.size) or symtab.size % _SYM.size:
            raise ParseError(f"symbol table size {symtab.size} is not a multiple of {_SYM.size}")
        strtab = bytes(self.section(symtab.link, "symbol string table").data)
        for index, (name_off, info, other, shndx, value, size) in enumerate(_SYM.iter_unpack(symtab.data)):
            self.symbols.append(
                Symbol(index, _cstr(strtab, name_off, "symbol name"), value, size, info >> 4, info & 0xF,
                       other & 0x3, shndx)
            )

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
        if rel.size % _REL.size:
            raise ParseError(f"relocation section {rel.name!r} size {rel.size} is not a multiple of {_REL.size}")
        out = []
        nsyms = len(self.symbols)
        for offset, info in _REL.iter_unpack(rel.data):
            sym = info >> 32
            if sym >= nsyms:
                raise ParseError(f"relocation in {rel.name!r} at {offset:#x} names symbol {sym}, out of range")
            out.append(Relocation(offset, info & 0xFFFFFFFF, self.symbols[sym]))
        return out


def _cstr(table: bytes, offset: int, what: str) -> str:
    if offset >= len(table):
        if offset == 0:
            return ""
        raise ParseError(f"{what} offset {offset} is outside its string table ({len(table)} bytes)")
    end = table.find(b"\0", offset)
    if end < 0:
        raise ParseError(f"{what} at offset {offset} is not NUL-terminated")
    return table[offset:end].decode("utf-8", errors="replace")


def read_binary(path: str) -> bytes:
    """The bytes of the ELF binary at ``path``: a regular file of bounded size (bpfkit._files),
    with bpfkit errors for a missing one, a directory, a FIFO, a device, ..."""
    from .._files import BINARY_LIMIT, read_regular

    try:
        return read_regular(path, "binary", BINARY_LIMIT)
    except NotFoundError:
        raise NotFoundError(f"binary {path} does not exist") from None
