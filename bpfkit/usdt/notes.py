"""A binary's USDT probes, from its ``.note.stapsdt`` ELF notes (pure parsing, no syscalls).

sys/sdt.h's ``STAP_PROBEn(provider, name, args...)`` / ``DTRACE_PROBE`` puts a ``nop`` in the
code and an ELF note (owner ``stapsdt``, type 3) describing it. The note's descriptor holds
three addresses, each a pointer wide, then three strings:

    pc          the nop's link-time address (where the uprobe goes)
    base        the link-time address of section ``.stapsdt.base``
    semaphore   the address of the probe's u16 semaphore, or 0 (no semaphore)
    provider\\0 name\\0 args\\0   args: ``-4@%esi 8@$5 -8@-16(%rbp)`` (see args.py)

Turning these into what the kernel wants, as libbpf does (usdt.c):

* Prelink moves a library without rewriting its notes, but ``.stapsdt.base`` moves with the
  code: when that section's address differs from the note's ``base``, the difference is added
  to ``pc`` (and to ``semaphore``, as systemtap and bcc do).
* A uprobe is placed at a *file offset*: ``pc`` goes through the executable PT_LOAD segment
  holding it (offset = pc - p_vaddr + p_offset).
* The semaphore becomes the uprobe's ``ref_ctr_offset``, also a file offset: through the
  section holding it (``.probes`` for sys/sdt.h semaphores, else .data), so it must be in a
  section with file contents (not .bss), falling back to its non-executable PT_LOAD segment.
"""

from __future__ import annotations

import dataclasses
import functools
import struct
from typing import Iterable

from ..elf.reader import read_binary
from ..errors import NotFoundError, ParseError
from .args import USDTArg, parse_args

__all__ = ["StapsdtNote", "USDTProbe", "parse_notes", "read_probes", "parse_probes", "find_probes",
           "NOTE_SECTION", "BASE_SECTION", "NT_STAPSDT"]

NOTE_SECTION = ".note.stapsdt"
BASE_SECTION = ".stapsdt.base"
NT_STAPSDT = 3
_OWNER = b"stapsdt"
ET_EXEC, ET_DYN = 2, 3
PT_LOAD = 1
PF_X = 1
SHT_NOBITS = 8


@dataclasses.dataclass(frozen=True)
class StapsdtNote:
    """One note as stored (link-time addresses, untranslated)."""

    provider: str
    name: str
    pc: int
    base: int
    semaphore: int
    args: str


@dataclasses.dataclass(frozen=True)
class USDTProbe:
    """One probe site in a binary, with the offsets the kernel's uprobe wants.

    ``address``/``semaphore``: link-time addresses after the prelink adjustment;
    ``file_offset``: where the uprobe goes; ``semaphore_offset``: the uprobe's
    ``ref_ctr_offset`` (0: no semaphore). ``args`` parses ``args_text`` (ParseError for a
    spec libbpf's usdt.bpf.h cannot read, e.g. a scaled-index operand).
    """

    path: str
    provider: str
    name: str
    address: int
    file_offset: int
    semaphore: int
    semaphore_offset: int
    args_text: str
    note: StapsdtNote = dataclasses.field(repr=False, compare=False)
    shared: bool = False  # ET_DYN (a library or a PIE executable): addresses are relative
    problem: str = ""  # why this site cannot be attached (e.g. a semaphore in .bss), or ''

    def check(self) -> None:
        """Raise ParseError if this site cannot be attached (``problem``) or its arguments
        cannot be read (``args``)."""
        if self.problem:
            raise ParseError(self.problem)
        self.args  # noqa: B018

    @functools.cached_property
    def args(self) -> tuple[USDTArg, ...]:
        try:
            return parse_args(self.args_text)
        except ParseError as exc:
            raise exc.wrap(f"USDT probe {self.provider}:{self.name} at {self.address:#x} in {self.path}")

    @property
    def args_error(self) -> str:
        """Why ``args`` cannot be parsed, or '' (for listings)."""
        try:
            self.args
        except ParseError as exc:
            return str(exc)
        return ""

    @property
    def full_name(self) -> str:
        return f"{self.provider}:{self.name}"

    def __str__(self) -> str:
        sema = f" semaphore {self.semaphore:#x} (file offset {self.semaphore_offset:#x})" if self.semaphore else ""
        return f"{self.full_name} at {self.address:#x} (file offset {self.file_offset:#x}){sema} args '{self.args_text}'"


