# SPDX-License-Identifier: Apache-2.0
"""BTF blobs: parse the kernel's binary format into types, look types up, marshal them back.

Layout (include/uapi/linux/btf.h): a 24-byte ``struct btf_header``, then the type section (a
sequence of ``struct btf_type`` each followed by kind-specific data) and the string section
(NUL-separated names, offset 0 is ""). Type id 0 is ``void``; ids count from 1 in section
order. Split BTF (kernel modules) continues the id and string-offset space of a base BTF.

Two ways to parse. ``BTF.from_bytes(blob)`` builds every type at once and checks every name
offset and reference up front (object files: small, and malformed input must fail up front);
the types sharing an info word are built together, one map over their columns, and the lists
of members, params and enum values are decoded the first time they are read (checked before:
see :func:`_build_all`). ``lazy=True`` (kernel
BTF: vmlinux has ~130k types) only walks the type section once to find where each type starts,
noting as it goes where the types of named kinds (struct, union, enum, typedef, int, ...:
what CO-RE roots are, about a sixth of vmlinux) start, then decodes a type the first time it
is asked for. Lookups by name search the string section for the name's offset and then an
array of name offsets (of those named kinds when the lookup is for one of them, else of every
type; built once), both at C speed; :meth:`BTF.find_flavors_many` searches the strings once
for all the names a CO-RE load needs. A lazy parse of vmlinux takes about 1.3x libbpf's
``btf__parse`` and the vmlinux side of a CO-RE load about 1.8x (benchmarks/bench_btf.py); a
CO-RE load decodes only a few hundred types.
"""

from __future__ import annotations

import array
import bisect
import collections
import functools
import gc
import itertools
import operator
import re
import struct
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence

from ..errors import NotFoundError, ParseError
from .types import (
    QUALIFIER_KINDS,
    Array,
    Const,
    Datasec,
    DeclTag,
    Enum,
    Enum64,
    EnumValue,
    Float,
    Func,
    FuncProto,
    Fwd,
    Int,
    IntEncoding,
    Kind,
    Linkage,
    Member,
    Param,
    Pointer,
    Restrict,
    Struct,
    Type,
    Typedef,
    TypeTag,
    Union,
    Var,
    VarLinkage,
    VarSecinfo,
    Void,
    Volatile,
)

# typing costs ~2 ms to import (the `bpfkit load` start-up): its names are for the type checker
# only; cast and overload come from bpfkit._no_typing at run time.
TYPE_CHECKING = False
if not TYPE_CHECKING:  # first: the type checker (and ruff) then take typing's for these names
    from .._no_typing import cast, overload
if TYPE_CHECKING:
    from typing import Any, TypeAlias, cast, overload

__all__ = ["BTF", "StringTable", "TypeTable", "BTF_MAGIC", "scan_type_id", "essential_name"]

BTF_MAGIC = 0xEB9F
_HEADER = struct.Struct("<HBBIIIII")
_TYPE = struct.Struct("<III")
_U32 = struct.Struct("<I")
_I32 = struct.Struct("<i")
_U32x2 = struct.Struct("<II")
_U32x3 = struct.Struct("<III")
_U32_BE = struct.Struct(">I")
_MAX_RESOLVE_DEPTH = 32

# Words (u32) that follow the 3-word struct btf_type, per kind: fixed, and per vlen entry.
# Indexed by the info word's top byte (kind plus the kind_flag bit), so the scan needs no mask.
_FIXED_WORDS: dict[int, int] = {Kind.INT: 1, Kind.ARRAY: 3, Kind.VAR: 1, Kind.DECL_TAG: 1}
_VLEN_WORDS: dict[int, int] = {Kind.STRUCT: 3, Kind.UNION: 3, Kind.ENUM: 2, Kind.FUNC_PROTO: 2, Kind.DATASEC: 3, Kind.ENUM64: 3}
_STEP = [-1] * 256
_PER = [0] * 256
_KNOWN_KINDS = range(1, max(Kind) + 1)  # once: max() of an enum walks its members (~0.5 ms a time)
for _top in range(256):
    if _top & 0x1F in _KNOWN_KINDS:  # plain ints look up the Kind keys (IntEnum hashes as int)
        _STEP[_top] = 3 + _FIXED_WORDS.get(_top & 0x1F, 0)
        _PER[_top] = _VLEN_WORDS.get(_top & 0x1F, 0)

# Kinds a lazy parse indexes by name as it scans: those CO-RE roots and lookups by kind are
# (named types), leaving out the ~100k FUNC, FUNC_PROTO and PTR types of vmlinux (about 19k of
# its 127k types are of these kinds). Lookups of other kinds use the index of every type.
_INDEXED_KINDS = frozenset({Kind.INT, Kind.STRUCT, Kind.UNION, Kind.ENUM, Kind.FWD, Kind.TYPEDEF, Kind.FLOAT,
                            Kind.ENUM64})

# The type section as u32 words: a memoryview of the blob when it is bytes (no copy), else an
# array. (array.array is subscriptable at run time only from Python 3.12: pdoc evaluates
# annotations.)
if TYPE_CHECKING:
    import mmap

    _Words: TypeAlias = "array.array[int] | memoryview"  # a string: pdoc runs this block
else:
    _Words = array.array | memoryview


def _big_endian(values: Iterable[int]) -> bytes:
    """u32 values as big-endian bytes."""
    out = array.array("I", values)
    if sys.byteorder == "little":
        out.byteswap()
    return out.tobytes()


_STRING = re.compile("[^\0]*")
_match_group = cast("Callable[[re.Match[str] | None], str]", re.Match.group)  # matches: [^\0]* always does
_decode_name = functools.partial(bytes.decode, encoding="utf-8", errors="replace")


def essential_name(name: str) -> str:
    """``name`` without a CO-RE flavor suffix: ``task_struct___old`` -> ``task_struct``
    (libbpf's rule: the last ``___`` with a non-underscore on both sides starts the flavor)."""
    if "___" not in name:
        return name
    for i in range(len(name) - 5, -1, -1):
        if name[i] != "_" and name[i + 1 : i + 4] == "___" and name[i + 4] != "_":
            return name[: i + 1]
    return name


