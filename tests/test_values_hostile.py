# SPDX-License-Identifier: Apache-2.0
"""Values that do not fit their BTF types (issue #35, item 9), without a kernel: every one is a
BTFValueError naming the field path, the type and why, never struct.error, OverflowError,
UnicodeEncodeError, RecursionError, or the ValueError of repr() on an int of more than 4,300
digits; the message shows the value cut short. The `--set` words of the issue go through the
real command line (`python -m bpfkit load`, argv as bytes for the non-UTF-8 one), with a
PIN_DIR that is not on bpffs: nothing can load, and no privilege is needed. A hypothesis
property test throws JSON-like values of every shape at every type of two real objects
(bpf/values_hostile.bpf.c, bpf/maps_typed.bpf.c)."""

from __future__ import annotations

import functools
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import bpfkit
from bpfkit.btf import BTF, Array, Datasec, Struct, Union, Var
from bpfkit.btf.values import MAX_VALUE_DEPTH, Record, ValueCodec, describe_value, value_codec
from bpfkit.cli.cmd_load import apply_sets
from bpfkit.errors import BTFValueError, UsageError
from conftest import bpf_object

OBJECT = "values_hostile"


@pytest.fixture
def spec() -> bpfkit.CollectionSpec:
    return bpfkit.load_spec(bpf_object(OBJECT))


def codec_of(spec: bpfkit.CollectionSpec, variable: str) -> ValueCodec:
    codec: ValueCodec | None = spec.variables[variable].codec
    assert codec is not None
    return codec


def value_codec_of(spec: bpfkit.CollectionSpec, map_name: str = "vh_hash") -> ValueCodec:
    assert spec.btf is not None
    return value_codec(spec.btf, spec.maps[map_name].btf_value_type_id, name="value")


def nested(depth: int, leaf: object = 1) -> list[object]:
    """[[[...leaf...]]] ``depth`` lists deep, built without recursion."""
    value: list[object] = [leaf]
    for _ in range(depth - 1):
        value = [value]
    return value


# ---------------------------------------------------------------------------- the encoder
def test_a_float_past_its_format_is_out_of_range(spec: bpfkit.CollectionSpec) -> None:
    vc = value_codec_of(spec)
    with pytest.raises(BTFValueError) as err:  # was OverflowError: float too large to pack with f format
        vc.encode({"ratio": 1e39})
    assert str(err.value) == ("value.ratio: expected float (a number), got 1e+39 "
                              "(out of range: a float of 4 bytes holds at most ±3.4028235e+38)")
    assert err.value.path == "value.ratio" and err.value.value == 1e39
    with pytest.raises(BTFValueError, match=r"value.scale: expected double .* got an integer of 1,329 bits \(out of range"):
        vc.encode({"scale": 10 ** 400})  # was OverflowError: int too large to convert to float
    for fine in (3.4e38, -3.4e38, math.inf, -math.inf, 7):
        vc.encode({"ratio": fine})
    assert math.isnan(vc.decode(vc.encode({"ratio": math.nan})).ratio)  # type: ignore[attr-defined]


def test_a_lone_surrogate_in_a_char_array(spec: bpfkit.CollectionSpec) -> None:
    vc = value_codec_of(spec)
    with pytest.raises(BTFValueError) as err:  # was UnicodeEncodeError
        vc.encode({"pairs": [{}, {"name": "ab\udcff"}]})
    assert str(err.value) == ("value.pairs[1].name: expected char[6] (a string of up to 5 bytes, or bytes of up "
                              "to 6), got 'ab\\udcff' (not UTF-8 text: a lone surrogate U+DCFF at index 2)")


def test_a_huge_integer_is_described_by_its_size(spec: bpfkit.CollectionSpec) -> None:
    vc = value_codec_of(spec)
    for value, shown in ((1 << 20000, "an integer of 20,001 bits"), (-(1 << 20000), "a negative integer of 20,001 bits")):
        with pytest.raises(BTFValueError) as err:  # was ValueError: Exceeds the limit (4300 digits)
            vc.encode({"big": value})
        assert str(err.value) == ("value.big: expected __s64 (an integer in [-9223372036854775808, "
                                  f"9223372036854775807]), got {shown} (out of range)")
        assert err.value.value == value
    with pytest.raises(BTFValueError, match=r"value.grid\[1\]\[2\]: .* got an integer of 20,001 bits"):
        vc.encode({"grid": [[], [0, 0, 1 << 20000]]})
    with pytest.raises(BTFValueError, match=r"value.bits: expected unsigned int:5 .* got an integer of 20,001 bits"):
        vc.encode({"bits": 1 << 20000})


