# SPDX-License-Identifier: Apache-2.0
"""``bpfkit inspect`` and ``bpfkit load`` as a user runs them, and a comparison with
``bpftool prog loadall``: both must load the same programs (names, types) and maps
(name, type, key/value sizes, max_entries, flags) from each test object.

Objects left out of the bpftool comparison, and why: loader_legacy and loader_elfmap use the
legacy "maps" section, which libbpf 1.0+ (so bpftool) refuses. loader_core (CO-RE) is compared
too: both loaders relocate it against the running kernel's BTF.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
BPFTOOL = shutil.which("bpftool") or ("/usr/sbin/bpftool" if os.path.exists("/usr/sbin/bpftool") else None)
COMPARED = ["minimal", "loader_basic", "loader_calls", "loader_mapinmap", "loader_pin", "loader_core"]
# bpftool 7.1 (libbpf 1.1) tries to pin programs that "?" kept from loading, and refuses
# pinmaps for LIBBPF_PIN_BY_NAME maps (pinned in /sys/fs/bpf already): for those the maps are
# compared through the programs' map ids.
NO_PINMAPS = {"loader_pin"}


def bpfkit_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "bpfkit.cli", *args], capture_output=True, text=True,
                          cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)})


@pytest.fixture
def pin_root():
    from bpfkit._kernel.bpffs import ensure_bpffs

    ensure_bpffs("/sys/fs/bpf")
    root = f"/sys/fs/bpf/bpfkit-cli-{uuid.uuid4().hex[:8]}"
    yield root
    if os.path.exists(root):
        shutil.rmtree(root)


def test_inspect_json(bpf_obj):
    proc = bpfkit_cli("inspect", "--json", str(bpf_obj("loader_basic")))
    assert proc.returncode == 0, proc.stderr
    info = json.loads(proc.stdout)
    assert set(info) == {"programs", "maps", "variables", "struct_ops"}
    assert info["struct_ops"] == []
    progs = {p["name"]: p for p in info["programs"]}
    tp = progs["tp_getppid"]
    assert {k: tp[k] for k in ("section", "type", "attach_type", "attach_to")} == {
        "section": "tracepoint/syscalls/sys_enter_getppid", "type": "tracepoint", "attach_type": None,
        "attach_to": "syscalls/sys_enter_getppid"}
    assert tp["insns"] > 10
    assert progs["xdp_globals"]["attach_type"] == "xdp"
    maps = {m["name"]: m for m in info["maps"]}
    assert {k: maps["events"][k] for k in ("type", "key_size", "value_size", "max_entries", "flags")} == {
        "type": "ringbuf", "key_size": 0, "value_size": 0, "max_entries": 16384, "flags": 0}
    assert maps["counts"]["flags"] == 1
    variables = {v["name"]: v for v in info["variables"]}
    assert variables["magic"]["value"] == 0x1122334455667788
    assert variables["bias"]["type"] == "const volatile __s32"


def test_inspect_text_and_bad_input(bpf_obj, tmp_path):
    proc = bpfkit_cli("inspect", str(bpf_obj("loader_calls")))
    assert proc.returncode == 0 and "calls_a" in proc.stdout and "xdp" in proc.stdout
    bad = tmp_path / "bad.o"
    bad.write_bytes(b"\x7fELF" + bytes(10))
    proc = bpfkit_cli("inspect", str(bad))
    assert proc.returncode == 2 and "truncated ELF header" in proc.stderr


def need_callbacks() -> None:
    from bpfkit import features

    result = features.probe("callbacks")
    if not result:
        pytest.skip(f"loader_calls' program 'callbacks' needs callbacks (Linux {result.min_version}): {result.reason}")


def test_load_pins_programs_and_maps(bpf_obj, pin_root):
    from bpfkit import features

    target = os.path.join(pin_root, "calls")
    # Before 5.13 the program passing callbacks cannot load: pin the other two.
    programs = ["calls_a", "calls_b"] + (["callbacks"] if features.probe("callbacks") else [])
    proc = bpfkit_cli("load", str(bpf_obj("loader_calls")), target, *(a for p in programs for a in ("-p", p)))
    assert proc.returncode == 0, proc.stderr
    assert sorted(os.listdir(target)) == sorted(programs + ["out", "numbers", "loader_c_bss"])
    from bpfkit import Program
    from bpfkit.maps import Map

    with Program.load_pinned(os.path.join(target, "calls_b")) as prog, \
            Map.load_pinned(os.path.join(target, "out")) as out:
        assert prog.test_run(bytes(64))[0] == 2
        assert out[2] == 81  # typed through the kernel's copy of the map's BTF


def test_load_set_variable(bpf_obj, pin_root):
    proc = bpfkit_cli("load", str(bpf_obj("loader_basic")), pin_root, "--set", "magic=0x42", "-p", "xdp_globals")
    assert proc.returncode == 0, proc.stderr
    from bpfkit import Program
    from bpfkit.maps import Map

    with Program.load_pinned(os.path.join(pin_root, "xdp_globals")) as prog, \
            Map.load_pinned(os.path.join(pin_root, "results")) as results:
        prog.test_run(bytes(64))
        assert results[0] == (0x42).to_bytes(8, "little")
    proc = bpfkit_cli("load", str(bpf_obj("loader_basic")), pin_root + "x", "--set", "nope=1")
    assert proc.returncode != 0 and "no variable 'nope'" in proc.stderr
    assert not os.path.exists(pin_root + "x")


def test_load_failure_prints_verifier_tail_and_pins_nothing(bpf_obj, pin_root):
    proc = bpfkit_cli("load", str(bpf_obj("loader_bad")), pin_root, "-p", "xdp_good", "-p", "xdp_bad")
    assert proc.returncode == 1
    assert "invalid variable-offset read from stack" in proc.stderr
    assert "load program 'xdp_bad'" in proc.stderr
    assert not os.path.exists(pin_root)


def test_load_core_object(bpf_obj, pin_root):
    # CO-RE relocations are resolved against /sys/kernel/btf/vmlinux (docs/core.md).
    proc = bpfkit_cli("load", str(bpf_obj("loader_core")), pin_root)
    assert proc.returncode == 0, proc.stderr
    assert "core_getppid" in os.listdir(pin_root)


# ------------------------------------------------------------------- bpftool comparison
def _bpftool_json(*args: str) -> dict | None:
    out = subprocess.run([BPFTOOL, *args, "--json"], capture_output=True, text=True)
    return json.loads(out.stdout) if out.returncode == 0 else None


def _describe(directory: str) -> tuple[set, set]:
    """(programs, maps) pinned under ``directory`` plus the maps those programs use."""
    progs, maps = set(), {}
    map_ids: set[int] = set()
    for dirpath, _, files in os.walk(directory):
        for name in files:
            path = os.path.join(dirpath, name)
            info = _bpftool_json("prog", "show", "pinned", path)
            if info is not None:
                progs.add((info["name"], info["type"]))
                map_ids.update(info.get("map_ids", []))
                continue
            info = _bpftool_json("map", "show", "pinned", path)
            assert info is not None, f"{path} is neither a program nor a map"
            maps[info["id"]] = info
    for map_id in map_ids - set(maps):
        maps[map_id] = _bpftool_json("map", "show", "id", str(map_id))
    described = {(m["name"], m["type"], m["bytes_key"], m["bytes_value"], m["max_entries"], m["flags"])
                 for m in maps.values()}
    return progs, described


@pytest.mark.skipif(BPFTOOL is None, reason="needs bpftool")
@pytest.mark.parametrize("name", COMPARED)
def test_same_result_as_bpftool_loadall(bpf_obj, pin_root, name):
    if name == "loader_calls":
        need_callbacks()
    obj = str(bpf_obj(name))
    ours, theirs = os.path.join(pin_root, "bpfkit"), os.path.join(pin_root, "bpftool")
    default_pins = set(os.listdir("/sys/fs/bpf"))
    os.makedirs(pin_root)  # bpftool wants the parent of its pin directory to exist
    try:
        cmd = [BPFTOOL, "prog", "loadall", obj, theirs]
        if name not in NO_PINMAPS:
            cmd += ["pinmaps", os.path.join(theirs, "maps")]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr
        proc = bpfkit_cli("load", obj, ours)
        assert proc.returncode == 0, proc.stderr
        their_progs, their_maps = _describe(theirs)
        our_progs, our_maps = _describe(ours)
        assert their_progs and our_progs == their_progs
        assert their_maps and our_maps == their_maps
    finally:
        # libbpf pins LIBBPF_PIN_BY_NAME maps in /sys/fs/bpf itself: remove what it added.
        for entry in set(os.listdir("/sys/fs/bpf")) - default_pins:
            path = os.path.join("/sys/fs/bpf", entry)
            if os.path.isfile(path):
                os.unlink(path)


# ------------------------------------------------------ errors end with the reason (#18 item 6)
def test_verifier_rejection_ends_with_the_reason(bpf_obj, pin_root):
    """The last line printed is the verifier's verdict, not its 'processed N insns'
    statistics (moved before it); with -v the whole log, then a one-line summary."""
    reason = "invalid variable-offset read from stack R2"
    proc = bpfkit_cli("load", str(bpf_obj("loader_bad")), pin_root, "-p", "xdp_bad")
    assert proc.returncode == 1
    lines = proc.stderr.rstrip("\n").splitlines()
    assert reason in lines[-1], proc.stderr
    assert any(line.strip().startswith("processed ") for line in lines[:-1])  # still shown, earlier
    proc = bpfkit_cli("load", "-v", str(bpf_obj("loader_bad")), pin_root, "-p", "xdp_bad")
    last = proc.stderr.rstrip("\n").splitlines()[-1]
    assert last.startswith("bpfkit: error: 'xdp_bad' rejected: ") and reason in last, proc.stderr
    assert "--- verifier log ---" in proc.stderr
    assert not os.path.exists(pin_root)


SIZED_LATER = """
struct { __uint(type, BPF_MAP_TYPE_HASH); __uint(key_size, 4); __uint(value_size, 0); __uint(max_entries, 0); } sized SEC(".maps");
SEC("xdp") int p(void *c) { __u32 k = 0; return bpf_map_lookup_elem(&sized, &k) != 0; }
"""


def test_zero_map_sizes_name_the_field_and_map_size_sets_them(pin_root, tmp_path):
    """A map left 0-sized for user space to fill: the error names the fields and both ways to
    set them; --map-size sets them (load and attach)."""
    from tests.clang_objects import build_c

    obj = tmp_path / "sized.o"
    obj.write_bytes(build_c(SIZED_LATER, tmp_path))
    proc = bpfkit_cli("load", str(obj), pin_root)
    assert proc.returncode == 1
    assert proc.stderr.rstrip("\n").splitlines()[-1] == (
        f"bpfkit: error: load {obj}: create map 'sized' (hash): BPF_MAP_CREATE: EINVAL (Invalid argument): "
        "map 'sized'; its value_size and max_entries are 0, which this map type does not allow: set them before "
        "loading (spec.maps['sized'].value_size = N; spec.maps['sized'].max_entries = N; or bpfkit load/attach "
        "--map-size sized.value_size=N --map-size sized.max_entries=N)")
    assert not os.path.exists(pin_root)
    proc = bpfkit_cli("load", str(obj), pin_root, "--map-size", "sized.value_size=8", "--map-size", "sized.max_entries=0x10")
    assert proc.returncode == 0, proc.stderr
    from bpfkit.maps import Map

    with Map.load_pinned(os.path.join(pin_root, "sized")) as m:
        info = m.info()
        assert (info.key_size, info.value_size, info.max_entries) == (4, 8, 16)
    for bad, message in [("sized.flags=1", "FIELD must be one of key_size, value_size, max_entries, not 'flags'"),
                         ("nope.value_size=1", "the object has no map 'nope' (its maps: sized)"),
                         ("sized.value_size=x", "'x' is not an integer"),
                         ("sized=1", "expected MAP.FIELD=N")]:
        proc = bpfkit_cli("load", str(obj), pin_root + "-bad", "--map-size", bad)
        assert proc.returncode in (1, 2) and message in proc.stderr, proc.stderr  # usage 2, not found 1
    # attach takes it too: the XDP program has no target in its section, so attach stops at
    # "nothing to attach" -- after the maps were created with the sizes given.
    proc = bpfkit_cli("attach", str(obj), "--map-size", "sized.value_size=8", "--map-size", "sized.max_entries=4")
    assert "nothing to attach" in proc.stderr, proc.stderr
