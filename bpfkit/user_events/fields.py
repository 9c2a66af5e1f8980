# SPDX-License-Identifier: Apache-2.0
"""A user event's fields: their declarations as the kernel parses them (user_field_size(),
kernel/trace/trace_events_user.c) and the Python annotations that name them."""

from __future__ import annotations

import dataclasses
import re
import typing
from typing import Any

from .._kernel.user_events import (
    MAX_FIELD_ARRAY_SIZE,
)
from ..errors import ParseError

_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")

# Basic types user_field_size() knows (kernel/trace/trace_events_user.c): size, signed, struct
# code. "long" is refused by the kernel: its size differs between user and kernel space.
_BASIC: dict[str, tuple[int, bool, str]] = {
    "s64": (8, True, "q"), "u64": (8, False, "Q"),
    "s32": (4, True, "i"), "u32": (4, False, "I"),
    "int": (4, True, "i"), "unsigned int": (4, False, "I"),
    "s16": (2, True, "h"), "u16": (2, False, "H"),
    "short": (2, True, "h"), "unsigned short": (2, False, "H"),
    "s8": (1, True, "b"), "u8": (1, False, "B"),
    "char": (1, True, "b"), "unsigned char": (1, False, "B"),
}
_ARRAY = re.compile(r"^(char|unsigned char)\[(\d+)\]$")
_DYN_PREFIXES = ("__rel_loc ", "__data_loc ")


# ------------------------------------------------------------------------------ fields
@dataclasses.dataclass(frozen=True)
class Field:
    """One field of a user event, as the kernel lays it out.

    ``offset`` counts from the start of the payload (what :meth:`UserEvent.emit` writes after
    the write index); in the trace record the kernel builds, the field sits at
    ``TRACE_ENTRY_SIZE + offset`` (after ``struct trace_entry``).
    """

    type: str  # kernel spelling: "u32", "char[16]", "__rel_loc char[]", "struct point"
    name: str
    size: int  # bytes in the fixed part (4 for dynamic fields)
    offset: int = 0

    @property
    def dynamic(self) -> str:
        """"rel_loc", "data_loc", or "" for a fixed field."""
        for prefix in _DYN_PREFIXES:
            if self.type.startswith(prefix):
                return prefix.strip()[2:]
        return ""

    @property
    def is_string(self) -> bool:
        """(signed) char arrays, fixed or dynamic: str in Python."""
        base = self.type.split(" ", 1)[1] if self.dynamic else self.type
        return base.startswith("char[") or (bool(self.dynamic) and base == "char")

    @property
    def needs_nul(self) -> bool:
        """Dynamic data the kernel drops unless its last byte is NUL: any dynamic type whose
        name contains "char" (user_event_add_field(): VALIDATOR_ENSURE_NULL)."""
        return bool(self.dynamic) and "char" in self.type

    @property
    def is_struct(self) -> bool:
        return self.type.startswith("struct ")

    @property
    def signed(self) -> bool:
        return _BASIC.get(self.type, (0, False, ""))[1]

    @property
    def decl(self) -> str:
        """The field as the registration command spells it (``struct`` fields carry a size)."""
        text = f"{self.type} {self.name}"
        return f"{text} {self.size}" if self.is_struct else text

    @property
    def code(self) -> str:
        """struct module code of the fixed part."""
        if self.dynamic:
            return "I"
        if self.type in _BASIC:
            return _BASIC[self.type][2]
        return f"{self.size}s"


