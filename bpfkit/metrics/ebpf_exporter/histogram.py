# SPDX-License-Identifier: Apache-2.0
"""ebpf_exporter's histogram rules (its exporter/histogram.go), exactly: a histogram map is keyed
by the labels and, last, a bucket key; each value counts the observations in that bucket.

* the upper bound (``le``) of bucket key ``k``: ``exp2`` 2^k x multiplier; ``exp2zero`` 0 for
  key 0, else 2^(k-1) x multiplier; ``linear`` and ``fixed`` k x multiplier;
* buckets are cumulated over keys ``bucket_min`` .. ``bucket_max`` (``fixed``: the listed
  ``bucket_keys``), missing keys counting 0, so every series has the same ``le`` values;
* key ``bucket_max + 1`` (``fixed``: the last key + 1) is not a bucket: it holds the sum of the
  observed values, served as ``_sum`` x multiplier (0 when the program does not keep it);
* ``_count`` is the last cumulative count; keys outside the range are not counted.

The ``le`` text is the float as Prometheus' Go client prints it (prometheus_client's
``floatToGoString``, the same shortest form: ``1e-06``, ``0.001024``, ``1.048576e+06``).
"""

from __future__ import annotations

from collections.abc import Mapping

from prometheus_client.utils import floatToGoString

from .config import Histogram

__all__ = ["bucket_keys", "upper_bound", "sum_key", "transform", "go_float"]


def go_float(value: float) -> str:
    """``value`` as Prometheus' Go client writes it (strconv's shortest 'g' form)."""
    return str(floatToGoString(value))  # type: ignore[no-untyped-call]


def bucket_keys(hist: Histogram) -> list[float]:
    """The bucket keys of ``hist``, in order."""
    if hist.bucket_type == "fixed":
        return list(hist.bucket_keys)
    return [float(k) for k in range(hist.bucket_min, hist.bucket_max + 1)]


def sum_key(hist: Histogram) -> float:
    """The key whose value is the sum of the observations (ebpf_exporter's "optional sum key")."""
    if hist.bucket_type == "fixed":
        return hist.bucket_keys[-1] + 1
    return float(hist.bucket_max + 1)


def upper_bound(hist: Histogram, key: float) -> float:
    """The ``le`` of bucket ``key`` (histogramKeyerMaker's arithmetic, in the same float64 steps)."""
    if hist.bucket_type == "exp2":
        return float(2.0 ** key) * hist.bucket_multiplier  # math.Exp2 and ** agree: powers of two are exact
    if hist.bucket_type == "exp2zero":
        return 0.0 if key == 0 else float(2.0 ** (key - 1)) * hist.bucket_multiplier
    return key * hist.bucket_multiplier


def transform(counts: Mapping[float, int], hist: Histogram) -> tuple[list[tuple[str, int]], int, float]:
    """(cumulative buckets as (le text, count) with ``+Inf`` last, _count, _sum) of one series
    whose bucket keys hold ``counts``."""
    buckets: list[tuple[str, int]] = []
    total = 0
    seen: set[str] = set()
    for key in bucket_keys(hist):
        total += counts.get(key, 0)
        le = go_float(upper_bound(hist, key))
        if le in seen:  # exp2zero's key 0 and linear's key 0 can meet another bound only with multiplier 0
            buckets[-1] = (le, total)
            continue
        seen.add(le)
        buckets.append((le, total))
    buckets.append(("+Inf", total))
    return buckets, total, counts.get(sum_key(hist), 0) * hist.bucket_multiplier