def test_a_deeply_nested_value_for_a_scalar(spec: bpfkit.CollectionSpec) -> None:
    vc = value_codec_of(spec)
    with pytest.raises(BTFValueError) as err:  # was RecursionError, from repr() in the message
        vc.encode({"small": nested(100_000)})
    assert str(err.value) == "value.small: expected __u8 (an integer in [0, 255]), got [[[...]]]"


def test_field_names_that_are_not_names(spec: bpfkit.CollectionSpec) -> None:
    vc = value_codec_of(spec)
    with pytest.raises(BTFValueError, match=r"value: .* \(a field name is not a string: an integer of 16,610 bits\)"):
        vc.encode({10 ** 5000: 1})  # was ValueError: str() of the key
    with pytest.raises(BTFValueError) as err:
        vc.encode({"x" * 100_000: 1})
    assert str(err.value).startswith("value.'" + "x" * 50 + "'...: expected struct vh_value")
    assert len(str(err.value)) < 400


@pytest.mark.parametrize("value, shown", [
    (1 << 300, "an integer of 301 bits"), ((1 << 200) - 1, str((1 << 200) - 1)), (-5, "-5"), (True, "True"),
    ("x" * 1000, "'" + "x" * 50 + "'..."), (b"\xff" * 100, repr(b"\xff" * 50) + "..."),
    (nested(10_000), "[[[...]]]"), ({"a": [1, {"b": 2}]}, "{'a': [1, {...}]}"), ((), "()"),
    (list(range(1000)), "[0, 1, 2, 3, 4, ...]"), (Record(a=1, b="x"), "StructValue(a=1, b='x')"),
    (memoryview(bytes(9)), "<memoryview of 9 bytes>"), (object(), "<object object>"), (1.5, "1.5"),
])
def test_describe_value(value: object, shown: str) -> None:
    assert describe_value(value) == shown


# ------------------------------------------ the same encoder: variables and skeletons
def test_variable_values_go_through_the_encoder(spec: bpfkit.CollectionSpec) -> None:
    v = spec.variables
    v["knob_f"].value = 5
    assert v["knob_f"].typed == 5.0  # the number (its int bytes were a denormal before)
    before = spec.maps[".rodata"].data
    with pytest.raises(UsageError) as err:  # was ValueError: str() of the int in the message
        v["knob_pid"].value = 10 ** 5000
    assert str(err.value).endswith("got an integer of 16,610 bits (out of range)")
    with pytest.raises(BTFValueError, match=r"cannot set variable 'knob_f': knob_f: .* got 1e\+39 \(out of range"):
        v["knob_f"].value = 1e39
    with pytest.raises(BTFValueError, match=r"cannot set variable 'knob_s': .* lone surrogate U"):
        v["knob_s"].value = "\udcff"
    with pytest.raises(BTFValueError, match=r"cannot set variable 'knob_st': knob_st: expected struct vh_value .* got 0$"):
        v["knob_st"].value = 0
    assert spec.maps[".rodata"].data == before


def test_skeleton_variables_refuse_the_same_values() -> None:
    skel = bpfkit.open(bpf_object(OBJECT))
    before = skel.spec.maps[".rodata"].data
    for name, value, why in [("knob_f", 1e39, "out of range: a float of 4 bytes"), ("knob_s", "\udcff", "lone surrogate"),
                             ("knob_pid", 10 ** 5000, "got an integer of 16,610 bits (out of range)"),
                             ("knob_arr", nested(100_000), "got [[[...]]]")]:
        with pytest.raises(BTFValueError) as err:
            setattr(skel, name, value)
        assert str(err.value).startswith(f"set variable {name!r}: {name}") and why in str(err.value)
    assert skel.spec.maps[".rodata"].data == before
    skel.knob_f = 0.25
    assert skel.knob_f == 0.25
    skel.close()


