# SPDX-License-Identifier: Apache-2.0
"""bpfkit's own metrics format (issue #37) on maps a real program fills: bpf/metrics_own.bpf.c
counts this process's getpgid(N) calls (target_tgid) into maps meant as metrics and keeps
working state beside them (start times keyed by a task pointer, a time stamp, span ids).

* ``le`` bounds print in their shortest exact form (``1.5e-05``), never one twice, across
  bucket_min / bucket_type / multiplier / bucket_max (a property test over a map filled here);
* internal maps are left out unless a config names them;
* names that Prometheus keeps for counters are counters, and every exposition passes
  ``promtool check metrics`` without a remark;
* a config's ``bucket_max`` makes slot bucket_max + 1 the exact ``_sum``, not a bucket.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterator
from fractions import Fraction
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.registry import CollectorRegistry

import bpfkit
from bpfkit.errors import UsageError
from bpfkit.metrics.collector import MapCollector
from bpfkit.metrics.plan import internal, plan_collection, plan_map
from tests.metrics_exposition import check_exposition

pytest.importorskip("yaml", reason="needs PyYAML (the metrics extra)")

from bpfkit.metrics.config import apply_config, parse_config

OBJ = "metrics_own"
PREFIX = "bpfkit_metrics_own_"
ARGS = [0, 1, 3, 15, 100, 1000, 70000]  # log2 slots 0, 0, 1, 3, 6, 9, 16 (BUCKET_MAX)
BUCKET_MAX = 16
Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


@pytest.fixture
def own(bpf_obj: Any) -> Iterator[Any]:
    spec = bpfkit.load_spec(bpf_obj(OBJ))
    spec.variables["target_tgid"].value = os.getpid()
    with bpfkit.Collection(spec) as coll:
        with coll.attach_all():
            for n in ARGS:
                try:
                    os.getpgid(n)
                except OSError:  # no process N: the tracepoint fired on entry all the same
                    pass
        yield coll


def _clean(text: str) -> Samples:
    """The samples of an exposition promtool takes without a remark (naming rules included)."""
    remarks = check_exposition(text)
    assert remarks == [], remarks
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for fam in text_string_to_metric_families(text) for s in fam.samples}


def _both(plans: list[Any]) -> list[str]:
    """The exposition by render() and by prometheus_client's generate_latest."""
    collector = MapCollector(plans)
    registry = CollectorRegistry(auto_describe=False)
    registry.register(collector)
    return [collector.render(), generate_latest(registry).decode()]


# ------------------------------------------------------------------ internal maps
def test_internal_maps_are_left_out(own: Any) -> None:
    served = {p.map.name for p in plan_collection(own.maps, OBJ)}
    assert served == {"arg_seconds", "calls_total", "start_calls_total", "ops", "user_hist"}
    why = {name: internal(p) for name, m in own.maps.items() if (p := plan_map(m, OBJ)) is not None}
    assert why["start"] == "its key is a pointer (struct task_struct *): an object in flight, not a label"
    assert why["entry_ts"] == "its name says it holds ts (start times or scratch space)"
    assert why["traced"] == ("its value fields (trace_id_hi, trace_id_lo, span_id) are time stamps or identifiers, "
                             "not quantities")
    assert why["start_calls_total"] is None  # says start, but named as a counter
    # A config serves what it names, internal or not; what it does not name is left out as above.
    plans = apply_config(parse_config("maps:\n  start: {}\n  calls_total: {}\n", "c.yaml"), own.maps, OBJ)
    assert {p.map.name for p in plans} == served | {"start"}
    for text in _both(plans):
        got = _clean(text)
        starts = [v for (name, _), v in got.items() if name == PREFIX + "start"]
        assert len(starts) == 1 and starts[0] > 0  # one task, its ktime
    only = apply_config(parse_config("only_listed: true\nmaps:\n  traced: {}\n", "c.yaml"), own.maps, OBJ)
    assert [p.map.name for p in only] == ["traced"]


def test_libbpf_usdt_maps_are_left_out(bpf_obj: Any) -> None:
    """usdt.bpf.h adds __bpf_usdt_specs and __bpf_usdt_ip_to_spec_id to a USDT object: libbpf's."""
    from bpfkit.metrics.plan import internal_maps

    with bpfkit.Collection(bpfkit.load_spec(bpf_obj("usdt_args"))) as coll:
        assert [p.map.name for p in plan_collection(coll.maps, "usdt_args")] == ["usdt_hits"]
        why = "its name begins with __, as the maps libbpf adds for itself do (__bpf_usdt_specs)"
        assert internal_maps(coll.maps, "usdt_args") == {"__bpf_usdt_ip_to_spec_id": why, "__bpf_usdt_specs": why}


