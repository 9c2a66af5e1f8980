# SPDX-License-Identifier: Apache-2.0
"""Map definitions in an object: the legacy ``maps`` section and BTF-defined ``.maps``.

Legacy: one fixed-size record per map symbol, ``struct bpf_map_def`` (type, key_size,
value_size, max_entries, map_flags: 20 bytes) or iproute2's longer ``struct bpf_elf_map``
(+ id, pinning, inner_id, inner_idx: 36 bytes). The record size is the section size divided
by the number of map symbols, as libbpf computes it.

BTF-defined: each map is a global variable in ``.maps`` whose type is an anonymous struct;
libbpf's macros encode the attributes in the member types, so nothing is read from the
section's bytes:

    __uint(name, N)    ->  int (*name)[N]          the number is the array's length
    __ulong(name, N)   ->  enum { name##LINE = N } name    libbpf 1.4+: the enum's one value
    __type(name, T)    ->  typeof(T) *name         key/value types (their sizes and BTF ids)
    __array(name, T)   ->  typeof(T) *name[]       inner map template / prog array values

Initial ``values`` of prog arrays and map-in-maps are relocations against the ``.maps``
section that point at programs or maps.
"""

from __future__ import annotations

import struct

from .._record import SlottedRecord
from ..btf import BTF
from ..btf.types import Array, Datasec, Enum, FuncProto, Pointer, Struct, Var, VarLinkage, Void
from ..elf.reader import STB_LOCAL, STT_SECTION, ElfFile, Relocation, Section, Symbol
from ..errors import ParseError
from .consts import MapType
from .maps import MapSpec, PinType

__all__ = ["legacy_maps", "btf_maps", "BTFMapLayout"]

_MAP_DEF = struct.Struct("<5I")  # struct bpf_map_def
_ELF_MAP = struct.Struct("<9I")  # iproute2 struct bpf_elf_map
_MAP_IN_MAP = (MapType.ARRAY_OF_MAPS, MapType.HASH_OF_MAPS)
# Map types whose key and value are fds/ids of 4 bytes when the definition leaves them out.
_FD_ARRAYS = (MapType.PERF_EVENT_ARRAY, MapType.PROG_ARRAY, MapType.CGROUP_ARRAY, *_MAP_IN_MAP)
# iproute2's pinning values: PIN_NONE 0, PIN_OBJECT_NS 1, PIN_GLOBAL_NS 2. bpfkit pins both
# named kinds by name under the collection's pin directory.
_ELF_PINNING = {0: PinType.NONE, 1: PinType.BY_NAME, 2: PinType.BY_NAME}


def linkage_error(name: str, section: str, linkage: str = "static") -> ParseError:
    """A ``static`` (or ``extern``) map definition is refused, as libbpf ("map 'x':
    unsupported map linkage static") and cilium/ebpf do: clang references a static map
    through the section symbol plus an offset in the instruction, and such a map is not
    visible outside the object."""
    fix = "drop 'static'" if linkage == "static" else "define it in this object"
    return ParseError(
        f"map {name!r}: unsupported map linkage {linkage} (in section {section!r}); "
        f"map definitions must be global variables: {fix}"
    )


def _map_type(value: int, name: str) -> MapType:
    try:
        return MapType(value)
    except ValueError:
        raise ParseError(f"map {name!r}: unknown map type {value}") from None


