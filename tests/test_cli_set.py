# SPDX-License-Identifier: Apache-2.0
"""``--set NAME=VALUE`` (bpfkit load/attach) typed through BTF, without a kernel: what each
kind of variable of bpf/maps_typed.bpf.c accepts and the errors users see."""

from __future__ import annotations

import pytest

import bpfkit
from bpfkit.cli.cmd_load import apply_sets
from bpfkit.errors import BTFValueError, NotFoundError, UsageError
from conftest import bpf_object


@pytest.fixture
def spec() -> bpfkit.CollectionSpec:
    return bpfkit.load_spec(bpf_object("maps_typed"))


def test_values_of_every_kind(spec: bpfkit.CollectionSpec) -> None:
    apply_sets(spec, ["target_pid=0x10", "enabled=false", "delta=-5", "color=MT_BLUE", "tag=hello",
                      "hits=hex:0200000000000000", "step=3"])
    v = spec.variables
    assert v["target_pid"].typed == 16 and v["enabled"].typed is False and v["delta"].typed == -5
    assert v["color"].typed.name == "MT_BLUE" and v["tag"].typed == "hello"  # type: ignore[attr-defined]
    assert v["hits"].typed == 2 and v["step"].typed == 3
    assert v["tag"].raw == b"hello\0\0\0"
    apply_sets(spec, ["color=1", "enabled=1", "tag="])
    assert v["color"].typed.name == "MT_GREEN" and v["enabled"].typed is True and v["tag"].typed == ""  # type: ignore[attr-defined]


@pytest.mark.parametrize("item, error, message", [
    ("nope=1", NotFoundError,
     "--set 'nope=1': the object has no variable 'nope' (settable: color, delta, enabled, hits, step, tag, target_pid)"),
    ("hidden_knob=1", UsageError, "--set 'hidden_knob=1': 'hidden_knob' is a static variable"),
    ("target_pid=-2147483649", BTFValueError,  # -1 is 0xffffffff, as the API takes it (tests/test_cli_knobs_39.py)
     "--set 'target_pid=-2147483649': target_pid: expected const volatile __u32 (an integer in [-2147483648, "
     "4294967295]; a negative one as two's complement), got -2147483649 (out of range)"),
    ("delta=0x80000000", BTFValueError, "delta: expected const volatile __s32 (an integer in [-2147483648, 2147483647])"),
    ("tag=toolongtag", BTFValueError,
     "--set 'tag=toolongtag': tag: expected const volatile char[8] (a string of up to 7 bytes, or bytes of up to 8), "
     "got 'toolongtag' (10 bytes, too long)"),
    ("color=PINK", BTFValueError, "color: expected enum mt_color member (MT_RED, MT_GREEN, MT_BLUE) or an integer, "
                                  "got 'PINK' (no such member, nor an integer)"),
    ("enabled=maybe", BTFValueError, "enabled: expected const volatile bool (true or false), got 'maybe'"),
    ("target_pid=many", BTFValueError, "got 'many' (not an integer)"),
    ("target_pid", UsageError, "--set 'target_pid': expected NAME=VALUE"),
    ("hits=hex:zz", UsageError, "--set 'hits=hex:zz': 'zz' is not hex"),
])
def test_errors(spec: bpfkit.CollectionSpec, item: str, error: type[Exception], message: str) -> None:
    with pytest.raises(error) as err:
        apply_sets(spec, [item])
    assert message in str(err.value)


def test_attach_and_load_take_set() -> None:
    from bpfkit.cli.main import build_parser

    parser = build_parser()
    for argv in (["attach", "x.o", "--set", "a=1", "--set", "b=x"], ["load", "x.o", "/sys/fs/bpf/x", "--set", "a=1", "--set", "b=x"]):
        assert parser.parse_args(argv).set == ["a=1", "b=x"]


def test_map_size_numbers_of_many_digits(spec: bpfkit.CollectionSpec) -> None:
    """--map-size with a number of thousands of digits (issue #35): the message shows it cut
    short, where str() of the number in it was a ValueError (a traceback)."""
    from bpfkit.cli.cmd_load import apply_map_sizes

    with pytest.raises(UsageError) as err:
        apply_map_sizes(spec, ["typed_hash.max_entries=0x" + "f" * 5000])
    assert str(err.value) == ("--map-size 'typed_hash.max_entries=0xfffffffffffffffffffffffff'...: an integer of "
                              "20,000 bits does not fit the kernel's u32 max_entries")
    with pytest.raises(UsageError, match=r"^--map-size 'typed_hash.max_entries=9+'...: '9+'... is not an integer"):
        apply_map_sizes(spec, ["typed_hash.max_entries=" + "9" * 5000])


def test_set_shows_a_long_argument_cut_short(spec: bpfkit.CollectionSpec) -> None:
    with pytest.raises(NotFoundError) as err:
        apply_sets(spec, ["x" * 100_000 + "=1"])
    assert str(err.value).startswith("--set '" + "x" * 50 + "'...: the object has no variable '" + "x" * 50 + "'... ")
