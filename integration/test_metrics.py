# SPDX-License-Identifier: Apache-2.0
"""bpfkit.metrics on maps a real program fills: bpf/metrics_demo.bpf.c counts this process's
getppid() and getpgid(N) calls (target_tgid knob) into a struct-keyed hash, a per-CPU array of a
struct, a slot-keyed array and a hash of struct hist; the scrape text is parsed back with
prometheus_client's own parser and every value compared with the calls made."""

from __future__ import annotations

import os
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.registry import CollectorRegistry

import bpfkit
from bpfkit.metrics.collector import MapCollector
from bpfkit.metrics.plan import plan_collection
from bpfkit.metrics.server import MetricsServer
from tests.metrics_exposition import check_exposition

PPID_CALLS = 7
PGID_ARGS = [1, 3, 3, 100, 1000, 70000]  # log2 slots 0, 1, 1, 6, 9, 16
PREFIX = "bpfkit_metrics_demo_"


def _getpgid(n: int) -> None:
    try:
        os.getpgid(n)
    except OSError:  # no process N: the tracepoint fired on entry all the same
        pass


@pytest.fixture
def demo(bpf_obj: Any) -> Iterator[Any]:
    spec = bpfkit.load_spec(bpf_obj("metrics_demo"))
    spec.variables["target_tgid"].value = os.getpid()
    with bpfkit.Collection(spec) as coll:
        links = coll.attach_all()
        try:
            for _ in range(PPID_CALLS):
                os.getppid()
            for n in PGID_ARGS:
                _getpgid(n)
        finally:
            links.close()
        yield coll


def _samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """The samples of an exposition, which must be one Prometheus takes as meant (promtool)."""
    check_exposition(text)
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for fam in text_string_to_metric_families(text) for s in fam.samples}


def test_families_labels_and_values(demo: Any) -> None:
    collector = MapCollector(plan_collection(demo.maps, "metrics_demo"))
    got = _samples(collector.render())
    comm = open("/proc/self/comm").read().strip()
    me = str(os.getpid())
    # struct key -> labels; an enum by member name, char[16] as text; an integer value alone.
    assert got[(PREFIX + "calls", (("comm", comm), ("kind", "CALL_GETPPID"), ("tgid", me)))] == PPID_CALLS
    assert got[(PREFIX + "calls", (("comm", comm), ("kind", "CALL_GETPGID"), ("tgid", me)))] == len(PGID_ARGS)
    # per-CPU struct value: one family per field, the CPUs summed; scalar key -> label "key".
    assert got[(PREFIX + "totals_events", (("key", "0"),))] == PPID_CALLS + len(PGID_ARGS)
    # A field named *_sum is a counter (a gauge so named is refused by promtool): its samples end in _total.
    assert got[(PREFIX + "totals_arg_sum_total", (("key", "0"),))] == sum(PGID_ARGS)
    # slot-keyed array -> a histogram: cumulative buckets, le = the slot's inclusive upper bound.
    h = PREFIX + "pgid_hist"
    assert got[(h + "_bucket", (("le", "1"),))] == 1
    assert got[(h + "_bucket", (("le", "3"),))] == 3
    assert got[(h + "_bucket", (("le", "127"),))] == 4
    assert got[(h + "_bucket", (("le", "1023"),))] == 5
    assert got[(h + "_bucket", (("le", "131071"),))] == 6
    assert got[(h + "_bucket", (("le", "+Inf"),))] == got[(h + "_count", ())] == len(PGID_ARGS)
    # _sum: each count at the middle of its bucket (0.5, 2.5, 2.5, 95.5, 767.5, 98303.5).
    assert got[(h + "_sum", ())] == pytest.approx(0.5 + 2.5 * 2 + 95.5 + 767.5 + 98303.5)
    # struct hist {slots[32]} by tgid -> one histogram per key, the same counts.
    a = PREFIX + "arg_hist"
    for le in ("1", "3", "127", "1023", "131071", "+Inf"):
        assert got[(a + "_bucket", (("key", me), ("le", le)))] == got[(h + "_bucket", (("le", le),))]