# ------------------------------------------------------------------ counters and promtool
def test_counters_by_name_and_promtool_clean(own: Any) -> None:
    me = str(os.getpid())
    for text in _both(plan_collection(own.maps, OBJ)):
        got = _clean(text)
        assert "# TYPE bpfkit_metrics_own_calls_total counter" in text
        assert got[(PREFIX + "calls_total", (("key", me),))] == len(ARGS)  # not calls_total_total
        assert got[(PREFIX + "start_calls_total", (("key", me),))] == len(ARGS)
        assert got[(PREFIX + "ops_count_total", (("key", "0"),))] == len(ARGS)  # a field named count: a counter
        assert got[(PREFIX + "ops_arg_sum_total", (("key", "0"),))] == sum(ARGS)  # ... named *_sum
        assert got[(PREFIX + "ops_max_arg", (("key", "0"),))] == max(ARGS)  # a gauge
        assert not any("_total_total" in name for name, _ in got)


def test_config_gauge_named_as_a_counter_is_refused(own: Any) -> None:
    with pytest.raises(UsageError) as err:
        apply_config(parse_config("maps:\n  calls_total:\n    type: gauge\n", "c.yaml"), own.maps, OBJ)
    assert str(err.value).startswith("c.yaml:2: maps.calls_total: type: gauge, but bpfkit_metrics_own_calls_total ends "
                                     "as a counter's samples do"), str(err.value)
    with pytest.raises(UsageError) as err:
        apply_config(parse_config("maps:\n  ops:\n    values:\n      - field: max_arg\n        name: top_count\n"
                                  "        type: gauge\n", "c.yaml"), own.maps, OBJ)
    assert str(err.value).startswith("c.yaml:4: maps.ops.values: field 'max_arg': type: gauge, but top_count"), str(err.value)
    # Renamed without a type: the kind follows the name it is served as.
    plans = apply_config(parse_config("maps:\n  calls_total:\n    name: own_calls\n  ops:\n    values:\n"
                                      "      - field: max_arg\n        name: own_top\n", "c.yaml"), own.maps, OBJ)
    kinds = {f.name: f.kind for p in plans for f in p.fields}
    assert kinds["own_calls"] == "gauge" and kinds["own_top"] == "gauge" and kinds[PREFIX + "start_calls_total"] == "counter"


# ------------------------------------------------------------------ bucket_max: the exact _sum
SUM_CONFIG = """\
maps:
  arg_seconds:
    histogram:
      bucket_max: 16
      bucket_multiplier: 1e-6
"""


def test_bucket_max_slot_is_the_exact_sum(own: Any) -> None:
    plans = apply_config(parse_config(SUM_CONFIG, "c.yaml"), own.maps, OBJ)
    for text in _both(plans):
        got = _clean(text)
        h, kind = PREFIX + "arg_seconds", ("kind", "1")
        assert sum(ARGS) == 71119 and got[(h + "_sum", (kind,))] == 0.071119
        assert f'{h}_sum{{kind="1"}} 0.071119\n' in text  # exact: slot 17 holds the sum the program added up
        assert got[(h + "_count", (kind,))] == got[(h + "_bucket", (kind, ("le", "+Inf")))] == len(ARGS)
        bounds = {dict(labels)["le"]: v for (name, labels), v in got.items() if name == h + "_bucket"}
        # Slots 0 .. 16 are the buckets (le = (2^(i+1) - 1) x 1e-6); slot 17 (the sum) is none of them.
        assert list(bounds) == [_text((2 << i) - 1, "1e-6") for i in range(BUCKET_MAX + 1)] + ["+Inf"]
        assert bounds["1e-06"] == 2 and bounds["3e-06"] == 3 and bounds["1.5e-05"] == 4  # 0, 1 | 3 | 15
        assert bounds["0.000127"] == 5 and bounds["0.001023"] == 6 and bounds["0.131071"] == 7
    # Without bucket_max the program's sum slot reads as a bucket: _sum is the approximation.
    auto = _clean(MapCollector(plan_collection(own.maps, OBJ)).render())
    assert auto[(PREFIX + "arg_seconds_count", (("kind", "1"),))] == len(ARGS) + sum(ARGS)


def test_bucket_max_past_the_slots(own: Any) -> None:
    with pytest.raises(UsageError) as err:
        apply_config(parse_config("maps:\n  user_hist:\n    histogram:\n      bucket_max: 63\n", "c.yaml"), own.maps, OBJ)
    assert str(err.value) == "c.yaml:4: maps.user_hist.histogram.bucket_max: 63: the sum's slot (64) is past the map's 64 slots"


# ------------------------------------------------------------------ le: exact, never twice
def _text(n: int, multiplier: str) -> str:
    """The shortest text of the float nearest n x multiplier (the decimal as written)."""
    value = float(Fraction(n) * Fraction(multiplier))
    return str(int(value)) if value.is_integer() else repr(value)


