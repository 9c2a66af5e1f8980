# SPDX-License-Identifier: Apache-2.0
"""A full BTF parse (BTF.from_bytes without lazy): types built kind by kind with every name
offset and type reference checked up front, members/params/enum values decoded on first use
(bpfkit.btf.spec._build_all, bpfkit.btf.types._Deferred). It must accept and reject exactly
what decoding type by type does (spec._decode_all, the parse before), with the same message,
and build the same types. Pure; the vmlinux test reads /sys/kernel/btf/vmlinux as a file."""

from __future__ import annotations

import copy
import os
import pickle
import random
import struct

import pytest

from bpfkit.btf import BTF, Enum64, EnumValue, Func, FuncProto, Linkage, Member, Param, Struct, Typedef
from bpfkit.btf.spec import _decode_all
from bpfkit.errors import ParseError

from .test_btf import _build

VMLINUX = "/sys/kernel/btf/vmlinux"


def _every_kind() -> BTF:
    """test_btf's BTF of every kind, and what its lists lack: a struct without members, a
    prototype without params, signed 64-bit values, a named type after the lists."""
    btf = _build()
    u32, pair = btf.lookup("unsigned int").id, btf.lookup("pair").id
    btf.add(Struct(0, "empty", 0, []))
    btf.add(Struct(0, "bits2", 4, [Member("", u32, 3, 29)], kind_flag=True))
    btf.add(Enum64(0, "big2", 8, [EnumValue("HUGE", 1 << 40), EnumValue("LOW", -2)], signed=True))
    btf.add(Func(0, "g", btf.add(FuncProto(0, "", 0, [])), Linkage.STATIC))
    btf.add(Typedef(0, "pair_t", pair))
    return btf


def _fields(t: object) -> list[object]:
    """A type's class and every field (its list decoded), for comparing two parses."""
    out: list[object] = [type(t)]
    for cls in type(t).__mro__:
        out += [(f, getattr(t, f)) for f in cls.__dict__.get("__slots__", ()) if f != "_src"]
    return out


def _outcome(parse, blob: bytes):
    try:
        return [_fields(t) for t in parse(blob)]
    except ParseError as e:
        return str(e)


def _full(blob: bytes) -> list[object]:
    return BTF.from_bytes(blob).types[1:]


def _one_by_one(blob: bytes) -> list[object]:
    """Own types as decoding them one by one in id order does (header and scan errors as a
    lazy parse reports them: the same checks)."""
    lazy = BTF.from_bytes(blob, lazy=True)
    assert lazy._words is not None and lazy._starts is not None
    return _decode_all(lazy._words, lazy._starts, lazy.first_id, lazy.strings)


def test_full_parse_builds_what_one_by_one_decoding_builds():
    blob = _every_kind().to_bytes()
    full = BTF.from_bytes(blob)
    assert [_fields(t) for t in full.types[1:]] == [_fields(t) for t in _one_by_one(blob)]
    assert full.to_bytes() == blob
    assert [v.value for v in full.lookup("big2").values] == [1 << 40, -2]


@pytest.mark.parametrize("lazy", [False, True])
def test_a_blob_in_bytes_is_read_in_place_and_any_other_buffer_copied(lazy):
    """bytes are read through a memoryview (they cannot change); a bytearray, or a view of
    one, is copied: the parse neither sees later changes nor stops it from being resized."""
    blob = _every_kind().to_bytes()
    want = [_fields(t) for t in BTF.from_bytes(blob).types[1:]]
    for data in (bytearray(blob), memoryview(bytearray(blob))):
        btf = BTF.from_bytes(data, lazy=lazy)
        buffer = data.obj if isinstance(data, memoryview) else data
        if isinstance(data, memoryview):
            data.release()
        buffer[24:] = bytes(len(buffer) - 24)  # the types zeroed
        buffer.extend(b"\0" * 4096)  # BufferError if the parse still held a view of it
        assert [_fields(t) for t in btf.types[1:]] == want
    btf = BTF.from_bytes(blob, lazy=lazy)
    assert [_fields(t) for t in btf.types[1:]] == want


def test_every_corrupted_word_is_reported_as_one_by_one_decoding_does():
    """Each word of the type section set to values that break a check (the first id past the
    last type, the string section's length, a FUNC info word with linkage 3, ...): a full
    parse raises the message decoding type by type raises, or builds the same types."""
    blob = _every_kind().to_bytes()
    hdr = struct.unpack_from("<HBBIIIII", blob)
    type_len, str_len = hdr[5], hdr[7]
    count = len(BTF.from_bytes(blob, lazy=True))
    values = [count, count - 1, str_len, str_len - 1, 1, 0, (12 << 24) | 3, (14 << 24), 0xFFFFFFFF]
    errors = 0
    for at in range(24, 24 + type_len, 4):
        for value in values:
            bad = bytearray(blob)
            struct.pack_into("<I", bad, at, value)
            got, want = _outcome(_full, bytes(bad)), _outcome(_one_by_one, bytes(bad))
            assert got == want, (at, value)
            errors += isinstance(got, str)
    assert errors > 100  # the corruptions do break checks


