# SPDX-License-Identifier: Apache-2.0
"""ebpf_exporter's ``cgroup_id_map:`` (bpfkit.metrics.ebpf_exporter.cgroup_id_map) on the kernel:
`bpfkit exporter` keeps the map filled with the ids of the cgroups whose path matches, the
program (bpf/eex_cgroup_ids.bpf.c) counts getppid() by whether its caller's cgroup is in the map,
and the counts come out under each cgroup's full path. The cgroups are the test's own, made under
the cgroup2 mount and removed after."""

from __future__ import annotations

import os
import shutil
import struct
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("prometheus_client")
pytest.importorskip("yaml")

import bpfkit
from bpfkit._kernel.cgroupfs import cgroup2_root
from bpfkit.errors import UsageError
from bpfkit.metrics.ebpf_exporter.cgroup_id_map import CgroupIDMapFiller
from bpfkit.metrics.ebpf_exporter.config import CgroupIDMap, parse_exporter_config
from conftest import bpf_object, console_script

pytestmark = pytest.mark.root

CONFIG = """\
metrics:
  counters:
    - name: eex_cgroup_match_total
      help: getppid() calls from cgroups in the map
      labels:
        - name: cgroup
          size: 8
          decoders:
            - name: uint
            - name: cgroup
    - name: eex_cgroup_no_match_total
      help: getppid() calls from other cgroups
      labels:
        - name: cgroup
          size: 8
          decoders:
            - name: uint
            - name: cgroup
cgroup_id_map:
  name: cgroup_ids
  type: hash
  regexps:
    - ^.*/{tag}-match[0-9]*$
"""


@pytest.fixture
def cgroups() -> Iterator[tuple[str, list[Path]]]:
    """A tag of the test's own, and the cgroups made under it (removed after)."""
    tag = f"bpfkit-eex-{os.getpid()}"
    made: list[Path] = []
    yield tag, made
    for path in reversed(made):
        for _ in range(50):  # a process that just exited leaves its cgroup a moment later
            try:
                path.rmdir()
                break
            except FileNotFoundError:
                break
            except OSError:
                time.sleep(0.05)


def _make(made: list[Path], name: str) -> Path:
    path = Path(cgroup2_root()) / name
    path.mkdir()
    made.append(path)
    return path


def _calls_in(cgroup: Path, n: int) -> None:
    """A process that joins ``cgroup`` and calls getppid() ``n`` times."""
    code = (f"import os\nopen({str(cgroup / 'cgroup.procs')!r}, 'w').write(str(os.getpid()))\n"
            f"for _ in range({n}):\n    os.getppid()\n")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


def _scrape(url: str) -> dict[str, float]:
    with urllib.request.urlopen(url, timeout=10) as answer:
        text = answer.read().decode()
    out = {}
    for line in text.splitlines():
        if line.startswith("ebpf_exporter_"):
            name, value = line.rsplit(" ", 1)
            out[name] = float(value)
    return out


def test_exporter_fills_the_map_and_counts_by_cgroup(tmp_path: Path, cgroups: tuple[str, list[Path]]) -> None:
    tag, made = cgroups
    match, other = _make(made, f"{tag}-match"), _make(made, f"{tag}-other")
    (tmp_path / "cg.yaml").write_text(CONFIG.format(tag=tag))
    shutil.copy(bpf_object("eex_cgroup_ids"), tmp_path / "cg.bpf.o")
    proc = subprocess.Popen([console_script(), "exporter", "--config.dir", str(tmp_path), "--config.names", "cg",
                             "--web.listen-address", "127.0.0.1:0"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert "serving 1 config(s)" in line, line + proc.stderr.read() if proc.poll() is not None else line
        url = line.split(" on ", 1)[1].split(";", 1)[0]
        _calls_in(match, 7)
        _calls_in(other, 5)
        late = _make(made, f"{tag}-match2")  # made after the exporter started: found by the next walk
        time.sleep(2.5)
        _calls_in(late, 3)
        got = _scrape(url)
        assert got[f'ebpf_exporter_eex_cgroup_match_total{{cgroup="{match}"}}'] == 7
        assert got[f'ebpf_exporter_eex_cgroup_no_match_total{{cgroup="{other}"}}'] == 5
        assert got[f'ebpf_exporter_eex_cgroup_match_total{{cgroup="{late}"}}'] == 3
        assert f'ebpf_exporter_eex_cgroup_match_total{{cgroup="{other}"}}' not in got
    finally:
        proc.terminate()
        _out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err


def test_cgrp_storage_is_filled_by_cgroup_fd(cgroups: tuple[str, list[Path]]) -> None:
    tag, made = cgroups
    match, other = _make(made, f"{tag}-match"), _make(made, f"{tag}-other")
    spec = CgroupIDMap("cgroup_storage_ids", "cgrp_storage", (f"/{tag}-match$",))
    with bpfkit.Collection(bpfkit.load_spec(bpf_object("eex_cgroup_ids"))) as coll:
        filler = CgroupIDMapFiller(spec, coll.maps["cgroup_storage_ids"], interval=60)
        try:
            for path, want in ((match, 1), (other, None)):
                fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
                try:
                    raw = coll.maps["cgroup_storage_ids"].lookup(struct.pack("=i", fd))
                finally:
                    os.close(fd)
                assert (raw if raw is None else int(raw)) == want, path
        finally:
            filler.close()


def test_a_map_of_the_wrong_shape_or_name_is_refused(tmp_path: Path) -> None:
    with bpfkit.Collection(bpfkit.load_spec(bpf_object("eex_cgroup_ids"))) as coll:
        with pytest.raises(UsageError, match=r"cg.yaml:0: cgroup_id_map 'eex_cgroup_match_total': a cgrp_storage map "
                           r"needs a 4-byte key and a u64 value; the object's has 8 and 8 bytes"):
            CgroupIDMapFiller(CgroupIDMap("eex_cgroup_match_total", "cgrp_storage", ("x",)),
                              coll.maps["eex_cgroup_match_total"], path="cg.yaml")
    cfg = parse_exporter_config(CONFIG.format(tag="t").replace("name: cgroup_ids", "name: nope"), "cg.yaml")
    from bpfkit.metrics.ebpf_exporter.config import prepare_spec

    with pytest.raises(UsageError, match=r"cg.yaml:20: cgroup_id_map names map 'nope', which the object does not have"):
        prepare_spec(cfg, bpfkit.load_spec(bpf_object("eex_cgroup_ids")))
