# SPDX-License-Identifier: Apache-2.0
"""Records a program sends, typed by a struct: decoded whole or cut short, char arrays as
text, as NUL-separated strings or as bytes.

libbpf-tools' execsnoop sends ``struct event`` only up to the bytes its ``char args[]`` uses
(``offsetof(args) + args_size``: 57 of 7,720 bytes for ``/bin/true a``), its arguments one after
another, each NUL-terminated. :class:`RecordDecoder` decodes such a record through the struct's
:mod:`bpfkit.btf.values` codec:

* A record shorter than the struct holds the fields before its end: a field that starts at or
  after the end is ``None``; an array the end cuts holds the elements the record has (a char
  array: the bytes it has); a scalar the end cuts is ``None``. Bytes after the struct (perf
  pads raw samples to 8 bytes) are ignored.
* ``char_arrays`` says how char arrays read: ``"text"`` (the codec's: the text up to the first
  NUL, bytes when that is not printable), ``"strings"`` (every NUL-terminated string the array
  holds, NUL padding at its end dropped: argv as a list) or ``"bytes"`` (the bytes the record
  holds); one mode for all, or ``{"args": "strings"}`` by field name (``fname.pathes`` for a
  nested one, or its last name), the others text (or the mode of key ``""``).
"""

from __future__ import annotations

from collections.abc import Mapping

from ..errors import UsageError
from .spec import BTF
from .types import Array, Int, IntEncoding, Struct, Union
from .values import StructValue, value_codec

__all__ = ["CHAR_MODES", "CharArrays", "RecordDecoder", "char_modes", "char_value", "mode_of", "is_char_array", "split_strings"]

CHAR_MODES = ("text", "strings", "bytes")
CharArrays = str | Mapping[str, str]


def char_modes(char_arrays: CharArrays | None) -> tuple[str, dict[str, str]]:
    """(the default mode, modes by field name) of a ``char_arrays`` argument, checked."""
    if char_arrays is None:
        return "text", {}
    if isinstance(char_arrays, str):
        by_name: dict[str, str] = {}
        default = char_arrays
    else:
        by_name = dict(char_arrays)
        default = by_name.pop("", "text")  # "": the mode of the fields not named
    for field, mode in [("", default), *by_name.items()]:
        if mode not in CHAR_MODES:
            where = f" for {field!r}" if field else ""
            raise UsageError(f"char array mode {mode!r}{where}: choose {', '.join(CHAR_MODES)}")
    return default, by_name


def mode_of(dotted: str, default: str, by_name: Mapping[str, str]) -> str:
    """The mode of field ``dotted`` (``fname.pathes``, or by its last name ``pathes``)."""
    return by_name.get(dotted) or by_name.get(dotted.rsplit(".", 1)[-1]) or default


def split_strings(raw: bytes) -> list[str]:
    """Every NUL-terminated string in ``raw`` (the last may lack its NUL), the NUL padding at
    the end dropped: ``b"ls\\0-l\\0\\0\\0"`` -> ``["ls", "-l"]``."""
    body = raw.rstrip(b"\0")
    return [s.decode(errors="replace") for s in body.split(b"\0")] if body else []


def char_value(raw: bytes, mode: str) -> object:
    """A char array's bytes in ``mode``: text (up to the first NUL, bytes when that is not
    printable UTF-8), a list of strings, or the bytes."""
    if mode == "strings":
        return split_strings(raw)
    if mode == "bytes":
        return raw
    text = raw.split(b"\0", 1)[0]
    try:
        s = text.decode()
    except UnicodeDecodeError:
        return raw
    return s if s.isprintable() else raw


def is_char_array(btf: BTF, t: object) -> bool:
    """``t`` is an array of 1-byte chars (``char``, ``signed char``, ``unsigned char``)."""
    if not isinstance(t, Array):
        return False
    elem = btf.resolve(t.type)
    return isinstance(elem, Int) and elem.size == 1 and not elem.encoding & IntEncoding.BOOL and bool(
        elem.encoding & IntEncoding.CHAR or elem.name in ("char", "unsigned char", "signed char"))