MULTIPLIERS = ["1", "1e-6", "1e-3", "1e-9", "0.5", "0.1", "3", "1e-5", "2.5e-7", "1000"]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])  # TCG VMs stall draws
@given(kind=st.sampled_from(["exp2", "linear"]), bucket_min=st.integers(0, 3), multiplier=st.sampled_from(MULTIPLIERS),
       base=st.integers(-5, 10**17), step=st.integers(1, 10**6), bucket_max=st.none() | st.integers(0, 62),
       counts=st.lists(st.integers(0, 1000), min_size=64, max_size=64))
def test_histogram_buckets_property(own: Any, kind: str, bucket_min: int, multiplier: str, base: int, step: int,
                                    bucket_max: int | None, counts: list[int]) -> None:
    """Whatever the config: ``le`` texts are the shortest exact form of each bound, strictly
    increasing, none twice; counts cumulative; ``_count`` the ``+Inf`` bucket; the sum slot
    (bucket_max + 1) in ``_sum`` alone."""
    m = own.maps["user_hist"]
    m.update_batch(list(enumerate(counts)))
    lines = [f"      bucket_type: {kind}", f"      bucket_min: {bucket_min}", f"      bucket_multiplier: {multiplier}",
             f"      base: {base}", f"      step: {step}"]
    if bucket_max is not None:
        if bucket_max < bucket_min:
            bucket_max = bucket_min
        lines.append(f"      bucket_max: {bucket_max}")
    config = parse_config("only_listed: true\nmaps:\n  user_hist:\n    histogram:\n" + "\n".join(lines) + "\n", "c.yaml")
    [plan] = apply_config(config, own.maps, OBJ)
    h = PREFIX + "user_hist"
    for text in _both([plan]):  # (promtool is run on histograms by the tests above: here it would cost 0.1 s an example)
        samples = [s for fam in text_string_to_metric_families(text) for s in fam.samples]
        les = [s.labels["le"] for s in samples if s.name == h + "_bucket"]
        values = [s.value for s in samples if s.name == h + "_bucket"]
        assert les[-1] == "+Inf" and len(set(les)) == len(les)
        floats = [float(le) for le in les]
        assert all(a < b for a, b in itertools.pairwise(floats)), les
        assert values == sorted(values)
        count = next(s.value for s in samples if s.name == h + "_count")
        assert count == values[-1]
        width = bucket_max + 1 if bucket_max is not None else 64
        total = sum(counts[:width]) + (sum(counts[width + 1:]) if bucket_max is not None else 0)
        assert count == total
        want, middles = [], Fraction(0)
        for i in range(width):
            if kind == "exp2":
                j = i - bucket_min
                low, upper = (0, 1) if j <= 0 else (1 << j, (2 << j) - 1)
            else:
                low, upper = base + i * step, base + (i + 1) * step - 1
            want.append(_text(upper, multiplier))
            middles += counts[i] * Fraction(low + upper, 2)
        # The le texts: each slot's exact bound, a slot whose bound is the next one's folded into it.
        assert les[:-1] == [t for i, t in enumerate(want) if i == width - 1 or float(t) < float(want[i + 1])]
        total_sum = next(s.value for s in samples if s.name == h + "_sum")
        if bucket_max is not None:  # exact: the sum slot's value
            assert total_sum == float(Fraction(counts[bucket_max + 1]) * Fraction(multiplier))
        else:  # approximate: each count at the middle of its slot
            assert total_sum == float(middles * Fraction(multiplier))

def test_cli_says_which_maps_it_leaves_out(bpf_obj: Any) -> None:
    import re
    import sys

    from conftest import start_attached
    from integration.test_metrics_prometheus import _free_port, _stop

    proc, seen = start_attached([sys.executable, "-m", "bpfkit.cli", "attach", str(bpf_obj(OBJ)), "--set",
                                 f"target_tgid={os.getpid()}", "--metrics", f"127.0.0.1:{_free_port()}"])
    _stop(proc, "bpfkit attach")
    notes = [line for line in seen if line.startswith("bpfkit: note: metrics:")]
    assert notes == [
        "bpfkit: note: metrics: map entry_ts not served: its name says it holds ts (start times or scratch space) "
        "(--metrics-config that names it serves it)\n",
        "bpfkit: note: metrics: map start not served: its key is a pointer (struct task_struct *): an object in flight, "
        "not a label (--metrics-config that names it serves it)\n",
        "bpfkit: note: metrics: map traced not served: its value fields (trace_id_hi, trace_id_lo, span_id) are time "
        "stamps or identifiers, not quantities (--metrics-config that names it serves it)\n"], seen
    assert any(re.fullmatch(r"serving 5 map\(s\) as metrics on http://127\.0\.0\.1:\d+/metrics: arg_seconds, calls_total, "
                            r"ops, start_calls_total, user_hist\n", line) for line in seen), seen
