# SPDX-License-Identifier: Apache-2.0
"""``bpfkit map dump --json`` against ``bpftool -j map dump`` on the same pinned maps.

The maps of bpf/map_dump.bpf.c (a hash keyed by a struct with strings, enums, nested structs, a
union, bitfields, a bool, a pointer, a 128-bit int; an array of structs; per-CPU hash and array;
.bss/.data/.rodata), the BTF-less legacy maps of loader_legacy, a map with sizes but no types
(loader_basic's results) and the map-in-map and prog-array maps of loader_mapinmap are filled
with chosen and random bytes (random bytes reach the odd cases: char arrays that are not text,
enum values without a name, bools that are neither 0 nor 1), one entry by the program itself,
then both tools dump them and the parsed JSON must be equal entry by entry (and the text
byte for byte). bpfkit prints what bpftool 7.2+ prints; with an older bpftool the test allows
its known differences: no "inner_map_id" in map-in-map entries, and backslashes and
apostrophes in strings escaped wrongly (so the chosen strings avoid them there).
"""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
BPFTOOL = shutil.which("bpftool") or ("/usr/sbin/bpftool" if os.path.exists("/usr/sbin/bpftool") else None)
needs_bpftool = pytest.mark.skipif(BPFTOOL is None, reason="needs bpftool (apt install bpftool)")


def bpftool_version() -> tuple[int, ...]:
    out = subprocess.run([BPFTOOL or "bpftool", "version"], capture_output=True, text=True).stdout
    return tuple(int(x) for x in out.split()[1].lstrip("v").split(".")[:2])


def bpfkit_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "bpfkit.cli", *args], capture_output=True, text=True,
                          cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)})


@pytest.fixture
def pin_root() -> Iterator[str]:
    from bpfkit._kernel.bpffs import ensure_bpffs

    ensure_bpffs("/sys/fs/bpf")
    root = f"/sys/fs/bpf/bpfkit-dump-{uuid.uuid4().hex[:8]}"
    yield root
    if os.path.exists(root):
        shutil.rmtree(root)


def load(obj: Path, where: str) -> None:
    proc = bpfkit_cli("load", str(obj), where)
    assert proc.returncode == 0, proc.stderr


def fill_random(path: str, rng: random.Random, count: int) -> None:
    """``count`` random entries (random keys for hashes, every index for arrays)."""
    from bpfkit.maps import Map

    with Map.load_pinned(path) as m:
        slot = m._slot * m._ncpus if m._percpu else m.value_size
        indices = range(min(count, m.max_entries))
        for i in indices:
            key = i.to_bytes(m.key_size, "little") if "array" in m.type.kernel_name else rng.randbytes(m.key_size)
            value = rng.randbytes(slot)
            if m._percpu:
                value = [value[c * m._slot:c * m._slot + m.value_size] for c in range(m._ncpus)]
            m.update(key, value)


