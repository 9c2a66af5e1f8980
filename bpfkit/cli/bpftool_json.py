# SPDX-License-Identifier: Apache-2.0
"""Map entries as ``bpftool -j map dump`` prints them, driven by BTF (pure data, no syscalls).

    fmt = EntryFormatter(btf, key_type_id, value_type_id, key_size=4, value_size=16)
    fmt.entry(key_bytes, 0, value_bytes, 0)
    # '{"key":["0x01",...],"value":[...],"formatted":{"key":1,"value":{"a":2,...}}}'

The rules are bpftool's (tools/bpf/bpftool/btf_dumper.c, map.c), kind by kind:

- ints of 8/16/32/64 bits print as numbers (signed when BTF says so); ``bool`` as true/false;
  a BTF_INT_CHAR int as a one-character string; 128-bit ints and bitfields (a struct member
  with a bitfield size, or an int whose bits are not whole bytes) as hex strings ``"0x5"``;
- enums print the name of the first member with that value, else the number (read signed at
  the enum's size; ENUM64 compares all 64 bits and prints an unknown value as a signed int);
- an array of ``char`` (encoding CHAR or the name "char", after const/volatile but not
  typedefs) prints as a string when its bytes are printable ASCII up to a NUL inside the array,
  else as a list like any other array; pointers print as unsigned numbers;
- structs and unions print every member as ``{"name": value}`` in BTF order (anonymous members
  under the name ""), VARs as ``{"name": value}``, a DATASEC as ``{".bss": [{var}, ...]}``;
- an entry is ``{"key": [hex], "value": [hex], "formatted": {"key": K, "value": V}}``;
  per-CPU maps give ``"values": [{"cpu": i, "value": ...}]`` in both parts; "formatted" only
  when the map has value BTF, its "key" only when it has key BTF; map-in-map entries add
  "inner_map_id" (bpftool 7.2+).

Where bpftool prints something that is not JSON (a float: ``(unsupported-kind)``), this module
prints a JSON number (``null`` for NaN/inf and long double); other kinds a map value cannot
hold (FWD, FUNC...) print ``null``. docs/cli.md ("map dump") lists these differences.

Each type is compiled once into a template and a :class:`struct.Struct`: one ``unpack_from``
and one ``%`` per entry for the common struct of scalars, which is what makes a 100,000-entry
dump fast (benchmarks/bench_maps.py).
"""

from __future__ import annotations

import json
import math
import re
import struct
from collections.abc import Callable
from typing import Any

from ..btf.layout import FLOAT_FORMATS, INT_FORMATS, members
from ..btf.spec import BTF
from ..btf.types import (
    Array,
    Datasec,
    Enum,
    Enum64,
    Float,
    Int,
    IntEncoding,
    Kind,
    Pointer,
    Struct,
    Var,
)

__all__ = ["EntryFormatter", "TypeFormatter", "hex_bytes"]

Convert = Callable[[Any], str]
Render = Callable[[Any, int], str]

_MODS = frozenset({Kind.VOLATILE, Kind.CONST, Kind.RESTRICT, Kind.TYPE_TAG})  # libbpf's btf_is_mod
_RESOLVE = _MODS | {Kind.TYPEDEF, Kind.VAR}  # what btf__resolve_type skips
_PTR_FMT = "Q" if struct.calcsize("P") == 8 else "I"  # bpftool reads an unsigned long
_BOOL = {True: "true", False: "false"}.__getitem__
_TEXT = re.compile(rb"([\x20-\x7e]*)\x00").match


def hex_bytes(data: bytes | bytearray | memoryview) -> str:
    """``["0x01","0xab",...]``: bpftool's print_hex_data_json of a bytes-like object."""
    if not len(data):
        return "[]"
    return '["0x' + data.hex(" ").replace(" ", '","0x') + '"]'


def _hex_str(v: int) -> str:
    return f'"0x{v:x}"'  # btf_int128_print: upper half only when non-zero, so plain %x


def _float(v: float) -> str:
    return repr(v) if math.isfinite(v) else "null"


def _batch_hex(data: bytes) -> str:
    """``"0x01","0xab",`` for every byte: 7 characters a byte."""
    return '"0x' + data.hex(" ").replace(" ", '","0x') + '",' if data else ""


class _Layout:
    """A type's JSON text as a ``%`` template with one ``%s`` per slot, and the slots: (byte
    offset, struct format of one item, converter to text or None for ``str(value)``)."""

    __slots__ = ("template", "slots")

    def __init__(self, template: str = "", slots: list[tuple[int, str, Convert | None]] | None = None) -> None:
        self.template = template
        self.slots = slots if slots is not None else []

    def add(self, other: _Layout, offset: int) -> None:
        self.template += other.template
        self.slots.extend((o + offset, f, c) for o, f, c in other.slots)

    def text(self, literal: str) -> None:
        self.template += literal.replace("%", "%%")


