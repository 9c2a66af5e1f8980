# SPDX-License-Identifier: Apache-2.0
"""bpfkit.btf.layout: the one BTF -> byte-layout walker and int -> struct-format table, and
that the modules laying out BTF values (codecs, bpftool JSON, event record formats, metrics
plans) read them instead of keeping their own (issue #36)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from bpfkit.btf import (
    BTF,
    Array,
    Datasec,
    Enum,
    EnumValue,
    Float,
    Int,
    IntEncoding,
    Member,
    Pointer,
    Struct,
    Typedef,
    Union,
    Var,
    VarSecinfo,
    Void,
)
from bpfkit.btf.layout import INT_FORMATS, leaves, members, scalar_format

PKG = Path(__file__).resolve().parent.parent / "bpfkit"
LAYOUT_READERS = ("btf/values.py", "cli/bpftool_json.py", "events/records.py", "metrics/plan.py")


def _btf() -> BTF:
    return BTF([
        Void(0, ""),
        Int(1, "int", 4, IntEncoding.SIGNED, 0, 32),
        Int(2, "_Bool", 1, IntEncoding.BOOL, 0, 8),
        Int(3, "three", 4, IntEncoding.NONE, 0, 3),             # an INT that is a bit range
        Enum(4, "e", 2, [EnumValue("A", 1)], signed=True),
        Pointer(5, "", 1),
        Float(6, "half", 2),
        Struct(7, "in", 8, [Member("a", 1, 0), Member("b", 1, 32)]),
        Union(8, "u", 4, [Member("x", 1, 0)]),
        Struct(9, "", 4, [Member("y", 1, 0)]),                   # anonymous, flattened by C
        Typedef(10, "in_t", 7),
        Struct(11, "out", 32, [Member("n", 10, 0), Member("u", 8, 64), Member("", 9, 96),
                               Member("f", 1, 128, 5), Member("arr", 12, 160)], kind_flag=True),
        Array(12, "", 1, 1, 3),
        Var(13, "v", 1),
        Datasec(14, ".data", 8, [VarSecinfo(13, 4, 4), VarSecinfo(13, 0, 4)]),
    ])


def test_scalar_format() -> None:
    b = _btf()
    assert [scalar_format(b.types[i]) for i in (1, 2, 3, 4, 5, 6, 7)] == ["i", "?", "", "h", "Q", "e", ""]
    assert INT_FORMATS[(8, False)] == "Q" and INT_FORMATS[(1, True)] == "b"


def test_leaves_open_structs_not_unions() -> None:
    b = _btf()
    got = [(".".join(m.name or "<anon>" for m in leaf.path), leaf.offset, leaf.type.kind.name, leaf.bitfield)
           for leaf in leaves(b, 11)]
    assert got == [("n.a", 0, "INT", False), ("n.b", 4, "INT", False), ("u", 8, "UNION", False),
                   ("<anon>.y", 12, "INT", False), ("f", 16, "INT", True), ("arr", 20, "ARRAY", False)]
    assert [leaf.path for leaf in leaves(b, 1)] == [()]  # a scalar is its own leaf
    shallow = [leaf.type.name for leaf in leaves(b, 11, lambda t, depth: depth < 1 and isinstance(t, Struct))]
    assert shallow == ["in", "u", "", "int", ""]


def test_members_of_a_data_section_are_its_vars_in_btf_order() -> None:
    b = _btf()
    assert [(m.name, m.type, m.bit_offset) for m in members(b, b.types[14])] == [("v", 13, 32), ("v", 13, 0)]


def _int_tables(source: str) -> list[str]:
    """Dict displays mapping sizes to struct's integer codes (``{8: "Q", ...}``, ``(8, False): "Q"``)."""
    return re.findall(r"""(?:\(\s*\d+\s*,\s*(?:True|False)\s*\)|\b\d+)\s*:\s*["'][bBhHiIqQ]["']""", source)


def test_one_int_to_struct_format_table() -> None:
    """Of the modules that lay out BTF-typed bytes (bpfkit.btf, events, metrics), only
    bpfkit.btf.layout maps integer sizes to struct codes (values.py and metrics/plan.py held the
    same table, bpftool_json.py and events/records.py two more of their own)."""
    found = {str(p.relative_to(PKG)) for d in ("btf", "events", "metrics") for p in (PKG / d).rglob("*.py")
             if _int_tables(p.read_text())}
    assert found == {"btf/layout.py"}


def test_layout_readers_import_the_layout_module() -> None:
    for rel in LAYOUT_READERS:
        tree = ast.parse((PKG / rel).read_text())
        names = {(node.module or "") + ":" + ",".join(a.name for a in node.names)
                 for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
        assert any("layout" in n for n in names), f"{rel} does not read bpfkit.btf.layout"


def test_btf_is_encoded_only_by_btf() -> None:
    """The BTF magic and kind numbers are bpfkit.btf's: the feature probes' blobs are made by
    its writer (features/_btf_kinds.py had a second encoder)."""
    magic = re.compile(r"0x[eE][bB]9[fF]\b")
    outside = {str(p.relative_to(PKG)) for p in PKG.rglob("*.py")
               if magic.search(p.read_text()) and p.parent.name != "btf"}
    assert outside == set()