class StringTable:
    """BTF's string section. Offsets of existing strings never change (line info and
    .BTF.ext refer to them); :meth:`add` appends new strings.

    The section is read in place until the first add(): ``data`` is the section, or with
    ``window`` (start, end) a larger buffer the section is that slice of (a whole BTF blob:
    bytes, or the kernel's read-only mapping of vmlinux BTF, whose 2.3 MB of strings cost
    ~0.75 ms to copy, mostly page faults)."""

    def __init__(self, data: bytes | bytearray | memoryview | mmap.mmap = b"\0", base: StringTable | None = None,
                 window: tuple[int, int] | None = None) -> None:
        lo, hi = window if window is not None else (0, len(data))
        if hi <= lo:
            data, lo, hi = b"\0", 0, 1
        if data[hi - 1 : hi] != b"\0":
            raise ParseError("BTF string section is not NUL-terminated")
        if base is None and data[lo : lo + 1] != b"\0":
            raise ParseError("BTF string section does not start with the empty string")
        self.base = base
        self._start = len(base) if base is not None else 0
        # In place until the first add(): vmlinux's 2 MB are then never copied. _lo and _hi
        # bound the section in _data (local offset x is at _data[_lo + x]). A window of a
        # read-only buffer is the caller's word that nothing will change it (BTF.from_bytes);
        # a bytearray (which add() would extend) or a memoryview (no find()) is copied.
        if not isinstance(data, bytes) and (window is None or isinstance(data, (bytearray, memoryview))):
            data, lo, hi = bytes(data[lo:hi]), 0, hi - lo
        self._data: bytes | bytearray | mmap.mmap = data
        self._lo, self._hi = lo, hi
        self._index: dict[str, int] | None = None

    def __len__(self) -> int:
        return self._start + self._hi - self._lo

    def _bytes(self) -> bytes:
        """The section as bytes (a copy unless it is the whole of a bytes object)."""
        data = self._data
        if isinstance(data, bytes) and self._lo == 0 and self._hi == len(data):
            return data
        return bytes(data[self._lo : self._hi])

    def offsets(self) -> dict[int, str]:
        """{offset: string} for every string that starts after a NUL (what names point at)."""
        pieces = self._bytes().split(b"\0")
        starts = itertools.accumulate(map((1).__add__, map(len, pieces)), initial=self._start)
        return dict(zip(starts, map(_decode_name, pieces)))

    def get(self, offset: int) -> str:
        if offset < self._start:
            assert self.base is not None
            return self.base.get(offset)
        at = self._lo + offset - self._start
        if at >= self._hi:
            raise ParseError(f"BTF string offset {offset} is past the string section ({len(self)} bytes)")
        end = self._data.find(b"\0", at)  # found: the section ends with a NUL
        return self._data[at:end].decode("utf-8", errors="replace")

    def getter_many(self) -> Callable[[Iterable[int]], Iterator[str]]:
        """A function giving :meth:`get` of each of a run of offsets, which the caller has
        checked are inside the table (as it is now): without a Python call per string when
        the section is ASCII (the kernel's are) and has no base (a regular expression's match
        at each offset, on the section decoded once)."""
        if self.base is None:
            section = self._bytes()
            if section.isascii():
                text = section.decode("ascii")
                return lambda offsets: map(_match_group, map(_STRING.match, itertools.repeat(text), offsets))
        return functools.partial(map, self.get)

    def find(self, text: str, end: int | None = None) -> list[int]:
        """Offsets (in this table, not its base) where a string equal to ``text`` starts (in
        the first ``end`` bytes)."""
        needle = text.encode()
        if not needle:
            return [self._start] if self._data[self._lo : self._lo + 1] == b"\0" else []
        return self._find_all(b"\0" + needle + b"\0", needle + b"\0", end)

    def _find_all(self, pattern: bytes, first: bytes, end: int | None = None) -> list[int]:
        """Offsets of the strings ``pattern`` (``b"\\0" + prefix``) finds (in the section's
        first ``end`` bytes), and of the first string when it starts with ``first`` in split
        BTF (a base's offset 0 is "")."""
        data, lo = self._data, self._lo
        stop = self._hi if end is None else min(lo + end, self._hi)
        found = [self._start] if self._start and data[lo : lo + len(first)] == first else []
        shift = self._start + 1 - lo
        at = data.find(pattern, lo, stop)
        while at >= 0:
            found.append(at + shift)
            at = data.find(pattern, at + 1, stop)
        return found

    def _end_after(self, limit: int | None) -> int | None:
        """How many bytes of this table hold every string that starts at or before offset
        ``limit`` (-1: none does; None: no limit)."""
        if limit is None:
            return None
        local = limit - self._start
        if local < 0:
            return -1
        size = self._hi - self._lo
        at = self._data.find(b"\0", self._lo + min(local, size - 1), self._hi)
        return size if at < 0 else at + 1 - self._lo

    def find_flavors(self, essential: str) -> list[int]:
        """Offsets of strings whose :func:`essential_name` is ``essential`` (the name itself
        and ``essential___flavor`` spellings)."""
        return self.find_flavors_many([essential])[essential]

    def find_flavors_many(self, essentials: Iterable[str], limit: int | None = None) -> dict[str, list[int]]:
        """:meth:`find_flavors` for several names in one pass over the section (over the
        strings that start at or before offset ``limit`` when given). A name that has a
        flavor itself (``task_struct___o``) is not its own essential name: it finds only
        longer names that have it as theirs (``task_struct___o___x``), as a full parse's
        index of essential names does."""
        wanted = {text.encode(): text for text in essentials}
        found: dict[str, list[int]] = {text: [] for text in wanted.values()}
        end = self._end_after(limit)
        if end == -1:
            return found
        if len(wanted) < 3 and b"" not in wanted:
            # A few names: bytes.find of "\0name\0" and "\0name___" (C speed, and the needles
            # are selective), which beats walking every string with a regular expression.
            for raw, text in wanted.items():
                itself = self.find(text, end) if essential_name(text) == text else []
                found[text] = sorted(itself + [
                    at for at in self._find_all(b"\0" + raw + b"___", raw + b"___", end) if essential_name(self.get(at)) == text])
            return found
        for at, raw in self._starts_of(wanted, end):
            exact = wanted.get(raw)
            if exact is not None and essential_name(exact) == exact:
                found[exact].append(at)
            if b"___" in raw:  # "name___flavor" (a valid flavor) counts for "name" too
                text = essential_name(raw.decode("utf-8", errors="replace"))
                if text != exact and text in found:
                    found[text].append(at)
        return found

    def _starts_of(self, needles: Iterable[bytes], end: int | None = None) -> Iterator[tuple[int, bytes]]:
        """(offset, string) for every string equal to one of ``needles`` or starting with one
        followed by ``___``, ascending, in one pass (a regular expression of the alternatives:
        one C-speed walk instead of one per name). The first string counts only in split BTF
        (offset 0 of a base table is the empty name)."""
        alts = b"|".join(re.escape(n) for n in sorted(needles, key=len, reverse=True))
        body = b"(?:" + alts + rb")(?:___[^\0]*)?"
        data, lo = self._data, self._lo
        if self._start:
            first = re.compile(b"(" + body + rb")\0").match(data, lo, self._hi)
            if first is not None:
                yield self._start, first.group(1)
        stop = self._hi if end is None else min(lo + end, self._hi)
        for m in re.compile(rb"\0(" + body + rb")(?=\0)").finditer(data, lo, stop):
            yield self._start + m.start(1) - lo, m.group(1)

    def _lookup(self, text: str) -> int | None:
        if self._index is None:
            index: dict[str, int] = {}
            pos = self._start
            for piece in self._bytes().split(b"\0"):
                index.setdefault(piece.decode("utf-8", errors="replace"), pos)
                pos += len(piece) + 1
            self._index = index
        return self._index.get(text)

    def add(self, text: str) -> int:
        """The offset of ``text``, appending it when it is not there yet."""
        if not text:
            return 0
        if self.base is not None:
            found = self.base._lookup(text)
            if found is not None:
                return found
        found = self._lookup(text)
        if found is not None:
            return found
        offset = len(self)
        if not isinstance(self._data, bytearray):
            self._data = bytearray(self._bytes())
            self._lo = 0
        self._data += text.encode() + b"\0"
        self._hi = len(self._data)
        assert self._index is not None
        self._index[text] = offset
        return offset

    def to_bytes(self) -> bytes:
        return self._bytes()


class _Names(dict[int, str]):
    """{name offset: name} for a full parse: every string that starts after a NUL, and
    (added when asked) offsets into the middle of one."""

    def __init__(self, strings: StringTable) -> None:
        super().__init__(strings.offsets())
        self._strings = strings

    def __missing__(self, off: int) -> str:
        text = self[off] = self._strings.get(off)
        return text