def _parse_field(text: str, offset: int, where: str) -> Field:
    """``type name [size]`` as user_event_parse_field() reads it."""
    words = text.split()
    if not words:
        raise ParseError(f"{where}: empty field")
    # Types with a space: "unsigned X", "struct X", "__data_loc [unsigned ]X", "__rel_loc ..."
    head = 1
    if words[0] in ("__rel_loc", "__data_loc"):
        head = 3 if len(words) > 1 and words[1] == "unsigned" else 2
    elif words[0] in ("unsigned", "struct"):
        head = 2
    if len(words) < head + 1:
        raise ParseError(f"{where}: field {text.strip()!r} needs a type and a name")
    ftype, name, rest = " ".join(words[:head]), words[head], words[head + 1:]
    if not _IDENT.match(name):
        raise ParseError(f"{where}: field name {name!r} must match [A-Za-z_][A-Za-z0-9_]*")
    if ftype.startswith("struct "):
        if len(rest) != 1 or not rest[0].isdigit() or int(rest[0]) == 0:
            raise ParseError(f"{where}: {ftype} {name} needs its size in bytes: '{ftype} {name} SIZE'")
        return Field(ftype, name, int(rest[0]), offset)
    if rest:
        raise ParseError(f"{where}: unexpected {' '.join(rest)!r} after field {ftype} {name} (only struct fields take a size)")
    if ftype.startswith(_DYN_PREFIXES):
        inner = ftype.split(" ", 1)[1]
        if not inner:
            raise ParseError(f"{where}: {ftype!r} needs an element type")
        return Field(ftype, name, 4, offset)
    if ftype in _BASIC:
        return Field(ftype, name, _BASIC[ftype][0], offset)
    m = _ARRAY.match(ftype)
    if m:
        size = int(m[2])
        if not 0 < size <= MAX_FIELD_ARRAY_SIZE:
            raise ParseError(f"{where}: {ftype} {name}: array size must be 1..{MAX_FIELD_ARRAY_SIZE}")
        return Field(ftype, name, size, offset)
    if ftype in ("long", "unsigned long"):
        raise ParseError(f"{where}: {ftype} is refused by the kernel (its size differs between user and kernel space): use s64/u64")
    raise ParseError(
        f"{where}: unknown field type {ftype!r}: the kernel knows s8..s64, u8..u64, int, short, char "
        f"(and unsigned ones), char[N], unsigned char[N], 'struct NAME name SIZE', __rel_loc/__data_loc TYPE"
    )


# ------------------------------------------------------------------------------ formats
class FieldType:
    """An annotation naming the kernel type of a dataclass field or parameter:
    ``count: Annotated[int, FieldType("u32")]`` (or the aliases :data:`U32`, :func:`Char` ...)."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return f"FieldType({self.name!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, FieldType) and other.name == self.name

    def __hash__(self) -> int:
        return hash(self.name)


U8 = typing.Annotated[int, FieldType("u8")]
U16 = typing.Annotated[int, FieldType("u16")]
U32 = typing.Annotated[int, FieldType("u32")]
U64 = typing.Annotated[int, FieldType("u64")]
S8 = typing.Annotated[int, FieldType("s8")]
S16 = typing.Annotated[int, FieldType("s16")]
S32 = typing.Annotated[int, FieldType("s32")]
S64 = typing.Annotated[int, FieldType("s64")]
String = typing.Annotated[str, FieldType("__rel_loc char[]")]
# u8[], not unsigned char[]: the kernel wants a NUL at the end of any dynamic "char" type.
Blob = typing.Annotated[bytes, FieldType("__rel_loc u8[]")]


def Char(size: int) -> Any:
    """``char[size]``: a str (UTF-8) or bytes of at most ``size`` bytes, NUL-padded."""
    return typing.Annotated[str, FieldType(f"char[{size}]")]


def Bytes(size: int) -> Any:
    """``unsigned char[size]``: bytes of at most ``size``, zero-padded."""
    return typing.Annotated[bytes, FieldType(f"unsigned char[{size}]")]


# Plain Python annotations: the widest honest kernel type.
_PY_TYPES = {int: "s64", bool: "u8", str: "__rel_loc char[]", bytes: "__rel_loc u8[]"}


def _kernel_type(annotation: Any, where: str) -> str:
    if isinstance(annotation, str):
        text = annotation.strip()
        if text in _BASIC or _ARRAY.match(text) or text.startswith(_DYN_PREFIXES):
            return text
        raise ParseError(f"{where}: cannot resolve the annotation {annotation!r} to a kernel type")
    if typing.get_origin(annotation) is typing.Annotated:
        for meta in annotation.__metadata__:
            if isinstance(meta, FieldType):
                return meta.name
        annotation = typing.get_args(annotation)[0]
    if isinstance(annotation, FieldType):
        return annotation.name
    if annotation in _PY_TYPES:
        return _PY_TYPES[annotation]
    raise ParseError(f"{where}: no kernel type for annotation {annotation!r}: use U32, Char(16), String ... or int/bool/str/bytes")

