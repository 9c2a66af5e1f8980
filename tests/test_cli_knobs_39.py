# SPDX-License-Identifier: Apache-2.0
"""Issue #39's command-line knobs: ``--set`` takes exactly the integers the API's
``VariableSpec.value = N`` takes (a negative one for an unsigned type as two's complement, the
kernel's signed enum values scx copies into u64 constants), with the same refusal."""

from __future__ import annotations

import pytest

import bpfkit
from bpfkit.cli.cmd_load import apply_sets
from bpfkit.errors import BTFValueError, UsageError
from conftest import bpf_object

# (variable, value): maps_typed.bpf.c's __u32 target_pid, __s32 delta, enum mt_color color.
ACCEPTED = [
    ("target_pid", -1, 0xFFFFFFFF), ("target_pid", -2147483648, 0x80000000), ("target_pid", 4294967295, 4294967295),
    ("delta", -2147483648, -2147483648), ("delta", 2147483647, 2147483647), ("color", -1, 0xFFFFFFFF),
]
REFUSED = [("target_pid", -2147483649), ("target_pid", 1 << 32), ("delta", 1 << 31), ("delta", -(1 << 31) - 1),
           ("color", 1 << 32)]


@pytest.fixture
def spec() -> bpfkit.CollectionSpec:
    return bpfkit.load_spec(bpf_object("maps_typed"))


@pytest.mark.parametrize("name, given, stored", ACCEPTED)
def test_set_accepts_what_the_api_accepts(spec: bpfkit.CollectionSpec, name: str, given: int, stored: int) -> None:
    api = spec.copy()
    api.variables[name].value = given
    for word in (str(given), hex(given)):  # "-0x80000000" too
        cli = spec.copy()
        apply_sets(cli, [f"{name}={word}"])
        assert cli.variables[name].raw == api.variables[name].raw
        assert cli.variables[name].value == stored


@pytest.mark.parametrize("name, given", REFUSED)
def test_set_refuses_what_the_api_refuses_with_its_message(spec: bpfkit.CollectionSpec, name: str, given: int) -> None:
    before = spec.maps[".rodata"].data
    with pytest.raises(BTFValueError) as api:
        spec.variables[name].value = given
    with pytest.raises(BTFValueError) as cli:
        apply_sets(spec, [f"{name}={given}"])
    assert str(cli.value) == f"--set '{name}={given}': {api.value}"
    assert "out of range" in str(api.value) and spec.maps[".rodata"].data == before


def test_the_range_is_named(spec: bpfkit.CollectionSpec) -> None:
    with pytest.raises(UsageError, match=r"target_pid: expected const volatile __u32 \(an integer in \[-2147483648, "
                       r"4294967295\]; a negative one as two's complement\), got -2147483649 \(out of range\)"):
        apply_sets(spec, ["target_pid=-2147483649"])
    with pytest.raises(UsageError, match=r"delta: expected const volatile __s32 \(an integer in \[-2147483648, "
                       r"2147483647\]\), got 2147483648"):
        apply_sets(spec, ["delta=0x80000000"])


def test_bools_and_names_keep_their_words(spec: bpfkit.CollectionSpec) -> None:
    """A bool takes true/false/1/0 only (the BPF side reads it as one); enum members by name."""
    with pytest.raises(BTFValueError, match="not a boolean"):
        apply_sets(spec, ["enabled=2"])
    apply_sets(spec, ["color=MT_BLUE", "target_pid=1_000"])
    assert spec.variables["color"].typed.name == "MT_BLUE"  # type: ignore[attr-defined]
    assert spec.variables["target_pid"].value == 1000
