# SPDX-License-Identifier: Apache-2.0
"""Types an object's BTF lacks, found in its DWARF (``.debug_info``) and made BTF types.

clang puts in an object's BTF only the types that maps, globals and functions name; a struct
used only through a local pointer is not there. libbpf-tools' opensnoop builds its
``struct event`` in a per-CPU "heap" array declared with ``__uint(value_size, ...)`` and no
value type (compat.bpf.h), so the event type is in no BTF, but ``clang -g`` (every libbpf-tools
Makefile builds with it) describes every type the code uses in DWARF.

:func:`dwarf_types` gives, for a BTF parsed from an object that has ``.debug_info``, a BTF split
on top of it (ids continue the object's) to which :meth:`DwarfTypes.struct` adds a named
struct or union read from DWARF, with every type it holds, as bpfkit's BTF type model: every
decoder of BTF types (bpfkit.btf.values, bpfkit.events.RecordFormat, the skeletons) then reads
it unchanged. Pointers become pointers to void (a pointer decodes as an address).

Lazy: :func:`attach_dwarf` (the object parser) only remembers the object's bytes; pyelftools is
imported, and ``.debug_info`` read, the first time a type is asked for (tens of ms for a
libbpf-tools object: docs/events.md). Needs pyelftools (a dependency of bpfkit since DWARF
types: bpfkit's own ELF reader reads no DWARF).
"""

from __future__ import annotations

import io
import re
import threading
import weakref

from ..errors import BPFKitError, NotFoundError, ParseError
from .spec import BTF
from .types import (
    Array,
    Const,
    Enum,
    Enum64,
    EnumValue,
    Float,
    Fwd,
    Int,
    IntEncoding,
    Member,
    Pointer,
    Restrict,
    Struct,
    Typedef,
    Union,
    Volatile,
)

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

__all__ = ["DwarfTypes", "attach_dwarf", "dwarf_types", "find_struct"]

# The objects' bytes, by the BTF parsed from them (weakly: a BTF that goes frees its object).
_SOURCES: weakref.WeakKeyDictionary[BTF, tuple[bytes | bytearray | memoryview, str]] = weakref.WeakKeyDictionary()
_TYPES: weakref.WeakKeyDictionary[BTF, DwarfTypes] = weakref.WeakKeyDictionary()
_LOCK = threading.Lock()

# DW_ATE_* (DWARF 5, 7.8): base type encodings.
_ATE_BOOLEAN, _ATE_FLOAT, _ATE_SIGNED, _ATE_SIGNED_CHAR, _ATE_UNSIGNED, _ATE_UNSIGNED_CHAR = 2, 4, 5, 6, 7, 8
_QUALIFIERS = {"DW_TAG_const_type": Const, "DW_TAG_volatile_type": Volatile, "DW_TAG_restrict_type": Restrict}
_MAX_DEPTH = 64  # nesting guard: DWARF from a file could loop


def attach_dwarf(btf: BTF, data: bytes | bytearray | memoryview, name: str = "") -> None:
    """Remember that ``btf`` came from the object ``data`` (which has ``.debug_info``)."""
    _SOURCES[btf] = (data, name)


def dwarf_types(btf: BTF | None) -> DwarfTypes | None:
    """The DWARF types of the object ``btf`` was parsed from; None when it had no DWARF."""
    if btf is None:
        return None
    with _LOCK:
        got = _TYPES.get(btf)
        if got is None:
            source = _SOURCES.get(btf)
            if source is None:
                return None
            got = _TYPES[btf] = DwarfTypes(btf, *source)
        return got