class TypeTable:
    """Types by id: a base BTF's types followed by this BTF's own, the own ones decoded on
    first access when parsed lazily. Supports what code does with a list of types: ``len``,
    indexing, slicing, iteration and ``append``."""

    __slots__ = ("_base", "_start", "_items", "_decode")

    def __init__(self, base: TypeTable | list[Type] | None, items: list[Type | None],
                 decode: Callable[[int], Type] | None = None) -> None:
        self._base = base
        self._start = len(base) if base is not None else 0
        self._items = items
        self._decode = decode

    def __len__(self) -> int:
        return self._start + len(self._items)

    @overload
    def __getitem__(self, index: int) -> Type: ...
    @overload
    def __getitem__(self, index: slice) -> list[Type]: ...

    def __getitem__(self, index: int | slice) -> Type | list[Type]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        if index < 0:
            index += len(self)
        if index < self._start:
            if index < 0:
                raise IndexError(index)
            assert self._base is not None  # _start > 0 only with a base
            return self._base[index]
        local = index - self._start
        t = self._items[local]
        if t is None:
            assert self._decode is not None
            t = self._items[local] = self._decode(local)
        return t

    def __setitem__(self, index: int, t: Type) -> None:
        """Replace one of this BTF's own types (a base's types are not this table's to change)."""
        if index < 0:
            index += len(self)
        if not self._start <= index < len(self):
            raise IndexError(f"type id {index} is not one of this BTF's own ({self._start}..{len(self) - 1})")
        self._items[index - self._start] = t

    def __iter__(self) -> Iterator[Type]:
        for i in range(len(self)):
            yield self[i]

    def append(self, t: Type) -> None:
        self._items.append(t)

    def own(self) -> list[Type]:
        """This BTF's own types (decoding any not decoded yet)."""
        return self[self._start :]