def parse_notes(data: bytes | memoryview, *, is64: bool = True, little: bool = True) -> list[StapsdtNote]:
    """The stapsdt notes in the contents of a note section (other owners/types are skipped)."""
    e = "<" if little else ">"
    data = bytes(data)
    addr = struct.Struct(e + ("QQQ" if is64 else "III"))
    out = []
    off = 0
    while off + 12 <= len(data):
        namesz, descsz, ntype = struct.unpack_from(e + "III", data, off)
        name_off = off + 12
        desc_off = name_off + _align4(namesz)
        end = desc_off + _align4(descsz)
        if desc_off + descsz > len(data):
            raise ParseError(f"{NOTE_SECTION}: note at offset {off} runs past the end of the section")
        owner = data[name_off : name_off + namesz].rstrip(b"\0")
        if ntype == NT_STAPSDT and owner == _OWNER:
            desc = data[desc_off : desc_off + descsz]
            if len(desc) < addr.size:
                raise ParseError(f"{NOTE_SECTION}: note at offset {off} is too short ({descsz} bytes)")
            pc, base, sema = addr.unpack_from(desc, 0)
            strings = desc[addr.size :].split(b"\0")
            if len(strings) < 3:
                raise ParseError(f"{NOTE_SECTION}: note at offset {off} lacks provider, name and args strings")
            provider, name, args = (s.decode(errors="replace") for s in strings[:3])
            out.append(StapsdtNote(provider, name, pc, base, sema, args))
        off = end
    return out


def _align4(n: int) -> int:
    return (n + 3) & ~3


@dataclasses.dataclass(frozen=True)
class _Section:
    name: str
    type: int
    addr: int
    offset: int
    size: int


@dataclasses.dataclass(frozen=True)
class _Segment:
    vaddr: int
    offset: int
    filesz: int
    memsz: int
    flags: int


class _Elf:
    """The section and segment headers of an ELF executable or shared object."""

    def __init__(self, data: bytes, path: str) -> None:
        self.path, self.data = path, data
        if len(data) < 64 or data[:4] != b"\x7fELF":
            raise ParseError(f"{path}: not an ELF file")
        cls, enc = data[4], data[5]
        if cls not in (1, 2) or enc not in (1, 2):
            raise ParseError(f"{path}: unknown ELF class {cls} / data encoding {enc}")
        self.is64, self.little = cls == 2, enc == 1
        e = "<" if self.little else ">"
        ehdr = struct.Struct(e + ("HHIQQQIHHHHHH" if self.is64 else "HHIIIIIHHHHHH"))
        (self.type, _machine, _ver, _entry, phoff, shoff, _flags, _ehsize, phentsize, phnum,
         shentsize, shnum, shstrndx) = ehdr.unpack_from(data, 16)
        if self.type not in (ET_EXEC, ET_DYN):
            raise ParseError(f"{path}: ELF type {self.type} is neither an executable nor a shared object")
        phdr = struct.Struct(e + ("IIQQQQQQ" if self.is64 else "IIIIIIII"))
        self.segments = []
        for i in range(phnum):
            o = phoff + i * phentsize
            if o + phdr.size > len(data):
                raise ParseError(f"{path}: program header table runs past the end of the file")
            f = phdr.unpack_from(data, o)
            ptype, flags, poff, vaddr, filesz, memsz = (
                (f[0], f[1], f[2], f[3], f[5], f[6]) if self.is64 else (f[0], f[6], f[1], f[2], f[4], f[5]))
            if ptype == PT_LOAD:
                self.segments.append(_Segment(vaddr, poff, filesz, memsz, flags))
        shdr = struct.Struct(e + ("IIQQQQIIQQ" if self.is64 else "IIIIIIIIII"))
        raw = []
        for i in range(shnum if shoff else 0):
            o = shoff + i * shentsize
            if o + shdr.size > len(data):
                raise ParseError(f"{path}: section header table runs past the end of the file")
            raw.append(shdr.unpack_from(data, o))
        names = raw[shstrndx] if 0 <= shstrndx < len(raw) else None
        self.sections = []
        for sh in raw:
            name = ""
            if names is not None:
                start = names[4] + sh[0]
                end = data.find(b"\0", start, names[4] + names[5])
                name = data[start : end if end >= 0 else start].decode(errors="replace")
            self.sections.append(_Section(name, sh[1], sh[3], sh[4], sh[5]))

    def section(self, name: str) -> _Section | None:
        return next((s for s in self.sections if s.name == name), None)

    def segment_of(self, vaddr: int) -> _Segment | None:
        return next((s for s in self.segments if s.vaddr <= vaddr < s.vaddr + s.memsz), None)

    def section_of(self, vaddr: int) -> _Section | None:
        return next((s for s in self.sections if s.addr and s.addr <= vaddr < s.addr + s.size), None)


