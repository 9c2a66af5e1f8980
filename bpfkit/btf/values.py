# SPDX-License-Identifier: Apache-2.0
"""Typed values: bytes laid out as a BTF type <-> Python values.

    codec = value_codec(btf, type_id)          # compiled once per type
    rec = codec.decode(raw)                    # mt_value(count=3, comm='bash', ...)
    raw = codec.encode({"count": 4, "comm": "sh"})

Decoding: ints -> ``int`` (``_Bool`` -> ``bool``), enums -> an :class:`enum.IntEnum` built once
per BTF enum (values without a name stay ``int``), ``char[N]``/``unsigned char[N]`` -> ``str``
when the bytes up to the first NUL are printable text (else ``bytes``), other arrays -> ``list``,
structs and unions -> :class:`StructValue` (anonymous members flattened into their parent, as C
names them), bitfields extracted, typedefs and qualifiers resolved, pointers -> ``int``.

The struct codes of scalars and a data section's members come from :mod:`bpfkit.btf.layout`,
which bpftool JSON, event record formats and metrics plans read too.

Speed: a type is compiled once into one :class:`struct.Struct` covering every field that has a
fixed place (nested structs and arrays included) and a small builder that turns the unpacked
tuple into Python values; unions, bitfield groups and odd-sized integers take a bytes slot and
a converter. A plain struct decodes with one ``unpack_from`` and one ``dict(zip(...))``.

Encoding accepts ints, bools, enum members or names, ``str``/``bytes`` for char arrays, lists
for arrays, StructValues (Records) or dicts for structs (missing fields are zero, as in C
initialisers), and ``bytes`` of exactly the type's size anywhere; a wrong field, type or range
raises :class:`bpfkit.errors.BTFValueError` naming the field path (``value.comm``), the expected
type and the range, and nothing else (issue #35: not struct.error, OverflowError,
UnicodeEncodeError or RecursionError), showing the value cut short (:func:`describe_value`: a
huge integer by its size, never its digits). Host byte order (maps live in this machine's
memory).

Pure data: no kernel access (the spec layer).
"""

from __future__ import annotations

import enum
import itertools
import struct
import sys
from collections.abc import Callable, Mapping, Sequence

from ..errors import BTFValueError, ParseError
from .layout import FLOAT_FORMATS, INT_FORMATS, members
from .spec import BTF
from .types import Array, Datasec, Enum, Float, Int, IntEncoding, Member, Pointer, Struct, Union, Var

TYPE_CHECKING = False  # typing costs ~2 ms to import: its names are for the type checker only
if TYPE_CHECKING:
    from typing import Any

__all__ = ["MAX_VALUE_DEPTH", "Record", "StructValue", "ValueCodec", "describe_value", "value_codec"]

_LITTLE = sys.byteorder == "little"
_MAX_DEPTH = 64  # nesting depth guard (BTF from a file could loop through arrays/structs)
# The deepest a value given as text (JSON) may nest: no type bpfkit lays out nests deeper, and
# json.loads recurses once per level (50,000 '[' were a RecursionError).
MAX_VALUE_DEPTH = _MAX_DEPTH
_SHOWN = 50       # characters of a str or bytes an error message shows (BTFValueError cuts at 60)
_BIG_INT = 256    # bits: a larger int is shown by its size (int -> str is quadratic, and
                  # refused past 4,300 digits: sys.get_int_max_str_digits)
_FLOAT_MAX = {2: "65504", 4: "3.4028235e+38", 8: "1.7976931348623157e+308"}  # finite; inf packs too
_TRUE = frozenset({"1", "true", "yes", "on", "y"})
_FALSE = frozenset({"0", "false", "no", "off", "n"})


class StructValue:
    """A decoded struct or union: attribute access, ``==`` with others and dicts, a dict view.

    ``StructValue(pid=1, comm="sh")`` (or by its first name, ``Record``) builds one by hand
    (to encode); decoded values are instances of a subclass per BTF struct, named like it.
    Subclasses (``value_codec(records=...)``, the skeleton generator) must not define
    ``__slots__``: fields live in the instance dict, in BTF order."""

    def __init__(self, **fields: object) -> None:
        self.__dict__.update(fields)

    @property
    def _fields(self) -> tuple[str, ...]:
        """Field names in BTF order (anonymous members flattened as C does)."""
        return tuple(self.__dict__)

    def to_dict(self) -> dict[str, object]:
        """The fields as a dict; nested records (also inside lists) become dicts too."""
        return {k: _plain(v) for k, v in self.__dict__.items()}

    def __eq__(self, other: object) -> bool:
        if isinstance(other, StructValue):
            return self.__dict__ == other.__dict__
        if isinstance(other, dict):
            return self.__dict__.keys() == other.keys() and all(v == other[k] for k, v in self.__dict__.items())
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # mutable

    def __repr__(self) -> str:
        inner = ", ".join(f"{k}={v!r}" for k, v in self.__dict__.items())
        return f"{type(self).__name__}({inner})"