class BTF:
    """A set of BTF types and their strings.

    ``types[i]`` is the type with id ``i`` (``types[0]`` is void). For split BTF the table
    starts with the base's types, and only the types from ``first_id`` on belong to this blob.
    ``name`` is free text for messages (``vmlinux``, a module's name, a file).
    """

    def __init__(self, types: TypeTable | list[Type] | None = None, strings: StringTable | None = None,
                 base: BTF | None = None, name: str = "") -> None:
        self.base = base
        self.name = name
        self.strings: StringTable = strings or StringTable(base=base.strings if base else None)
        self.first_id = len(base.types) if base is not None else 1
        if types is None:
            types = TypeTable(base.types, []) if base is not None else [Void(0, "")]
        self.types: TypeTable | list[Type] = types
        self._by_name: dict[str, list[Type]] | None = None
        self._by_essential: dict[str, list[Type]] | None = None
        # Lazy parses: the type section as u32 words, where each own type starts in it,
        # and (built on first name lookup) each own type's name offset.
        self._words: _Words | None = None
        self._starts: _Words | None = None
        self._marks: _Words | None = None  # where the types of _INDEXED_KINDS start
        # Name offsets as big-endian u32 bytes (a needle's last byte is then the offset's
        # low byte, which bytes.find skips on well), of every own type and of the marked ones.
        self._name_offs: bytes | None = None
        self._marked_name_offs: bytes | None = None
        self._marked_max = 0
        self._search_names = False  # look names up by scanning (a lazy parse nobody added to)

    # ------------------------------------------------------------------------- parsing
    @classmethod
    def from_bytes(cls, data: bytes | memoryview | mmap.mmap, base: BTF | None = None, *, lazy: bool = False,
                   name: str = "", unchanging: bool = False) -> BTF:
        """Parse a .BTF section or /sys/kernel/btf/* blob (``base`` for module BTF).

        ``lazy``: find the types now, decode each on first use (for large kernel BTF; a
        malformed type is then reported when it is first used, not here).

        ``bytes`` are read in place; other buffers are copied, unless ``unchanging`` says
        nothing will change them while the BTF lives (the kernel's own BTF mapped from sysfs:
        a mapping of an ordinary file changes when the file does, even a private read-only one)."""
        if len(data) < _HEADER.size:
            raise ParseError(f"BTF is {len(data)} bytes, shorter than its {_HEADER.size}-byte header")
        magic, version, _flags, hdr_len, type_off, type_len, str_off, str_len = _HEADER.unpack_from(data)
        if magic != BTF_MAGIC:
            if magic == 0x9FEB:
                raise ParseError("BTF is big-endian: bpfkit reads little-endian BTF")
            raise ParseError(f"bad BTF magic {magic:#06x} (expected {BTF_MAGIC:#06x})")
        if version != 1:
            raise ParseError(f"BTF version {version} is not supported (only 1)")
        if hdr_len < _HEADER.size or hdr_len > len(data):
            raise ParseError(f"BTF header length {hdr_len} is invalid")
        body = len(data) - hdr_len
        if type_off + type_len > body or str_off + str_len > body:
            raise ParseError(
                f"BTF sections (types {type_off}+{type_len}, strings {str_off}+{str_len}) run past the end ({body} bytes)"
            )
        if type_len % 4:
            raise ParseError(f"BTF type section is {type_len} bytes, not a whole number of 4-byte words")
        view = memoryview(data)  # slices without copies
        in_place = unchanging or isinstance(data, bytes)  # else the caller's buffer may change: copied
        strings_at = (hdr_len + str_off, hdr_len + str_off + str_len)
        strings = StringTable(data if in_place else bytes(view[strings_at[0] : strings_at[1]]),
                              base.strings if base is not None else None, window=strings_at if in_place else None)
        btf = cls(strings=strings, base=base, name=name)
        types_raw = view[hdr_len + type_off : hdr_len + type_off + type_len]
        words: _Words
        if in_place and sys.byteorder == "little":
            # Read in place (nothing can change under the view): no copy of vmlinux's 6.8 MB,
            # and indexing a memoryview is faster than an array's (the scan: 9.7 vs 12.1 ms).
            words = types_raw.cast("I")
        else:  # a caller's buffer, which may change or be resized later: copied
            words = array.array("I")
            words.frombytes(types_raw)
            if sys.byteorder == "big":  # pragma: no cover - bpfkit runs on little-endian hosts
                words.byteswap()
        btf._parse(words, lazy)
        return btf

    def _parse(self, words: _Words, lazy: bool) -> None:
        if lazy:
            starts, marks = _scan(words, self.first_id)
            self._words, self._starts, self._marks = words, starts, marks
            self.types = TypeTable(self.base.types if self.base is not None else [Void(0, "")],
                                   [None] * len(starts), self._decode_own)
            self._search_names = True
            return
        first = self.first_id
        count, groups = _scan_groups(words, first)
        # The ~130k objects of a kernel's types would set off the cyclic GC every few hundred
        # allocations, each pass walking everything built so far; none of them can be garbage
        # yet, so it waits until they are built.
        paused = gc.isenabled()
        gc.disable()
        try:
            by_id = _build_all(words, count, groups, first, self.strings)
            own = by_id[first:] if by_id is not None else _decode_all(words, _scan(words, first)[0], first, self.strings)
        finally:
            if paused:
                gc.enable()
        if self.base is not None:
            self.types = TypeTable(self.base.types, cast("list[Type | None]", own))
        elif by_id is not None:
            self.types = by_id  # its [0] is void
        else:
            self.types = [Void(0, ""), *own]

    def _decode_own(self, local: int) -> Type:
        assert self._words is not None and self._starts is not None
        count = len(self.types)
        return _decode(self._words, self._starts[local], self.first_id + local, self.strings.get, count)

    # ------------------------------------------------------------------------- marshal
    def to_bytes(self) -> bytes:
        """The kernel's binary format of this BTF (only the split part for split BTF)."""
        add = self.strings.add
        out = bytearray()
        pack_type, pack1, pack2, pack3 = _TYPE.pack, _U32.pack, _U32x2.pack, _U32x3.pack
        for t in self.types[self.first_id:]:
            kind = t.kind
            name_off = add(t.name)
            if isinstance(t, (Struct, Enum, FuncProto)) and (raw := _undecoded_list(t, self.strings)) is not None:
                # a list nobody read: its entries as parsed, behind a header from the type
                flag = t.kind_flag if isinstance(t, Struct) else t.signed if isinstance(t, Enum) else False
                third = t.return_type if isinstance(t, FuncProto) else t.size
                out += pack_type(name_off, (flag << 31) | (kind << 24) | raw[0], third) + raw[1]
            elif isinstance(t, Int):
                out += pack_type(name_off, kind << 24, t.size)
                out += pack1((int(t.encoding) << 24) | (t.bit_offset << 16) | t.bits)
            elif isinstance(t, TypeTag):
                out += pack_type(name_off, (t.kind_flag << 31) | (kind << 24), t.type)
            elif isinstance(t, (Pointer, Typedef, Volatile, Const, Restrict)):
                out += pack_type(name_off, kind << 24, t.type)
            elif isinstance(t, Array):
                out += pack_type(name_off, kind << 24, 0) + pack3(t.type, t.index_type, t.nelems)
            elif isinstance(t, Struct):
                out += pack_type(name_off, (t.kind_flag << 31) | (kind << 24) | len(t.members), t.size)
                for m in t.members:
                    off = (m.bitfield_size << 24) | m.bit_offset if t.kind_flag else m.bit_offset
                    out += pack3(add(m.name), m.type, off)
            elif isinstance(t, Enum64):
                out += pack_type(name_off, (t.signed << 31) | (kind << 24) | len(t.values), t.size)
                for v in t.values:
                    value = v.value & 0xFFFFFFFFFFFFFFFF
                    out += pack3(add(v.name), value & 0xFFFFFFFF, value >> 32)
            elif isinstance(t, Enum):
                out += pack_type(name_off, (t.signed << 31) | (kind << 24) | len(t.values), t.size)
                for v in t.values:
                    out += pack2(add(v.name), v.value & 0xFFFFFFFF)
            elif isinstance(t, Fwd):
                out += pack_type(name_off, (t.union << 31) | (kind << 24), 0)
            elif isinstance(t, Func):
                out += pack_type(name_off, (kind << 24) | int(t.linkage), t.type)
            elif isinstance(t, FuncProto):
                out += pack_type(name_off, (kind << 24) | len(t.params), t.return_type)
                for p in t.params:
                    out += pack2(add(p.name), p.type)
            elif isinstance(t, Var):
                out += pack_type(name_off, kind << 24, t.type) + pack1(int(t.linkage))
            elif isinstance(t, Datasec):
                out += pack_type(name_off, (kind << 24) | len(t.vars), t.size)
                for sv in t.vars:
                    out += pack3(sv.type, sv.offset, sv.size)
            elif isinstance(t, Float):
                out += pack_type(name_off, kind << 24, t.size)
            elif isinstance(t, DeclTag):
                out += pack_type(name_off, (t.kind_flag << 31) | (kind << 24), t.type) + _I32.pack(t.component_idx)
            else:  # pragma: no cover - every kind is handled above
                raise ParseError(f"cannot marshal BTF kind {kind.name}")
        strings = self.strings.to_bytes()
        header = _HEADER.pack(BTF_MAGIC, 1, 0, _HEADER.size, 0, len(out), len(out), len(strings))
        return header + bytes(out) + strings

    # -------------------------------------------------------------------------- lookup
    def __len__(self) -> int:
        return len(self.types)

    def __iter__(self) -> Iterator[Type]:
        return iter(self.types)

    def type_by_id(self, type_id: int) -> Type:
        if not 0 <= type_id < len(self.types):
            raise NotFoundError(f"BTF has no type with id {type_id} ({len(self.types)} types)")
        return self.types[type_id]

    __getitem__ = type_by_id

    @property
    def lazy(self) -> bool:
        """True when types are decoded on first use (see :meth:`from_bytes`)."""
        return self._starts is not None

    def own_ids(self) -> range:
        """The ids of this blob's own types (all but the base's for split BTF; void excluded)."""
        return range(self.first_id, len(self.types))

    def names_of_kind(self, kind: Kind) -> list[str]:
        """The names of this blob's own types of ``kind`` (anonymous ones left out), in id
        order. A lazy parse reads them from the type headers without decoding the types (the
        ~60,000 FUNCs of vmlinux in a few tens of milliseconds)."""
        if self._words is None or self._starts is None:
            return [t.name for t in (self.types[i] for i in self.own_ids()) if t.kind == kind and t.name]
        words, get, want = self._words, self.strings.get, int(kind)
        return [get(words[i]) for i in self._starts if (words[i + 1] >> 24) & 0x1F == want and words[i]]

    def add(self, t: Type) -> int:
        """Append ``t`` (its ``id`` is set) and return the new id."""
        t.id = len(self.types)
        self.types.append(t)
        if self._search_names:
            # Types added after a lazy parse are not in the scanned name offsets: from now on
            # names are looked up in an index of the (decoded) types.
            self._search_names = False
            self._by_name = self._by_essential = None
        if self._by_name is not None and t.name:
            self._by_name.setdefault(t.name, []).append(t)
        if self._by_essential is not None and t.name:
            self._by_essential.setdefault(essential_name(t.name), []).append(t)
        return t.id

    def _ids_with_name_offsets(self, offsets: Iterable[int], kinds: frozenset[Kind] | None = None) -> list[int]:
        """Own type ids whose name_off is one of ``offsets`` (lazy parses only), of ``kinds``
        when given, ascending. The name offsets (of the types the scan marked when ``kinds``
        are all indexed ones, else of every type) are kept as bytes, built once and searched
        with bytes.find (C speed) for each 4-byte value, keeping word-aligned hits."""
        words, starts, marks = self._words, self._starts, self._marks
        assert words is not None and starts is not None and marks is not None
        marked = kinds is not None and kinds <= _INDEXED_KINDS
        if marked:
            self._marked_names_limit()
            assert self._marked_name_offs is not None
            names, where = self._marked_name_offs, marks
        else:
            if self._name_offs is None:
                self._name_offs = _big_endian(map(words.__getitem__, starts))
            names, where = self._name_offs, starts
        pack = _U32_BE.pack
        wanted = {int(k) for k in kinds} if kinds is not None else None
        ids: list[int] = []
        for off in set(offsets):
            if not off:
                continue
            needle = pack(off)
            at = names.find(needle)
            while at >= 0:
                if not at & 3:
                    pos = where[at >> 2]
                    if wanted is None or (words[pos + 1] >> 24) & 0x1F in wanted:
                        ids.append(self.first_id + (bisect.bisect_left(starts, pos) if marked else at >> 2))
                at = names.find(needle, at + 1)
        ids.sort()
        return ids

    def _marked_names_limit(self) -> int:
        """The largest name offset of the types the scan marked (building, once, the bytes of
        their name offsets that :meth:`_ids_with_name_offsets` searches)."""
        if self._marked_name_offs is None:
            assert self._words is not None and self._marks is not None
            marks = self._marks
            # One C call gathers the ~19k name offsets of vmlinux (1.3 -> 0.9 ms against a
            # map of __getitem__); itemgetter returns a bare value for one index.
            offs = operator.itemgetter(*marks)(self._words) if len(marks) > 1 else tuple(map(self._words.__getitem__, marks))
            self._marked_max = max(offs, default=0)
            self._marked_name_offs = _big_endian(offs)
        return self._marked_max

    def _own_named(self, name: str, kind: Kind | None = None) -> list[Type]:
        """Own types called ``name`` (only those of ``kind`` are guaranteed filtered on a
        lazy parse; callers filter again)."""
        if self._search_names:
            offsets = self.strings.find(name)
            if self.base is not None:
                offsets += self.base.strings.find(name)
            kinds = frozenset({kind}) if kind is not None else None
            return [self.types[i] for i in self._ids_with_name_offsets(offsets, kinds)]
        if self._by_name is None:
            index: dict[str, list[Type]] = {}
            for i in self.own_ids():
                t = self.types[i]
                if t.name:
                    index.setdefault(t.name, []).append(t)
            self._by_name = index
        return self._by_name.get(name, [])

    def find(self, name: str, kind: Kind | None = None, *, own_only: bool = False) -> list[Type]:
        """Every type called ``name`` (of ``kind`` when given), in id order; for split BTF the
        base's first, unless ``own_only``."""
        found = list(self._own_named(name, kind))
        if self.base is not None and not own_only:
            found = self.base.find(name, kind) + found
        return [t for t in found if kind is None or t.kind == kind]

    def find_flavors(self, essential: str, *, own_only: bool = True) -> list[Type]:
        """Every own type whose name without its ``___flavor`` suffix is ``essential`` (what
        CO-RE takes as candidates for a local type), in id order."""
        return self.find_flavors_many([essential], own_only=own_only)[essential]

    def find_flavors_many(self, essentials: Iterable[str], *, own_only: bool = True,
                          kinds: Iterable[Kind] | None = None) -> dict[str, list[Type]]:
        """:meth:`find_flavors` for several names at once: a lazy parse searches its string
        section once for all of them (what a CO-RE load does for an object's root types).
        ``kinds``: only types of these kinds (a lazy parse then searches the index of named
        kinds its scan built, a sixth of vmlinux's types, when they are all in it)."""
        wanted = list(dict.fromkeys(essentials))
        only = frozenset(kinds) if kinds is not None else None
        found: dict[str, list[Type]] = {}
        if self._search_names:
            # Only strings up to the largest name offset of the types searched can be theirs
            # (vmlinux: struct/union/enum/... names end half-way through the strings).
            limit = self._marked_names_limit() if only is not None and only <= _INDEXED_KINDS else None
            offsets = self.strings.find_flavors_many(wanted, limit)
            if self.base is not None:
                for text, base_offsets in self.base.strings.find_flavors_many(wanted, limit).items():
                    offsets[text] += base_offsets
            for text in wanted:
                found[text] = [self.types[i] for i in self._ids_with_name_offsets(offsets[text], only)]
        else:
            if self._by_essential is None:
                index: dict[str, list[Type]] = {}
                for i in self.own_ids():
                    t = self.types[i]
                    if t.name:
                        index.setdefault(essential_name(t.name), []).append(t)
                self._by_essential = index
            for text in wanted:
                found[text] = [t for t in self._by_essential.get(text, []) if only is None or t.kind in only]
        if self.base is not None and not own_only:
            for text, from_base in self.base.find_flavors_many(wanted, own_only=False, kinds=only).items():
                found[text] = from_base + found[text]
        return found

    def lookup(self, name: str, kind: Kind | None = None) -> Type:
        """The one type called ``name`` (of ``kind``); NotFoundError when there is none."""
        found = self.find(name, kind)
        if not found:
            what = f"{kind.name} " if kind is not None else ""
            where = f" {self.name}" if self.name else ""
            raise NotFoundError(f"BTF{where} has no {what}type named {name!r}")
        return found[0]

    def resolve(self, type_id: int) -> Type:
        """The type behind typedefs and const/volatile/restrict/type-tag qualifiers."""
        t = self.type_by_id(type_id)
        for _ in range(_MAX_RESOLVE_DEPTH):
            if t.kind not in QUALIFIER_KINDS:
                return t
            t = self.type_by_id(t.type)  # type: ignore[attr-defined]
        raise ParseError(f"BTF type {type_id}: qualifier chain longer than {_MAX_RESOLVE_DEPTH}")

    def resolve_id(self, type_id: int) -> int:
        """The id of :meth:`resolve`'s answer."""
        return self.resolve(type_id).id

    def size_of(self, type_id: int) -> int:
        """sizeof() of a type, following typedefs, qualifiers and arrays."""
        t = self.type_by_id(type_id)
        nelems = 1
        for _ in range(_MAX_RESOLVE_DEPTH):
            if isinstance(t, (Int, Struct, Enum, Datasec, Float)):
                return nelems * t.size
            if isinstance(t, Pointer):
                return nelems * 8
            if isinstance(t, Var):
                t = self.type_by_id(t.type)
            elif isinstance(t, Array):
                nelems *= t.nelems
                t = self.type_by_id(t.type)
            elif t.kind in QUALIFIER_KINDS:
                t = self.type_by_id(t.type)  # type: ignore[attr-defined]
            else:
                raise ParseError(f"BTF type {type_id} ({t.kind.name} {t.name!r}) has no size")
        raise ParseError(f"BTF type {type_id}: type chain longer than {_MAX_RESOLVE_DEPTH}")

    def align_of(self, type_id: int) -> int:
        """Natural alignment of a type (as the compiler laid it out for the BPF target)."""
        t = self.resolve(type_id)
        if isinstance(t, (Int, Enum, Float)):
            return min(t.size, 8) or 1
        if isinstance(t, Pointer):
            return 8
        if isinstance(t, Array):
            return self.align_of(t.type)
        if isinstance(t, Struct):
            return max((self.align_of(m.type) for m in t.members if not m.bitfield_size), default=1)
        return 1

    def type_name(self, type_id: int) -> str:
        """A C-like spelling of a type, for people: ``const volatile __u32``, ``char[4]``."""
        return _c_name(self, type_id, 0)

    def copy(self) -> BTF:
        """An independent copy (types are copied; the base, if any, is shared)."""
        import copy as _copy

        clone = BTF(strings=StringTable(self.strings.to_bytes(), self.strings.base), base=self.base, name=self.name)
        own = [_copy.deepcopy(self.types[i]) for i in self.own_ids()]
        if self.base is not None:
            clone.types = TypeTable(self.base.types, own)  # type: ignore[arg-type]
        else:
            clone.types = [Void(0, ""), *own]
        return clone

    def __repr__(self) -> str:
        label = f" {self.name}" if self.name else ""
        split = f", split from {self.base.name or 'base'}" if self.base is not None else ""
        return f"<BTF{label}: {len(self.types) - self.first_id} types{split}>"