class DwarfTypes:
    """Structs of one object's DWARF as BTF types, split on top of the object's BTF.

    ``btf`` (a split BTF: the object's types, then those read from DWARF) grows as
    :meth:`struct` is asked for types; ``struct("event")`` -> the Struct, or NotFoundError."""

    def __init__(self, base: BTF, data: bytes | bytearray | memoryview, name: str = "") -> None:
        self.base = base
        self.object_name = name
        self.btf = BTF(base=base, name=f"DWARF of {name}" if name else "DWARF")
        self._data = data
        self._dies: dict[int, Any] | None = None  # DIE offset -> DIE
        self._named: dict[str, list[int]] = {}  # struct/union name -> DIE offsets (definitions)
        self._made: dict[int, int] = {}  # DIE offset -> type id in self.btf
        self._int_id = 0  # an ``int`` for arrays' index type (BTF wants one; decoders ignore it)
        self._lock = threading.Lock()

    def _read(self) -> None:
        """Every DIE of ``.debug_info`` (once), and the struct and union definitions by name."""
        if self._dies is not None:
            return
        try:
            from elftools.elf.elffile import ELFFile
        except ImportError:  # pragma: no cover - a dependency of bpfkit
            raise NotFoundError("reading DWARF types needs pyelftools (pip install pyelftools)") from None
        dies: dict[int, Any] = {}
        try:
            elf = ELFFile(io.BytesIO(bytes(self._data)))
            if elf.has_dwarf_info():
                for cu in elf.get_dwarf_info().iter_CUs():
                    for die in cu.iter_DIEs():
                        dies[die.offset] = die
                        if die.tag in ("DW_TAG_structure_type", "DW_TAG_union_type") \
                                and "DW_AT_declaration" not in die.attributes:
                            name = _name(die)
                            if name:
                                self._named.setdefault(name, []).append(die.offset)
        except _failures() as exc:
            raise ParseError(f"DWARF of {self.object_name or 'the object'}: {exc}") from None
        self._dies = dies

    def may_name(self, pattern: re.Pattern[str]) -> list[str]:
        """The strings of ``.debug_str`` that ``pattern`` matches in full: the names DWARF may
        give a type, found without reading DWARF (bpfkit's ELF reader and one regex over the
        section: what a skeleton checks before paying for :meth:`struct`)."""
        from ..elf.reader import ElfFile

        try:
            sec = ElfFile(self._data).by_name.get(".debug_str")
        except BPFKitError:  # the object parsed once already: nothing to find then
            return []
        if sec is None:
            return []
        strings = bytes(sec.data).split(b"\0")
        return sorted({text for raw in strings if (text := raw.decode(errors="replace")) and pattern.fullmatch(text)})

    def names(self) -> list[str]:
        """The names of every struct and union DWARF defines."""
        with self._lock:
            self._read()
            return sorted(self._named)

    def struct(self, name: str) -> Struct:
        """The struct (or union) ``name`` (``struct event`` or ``event``) as a type of
        :attr:`btf`, with everything it holds; NotFoundError when DWARF has none."""
        bare = name.removeprefix("struct ").removeprefix("union ").strip()
        with self._lock:
            self._read()
            offsets = self._named.get(bare)
            if not offsets:
                raise NotFoundError(f"DWARF of {self.object_name or 'the object'} has no struct named {bare!r}")
            try:
                t = self.btf.type_by_id(self._type(offsets[0], 0))
            except _failures() as exc:  # a DIE that is not what its tag says
                raise ParseError(f"DWARF of {self.object_name or 'the object'}: struct {bare!r}: {exc}") from None
        assert isinstance(t, Struct)
        return t

    # -------------------------------------------------------------------- translation
    def _die(self, offset: int) -> Any:
        assert self._dies is not None
        die = self._dies.get(offset)
        if die is None:
            raise ParseError(f"DWARF of {self.object_name or 'the object'}: no DIE at offset {offset}")
        return die

    def _ref(self, die: Any, depth: int) -> int:
        """The type id of ``die``'s DW_AT_type (0, void, without one)."""
        attr = die.attributes.get("DW_AT_type")
        if attr is None:
            return 0
        # Reference forms are relative to the unit (ref_addr is not: pyelftools resolves both).
        return self._type(die.get_DIE_from_attribute("DW_AT_type").offset, depth + 1)

    def _type(self, offset: int, depth: int) -> int:
        made = self._made.get(offset)
        if made is not None:
            return made
        if depth > _MAX_DEPTH:
            raise ParseError(f"DWARF of {self.object_name or 'the object'}: types nest deeper than {_MAX_DEPTH}")
        die = self._die(offset)
        tag, name, attrs = die.tag, _name(die), die.attributes
        size = attrs["DW_AT_byte_size"].value if "DW_AT_byte_size" in attrs else 0
        add = self.btf.add
        if tag == "DW_TAG_base_type":
            enc = attrs["DW_AT_encoding"].value if "DW_AT_encoding" in attrs else _ATE_UNSIGNED
            if enc == _ATE_FLOAT:
                tid = add(Float(0, name, size))
            else:
                flags = IntEncoding.NONE
                if enc in (_ATE_SIGNED, _ATE_SIGNED_CHAR):
                    flags |= IntEncoding.SIGNED
                if enc in (_ATE_SIGNED_CHAR, _ATE_UNSIGNED_CHAR) or name == "char":
                    flags |= IntEncoding.CHAR
                if enc == _ATE_BOOLEAN:
                    flags = IntEncoding.BOOL
                tid = add(Int(0, name, size, flags, 0, size * 8))
        elif tag in ("DW_TAG_pointer_type", "DW_TAG_reference_type"):
            tid = add(Pointer(0, "", 0))  # to void: a pointer decodes as an address
        elif tag == "DW_TAG_typedef":
            t = Typedef(0, name, 0)
            tid = self._made[offset] = add(t)  # before its target: a typedef of a struct that points back
            t.type = self._ref(die, depth)
        elif tag in _QUALIFIERS:
            tid = add(_QUALIFIERS[tag](0, "", self._ref(die, depth)))
        elif tag == "DW_TAG_atomic_type":
            tid = self._ref(die, depth)  # BTF has no _Atomic: the type itself
        elif tag in ("DW_TAG_structure_type", "DW_TAG_union_type", "DW_TAG_class_type"):
            if "DW_AT_declaration" in attrs:
                tid = add(Fwd(0, name, tag == "DW_TAG_union_type"))
            else:
                s = (Union if tag == "DW_TAG_union_type" else Struct)(0, name, size)
                tid = self._made[offset] = add(s)
                s.members, s.kind_flag = self._members(die, depth)
        elif tag == "DW_TAG_enumeration_type":
            values = [EnumValue(_name(c), int(c.attributes["DW_AT_const_value"].value))
                      for c in die.iter_children() if c.tag == "DW_TAG_enumerator"]
            signed = any(v.value < 0 for v in values)
            tid = add((Enum64 if size > 4 else Enum)(0, name, size or 4, values, signed))
        elif tag == "DW_TAG_array_type":
            tid = self._array(die, depth)
        else:  # functions (behind pointers only, which point to void here), and others
            raise ParseError(f"DWARF of {self.object_name or 'the object'}: no BTF type for {tag} {name!r}")
        self._made[offset] = tid
        return tid

    def _members(self, die: Any, depth: int) -> tuple[list[Member], bool]:
        members: list[Member] = []
        bitfields = False
        for child in die.iter_children():
            if child.tag != "DW_TAG_member":
                continue
            attrs = child.attributes
            bit_size = attrs["DW_AT_bit_size"].value if "DW_AT_bit_size" in attrs else 0
            if "DW_AT_data_bit_offset" in attrs:  # DWARF 4+ bitfields
                bit_offset = attrs["DW_AT_data_bit_offset"].value
            else:
                loc = attrs["DW_AT_data_member_location"].value if "DW_AT_data_member_location" in attrs else 0
                if isinstance(loc, list):  # DWARF 2 style: DW_OP_plus_uconst N
                    loc = loc[-1] if loc and isinstance(loc[-1], int) else 0
                bit_offset = int(loc) * 8
            bitfields = bitfields or bool(bit_size)
            members.append(Member(_name(child), self._ref(child, depth), bit_offset, bit_size))
        return members, bitfields

    def _array(self, die: Any, depth: int) -> int:
        """``T x[a][b]``: one DW_TAG_array_type with a subrange per dimension; BTF nests arrays
        (an array of ``b`` T inside an array of ``a``). A subrange without count or bound is
        a flexible array member (0 elements)."""
        dims: list[int] = []
        for sub in die.iter_children():
            if sub.tag != "DW_TAG_subrange_type":
                continue
            attrs = sub.attributes
            if "DW_AT_count" in attrs:
                dims.append(int(attrs["DW_AT_count"].value))
            elif "DW_AT_upper_bound" in attrs:
                dims.append(int(attrs["DW_AT_upper_bound"].value) + 1)
            else:
                dims.append(0)
        tid = self._ref(die, depth)
        for n in reversed(dims or [0]):
            tid = self.btf.add(Array(0, "", tid, self._index_type(), n))
        return tid

    def _index_type(self) -> int:
        if not self._int_id:
            self._int_id = self.btf.add(Int(0, "int", 4, IntEncoding.SIGNED, 0, 32))
        return self._int_id