# Its first name, which skeletons, the docs and "a Record or dict" in messages use.
Record = StructValue


def _plain(value: object) -> object:
    if isinstance(value, StructValue):
        return value.to_dict()
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


# --------------------------------------------------------------------------- compiled types
# A compiled type ("node") is a piece of a struct format covering exactly its size in bytes
# (padding as 'x'), how many items of the unpacked tuple it takes, a builder turning those
# items into the Python value, and an encoder writing a value into a buffer at an offset.
if TYPE_CHECKING:  # annotations only (Any is not imported at run time)
    _Build = Callable[[tuple[Any, ...]], object]   # the node's items (a tuple slice) -> value
    _Encode = Callable[[object, bytearray, int, str], None]  # value, buffer, offset, path


class _Node:
    __slots__ = ("fmt", "count", "build", "encode", "expected", "identity")

    def __init__(self, fmt: str, count: int, build: _Build, encode: _Encode, expected: str,
                 identity: bool = False) -> None:
        self.fmt = fmt            # struct format (standard sizes, no alignment)
        self.count = count        # items of the unpacked tuple
        self.build = build        # items -> value (for count 1: a 1-tuple)
        self.encode = encode
        self.expected = expected  # what encode accepts, for messages
        self.identity = identity  # one item, used as is (build not needed)


class _Shown:
    """What BTFValueError's repr() of the value gives: a text made by describe_value."""

    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text

    def __repr__(self) -> str:
        return self.text


def _fail(path: str, expected: str, value: object, why: str = "") -> BTFValueError:
    err = BTFValueError(path, expected, _Shown(describe_value(value)), why)
    err.value = value  # what was given, as given; the message shows it described
    return err


def describe_value(value: object, depth: int = 0) -> str:
    """``repr(value)`` for a message, short and safe on any input: an integer of more than
    256 bits is "an integer of 20,000 bits" (repr() of one past 4,300 digits is a ValueError,
    and quadratic below), strings and bytes are cut before repr(), lists, tuples, dicts and
    Records show their first items two levels deep (repr() of 50,000 nested lists is a
    RecursionError), enum members their name, other objects their type."""
    if isinstance(value, _Shown):
        return value.text
    if isinstance(value, enum.Enum):
        return f"{type(value).__name__}.{value.name}"  # an IntEnum's repr() shows its int
    if isinstance(value, int) and not isinstance(value, bool):
        bits = value.bit_length()
        if bits > _BIG_INT:
            return f"{'a negative' if value < 0 else 'an'} integer of {bits:,} bits"
        return int.__repr__(value)
    if value is None or isinstance(value, (bool, float)):
        return repr(value)
    if isinstance(value, (str, bytes, bytearray)):
        cut = repr(value[:_SHOWN])
        return cut + "..." if len(value) > _SHOWN else cut
    if isinstance(value, memoryview):
        return f"<memoryview of {value.nbytes:,} bytes>"
    if isinstance(value, StructValue):
        first = list(itertools.islice(value.__dict__.items(), 5))
        return _describe_items(f"{type(value).__name__}(", ")", [(f"{k}=", v) for k, v in first], len(value.__dict__),
                               depth)
    if isinstance(value, dict):
        first = list(itertools.islice(value.items(), 5))
        return _describe_items("{", "}", [(describe_value(k, depth + 1) + ": ", v) for k, v in first], len(value), depth)
    if isinstance(value, (list, tuple)):
        ends = "[]" if isinstance(value, list) else "()"
        return _describe_items(ends[0], ends[1], [("", v) for v in value[:5]], len(value), depth)
    return f"<{type(value).__name__} object>"


def _describe_items(open_: str, close: str, first: list[tuple[str, object]], total: int, depth: int) -> str:
    """A container's first items (label, value), as many as fit about 50 characters."""
    if not total:
        return open_ + close
    if depth >= 2:
        return open_ + "..." + close
    shown: list[str] = []
    width = 0
    for label, item in first:
        if width > _SHOWN:
            break
        shown.append(label + describe_value(item, depth + 1))
        width += len(shown[-1]) + 2
    if len(shown) < total:
        shown.append("...")
    return open_ + ", ".join(shown) + close


def _first(items: tuple[Any, ...]) -> object:
    return items[0]


def _is_raw(value: object) -> bool:
    return isinstance(value, (bytes, bytearray, memoryview))


def _raw_into(value: object, size: int, buf: bytearray, off: int, path: str, expected: str) -> None:
    data = bytes(value)  # type: ignore[call-overload]
    if len(data) != size:
        raise _fail(path, expected, value, f"{len(data)} bytes given, the type has {size}")
    buf[off:off + size] = data