def _scan(words: _Words, first_id: int) -> tuple[array.array[int], array.array[int]]:
    """Where each type starts in the type section (in words), and where those of the kinds in
    :data:`_INDEXED_KINDS` start (what CO-RE looks up by name): one pass over the type headers.
    The step to the next type is looked up by the whole info word (kind, kind_flag, vlen:
    a few hundred distinct values in vmlinux), which halves the work per type; an indexed
    kind's step is stored negated, so telling it apart costs one comparison."""
    starts = array.array("I")
    marks = array.array("I")
    add, mark = starts.append, marks.append
    steps: dict[int, int] = {}
    i, n = 0, len(words)
    # infos[i] is the info word of a type that starts at word i: one addition less per type
    # (8.9 -> 7.8 ms on vmlinux); a view, no copy.
    infos = memoryview(words)[1:]
    while True:
        try:
            while True:  # ends with the IndexError of reading the info word past the end
                add(i)
                step = steps[infos[i]]
                if step < 0:
                    mark(i)
                    step = -step
                i += step
        except KeyError:
            starts.pop()
            info = words[i + 1]
            size = _step_of(info, first_id + len(starts))
            steps[info] = -size if (info >> 24) & 0x1F in _INDEXED_KINDS else size
        except IndexError:
            starts.pop()
            _check_end(i, n, first_id + len(starts))
            return starts, marks


