# SPDX-License-Identifier: Apache-2.0
"""A prometheus_client Collector that reads BPF maps when Prometheus scrapes.

Each scrape walks every planned map once with batch lookups (``Map.raw_batches()``:
BPF_MAP_LOOKUP_BATCH, 256 entries a syscall) and turns each entry into one sample per family
(docs/metrics.md). Per-CPU values are summed over the CPUs. Histograms are cumulative
``_bucket{le=...}`` samples (each ``le`` in its shortest exact form, none twice), ``_count``
and ``_sum``: exact from the sum's slot when a config gives ``bucket_max``, else approximate
(each slot's count times the middle of its bounds: a BPF histogram keeps counts per slot, not
the values).

Two ways out, the same samples: :meth:`MapCollector.collect` (prometheus_client's Collector
protocol: any registry, any exposition format it writes) and :meth:`MapCollector.render` (the
Prometheus text format written directly, which :class:`bpfkit.metrics.server.MetricsServer`
answers scrapes with). prometheus_client's ``generate_latest`` formats every sample through a
labels dict, sorting and escaping (measured: 2.0 s of CPU for 400,000 samples, ``render`` 0.19 s); ``render`` builds
each entry's label text once and unpacks raw batches with one ``struct`` per map, where every
label and field lies at a whole byte (benchmarks/bench_metrics.py).

A map that cannot be read or rendered is left out of that answer, the others served: said once
on ``errors``, counted in ``bpfkit_metrics_render_errors_total{map=...}`` (docs/metrics.md).
"""

from __future__ import annotations

import functools
import math
import struct
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Literal, TextIO, TypeVar

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector

from ..btf.records import char_value
from ..errors import BPFKitError
from .plan import MAX_SLOT, RENDER_ERRORS, Field, HistPlan, Label, MapMetrics, label_text, scaled

__all__ = ["MapCollector"]

T = TypeVar("T")
Row = tuple[tuple[str, ...], list[float]]
_RENDER_ERRORS_HELP = "Renders of the scrape answer that left this map out: it could not be read or rendered"
HistRow = tuple[tuple[str, ...], list[tuple[str, int]], float]  # labels, cumulative buckets (+Inf last), _sum


def _number(value: object) -> float:
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, (int, float)):
        return value  # IntEnum members are ints
    return float("nan")  # pragma: no cover - planned fields are numeric


def escape(text: str) -> str:
    """A label value for the text format (backslash, double quote and newline escaped)."""
    if "\\" in text or '"' in text or "\n" in text:
        return text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return text


class _Layout:
    """The raw-bytes path of one map: one struct for the key's labels and one for the value's
    fields (every CPU's copy for a per-CPU map), so an entry is two tuples."""

    def __init__(self, plan: MapMetrics, key: struct.Struct, value: struct.Struct, ncpus: int) -> None:
        self.plan = plan
        self.key = key
        self.value = value
        self.ncpus = ncpus

    @classmethod
    def make(cls, plan: MapMetrics) -> _Layout | None:
        m = plan.map
        parts: list[Label | Field] = [*plan.labels, *plan.fields]
        if plan.hist is not None or any(not p.fmt or p.offset < 0 for p in parts):
            return None
        key = _struct([(label.offset, label.fmt) for label in plan.labels], m.key_size)
        stride = m.value_stride
        slot = (m.value_size + 7) & ~7 if plan.percpu else m.value_size
        ncpus = stride // slot if plan.percpu and slot else 1
        one = [(f.offset, f.fmt) for f in plan.fields]
        value = _struct([(c * slot + off, fmt) for c in range(ncpus) for off, fmt in one], stride)
        if key is None or value is None:
            return None
        return cls(plan, key, value, ncpus)

    def rows(self, escaped: bool) -> Iterator[Row]:
        plan = self.plan
        convs = [_label_conv(label, escaped) for label in plan.labels]
        nf = len(plan.fields)
        ncpus = self.ncpus
        bools = [i for i, f in enumerate(plan.fields) if f.fmt == "?"]
        kit, vit = self.key.iter_unpack, self.value.iter_unpack
        single = convs[0] if len(convs) == 1 else None
        for kraw, vraw, _count in plan.map.raw_batches(256):
            for k, v in zip(kit(kraw), vit(vraw)):
                lv = (single(k[0]),) if single is not None else tuple(c(x) for c, x in zip(convs, k))
                if ncpus == 1:
                    vals: list[float] = list(v)
                else:
                    vals = [sum(v[j::nf]) for j in range(nf)]
                for j in bools:
                    vals[j] = int(vals[j])
                yield lv, vals