def test_render_matches_prometheus_client(demo: Any) -> None:
    """The fast text path and the Collector protocol (generate_latest) give the same samples,
    and the raw-bytes path the same as the typed-records path."""
    from prometheus_client import generate_latest

    collector = MapCollector(plan_collection(demo.maps, "metrics_demo"))
    registry = CollectorRegistry(auto_describe=False)
    registry.register(collector)
    fast = _samples(collector.render())
    assert fast == _samples(generate_latest(registry).decode())
    slow = MapCollector(collector.plans)
    slow._layouts = dict.fromkeys(slow._layouts)  # force the records path  # type: ignore[assignment]
    assert _samples(slow.render()) == fast
    assert any(layout is not None for layout in collector._layouts.values())  # calls and totals take the raw path


def test_served_over_http(demo: Any) -> None:
    collector = MapCollector(plan_collection(demo.maps, "metrics_demo"))
    with MetricsServer("127.0.0.1:0", [collector]) as server:
        with urllib.request.urlopen(server.url, timeout=10) as resp:
            assert resp.headers["Content-Type"].startswith("text/plain; version=0.0.4")
            body = resp.read().decode()
        with pytest.raises(urllib.error.HTTPError) as err:
            urllib.request.urlopen(server.url.replace("/metrics", "/nope"), timeout=10)
        assert err.value.code == 404
        err.value.close()
    assert _samples(body)[(PREFIX + "totals_events", (("key", "0"),))] == PPID_CALLS + len(PGID_ARGS)


def test_address_errors() -> None:
    from bpfkit.errors import KernelError, UsageError
    from bpfkit.metrics.server import parse_address

    assert parse_address(":9435") == ("0.0.0.0", 9435)
    assert parse_address("127.0.0.1:9435") == ("127.0.0.1", 9435)
    assert parse_address("[::1]:9435") == ("::1", 9435)
    with pytest.raises(UsageError, match=r"--metrics '9435': not HOST:PORT with a port in 0..65535"):
        parse_address("9435")
    with pytest.raises(UsageError, match="not HOST:PORT"):
        parse_address("127.0.0.1:70000")
    with MetricsServer("127.0.0.1:0", []) as taken:
        with pytest.raises(KernelError, match=rf"--metrics 127.0.0.1:{taken.port}: listen on 127.0.0.1 port {taken.port}: .*EADDRINUSE"):
            MetricsServer(f"127.0.0.1:{taken.port}", [])


CONFIG = """\
prefix: demo
maps:
  calls:
    name: demo_syscalls
    help: Syscalls of the target process
    type: counter
    labels:
      - field: kind
        name: syscall
        decoders:
          - name: static_map
            static_map: {CALL_GETPPID: getppid, CALL_GETPGID: getpgid}
  totals:
    values:
      - field: arg_sum
        name: demo_arg_total
        type: counter
  pgid_hist:
    histogram:
      bucket_multiplier: 0.001
"""


def test_config_applied(demo: Any) -> None:
    from bpfkit.metrics.config import apply_config, parse_config

    plans = apply_config(parse_config(CONFIG, "c.yaml"), demo.maps, "metrics_demo")
    text = MapCollector(plans).render()
    got = _samples(text)
    # Only the label asked for: entries differing in the other key fields (tgid, comm) are summed.
    assert got[("demo_syscalls_total", (("syscall", "getppid"),))] == PPID_CALLS
    assert got[("demo_syscalls_total", (("syscall", "getpgid"),))] == len(PGID_ARGS)
    assert "# TYPE demo_syscalls_total counter\n# HELP" not in text and "# HELP demo_syscalls_total Syscalls of the target process" in text
    assert got[("demo_arg_total", (("key", "0"),))] == sum(PGID_ARGS)  # a counter named *_total keeps its name
    assert not any(name == "demo_totals_events" for name, _ in got)  # values: lists what is served
    assert got[("demo_pgid_hist_bucket", (("le", "0.001"),))] == 1  # bounds scaled: slot 0 <= 1 * 0.001
    assert got[("demo_pgid_hist_bucket", (("le", "0.127"),))] == 4
    assert ("demo_arg_hist_count", (("key", str(os.getpid())),)) in got  # unlisted maps keep their automatic plan
    # The same samples through prometheus_client's Collector protocol.
    from prometheus_client import generate_latest

    registry = CollectorRegistry(auto_describe=False)
    registry.register(MapCollector(plans))
    assert _samples(generate_latest(registry).decode()) == got