# ----------------------------------------------------------------- command-line words
def test_json_nested_past_the_limit_is_refused_before_parsing(spec: bpfkit.CollectionSpec) -> None:
    arr = codec_of(spec, "knob_arr")
    with pytest.raises(BTFValueError) as err:  # was RecursionError inside json.loads
        arr.from_text("[" * 50_000)
    assert str(err.value) == ("knob_arr: expected const volatile __u32[4] (a list of up to 4), got '"
                              + "[" * 50 + "'... (nested more than 64 levels deep: bpfkit's limit for a value, "
                              "as no type nests deeper)")
    deepest = "[" * MAX_VALUE_DEPTH + "]" * MAX_VALUE_DEPTH  # parsed, then refused by the type
    with pytest.raises(BTFValueError, match=r"knob_arr\[0\]: expected const volatile __u32 .*got \[\[\[\.\.\.\]\]\]$"):
        arr.from_text(deepest)
    with pytest.raises(BTFValueError, match="nested more than 64 levels deep"):
        arr.from_text("[" + deepest + "]")
    assert arr.from_text("[1, 2, 3]") == [1, 2, 3]
    with pytest.raises(BTFValueError, match=r"knob_st.label: .* \(100 bytes, too long\)$"):  # brackets in strings
        codec_of(spec, "knob_st").from_text('{"label": "' + "[" * 100 + '"}')              # do not nest


def test_words_of_many_digits(spec: bpfkit.CollectionSpec) -> None:
    with pytest.raises(BTFValueError) as err:  # hex has no digit limit: the int is made, then shown
        codec_of(spec, "knob_e").from_text("0x" + "f" * 5000)
    assert str(err.value).endswith("got an integer of 20,000 bits (out of range)")
    with pytest.raises(BTFValueError, match=r"\(out of range: a number of 5,000 digits\)$"):
        codec_of(spec, "knob_pid").from_text("9" * 5000)
    with pytest.raises(BTFValueError, match=r"knob_st: .*\(out of range: a number of more than 4,300 digits\)$"):
        codec_of(spec, "knob_st").from_text('{"big": ' + "9" * 5000 + "}")
    with pytest.raises(BTFValueError, match=r"knob_d: expected const volatile double \(a number\), got '1e400' "
                                            r"\(out of range: larger than any float\)"):
        codec_of(spec, "knob_d").from_text("1e400")  # was inf, silently
    assert codec_of(spec, "knob_d").from_text("-inf") == -math.inf


def test_command_line_bytes_for_a_char_array(spec: bpfkit.CollectionSpec) -> None:
    """argv bytes that are not UTF-8 arrive as surrogate escapes (PEP 383): a char array
    takes the bytes given; a surrogate no decoder made is refused."""
    knob_s = codec_of(spec, "knob_s")
    assert knob_s.from_text(os.fsdecode(b"caf\xe9")) == b"caf\xe9"
    apply_sets(spec, [os.fsdecode(b"knob_s=\xff\xfe")])
    assert spec.variables["knob_s"].raw == b"\xff\xfe" + bytes(6)
    with pytest.raises(BTFValueError, match=r"knob_s: .* got b'(\\xff){8}' \(8 bytes, too long: a word leaves room for the NUL\)"):
        knob_s.from_text(os.fsdecode(b"\xff" * 8))
    with pytest.raises(BTFValueError, match=r"lone surrogate U\+D800 at index 1"):
        knob_s.from_text("a\ud800")


def test_set_messages_show_the_argument_cut_short(spec: bpfkit.CollectionSpec) -> None:
    with pytest.raises(UsageError) as err:
        apply_sets(spec, ["knob_arr=" + "[" * 50_000])
    text = str(err.value)
    assert text.startswith("--set 'knob_arr=" + "[" * 41 + "'...: knob_arr: expected") and len(text) < 300
    before = spec.maps[".rodata"].data
    for item in ("knob_f=1e39", "knob_pid=" + "9" * 5000, 'knob_st={"label": "\\udcff"}'):
        with pytest.raises(BTFValueError):
            apply_sets(spec, [item])
    assert spec.maps[".rodata"].data == before  # nothing half-written