class _Compiler:
    def __init__(self, btf: BTF, records: Mapping[str, type[StructValue]] | None) -> None:
        self.btf = btf
        self.records = dict(records or {})
        self.nodes: dict[int, _Node] = {}
        self.enums: dict[int, type[enum.IntEnum] | None] = {}
        self.classes: dict[int, type[StructValue]] = {}

    def node(self, type_id: int, depth: int = 0) -> _Node:
        cached = self.nodes.get(type_id)
        if cached is not None:
            return cached
        if depth > _MAX_DEPTH:
            raise ParseError(f"BTF type {type_id}: nested deeper than {_MAX_DEPTH} levels")
        t = self.btf.resolve(type_id)
        if isinstance(t, Var):
            n = self.node(t.type, depth + 1)
        elif isinstance(t, Int):
            n = self._int(t, self.btf.type_name(type_id))
        elif isinstance(t, Enum):
            n = self._enum(t)
        elif isinstance(t, Pointer):
            n = self._plain_int(8, False, f"pointer {self.btf.type_name(type_id)}")
        elif isinstance(t, Float):
            n = self._float(t, self.btf.type_name(type_id))
        elif isinstance(t, Array):
            n = self._array(type_id, t, depth)
        elif isinstance(t, Union):
            n = self._union(t, depth)
        elif isinstance(t, Struct):
            n = self._struct(t, depth)
        elif isinstance(t, Datasec):
            n = self._datasec(t, depth)
        else:
            raise ParseError(f"BTF type {type_id} ({t.kind.name} {t.name!r}) has no value layout")
        self.nodes[type_id] = n
        return n

    # ---------------------------------------------------------------------- scalars
    def _plain_int(self, size: int, signed: bool, expected: str, is_bool: bool = False) -> _Node:
        lo, hi = (-(1 << (size * 8 - 1)), (1 << (size * 8 - 1)) - 1) if signed else (0, (1 << (size * 8)) - 1)
        fmt = "?" if is_bool and size == 1 else INT_FORMATS.get((size, signed))
        packer = struct.Struct("=" + fmt) if fmt else None
        expected = f"{expected} (an integer in [{lo}, {hi}])" if not is_bool else f"{expected} (true or false)"

        def encode(value: object, buf: bytearray, off: int, path: str) -> None:
            if _is_raw(value):
                return _raw_into(value, size, buf, off, path, expected)
            if not isinstance(value, int):
                raise _fail(path, expected, value)
            if is_bool and value not in (0, 1):
                raise _fail(path, expected, value, "out of range")
            if not lo <= value <= hi:
                raise _fail(path, expected, value, "out of range")
            if packer is not None:
                packer.pack_into(buf, off, value)
            else:
                buf[off:off + size] = value.to_bytes(size, sys.byteorder, signed=signed)

        if fmt:
            return _Node(fmt, 1, _first, encode, expected, identity=True)

        def build(items: tuple[Any, ...]) -> object:  # __int128 and other odd sizes
            return int.from_bytes(items[0], sys.byteorder, signed=signed)

        return _Node(f"{size}s", 1, build, encode, expected)

    def _int(self, t: Int, label: str) -> _Node:
        is_bool = bool(t.encoding & IntEncoding.BOOL)
        if t.bit_offset or (t.bits and t.bits != t.size * 8):
            # An INT whose value is a bit range of its bytes (old compilers' bitfields).
            return self._bits_node(t.size, t.bit_offset, t.bits, t.signed, t.name, None, is_bool)
        return self._plain_int(t.size, t.signed, label or "int", is_bool)

    def _enum_class(self, t: Enum) -> type[enum.IntEnum] | None:
        if t.id not in self.enums:
            make: Any = enum.IntEnum  # the functional API (mypy wants a literal class name)
            cls: type[enum.IntEnum] | None
            try:
                cls = make(t.name or f"enum_{t.id}", [(v.name, v.value) for v in t.values], module=__name__)
            except (ValueError, TypeError):  # names Python refuses (_sunder_, mro, ...)
                cls = None
            self.enums[t.id] = cls
        return self.enums[t.id]

    def _enum(self, t: Enum) -> _Node:
        base = self._plain_int(t.size, t.signed, f"enum {t.name}" if t.name else "enum")
        cls = self._enum_class(t)
        names = {v.name: v.value for v in t.values}
        by_value: dict[int, object] = {m.value: m for m in cls} if cls is not None else {}
        shown = ", ".join(list(names)[:8]) + (", ..." if len(names) > 8 else "")
        expected = f"enum {t.name or ''} member ({shown}) or an integer".replace("enum  ", "enum ")
        inner = base.encode

        def encode(value: object, buf: bytearray, off: int, path: str) -> None:
            if isinstance(value, str):
                if value not in names:
                    raise _fail(path, expected, value, "no such member")
                value = names[value]
            elif isinstance(value, enum.Enum) and not isinstance(value, int):
                value = value.value
            inner(value, buf, off, path)

        def build(items: tuple[Any, ...]) -> object:
            return by_value.get(items[0], items[0])

        return _Node(base.fmt, 1, build if cls is not None else base.build, encode, expected)

    def _float(self, t: Float, label: str) -> _Node:
        fmt = FLOAT_FORMATS.get(t.size)
        expected = f"{label or t.name or 'float'} (a number)"
        if fmt is None:
            return self._bytes_node(t.size, expected)
        packer = struct.Struct("=" + fmt)

        def encode(value: object, buf: bytearray, off: int, path: str) -> None:
            if _is_raw(value):
                return _raw_into(value, t.size, buf, off, path, expected)
            if not isinstance(value, (int, float)):
                raise _fail(path, expected, value)
            try:
                packer.pack_into(buf, off, value)
            except (OverflowError, struct.error):  # past the format's largest (1e39 in a float)
                raise _fail(path, expected, value, f"out of range: a float of {t.size} bytes holds at most "
                            f"±{_FLOAT_MAX[t.size]}") from None

        return _Node(fmt, 1, _first, encode, expected, identity=True)

    def _bytes_node(self, size: int, expected: str) -> _Node:
        def encode(value: object, buf: bytearray, off: int, path: str) -> None:
            if not _is_raw(value):
                raise _fail(path, expected, value)
            _raw_into(value, size, buf, off, path, expected)

        def build(items: tuple[Any, ...]) -> object:
            return items[0]

        return _Node(f"{size}s", 1, build, encode, expected)

    def _bits_node(self, size: int, bit_offset: int, bits: int, signed: bool, name: str,
                   conv: Callable[[int], object] | None, is_bool: bool = False,
                   encode_value: Callable[[object, str], int] | None = None) -> _Node:
        """A value in bits [bit_offset, bit_offset+bits) of ``size`` bytes (little-endian bit
        numbering, as BTF gives it on little-endian hosts)."""
        mask = (1 << bits) - 1
        lo, hi = (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if signed else (0, mask)
        expected = f"{name or 'int'}:{bits} (an integer in [{lo}, {hi}])"

        def extract(whole: int) -> object:
            v = (whole >> bit_offset) & mask
            if signed and v > hi:
                v -= 1 << bits
            if is_bool:
                return bool(v)
            return conv(v) if conv is not None else v

        def build(items: tuple[Any, ...]) -> object:
            return extract(int.from_bytes(items[0], sys.byteorder))

        def encode(value: object, buf: bytearray, off: int, path: str) -> None:
            v = encode_value(value, path) if encode_value is not None else value
            if not isinstance(v, int):
                raise _fail(path, expected, value)
            if not lo <= v <= hi:
                raise _fail(path, expected, value, "out of range")
            whole = int.from_bytes(buf[off:off + size], sys.byteorder)
            whole = (whole & ~(mask << bit_offset)) | ((v & mask) << bit_offset)
            buf[off:off + size] = whole.to_bytes(size, sys.byteorder)

        return _Node(f"{size}s", 1, build, encode, expected)

    # -------------------------------------------------------------------- aggregates
    def _array(self, type_id: int, t: Array, depth: int) -> _Node:
        n = t.nelems
        elem_t = self.btf.type_by_id(t.type)
        while elem_t.kind.name in ("CONST", "VOLATILE", "RESTRICT", "TYPE_TAG"):  # not typedefs
            elem_t = self.btf.type_by_id(elem_t.type)  # type: ignore[attr-defined]
        name = self.btf.type_name(type_id)
        if isinstance(elem_t, Int) and elem_t.size == 1 and not elem_t.encoding & IntEncoding.BOOL and (
                elem_t.encoding & IntEncoding.CHAR or elem_t.name in ("char", "unsigned char", "signed char")):
            return self._char_array(n, name)
        elem = self.node(t.type, depth + 1)
        esize = self.btf.size_of(t.type)
        expected = f"{name} (a list of up to {n})"

        def encode(value: object, buf: bytearray, off: int, path: str) -> None:
            if _is_raw(value):
                return _raw_into(value, n * esize, buf, off, path, expected)
            if isinstance(value, (str, Mapping)) or not isinstance(value, Sequence):
                raise _fail(path, expected, value)
            if len(value) > n:
                raise _fail(path, expected, value, f"{len(value)} elements given")
            for i, item in enumerate(value):
                elem.encode(item, buf, off + i * esize, f"{path}[{i}]")

        if elem.identity:
            def build_list(items: tuple[Any, ...]) -> object:
                return list(items)
            return _Node(elem.fmt * n, n, build_list, encode, expected)
        c, b = elem.count, elem.build

        def build(items: tuple[Any, ...]) -> object:
            return [b(items[i:i + c]) for i in range(0, n * c, c)]

        return _Node(elem.fmt * n, n * c, build, encode, expected)

    def _char_array(self, n: int, name: str) -> _Node:
        expected = f"{name} (a string of up to {max(n - 1, 0)} bytes, or bytes of up to {n})"

        def build(items: tuple[Any, ...]) -> object:
            raw: bytes = items[0]
            end = raw.find(b"\0")
            text = raw if end < 0 else raw[:end]
            try:
                s = text.decode()
            except UnicodeDecodeError:
                return raw
            return s if s.isprintable() or all(c.isprintable() or c in "\t\n\r" for c in s) else raw

        def encode(value: object, buf: bytearray, off: int, path: str) -> None:
            if isinstance(value, str):
                try:
                    data = value.encode()
                except UnicodeEncodeError as exc:  # a lone surrogate ("\\udcff" in JSON)
                    raise _fail(path, expected, value, f"not UTF-8 text: a lone surrogate "
                                f"U+{ord(value[exc.start]):04X} at index {exc.start}") from None
                if len(data) >= max(n, 1):  # room for the terminating NUL
                    raise _fail(path, expected, value, f"{len(data)} bytes, too long")
            elif _is_raw(value):
                data = bytes(value)  # type: ignore[call-overload]
                if len(data) > n:
                    raise _fail(path, expected, value, f"{len(data)} bytes, too long")
            elif isinstance(value, Sequence) and all(isinstance(x, int) and 0 <= x <= 255 for x in value):
                if len(value) > n:
                    raise _fail(path, expected, value, f"{len(value)} elements given")
                data = bytes(value)
            else:
                raise _fail(path, expected, value)
            buf[off:off + n] = data.ljust(n, b"\0")

        return _Node(f"{n}s", 1, build, encode, expected)

    def _record_class(self, t: Struct) -> type[StructValue]:
        cls = self.classes.get(t.id)
        if cls is None:
            cls = self.records.get(t.name) if t.name else None
            if cls is None:
                label = t.name or ("union" if isinstance(t, Union) else "struct")
                cls = type(label, (StructValue,), {"__module__": __name__})
            self.classes[t.id] = cls
        return cls

    def _struct(self, t: Struct, depth: int) -> _Node:
        cls = self._record_class(t)
        size = t.size
        fmt: list[str] = []
        pos = 0   # bytes covered by fmt so far
        count = 0
        # per field: (name, first item, item count, builder or None for identity items,
        # sub-names when the member is anonymous (its fields merge into ours))
        plan: list[tuple[str, int, int, _Build | None, tuple[str, ...] | None]] = []
        # name, byte offset, encode, the field names of an anonymous member (else None)
        encoders: list[tuple[str, int, _Encode, frozenset[str] | None]] = []
        members = list(t.members)
        i = 0
        while i < len(members):
            m = members[i]
            if m.bitfield_size or (m.bit_offset % 8):
                # A run of bitfields: one bytes slot over the bytes they share.
                run = [m]
                start = m.bit_offset // 8
                end = (m.bit_offset + max(m.bitfield_size, 1) + 7) // 8
                j = i + 1
                while j < len(members) and (members[j].bitfield_size or members[j].bit_offset % 8) \
                        and members[j].bit_offset // 8 < end:
                    run.append(members[j])
                    end = max(end, (members[j].bit_offset + members[j].bitfield_size + 7) // 8)
                    j += 1
                if start < pos:
                    raise ParseError(f"BTF struct {t.name!r}: member {m.name!r} overlaps the one before")
                if start > pos:
                    fmt.append(f"{start - pos}x")
                width = end - start
                fmt.append(f"{width}s")
                for bm in run:
                    node = self._bitfield(bm, start, width, depth)
                    plan.append((bm.name, count, 1, node.build, None))
                    encoders.append((bm.name, start, node.encode, None))
                count += 1
                pos = end
                i = j
                continue
            node = self.node(m.type, depth + 1)
            off = m.bit_offset // 8
            if off < pos:
                raise ParseError(f"BTF struct {t.name!r}: member {m.name!r} overlaps the one before")
            if off > pos:
                fmt.append(f"{off - pos}x")
            fmt.append(node.fmt)
            anon: tuple[str, ...] | None = None
            if not m.name:
                sub = self.btf.resolve(m.type)
                anon = tuple(self._anon_names(sub)) if isinstance(sub, Struct) else None
            plan.append((m.name, count, node.count, None if node.identity and anon is None else node.build, anon))
            encoders.append((m.name, off, node.encode, frozenset(anon) if anon is not None else None))
            count += node.count
            pos = off + self.btf.size_of(m.type)
            i += 1
        if size < pos:
            raise ParseError(f"BTF struct {t.name!r}: members extend past its size {size}")
        if size > pos:
            fmt.append(f"{size - pos}x")

        new = object.__new__
        names = tuple(p[0] for p in plan)
        if all(p[3] is None for p in plan) and count == len(plan):
            def build(items: tuple[Any, ...]) -> object:
                obj = new(cls)
                obj.__dict__ = dict(zip(names, items))
                return obj
        else:
            def build(items: tuple[Any, ...]) -> object:
                d: dict[str, object] = {}
                for name, first, c, b, anon in plan:
                    if b is None:
                        d[name] = items[first]
                    elif anon is None:
                        d[name] = b(items[first:first + c])
                    else:
                        d.update(b(items[first:first + c]).__dict__)
                obj = new(cls)
                obj.__dict__ = d
                return obj

        label = f"{'union' if isinstance(t, Union) else 'struct'} {t.name}".rstrip()
        all_names = [n for p in plan for n in (p[4] if p[4] is not None else (p[0],))]
        expected = f"{label} (a Record or dict with fields {', '.join(all_names)})"

        def encode(value: object, buf: bytearray, off: int, path: str) -> None:
            fields = _fields_to_encode(value, size, buf, off, path, expected, all_names)
            if fields is None:
                return
            for name, moff, enc, anon in encoders:
                if anon is not None:
                    sub = {k: v for k, v in fields.items() if k in anon}
                    if sub:
                        enc(sub, buf, off + moff, path)
                elif name in fields and fields[name] is not None:
                    enc(fields[name], buf, off + moff, f"{path}.{name}")
        return _Node("".join(fmt), count, build, encode, expected)

    def _anon_names(self, t: Struct) -> list[str]:
        out: list[str] = []
        for m in t.members:
            sub = self.btf.resolve(m.type)
            if not m.name and isinstance(sub, Struct):
                out.extend(self._anon_names(sub))
            else:
                out.append(m.name)
        return out

    def _bitfield(self, m: Member, start: int, width: int, depth: int) -> _Node:
        t = self.btf.resolve(m.type)
        bits = m.bitfield_size
        shift = m.bit_offset - start * 8
        if isinstance(t, Enum):
            cls = self._enum_class(t)
            by_value: dict[int, object] = {x.value: x for x in cls} if cls is not None else {}
            names = {v.name: v.value for v in t.values}

            def enum_value(value: object, path: str) -> int:
                if isinstance(value, str):
                    if value not in names:
                        raise _fail(path, f"enum {t.name} member ({', '.join(names)})", value, "no such member")
                    return names[value]
                return value  # type: ignore[return-value]

            def conv(v: int) -> object:
                return by_value.get(v, v)

            return self._bits_node(width, shift, bits or t.size * 8, t.signed, f"enum {t.name}", conv,
                                   encode_value=enum_value)
        if isinstance(t, Int):
            return self._bits_node(width, shift, bits or t.size * 8, t.signed, t.name, None,
                                   bool(t.encoding & IntEncoding.BOOL))
        raise ParseError(f"BTF member {m.name!r}: a bitfield of {t.kind.name} is not supported")

    def _union(self, t: Union, depth: int) -> _Node:
        """Members overlap: one bytes slot, each member decoded from it on its own."""
        cls = self._record_class(t)
        size = t.size
        subs: list[tuple[str, _Node, struct.Struct, tuple[str, ...] | None]] = []
        msizes: list[int] = []
        for m in t.members:
            if m.bitfield_size:
                node = self._bitfield(m, 0, size, depth)
            else:
                node = self.node(m.type, depth + 1)
            msize = size if m.bitfield_size else self.btf.size_of(m.type)
            msizes.append(msize)
            sub = self.btf.resolve(m.type)
            anon = tuple(self._anon_names(sub)) if not m.name and isinstance(sub, Struct) else None
            subs.append((m.name, node, struct.Struct("=" + node.fmt + (f"{size - msize}x" if size > msize else "")), anon))
        new = object.__new__

        def build(items: tuple[Any, ...]) -> object:
            raw = items[0]
            d: dict[str, object] = {}
            for name, node, st, anon in subs:
                vals = st.unpack(raw)
                v = vals[0] if node.identity else node.build(vals)
                if anon is not None:
                    d.update(v.__dict__)
                else:
                    d[name] = v
            obj = new(cls)
            obj.__dict__ = d
            return obj

        all_names = [n for s in subs for n in (s[3] if s[3] is not None else (s[0],))]
        expected = f"union {t.name} (a Record or dict with one of {', '.join(all_names)})".replace("union  ", "union ")

        def encode(value: object, buf: bytearray, off: int, path: str) -> None:
            fields = _fields_to_encode(value, size, buf, off, path, expected, all_names)
            if fields is None:
                return
            given = {k: v for k, v in fields.items() if v is not None}
            # Each member given is laid out on its own; several (a decoded union has them
            # all) must agree on the bytes they share. The widest one is written.
            written: list[tuple[int, bytearray]] = []
            for (name, node, _st, anon), msize in zip(subs, msizes):
                if anon is None and name in given:
                    part, mpath, mvalue = bytearray(size), f"{path}.{name}", given[name]
                elif anon is not None and given.keys() & set(anon):
                    part, mpath, mvalue = bytearray(size), path, {k: given[k] for k in anon if k in given}
                else:
                    continue
                node.encode(mvalue, part, 0, mpath)
                written.append((msize, part))
            if not written:
                return
            _, widest = max(written, key=lambda w: w[0])
            for msize, part in written:
                if part[:msize] != widest[:msize]:
                    raise _fail(path, expected, value, "members of a union given with different bytes")
            buf[off:off + size] = widest

        return _Node(f"{size}s", 1, build, encode, expected)

    def _datasec(self, t: Datasec, depth: int) -> _Node:
        """A data section (.rodata, .bss, ...) decodes as a Record of its variables."""
        by_id = self.btf.type_by_id
        as_struct = Struct(t.id, t.name, t.size, [  # each VAR's type in its place, in offset order
            Member(m.name, v.type if isinstance(v := by_id(m.type), Var) else m.type, m.bit_offset)
            for m in sorted(members(self.btf, t), key=lambda m: m.bit_offset)])
        return self._struct(as_struct, depth)


def _fields_to_encode(value: object, size: int, buf: bytearray, off: int, path: str, expected: str,
                      names: list[str]) -> dict[str, object] | None:
    """A struct's or union's fields from a Record or dict, every name checked; None when
    ``value`` was raw bytes (written here)."""
    if _is_raw(value):
        _raw_into(value, size, buf, off, path, expected)
        return None
    if isinstance(value, StructValue):
        fields = dict(value.__dict__)
    elif isinstance(value, Mapping):
        fields = dict(value)
    else:
        raise _fail(path, expected, value)
    for k in fields:
        if not isinstance(k, str):
            raise _fail(path, expected, value, f"a field name is not a string: {describe_value(k)}")
        if k not in names:
            raise _fail(f"{path}.{_field_label(k)}", expected, fields[k], "no such field")
    return fields


def _field_label(name: str) -> str:
    """A field name given by the caller as a path element: itself when short and printable."""
    return name if len(name) <= _SHOWN and name.isprintable() else describe_value(name)


class ValueCodec:
    """Bytes laid out as BTF type ``type_id`` <-> Python values. Make with :func:`value_codec`."""

    def __init__(self, btf: BTF, type_id: int, node: _Node, name: str) -> None:
        self.btf = btf
        self.type_id = type_id
        self.name = name
        self.size = btf.size_of(type_id)
        self._node = node
        self._struct = struct.Struct("=" + node.fmt)
        self._strided: dict[int, struct.Struct] = {}
        if self._struct.size != self.size:  # pragma: no cover - a compiler bug, not input
            raise ParseError(f"BTF type {type_id}: laid out as {self._struct.size} bytes, sizeof is {self.size}")
        unpack = self._struct.unpack_from
        if node.identity:
            def decode(data: bytes | bytearray | memoryview, offset: int = 0) -> object:
                return unpack(data, offset)[0]
        else:
            build = node.build

            def decode(data: bytes | bytearray | memoryview, offset: int = 0) -> object:
                return build(unpack(data, offset))
        self._decode = decode

    @property
    def type_name(self) -> str:
        return self.btf.type_name(self.type_id)

    def decode(self, data: bytes | bytearray | memoryview, offset: int = 0) -> object:
        """The value in ``data[offset:offset+size]``."""
        if len(data) - offset < self.size:
            raise BTFValueError(self.name, f"{self.type_name} ({self.size} bytes)", bytes(data[offset:]),
                                f"{len(data) - offset} bytes to decode")
        return self._decode(data, offset)

    def decode_many(self, data: bytes | bytearray | memoryview, count: int, stride: int = 0) -> list[object]:
        """``count`` values laid out ``stride`` bytes apart (default: the size), e.g. a batch
        or per-CPU slots: one ``iter_unpack`` over them all."""
        stride = stride or self.size
        if stride < self.size or len(data) < count * stride:
            raise BTFValueError(self.name, f"{count} x {self.type_name} ({stride} bytes apart)", b"",
                                f"{len(data)} bytes to decode")
        st = self._strided.get(stride)
        if st is None:
            st = self._strided[stride] = struct.Struct(self._struct.format + f"{stride - self.size}x")
        rows = st.iter_unpack(memoryview(data)[:count * stride])
        if self._node.identity:
            return [row[0] for row in rows]
        build = self._node.build
        return [build(row) for row in rows]

    def encode(self, value: object) -> bytes:
        """``value`` laid out as the type; BTFValueError naming the field on bad input."""
        buf = bytearray(self.size)
        self._node.encode(value, buf, 0, self.name)
        return bytes(buf)

    def from_text(self, text: str) -> object:
        """A command-line word as a value of this type (checked by encoding it): decimal,
        0x/0o/0b and negative integers, true/false for bools, enum member names, numbers for
        floats, the text itself for char arrays (bytes the command line could not decode as
        UTF-8 arrive as surrogate escapes, PEP 383: they are written as those bytes), JSON
        for arrays and structs, nested at most MAX_VALUE_DEPTH (64) levels. Anything else:
        BTFValueError naming the type and why."""
        t = self.btf.resolve(self.type_id)
        while isinstance(t, Var):
            t = self.btf.resolve(t.type)
        expected = self._node.expected
        value: object
        if isinstance(t, Int) and t.encoding & IntEncoding.BOOL:
            word = text.strip().lower()
            if word not in _TRUE | _FALSE:
                raise _fail(self.name, expected, text, "not a boolean (true/false, 1/0)")
            value = word in _TRUE
        elif isinstance(t, Enum) and text.strip() in {v.name for v in t.values}:
            value = text.strip()
        elif isinstance(t, (Int, Enum, Pointer)):
            value = _parse_int(text, self.name, expected,
                               "no such member, nor an integer" if isinstance(t, Enum) else "not an integer")
        elif isinstance(t, Float):
            value = _parse_float(text, self.name, expected)
        elif self._node.fmt.endswith("s") and self._node.count == 1 and isinstance(t, Array):
            value = _command_line_text(text, self.size, self.name, expected)
        else:
            value = _parse_json(text, self.name, expected)
        self.encode(value)
        return value

    def __repr__(self) -> str:
        return f"<ValueCodec {self.name}: {self.type_name} ({self.size} bytes)>"


def _parse_int(text: str, name: str, expected: str, why: str) -> int:
    word = text.strip().replace("_", "")
    try:
        return int(word, 0)
    except ValueError:
        pass
    try:
        return int(word, 10)  # "010": decimal, not a Python syntax error
    except ValueError:
        digits = word.lstrip("+-")
        if digits.isdigit() and len(digits) > sys.get_int_max_str_digits() > 0:
            why = f"out of range: a number of {len(digits):,} digits"  # int() refuses it
        raise _fail(name, expected, text, why) from None


def _parse_float(text: str, name: str, expected: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise _fail(name, expected, text, "not a number") from None
    if abs(value) == float("inf") and "inf" not in text.lower():  # "1e400": too large even for a double
        raise _fail(name, expected, text, "out of range: larger than any float")
    return value


def _command_line_text(text: str, size: int, name: str, expected: str) -> str | bytes:
    """A char array's word: the text, or the bytes it came from when it holds surrogate escapes."""
    try:
        text.encode()
        return text
    except UnicodeEncodeError:
        pass
    try:
        raw = text.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        return text  # a surrogate no decoder made: refused by the encoder, with its place
    if len(raw) >= max(size, 1):  # a word, as text: room for the terminating NUL
        raise _fail(name, expected, raw, f"{len(raw)} bytes, too long: a word leaves room for the NUL")
    return raw


def _parse_json(text: str, name: str, expected: str) -> object:
    """JSON nested at most MAX_VALUE_DEPTH levels: deeper is refused before json.loads, which
    recurses once per level."""
    if _nests_deeper(text, MAX_VALUE_DEPTH):
        raise _fail(name, expected, text, f"nested more than {MAX_VALUE_DEPTH} levels deep: bpfkit's limit "
                    "for a value, as no type nests deeper")
    import json  # here: json costs start-up time, and only this path parses JSON

    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        why = f"give it as JSON: {exc.msg} at line {exc.lineno} column {exc.colno}"
    except ValueError:  # json reads integers with int(): refused past 4,300 digits
        why = f"out of range: a number of more than {sys.get_int_max_str_digits():,} digits"
    except RecursionError:  # pragma: no cover - 64 levels fit any stack Python starts with
        why = "nested too deep"
    raise _fail(name, expected, text, why)


def _nests_deeper(text: str, limit: int) -> bool:
    """Whether the arrays and objects of JSON ``text`` nest more than ``limit`` levels
    (brackets inside strings do not count): one pass, no recursion, stopping at the limit."""
    depth = 0
    in_string = escaped = False
    for ch in text:
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "[{":
            depth += 1
            if depth > limit:
                return True
        elif ch in "]}":
            depth -= 1
    return False


_COMPILERS: dict[tuple[int, int], _Compiler] = {}


def value_codec(btf: BTF, type_id: int, *, records: Mapping[str, type[StructValue]] | None = None,
                name: str = "value") -> ValueCodec:
    """A codec for BTF type ``type_id`` of ``btf`` (compiled once and cached per BTF).

    ``records`` maps struct names to :class:`StructValue` subclasses to decode them into;
    ``name`` starts the field paths in error messages (``value.comm``)."""
    compiler = _compiler(btf, records)
    return ValueCodec(btf, type_id, compiler.node(type_id), name)


def _compiler(btf: BTF, records: Mapping[str, type[StructValue]] | None) -> _Compiler:
    # One compiler (and so one enum class and StructValue class per BTF type) per BTF object and
    # records mapping; held on the BTF object so it lives as long as the BTF.
    cache: dict[int, _Compiler] | None = getattr(btf, "_value_compilers", None)
    if cache is None:
        cache = {}
        btf._value_compilers = cache  # type: ignore[attr-defined]
    key = id(records) if records else 0
    comp = cache.get(key)
    if comp is None or (records and comp.records != dict(records)):
        comp = cache[key] = _Compiler(btf, records)
    return comp

