# SPDX-License-Identifier: Apache-2.0
"""Issue #39's command-line knobs and errors, as scx's user space needs them: ``--set`` takes
exactly the integers the API's ``VariableSpec.value = N`` takes (a negative one for an unsigned
type as two's complement, the kernel's signed enum values scx copies into u64 constants), with
the same refusal; ``--map-size SECTION.value_size=N`` resizes a global-data section's last array
(scx's RESIZE_ARRAY; bpf/knobs_resize.bpf.c); a sched_ext object on a kernel without sched_ext
names the missing struct_ops type before its kfuncs (bpf/knobs_scx.bpf.c)."""

from __future__ import annotations

import os

import pytest

import bpfkit
from bpfkit.cli.cmd_load import apply_map_sizes, apply_sets
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


@pytest.mark.parametrize("given, stored", [(-2147483648, 0xFFFFFFFF80000000), (-(1 << 63), 1 << 63),
                                           ((1 << 64) - 1, (1 << 64) - 1), (-(1 << 63) - 1, None), (1 << 64, None)])
def test_scx_enum_value_in_a_u64(given: int, stored: int | None) -> None:
    """scx's __SCX_TASK_CURSOR=-2147483648 for a const volatile __u64 (knobs_resize.bpf.c)."""
    spec = bpfkit.load_spec(bpf_object("knobs_resize"))
    api, cli = spec.copy(), spec.copy()
    if stored is None:
        with pytest.raises(BTFValueError) as api_err:
            api.variables["task_cursor"].value = given
        with pytest.raises(BTFValueError) as cli_err:
            apply_sets(cli, [f"task_cursor={given}"])
        assert str(cli_err.value) == f"--set 'task_cursor={given}': {api_err.value}"
        assert "const volatile __u64 (an integer in [-9223372036854775808, 18446744073709551615]" in str(api_err.value)
        return
    api.variables["task_cursor"].value = given
    apply_sets(cli, [f"task_cursor={given}"])
    assert cli.variables["task_cursor"].value == api.variables["task_cursor"].value == stored


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


# ---------------------------------------------- --map-size SECTION.value_size=N (RESIZE_ARRAY)
@pytest.fixture
def resizable() -> bpfkit.CollectionSpec:
    return bpfkit.load_spec(bpf_object("knobs_resize"))


@pytest.mark.parametrize("how", ["cli", "api"])
def test_resized_section_spec(resizable: bpfkit.CollectionSpec, how: str) -> None:
    """dump (char[8] at byte 4 of .data.dump) grows to fill 36 bytes: its initial bytes kept, new
    ones zero, the map's BTF value type dropped (the kernel would hold it to 12 bytes)."""
    if how == "cli":
        apply_map_sizes(resizable, [".data.dump.value_size=36"])
    else:
        resizable.set_value_size(".data.dump", 36)
    m, dump = resizable.maps[".data.dump"], resizable.variables["dump"]
    assert (m.value_size, len(m.data or b""), m.btf_value_type_id) == (36, 36, 0)
    assert (dump.size, dump.raw) == (32, b"abc" + bytes(29)) and resizable.variables["dump_hdr"].value == 7
    assert dump.codec is None  # its BTF type still says char[8]: read as bytes
    resizable.set_value_size(".data.dump", 6)  # shrinks too: 2 elements left
    assert (dump.size, dump.raw, m.data) == (2, b"ab", b"\x07\0\0\0ab")


@pytest.mark.parametrize("item, message", [
    (".data.dump.value_size=4", "--map-size '.data.dump.value_size=4': resize '.data.dump' to 4 bytes: 'dump' "
                                 "(char[8]) starts at byte 4 of the section, so the size must be 4 + a positive "
                                 "multiple of its element size, 1"),
    (".data.dump.value_size=3", "the size must be 4 + a positive multiple"),
    (".data.notarr.value_size=16", "its last variable 'notarr' is a __u64, not an array"),
    (".data.dump.max_entries=2", "'.data.dump' holds global data, sized by its section (--set changes its "
                                 "variables; value_size resizes its last variable, an array)"),
    (".data.dump.value_size=0x100000000", "does not fit the kernel's u32 value_size"),
])
def test_resize_refusals(resizable: bpfkit.CollectionSpec, item: str, message: str) -> None:
    before = {n: (m.value_size, m.data, m.btf_value_type_id) for n, m in resizable.maps.items()}
    sizes = {n: v.size for n, v in resizable.variables.items()}
    with pytest.raises(UsageError) as err:
        apply_map_sizes(resizable, [item])
    assert message in str(err.value)
    assert before == {n: (m.value_size, m.data, m.btf_value_type_id) for n, m in resizable.maps.items()}
    assert sizes == {n: v.size for n, v in resizable.variables.items()}