# ----------------------------------------------------------------------------- legacy
def legacy_maps(elf: ElfFile, section: Section) -> dict[int, MapSpec]:
    """Maps of a legacy ``maps`` section, keyed by their offset in it."""
    symbols = sorted(
        (s for s in elf.symbols if s.shndx == section.index and s.type != STT_SECTION and s.name),
        key=lambda s: s.value,
    )
    if not symbols:
        if section.size:
            raise ParseError(f"section {section.name!r} has {section.size} bytes but no map symbols")
        return {}
    def_size = section.size // len(symbols)
    if def_size < _MAP_DEF.size or def_size % 4 or def_size * len(symbols) != section.size:
        raise ParseError(
            f"section {section.name!r}: {section.size} bytes for {len(symbols)} maps is not a whole number "
            f"of map definitions (each at least {_MAP_DEF.size} bytes)"
        )
    data = bytes(section.data)
    found: dict[int, MapSpec] = {}
    by_id: dict[int, tuple[MapSpec, int]] = {}
    inner_ids: dict[str, int] = {}
    for sym in symbols:
        if sym.bind == STB_LOCAL:
            raise linkage_error(sym.name, section.name)
        off = sym.value
        if off % def_size or off + def_size > len(data):
            raise ParseError(f"map {sym.name!r}: offset {off} in {section.name!r} is not at a definition boundary")
        if off in found:
            raise ParseError(f"map {sym.name!r}: two symbols name the definition at offset {off}")
        record = data[off : off + def_size]
        mtype, key_size, value_size, max_entries, flags = _MAP_DEF.unpack_from(record)
        spec = MapSpec(sym.name, _map_type(mtype, sym.name), key_size, value_size, max_entries, flags)
        known = _MAP_DEF.size
        if def_size >= _ELF_MAP.size:
            _, _, _, _, _, map_id, pinning, inner_id, inner_idx = _ELF_MAP.unpack_from(record)
            if pinning not in _ELF_PINNING:
                raise ParseError(f"map {sym.name!r}: unknown pinning value {pinning}")
            spec.pinning = _ELF_PINNING[pinning]
            if map_id:
                by_id[map_id] = (spec, inner_idx)
            if inner_id:
                inner_ids[sym.name] = inner_id
            known = _ELF_MAP.size
        if any(record[known:]):
            raise ParseError(
                f"map {sym.name!r}: its {def_size}-byte definition has non-zero fields past the "
                f"{known} bytes bpfkit understands"
            )
        found[off] = spec
    # iproute2 map-in-map: the outer names the template's id in inner_id; the template with
    # that id goes into the outer map at slot inner_idx.
    for spec in found.values():
        inner_id = inner_ids.get(spec.name)
        if inner_id:
            if inner_id not in by_id:
                raise ParseError(f"map {spec.name!r}: inner_id {inner_id} names no map")
            inner, slot = by_id[inner_id]
            if spec.type not in _MAP_IN_MAP:
                raise ParseError(f"map {spec.name!r}: inner_id given but its type is {spec.type.kernel_name}")
            spec.inner = inner.copy()
            if slot < spec.max_entries:
                spec.contents.append((slot, inner.name))
        elif spec.type in _MAP_IN_MAP:
            raise ParseError(f"map {spec.name!r}: a {spec.type.kernel_name} map needs an inner map (inner_id)")
    return found


# -------------------------------------------------------------------------------- BTF
class BTFMapLayout(SlottedRecord):
    """Where a BTF map lives in ``.maps``: for resolving ``values`` relocations."""

    __slots__ = ("spec", "offset", "size", "values_offset")

    def __init__(self, spec: MapSpec, offset: int, size: int, values_offset: int = -1) -> None:
        self.spec = spec
        self.offset = offset  # of the map's variable in .maps
        self.size = size
        self.values_offset = values_offset  # byte offset of the ``values`` member, -1 when absent


def btf_maps(btf: BTF, section: Section) -> list[BTFMapLayout]:
    """Maps declared in ``.maps`` (the DATASEC of that name), in declaration order."""
    datasecs = btf.find(section.name)
    datasec = next((t for t in datasecs if isinstance(t, Datasec)), None)
    if datasec is None:
        raise ParseError(f"section {section.name!r} has no BTF DATASEC describing its maps")
    layouts = []
    for vsi in datasec.vars:
        var = btf.type_by_id(vsi.type)
        if not isinstance(var, Var):
            raise ParseError(f"{section.name}: entry of type {var.kind.name} is not a variable")
        name = var.name
        if var.linkage != VarLinkage.GLOBAL:
            raise linkage_error(name, section.name, "static" if var.linkage == VarLinkage.STATIC else "extern")
        layout = BTFMapLayout(MapSpec(name, MapType.UNSPEC), vsi.offset, vsi.size)
        layout.spec, layout.values_offset = _btf_map_def(btf, name, var.type, inner=False)
        layouts.append(layout)
    return layouts