# --------------------------------------------------------- the real command line
def _load(tmp_path: Path, *sets: bytes) -> subprocess.CompletedProcess[bytes]:
    argv: list[str | bytes] = [sys.executable, "-m", "bpfkit", "load", str(bpf_object(OBJECT)), str(tmp_path / "pins")]
    for item in sets:
        argv += ["--set", item]
    return subprocess.run(argv, capture_output=True, timeout=120, check=False)


@pytest.mark.parametrize("item, message", [
    (b"knob_f=1e39", "--set 'knob_f=1e39': knob_f: expected const volatile float (a number), got 1e+39 "
                     "(out of range: a float of 4 bytes holds at most ±3.4028235e+38)"),
    (b"knob_arr=" + b"[" * 50_000, "--set 'knob_arr=" + "[" * 41 + "'...: knob_arr: expected const volatile __u32[4] "
                                   "(a list of up to 4), got '" + "[" * 50 + "'... (nested more than 64 levels "
                                   "deep: bpfkit's limit for a value, as no type nests deeper)"),
    (b'knob_st={"label": "\\udcff"}', "--set 'knob_st={\"label\": \"\\\\udcff\"}': knob_st.label: expected char[8] "
                                      "(a string of up to 7 bytes, or bytes of up to 8), got '\\udcff' "
                                      "(not UTF-8 text: a lone surrogate U+DCFF at index 0)"),
    (b"knob_e=0x" + b"f" * 5000, "--set 'knob_e=0x" + "f" * 41 + "'...: knob_e: expected const volatile enum vh_mode (an integer in "
                                 "[-2147483648, 4294967295]; a negative one as two's complement), got an integer of "
                                 "20,000 bits (out of range)"),
    (b"knob_s=" + b"\xff" * 8, "--set 'knob_s=" + "\\udcff" * 8 + "': knob_s: expected const volatile char[8] "
                                "(a string of up to 7 bytes, or bytes of up to 8), got b'" + "\\xff" * 8 + "' (8 bytes, too long: "
                                "a word leaves room for the NUL)"),
    (b"knob_pid=\xff", "--set 'knob_pid=\\udcff': knob_pid: expected const volatile __u32 (an integer in "
                       "[0, 4294967295]), got '\\udcff' (not an integer)"),
], ids=["float", "nesting", "surrogate", "digits", "bytes", "not-an-int"])
def test_cli_set_refuses_with_a_usage_error(tmp_path: Path, item: bytes, message: str) -> None:
    proc = _load(tmp_path, item)
    err = proc.stderr.decode(errors="backslashreplace")
    assert "Traceback" not in err and proc.returncode == 2, err
    assert err.startswith("bpfkit: error: " + message), err
    assert not (tmp_path / "pins").exists()


def test_cli_set_takes_non_utf8_bytes_for_a_char_array(tmp_path: Path) -> None:
    """A byte that is not UTF-8 (UnicodeEncodeError before): --set passes, and the command
    goes on to refuse PIN_DIR, which is not on bpffs."""
    proc = _load(tmp_path, b"knob_s=\xff", b"knob_f=-2.5")
    err = proc.stderr.decode(errors="backslashreplace")
    assert "Traceback" not in err and proc.returncode == 2, err
    assert "is not on a bpf filesystem" in err and not (tmp_path / "pins").exists()


# ------------------------------------------------------------ the property test
# Every type a value can be given for in both objects: variables, map keys and values, and
# every struct and union (so nested members are hit head-on too), each with a strategy that
# gives values of its shape with hostile leaves, or of any shape.
_INTS = st.one_of(st.integers(-300, 300), st.integers(), st.sampled_from([1 << 64, -(1 << 63) - 1, 255, 256]),
                  st.sampled_from([20000, -20000]).map(lambda b: (1 << abs(b)) * (1 if b > 0 else -1)))  # 6,000 digits
_FLOATS = st.one_of(st.floats(), st.sampled_from([1e39, -1e39, 65505.0, 1e308, 1e-320]))
_TEXT = st.text(st.characters(codec=None, exclude_categories=()), max_size=12)  # surrogates included
_LEAVES = st.one_of(st.none(), st.booleans(), _INTS, _FLOATS, _TEXT, st.binary(max_size=20),
                    st.sampled_from(["MT_BLUE", "VH_MANY", "PINK", "true"]))