def test_of_several_bad_types_the_first_in_id_order_is_reported():
    blob = _every_kind().to_bytes()
    type_len = struct.unpack_from("<HBBIIIII", blob)[5]
    count = len(BTF.from_bytes(blob, lazy=True))
    rng = random.Random(22)
    for _ in range(300):
        bad = bytearray(blob)
        for at in rng.sample(range(24, 24 + type_len, 4), 2):
            struct.pack_into("<I", bad, at, rng.choice([count, count + 5, 0x7FFFFF, (12 << 24) | 7]))
        got, want = _outcome(_full, bytes(bad)), _outcome(_one_by_one, bytes(bad))
        assert got == want


def test_split_btf_full_parse_checks_against_the_base():
    base = BTF.from_bytes(_every_kind().to_bytes())
    split = BTF(base=base, name="mod")
    u32 = base.lookup("unsigned int").id
    split.add(Struct(0, "mod_thing", 8, [Member("a", u32, 0), Member("pair", base.lookup("pair").id, 32)]))
    split.add(FuncProto(0, "", u32, [Param("x", u32)]))
    blob = split.to_bytes()
    parsed = BTF.from_bytes(blob, base=base)
    thing = parsed.lookup("mod_thing")
    assert [(m.name, m.type) for m in thing.members] == [("a", u32), ("pair", base.lookup("pair").id)]
    assert parsed.to_bytes() == blob
    bad = bytearray(blob)
    struct.pack_into("<I", bad, 24 + 12 + 12 + 4, len(parsed.types))  # pair's type: one past the last
    with pytest.raises(ParseError, match=f"refers to type {len(parsed.types)}, which does not exist"):
        BTF.from_bytes(bytes(bad), base=base)


def test_lists_are_decoded_once_on_first_use_and_survive_copies():
    full = BTF.from_bytes(_every_kind().to_bytes())
    pair, proto, color = full.lookup("pair"), full.types[full.lookup("f").type], full.lookup("color")
    assert isinstance(pair, Struct) and isinstance(proto, FuncProto)
    assert all(hasattr(t, "_src") for t in (pair, proto, color))  # not decoded yet
    clone = copy.deepcopy(pair)  # decodes first: the copy has its own members
    assert [m.name for m in clone.members] == ["a", "b"] and not hasattr(pair, "_src")
    assert pair.members is pair.members and pair.members == clone.members
    assert pickle.loads(pickle.dumps(proto)).params == [Param("x", 1), Param("", 7)]  # u32, the pointer
    assert [v.name for v in color.values] == ["RED", "NEG"]
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        pair.nope  # noqa: B018
    pair.members = [Member("only", 1, 0)]  # assignable as before
    assert full.lookup("pair").members[0].name == "only"
    assert [t.name for t in full.copy().lookup("either").members] == ["a", "b"]


@pytest.mark.skipif(not os.path.exists(VMLINUX), reason="no kernel BTF")
def test_vmlinux_full_parse_agrees_with_one_by_one_decoding():
    with open(VMLINUX, "rb") as f:
        data = f.read()
    full = BTF.from_bytes(data, name="vmlinux")
    reference = _one_by_one(data)
    assert len(full.types) == len(reference) + 1
    assert all(_fields(a) == _fields(b) for a, b in zip(full.types[1:], reference))


def _member_names(blob: bytes, name: str) -> list[str]:
    t = BTF.from_bytes(blob).lookup(name)
    assert isinstance(t, Struct)
    return [m.name for m in t.members]


def test_to_bytes_copies_lists_nobody_read_and_encodes_the_rest() -> None:
    """A full parse leaves lists undecoded; to_bytes copies those entries as they were (their
    name offsets hold: the string table only grows) and encodes every list that was read, set
    or came from another blob, so what was changed is what is written."""
    blob = _every_kind().to_bytes()
    assert BTF.from_bytes(blob).to_bytes() == blob  # nothing read: every list copied
    read = BTF.from_bytes(blob)
    for t in read.types[1:]:
        for attr in ("members", "values", "params"):
            getattr(t, attr, None)
    assert read.to_bytes() == blob  # every list decoded, then encoded: the same bytes

    edited = BTF.from_bytes(blob)
    pair = edited.lookup("pair")
    assert isinstance(pair, Struct)
    pair.members = [Member("first", pair.members[0].type, 0)]  # set, with the old list read
    bits = edited.lookup("bits")
    assert isinstance(bits, Struct)
    bits.members[0].name = "renamed"  # changed in place
    out = edited.to_bytes()
    assert _member_names(out, "pair") == ["first"] and _member_names(out, "bits") == ["renamed", "y"]

    set_unread = BTF.from_bytes(blob)
    either = set_unread.lookup("either")
    assert isinstance(either, Struct)
    object.__setattr__(either, "members", [Member("only", 1, 0)])  # set before anything read it
    assert _member_names(set_unread.to_bytes(), "either") == ["only"]

    # A struct taken unread from one blob into another BTF, whose strings differ: its members
    # are decoded from their own blob and their names added to the new table.
    elsewhere = BTF()
    elsewhere.add(Typedef(0, "padding_to_shift_offsets", 0))
    moved = BTF.from_bytes(blob).lookup("pair")
    elsewhere.add(moved)
    assert _member_names(elsewhere.to_bytes(), "pair") == ["a", "b"]
