# SPDX-License-Identifier: Apache-2.0
"""Event types BTF lacks, read from the object's DWARF (bpfkit.btf.dwarf; issue #38, item 1).

bpf/records_opensnoop.bpf.c builds libbpf-tools opensnoop's ``struct event`` (8,232 bytes, a
nested ``struct full_path``) in a per-CPU heap array declared without a value type, so the
object's BTF has no struct event; its DWARF (clang -g) does. Each openat() of this process is
sent through a ring buffer and a perf event array: both are read through the library
(``record="struct event"``) and through ``bpfkit attach --events MAP:TYPE --json``, and every
field is checked.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

import bpfkit
from bpfkit.btf.dwarf import dwarf_types, find_struct
from bpfkit.errors import NotFoundError, UsageError
from bpfkit.events import PerfBuffer, RecordFormat, RingBuffer
from conftest import console_script, start_attached

O_FLAGS = os.O_RDONLY | os.O_CLOEXEC


def _open_known(path: Path) -> None:
    fd = os.open(path, O_FLAGS)
    os.close(fd)


def _check(e: Any, path: Path) -> None:
    """An event of bpf/records_opensnoop.bpf.c for an openat() of ``path`` by this process."""
    assert e.pid == os.getpid() and e.uid == os.getuid() and e.ret == -2
    assert e.flags == O_FLAGS and e.mode == 0 and e.callers == [0x1111, 0x2222]
    assert e.fname.pathes == str(path) and e.fname.depth == 1 and e.fname.failed == 7
    assert e.ts > 0 and isinstance(e.comm, str) and e.comm


def test_btf_lacks_the_event_dwarf_has_it(bpf_obj: Any) -> None:
    spec = bpfkit.load_spec(bpf_obj("records_opensnoop"))
    assert spec.btf is not None and not spec.btf.find("event")
    btf, t = find_struct(spec.btf, "struct event")
    assert t.size == 8232 and btf.size_of(t.id) == 8232
    assert [m.name for m in t.members] == ["ts", "pid", "uid", "ret", "flags", "mode", "callers", "comm", "fname"]
    assert [m.bit_offset // 8 for m in t.members] == [0, 8, 12, 16, 20, 24, 32, 48, 64]
    full_path = btf.resolve(t.members[-1].type)
    assert full_path.name == "full_path" and btf.size_of(full_path.id) == 8168  # type: ignore[union-attr]
    # The split BTF continues the object's ids and names both: the object's types stay found.
    assert btf.base is spec.btf and t.id >= len(spec.btf.types)
    fmt = RecordFormat.from_btf(spec.btf, "event")
    assert fmt.size == 8232 and fmt.char_fields == {"comm", "fname.pathes"}
    assert fmt.names == ["ts", "pid", "uid", "ret", "flags", "mode", "callers[0]", "callers[1]", "comm",
                         "fname.pathes", "fname.depth", "fname.failed"]


def test_neither_btf_nor_dwarf_names_both(bpf_obj: Any) -> None:
    spec = bpfkit.load_spec(bpf_obj("records_opensnoop"))
    with pytest.raises(NotFoundError, match=r"BTF has no struct named 'nothere', nor has its DWARF \(\.debug_info\)"):
        find_struct(spec.btf, "struct nothere")
    # An object without DWARF: the message says how to get it.
    stripped = subprocess.run(["llvm-strip-19" if _which("llvm-strip-19") else "llvm-strip", "-g", "-o", "-",
                               str(bpf_obj("records_opensnoop"))], capture_output=True, check=False)
    if stripped.returncode != 0:
        pytest.skip(f"no llvm-strip: {stripped.stderr[-200:]!r}")
    bare = bpfkit.load_spec(stripped.stdout, "records_opensnoop")
    assert dwarf_types(bare.btf) is None
    with pytest.raises(NotFoundError, match=r"no struct named 'event', and the object has no DWARF.*clang -g"):
        find_struct(bare.btf, "event")


def _which(name: str) -> bool:
    import shutil

    return shutil.which(name) is not None


def test_dwarf_is_read_lazily_and_once(bpf_obj: Any) -> None:
    """Loading an object reads no DWARF; the first lookup does (the figure docs/events.md gives),
    later ones reuse it."""
    spec = bpfkit.load_spec(bpf_obj("records_opensnoop"))
    dwarf = dwarf_types(spec.btf)
    assert dwarf is not None and dwarf._dies is None  # nothing read by load_spec
    t0 = time.perf_counter()
    first = dwarf.struct("event")
    t1 = time.perf_counter()
    assert dwarf.struct("struct event") is first and time.perf_counter() - t1 < (t1 - t0)
    print(f"first DWARF lookup: {(t1 - t0) * 1e3:.1f} ms")


@pytest.mark.root  # loads the object
def test_ring_and_perf_records_typed_from_dwarf(bpf_obj: Any, tmp_path: Path) -> None:
    spec = bpfkit.load_spec(bpf_obj("records_opensnoop"))
    spec.variables["target_tgid"].value = os.getpid()
    path = tmp_path / "records-dwarf-known"
    path.write_text("x")
    ring: list[Any] = []
    perf: list[tuple[int, Any]] = []
    with bpfkit.Collection(spec) as coll, coll.attach_all(), \
            RingBuffer(coll.maps["events"], ring.append, record="struct event") as rb, \
            PerfBuffer(coll.maps["pevents"], lambda cpu, e: perf.append((cpu, e)), record="event") as pb:
        _open_known(path)
        deadline = time.monotonic() + 10
        while (not ring or not perf) and time.monotonic() < deadline:
            rb.poll(0.1)
            pb.poll(0.1)
    mine = [e for e in ring if e.fname.pathes == str(path)]
    assert len(mine) == 1, ring
    _check(mine[0], path)
    mine_perf = [e for _, e in perf if e.fname.pathes == str(path)]
    assert len(mine_perf) == 1
    _check(mine_perf[0], path)
    assert mine_perf[0] == mine[0]  # the same event through both


@pytest.mark.root  # loads the object
def test_record_type_not_found_says_so(bpf_obj: Any) -> None:
    spec = bpfkit.load_spec(bpf_obj("records_opensnoop"))
    with bpfkit.Collection(spec) as coll:
        with pytest.raises(NotFoundError, match=r"map 'events': record type 'struct nope'.*nor has its DWARF"):
            RingBuffer(coll.maps["events"], print, record="struct nope")
        with pytest.raises(UsageError, match="needs a callback"):
            RingBuffer(coll.maps["events"], None, record="event")


@pytest.mark.root  # loads the object
def test_attach_events_json_typed_from_dwarf(bpf_obj: Any, tmp_path: Path) -> None:
    path = tmp_path / "records-dwarf-cli"
    path.write_text("x")
    cmd = [console_script(), "attach", str(bpf_obj("records_opensnoop")), "--set", f"target_tgid={os.getpid()}",
           "--events", "events:struct event", "--events", "pevents", "--json"]
    proc, seen = start_attached(cmd)
    try:
        time.sleep(0.2)
        _open_known(path)
        time.sleep(0.5)
    finally:
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=30)
    records = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    by_map = {r["map"]: r for r in records if r.get("fields", {}).get("fname.pathes") == str(path)}
    assert set(by_map) == {"events", "pevents"}, "".join(seen) + out
    for r in by_map.values():
        f = r["fields"]
        assert r["size"] >= 8232
        assert (f["pid"], f["uid"], f["ret"], f["flags"], f["mode"]) == (os.getpid(), os.getuid(), -2, O_FLAGS, 0)
        assert (f["callers[0]"], f["callers[1]"], f["fname.depth"], f["fname.failed"]) == (0x1111, 0x2222, 1, 7)
    # A type that is nowhere: refused before attaching, naming BTF and DWARF.
    bad = subprocess.run([console_script(), "attach", str(bpf_obj("records_opensnoop")), "--events", "events:nope"],
                         capture_output=True, text=True, timeout=60)
    assert bad.returncode != 0
    assert "--events events:nope" in bad.stderr and "BTF has no struct named 'nope', nor has its DWARF" in bad.stderr


@pytest.mark.root  # loads the object
def test_skeleton_records_include_dwarf_events(bpf_obj: Any, tmp_path: Path) -> None:
    """skel.RECORDS has the event struct DWARF describes (and the struct it nests); skel.decode
    and the generated module's classes read it. An object whose event is in BTF reads no DWARF."""
    from bpfkit.skelgen import generate

    skel = bpfkit.open(bpf_obj("records_opensnoop"))
    assert sorted(skel.RECORDS) == ["event", "full_path"]
    path = tmp_path / "records-dwarf-skel"
    path.write_text("x")
    skel.spec.variables["target_tgid"].value = os.getpid()
    raws: list[bytes] = []
    with skel.load(), skel.attach(), RingBuffer(skel.collection.maps["events"], lambda v: raws.append(bytes(v))) as rb:
        _open_known(path)
        deadline = time.monotonic() + 10
        while not raws and time.monotonic() < deadline:
            rb.poll(0.1)
    events = [skel.decode(skel.RECORDS["event"], raw) for raw in raws]
    mine = [e for e in events if e.fname.pathes == str(path)]
    assert len(mine) == 1 and isinstance(mine[0], skel.RECORDS["event"])
    assert isinstance(mine[0].fname, skel.RECORDS["full_path"])
    _check(mine[0], path)
    text = generate(bpfkit.load_spec(bpf_obj("records_opensnoop")), "RecordsOpensnoop")
    assert "class event(" in text and "class full_path(" in text and "fname: full_path" in text
    compile(text, "records_opensnoop_skel.py", "exec")
    plain = bpfkit.load_spec(bpf_obj("records_execsnoop"))
    assert "event" in bpfkit.open(bpf_obj("records_execsnoop")).RECORDS
    dwarf = dwarf_types(plain.btf)
    assert dwarf is not None and dwarf._dies is None  # its event is in BTF: DWARF never read


@pytest.mark.parametrize("fill", [0xFF, 0x00, 0x41])
def test_damaged_dwarf_is_a_bpfkit_error(bpf_obj: Any, fill: int) -> None:
    """An object whose .debug_info is garbage: looking a type up there is a BPFKitError (the
    message says DWARF), never pyelftools' own exception or a Python error."""
    from bpfkit.elf.reader import ElfFile
    from bpfkit.errors import BPFKitError

    data = bytearray(bpf_obj("records_opensnoop").read_bytes())
    sec = ElfFile(bytes(data)).by_name[".debug_info"]
    start = sec.offset + 12  # past the unit header's length, version, unit type and address size
    data[start:sec.offset + sec.size] = bytes([fill]) * (sec.size - 12)
    spec = bpfkit.load_spec(bytes(data), "records_opensnoop")
    with pytest.raises(BPFKitError, match="DWARF"):
        find_struct(spec.btf, "event")