def _uint(btf: BTF, map_name: str, member: str, type_id: int, bits: int = 32) -> int:
    """A numeric field in either of libbpf's encodings: ``__uint(name, N)`` (a pointer to an
    array of N) or ``__ulong(name, N)`` (libbpf 1.4+: an ENUM/ENUM64 with the one value N, as
    libbpf's get_map_field_long() reads it; arena maps write ``map_extra`` so)."""
    t = btf.resolve(type_id)
    if isinstance(t, Pointer):
        arr = btf.resolve(t.type)
        if isinstance(arr, Array):
            return arr.nelems
    elif isinstance(t, Enum):  # Enum64 too
        if len(t.values) != 1:
            raise ParseError(f"map {map_name!r}: field {member!r} is an enum with {len(t.values)} values; "
                             "an __ulong() has exactly one")
        value = t.values[0].value & ((1 << 64) - 1)  # a negative value wraps, as libbpf's (u64) cast
        if value >> bits:
            raise ParseError(f"map {map_name!r}: field {member!r} is {value:#x}, more than its {bits} bits hold")
        return value
    raise ParseError(f"map {map_name!r}: field {member!r} is not an __uint() (a pointer to an array) "
                     "nor an __ulong() (an enum with one value)")


def _pointee(btf: BTF, map_name: str, member: str, type_id: int) -> int:
    ptr = btf.resolve(type_id)
    if not isinstance(ptr, Pointer):
        raise ParseError(f"map {map_name!r}: field {member!r} is not a __type() (expected a pointer)")
    return ptr.type


def _btf_map_def(btf: BTF, name: str, type_id: int, inner: bool) -> tuple[MapSpec, int]:
    struct_type = btf.resolve(type_id)
    if not isinstance(struct_type, Struct):
        raise ParseError(f"map {name!r}: its definition is a {struct_type.kind.name}, not a struct")
    spec = MapSpec(name, MapType.UNSPEC)
    seen: set[str] = set()
    map_type = key_size = value_size = None
    key_type = value_type = 0
    values_offset = -1
    values_target = None
    for member in struct_type.members:
        field = member.name
        if field in seen:
            raise ParseError(f"map {name!r}: field {field!r} is given twice")
        seen.add(field)
        if field == "type":
            map_type = _uint(btf, name, field, member.type)
        elif field == "max_entries":
            spec.max_entries = _uint(btf, name, field, member.type)
        elif field == "map_flags":
            spec.flags = _uint(btf, name, field, member.type)
        elif field == "numa_node":
            spec.numa_node = _uint(btf, name, field, member.type)
        elif field == "map_extra":
            spec.map_extra = _uint(btf, name, field, member.type, bits=64)
        elif field == "key_size":
            key_size = _uint(btf, name, field, member.type)
        elif field == "value_size":
            value_size = _uint(btf, name, field, member.type)
        elif field == "pinning":
            if inner:
                raise ParseError(f"map {name!r}: an inner map template cannot be pinned")
            pinning = _uint(btf, name, field, member.type)
            if pinning not in (0, 1):
                raise ParseError(f"map {name!r}: unknown pinning value {pinning} (0 none, 1 LIBBPF_PIN_BY_NAME)")
            spec.pinning = PinType(pinning)
        elif field == "key":
            key_type = _pointee(btf, name, field, member.type)
        elif field == "value":
            value_type = _pointee(btf, name, field, member.type)
        elif field == "values":
            arr = btf.resolve(member.type)
            if not isinstance(arr, Array):
                raise ParseError(f"map {name!r}: field 'values' is not an __array()")
            ptr = btf.resolve(arr.type)
            if not isinstance(ptr, Pointer):
                raise ParseError(f"map {name!r}: 'values' must be an array of pointers")
            values_target = btf.resolve(ptr.type)
            values_offset = member.bit_offset // 8
        else:
            raise ParseError(f"map {name!r}: unknown field {field!r} in its BTF definition")
    if map_type is None:
        raise ParseError(f"map {name!r}: no 'type' in its definition")
    spec.type = _map_type(map_type, name)
    if spec.type in (MapType.RINGBUF, MapType.PERF_EVENT_ARRAY):
        spec.btf = btf  # untyped, but its records are typed by the object's BTF (or DWARF): record="struct event"
    for what, given, type_ref in (("key", key_size, key_type), ("value", value_size, value_type)):
        if not type_ref:
            continue
        if isinstance(btf.type_by_id(type_ref), Void):
            raise ParseError(f"map {name!r}: {what} type is void")
        size = btf.size_of(type_ref)
        if given is not None and given != size:
            raise ParseError(f"map {name!r}: {what}_size {given} contradicts its {what} type's size {size}")
        if what == "key":
            key_size, spec.btf_key_type_id = size, type_ref
        else:
            value_size, spec.btf_value_type_id = size, type_ref
        spec.btf = btf
    if values_target is not None:
        if spec.type in _MAP_IN_MAP:
            if not isinstance(values_target, Struct):
                raise ParseError(f"map {name!r}: 'values' of a map-in-map must point to an inner map definition")
            spec.inner, _ = _btf_map_def(btf, f"{name}.inner", values_target.id, inner=True)
        elif spec.type == MapType.PROG_ARRAY:
            if not isinstance(values_target, FuncProto):
                raise ParseError(f"map {name!r}: 'values' of a prog array must be function pointers")
        else:
            raise ParseError(
                f"map {name!r}: 'values' initialisers need a prog array or map-in-map, not {spec.type.kernel_name}"
            )
        # As libbpf: a value type or size may be given, but only one of 4 bytes (the fd or id
        # the kernel keeps) agrees with 'values'.
        if value_size not in (None, 4):
            desc = "map-in-map inner" if spec.type in _MAP_IN_MAP else "prog-array"
            raise ParseError(f"map {name!r}: {desc} value size {value_size} conflicts with 'values', whose "
                             "entries are 4-byte fds (use __type(value, __u32) or leave the value out)")
        value_size = 4
    elif spec.type in _MAP_IN_MAP:
        raise ParseError(f"map {name!r}: a {spec.type.kernel_name} map needs an inner map (__array(values, ...))")
    if spec.type in _FD_ARRAYS:
        # libbpf fills these in: fds and ids are 4 bytes.
        key_size = 4 if key_size is None else key_size
        value_size = 4 if value_size is None else value_size
    spec.key_size = key_size or 0
    spec.value_size = value_size or 0
    return spec, values_offset


