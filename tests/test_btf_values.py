# SPDX-License-Identifier: Apache-2.0
"""bpfkit.btf.values: BTF-typed values decoded and encoded without a kernel, on the BTF of
bpf/maps_typed.bpf.c (structs, unions, nested, bitfields, enums, char arrays, arrays of
structs, anonymous members) and the per-CPU layout of batches."""

from __future__ import annotations

import enum
import struct
import time

import pytest

import bpfkit
from bpfkit.btf import BTF, Int, IntEncoding, Member, Struct
from bpfkit.btf.values import Record, ValueCodec, value_codec
from bpfkit.errors import BTFValueError, UsageError
from conftest import bpf_object

FULL = {
    "count": 3, "delta": -7, "color": "MT_BLUE", "sign": -1, "comm": "bash",
    "in": {"port": 8080, "proto": 6}, "addr": {"v4": 0x0100007F},
    "fl": {"a": 5, "b": 17, "c": -3, "d": 1000000, "e": "MT_BLUE"},
    "hops": [{"port": 1}, {}, {"port": 53, "proto": 17}], "slots": [1, 2, 3, 4], "on": True,
    "anon_u": 0xABCD, "y": 9, "ptr": 0xFFFF888000000000, "raw": b"\xff", "mac": [1, 2, 3, 4, 5, 6],
}


@pytest.fixture(scope="module")
def spec() -> bpfkit.CollectionSpec:
    return bpfkit.load_spec(bpf_object("maps_typed"))


def codec(spec: bpfkit.CollectionSpec, map_name: str, which: str = "value") -> ValueCodec:
    m = spec.maps[map_name]
    assert spec.btf is not None
    type_id = m.btf_key_type_id if which == "key" else m.btf_value_type_id
    return value_codec(spec.btf, type_id, name=which)


def test_struct_round_trip_every_shape(spec: bpfkit.CollectionSpec) -> None:
    vc = codec(spec, "typed_hash")
    assert vc.size == 128 and vc.type_name == "struct mt_value"
    raw = vc.encode(FULL)
    assert len(raw) == 128
    v = vc.decode(raw)
    assert isinstance(v, Record) and type(v).__name__ == "mt_value"
    assert v.count == 3 and v.delta == -7 and v.comm == "bash"
    assert v.color == 7 and isinstance(v.color, enum.IntEnum) and v.color.name == "MT_BLUE"
    assert v.sign.name == "MT_NEG" and v.sign == -1
    assert getattr(v, "in") == {"port": 8080, "proto": 6}  # "in" is a Python keyword
    assert v.addr.v4 == 0x0100007F and v.addr.v6[:4] == [0x7F, 0, 0, 1]  # a union: every member
    assert v.fl == {"a": 5, "b": 17, "c": -3, "d": 1000000, "e": 7}  # bitfields, signed and enum
    assert v.fl.e.name == "MT_BLUE"
    assert v.hops == [{"port": 1, "proto": 0}, {"port": 0, "proto": 0}, {"port": 53, "proto": 17}]
    assert v.slots == [1, 2, 3, 4] and v.on is True
    assert (v.anon_u, v.anon_h, v.x, v.y) == (0xABCD, 0xABCD, 0, 9)  # anonymous members flattened
    assert v.ptr == 0xFFFF888000000000
    assert v.raw == b"\xff\0\0\0"  # unsigned char[] that is not text stays bytes
    assert v.mac == [1, 2, 3, 4, 5, 6]  # __u8[] (a typedef, not char): a list, as bpftool
    assert v._fields[:5] == ("count", "delta", "color", "sign", "comm")
    assert vc.encode(v) == raw  # a decoded value encodes back to the same bytes
    d = v.to_dict()
    assert d["hops"][2] == {"port": 53, "proto": 17} and isinstance(d["addr"], dict)
    assert v == d and d == v and v == vc.decode(raw)