def _leaf(fmt: str, conv: Convert | None = None) -> _Layout:
    return _Layout("%s", [(0, fmt, conv)])


def _literal(text: str) -> _Layout:
    out = _Layout()
    out.text(text)
    return out


def _compile(layout: _Layout) -> Render:
    """A function (buffer, offset) -> text for ``layout``: consecutive slots share one Struct;
    a slot before the end of the previous one (a union's members) starts another."""
    groups: list[tuple[int, str]] = []
    start, fmt, end = 0, "", 0
    for off, f, _ in layout.slots:
        if not groups and not fmt:
            start, fmt, end = off, f, off + struct.calcsize("<" + f)
            continue
        if off < end:
            groups.append((start, fmt))
            start, fmt, end = off, f, off + struct.calcsize("<" + f)
            continue
        fmt += f"{off - end}x{f}" if off > end else f
        end = off + struct.calcsize("<" + f)
    if fmt:
        groups.append((start, fmt))
    template = layout.template
    convs = tuple((i, c) for i, (_, _, c) in enumerate(layout.slots) if c is not None)
    structs = tuple((s, struct.Struct("<" + f).unpack_from) for s, f in groups)
    if not structs:
        text = template % ()
        return lambda buf, off: text
    if len(structs) == 1:
        (s0, unpack), = structs
        if not convs:
            return lambda buf, off: template % unpack(buf, off + s0)
        if len(convs) == 1:
            (i0, c0), = convs

            def one(buf: Any, off: int) -> str:
                v = unpack(buf, off + s0)
                return template % (*v[:i0], c0(v[i0]), *v[i0 + 1:])
            return one

    def render(buf: Any, off: int) -> str:
        v: list[Any] = []
        for s, unp in structs:
            v.extend(unp(buf, off + s))
        for i, c in convs:
            v[i] = c(v[i])
        return template % tuple(v)
    return render