@pytest.mark.parametrize(("text", "message"), [
    ("maps:\n  nope: {}\n", "c.yaml:2: maps.nope: the object has no such map (it has: .bss, .rodata, arg_hist, calls, events, pgid_hist, totals)"),
    ("maps:\n  events: {}\n", "c.yaml:2: maps.events: cannot be served as metrics"),
    ("maps:\n  calls:\n    labels:\n      - field: pid\n",
     "c.yaml:4: maps.calls.labels: field 'pid': no such key field (the key's: tgid, comm, kind)"),
    ("maps:\n  calls:\n    values:\n      - field: count\n",
     "c.yaml:4: maps.calls.values: field 'count': not a numeric value field (served: value)"),
    ("maps:\n  calls:\n    histogram: {}\n", "c.yaml:3: maps.calls.histogram: map 'calls' is not histogram-shaped"),
])
def test_config_errors_against_the_object(demo: Any, text: str, message: str) -> None:
    from bpfkit.errors import UsageError
    from bpfkit.metrics.config import apply_config, parse_config

    with pytest.raises(UsageError) as err:
        apply_config(parse_config(text, "c.yaml"), demo.maps, "metrics_demo")
    assert str(err.value).startswith(message), str(err.value)


def test_cli_metrics_config_error(bpf_obj: Any, tmp_path: Any) -> None:
    import subprocess
    import sys

    cfg = tmp_path / "bad.yaml"
    cfg.write_text("maps:\n  calls:\n    type: count\n")
    proc = subprocess.run([sys.executable, "-m", "bpfkit.cli", "attach", str(bpf_obj("metrics_demo")), "--metrics", "127.0.0.1:0",
                           "--metrics-config", str(cfg)], capture_output=True, text=True, timeout=60)
    assert proc.returncode != 0
    assert f"{cfg}:3: maps.calls.type: 'count' is not one of counter, gauge" in proc.stderr, proc.stderr
    proc = subprocess.run([sys.executable, "-m", "bpfkit.cli", "attach", str(bpf_obj("metrics_demo")),
                           "--metrics-config", str(cfg)], capture_output=True, text=True, timeout=60)
    assert "--metrics-config needs --metrics ADDR" in proc.stderr, proc.stderr


def test_raw_batches_fallback_gives_the_same_entries(demo: Any) -> None:
    """Map.raw_batches one lookup per key, as on kernels before 5.6 (no BPF_MAP_LOOKUP_BATCH;
    every kernel here has it, so the flag items() sets on EINVAL is set by hand), gives the same
    entries and the same scrape."""
    m = demo.maps["calls"]
    batched = sorted(_entries(m))
    before = MapCollector(plan_collection(demo.maps, "metrics_demo")).render()
    m._batch_ok = False
    try:
        assert sorted(_entries(m)) == batched and len(batched) == 2
        assert _samples(MapCollector(plan_collection(demo.maps, "metrics_demo")).render()) == _samples(before)
    finally:
        m._batch_ok = True


def _entries(m: Any) -> list[tuple[bytes, bytes]]:
    out = []
    for keys, values, count in m.raw_batches(1):  # batches of 1: the batch boundaries too
        out.extend((keys[i * m.key_size:(i + 1) * m.key_size], values[i * m.value_stride:(i + 1) * m.value_stride])
                   for i in range(count))
    return out