def _struct(parts: list[tuple[int, str]], size: int) -> struct.Struct | None:
    """A struct format with the given (offset, format) items in order, padded to ``size``;
    None if items overlap or run past the end."""
    fmt = ["="]
    pos = 0
    for off, f in parts:
        if off < pos:
            return None
        if off > pos:
            fmt.append(f"{off - pos}x")
        fmt.append(f)
        pos = off + struct.calcsize("=" + f)
    if pos > size:
        return None
    if size > pos:
        fmt.append(f"{size - pos}x")
    return struct.Struct("".join(fmt))


def _label_conv(label: Label, escaped: bool) -> Callable[[object], str]:
    """Raw struct item -> label text (cached per distinct raw value)."""
    if label.fmt not in ("?",) and not label.fmt.endswith("s") and label.text is label_text:
        return str  # an integer: its digits need no escaping
    text = label.text
    cache: dict[object, str] = {}
    keep_bytes = label.raw

    def conv(raw: object) -> str:
        out = cache.get(raw)
        if out is None:
            value = char_value(raw, "text") if isinstance(raw, bytes) and not keep_bytes else raw  # as btf.values decodes it
            out = text(value)
            if escaped:
                out = escape(out)
            cache[raw] = out
        return out

    return conv


class MapCollector(Collector):
    """Serves the maps of ``plans`` (see :func:`bpfkit.metrics.plan.plan_map`)."""

    def __init__(self, plans: Sequence[MapMetrics], *, errors: TextIO | None = None) -> None:
        self.plans = list(plans)
        self._slots_seen: dict[str, int] = {}  # histogram name -> buckets served so far (they never shrink)
        self._errors = errors if errors is not None else sys.stderr
        self._failed: set[str] = set()
        self._render_errors = {p.map.name: 0 for p in self.plans}  # map -> scrapes it was left out of
        self._layouts = {id(p): _Layout.make(p) for p in self.plans}

    def describe(self) -> Iterable[Metric]:
        return []  # families are known at scrape time (registering must not read maps)

    # ------------------------------------------------------------------ reading
    def _rows(self, plan: MapMetrics, escaped: bool) -> Iterator[Row]:
        if not plan.summed:
            return self._entry_rows(plan, escaped)
        # Labels from some of the key's fields: entries that share them are one series.
        totals: dict[tuple[str, ...], list[float]] = {}
        for lv, vals in self._entry_rows(plan, escaped):
            have = totals.get(lv)
            if have is None:
                totals[lv] = vals
            else:
                for i, v in enumerate(vals):
                    have[i] += v
        return iter(totals.items())

    def _entry_rows(self, plan: MapMetrics, escaped: bool) -> Iterator[Row]:
        layout = self._layouts.get(id(plan))
        if layout is not None:
            yield from layout.rows(escaped)
            return
        labels = [(label.get, label.text) for label in plan.labels]
        getters = [f.get for f in plan.fields]
        percpu = plan.percpu
        for key, value in plan.map.items():
            lv = tuple(text(get(key)) for get, text in labels)
            if escaped:
                lv = tuple(escape(t) for t in lv)
            if percpu:
                yield lv, [sum(_number(g(v)) for v in value) for g in getters]
            else:
                yield lv, [_number(g(value)) for g in getters]

    def _hist_rows(self, plan: MapMetrics, hist: HistPlan, escaped: bool) -> list[HistRow]:
        labels = [(label.get, label.text) for label in plan.labels]
        counts: dict[tuple[str, ...], list[int]] = {}
        for key, value in plan.map.items():
            lv = tuple(text(get(key)) for get, text in labels)
            if escaped:
                lv = tuple(escape(t) for t in lv)
            _count(hist, counts, lv, key, value, plan.percpu)
        sum_slot = hist.sum_slot
        if sum_slot >= 0:
            width = sum_slot  # the slots below the sum's (a config's bucket_max + 1)
        elif hist.slots:
            width = hist.slots  # from the type: a slots array's length, an array map's entries
        else:  # as seen: trailing empty slots dropped, never fewer buckets than served before
            width = max([self._slots_seen.get(hist.name, 0)] + [_last_nonzero(row) + 1 for row in counts.values()])
        self._slots_seen[hist.name] = width
        bounds, twice_mids = _bounds(hist.kind, hist.first_slot, hist.base, hist.step, hist.multiplier, width)
        multiplier = hist.multiplier
        out: list[HistRow] = []
        for lv, row in counts.items():
            buckets: list[tuple[str, int]] = []
            total = 0
            approx = 0  # twice the sum, each count at the middle of its slot, before the multiplier
            for i in range(min(width, len(row))):
                c = row[i]
                if c:
                    total += c
                    approx += c * twice_mids[i]
                if bounds[i]:
                    buckets.append((bounds[i], total))
            buckets.extend((le, total) for le in bounds[len(row):] if le)  # slots the row does not reach
            if sum_slot >= 0:
                exact = row[sum_slot] if sum_slot < len(row) else 0
                buckets.append(("+Inf", total + sum(row[width:]) - exact))
                out.append((lv, buckets, scaled(exact, multiplier)))
            else:
                buckets.append(("+Inf", total + sum(row[width:])))
                out.append((lv, buckets, scaled(approx, multiplier) / 2))
        return out

    def _guard(self, plan: MapMetrics, read: Callable[[MapMetrics], list[T]]) -> list[T]:
        """``read(plan)``, or nothing: a map that cannot be read or rendered is left out of this
        scrape (the others are served), said once, and counted in RENDER_ERRORS."""
        try:
            return read(plan)
        except Exception as exc:  # one map's failure, whatever it is, must not fail every scrape
            name = plan.map.name
            self._render_errors[name] = self._render_errors.get(name, 0) + 1
            if name not in self._failed:
                self._failed.add(name)
                why = str(exc) if isinstance(exc, BPFKitError) else f"{type(exc).__name__}: {exc}"
                print(f"bpfkit: metrics: map {name!r} left out: {why} (counted in {RENDER_ERRORS}_total)",
                      file=self._errors, flush=True)
            return []

    # ------------------------------------------------------- prometheus_client protocol
    def collect(self) -> Iterator[Metric]:
        for plan in self.plans:
            yield from self._guard(plan, self._families)
        errors = CounterMetricFamily(RENDER_ERRORS, _RENDER_ERRORS_HELP, labels=["map"])
        for name, n in self._render_errors.items():
            errors.add_metric([name], n)
        yield errors

    def _families(self, plan: MapMetrics) -> list[Metric]:
        names = [label.name for label in plan.labels]
        fams: list[GaugeMetricFamily | CounterMetricFamily] = [
            (CounterMetricFamily if f.kind == "counter" else GaugeMetricFamily)(f.name, f.help, labels=names)
            for f in plan.fields]
        out: list[Metric] = list(fams)
        if plan.fields:  # (a histogram's plan has fields only beside a slots array)
            adders = [fam.add_metric for fam in fams]
            for lv, vals in self._rows(plan, escaped=False):
                for add, v in zip(adders, vals):
                    add(list(lv), v)
        if plan.hist is not None:
            hfam = HistogramMetricFamily(plan.hist.name, plan.hist.help, labels=names)
            for lv, buckets, total_sum in self._hist_rows(plan, plan.hist, escaped=False):
                hfam.add_metric(list(lv), [(le, float(c)) for le, c in buckets], total_sum)
            out.append(hfam)
        return out

    # ------------------------------------------------------------- the text format
    def render(self) -> str:
        """Every map's samples in the Prometheus text format (version 0.0.4)."""
        parts: list[str] = []
        for plan in self.plans:
            parts.extend(self._guard(plan, self._text))
        head = RENDER_ERRORS + "_total"
        parts.append(f"# HELP {head} {_RENDER_ERRORS_HELP}\n# TYPE {head} counter\n")
        parts.extend(f'{head}{{map="{escape(name)}"}} {n}\n' for name, n in self._render_errors.items())
        return "".join(parts)

    def _text(self, plan: MapMetrics) -> list[str]:
        names = [label.name for label in plan.labels]
        template = ("{" + ",".join(f'{n}="%s"' for n in names) + "}") if names else ""
        out: list[str] = []
        if plan.fields:
            lines: list[list[str]] = [[] for _ in plan.fields]
            # A counter's samples end in _total, added unless the name has it (as prometheus_client does).
            heads = [f.name + ("_total" if f.kind == "counter" and not f.name.endswith("_total") else "") for f in plan.fields]
            pairs = list(zip(heads, lines))
            for lv, vals in self._rows(plan, escaped=True):
                lbl = template % lv if template else ""
                for (head, sink), v in zip(pairs, vals):
                    sink.append(f"{head}{lbl} {v}\n")
            for f, head, sink in zip(plan.fields, heads, lines):
                out.append(f"# HELP {head} {_help(f.help)}\n# TYPE {head} {f.kind}\n")
                out.append("".join(sink))
        if plan.hist is not None:
            h = plan.hist
            out.append(f"# HELP {h.name} {_help(h.help)}\n# TYPE {h.name} histogram\n")
            sep = "," if names else ""
            for lv, buckets, total_sum in self._hist_rows(plan, h, escaped=True):
                inner = template[1:-1] % lv if template else ""
                lbl = "{" + inner + "}" if inner else ""
                out.extend(f'{h.name}_bucket{{{inner}{sep}le="{le}"}} {c}\n' for le, c in buckets)
                out.append(f"{h.name}_sum{lbl} {total_sum}\n{h.name}_count{lbl} {buckets[-1][1]}\n")
        return out


