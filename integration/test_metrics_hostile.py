# SPDX-License-Identifier: Apache-2.0
"""bpfkit.metrics on maps an object's author chose to be awkward (issue 35, items 7 and 8):
histograms with slots past float's range must not take the scrape down, a map that cannot be
rendered is left out and counted, and names Prometheus would refuse or misread are refused at
start-up. Objects built with clang (tests/clang_objects.py); the maps are filled from here."""

from __future__ import annotations

import io
import struct
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.registry import CollectorRegistry

import bpfkit
from bpfkit.errors import UsageError
from bpfkit.metrics.collector import MapCollector
from bpfkit.metrics.config import apply_config, parse_config
from bpfkit.metrics.plan import plan_collection
from bpfkit.metrics.server import MetricsServer
from tests.clang_objects import build_c
from tests.metrics_exposition import check_exposition

pytest.importorskip("yaml", reason="needs PyYAML (the metrics extra)")

# big_hist: a bcc-style slot-keyed array of 2,048 log2 slots (slot 1,023 and up: bounds past
# 2**1024, not a float); lat: {pid, slot} -> count, a slot from the program; ok: renders fine.
HIST_SOURCE = """
struct pid_slot { __u32 pid; __u32 slot; };
struct { __uint(type, BPF_MAP_TYPE_ARRAY); __uint(max_entries, 2048); __type(key, __u32); __type(value, __u64); } big_hist SEC(".maps");
struct { __uint(type, BPF_MAP_TYPE_HASH); __uint(max_entries, 64); __type(key, struct pid_slot); __type(value, __u64); } lat SEC(".maps");
struct { __uint(type, BPF_MAP_TYPE_ARRAY); __uint(max_entries, 1); __type(key, __u32); __type(value, __u64); } ok SEC(".maps");
SEC("tracepoint/syscalls/sys_enter_getppid") int p(void *ctx) {
    __u32 k = 0; __u64 *v = bpf_map_lookup_elem(&big_hist, &k); if (v) *v += 1;
    v = bpf_map_lookup_elem(&ok, &k); if (v) *v += 1;
    struct pid_slot s = {}; v = bpf_map_lookup_elem(&lat, &s); if (v) *v += 1;
    return 0;
}
"""
# clash: value fields a.b and a_b are both ..._a_b; clash_a: a value field b beside map clash's.
CLASH_SOURCE = """
struct ab { struct { __u64 b; } a; __u64 a_b; };
struct { __uint(type, BPF_MAP_TYPE_ARRAY); __uint(max_entries, 1); __type(key, __u32); __type(value, struct ab); } clash SEC(".maps");
SEC("tracepoint/syscalls/sys_enter_getppid") int p(void *ctx) {
    __u32 k = 0; struct ab *v = bpf_map_lookup_elem(&clash, &k); if (v) v->a_b += 1;
    return 0;
}
"""
TWO_MAPS_SOURCE = """
struct cb { __u64 b; };
struct { __uint(type, BPF_MAP_TYPE_ARRAY); __uint(max_entries, 1); __type(key, __u32); __type(value, struct cb); } m_c SEC(".maps");
struct { __uint(type, BPF_MAP_TYPE_ARRAY); __uint(max_entries, 1); __type(key, __u32); __type(value, __u64); } m_c_b SEC(".maps");
SEC("tracepoint/syscalls/sys_enter_getppid") int p(void *ctx) {
    __u32 k = 0; __u64 *v = bpf_map_lookup_elem(&m_c_b, &k); if (v) *v += 1;
    struct cb *c = bpf_map_lookup_elem(&m_c, &k); if (c) c->b += 1;
    return 0;
}
"""


def _collection(source: str, tmp_path: Path) -> Iterator[Any]:
    path = tmp_path / "hostile.bpf.o"
    path.write_bytes(build_c(source, tmp_path))
    with bpfkit.Collection(bpfkit.load_spec(str(path))) as coll:
        yield coll


@pytest.fixture
def hists(tmp_path: Path) -> Iterator[Any]:
    yield from _collection(HIST_SOURCE, tmp_path)


def _samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for fam in text_string_to_metric_families(text) for s in fam.samples}