class TypeFormatter:
    """bpftool's JSON for values of BTF types, compiled once per type id."""

    def __init__(self, btf: BTF, *, plain: bool = False) -> None:
        """``plain``: for people, not JSON: ``{name: value, ...}`` with unquoted names and
        ", " between items (strings stay quoted)."""
        self.btf = btf
        self._sep = ", " if plain else ","
        self._name: Callable[[str], str] = (lambda n: (n or "_") + ": ") if plain else (lambda n: json.dumps(n) + ":")
        self._layouts: dict[tuple[int, int], _Layout] = {}
        self._renders: dict[int, Render] = {}

    def render(self, type_id: int) -> Render:
        """A function (buffer, offset) -> the JSON text of the ``type_id`` value there."""
        fn = self._renders.get(type_id)
        if fn is None:
            fn = self._renders[type_id] = _compile(self.layout(type_id))
        return fn

    def format(self, type_id: int, data: Any, offset: int = 0) -> str:
        return self.render(type_id)(data, offset)

    def layout(self, type_id: int, bit_offset: int = 0) -> _Layout:
        key = (type_id, bit_offset)
        lay = self._layouts.get(key)
        if lay is None:
            lay = self._layouts[key] = self._build(type_id, bit_offset)
        return lay

    # btf_dumper_do_type
    def _build(self, type_id: int, bit_offset: int) -> _Layout:
        t = self.btf.type_by_id(type_id)
        kind = t.kind
        if kind == Kind.INT:
            assert isinstance(t, Int)
            return self._int(t, bit_offset)
        if isinstance(t, Struct):  # and Union
            return self._struct(t)
        if isinstance(t, Array):
            return self._array(t)
        if isinstance(t, Enum64):
            return self._enum64(t)
        if isinstance(t, Enum):
            return self._enum(t)
        if isinstance(t, Pointer):
            return _leaf(_PTR_FMT)
        if kind in (Kind.TYPEDEF, Kind.VOLATILE, Kind.CONST, Kind.RESTRICT):
            return self.layout(self._resolve(type_id), bit_offset)
        if isinstance(t, Var):
            out = _literal("{" + self._name(t.name))
            out.add(self.layout(t.type, bit_offset), 0)
            out.text("}")
            return out
        if isinstance(t, Datasec):
            out = _literal("{" + self._name(t.name) + "[")
            for i, m in enumerate(members(self.btf, t)):
                if i:
                    out.text(self._sep)
                out.add(self.layout(m.type), m.bit_offset // 8)
            out.text("]}")
            return out
        if isinstance(t, Float):
            # bpftool: "(unsupported-kind)", not JSON; a number here (docs/cli.md)
            f = FLOAT_FORMATS.get(t.size)
            return _leaf(f, _float) if f else _literal("null")
        return _literal("null")  # void, FWD, FUNC...: nothing a map value can hold

    def _resolve(self, type_id: int) -> int:
        """btf__resolve_type: skip typedefs, qualifiers and VARs."""
        t = self.btf.type_by_id(type_id)
        depth = 0
        while t.kind in _RESOLVE and depth < 32:
            type_id = t.type  # type: ignore[attr-defined]
            t = self.btf.type_by_id(type_id)
            depth += 1
        return type_id

    def _int(self, t: Int, bit_offset: int) -> _Layout:
        bits, enc = t.bits, int(t.encoding)
        if bit_offset or t.bit_offset or bits % 8:
            return self._bitfield(bit_offset + t.bit_offset, bits)
        if bits == 128:
            return _leaf("16s", lambda b: _hex_str(int.from_bytes(b, "little")))
        if enc == 0 or enc == IntEncoding.SIGNED:  # by its bits, not its size (bitfields above)
            fmt = INT_FORMATS.get((bits // 8, enc == IntEncoding.SIGNED))
            return _leaf(fmt) if fmt else self._bitfield(0, bits)
        if enc == IntEncoding.CHAR:
            # isprint() on a (signed) char: printable ASCII as itself, else "\u00XX"
            return _leaf("B", lambda c: json.dumps(chr(c)))
        if enc == IntEncoding.BOOL:
            return _leaf("?", _BOOL)
        return _literal("null")

    @staticmethod
    def _bitfield(bit_offset: int, bits: int) -> _Layout:
        """btf_dumper_bitfield: the bits as an unsigned hex string, from the byte holding the
        first bit (little-endian bitfield layout)."""
        byte, shift = bit_offset // 8, bit_offset % 8
        size = (shift + bits + 7) // 8
        mask = (1 << bits) - 1
        out = _leaf(f"{size}s", lambda b: _hex_str((int.from_bytes(b, "little") >> shift) & mask))
        out.slots[0] = (byte, f"{size}s", out.slots[0][2])
        return out

    def _struct(self, t: Struct) -> _Layout:
        out = _literal("{")
        for i, m in enumerate(members(self.btf, t)):
            out.text((self._sep if i else "") + self._name(m.name))
            if m.bitfield_size:
                out.add(self._bitfield(m.bit_offset % 8, m.bitfield_size), m.bit_offset // 8)
            else:
                out.add(self.layout(m.type, m.bit_offset % 8), m.bit_offset // 8)
        out.text("}")
        return out

    def _is_char(self, elem_id: int) -> bool:
        t = self.btf.type_by_id(elem_id)
        while t.kind in _MODS:  # not typedefs: a typedef of char is not a string to bpftool
            t = self.btf.type_by_id(t.type)  # type: ignore[attr-defined]
        return isinstance(t, Int) and t.size == 1 and (
            int(t.encoding) == IntEncoding.CHAR or t.name == "char")

    def _array(self, t: Array) -> _Layout:
        if not t.nelems:
            return _literal("[]")
        elem_size = self.btf.size_of(t.type)
        elems = _Layout("[")
        elem = self.layout(t.type)
        for i in range(t.nelems):
            if i:
                elems.text(self._sep)
            elems.add(elem, i * elem_size)
        elems.text("]")
        if not self._is_char(t.type):
            return elems
        as_list = _compile(elems)
        n = t.nelems

        cache: dict[bytes, str] = {}  # the same names (comm, ...) recur in most maps

        def text_or_list(raw: bytes) -> str:
            done = cache.get(raw)
            if done is not None:
                return done
            # is_str_array: printable ASCII (0x20..0x7e) up to a NUL inside the array
            text = _TEXT(raw)
            if text is None:
                return as_list(raw, 0)
            s = text.group(1)
            done = '"' + s.decode() + '"' if b'"' not in s and b"\\" not in s else json.dumps(s.decode())
            if len(cache) < 4096:
                cache[raw] = done
            return done
        return _leaf(f"{n}s", text_or_list)

    def _enum(self, t: Enum) -> _Layout:
        fmt = INT_FORMATS.get((t.size, True))  # read signed at its size, whatever the BTF says
        if fmt is None:
            return _literal("null")  # bpftool: -EINVAL
        names: dict[int, str] = {}
        for v in t.values:  # compared as the s32 the BTF holds; the first match wins
            names.setdefault(((v.value & 0xFFFFFFFF) ^ 0x80000000) - 0x80000000, json.dumps(v.name))
        get = names.get
        return _leaf(fmt, lambda x: get(x) or str(x))

    def _enum64(self, t: Enum64) -> _Layout:
        names: dict[int, str] = {}
        for v in t.values:
            names.setdefault(v.value & 0xFFFFFFFFFFFFFFFF, json.dumps(v.name))
        get = names.get
        # an unknown value is printed with jsonw_int: signed 64-bit
        return _leaf("Q", lambda x: get(x) or str(x - (1 << 64) if x >> 63 else x))


class EntryFormatter:
    """One map entry as bpftool -j prints it (see the module docstring). ``btf`` None, or
    ``value_type_id`` 0, gives hex only."""

    def __init__(self, btf: BTF | None, key_type_id: int, value_type_id: int, *, key_size: int,
                 value_size: int, percpu_cpus: int = 0, map_in_map: bool = False) -> None:
        self.key_size = key_size
        self.value_size = value_size
        self.ncpus = percpu_cpus
        self.slot = (value_size + 7) & ~7 if percpu_cpus else value_size  # per-CPU: 8-aligned
        self.map_in_map = map_in_map
        self.types = TypeFormatter(btf) if btf is not None and value_type_id else None
        self._key: Render | None = None
        self._value: Render | None = None
        if self.types is not None:
            self._key = self.types.render(key_type_id) if key_type_id else None
            self._value = self.types.render(value_type_id)


    def entries(self, kbuf: bytes, vbuf: bytes, count: int) -> list[str]:
        """The ``count`` entries of a batch: keys packed in ``kbuf``, values (value_buf_size
        each) in ``vbuf``. Hex is made once a batch: every byte becomes the 7 characters
        ``"0xNN",`` and an entry's list is one slice of that."""
        ks, vsz = self.key_size, self.value_buf_size
        if self.ncpus or self.map_in_map or not ks or not vsz:
            entry = self.entry
            return [entry(kbuf, i * ks, vbuf, i * vsz) for i in range(count)]
        khex, vhex = _batch_hex(kbuf), _batch_hex(vbuf)
        kw, vw = ks * 7, vsz * 7
        key, value = self._key, self._value
        if value is None:
            return [f'{{"key":[{khex[i * kw:i * kw + kw - 1]}],"value":[{vhex[i * vw:i * vw + vw - 1]}]}}'
                    for i in range(count)]
        if key is None:
            return [f'{{"key":[{khex[i * kw:i * kw + kw - 1]}],"value":[{vhex[i * vw:i * vw + vw - 1]}],'
                    f'"formatted":{{"value":{value(vbuf, i * vsz)}}}}}' for i in range(count)]
        return [f'{{"key":[{khex[i * kw:i * kw + kw - 1]}],"value":[{vhex[i * vw:i * vw + vw - 1]}],'
                f'"formatted":{{"key":{key(kbuf, i * ks)},"value":{value(vbuf, i * vsz)}}}}}' for i in range(count)]

    @property
    def value_buf_size(self) -> int:
        """Bytes one lookup fills: one 8-aligned slot per possible CPU for per-CPU maps."""
        return self.slot * self.ncpus if self.ncpus else self.value_size

    def _value_part(self, render: Render, vbuf: Any, voff: int) -> str:
        """``"value":V``, or per-CPU ``"values":[{"cpu":i,"value":V},...]`` (8-aligned slots)."""
        if not self.ncpus:
            return '"value":' + render(vbuf, voff)
        slot = self.slot
        return '"values":[' + ",".join(f'{{"cpu":{i},"value":{render(vbuf, voff + i * slot)}}}'
                                       for i in range(self.ncpus)) + "]"

    def _hex_value(self, vbuf: Any, voff: int) -> str:
        return hex_bytes(vbuf[voff:voff + self.value_size])

    def entry(self, kbuf: Any, koff: int, vbuf: Any, voff: int) -> str:
        """The entry whose key is at ``kbuf[koff:]`` and value at ``vbuf[voff:]`` (buffers:
        bytes or memoryview)."""
        parts = ['{"key":', hex_bytes(kbuf[koff:koff + self.key_size]), ",", self._value_part(self._hex_value, vbuf, voff)]
        if self.map_in_map:
            parts.append(f',"inner_map_id":{int.from_bytes(vbuf[voff:voff + 4], "little")}')
        if self._value is not None:
            parts.append(',"formatted":{')
            if self._key is not None:
                parts += ['"key":', self._key(kbuf, koff), ","]
            parts += [self._value_part(self._value, vbuf, voff), "}"]
        parts.append("}")
        return "".join(parts)

    @staticmethod
    def error(key: Any, message: str) -> str:
        """bpftool's entry for a key whose lookup failed: the value is {"error": strerror}."""
        return f'{{"key":{hex_bytes(key)},"value":{{"error":{json.dumps(message)}}}}}'