def test_key_struct_with_char_array(spec: bpfkit.CollectionSpec) -> None:
    kc = codec(spec, "typed_hash", "key")
    raw = kc.encode(Record(pid=42, comm="sh"))
    assert raw == struct.pack("=I16s", 42, b"sh")
    assert kc.decode(raw) == {"pid": 42, "comm": "sh"}
    assert repr(kc.decode(raw)) == "mt_key(pid=42, comm='sh')"
    assert kc.decode(struct.pack("=I16s", 1, b"\xff\xfe")).comm == b"\xff\xfe" + bytes(14)  # not text


def test_scalar_and_enum_values(spec: bpfkit.CollectionSpec) -> None:
    lru = codec(spec, "typed_lru")
    assert lru.decode(struct.pack("=I", 1)).name == "MT_GREEN"
    assert lru.decode(struct.pack("=I", 99)) == 99 and type(lru.decode(struct.pack("=I", 99))) is int
    assert lru.encode("MT_BLUE") == lru.encode(7) == struct.pack("=I", 7)
    assert codec(spec, "typed_lru", "key").decode(struct.pack("=Q", 2**64 - 1)) == 2**64 - 1
    enum_cls = type(lru.decode(struct.pack("=I", 0)))
    assert lru.encode(enum_cls.MT_BLUE) == struct.pack("=I", 7)  # type: ignore[attr-defined]


def test_enum_class_built_once_per_btf(spec: bpfkit.CollectionSpec) -> None:
    a = codec(spec, "typed_lru").decode(struct.pack("=I", 1))
    b = codec(spec, "typed_hash").decode(codec(spec, "typed_hash").encode({"color": 1})).color  # type: ignore[attr-defined]
    assert type(a) is type(b)


@pytest.mark.parametrize("value, message", [
    ({"count": -1}, "value.count: expected __u64 (an integer in [0, 18446744073709551615]), got -1 (out of range)"),
    ({"comm": "x" * 16},
     "value.comm: expected char[16] (a string of up to 15 bytes, or bytes of up to 16), got 'xxxxxxxxxxxxxxxx' (16 bytes, too long)"),
    ({"color": "PINK"},
     "value.color: expected enum mt_color member (MT_RED, MT_GREEN, MT_BLUE) or an integer, got 'PINK' (no such member)"),
    ({"fl": {"c": 8}}, "value.fl.c: expected int:4 (an integer in [-8, 7]), got 8 (out of range)"),
    ({"hops": [{}, {}, {"port": 70000}]}, "value.hops[2].port: expected __u16 (an integer in [0, 65535]), got 70000 (out of range)"),
    ({"hops": [{}] * 4}, "value.hops: expected struct mt_inner[3] (a list of up to 3), got [{}, {}, {}, {}] (4 elements given)"),
    ({"on": 2}, "value.on: expected _Bool (true or false), got 2 (out of range)"),
    ({"slots": "abc"}, "value.slots: expected __u32[4] (a list of up to 4), got 'abc'"),
    ({"delta": 1.5}, "value.delta: expected __s32 (an integer in [-2147483648, 2147483647]), got 1.5"),
    ({"addr": {"v4": 1, "v6": [2]}}, "members of a union given with different bytes"),
    ({"nope": 1}, "value.nope: expected struct mt_value (a Record or dict with fields count, delta"),
    (5, "value: expected struct mt_value"),
    (b"short", "(5 bytes given, the type has 128)"),
])
def test_encode_errors_name_path_type_and_range(spec: bpfkit.CollectionSpec, value: object, message: str) -> None:
    with pytest.raises(BTFValueError) as err:
        codec(spec, "typed_hash").encode(value)
    assert message in str(err.value)
    assert isinstance(err.value, UsageError) and isinstance(err.value, ValueError)


def test_bytes_pass_through_and_short_input(spec: bpfkit.CollectionSpec) -> None:
    vc = codec(spec, "typed_hash")
    raw = vc.encode(FULL)
    assert vc.encode(raw) == raw
    assert getattr(vc.decode(vc.encode({"in": struct.pack("=HBx", 80, 6)})), "in") == {"port": 80, "proto": 6}
    with pytest.raises(BTFValueError, match="3 bytes to decode"):
        vc.decode(b"abc")


