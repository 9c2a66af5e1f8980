# SPDX-License-Identifier: Apache-2.0
"""ELF object -> CollectionSpec: programs, maps, global data, relocations, BTF. No syscalls.

Following libbpf's reading of what clang emits:

* Every executable section other than ``.text`` holds programs: each global function symbol
  in it is one program, its section name says the type (bpfkit.sections). Functions in
  ``.text`` are sub-programs.
* A program is *linked* here: the sub-programs it calls (BPF-to-BPF calls, and callbacks
  taken by address with ld_imm64) are appended after it, transitively, and the call offsets
  rewritten, so ``ProgramSpec.instructions`` is the final bytecode save for map fds. func_info
  and line_info from .BTF.ext are rebased onto that layout.
* ld_imm64 relocations against maps or global data become :class:`Reference` records; the
  Collection writes the fds in at load time.

Instruction bytes are handled as bytes/bytearray with struct.pack_into: no per-instruction
Python objects.
"""

from __future__ import annotations

import bisect
import re
import struct
from collections.abc import Callable

from ..btf import BTF, BTFExt
from ..btf.dwarf import attach_dwarf
from ..btf.types import Datasec, Func, Kind, Linkage, Var, VarLinkage
from ..elf.reader import (
    SHF_EXECINSTR,
    SHN_ABS,
    SHN_COMMON,
    SHN_UNDEF,
    SHT_NOBITS,
    SHT_PROGBITS,
    STB_GLOBAL,
    STB_LOCAL,
    STB_WEAK,
    STT_FUNC,
    STT_OBJECT,
    STT_SECTION,
    STV_HIDDEN,
    ElfFile,
    Relocation,
    Section,
    Symbol,
)
from ..errors import ParseError
from ..sections import match_section
from .collection import CollectionSpec, VariableSpec
from .consts import KERNEL_VERSION_MAGIC, STRUCT_OPS_SECTIONS, MapFlag, MapType, ProgType
from .map_sections import BTFMapLayout, btf_map_values, btf_maps, legacy_maps
from .maps import MapSpec
from .programs import ProgramSpec, Reference, RefKind

TYPE_CHECKING = False  # not typing's (its import costs ~1.5 ms at start-up; annotations only)
if TYPE_CHECKING:
    from .externs import ExternSpec

__all__ = ["parse_object"]

INSN = 8
_CODE_CALL = 0x85  # BPF_JMP | BPF_CALL
_CODE_LDDW = 0x18  # BPF_LD | BPF_IMM | BPF_DW
_PSEUDO_CALL = 1
_STV_INTERNAL = 1
_PSEUDO_KFUNC_CALL = 2
_PSEUDO_FUNC = 4
_INSN = struct.Struct("<BBhi")
_IMM = struct.Struct("<i")
# A bpf-to-bpf call: code 0x85 with src_reg 1 (high nibble of the regs byte).
_MAX_DATA_SECTION = 1 << 26  # far above KMALLOC_MAX_SIZE (4 MiB on x86-64), far below trouble
_PSEUDO_CALL_RE = re.compile(rb"\x85[\x10-\x1f]", re.S)


class _Function:
    """A function symbol in an executable section: [start, end) in instructions. (Compared by
    identity; a plain class: a dataclass costs ~1 ms of start-up to generate.)"""

    __slots__ = ("name", "section", "start", "end", "is_global", "relocs")

    def __init__(self, name: str, section: Section, start: int, end: int, is_global: bool,
                 relocs: list[tuple[int, Relocation]] | None = None) -> None:
        self.name = name
        self.section = section
        self.start = start
        self.end = end
        self.is_global = is_global
        self.relocs: list[tuple[int, Relocation]] = [] if relocs is None else relocs  # (insn in section, rel)

    @property
    def key(self) -> tuple[int, int]:
        return self.section.index, self.start

    @property
    def code(self) -> bytes:
        return bytes(self.section.data[self.start * INSN : self.end * INSN])