def _scan_groups(words: _Words, first_id: int) -> tuple[int, dict[int, tuple[array.array[int], array.array[int]]]]:
    """:func:`_scan` for a full parse: the number of types, and for each info word (kind,
    kind_flag, vlen: 297 distinct in vmlinux) the ids of the types that have it and where
    they start, so that a full parse builds those together."""
    groups: dict[int, tuple[array.array[int], array.array[int]]] = {}
    steps: dict[int, tuple[int, Callable[[int], None], Callable[[int], None]]] = {}
    i, n, tid = 0, len(words), first_id
    while True:
        try:
            while True:  # ends as _scan's does
                step, put, at = steps[words[i + 1]]
                put(tid)
                at(i)
                tid += 1
                i += step
        except KeyError:
            info = words[i + 1]
            g = groups[info] = (array.array("I"), array.array("I"))
            steps[info] = (_step_of(info, tid), g[0].append, g[1].append)
        except IndexError:
            _check_end(i, n, tid)
            return tid - first_id, groups


def _step_of(info: int, tid: int) -> int:
    """Words from the start of type ``tid`` (info word ``info``) to the next type's."""
    size = _STEP[info >> 24]
    if size < 0:
        raise ParseError(f"BTF type {tid} has unknown kind {(info >> 24) & 0x1F}") from None
    return size + _PER[info >> 24] * (info & 0xFFFF)


def _check_end(i: int, n: int, tid: int) -> None:
    """The scan read past the type section at word ``i`` (of ``n``) looking for type ``tid``:
    fine if that is exactly the end."""
    if i > n:
        raise ParseError(f"BTF type section ends inside a type (type {tid - 1} is truncated)") from None
    if i < n:
        raise ParseError(f"BTF type {tid} (header) is truncated at the end of the type section") from None


_K_INT, _K_PTR, _K_ARRAY, _K_STRUCT, _K_UNION, _K_ENUM, _K_FWD, _K_TYPEDEF = 1, 2, 3, 4, 5, 6, 7, 8
_K_VOLATILE, _K_CONST, _K_RESTRICT, _K_FUNC, _K_FUNC_PROTO, _K_VAR, _K_DATASEC = 9, 10, 11, 12, 13, 14, 15
_K_FLOAT, _K_DECL_TAG, _K_TYPE_TAG, _K_ENUM64 = 16, 17, 18, 19
_LINKAGE = {int(v): v for v in Linkage}
_VAR_LINKAGE = {int(v): v for v in VarLinkage}
_ENCODING = [IntEncoding(i) for i in range(16)]


def _decode(words: _Words, i: int, tid: int, name_of: Callable[[int], str], count: int | None,
            bad: list[str] | None = None) -> Type:
    """The type whose struct btf_type starts at word ``i``; ``count`` checks its references
    against the number of types: a bad one raises ParseError, or with ``bad`` given (a full
    parse, which reports decoding errors first) is put there if ``bad`` is still empty.
    Branches in order of frequency in vmlinux (FUNC, FUNC_PROTO, PTR, STRUCT make up 9 in 10
    types)."""
    name_off, info, size_type = words[i], words[i + 1], words[i + 2]
    vlen = info & 0xFFFF
    kind = (info >> 24) & 0x1F
    kflag = info >= 0x80000000
    name = name_of(name_off) if name_off else ""
    x = i + 3
    t: Type
    if kind == _K_FUNC:
        linkage = _LINKAGE.get(vlen)
        if linkage is None:
            raise ParseError(f"BTF FUNC {name!r} (type {tid}) has unknown linkage {vlen}")
        t = Func(tid, name, size_type, linkage)
    elif kind == _K_FUNC_PROTO:
        t = FuncProto(tid, name, size_type, _params(words, name_of, i))
    elif kind == _K_PTR:
        t = Pointer(tid, name, size_type)
    elif kind in (_K_STRUCT, _K_UNION):
        t = (Struct if kind == _K_STRUCT else Union)(tid, name, size_type, _members(words, name_of, i), kflag)
    elif kind == _K_CONST:
        t = Const(tid, name, size_type)
    elif kind == _K_ARRAY:
        t = Array(tid, name, words[x], words[x + 1], words[x + 2])
    elif kind == _K_TYPEDEF:
        t = Typedef(tid, name, size_type)
    elif kind == _K_ENUM:
        t = Enum(tid, name, size_type, _enum_values(words, name_of, i), kflag)
    elif kind == _K_INT:
        raw = words[x]
        t = Int(tid, name, size_type, _ENCODING[(raw >> 24) & 0xF], (raw >> 16) & 0xFF, raw & 0xFF)
    elif kind == _K_VAR:
        var_linkage = _VAR_LINKAGE.get(words[x])
        if var_linkage is None:
            raise ParseError(f"BTF VAR {name!r} (type {tid}) has unknown linkage {words[x]}")
        t = Var(tid, name, size_type, var_linkage)
    elif kind == _K_DECL_TAG:
        component = words[x]
        t = DeclTag(tid, name, size_type, component - (1 << 32) if component >= 1 << 31 else component, kflag)
    elif kind == _K_FWD:
        t = Fwd(tid, name, kflag)
    elif kind == _K_VOLATILE:
        t = Volatile(tid, name, size_type)
    elif kind == _K_RESTRICT:
        t = Restrict(tid, name, size_type)
    elif kind == _K_ENUM64:
        t = Enum64(tid, name, size_type, _enum64_values(words, name_of, i), kflag)
    elif kind == _K_TYPE_TAG:
        t = TypeTag(tid, name, size_type, kflag)
    elif kind == _K_DATASEC:
        w = words[x : x + 3 * vlen]
        t = Datasec(tid, name, size_type, [VarSecinfo(vt, vo, vs) for vt, vo, vs in zip(w[0::3], w[1::3], w[2::3])])
    elif kind == _K_FLOAT:
        t = Float(tid, name, size_type)
    else:  # pragma: no cover - _scan refuses unknown kinds
        raise ParseError(f"BTF type {tid} has unknown kind {kind}")
    if count is not None and _max_ref(words, kind, x, vlen, size_type) >= count:
        for ref in _references(t):
            if not 0 <= ref < count:
                message = f"BTF type {tid} ({t.kind.name} {t.name!r}) refers to type {ref}, which does not exist"
                if bad is None:
                    raise ParseError(message)
                if not bad:
                    bad.append(message)
                break
    return t


