# SPDX-License-Identifier: Apache-2.0
"""BTF -> byte layout: where each part of a BTF-typed value lies, and its :mod:`struct` format.

The one place bpfkit walks a BTF type down to bytes. Its readers keep only their own output
conventions: :mod:`bpfkit.btf.values` compiles codecs (Python values), :mod:`bpfkit.cli.bpftool_json`
prints bpftool's JSON, :meth:`bpfkit.events.records.RecordFormat.from_btf` makes flat record
formats and :mod:`bpfkit.metrics.plan` picks labels and values.

* :data:`INT_FORMATS`, :data:`FLOAT_FORMATS`, :data:`POINTER_FORMAT` and :func:`scalar_format`:
  the one table from a BTF scalar to the :mod:`struct` code of one value (standard sizes);
* :func:`members`: the parts of a struct, union or data section, each a :class:`Member` (a
  DATASEC's variables as members named like them, their type the VAR, in BTF order);
* :func:`leaves`: a type flattened into the leaves a caller does not open (by default every
  struct but unions), each with the chain of members leading to it and its byte offset.

Pure data: no kernel access (the spec layer).
"""

from __future__ import annotations

from collections.abc import Callable

from .spec import BTF
from .types import Datasec, Enum, Float, Int, IntEncoding, Member, Pointer, Struct, Type, Union

__all__ = ["INT_FORMATS", "FLOAT_FORMATS", "POINTER_FORMAT", "scalar_format", "members", "Leaf", "leaves",
           "opens_structs"]

# (size in bytes, signed) -> struct code of an integer (also enums: their size and sign).
INT_FORMATS: dict[tuple[int, bool], str] = {
    (1, False): "B", (2, False): "H", (4, False): "I", (8, False): "Q",
    (1, True): "b", (2, True): "h", (4, True): "i", (8, True): "q",
}
FLOAT_FORMATS: dict[int, str] = {2: "e", 4: "f", 8: "d"}  # IEEE half, float, double
POINTER_FORMAT = "Q"  # BPF pointers are 64-bit (the BPF target), whatever the host


def scalar_format(t: Type) -> str:
    """The struct code of one value of resolved type ``t``: integers of whole bytes (``?``
    for a one-byte ``_Bool``), enums, pointers and floats; ``""`` for anything else (an INT
    that is a bit range of its bytes, odd sizes, aggregates)."""
    if isinstance(t, Int):
        size = t.size
        if t.bit_offset or (t.bits and t.bits != size * 8):
            return ""
        if size == 1 and t.encoding & IntEncoding.BOOL:
            return "?"
        return INT_FORMATS.get((size, t.signed), "")
    if isinstance(t, Enum):
        return INT_FORMATS.get((t.size, t.signed), "")
    if isinstance(t, Pointer):
        return POINTER_FORMAT
    if isinstance(t, Float):
        return FLOAT_FORMATS.get(t.size, "")
    return ""


def members(btf: BTF, t: Struct | Datasec) -> list[Member]:
    """The parts of a struct or union (its members), or of a data section (its variables, in
    BTF order, as members named like the VAR whose type is the VAR)."""
    if isinstance(t, Struct):
        return t.members
    return [Member(btf.type_by_id(v.type).name, v.type, v.offset * 8) for v in t.vars]


def opens_structs(t: Type, depth: int) -> bool:
    """The default for :func:`leaves`: open structs (not unions) at any depth."""
    return isinstance(t, Struct) and not isinstance(t, Union)


class Leaf:
    """A part of a value :func:`leaves` did not open: the members leading to it (empty for
    the value itself), its byte offset from the value's start (of the byte holding its first
    bit, for a bitfield), its type id and resolved type (typedefs and qualifiers skipped), and
    whether it is a bitfield (or a member not at a whole byte)."""

    __slots__ = ("path", "offset", "type_id", "type", "bitfield")

    def __init__(self, path: tuple[Member, ...], offset: int, type_id: int, type: Type, bitfield: bool = False) -> None:
        self.path, self.offset, self.type_id, self.type, self.bitfield = path, offset, type_id, type, bitfield

    @property
    def member(self) -> Member | None:
        """The member this leaf is (None for the value itself)."""
        return self.path[-1] if self.path else None

    def __repr__(self) -> str:
        names = ".".join(m.name or "<anon>" for m in self.path)
        return f"<Leaf {names or '<value>'} @{self.offset} {self.type!r}>"


def leaves(btf: BTF, type_id: int, opens: Callable[[Type, int], bool] = opens_structs) -> list[Leaf]:
    """The leaves of type ``type_id`` in member order: every struct ``opens(type, depth)``
    accepts is opened into its members (the value itself at depth 0), anything else is a
    leaf. A bitfield member is a leaf whatever its type (its type is not opened)."""
    out: list[Leaf] = []
    _collect(btf, type_id, (), 0, opens, 0, out)
    return out


def _collect(btf: BTF, type_id: int, path: tuple[Member, ...], offset: int, opens: Callable[[Type, int], bool],
             depth: int, out: list[Leaf]) -> None:
    t = btf.resolve(type_id)
    if not isinstance(t, (Struct, Datasec)) or not opens(t, depth):
        out.append(Leaf(path, offset, type_id, t))
        return
    resolve = btf.resolve
    for m in t.members if isinstance(t, Struct) else members(btf, t):
        bit_offset = m.bit_offset
        if m.bitfield_size or bit_offset & 7:
            out.append(Leaf((*path, m), offset + (bit_offset >> 3), m.type, resolve(m.type), True))
        else:
            _collect(btf, m.type, (*path, m), offset + (bit_offset >> 3), opens, depth + 1, out)