def _both(collector: MapCollector) -> tuple[str, str]:
    """The collector's exposition by render() and by prometheus_client's generate_latest."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(collector)
    return collector.render(), generate_latest(registry).decode()


def test_log2_slots_past_float_range(hists: Any) -> None:
    """Slot 1,023 of a log2 histogram is bounded by 2**1024 - 1, past float (OverflowError in
    every scrape before): its counts are in +Inf, no bucket is served twice or as inf."""
    big = hists.maps["big_hist"]
    for slot, n in ((0, 1), (9, 2), (1022, 3), (1023, 4), (2047, 5)):
        big[struct.pack("=I", slot)] = struct.pack("=Q", n)
    lat = hists.maps["lat"]
    for slot, n in ((3, 1), (1500, 7), (4000, 2)):  # a {pid, slot} key: slots as the program wrote them
        lat[struct.pack("=II", 42, slot)] = struct.pack("=Q", n)
    errors = io.StringIO()
    collector = MapCollector(plan_collection(hists.maps, "hostile"), errors=errors)
    for text in _both(collector):
        check_exposition(text)
        got = _samples(text)
        h = "bpfkit_hostile_big_hist"
        assert got[(h + "_bucket", (("le", "1"),))] == 1
        assert got[(h + "_bucket", (("le", "1023"),))] == 3
        assert got[(h + "_bucket", (("le", str(int(2.0 ** 1023))),))] == 6  # slot 1,022: 2**1023 - 1 as a float
        assert got[(h + "_bucket", (("le", "+Inf"),))] == got[(h + "_count", ())] == 15
        assert got[(h + "_sum", ())] == float("inf")  # counts past float's range: their middle is too
        bounds = [float(dict(labels)["le"]) for name, labels in got if name == h + "_bucket"]
        assert len(bounds) == 1023 + 1  # slots 0..1,022 and +Inf
        assert got[("bpfkit_hostile_lat_bucket", (("le", "1"), ("pid", "42")))] == 0
        assert got[("bpfkit_hostile_lat_bucket", (("le", "15"), ("pid", "42")))] == 1
        assert got[("bpfkit_hostile_lat_bucket", (("le", "+Inf"), ("pid", "42")))] == 10
        assert got[("bpfkit_hostile_ok", (("key", "0"),))] == 0
        assert got[("bpfkit_metrics_render_errors_total", (("map", "big_hist"),))] == 0
    with MetricsServer("127.0.0.1:0", [collector]) as server, urllib.request.urlopen(server.url, timeout=10) as resp:
        assert resp.status == 200  # every scrape answered 500 before
        check_exposition(resp.read().decode())
    assert errors.getvalue() == ""


def test_map_that_cannot_be_rendered_is_left_out_and_counted(hists: Any) -> None:
    """A label decoder that raises (a bug: no kernel fault makes one, so the plan's text
    function is replaced here) leaves its map out of each scrape, says so once, counts it in
    bpfkit_metrics_render_errors_total, and every other map is served."""
    hists.maps["ok"][struct.pack("=I", 0)] = struct.pack("=Q", 5)
    hists.maps["lat"][struct.pack("=II", 42, 1)] = struct.pack("=Q", 1)
    plans = plan_collection(hists.maps, "hostile")
    lat = next(p for p in plans if p.map.name == "lat")

    def broken(value: object) -> str:
        raise RuntimeError("decoder bug")

    lat.labels[0].text = broken
    errors = io.StringIO()
    collector = MapCollector(plans, errors=errors)
    for scrape in range(1, 4):
        for text in _both(collector):
            check_exposition(text)
            got = _samples(text)
            assert got[("bpfkit_hostile_ok", (("key", "0"),))] == 5
            assert not any(name.startswith("bpfkit_hostile_lat") for name, _ in got)
        # Each scrape is counted twice: once by render(), once by generate_latest.
        assert got[("bpfkit_metrics_render_errors_total", (("map", "lat"),))] == 2 * scrape
        assert got[("bpfkit_metrics_render_errors_total", (("map", "ok"),))] == 0
    assert errors.getvalue() == ("bpfkit: metrics: map 'lat' left out: RuntimeError: decoder bug "
                                 "(counted in bpfkit_metrics_render_errors_total)\n")


def test_value_fields_that_share_a_name_are_refused(tmp_path: Path) -> None:
    for coll in _collection(CLASH_SOURCE, tmp_path):
        with pytest.raises(UsageError) as err:
            plan_collection(coll.maps, "hostile")
        assert str(err.value) == ("metrics for hostile: map clash field a.b (bpfkit_hostile_clash_a_b) and map clash field a_b "
                                  "(bpfkit_hostile_clash_a_b) are both served as bpfkit_hostile_clash_a_b: serve one of them "
                                  "under another name with --metrics-config (name:)")
        # A config that names one of them apart serves both.
        config = parse_config("maps:\n  clash:\n    values:\n      - field: a.b\n        name: clash_nested\n"
                              "      - field: a_b\n", "c.yaml")
        text = MapCollector(apply_config(config, coll.maps, "hostile")).render()
        check_exposition(text)
        assert {"clash_nested", "bpfkit_hostile_clash_a_b"} <= {name for name, _ in _samples(text)}


def test_two_maps_that_share_a_name_are_refused(tmp_path: Path) -> None:
    for coll in _collection(TWO_MAPS_SOURCE, tmp_path):
        with pytest.raises(UsageError, match=r"map m_c field b \(bpfkit_hostile_m_c_b\) and map m_c_b field value "
                                             r"\(bpfkit_hostile_m_c_b\) are both served as bpfkit_hostile_m_c_b"):
            plan_collection(coll.maps, "hostile")
        with pytest.raises(UsageError) as err:
            apply_config(parse_config("maps:\n  m_c: {}\n  m_c_b:\n    name: bpfkit_hostile_m_c_b\n", "c.yaml"), coll.maps, "hostile")
        assert str(err.value).startswith("c.yaml:3: maps.m_c_b: map m_c field b (bpfkit_hostile_m_c_b) and map m_c_b field value")
        # A counter's samples end in _total: a family of that name (a counter too, by its name) is the same series.
        with pytest.raises(UsageError, match=r"map m_c field b \(x_b\) and map m_c_b field value \(x_b_total\) "
                                             r"are both served as x_b_total"):
            apply_config(parse_config("maps:\n  m_c:\n    name: x\n    type: counter\n  m_c_b:\n    name: x_b_total\n",
                                      "c.yaml"), coll.maps, "hostile")


@pytest.mark.parametrize(("labels", "message"), [
    ("      - field: pid\n        name: le\n",
     "c.yaml:4: maps.lat.labels: field 'pid': label 'le' is the one a histogram's buckets are told apart by"),
    ("      - field: pid\n      - field: pid\n",
     "c.yaml:5: maps.lat.labels: field 'pid': label 'pid' given twice (first on line 4)"),
    ("      - field: pid\n        name: __pid\n",
     "c.yaml:4: maps.lat.labels: field 'pid': label '__pid': names beginning with __ are reserved"),
])
def test_label_names_prometheus_refuses(hists: Any, labels: str, message: str) -> None:
    with pytest.raises(UsageError) as err:
        apply_config(parse_config("maps:\n  lat:\n    labels:\n" + labels, "c.yaml"), hists.maps, "hostile")
    assert str(err.value).startswith(message), str(err.value)


def test_cli_refuses_an_alias_bomb_in_little_memory(bpf_obj: Any, tmp_path: Path) -> None:
    """A 703-byte --metrics-config of nested aliases (9**9 values expanded) kept bpfkit attach
    at 517 MB: refused before anything is loaded, with the file and line, in under 100 MB."""
    import os
    import subprocess
    import sys
    import time

    from tests.test_metrics_config import ALIAS_BOMB

    cfg = tmp_path / "bomb.yaml"
    cfg.write_text(ALIAS_BOMB)
    out, err, hwm = tmp_path / "out", tmp_path / "err", tmp_path / "hwm"
    # The child's own peak: VmHWM of its address space, read by an atexit hook as it ends (the
    # command runs atexit before its os._exit). Not wait4's ru_maxrss: the kernel carries the
    # forking process's RSS into it at exec, so it would count this (large) pytest process.
    report = ("import atexit, runpy, sys\n"
              "def _hwm(path=sys.argv[1]):\n"
              "    with open('/proc/self/status') as f, open(path, 'w') as out:\n"
              "        out.write(next(l for l in f if l.startswith('VmHWM:')).split()[1])\n"
              "atexit.register(_hwm)\n"
              "sys.argv = [sys.argv[0], *sys.argv[2:]]\n"
              "runpy.run_module('bpfkit', run_name='__main__', alter_sys=True)\n")
    with out.open("w") as fo, err.open("w") as fe:
        proc = subprocess.Popen([sys.executable, "-c", report, str(hwm), "attach", str(bpf_obj("metrics_demo")),
                                 "--metrics", "127.0.0.1:0", "--metrics-config", str(cfg)], stdout=fo, stderr=fe)
    try:
        proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        raise AssertionError(f"bpfkit attach still running after 60 s: {out.read_text()}{err.read_text()}") from None
    assert proc.returncode == 2, out.read_text() + err.read_text()
    assert err.read_text() == (f"bpfkit: error: {cfg}:12: more than 20000 values once aliases are expanded (bpfkit's limit "
                               "for a metrics config)\n")
    assert "attached" not in out.read_text()
    assert int(hwm.read_text()) < 100 << 10, hwm.read_text()  # KiB