def test_per_cpu_layout_decodes_with_a_stride(spec: bpfkit.CollectionSpec) -> None:
    # A per-CPU value of struct mt_inner (4 bytes) sits in an 8-byte slot per CPU.
    vc = codec(spec, "typed_pcpu_hash")
    raw = b"".join(vc.encode({"port": cpu, "proto": 17}) + bytes(4) for cpu in range(4))
    assert vc.decode_many(raw, 4, stride=8) == [{"port": cpu, "proto": 17} for cpu in range(4)]


def test_datasec_decodes_as_its_variables(spec: bpfkit.CollectionSpec) -> None:
    rodata = spec.maps[".rodata"]
    assert spec.btf is not None and rodata.data is not None
    knobs = value_codec(spec.btf, rodata.btf_value_type_id).decode(rodata.data)
    assert knobs == {"target_pid": 0, "enabled": True, "delta": -1, "color": 1, "tag": "tag", "hidden_knob": 3}


def test_from_text(spec: bpfkit.CollectionSpec) -> None:
    assert spec.btf is not None
    v = spec.variables
    text = {name: value_codec(spec.btf, var.type_id, name=name) for name, var in v.items()}
    assert text["target_pid"].from_text("0x10") == 16 and text["target_pid"].from_text("010") == 10
    assert text["delta"].from_text("-5") == -5
    assert text["enabled"].from_text("false") is False and text["enabled"].from_text("1") is True
    assert text["color"].from_text("MT_BLUE") == "MT_BLUE" and text["color"].from_text("7") == 7
    assert text["tag"].from_text("hello") == "hello"
    with pytest.raises(BTFValueError, match=r"target_pid: expected .*\[0, 4294967295\].*got -1 \(out of range\)"):
        text["target_pid"].from_text("-1")
    with pytest.raises(BTFValueError, match="not an integer"):
        text["target_pid"].from_text("many")
    with pytest.raises(BTFValueError, match="not a boolean"):
        text["enabled"].from_text("maybe")
    with pytest.raises(BTFValueError, match="8 bytes, too long"):
        text["tag"].from_text("12345678")
    hops = value_codec(spec.btf, spec.maps["typed_hash"].btf_value_type_id)
    assert hops.from_text('{"count": 1, "comm": "x"}') == {"count": 1, "comm": "x"}  # JSON for structs


def test_handmade_btf_int128_odd_bits_and_records_mapping() -> None:
    btf = BTF()
    u128 = btf.add(Int(0, "unsigned __int128", 16, IntEncoding.NONE, 0, 128))
    u8 = btf.add(Int(0, "unsigned char", 1, IntEncoding.NONE, 0, 8))
    pair = btf.add(Struct(0, "pair", 24, [Member("big", u128, 0), Member("small", u8, 128)]))

    class Pair(Record):
        def total(self) -> int:
            return int(self.big) + int(self.small)  # type: ignore[attr-defined]

    pc = value_codec(btf, pair, records={"pair": Pair})
    raw = pc.encode({"big": 2**100, "small": 1})
    got = pc.decode(raw)
    assert isinstance(got, Pair) and got.total() == 2**100 + 1


def test_decode_is_fast(spec: bpfkit.CollectionSpec) -> None:
    # The benchmark dumps 100,000 entries; decoding keys alone must stay well under a second.
    kc = codec(spec, "typed_hash", "key")
    raw = kc.encode({"pid": 1, "comm": "bash"}) * 1000
    start = time.perf_counter()
    for _ in range(100):
        kc.decode_many(raw, 1000)
    assert time.perf_counter() - start < 2.0


def test_records_and_btf_enums_print_as_json(spec: bpfkit.CollectionSpec) -> None:
    import io
    import json

    from bpfkit.cli.output import print_json

    vc = codec(spec, "typed_hash")
    out = io.StringIO()
    print_json(vc.decode(vc.encode({"color": "MT_BLUE", "comm": "x", "hops": [{"port": 5}]})), out)
    got = json.loads(out.getvalue())
    assert got["color"] == "MT_BLUE" and got["comm"] == "x" and got["hops"][0] == {"port": 5, "proto": 0}
    assert got["fl"]["e"] == "MT_RED" and got["raw"] == ""  # zero bytes: empty text
