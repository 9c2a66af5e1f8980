# SPDX-License-Identifier: Apache-2.0
"""``bpfkit map dump`` of event maps does as bpftool 7.x does (checked against the installed
bpftool when there is one, by id and by pinned path):

* a perf event array dumps key by key, each value the lookup's error: the kernel reads no perf
  event fd back (fd_array's map_fd_sys_lookup_elem is unset: ENOTSUPP, "Unknown error 524"),
  whether the slot holds a perf event (one here, filled by a PerfBuffer) or not; exit 0;
* a ring buffer and a user ring buffer have no keys (BPF_MAP_GET_NEXT_KEY: ENOTSUPP): the dump is
  empty ("[]", "0 entries") and the command fails (bpftool exits -524 & 0xff = 244; bpfkit 3,
  not supported, saying where the records are read).

The maps are made here and found by their ids; their pins live in a directory of this run.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from bpfkit.maps import Map, MapSpec
from bpfkit.spec.consts import MapType

REPO = Path(__file__).resolve().parent.parent
BPFTOOL = shutil.which("bpftool") or ("/usr/sbin/bpftool" if os.path.exists("/usr/sbin/bpftool") else None)
pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root")
NOT_SUPPORTED = 3  # bpfkit.cli's EXIT_UNSUPPORTED


def bpfkit_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "bpfkit.cli", "map", "dump", *args], check=False,
                          capture_output=True, text=True, cwd=REPO)


def bpftool(*args: str) -> subprocess.CompletedProcess[str]:
    if BPFTOOL is None:
        pytest.skip("needs bpftool (apt install bpftool) to compare with")
    return subprocess.run([BPFTOOL, *args], check=False, capture_output=True, text=True)


@pytest.fixture
def pin_dir() -> Iterator[Path]:
    from bpfkit._kernel.bpffs import ensure_bpffs

    ensure_bpffs("/sys/fs/bpf")
    where = Path(f"/sys/fs/bpf/bpfkit-dump-events-{uuid.uuid4().hex[:8]}")
    where.mkdir()
    yield where
    shutil.rmtree(where)


def made(pin_dir: Path, name: str, spec: MapSpec) -> Map[object, object]:
    m: Map[object, object] = Map(spec)
    m.pin(str(pin_dir / name))
    return m


def test_perf_event_array_dumps_each_key_with_its_lookup_error(pin_dir: Path) -> None:
    from bpfkit.events.perf import PerfBuffer

    spec = MapSpec(name="dump_perf", type=MapType.PERF_EVENT_ARRAY, key_size=4, value_size=4, max_entries=3)
    with made(pin_dir, "perf", spec) as m, PerfBuffer(m, lambda cpu, data: None, pages=1, cpus=[0]):
        mid = m.info().id  # slot 0 holds a perf event now, slots 1 and 2 nothing
        for target in ([str(mid)], [str(pin_dir / "perf")]):
            ours = bpfkit_cli(*target, "--json")
            assert ours.returncode == 0, ours.stderr
            assert json.loads(ours.stdout) == [{"key": [f"0x0{i}", "0x00", "0x00", "0x00"],
                                                "value": {"error": "Unknown error 524"}} for i in range(3)]
            theirs = bpftool("-j", "map", "dump", *(["id", str(mid)] if target[0].isdigit() else ["pinned", *target]))
            assert theirs.returncode == 0 and ours.stdout == theirs.stdout, (ours.stdout, theirs.stdout)
        text = bpfkit_cli(str(mid))
    assert text.returncode == 0, text.stderr
    assert text.stdout == "".join(f"key: 0{i}000000  value: <Unknown error 524>\n" for i in range(3)) + "3 entries\n"


@pytest.mark.parametrize("kind", [MapType.RINGBUF, MapType.USER_RINGBUF])
def test_ring_buffers_dump_empty_and_fail_as_bpftool(pin_dir: Path, kind: MapType) -> None:
    spec = MapSpec(name="dump_ring", type=kind, key_size=0, value_size=0, max_entries=os.sysconf("SC_PAGE_SIZE"))
    with made(pin_dir, "ring", spec) as m:
        mid = str(m.info().id)
        ours = bpfkit_cli(mid, "--json")
        theirs = bpftool("-j", "map", "dump", "id", mid)
        by_path = bpfkit_cli(str(pin_dir / "ring"))
    assert ours.stdout == theirs.stdout == "[]\n", (ours.stdout, theirs.stdout)
    assert theirs.returncode != 0 and ours.returncode == NOT_SUPPORTED, ours.stderr
    assert "BPF_MAP_GET_NEXT_KEY: ENOTSUPP" in ours.stderr
    assert by_path.stdout == "0 entries\n" and by_path.returncode == NOT_SUPPORTED
    if kind == MapType.RINGBUF:  # where its records are read, named as given
        assert f"has no keys, only records (read them with `bpfkit events {pin_dir / 'ring'}`)" in by_path.stderr
    else:
        assert "has no keys, only records (user space writes them, programs drain them)" in by_path.stderr