_KEYS = st.one_of(st.deferred(lambda: st.sampled_from(_types()[1])), _TEXT)
VALUES = st.recursive(_LEAVES, lambda inner: st.one_of(
    st.lists(inner, max_size=5), st.dictionaries(_KEYS, inner, max_size=5),
    st.dictionaries(st.one_of(_KEYS, _INTS), inner, max_size=2)), max_leaves=25)


def _shaped(btf: BTF, type_id: int, depth: int = 0) -> st.SearchStrategy[object]:
    """Values shaped like BTF type ``type_id`` (dicts with its field names, lists as long as
    its arrays, one longer), any of whose parts may be any value instead."""
    t = btf.resolve(type_id)
    while isinstance(t, Var):
        t = btf.resolve(t.type)
    if depth > 8:
        return VALUES
    if isinstance(t, Array):
        return st.one_of(st.lists(_shaped(btf, t.type, depth + 1), max_size=t.nelems + 1), _LEAVES, VALUES)
    if isinstance(t, (Struct, Union)):
        fields: dict[object, st.SearchStrategy[object]] = {}
        for m in t.members:
            sub = btf.resolve(m.type)
            if m.name:
                fields[m.name] = _shaped(btf, m.type, depth + 1)
            elif isinstance(sub, (Struct, Union)):  # anonymous: its fields are the parent's
                fields.update({n.name: _shaped(btf, n.type, depth + 1) for n in sub.members if n.name})
        return st.one_of(st.fixed_dictionaries({}, optional=fields), _LEAVES, VALUES)
    return st.one_of(_LEAVES, VALUES)


@functools.cache
def _types() -> tuple[list[tuple[ValueCodec, st.SearchStrategy[object]]], list[str]]:
    found: list[tuple[ValueCodec, st.SearchStrategy[object]]] = []
    fields: set[str] = set()
    for name in (OBJECT, "maps_typed"):
        spec = bpfkit.load_spec(bpf_object(name))
        btf = spec.btf
        assert btf is not None
        records = [t for t in btf.types if isinstance(t, (Struct, Union))]
        fields |= {m.name for t in records for m in t.members if m.name}
        ids = {v.type_id for v in spec.variables.values() if v.type_id} | {t.id for t in records}
        ids |= {i for m in spec.maps.values() for i in (m.btf_key_type_id, m.btf_value_type_id) if i}
        for type_id in sorted(ids):
            if not isinstance(btf.resolve(type_id), Datasec):
                codec = value_codec(btf, type_id, name=f"{name}:{btf.type_name(type_id)}")
                found.append((codec, _shaped(btf, type_id)))
    return found, sorted(fields)


EXAMPLES = int(os.environ.get("BPFKIT_VALUES_EXAMPLES", "100"))  # each tried on every type


def _encodes_or_refuses(codec: ValueCodec, value: object) -> None:
    try:
        raw = codec.encode(value)
    except BTFValueError as exc:
        assert str(exc).startswith(codec.name) and len(str(exc)) < 1000
        return
    assert len(raw) == codec.size
    codec.decode(raw)


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_any_value_encodes_or_is_a_btf_value_error(data: st.DataObject) -> None:
    for codec, shaped in _types()[0]:
        _encodes_or_refuses(codec, data.draw(shaped, label=codec.name))


def _as_json(value: object) -> str:
    try:
        return json.dumps(value, ensure_ascii=False, default=lambda b: b.hex())
    except (ValueError, TypeError):  # ints past 4,300 digits, non-str keys
        return ""


WORDS = st.one_of(
    _TEXT, st.text(st.sampled_from('[]{}"\\:,0123456789xe.-+ '), max_size=40), VALUES.map(_as_json),
    st.sampled_from(["1e39", "-1e39", "1e400", "nan", "0x" + "f" * 5000, "9" * 5000, "[" * 50_000, "{" * 50_000,
                     '"\\udcff"', '{"label": "\\udcff"}', "\udcff", "true", "-0", "0b102"]),
)


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), word=WORDS)
def test_any_word_parses_or_is_a_btf_value_error(data: st.DataObject, word: str) -> None:
    for codec, shaped in _types()[0]:
        for text in (word, _as_json(data.draw(shaped, label=codec.name))):
            try:
                codec.from_text(text)
            except BTFValueError as exc:
                assert str(exc).startswith(codec.name) and len(str(exc)) < 1000