# (attribute path, first byte, end byte, kind): kind "char", "array" (element size), "struct",
# or "scalar".
_Field = tuple[tuple[str, ...], int, int, str, int]


def _fields(btf: BTF, t: Struct, base: int, path: tuple[str, ...], out: list[_Field], depth: int = 0) -> None:
    if depth > 32:
        return
    for m in t.members:
        mt = btf.resolve(m.type)
        start = base + m.bit_offset // 8
        if not m.name:
            if isinstance(mt, Struct) and not isinstance(mt, Union):
                _fields(btf, mt, start, path, out, depth + 1)  # flattened, as the codec names them
            continue
        size = btf.size_of(m.type) if not m.bitfield_size else (m.bit_offset % 8 + m.bitfield_size + 7) // 8
        here = (*path, m.name)
        if is_char_array(btf, mt):
            out.append((here, start, start + size, "char", 1))
        elif isinstance(mt, Array):
            out.append((here, start, start + size, "array", btf.size_of(mt.type)))
        elif isinstance(mt, Struct) and not isinstance(mt, Union):
            out.append((here, start, start + size, "struct", 0))
            _fields(btf, mt, start, here, out, depth + 1)
        else:
            out.append((here, start, start + size, "scalar", 0))


class RecordDecoder:
    """Decodes records laid out as the struct ``struct`` of ``btf`` (whole or cut short) into
    :class:`~bpfkit.btf.values.StructValue` records: ``RecordDecoder(btf, t).decode(raw)``.
    ``records``: classes to decode structs into, by name (a skeleton's RECORDS)."""

    def __init__(self, btf: BTF, struct: Struct, *, char_arrays: CharArrays | None = None,
                 records: Mapping[str, type[StructValue]] | None = None) -> None:
        self.btf = btf
        self.struct = struct
        self.codec = value_codec(btf, struct.id, records=records)
        self.size = self.codec.size
        self.default_mode, self.modes = char_modes(char_arrays)
        self._fields: list[_Field] = []
        _fields(btf, struct, 0, (), self._fields)
        self._chars = [(f, mode_of(".".join(f[0]), self.default_mode, self.modes)) for f in self._fields if f[3] == "char"]
        self._chars = [(f, mode) for f, mode in self._chars if mode != "text"]


    def decode(self, data: bytes | bytearray | memoryview) -> StructValue:
        """``data`` (a record as sent: as long as the struct, longer, or cut short) decoded."""
        n = len(data)
        whole = n >= self.size
        rec = self.codec.decode(data if whole else bytes(data) + bytes(self.size - n))
        assert isinstance(rec, StructValue)
        if not whole:
            self._cut(rec, n)
        for (path, start, end, _, _), mode in self._chars:
            parent = _parent(rec, path)
            if parent is not None and getattr(parent, path[-1], None) is not None:
                setattr(parent, path[-1], char_value(bytes(data[start:min(end, n)]), mode))
        return rec

    def _cut(self, rec: StructValue, n: int) -> None:
        for path, start, end, kind, esize in self._fields:
            if end <= n:
                continue
            parent = _parent(rec, path)
            if parent is None:
                continue
            if start >= n or kind == "scalar":
                setattr(parent, path[-1], None)
            elif kind == "array":
                held = getattr(parent, path[-1])
                if isinstance(held, list) and esize:
                    setattr(parent, path[-1], held[: (n - start) // esize])
            # "char": the zero-padded decode already reads the bytes held; "struct": its fields follow

    def __repr__(self) -> str:
        return f"<RecordDecoder {self.codec.type_name} ({self.size} bytes)>"


def _parent(rec: StructValue, path: tuple[str, ...]) -> StructValue | None:
    obj: object = rec
    for name in path[:-1]:
        obj = getattr(obj, name, None)
        if not isinstance(obj, StructValue):
            return None
    return obj if isinstance(obj, StructValue) else None