def _is_data_section(sec: Section) -> str:
    """'data', 'rodata', 'bss' or '' (libbpf's SEC_DATA/SEC_RODATA/SEC_BSS classification)."""
    if sec.flags & SHF_EXECINSTR:
        return ""
    name = sec.name
    if sec.type == SHT_PROGBITS:
        if name == ".data" or name.startswith(".data."):
            return "data"
        if name == ".rodata" or name.startswith(".rodata."):
            return "rodata"
    elif sec.type == SHT_NOBITS and (name == ".bss" or name.startswith(".bss.")):
        return "bss"
    return ""


def internal_map_name(obj_name: str, section: str) -> str:
    """The kernel name libbpf gives a global-data map (libbpf's internal_map_name()):
    up to 8 characters of the object name, then the section name; custom ``.data.foo``
    sections keep their own name, truncated to 15 characters."""
    sfx_len = min(max(7, len(section)), 15)
    pfx_len = 0 if "." in section[1:] else min(16 - sfx_len - 1, len(obj_name))
    name = (obj_name[:pfx_len] + section[:sfx_len])[:15]
    return "".join(c if (c.isascii() and c.isalnum()) or c in "_." else "_" for c in name)


class _ObjectParser:
    def __init__(self, data: bytes | bytearray | memoryview, name: str) -> None:
        self.elf = ElfFile(data)
        self.data = data
        self.name = name
        self.symbols_by_section: dict[int, list[Symbol]] = {}
        for sym in self.elf.symbols:
            self.symbols_by_section.setdefault(sym.shndx, []).append(sym)

    # ---------------------------------------------------------------------- overall
    def parse(self) -> CollectionSpec:
        elf = self.elf
        spec = CollectionSpec(name=self.name)
        spec.license = self._license()
        spec.kernel_version = self._version()
        btf_sec = elf.by_name.get(".BTF")
        self.btf = BTF.from_bytes(btf_sec.data) if btf_sec is not None else None
        if self.btf is not None:
            if ".debug_info" in elf.by_name:  # types BTF lacks, read on demand (bpfkit.btf.dwarf)
                attach_dwarf(self.btf, self.data, self.name)
            self._fixup_datasecs()
            self._hidden_funcs_static()
        ext_sec = elf.by_name.get(".BTF.ext")
        self.ext = BTFExt.from_bytes(ext_sec.data, self.btf) if ext_sec is not None and self.btf else None
        spec.btf = self.btf

        self.relocs = self._relocations()
        self.functions = self._functions()
        self.map_ranges: dict[int, list[tuple[int, int, str]]] = {}  # section -> sorted (start, end, map)
        self.data_maps: dict[int, str] = {}  # section index -> data map name
        self._maps(spec)
        self._data(spec)
        self._externs(spec)
        self._programs(spec)
        self._struct_ops(spec)
        self._map_values(spec)
        return spec

    def _hidden_funcs_static(self) -> None:
        """Global functions with hidden visibility (``__hidden``, as libbpf's usdt.bpf.h
        declares bpf_usdt_arg()) are static in BTF, as libbpf makes them: the verifier then
        checks them in their caller's context instead of on their own with unknown arguments."""
        assert self.btf is not None
        hidden = {s.name for s in self.elf.symbols
                  if s.type == STT_FUNC and s.bind in (STB_GLOBAL, STB_WEAK) and s.visibility in (_STV_INTERNAL, STV_HIDDEN)}
        for name in hidden:
            for t in self.btf.find(name, Kind.FUNC, own_only=True):
                if isinstance(t, Func) and t.linkage == Linkage.GLOBAL:
                    t.linkage = Linkage.STATIC

    def _license(self) -> str:
        sec = self.elf.by_name.get("license")
        if sec is None:
            return ""
        raw = bytes(sec.data)
        return raw.split(b"\0", 1)[0].decode("utf-8", errors="replace")

    def _version(self) -> int:
        sec = self.elf.by_name.get("version")
        if sec is None:
            return 0
        if sec.size != 4:
            raise ParseError(f"section 'version' is {sec.size} bytes, expected 4 (a u32 kernel version)")
        return int.from_bytes(bytes(sec.data), "little")

    # ------------------------------------------------------------------------- BTF
    def _fixup_datasecs(self) -> None:
        """clang leaves DATASEC sizes (and, in old versions, variable offsets) to the loader:
        take them from the ELF section and symbol table, as libbpf's btf_fixup_datasec()."""
        assert self.btf is not None
        for t in self.btf.types:
            if not isinstance(t, Datasec):
                continue
            sec = self.elf.by_name.get(t.name)
            if sec is None:
                continue  # .ksyms/.kconfig externs: no section, left as is
            if t.size == 0:
                t.size = sec.size
            syms = {s.name: s for s in self.symbols_by_section.get(sec.index, ()) if s.type != STT_SECTION}
            for vsi in t.vars:
                var = self.btf.type_by_id(vsi.type)
                if not isinstance(var, Var):
                    continue
                sym = syms.get(var.name)
                if sym is not None:
                    vsi.offset = sym.value
                if vsi.offset + vsi.size > t.size:
                    raise ParseError(
                        f"BTF variable {var.name!r} ({vsi.size} bytes at {vsi.offset}) lies outside section {t.name!r} ({t.size} bytes)"
                    )
            t.vars.sort(key=lambda v: v.offset)

    # ----------------------------------------------------------------- relocations
    def _relocations(self) -> dict[int, list[Relocation]]:
        out: dict[int, list[Relocation]] = {}
        for rel_sec, target in self.elf.relocation_sections():
            if target.name.startswith((".debug", ".BTF")) or target.name == ".eh_frame":
                continue
            out[target.index] = self.elf.relocations(rel_sec)
        return out

    # ------------------------------------------------------------------- functions
    def _functions(self) -> dict[int, list[_Function]]:
        """Function symbols per executable section, sorted by start."""
        by_section: dict[int, list[_Function]] = {}
        for sec in self.elf.sections:
            if not sec.executable or sec.type != SHT_PROGBITS or sec.size == 0:
                continue
            if sec.size % INSN:
                raise ParseError(f"section {sec.name!r} is {sec.size} bytes, not a whole number of instructions")
            funcs = []
            for sym in self.symbols_by_section.get(sec.index, ()):
                if sym.type != STT_FUNC:
                    continue
                if sym.value % INSN or sym.size % INSN or sym.value + sym.size > sec.size:
                    raise ParseError(
                        f"function {sym.name!r} ({sym.size} bytes at {sym.value}) does not fit section {sec.name!r}"
                    )
                funcs.append(_Function(sym.name, sec, sym.value // INSN, (sym.value + sym.size) // INSN,
                                       sym.bind in (STB_GLOBAL, STB_WEAK)))
            funcs.sort(key=lambda f: f.start)
            for i, f in enumerate(funcs):
                if f.end == f.start:  # size 0: up to the next function
                    f.end = funcs[i + 1].start if i + 1 < len(funcs) else sec.size // INSN
                if i and funcs[i - 1].end > f.start:
                    raise ParseError(f"functions {funcs[i - 1].name!r} and {f.name!r} overlap in {sec.name!r}")
            starts = [f.start for f in funcs]
            for rel in self.relocs.get(sec.index, ()):
                if rel.offset % INSN or rel.offset >= sec.size:
                    raise ParseError(f"relocation against {rel.symbol.name!r} at offset {rel.offset} of {sec.name!r} "
                                     "is not at an instruction")
                idx = rel.offset // INSN
                pos = bisect.bisect_right(starts, idx) - 1
                if pos < 0 or idx >= funcs[pos].end:
                    raise ParseError(f"relocation against {rel.symbol.name!r} at instruction {idx} of {sec.name!r} is outside any function")
                funcs[pos].relocs.append((idx, rel))
            by_section[sec.index] = funcs
        return by_section

    def _function_at(self, section: int, insn: int, why: str) -> _Function:
        funcs = self.functions.get(section)
        if funcs:
            for f in funcs:
                if f.start == insn:
                    return f
        name = self.elf.section(section).name
        raise ParseError(f"{why}: instruction {insn} of section {name!r} is not the start of a function")

    # ------------------------------------------------------------------------ maps
    def _maps(self, spec: CollectionSpec) -> None:
        elf = self.elf
        legacy = elf.by_name.get("maps")
        if legacy is not None:
            found = legacy_maps(elf, legacy)
            def_size = legacy.size // len(found) if found else 0
            for off, m in found.items():
                self._add_map(spec, m)
                self.map_ranges.setdefault(legacy.index, []).append((off, off + def_size, m.name))
        self.btf_layouts: list[BTFMapLayout] = []
        btf_sec = elf.by_name.get(".maps")
        if btf_sec is not None:
            if self.btf is None:
                raise ParseError("section '.maps' needs BTF to describe its maps, but the object has no .BTF (compile with -g)")
            self.btf_layouts = btf_maps(self.btf, btf_sec)
            for layout in self.btf_layouts:
                self._add_map(spec, layout.spec)
                self.map_ranges.setdefault(btf_sec.index, []).append(
                    (layout.offset, layout.offset + max(layout.size, 1), layout.spec.name))
        for ranges in self.map_ranges.values():
            ranges.sort()

    def _map_covering(self, section: int, offset: int) -> tuple[int, str] | None:
        """(start, name) of the map whose definition in ``section`` covers byte ``offset``."""
        ranges = self.map_ranges.get(section, [])
        pos = bisect.bisect_right(ranges, offset, key=lambda r: r[0]) - 1
        if pos >= 0:
            start, end, name = ranges[pos]
            if start <= offset < end:
                return start, name
        return None

    def _add_map(self, spec: CollectionSpec, m: MapSpec) -> None:
        if m.name in spec.maps:
            raise ParseError(f"map {m.name!r} is defined twice")
        spec.maps[m.name] = m

    def _data(self, spec: CollectionSpec) -> None:
        for sec in self.elf.sections:
            kind = _is_data_section(sec)
            if not kind or sec.size == 0:
                continue
            if sec.size > _MAX_DATA_SECTION:
                raise ParseError(
                    f"section {sec.name!r} is {sec.size} bytes: larger than any BPF map value can be "
                    "(the kernel caps array values at KMALLOC_MAX_SIZE, a few MiB)"
                )
            datasec = None
            if self.btf is not None:
                datasec = next((t for t in self.btf.find(sec.name) if isinstance(t, Datasec)), None)
            flags = MapFlag.RDONLY_PROG if kind == "rodata" else 0
            # libbpf makes the map mmap-able when a non-static variable is in it (a skeleton
            # would expose it); matching that keeps map_flags identical to libbpf's.
            if datasec is not None and any(
                isinstance(v := self.btf.type_by_id(vsi.type), Var) and v.linkage != VarLinkage.STATIC  # type: ignore[union-attr]
                for vsi in datasec.vars
            ):
                flags |= MapFlag.MMAPABLE
            m = MapSpec(
                sec.name, MapType.ARRAY, key_size=4, value_size=sec.size, max_entries=1, flags=int(flags),
                data=bytes(sec.size) if kind == "bss" else bytes(sec.data),
                freeze=kind == "rodata",
                btf_value_type_id=datasec.id if datasec is not None else 0,
                kernel_name=internal_map_name(self.name, sec.name),
            )
            self._add_map(spec, m)
            self.data_maps[sec.index] = m.name
            self._variables(spec, sec, m, datasec)

    def _variables(self, spec: CollectionSpec, sec: Section, m: MapSpec, datasec: Datasec | None) -> None:
        found: list[tuple[str, int, int, int, bool]] = []  # (name, offset, size, BTF type id, static)
        if datasec is not None:
            assert self.btf is not None
            for vsi in datasec.vars:
                var = self.btf.type_by_id(vsi.type)
                if isinstance(var, Var):
                    found.append((var.name, vsi.offset, vsi.size, var.type, var.linkage == VarLinkage.STATIC))
        else:
            for sym in self.symbols_by_section.get(sec.index, ()):
                if sym.type == STT_OBJECT and sym.size:
                    found.append((sym.name, sym.value, sym.size, 0, sym.bind == STB_LOCAL))
        for name, offset, size, type_id, static in found:
            if name in spec.variables:
                other = spec.variables[name]
                raise ParseError(f"variable {name!r} is defined in both {other.section!r} and {sec.name!r}")
            spec.variables[name] = VariableSpec(name, sec.name, offset, size, type_id, self.btf, m, static)

    # --------------------------------------------------------------------- externs
    def _externs(self, spec: CollectionSpec) -> None:
        """__kconfig/__ksym externs (bpfkit.elf.externs); .kconfig values get their own
        read-only data map, filled when a Collection loads."""
        referenced = {rel.symbol.name for index, rels in self.relocs.items()
                      if self.elf.sections[index].executable for rel in rels if rel.symbol.shndx == SHN_UNDEF}
        undefined = [(s.name, s.bind == STB_WEAK) for s in self.elf.symbols
                     if s.shndx == SHN_UNDEF and s.name in referenced and s.bind in (STB_GLOBAL, STB_WEAK)]
        self.externs: dict[str, ExternSpec] = {}
        if not undefined:  # most objects: no externs (and no need to import their module)
            return
        from .externs import collect_externs, kconfig_size

        self.externs = collect_externs(self.btf, undefined)
        spec.externs = self.externs
        size = kconfig_size(self.externs)
        if not size:
            return
        assert self.btf is not None
        datasec = next((t for t in self.btf.find(".kconfig") if isinstance(t, Datasec)), None)
        self._add_map(spec, MapSpec(
            ".kconfig", MapType.ARRAY, key_size=4, value_size=size, max_entries=1,
            flags=int(MapFlag.RDONLY_PROG | MapFlag.MMAPABLE), data=bytes(size), freeze=True,
            btf_value_type_id=datasec.id if datasec is not None else 0,
            kernel_name=internal_map_name(self.name, ".kconfig"),
        ))

    # -------------------------------------------------------------------- programs
    def _programs(self, spec: CollectionSpec) -> None:
        self.program_at: dict[tuple[int, int], str] = {}  # (section, byte offset) -> program
        entries: list[_Function] = []
        for sec_index, funcs in self.functions.items():
            sec = self.elf.sections[sec_index]
            if sec.name == ".text":
                continue
            for f in funcs:
                if not f.is_global:
                    raise ParseError(
                        f"program {f.name!r} in section {sec.name!r} is static; programs must be global functions"
                    )
                entries.append(f)
                self.program_at[(sec_index, f.start * INSN)] = f.name
        for f in entries:
            if f.name in spec.programs:
                raise ParseError(f"program {f.name!r} is defined twice")
            spec.programs[f.name] = self._link(f, spec)

    def _struct_ops(self, spec: CollectionSpec) -> None:
        """Each variable of a .struct_ops/.struct_ops.link section is a STRUCT_OPS map
        (bpfkit.struct_ops); its value size and BTF id come from the kernel at load."""
        for sec in self.elf.sections:
            if sec.name.lstrip("?") not in STRUCT_OPS_SECTIONS or sec.flags & SHF_EXECINSTR or not sec.size:
                continue
            datasec = None
            if self.btf is not None:
                datasec = next((t for t in self.btf.find(sec.name) if isinstance(t, Datasec)), None)
            from ..spec.struct_ops import parse_section

            found = parse_section(self.btf, sec, self.relocs.get(sec.index, []), self.program_at, datasec)
            for var, ops in found.items():
                self._add_map(spec, MapSpec(
                    var, MapType.STRUCT_OPS, key_size=4, value_size=len(ops.data), max_entries=1,
                    flags=int(MapFlag.LINK) if ops.link else 0, struct_ops=ops,
                ))

    def _link(self, entry: _Function, spec: CollectionSpec) -> ProgramSpec:
        """Lay out ``entry`` and every function it reaches; return its ProgramSpec."""
        where = f"program {entry.name!r} (section {entry.section.name!r})"
        order = [entry]
        placed = {entry.key: 0}
        total = entry.end - entry.start
        fixups: list[tuple[int, tuple[int, int], int]] = []  # (site, callee key, src_reg to set)
        references: list[Reference] = []
        extern_refs: list[tuple[int, str]] = []

        def place(callee: _Function) -> None:
            nonlocal total
            if callee.key not in placed:
                placed[callee.key] = total
                total += callee.end - callee.start
                order.append(callee)

        i = 0
        while i < len(order):
            fn = order[i]
            base = placed[fn.key]
            data = fn.section.data
            relocated = set()
            for idx, rel in fn.relocs:
                relocated.add(idx)
                site = base + idx - fn.start
                code, regs, _off, imm = _INSN.unpack_from(data, idx * INSN)
                sym = rel.symbol
                if code == _CODE_CALL:
                    src = regs >> 4
                    if sym.shndx == SHN_UNDEF:
                        ext = self.externs.get(sym.name)
                        if ext is None or not ext.is_func:
                            raise ParseError(f"{where}: call to {sym.name!r} (instruction {idx}), which is "
                                             "undefined and not a __ksym kernel function")
                        extern_refs.append((site, ext.name))
                    elif src == _PSEUDO_CALL:
                        target_sec = self.elf.section(sym.shndx, f"{where}: call target section")
                        if not target_sec.executable:
                            raise ParseError(f"{where}: call to {sym.name!r}, which is not in an executable section")
                        target = sym.value // INSN + imm + 1
                        callee = self._function_at(sym.shndx, target, f"{where}: call to {sym.name!r}")
                        place(callee)
                        fixups.append((site, callee.key, _PSEUDO_CALL))
                    else:
                        raise ParseError(f"{where}: relocation against {sym.name!r} on a helper call (instruction {idx})")
                elif code == _CODE_LDDW:
                    if idx + 1 >= fn.end:
                        raise ParseError(f"{where}: ld_imm64 at instruction {idx} is cut off by the end of the function")
                    self._ld_imm64(where, fn, idx, site, imm, sym, references, fixups, place, extern_refs)
                else:
                    raise ParseError(
                        f"{where}: relocation against {sym.name!r} at instruction {idx} applies to opcode "
                        f"{code:#04x}, not a call or ld_imm64"
                    )
            # Calls without relocations: targets in the same section, relative to the call.
            chunk = bytes(data[fn.start * INSN : fn.end * INSN])
            for match in _PSEUDO_CALL_RE.finditer(chunk):
                pos = match.start()
                if pos % INSN:
                    continue
                idx = fn.start + pos // INSN
                if idx in relocated:
                    continue
                (imm,) = _IMM.unpack_from(chunk, pos + 4)
                callee = self._function_at(fn.section.index, idx + imm + 1, f"{where}: call at instruction {idx}")
                place(callee)
                fixups.append((base + idx - fn.start, callee.key, _PSEUDO_CALL))
            i += 1

        code = bytearray(b"".join(f.code for f in order))
        for site, callee_key, src in fixups:
            _, regs, _off, _ = _INSN.unpack_from(code, site * INSN)
            regs = (regs & 0x0F) | (src << 4)
            code[site * INSN + 1] = regs
            _IMM.pack_into(code, site * INSN + 4, placed[callee_key] - site - 1)

        info = match_section(entry.section.name)
        prog = ProgramSpec(
            name=entry.name,
            type=info.prog_type,
            instructions=bytes(code),
            license="",
            section=info.section,
            attach_type=info.attach_type,
            attach_to=info.attach_to,
            flags=info.prog_flags,
            autoload=info.autoload,
            references=references,
            functions=[(f.name, placed[f.key]) for f in order],
            extern_refs=extern_refs,
        )
        self._ext_info(prog, order, placed)
        return prog

    def _ld_imm64(self, where: str, fn: _Function, idx: int, site: int, imm: int, sym: Symbol,
                  references: list[Reference], fixups: list[tuple[int, tuple[int, int], int]],
                  place: Callable[[_Function], None], extern_refs: list[tuple[int, str]]) -> None:
        if sym.shndx == SHN_UNDEF:
            ext = self.externs.get(sym.name)
            if ext is None:
                raise ParseError(f"{where}: ld_imm64 at instruction {idx} refers to undefined symbol {sym.name!r}")
            from .externs import ExternKind

            if ext.kind == ExternKind.KCONFIG:
                references.append(Reference(site, ".kconfig", RefKind.MAP_VALUE, ext.offset + imm))
            else:
                extern_refs.append((site, ext.name))
            return
        if sym.shndx in (SHN_ABS, SHN_COMMON) or sym.shndx >= len(self.elf.sections):
            raise ParseError(f"{where}: ld_imm64 at instruction {idx} refers to {sym.name!r}, which has no section")
        target = self.elf.sections[sym.shndx]
        if target.executable:
            # A callback: the address of a function (bpf_loop, bpf_for_each_map_elem, timers).
            offset = sym.value + imm
            if offset % INSN:
                raise ParseError(f"{where}: callback reference to {sym.name!r} is not instruction-aligned")
            callee = self._function_at(sym.shndx, offset // INSN, f"{where}: callback {sym.name!r}")
            place(callee)
            fixups.append((site, callee.key, _PSEUDO_FUNC))
            return
        if target.name in ("maps", ".maps"):
            # The map is at the symbol's value plus the addend clang leaves in imm: non-zero
            # when the relocation is against the section symbol. Never bind by sym.value alone.
            offset = sym.value + imm
            ref = f"{sym.name!r}" + (f"{imm:+d}" if imm else "")
            hit = self._map_covering(sym.shndx, offset)
            if hit is None:
                raise ParseError(f"{where}: ld_imm64 at instruction {idx} refers to {ref} (offset {offset} of "
                                 f"{target.name!r}), which is no map")
            start, name = hit
            if offset != start:
                raise ParseError(f"{where}: ld_imm64 at instruction {idx} refers to {ref}, byte {offset - start} "
                                 f"inside map {name!r} rather than the map itself")
            references.append(Reference(site, name, RefKind.MAP_FD))
            return
        data_map = self.data_maps.get(sym.shndx)
        if data_map is not None:
            offset = sym.value + imm
            if not 0 <= offset < target.size:
                raise ParseError(f"{where}: reference to {sym.name!r}+{imm} lies outside section {target.name!r}")
            references.append(Reference(site, data_map, RefKind.MAP_VALUE, offset))
            return
        raise ParseError(
            f"{where}: ld_imm64 at instruction {idx} refers to {sym.name!r} in section {target.name!r}, "
            "which is neither a map, global data nor a function"
        )

    def _ext_info(self, prog: ProgramSpec, order: list[_Function], placed: dict[tuple[int, int], int]) -> None:
        ext = self.ext
        if ext is None:
            return
        for attr, blocks in (("func_info", ext.func_info), ("line_info", ext.line_info)):
            out: list[bytes] = []
            rec_size = 0
            for fn in order:
                block = blocks.get(fn.section.name)
                if block is None:
                    continue
                rec_size = block.rec_size
                pack = struct.Struct(f"<{rec_size // 4}I").pack
                lo, hi, delta = fn.start * INSN, fn.end * INSN, placed[fn.key] - fn.start
                for rec in block.records:
                    if lo <= rec[0] < hi:
                        out.append(pack(rec[0] // INSN + delta, *rec[1:]))
            if out:
                setattr(prog, attr, b"".join(out))
                setattr(prog, attr + "_rec_size", rec_size)
        for fn in order:
            relos = ext.core_relos.get(fn.section.name)
            if not relos:
                continue
            lo, hi, delta = fn.start * INSN, fn.end * INSN, placed[fn.key] - fn.start
            prog.core_relos.extend((r.insn_off // INSN + delta, r) for r in relos if lo <= r.insn_off < hi)

    # -------------------------------------------------------------- values, license
    def _map_values(self, spec: CollectionSpec) -> None:
        btf_sec = self.elf.by_name.get(".maps")
        if btf_sec is not None:
            btf_map_values(self.btf_layouts, self.relocs.get(btf_sec.index, []), self.elf,
                           self.program_at, btf_sec)
        for prog in spec.programs.values():
            prog.license = spec.license
            if spec.kernel_version in (0, KERNEL_VERSION_MAGIC) and prog.type == ProgType.KPROBE:
                prog.needs_kernel_version = True
            else:
                prog.kernel_version = spec.kernel_version


def parse_object(data: bytes | bytearray | memoryview, name: str = "") -> CollectionSpec:
    """Parse an ELF object's bytes into a CollectionSpec (``name`` as libbpf's object name)."""
    return _ObjectParser(data, name).parse()