@pytest.mark.root
def test_program_writes_past_the_old_size(resizable: bpfkit.CollectionSpec) -> None:
    """mark() writes dump[20]: the verifier refuses it against 8 bytes and accepts it once
    --map-size grew the section; user space reads the byte back from the map."""
    from bpfkit.errors import VerifierError

    apply_sets(resizable, ["at=20"])
    with pytest.raises(VerifierError, match="invalid access to map value"):
        bpfkit.Collection(resizable.copy()).close()
    apply_map_sizes(resizable, [".data.dump.value_size=36"])
    with bpfkit.Collection(resizable) as coll:
        assert coll.maps[".data.dump"].value_size == 36
        assert coll.programs["mark"].test_run(bytes(64))[0] == 2  # XDP_PASS
        value = bytes(coll.maps[".data.dump"][0])
    assert value[:4] == (8).to_bytes(4, "little") and value[4:7] == b"abc"
    assert value[4 + 20] == 0x5A and value[4 + 21:] == bytes(11)


# ----------------------------------------------- a sched_ext object on a kernel without it
def _no_sched_ext() -> None:
    from bpfkit.errors import NotFoundError
    from bpfkit.struct_ops import find_kernel_struct_ops

    try:
        find_kernel_struct_ops("sched_ext_ops")
    except NotFoundError:
        return
    pytest.skip("the running kernel has sched_ext (struct bpf_struct_ops_sched_ext_ops): the missing-type error "
                "cannot happen here; integration/test_struct_ops.py loads a scheduler instead")


MISSING = ("struct_ops map 'knobs_scx': sched_ext_ops: the running kernel has no struct_ops type 'sched_ext_ops' "
           "(sched_ext: CONFIG_SCHED_CLASS_EXT, 6.12): struct bpf_struct_ops_sched_ext_ops is not in the kernel's BTF")


def test_missing_struct_ops_type_said_before_its_kfuncs() -> None:
    """knobs_scx.bpf.c's kfuncs are strong __ksym externs, as scx declares them: without
    sched_ext they are missing too, and the type is named first (it was 'resolve externs:
    __ksym function 'scx_bpf_create_dsq': ... has no FUNC named ...')."""
    from bpfkit.errors import NotFoundError

    _no_sched_ext()
    with pytest.raises(NotFoundError) as err:
        bpfkit.Collection.from_file(bpf_object("knobs_scx")).close()
    assert str(err.value).startswith(MISSING) and "extern" not in str(err.value)


def test_missing_struct_ops_type_on_the_command_line() -> None:
    import subprocess
    import sys

    _no_sched_ext()
    proc = subprocess.run([sys.executable, "-m", "bpfkit", "attach", str(bpf_object("knobs_scx"))],
                          capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode != 0 and proc.stderr.startswith("bpfkit: error: " + MISSING), proc.stderr


@pytest.mark.root
def test_bpfkit_load_resizes_and_the_program_writes_there() -> None:
    """The whole command: `bpfkit load OBJ PIN_DIR --set at=20 --map-size .data.dump.value_size=36`,
    then the pinned program run and the pinned section read back."""
    import shutil
    import subprocess
    import sys
    import uuid

    from bpfkit import Map, Program
    from bpfkit._kernel.bpffs import ensure_bpffs

    ensure_bpffs("/sys/fs/bpf")
    pin = f"/sys/fs/bpf/bpfkit-knobs39-{uuid.uuid4().hex[:8]}"
    base = [sys.executable, "-m", "bpfkit", "load", str(bpf_object("knobs_resize")), pin, "--set", "at=20"]
    try:
        refused = subprocess.run(base, capture_output=True, text=True, timeout=120, check=False)
        assert refused.returncode != 0 and "invalid access to map value" in refused.stderr, refused.stderr
        done = subprocess.run([*base, "--map-size", ".data.dump.value_size=36"], capture_output=True, text=True,
                              timeout=120, check=False)
        assert done.returncode == 0, done.stderr
        (section,) = (name for name in os.listdir(pin) if name.endswith("data_dump"))
        with Program.load_pinned(f"{pin}/mark") as prog, Map.load_pinned(f"{pin}/{section}") as dump:
            assert dump.value_size == 36 and bytes(dump[0])[4 + 20] == 0
            assert prog.test_run(bytes(64))[0] == 2
            assert bytes(dump[0])[4 + 20] == 0x5A
    finally:
        shutil.rmtree(pin, ignore_errors=True)