def _failures() -> tuple[type[Exception], ...]:
    """What pyelftools raises on a malformed object (its exceptions, its construct copy's, and
    the Python errors a bad offset or form gives), to be said as ParseError."""
    from elftools.common.exceptions import DWARFError, ELFError
    from elftools.construct.core import ConstructError

    return (DWARFError, ELFError, ConstructError, KeyError, IndexError, ValueError, TypeError, AttributeError,
            AssertionError, UnicodeDecodeError)


def _name(die: Any) -> str:
    attr = die.attributes.get("DW_AT_name")
    if attr is None:
        return ""
    value = attr.value
    return value.decode(errors="replace") if isinstance(value, bytes) else str(value)


def find_struct(btf: BTF | None, name: str, what: str = "record type") -> tuple[BTF, Struct]:
    """The struct ``name`` (``struct event`` or ``event``) from the object's BTF, else from its
    DWARF: (the BTF it is a type of, the Struct). NotFoundError names both places."""
    bare = name.removeprefix("struct ").removeprefix("union ").strip()
    if btf is not None:
        for t in btf.find(bare):
            if isinstance(t, Struct):
                return btf, t
    dwarf = dwarf_types(btf)
    if dwarf is not None:
        try:
            return dwarf.btf, dwarf.struct(bare)
        except NotFoundError:
            pass
    where = "the object has no BTF" if btf is None else f"BTF{' ' + btf.name if btf.name else ''} has no struct named {bare!r}"
    dwarf_why = ("nor has its DWARF (.debug_info)" if dwarf is not None
                 else "and the object has no DWARF (.debug_info: build it with clang -g)")
    raise NotFoundError(f"{what} {name!r}: {where}, {dwarf_why}")
