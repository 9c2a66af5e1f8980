# SPDX-License-Identifier: Apache-2.0
"""ebpf_exporter's histogram rules (bpfkit.metrics.ebpf_exporter.histogram), side by side with the
rules as its exporter/histogram.go states them, written out here a second way: for the same
map contents, the same ``le`` values, cumulative counts, ``_count`` and ``_sum``. Kernel-free:
the maps' contents are what a program's increment helpers would leave."""

from __future__ import annotations

import math
import os
import shutil
import subprocess
from pathlib import Path

import pytest

pytest.importorskip("prometheus_client")
pytest.importorskip("yaml")
from hypothesis import given, settings
from hypothesis import strategies as st

from bpfkit.errors import UsageError
from bpfkit.metrics.ebpf_exporter.config import Histogram, Label, DecoderConf, parse_exporter_config
from bpfkit.metrics.ebpf_exporter.histogram import go_float, transform

BUCKET = Label("bucket", 8, 0, (DecoderConf("uint"),))


def hist(btype: str, *, lo: int = 0, hi: int = 0, mult: float = 1.0, keys: tuple[float, ...] = ()) -> Histogram:
    return Histogram("h", "help", btype, (BUCKET,), mult, lo, hi, keys)  # type: ignore[arg-type]


def reference(counts: dict[float, int], h: Histogram) -> tuple[dict[float, int], int, float]:
    """The documented rules, a second time: {le: cumulative}, count, sum."""
    if h.bucket_type == "fixed":
        keys = list(h.bucket_keys)
        sum_key = keys[-1] + 1
    else:
        keys = [float(k) for k in range(h.bucket_min, h.bucket_max + 1)]
        sum_key = h.bucket_max + 1
    out: dict[float, int] = {}
    running = 0
    for k in keys:
        running += counts.get(k, 0)
        if h.bucket_type == "exp2":
            le = math.pow(2, k) * h.bucket_multiplier
        elif h.bucket_type == "exp2zero":
            le = 0.0 if k == 0 else math.pow(2, k - 1) * h.bucket_multiplier
        else:
            le = k * h.bucket_multiplier
        out[le] = running
    return out, running, counts.get(sum_key, 0) * h.bucket_multiplier


def as_floats(buckets: list[tuple[str, int]]) -> dict[float, int]:
    return {float(le): n for le, n in buckets}


def test_exp2_microseconds_served_as_seconds() -> None:
    # A latency histogram in microseconds: 3 observations of 1 us (key 0), 2 of 2-3 us (key 1),
    # 1 of 1000 us (key 10, le 1.024 ms); the sum key (bucket_max + 1 = 21) holds 1007 us.
    h = hist("exp2", lo=0, hi=20, mult=1e-6)
    counts = {0.0: 3, 1.0: 2, 10.0: 1, 21.0: 1007}
    buckets, count, total = transform(counts, h)
    assert buckets[0] == ("1e-06", 3)
    assert buckets[1] == ("2e-06", 5)
    assert ("0.001024", 6) in buckets
    assert buckets[-1] == ("+Inf", 6)
    assert len(buckets) == 21 + 1  # keys 0..20 and +Inf: the sum key is not a bucket
    assert count == 6
    assert total == pytest.approx(1007e-6)


def test_exp2zero_linear_fixed() -> None:
    b, count, _ = transform({0.0: 4, 1.0: 1, 3.0: 2}, hist("exp2zero", lo=0, hi=3))
    assert b == [("0", 4), ("1", 5), ("2", 5), ("4", 7), ("+Inf", 7)]
    b, count, total = transform({0.0: 1, 2.0: 3, 6.0: 60}, hist("linear", lo=0, hi=5, mult=10))
    assert b[:3] == [("0", 1), ("10", 1), ("20", 4)] and count == 4 and total == 600
    b, count, total = transform({1.0: 2, 5.0: 1, 100.0: 9, 101.0: 77}, hist("fixed", keys=(1, 5, 10, 100)))
    assert b == [("1", 2), ("5", 3), ("10", 3), ("100", 12), ("+Inf", 12)]
    assert total == 77  # the last key + 1