_LIST_SLOTS = {cls: getattr(cls, cls._deferred) for cls in (Struct, Union, Enum, Enum64, FuncProto)}


def _undecoded_list(t: Struct | Enum | FuncProto, strings: StringTable) -> tuple[int, bytes] | None:
    """(vlen, its entries' bytes) of a type whose list (members, values, params) a full parse
    left undecoded (types._Deferred) from a blob with these ``strings``: to_bytes copies the
    entries as they are instead of decoding them to encode them again (~1 ms of a CO-RE
    object's 400 types). Their name offsets still hold, for a string table only grows. None
    when the list was read or set since, or came from another blob."""
    try:
        src = object.__getattribute__(t, "_src")  # not getattr: no __getattr__ fallback
    except AttributeError:
        return None
    slot = _LIST_SLOTS.get(type(t))
    if slot is None:  # a subclass of bpfkit's: encoded from its attributes
        return None
    try:
        slot.__get__(t, type(t))  # the slot itself: no decoding
        return None  # set: the list is the truth now
    except AttributeError:
        pass
    decode, pos = src
    if not (isinstance(decode, functools.partial) and len(decode.args) == 2
            and getattr(decode.args[1], "__self__", None) is strings):
        return None
    words = decode.args[0]
    vlen = words[pos + 1] & 0xFFFF
    per = _VLEN_WORDS[t.kind]
    return vlen, memoryview(words)[pos + 3 : pos + 3 + per * vlen].tobytes()


def _members(words: _Words, name_of: Callable[[int], str], i: int) -> list[Member]:
    """The members of the struct or union whose struct btf_type starts at word ``i``."""
    info = words[i + 1]
    w = words[i + 3 : i + 3 + 3 * (info & 0xFFFF)]
    if info >= 0x80000000:  # kind_flag: bitfield size in the offset's top byte
        return [Member(name_of(mn) if mn else "", mt, mo & 0xFFFFFF, mo >> 24)
                for mn, mt, mo in zip(w[0::3], w[1::3], w[2::3])]
    return [Member(name_of(mn) if mn else "", mt, mo) for mn, mt, mo in zip(w[0::3], w[1::3], w[2::3])]


def _params(words: _Words, name_of: Callable[[int], str], i: int) -> list[Param]:
    """The parameters of the FUNC_PROTO whose struct btf_type starts at word ``i``."""
    w = words[i + 3 : i + 3 + 2 * (words[i + 1] & 0xFFFF)]
    return [Param(name_of(pn) if pn else "", pt) for pn, pt in zip(w[0::2], w[1::2])]


def _enum_values(words: _Words, name_of: Callable[[int], str], i: int) -> list[EnumValue]:
    """The values of the ENUM whose struct btf_type starts at word ``i`` (signed when its
    kind_flag is set)."""
    info = words[i + 1]
    w = words[i + 3 : i + 3 + 2 * (info & 0xFFFF)]
    signed = info >= 0x80000000
    return [EnumValue(name_of(vn) if vn else "", vv - (1 << 32) if signed and vv >= 1 << 31 else vv)
            for vn, vv in zip(w[0::2], w[1::2])]


def _enum64_values(words: _Words, name_of: Callable[[int], str], i: int) -> list[EnumValue]:
    """The values of the ENUM64 whose struct btf_type starts at word ``i``."""
    info = words[i + 1]
    w = words[i + 3 : i + 3 + 3 * (info & 0xFFFF)]
    signed = info >= 0x80000000
    values = []
    for vn, lo, hi in zip(w[0::3], w[1::3], w[2::3]):
        vv = (hi << 32) | lo
        if signed and vv >= 1 << 63:
            vv -= 1 << 64
        values.append(EnumValue(name_of(vn) if vn else "", vv))
    return values


def _decode_all(words: _Words, starts: array.array[int], first: int, strings: StringTable) -> list[Type]:
    """Every type decoded in id order, each checked as it is: raises the ParseError of the
    first bad name offset or linkage, else of the first reference to a type that does not
    exist. (What a full parse does when :func:`_build_all` finds something wrong.)"""
    name_of = _Names(strings).__getitem__
    count = first + len(starts)
    bad: list[str] = []  # the first reference to a type that does not exist
    own = [_decode(words, pos, first + i, name_of, count, bad) for i, pos in enumerate(starts)]
    if bad:
        raise ParseError(bad[0])
    return own


# Kinds a full parse builds all at once (the bulk of vmlinux) in _build_all, and what from:
# those that name or qualify one type; those with a list decoded on first use (and the words
# of each entry in it, and the word in an entry that holds a type id, -1 for none).
_BULK_REF = {_K_PTR: Pointer, _K_TYPEDEF: Typedef, _K_VOLATILE: Volatile, _K_CONST: Const, _K_RESTRICT: Restrict}
_BULK_LIST: dict[int, tuple[type[Struct] | type[Enum] | type[FuncProto], Callable[..., list[Any]], int, int]] = {
    _K_STRUCT: (Struct, _members, 3, 1), _K_UNION: (Union, _members, 3, 1), _K_FUNC_PROTO: (FuncProto, _params, 2, 1),
    _K_ENUM: (Enum, _enum_values, 2, -1), _K_ENUM64: (Enum64, _enum64_values, 3, -1),
}


def _picker(words: _Words, pos: list[int]) -> Callable[[int], Sequence[int]]:
    """For the types starting at ``pos`` in ``words``, a function giving word k of each, read
    at C speed (one operator.itemgetter of the starts, on a view from word k)."""
    if len(pos) == 1:  # itemgetter of one index gives the item, not a tuple
        return lambda k: (words[pos[0] + k],)
    pick, view = operator.itemgetter(*pos), memoryview(words)
    return lambda k: cast("Sequence[int]", pick(view[k:]))


