# SPDX-License-Identifier: Apache-2.0
"""Checking a Prometheus text exposition the way Prometheus reads it (a helper of the metrics
tests): ``promtool check metrics`` (Debian's prometheus package; scripts/setup.sh installs it)
parses it, and the checks promtool 2.42 leaves out are made here on prometheus_client's parse:
one series per name and label set (promtool accepts two samples of one series), histogram
buckets with strictly increasing finite ``le`` bounds before ``+Inf``, cumulative counts."""

from __future__ import annotations

import math
import shutil
import subprocess

import pytest

PROMTOOL = shutil.which("promtool") or "/usr/bin/promtool"


def check_exposition(text: str) -> list[str]:
    """Fail the test if ``text`` is not an exposition Prometheus takes as meant; return
    promtool's lint remarks (naming conventions, e.g. a gauge ending in ``_sum``), which are
    advice, not errors. Skips the test without promtool."""
    if not shutil.which(PROMTOOL):
        pytest.skip("needs promtool (Debian's prometheus package; scripts/setup.sh installs it)")
    proc = subprocess.run([PROMTOOL, "check", "metrics"], check=False, input=text, capture_output=True, text=True, timeout=60)
    # promtool: 0 fine, 3 lint remarks only, anything else (1) the text does not parse.
    assert proc.returncode in (0, 3), f"promtool check metrics (rc {proc.returncode}): {proc.stderr}{proc.stdout}"
    _check_series(text)
    return [line for line in (proc.stdout + proc.stderr).splitlines() if line.strip()]


def _check_series(text: str) -> None:
    from prometheus_client.parser import text_string_to_metric_families

    seen: set[tuple[str, tuple[tuple[str, str], ...]]] = set()
    families: set[str] = set()
    for fam in text_string_to_metric_families(text):
        assert fam.name not in families, f"family {fam.name} given twice"
        families.add(fam.name)
        buckets: dict[tuple[tuple[str, str], ...], list[tuple[float, float]]] = {}
        for s in fam.samples:
            labels = tuple(sorted(s.labels.items()))
            assert (s.name, labels) not in seen, f"series {s.name}{dict(labels)} given twice"
            seen.add((s.name, labels))
            if fam.type == "histogram" and s.name.endswith("_bucket"):
                rest = tuple(kv for kv in labels if kv[0] != "le")
                buckets.setdefault(rest, []).append((float(s.labels["le"]), s.value))
        for rest, row in buckets.items():
            bounds = [b for b, _ in row]
            assert bounds[-1] == math.inf, f"{fam.name}{dict(rest)}: no le=\"+Inf\" bucket last"
            assert all(math.isfinite(b) for b in bounds[:-1]), f"{fam.name}{dict(rest)}: an infinite bound before +Inf: {bounds}"
            assert bounds == sorted(set(bounds)), f"{fam.name}{dict(rest)}: bounds not strictly increasing: {bounds}"
            counts = [c for _, c in row]
            assert counts == sorted(counts), f"{fam.name}{dict(rest)}: buckets not cumulative: {counts}"
