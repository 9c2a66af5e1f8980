# SPDX-License-Identifier: Apache-2.0
"""A binary's USDT probes, from its ``.note.stapsdt`` ELF notes (pure parsing, no syscalls;
the file is read by bpfkit.elf.reader, bpfkit's one ELF reader: with pread, the headers and
the note section only).

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
  holding it (offset = pc - p_vaddr + p_offset: reader.vaddr_to_offset, as for uprobes).
* The semaphore becomes the uprobe's ``ref_ctr_offset``, also a file offset: through the
  section holding it (``.probes`` for sys/sdt.h semaphores, else .data), so it must be in a
  section with file contents (not .bss), falling back to its non-executable PT_LOAD segment.
"""

from __future__ import annotations

import dataclasses
import functools
import struct
from collections.abc import Iterable

from ..elf.image import open_binary
from ..elf.reader import ET_DYN, ET_EXEC, SHT_NOBITS, ElfImage, iter_notes, vaddr_to_offset
from ..errors import NotFoundError, ParseError
from .args import USDTArg, parse_args

__all__ = ["StapsdtNote", "USDTProbe", "parse_notes", "read_probes", "parse_probes", "find_probes",
           "NOTE_SECTION", "BASE_SECTION", "NT_STAPSDT"]

NOTE_SECTION = ".note.stapsdt"
BASE_SECTION = ".stapsdt.base"
NT_STAPSDT = 3
_OWNER = b"stapsdt"


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
            _ = self.args  # parsed on first use
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
    addr = struct.Struct(("<" if little else ">") + ("QQQ" if is64 else "III"))
    out = []
    for note in iter_notes(data, little=little, what=NOTE_SECTION):
        if note.type != NT_STAPSDT or note.owner != _OWNER:
            continue
        desc = note.desc
        if len(desc) < addr.size:
            raise ParseError(f"{NOTE_SECTION}: note at offset {note.offset} is too short ({len(desc)} bytes)")
        pc, base, sema = addr.unpack_from(desc, 0)
        strings = desc[addr.size :].split(b"\0")
        if len(strings) < 3:
            raise ParseError(f"{NOTE_SECTION}: note at offset {note.offset} lacks provider, name and args strings")
        provider, name, args = (s.decode(errors="replace") for s in strings[:3])
        out.append(StapsdtNote(provider, name, pc, base, sema, args))
    return out


def parse_probes(data: bytes | memoryview, path: str = "<memory>") -> list[USDTProbe]:
    """Every USDT probe site in the ELF image ``data`` (in note order)."""
    return _probes(ElfImage(data, path))


def _probes(elf: ElfImage) -> list[USDTProbe]:
    path = elf.path or "<memory>"
    if elf.type not in (ET_EXEC, ET_DYN):
        raise ParseError(f"{path}: ELF type {elf.type} is neither an executable nor a shared object")
    sec = elf.section_named(NOTE_SECTION)
    if sec is None or sec.type == SHT_NOBITS:
        return []
    notes = parse_notes(sec.data, is64=elf.is64, little=elf.little)
    base_sec = elf.section_named(BASE_SECTION)
    return [_translate(elf, note, base_sec.addr if base_sec else 0) for note in notes]


def _translate(elf: ElfImage, note: StapsdtNote, base_addr: int) -> USDTProbe:
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
    elif not seg.executable:
        problem = f"{what}: address {address:#x} is in a segment that is not executable"
    else:
        file_offset = vaddr_to_offset([seg], address) or 0
    if sema and not problem:
        try:
            sema_off = _semaphore_offset(elf, sema, what)
        except ParseError as exc:
            problem = str(exc)
    return USDTProbe(elf.path, note.provider, note.name, address, file_offset, sema, sema_off, note.args,
                     note, elf.type == ET_DYN, problem)


def _semaphore_offset(elf: ElfImage, sema: int, what: str) -> int:
    sec = elf.section_of(sema)
    if sec is not None:
        if sec.type == SHT_NOBITS:
            raise ParseError(f"{what}: semaphore {sema:#x} is in {sec.name} (no file contents), "
                             "so the kernel cannot count references to it")
        return sema - sec.addr + sec.offset
    seg = elf.segment_of(sema)
    if seg is None or seg.executable or sema >= seg.vaddr + seg.filesz:
        raise ParseError(f"{what}: semaphore {sema:#x} is in no data section or writable segment")
    return vaddr_to_offset([seg], sema) or 0


def read_probes(path: str) -> list[USDTProbe]:
    """Every USDT probe site in the binary at ``path``."""
    with open_binary(path) as image:
        return _probes(ElfImage(image, bounded=True))


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