def bpftool_dump(path: str) -> tuple[str, list[dict]]:
    proc = subprocess.run([BPFTOOL, "-j", "map", "dump", "pinned", path], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout, json.loads(proc.stdout)


def bpfkit_dump(path: str) -> tuple[str, list[dict]]:
    proc = bpfkit_cli("map", "dump", path, "--json")
    assert proc.returncode == 0, proc.stderr
    return proc.stdout, json.loads(proc.stdout)


def compare(path: str) -> int:
    theirs_text, theirs = bpftool_dump(path)
    ours_text, ours = bpfkit_dump(path)
    assert len(ours) == len(theirs), f"{path}: bpfkit {len(ours)} entries, bpftool {len(theirs)}"
    # bpftool 7.2+ prints inner_map_id (e552682 "Dump map id instead of value for map_of_maps")
    no_inner_id = bpftool_version() < (7, 2) and any("inner_map_id" in e for e in ours)
    for i, (a, b) in enumerate(zip(ours, theirs)):
        if no_inner_id:
            a.pop("inner_map_id")
        assert a == b, f"{path}: entry {i} differs:\nbpfkit  {json.dumps(a)}\nbpftool {json.dumps(b)}"
    if not no_inner_id:
        assert ours_text == theirs_text, f"{path}: same entries, different text"
    return len(ours)


def struct_bytes(layout: dict[str, tuple[int, bytes]], size: int) -> bytes:
    raw = bytearray(size)
    for off, data in layout.values():
        raw[off:off + len(data)] = data
    return bytes(raw)


@needs_bpftool
def test_typed_maps_match_bpftool(bpf_obj, pin_root):
    from bpfkit import load_spec
    from bpfkit.btf import Kind
    from bpfkit.maps import Map
    from bpfkit.program import Program

    obj = bpf_obj("map_dump")
    load(obj, pin_root)
    rng = random.Random(21)
    btf = load_spec(str(obj)).btf
    rec = btf.lookup("dump_rec", Kind.STRUCT)
    off = {m.name: m.bit_offset // 8 for m in rec.members}
    size = btf.size_of(rec.id)
    with Map.load_pinned(f"{pin_root}/recs") as recs:
        # chosen: text strings, named enum values (DS_BLOCKED, DS_NEG, DW_BIG), the bool true
        chosen = struct_bytes({
            "comm": (off["comm"], b"bash\0"), "state": (off["state"], (7).to_bytes(4, "little")),
            "neg": (off["neg"], (-42).to_bytes(4, "little", signed=True)),
            "ok": (off["ok"], b"\x01"), "c": (off["c"], b"A"),
            "wide": (off["wide"], (1 << 32).to_bytes(8, "little")), "tag": (off["tag"], b"ab\0\0"),
        }, size)
        recs.update((1234).to_bytes(4, "little") + b"sh\0\0\0\0\0\0", chosen)
        negative = bytearray(chosen)
        negative[off["state"]:off["state"] + 4] = (-3).to_bytes(4, "little", signed=True)
        negative[off["comm"]:off["comm"] + 3] = b"\xff\x01\0"  # not text: a list of signed chars
        # bpftool before 7.2 escapes a backslash as "\n" and "'" as "\'" (json_writer.c, fixed
        # by f3a3d6c and f4e492c): the quote only then
        name = b'a"b\\c\0\0\0' if bpftool_version() >= (7, 2) else b'a"bc\0\0\0\0'
        recs.update((5).to_bytes(4, "little") + name, bytes(negative))
    fill_random(f"{pin_root}/recs", rng, 40)
    with Program.load_pinned(f"{pin_root}/dump_fill") as prog:
        prog.test_run(b"\0" * 64)  # one record from the program; .bss/.data change
    for name in ("inners", "pc_hash", "pc_array"):
        fill_random(f"{pin_root}/{name}", rng, 16)
    counts = {}
    for name in sorted(os.listdir(pin_root)):
        if name != "dump_fill":
            counts[name] = compare(f"{pin_root}/{name}")
    assert counts["recs"] == 43 and counts["map_dump_bss"] == counts["map_dump_rodata"] == 1
    # the .bss the program wrote decodes as bpftool does it
    _, bss = bpfkit_dump(f"{pin_root}/map_dump_bss")
    assert bss[0]["formatted"]["value"][".bss"][0] == {"bss_counter": 1}


@needs_bpftool
def test_btf_less_and_fd_maps_match_bpftool(bpf_obj, pin_root):
    rng = random.Random(7)
    load(bpf_obj("loader_legacy"), f"{pin_root}/legacy")
    load(bpf_obj("loader_basic"), f"{pin_root}/basic")
    load(bpf_obj("loader_mapinmap"), f"{pin_root}/mim")
    fill_random(f"{pin_root}/legacy/legacy_hash", rng, 10)
    fill_random(f"{pin_root}/basic/results", rng, 4)
    for path in (f"{pin_root}/legacy/legacy_hash", f"{pin_root}/legacy/legacy_array", f"{pin_root}/basic/results",
                 f"{pin_root}/basic/counts", f"{pin_root}/mim/outer_array", f"{pin_root}/mim/outer_hash",
                 f"{pin_root}/mim/jump_table"):
        if os.path.exists(path):
            compare(path)
    _, legacy = bpfkit_dump(f"{pin_root}/legacy/legacy_hash")
    assert len(legacy) == 10 and all("formatted" not in e for e in legacy)


def test_dump_by_name_plain_text_and_errors(bpf_obj, pin_root):
    obj = bpf_obj("map_dump")
    load(obj, f"{pin_root}/a")
    proc = bpfkit_cli("map", "dump", f"{pin_root}/a/map_dump_rodata")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == ('key: 00000000  value: {.rodata: [{rd_limit: 42}, {rd_name: "dump"}, '
                           '{rd_state: "DS_RUN"}]}\n1 entry\n')
    proc = bpfkit_cli("map", "dump", f"{pin_root}/a/pc_array")
    assert proc.stdout.splitlines()[0].startswith("key: 0  values: [0, ")
    from bpfkit.maps import Map

    with Map.load_pinned(f"{pin_root}/a/inners") as m:
        first = m.id
    name = "inners"
    load(obj, f"{pin_root}/b")
    with Map.load_pinned(f"{pin_root}/b/inners") as m:
        second = m.id
    proc = bpfkit_cli("map", "dump", name)
    assert proc.returncode != 0
    # Both of this run's maps are named; another BPF user's (a second copy of the suite) may be too.
    named = proc.stderr.partition("map name 'inners' is ambiguous: ids ")[2].partition(" (")[0]
    assert {first, second} <= {int(i) for i in named.split(", ") if i.isdigit()}, proc.stderr
    proc = bpfkit_cli("map", "dump", "no_such_map_xyz")
    assert proc.returncode != 0 and "no map named 'no_such_map_xyz'" in proc.stderr
    shutil.rmtree(f"{pin_root}/b")
    proc = bpfkit_cli("map", "dump", str(first), "--json")
    assert proc.returncode == 0 and len(json.loads(proc.stdout)) == 4