def _help(text: str) -> str:
    return text.replace("\\", "\\\\").replace("\n", "\\n")


def _count(hist: HistPlan, counts: dict[tuple[str, ...], list[int]], lv: tuple[str, ...],
           key: object, value: object, percpu: bool) -> None:
    """Add one entry's counts to its histogram's slots."""
    values = value if percpu and isinstance(value, list) else [value]
    if hist.source == "value_slots":
        assert hist.get is not None
        row = counts.get(lv)
        for v in values:
            slots = hist.get(v)
            if not isinstance(slots, list):
                continue
            if row is None:
                row = counts[lv] = [0] * len(slots)
            for i, c in enumerate(slots):
                row[i] += int(c)
        return
    slot = hist.slot(key) if hist.slot is not None else key
    if not isinstance(slot, int) or not 0 <= slot <= MAX_SLOT:
        return  # not a slot index (a key the program never meant as one)
    row = counts.setdefault(lv, [])
    if len(row) <= slot:
        row.extend([0] * (slot + 1 - len(row)))
    row[slot] += sum(int(v) for v in values if isinstance(v, int))


def _le(bound: float) -> str:
    return str(int(bound)) if bound.is_integer() else repr(bound)


@functools.lru_cache(maxsize=256)
def _bounds(kind: Literal["log2", "linear"], first_slot: int, base: int, step: int, multiplier: float,
            width: int) -> tuple[tuple[str, ...], tuple[int, ...]]:
    """The ``le`` text of each of ``width`` slots ("": served in the next bucket) and twice the
    middle of each slot before the multiplier (the approximate ``_sum`` adds those up exactly)."""
    h = HistPlan("", "", "slot_key", kind=kind, first_slot=first_slot, base=base, step=step, multiplier=multiplier)
    ranges = [h.slot_range(i) for i in range(width)]
    return _bucket_bounds([scaled(hi, multiplier) for _, hi in ranges]), tuple(lo + hi for lo, hi in ranges)


def _bucket_bounds(uppers: list[float]) -> tuple[str, ...]:
    """Each slot's ``le`` text, or "" for a slot served in the next bucket: one whose bound is
    not finite (its counts are in ``+Inf``), or not below the next slot's (slots whose bounds
    are one float, as bcc's slot 0 and 1 with ``bucket_min: 1``, or that round to one: a bucket
    holds the highest of them, whose cumulative count covers the others). Distinct floats have
    distinct texts (the shortest that reads back as the float), so no ``le`` is served twice."""
    out = [""] * len(uppers)
    above = math.inf
    for i in range(len(uppers) - 1, -1, -1):
        if uppers[i] < above:  # False for inf and nan
            out[i] = _le(uppers[i])
            above = uppers[i]
    return tuple(out)


def _last_nonzero(row: list[int]) -> int:
    for i in range(len(row) - 1, -1, -1):
        if row[i]:
            return i
    return -1