def _build_all(words: _Words, n: int, groups: dict[int, tuple[array.array[int], array.array[int]]],
               first: int, strings: StringTable) -> list[Type] | None:
    """The ``n`` types by id (the ids below ``first`` hold void), built a group of types with
    one info word at a time (``groups``, from
    :func:`_scan_groups`: kind, kind_flag and vlen are then constants) with one map over the
    columns of their fields, after checking, with max() over the words at C speed, that every name offset
    is inside the string section and every type id a type refers to exists. Members, params
    and enum values are checked here but decoded on first use (types.py: _Deferred):
    building their ~170k objects was most of a full parse of vmlinux. None when a check
    fails: the caller then decodes type by type, which reports the first error in id order,
    with the same message a parse has always given."""
    count, nstr, get = first + n, len(strings), strings.get
    get_many = strings.getter_many()
    by_id: list[Type] = [Void(0, "")] * count  # from first on, each replaced below
    raw = memoryview(words).cast("B")  # slices of it joined without a copy of the section first
    for info, (id_array, starts) in groups.items():
        kind, vlen, flag = (info >> 24) & 0x1F, info & 0xFFFF, info >= 0x80000000
        ids, pos = id_array.tolist(), starts.tolist()  # ints made once, read twice or more
        objs: Iterator[Type]
        if kind not in _BULK_REF and kind not in _BULK_LIST and kind not in (_K_FUNC, _K_ARRAY):
            bad: list[str] = []  # rare kinds (INT, VAR, DATASEC, ...): one by one
            try:
                objs = iter([_decode(words, p, tid, get, count, bad) for tid, p in zip(ids, pos)])
            except ParseError:
                return None
            if bad:
                return None
        else:
            column = _picker(words, pos)  # column(k): word k of each type
            name_offs, second = column(0), column(2)  # second: size, or the type referred to
            if max(name_offs) >= nstr:
                return None
            names = get_many(name_offs) if any(name_offs) else itertools.repeat("")  # FUNC_PROTO, PTR: anonymous
            if kind in _BULK_REF or kind == _K_FUNC:
                if max(second) >= count:
                    return None
                if kind == _K_FUNC:
                    linkage = _LINKAGE.get(vlen)
                    if linkage is None:
                        return None
                    objs = map(Func, ids, names, second, itertools.repeat(linkage))
                else:
                    objs = map(_BULK_REF[kind], ids, names, second)
            elif kind == _K_ARRAY:
                elems, index_types = column(3), column(4)
                if max(elems) >= count or max(index_types) >= count:
                    return None
                objs = map(Array, ids, names, elems, index_types, column(5))
            else:
                cls, decoder, per, ref = _BULK_LIST[kind]
                if kind == _K_FUNC_PROTO and max(second) >= count:  # return type
                    return None
                if vlen <= 3:  # each entry's name offset, and type id: a column each
                    for entry in range(3, 3 + per * vlen, per):
                        if max(column(entry)) >= nstr or (ref >= 0 and max(column(entry + ref)) >= count):
                            return None
                else:  # all the group's entries end to end (per words each): strided views
                    begins = list(map((12).__add__, map((4).__mul__, pos)))  # in bytes
                    entries = memoryview(b"".join(map(raw.__getitem__, map(slice, begins, map((4 * per * vlen).__add__, begins)))))
                    entries = entries.cast("I")
                    if max(entries[0::per]) >= nstr or (ref >= 0 and max(entries[ref::per]) >= count):
                        return None
                # The list's slot stays unset: the first read decodes it (types._Deferred).
                objs = map(cls._maker(functools.partial(decoder, words, get), flag), ids, names, second, pos)
        collections.deque(map(by_id.__setitem__, ids, objs), maxlen=0)
    return by_id


_ONE_REF = frozenset({_K_PTR, _K_TYPEDEF, _K_VOLATILE, _K_CONST, _K_RESTRICT, _K_TYPE_TAG, _K_FUNC, _K_VAR, _K_DECL_TAG})


def _max_ref(words: _Words, kind: int, x: int, vlen: int, size_type: int) -> int:
    """The largest type id a type refers to, read from its words (array slices: C speed)."""
    if kind in _ONE_REF:
        return size_type
    if kind in (_K_STRUCT, _K_UNION):
        return max(words[x + 1 : x + 3 * vlen : 3], default=0)
    if kind == _K_FUNC_PROTO:
        return max(size_type, max(words[x + 1 : x + 2 * vlen : 2], default=0))
    if kind == _K_ARRAY:
        return max(words[x], words[x + 1])
    if kind == _K_DATASEC:
        return max(words[x : x + 3 * vlen : 3], default=0)
    return 0


# Bytes that follow struct btf_type, per kind: (fixed, per vlen entry).
_EXTRA = {
    Kind.INT: (4, 0), Kind.ARRAY: (12, 0), Kind.STRUCT: (0, 12), Kind.UNION: (0, 12),
    Kind.ENUM: (0, 8), Kind.FUNC_PROTO: (0, 8), Kind.VAR: (4, 0), Kind.DATASEC: (0, 12),
    Kind.DECL_TAG: (4, 0), Kind.ENUM64: (0, 12),
}


def scan_type_id(data: bytes | memoryview | mmap.mmap, name: str, kind: Kind, first_id: int = 1) -> int:
    """The id of the first ``kind`` type called ``name`` in a BTF blob, 0 if none, without
    building the type objects: walking the 5 MB vmlinux blob this way takes a fraction of a
    full parse. ``first_id`` is the blob's first id (the base's type count for split BTF)."""
    if isinstance(data, memoryview):  # no find(); bytes and mappings are read in place
        data = bytes(data)
    if len(data) < _HEADER.size:
        raise ParseError("BTF blob is shorter than its header")
    magic, _, _, hdr_len, type_off, type_len, str_off, str_len = _HEADER.unpack_from(data)
    if magic != BTF_MAGIC:
        raise ParseError(f"bad BTF magic {magic:#06x}")
    strings = data[hdr_len + str_off : hdr_len + str_off + str_len]
    needle = b"\0" + name.encode() + b"\0"
    offsets = set()
    at = strings.find(needle)
    while at >= 0:
        offsets.add(at + 1)
        at = strings.find(needle, at + 1)
    if not offsets:
        return 0
    pos, end = hdr_len + type_off, hdr_len + type_off + type_len
    unpack, extra, want = _U32x2.unpack_from, _EXTRA, int(kind)
    tid = first_id
    while pos + 12 <= end:
        name_off, info = unpack(data, pos)
        k = (info >> 24) & 0x1F
        if k == want and name_off in offsets:
            return tid
        fixed, per = extra.get(k, (0, 0))
        pos += 12 + fixed + per * (info & 0xFFFF)
        tid += 1
    return 0


def _references(t: Type) -> Iterator[int]:
    """Type ids ``t`` refers to."""
    if isinstance(t, (Pointer, Typedef, Volatile, Const, Restrict, TypeTag, Func, Var, DeclTag)):
        yield t.type
    elif isinstance(t, Array):
        yield t.type
        yield t.index_type
    elif isinstance(t, Struct):
        for m in t.members:
            yield m.type
    elif isinstance(t, FuncProto):
        yield t.return_type
        for p in t.params:
            yield p.type
    elif isinstance(t, Datasec):
        for v in t.vars:
            yield v.type


def _c_name(btf: BTF, type_id: int, depth: int) -> str:
    if depth > _MAX_RESOLVE_DEPTH:
        return "..."
    t = btf.types[type_id] if 0 <= type_id < len(btf.types) else None
    if t is None or isinstance(t, Void):
        return "void"
    if isinstance(t, (Struct, Fwd, Enum)):
        if isinstance(t, Fwd):
            word = "union" if t.union else "struct"
        else:
            word = {Kind.STRUCT: "struct", Kind.UNION: "union"}.get(t.kind, "enum")
        return f"{word} {t.name or '(anon)'}"
    if isinstance(t, Const):
        return "const " + _c_name(btf, t.type, depth + 1)
    if isinstance(t, Volatile):
        return "volatile " + _c_name(btf, t.type, depth + 1)
    if isinstance(t, Restrict):
        return _c_name(btf, t.type, depth + 1) + " restrict"
    if isinstance(t, Pointer):
        return _c_name(btf, t.type, depth + 1) + " *"
    if isinstance(t, Array):
        return f"{_c_name(btf, t.type, depth + 1)}[{t.nelems}]"
    if isinstance(t, (Var, TypeTag)):
        return _c_name(btf, t.type, depth + 1)
    if isinstance(t, FuncProto):
        params = ", ".join(_c_name(btf, p.type, depth + 1) for p in t.params)
        return f"{_c_name(btf, t.return_type, depth + 1)} (*)({params})"
    return t.name or t.kind.name.lower()