def test_keys_outside_the_range_are_not_counted() -> None:
    _, count, _ = transform({-1.0: 5, 0.0: 1, 3.0: 1, 99.0: 4}, hist("exp2", lo=0, hi=3))
    assert count == 1 + 1  # 99 is neither a bucket nor the sum key (4)


LE_VALUES = [0.0, 1.0, 100.0, 0.5, 1e-05, 1e-06, 2.5e-05, 0.0001, 0.001024, 1234.5, 123456.0, 1e6, 2.0 ** 20,
             2.0 ** 40 * 1e-9, 15 * 1e-6, 1e21, 1e-300, 3 * 0.1, 1 / 3, 2.0 ** 63]


def test_le_text_is_the_go_clients() -> None:
    assert go_float(1e-05) == "1e-05"
    assert go_float(2 ** 20) == "1.048576e+06"
    assert go_float(0.001024) == "0.001024"
    assert go_float(2 ** 3 * 1e-6) == "8e-06"
    assert go_float(100.0) == "100"  # prometheus_client would write 100.0: another label value


@pytest.mark.skipif(shutil.which("go") is None, reason="needs the go toolchain (golang-go, installed by scripts/setup.sh)")
def test_le_text_side_by_side_with_go(tmp_path: Path) -> None:
    """What Go's strconv.FormatFloat(v, 'g', -1, 64) prints (Prometheus' Go client's writeFloat,
    which ebpf_exporter's le labels go through), value by value."""
    src = tmp_path / "main.go"
    values = ", ".join(float.hex(v) for v in LE_VALUES)
    src.write_text("package main\n\nimport (\n\t\"fmt\"\n\t\"strconv\"\n)\n\nfunc main() {\n"
                   f"\tfor _, v := range []float64{{{values}}} {{\n"
                   "\t\tfmt.Println(strconv.FormatFloat(v, 'g', -1, 64))\n\t}\n}\n")
    env = {**os.environ, "GOCACHE": str(tmp_path / "cache"), "GOPATH": str(tmp_path / "gopath"), "GOFLAGS": "-mod=mod",
           "GO111MODULE": "off", "HOME": str(tmp_path)}
    out = subprocess.run(["go", "run", str(src)], capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == [go_float(v) for v in LE_VALUES]


@settings(max_examples=300, deadline=None)
@given(btype=st.sampled_from(["exp2", "exp2zero", "linear"]), lo=st.integers(0, 10), size=st.integers(1, 40),
       mult=st.sampled_from([1.0, 1e-6, 1e-9, 0.001, 1024.0, 0.5]),
       counts=st.dictionaries(st.integers(-2, 60).map(float), st.integers(0, 2 ** 40), max_size=30))
def test_same_as_the_documented_rules(btype: str, lo: int, size: int, mult: float, counts: dict[float, int]) -> None:
    h = hist(btype, lo=lo, hi=lo + size, mult=mult)
    buckets, count, total = transform(counts, h)
    want, want_count, want_sum = reference(counts, h)
    assert as_floats(buckets[:-1]) == want
    assert buckets[-1] == ("+Inf", want_count) and count == want_count
    assert total == want_sum
    les = [float(le) for le, _ in buckets[:-1]]
    assert les == sorted(set(les))  # strictly increasing: no le twice


def test_config_refuses_a_histogram_of_zero_size() -> None:
    text = ("metrics:\n  histograms:\n    - name: h\n      help: x\n      bucket_type: exp2\n      bucket_min: 3\n"
            "      bucket_max: 3\n      labels:\n        - name: bucket\n          size: 8\n          decoders:\n"
            "            - name: uint\n")
    with pytest.raises(UsageError, match=r"h.yaml:7: metrics.histograms\[0\]: bucket_max \(3\) must be above bucket_min"):
        parse_exporter_config(text, "h.yaml")