def btf_map_values(layouts: list[BTFMapLayout], relocs: list[Relocation], elf: ElfFile,
                   prog_names: dict[tuple[int, int], str], maps_section: Section) -> None:
    """Fill ``contents`` of prog arrays and map-in-maps from the ``.maps`` relocations."""
    for rel in relocs:
        layout = next((lay for lay in layouts if lay.offset <= rel.offset < lay.offset + lay.size), None)
        sym: Symbol = rel.symbol
        if layout is None or layout.values_offset < 0 or rel.offset < layout.offset + layout.values_offset:
            raise ParseError(
                f"relocation against {sym.name!r} at offset {rel.offset} of {maps_section.name!r} is not in a map's 'values'"
            )
        spec = layout.spec
        slot_off = rel.offset - layout.offset - layout.values_offset
        if slot_off % 8:
            raise ParseError(f"map {spec.name!r}: misaligned 'values' entry at byte {slot_off}")
        slot = slot_off // 8
        if spec.max_entries and slot >= spec.max_entries:
            raise ParseError(f"map {spec.name!r}: 'values' has entry {slot} beyond max_entries {spec.max_entries}")
        if spec.type == MapType.PROG_ARRAY:
            prog = prog_names.get((sym.shndx, sym.value))
            if prog is None:
                raise ParseError(f"map {spec.name!r}: 'values'[{slot}] = {sym.name!r}, which is not a program")
            spec.contents.append((slot, prog))
        else:
            target = next((lay for lay in layouts if sym.shndx == maps_section.index and lay.offset == sym.value), None)
            if target is None:
                raise ParseError(f"map {spec.name!r}: 'values'[{slot}] = {sym.name!r}, which is not a map in .maps")
            spec.contents.append((slot, target.spec.name))