def parse_probes(data: bytes, path: str = "<memory>") -> list[USDTProbe]:
    """Every USDT probe site in the ELF image ``data`` (in note order)."""
    elf = _Elf(bytes(data), path)
    sec = elf.section(NOTE_SECTION)
    if sec is None:
        return []
    if sec.offset + sec.size > len(elf.data):
        raise ParseError(f"{path}: {NOTE_SECTION} runs past the end of the file")
    notes = parse_notes(elf.data[sec.offset : sec.offset + sec.size], is64=elf.is64, little=elf.little)
    base_sec = elf.section(BASE_SECTION)
    return [_translate(elf, note, base_sec.addr if base_sec else 0) for note in notes]


def _translate(elf: _Elf, note: StapsdtNote, base_addr: int) -> USDTProbe:
    """The note's addresses as the kernel wants them; a site that cannot be translated keeps
    its ``problem`` (so the binary's other probes still list and attach)."""
    what = f"USDT probe {note.provider}:{note.name} at {note.pc:#x} in {elf.path}"
    delta = base_addr - note.base if base_addr and note.base else 0  # prelink adjustment
    address = note.pc + delta
    sema = note.semaphore + delta if note.semaphore else 0
    file_offset = sema_off = 0
    problem = ""
    seg = elf.segment_of(address)
    if seg is None:
        problem = f"{what}: address {address:#x} is in no PT_LOAD segment"
    elif not seg.flags & PF_X:
        problem = f"{what}: address {address:#x} is in a segment that is not executable"
    else:
        file_offset = address - seg.vaddr + seg.offset
    if sema and not problem:
        try:
            sema_off = _semaphore_offset(elf, sema, what)
        except ParseError as exc:
            problem = str(exc)
    return USDTProbe(elf.path, note.provider, note.name, address, file_offset, sema, sema_off, note.args,
                     note, elf.type == ET_DYN, problem)


def _semaphore_offset(elf: _Elf, sema: int, what: str) -> int:
    sec = elf.section_of(sema)
    if sec is not None:
        if sec.type == SHT_NOBITS:
            raise ParseError(f"{what}: semaphore {sema:#x} is in {sec.name} (no file contents), "
                             "so the kernel cannot count references to it")
        return sema - sec.addr + sec.offset
    seg = elf.segment_of(sema)
    if seg is None or seg.flags & PF_X or sema >= seg.vaddr + seg.filesz:
        raise ParseError(f"{what}: semaphore {sema:#x} is in no data section or writable segment")
    return sema - seg.vaddr + seg.offset


def read_probes(path: str) -> list[USDTProbe]:
    """Every USDT probe site in the binary at ``path``."""
    return parse_probes(read_binary(path), path)


def find_probes(probes: Iterable[USDTProbe], provider: str | None, name: str, path: str = "") -> list[USDTProbe]:
    """The sites of probe ``provider:name`` (any provider when ``provider`` is empty/None).

    NotFoundError lists what the binary has; a name several providers use needs a provider.
    """
    probes = list(probes)
    sites = [p for p in probes if p.name == name and (not provider or p.provider == provider)]
    where = path or (probes[0].path if probes else "the binary")
    if not sites:
        have = sorted({p.full_name for p in probes})
        listing = ", ".join(have[:20]) + (f" and {len(have) - 20} more" if len(have) > 20 else "")
        wanted = f"{provider}:{name}" if provider else name
        raise NotFoundError(f"no USDT probe {wanted} in {where}"
                            + (f" (it has {listing})" if have else f" (it has no {NOTE_SECTION} notes)"))
    providers = sorted({p.provider for p in sites})
    if len(providers) > 1:
        raise NotFoundError(f"USDT probe name {name!r} in {where} belongs to several providers "
                            f"({', '.join(providers)}): name one as PROVIDER:{name}")
    return sites
