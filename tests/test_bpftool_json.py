# SPDX-License-Identifier: Apache-2.0
"""bpfkit.cli.bpftool_json on hand-made BTF: the cases the bpf/ objects cannot hold or bpftool
cannot print as JSON (integration/test_map_dump_bpftool.py compares the rest with bpftool)."""

from __future__ import annotations

import json
import struct

from bpfkit.btf import (
    BTF,
    Array,
    Datasec,
    Enum64,
    EnumValue,
    Float,
    Int,
    IntEncoding,
    Member,
    Struct,
    Typedef,
    Var,
    VarSecinfo,
    Void,
)
from bpfkit.cli.bpftool_json import EntryFormatter, TypeFormatter, hex_bytes


def _btf() -> BTF:
    return BTF([
        Void(0, ""),
        Int(1, "unsigned int", 4, IntEncoding.NONE, 0, 32),
        Float(2, "double", 8),
        Int(3, "char", 1, IntEncoding.CHAR, 0, 8),
        Enum64(4, "wide", 8, [EnumValue("W_ONE", 1), EnumValue("W_TOP", 1 << 63)]),
        # an old-style bitfield: an int of 3 bits (at bit 76: byte 9, bit 4), no kind_flag
        Int(5, "three", 4, IntEncoding.NONE, 0, 3),
        Struct(6, "s", 24, [Member("d", 2, 0), Member("c", 3, 64), Member("b", 5, 76),
                            Member("w", 4, 128)]),
        Array(7, "", 3, 1, 2),
        Typedef(8, "t", 7),
        Var(9, "v", 8),
        Datasec(10, ".data", 2, [VarSecinfo(9, 0, 2)]),
    ])


def test_kinds_bpftool_prints_oddly() -> None:
    types = TypeFormatter(_btf())
    raw = struct.pack("<d", 1.5) + b"\x07" + bytes([0b1010_0000]) + bytes(6) + (5).to_bytes(8, "little", signed=True)
    # float: bpftool prints "(unsupported-kind)" (not JSON); bpfkit a number. A BTF_INT_CHAR
    # non-printable char as "\u00XX"; the 3-bit int at bit 4 as a hex string; an enum64 value
    # without a name as a signed number.
    assert json.loads(types.format(6, raw)) == {"d": 1.5, "c": "\x07", "b": "0x2", "w": 5}
    top = struct.pack("<d", float("nan")) + b"A" + bytes(7) + (1 << 63).to_bytes(8, "little")
    assert types.format(6, top) == '{"d":null,"c":"A","b":"0x0","w":"W_TOP"}'
    neg = bytes(16) + (2**64 - 2).to_bytes(8, "little")
    assert json.loads(types.format(6, neg))["w"] == -2
    # a DATASEC of one VAR: an array of CHAR ints is a string when NUL-terminated, else a list
    assert types.format(10, b"a\0") == '{".data":[{"v":"a"}]}'
    assert types.format(10, b"ab") == '{".data":[{"v":["a","b"]}]}'


def test_entries() -> None:
    fmt = EntryFormatter(_btf(), 1, 1, key_size=4, value_size=4, percpu_cpus=2)
    value = (7).to_bytes(4, "little") + bytes(4) + (9).to_bytes(4, "little") + bytes(4)
    assert json.loads(fmt.entry(b"\x01\0\0\0", 0, value, 0)) == {
        "key": ["0x01", "0x00", "0x00", "0x00"],
        "values": [{"cpu": 0, "value": ["0x07", "0x00", "0x00", "0x00"]},
                   {"cpu": 1, "value": ["0x09", "0x00", "0x00", "0x00"]}],
        "formatted": {"key": 1, "values": [{"cpu": 0, "value": 7}, {"cpu": 1, "value": 9}]},
    }
    plain = EntryFormatter(None, 0, 0, key_size=2, value_size=0)
    assert plain.entry(b"\xab\xcd", 0, b"", 0) == '{"key":["0xab","0xcd"],"value":[]}'
    assert EntryFormatter.error(b"\x01", "Operation not supported") == \
        '{"key":["0x01"],"value":{"error":"Operation not supported"}}'
    assert hex_bytes(memoryview(b"\x00\xff")) == '["0x00","0xff"]'
    assert TypeFormatter(_btf(), plain=True).format(6, bytes(24)) == '{d: 0.0, c: "\\u0000", b: "0x0", w: 0}'
