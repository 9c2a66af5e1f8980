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

The ``le`` text is the float as Prometheus' Go client prints it, which ebpf_exporter serves:
``1e-06``, ``0.001024``, ``100``, ``1.048576e+06`` (:func:`go_float`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from decimal import Decimal

from .config import Histogram

__all__ = ["bucket_keys", "upper_bound", "sum_key", "transform", "go_float"]


def go_float(value: float) -> str:
    """``value`` as Prometheus' Go client writes a label's float (expfmt's writeFloat:
    ``strconv.FormatFloat(v, 'g', -1, 64)``): the shortest digits that read back the same, in
    exponent form when the exponent is below -4 or 6 and above (``1e-05``, ``1.048576e+06``), else
    plainly (``100``, ``0.001024``). prometheus_client's floatToGoString writes ``100.0``."""
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    if math.isnan(value):
        return "NaN"
    if value == 0:
        return "-0" if math.copysign(1.0, value) < 0 else "0"
    sign, digit_tuple, exp = Decimal(repr(value)).as_tuple()  # repr: Python's shortest round-trip digits
    digits = "".join(map(str, digit_tuple)).rstrip("0") or "0"
    assert isinstance(exp, int)
    point = len(digit_tuple) + exp  # where the decimal point goes, counted from the first digit
    minus = "-" if sign else ""
    x = point - 1
    if x < -4 or x >= 6:  # strconv: shortest 'g' uses precision 6 for this choice
        mantissa = digits[0] + ("." + digits[1:] if len(digits) > 1 else "")
        return f"{minus}{mantissa}e{'-' if x < 0 else '+'}{abs(x):02d}"
    if point <= 0:
        return f"{minus}0.{'0' * -point}{digits}"
    if point >= len(digits):
        return f"{minus}{digits}{'0' * (point - len(digits))}"
    return f"{minus}{digits[:point]}.{digits[point:]}"


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
