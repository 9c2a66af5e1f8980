# SPDX-License-Identifier: Apache-2.0
"""Metrics configs (``bpfkit attach --metrics-config FILE``): what automatic naming cannot know,
in the spirit of ebpf_exporter's configs (docs/metrics.md):

.. code-block:: yaml

    prefix: myapp                 # families are PREFIX_<map>_<field> (default bpfkit_<object>)
    only_listed: true             # serve only the maps below (default: these, and every other map
                                  # that is not internal: bpfkit.metrics.plan.internal)
    maps:
      calls:                      # a map of the object
        name: myapp_syscalls      # the family (a value alone), or the prefix of its fields'
        help: Syscalls by process
        type: counter             # counter or gauge (default: counter for names ending in _total,
                                  # _count, _sum, _bucket or in maps named *_total, else gauge)
        labels:                   # which key fields, in this order; the others are summed over
          - field: tgid           # the key field (dotted for nested: addr.port); "key" for a scalar key
            name: pid             # the label's name (default the field's, dots as _)
          - field: kind
            decoders:             # applied in order; the last one's answer is the label's text
              - name: static_map
                static_map: {1: getppid, 2: getpgid}
        values:                   # which value fields, each its own family (default: every number)
          - field: events
            name: myapp_events
            help: Events seen
            type: counter
        histogram:                # a histogram-shaped map: how its slots map to bounds
          bucket_type: exp2       # exp2 (log2 slots) or linear
          bucket_min: 0           # the first slot's index (bcc's bpf_log2l: 1)
          bucket_max: 26          # the last bucket's slot; slot bucket_max + 1 holds the exact sum
                                  # (ebpf_exporter's convention): _sum, not a bucket (default: no
                                  # sum slot, _sum approximate)
          bucket_multiplier: 1e-6 # scales every bound (usecs counted, seconds served)
          base: 0                 # linear: slot i holds [base + i*step, base + (i+1)*step - 1]
          step: 1

Decoders: ksym, syscall, cgroup, ipv4, ipv6, errno, static_map, string
(:mod:`bpfkit.metrics.decoders`). Every mistake is a :class:`bpfkit.errors.UsageError` naming
the file and line: ``metrics.yaml:7: maps.calls.labels[0].decoders[0]: unknown decoder
'ksyms' (known: ...)``.
"""

from __future__ import annotations

import dataclasses
import math
import operator
from collections.abc import Mapping
from typing import Any, Literal

from ..btf.spec import BTF
from ..btf.types import Enum
from ..errors import UsageError
from .decoders import DECODERS, make_decoder
from .plan import (
    _LABEL_NAME_OK,
    _METRIC_NAME_OK,
    CUMULATIVE,
    MAX_SLOT,
    HistPlan,
    Label,
    MapMetrics,
    _default_text,
    _Leaf,
    _leaves,
    auto_kind,
    internal,
    label_problem,
    label_text,
    metric_name,
    name_clash,
    plan_map,
)
from .yamlconf import Checker, Lined, kind, load_yaml, read_yaml, shown

__all__ = ["MetricsConfig", "load_config", "parse_config", "apply_config"]


@dataclasses.dataclass
class LabelConfig:
    field: str
    name: str | None
    decoders: list[tuple[str, dict[object, object] | None]]
    line: int


@dataclasses.dataclass
class ValueConfig:
    field: str
    name: str | None
    help: str | None
    type: str | None
    line: int


@dataclasses.dataclass
class HistConfig:
    bucket_type: str | None
    bucket_min: int
    bucket_multiplier: float
    base: int
    step: int
    line: int
    bucket_max: int | None = None  # the last bucket's slot: slot bucket_max + 1 holds the sum
    bucket_max_line: int = 0


@dataclasses.dataclass
class MapConfig:
    map: str
    name: str | None
    help: str | None
    type: str | None
    labels: list[LabelConfig] | None
    values: list[ValueConfig] | None
    histogram: HistConfig | None
    line: int


@dataclasses.dataclass
class MetricsConfig:
    path: str
    prefix: str | None
    only_listed: bool
    maps: dict[str, MapConfig]


def _check_table(c: Checker, table: Lined, where: str) -> None:
    """A static_map's values are label texts: text or numbers, not lists, mappings or nothing."""
    for key, value in table.items():
        if isinstance(value, (dict, list, tuple, set)) or value is None:
            raise c.error(c.line_of(table, key), f"{where}[{key}]", f"expected the label's text, got {kind(value)}")


def parse_config(text: str, path: str = "<config>") -> MetricsConfig:
    """A config from YAML text; UsageError naming ``path`` and the line on any mistake."""
    doc = load_yaml(text, path)
    c = Checker(path)
    top = c.mapping(doc, "", 1, ("prefix", "only_listed", "maps"))
    prefix = c.text(top, "prefix", "prefix", check=_METRIC_NAME_OK, what="a metric name ([a-zA-Z_:][a-zA-Z0-9_:]*)")
    only = top.get("only_listed", False)
    if not isinstance(only, bool):
        raise c.error(c.line_of(top, "only_listed"), "only_listed", f"expected true or false, got {kind(only)}")
    maps: dict[str, MapConfig] = {}
    raw_maps = top.get("maps")
    if raw_maps is not None:
        if not isinstance(raw_maps, Lined):
            raise c.error(c.line_of(top, "maps"), "maps", f"expected a mapping of map names, got {kind(raw_maps)}")
        for name, body in raw_maps.items():
            maps[str(name)] = _map_config(c, str(name), body, raw_maps.key_lines.get(str(name), raw_maps.line))
    return MetricsConfig(path, prefix, only, maps)


def _map_config(c: Checker, name: str, body: object, line: int) -> MapConfig:
    where = f"maps.{name}"
    if body is None:
        body = Lined()
        body.line, body.key_lines = line, {}
    m = c.mapping(body, where, line, ("name", "help", "type", "labels", "values", "histogram"))
    metric_ok: dict[str, Any] = {"check": _METRIC_NAME_OK, "what": "a metric name ([a-zA-Z_:][a-zA-Z0-9_:]*)"}
    labels = None
    items = c.fields(m, "labels", where, ("field", "name", "decoders"), "the key field the label comes from")
    if items is not None:
        labels = []
        for lw, lm, field in items:
            decoders: list[tuple[str, dict[object, object] | None]] = []
            for j, (dec, dline) in enumerate(c.seq(lm, "decoders", lw) or []):
                dw = f"{lw}.decoders[{j}]"
                dm = c.mapping(dec, dw, dline, ("name", "static_map"))
                dname = c.text(dm, "name", dw)
                if dname not in DECODERS:
                    raise c.error(c.line_of(dm, "name"), dw, f"unknown decoder {shown(dname)} (known: {', '.join(DECODERS)})")
                table = dm.get("static_map")
                if dname == "static_map" and not isinstance(table, dict):
                    raise c.error(c.line_of(dm, "static_map") if table is not None else dm.line, dw,
                                  "static_map needs a table (static_map: {1: read, 2: write})")
                if isinstance(table, Lined):
                    _check_table(c, table, f"{dw}.static_map")
                decoders.append((dname, dict(table) if isinstance(table, dict) else None))
            labels.append(LabelConfig(field, c.text(lm, "name", lw, check=_LABEL_NAME_OK,
                                                    what="a label name ([a-zA-Z_][a-zA-Z0-9_]*)"), decoders, lm.line))
    values = None
    vitems = c.fields(m, "values", where, ("field", "name", "help", "type"), "the value field the family comes from")
    if vitems is not None:
        values = []
        for vw, vm, field in vitems:
            values.append(ValueConfig(field, c.text(vm, "name", vw, **metric_ok), c.text(vm, "help", vw),
                                      c.choice(vm, "type", vw, ("counter", "gauge")), vm.line))
    hist = None
    if m.get("histogram") is not None:
        hw = f"{where}.histogram"
        hm = c.mapping(m["histogram"], hw, c.line_of(m, "histogram"),
                       ("bucket_type", "bucket_min", "bucket_max", "bucket_multiplier", "base", "step"))
        step = c.number(hm, "step", hw, 1, int)
        if step < 1:
            raise c.error(c.line_of(hm, "step"), f"{hw}.step", f"must be 1 or more, not {step}")
        multiplier = float(c.number(hm, "bucket_multiplier", hw, 1.0, float))
        if not math.isfinite(multiplier) or multiplier <= 0:  # bounds must be finite and increasing
            raise c.error(c.line_of(hm, "bucket_multiplier"), f"{hw}.bucket_multiplier",
                          f"must be a finite number above 0, not {multiplier}")
        bucket_min = c.number(hm, "bucket_min", hw, 0, int)
        bucket_max = None
        if hm.get("bucket_max") is not None:
            bucket_max = c.number(hm, "bucket_max", hw, 0, int)
            if not bucket_min <= bucket_max < MAX_SLOT:  # the sum's slot must be one the collector reads
                raise c.error(c.line_of(hm, "bucket_max"), f"{hw}.bucket_max",
                              f"must be in bucket_min ({bucket_min}) .. {MAX_SLOT - 1}, not {bucket_max}")
        hist = HistConfig(c.choice(hm, "bucket_type", hw, ("exp2", "linear")), bucket_min,
                          multiplier, c.number(hm, "base", hw, 0, int), step, hm.line, bucket_max,
                          c.line_of(hm, "bucket_max"))
    return MapConfig(name, c.text(m, "name", where, **metric_ok), c.text(m, "help", where),
                     c.choice(m, "type", where, ("counter", "gauge")), labels, values, hist, line)


def load_config(path: str) -> MetricsConfig:
    """Read and check the config at ``path``."""
    text = read_yaml(path, "metrics config")
    return parse_config(text, path)


# ------------------------------------------------------------------------------ applying
def apply_config(config: MetricsConfig, maps: Mapping[str, Any], obj: str) -> list[MapMetrics]:
    """The plans of ``maps`` with ``config`` applied (every map named must exist and be served)."""
    unknown = [name for name in config.maps if name not in maps]
    if unknown:
        mc = config.maps[unknown[0]]
        raise UsageError(f"{config.path}:{mc.line}: maps.{unknown[0]}: the object has no such map "
                         f"(it has: {', '.join(sorted(maps))})")
    prefix = config.prefix
    plans: list[MapMetrics] = []
    for name, m in sorted(maps.items()):
        listed = config.maps.get(name)
        if listed is None and config.only_listed:
            continue
        plan = plan_map(m, obj) if prefix is None else _plan_prefixed(m, prefix)
        if plan is None:
            if listed is not None:
                raise UsageError(f"{config.path}:{listed.line}: maps.{name}: cannot be served as metrics (metrics come from "
                                 "hash and array maps, per-CPU or not, with BTF-typed keys and numeric values)")
            continue
        if listed is not None:
            _apply_map(config.path, listed, plan)
        elif internal(plan) is not None:
            continue  # a program's working state: served only when the config names it
        plans.append(plan)
    clash = name_clash(plans)
    if clash is not None:
        listed = config.maps.get(clash[0].map.name)
        at = f"{config.path}:{listed.line}: maps.{listed.map}" if listed is not None else config.path
        raise UsageError(f"{at}: {clash[1]}: give one of them another name (name:)")
    return plans


def _plan_prefixed(m: Any, prefix: str) -> MapMetrics | None:
    """plan_map with families named PREFIX_<map>_<field> (no object name)."""
    return plan_map(m, "", prefix=prefix)


def _apply_map(path: str, mc: MapConfig, plan: MapMetrics) -> None:
    m = plan.map
    kc, vc = m.key_codec, m.value_codec
    assert kc is not None and vc is not None  # a plan exists only for typed maps
    where = f"maps.{mc.map}"
    old_base = plan.base
    if mc.name:
        plan.base = mc.name
        for f in plan.fields:
            f.name = mc.name + f.name[len(old_base):]
        if plan.hist is not None:
            plan.hist.name = mc.name + plan.hist.name[len(old_base):]
    for f in plan.fields:
        f.help = mc.help or f.help
        f.kind = _kind(mc.type, f.name, plan.base)
    if plan.hist is not None and mc.help:
        plan.hist.help = mc.help
    if mc.labels is not None:
        keys = {leaf.path or "key": leaf for leaf in _leaves(kc.btf, kc.type_id)}
        slot_field = _slot_path(plan)
        labels = []
        lines: dict[str, int] = {}
        for lc in mc.labels:
            leaf = keys.get(lc.field)
            if leaf is None or lc.field == slot_field:
                why = "is the histogram's slot" if leaf is not None else f"no such key field (the key's: {', '.join(keys)})"
                raise UsageError(f"{path}:{lc.line}: {where}.labels: field {lc.field!r}: {why}")
            label = _label(lc, leaf, kc.btf)
            problem = label_problem(label.name, plan.hist is not None)
            if problem is None and label.name in lines:
                problem = f"label {label.name!r} given twice (first on line {lines[label.name]}): give one another name (name:)"
            if problem is not None:
                raise UsageError(f"{path}:{lc.line}: {where}.labels: field {lc.field!r}: {problem}")
            lines[label.name] = lc.line
            labels.append(label)
        if len(labels) < len([k for k in keys if k != slot_field]) and plan.hist is None:
            plan.summed = True  # fewer labels than key fields: entries sharing them are added up
        plan.labels = labels
    said: dict[str, tuple[int, str]] = {}  # family -> where the config gives its type
    if mc.values is not None:
        by_path = {f.path or "value": f for f in plan.fields}
        fields = []
        for vcfg in mc.values:
            found = by_path.get(vcfg.field)
            if found is None:
                raise UsageError(f"{path}:{vcfg.line}: {where}.values: field {vcfg.field!r}: not a numeric value field "
                                 f"(served: {', '.join(by_path) or 'none'})")
            name = vcfg.name or found.name
            fields.append(dataclasses.replace(found, name=name, help=vcfg.help or found.help,
                                              kind=_kind(vcfg.type or mc.type, name, plan.base)))
            if vcfg.type is not None:
                said[name] = (vcfg.line, f"{where}.values: field {vcfg.field!r}")
        plan.fields = fields
    for f in plan.fields:  # only a config's type: gauge makes one (the automatic kind is a counter's)
        if f.kind == "gauge" and f.name.endswith(CUMULATIVE):
            line, at = said.get(f.name, (mc.line, where))
            raise UsageError(f"{path}:{line}: {at}: type: gauge, but {f.name} ends as a counter's samples do (_total, "
                             "_count, _sum, _bucket: promtool check metrics refuses such a gauge): serve it as a "
                             "counter (type: counter) or under another name (name:)")
    if mc.histogram is not None:
        h = plan.hist
        if h is None:
            raise UsageError(f"{path}:{mc.histogram.line}: {where}.histogram: map {m.name!r} is not histogram-shaped "
                             "(a value with a slots array, a key with a slot/bucket field, or an integer key and value "
                             "in a map named *hist/*dist/*slots)")
        hc = mc.histogram
        if hc.bucket_type:
            h.kind = "log2" if hc.bucket_type == "exp2" else "linear"
        h.first_slot, h.multiplier, h.base, h.step = hc.bucket_min, hc.bucket_multiplier, hc.base, hc.step
        if hc.bucket_max is not None:
            if h.slots and hc.bucket_max + 1 >= h.slots:
                raise UsageError(f"{path}:{hc.bucket_max_line}: {where}.histogram.bucket_max: {hc.bucket_max}: the sum's slot "
                                 f"({hc.bucket_max + 1}) is past the map's {h.slots} slots")
            h.sum_slot = hc.bucket_max + 1


def _kind(given: str | None, name: str, base: str) -> Literal["counter", "gauge"]:
    """The kind a config gives, else the automatic one (for the name the family is served as)."""
    if given == "counter":
        return "counter"
    return "gauge" if given == "gauge" else auto_kind(name, base)


def _slot_path(plan: MapMetrics) -> str | None:
    h: HistPlan | None = plan.hist
    return h.slot_path if h is not None and h.source == "key_slot" else None


def _label(lc: LabelConfig, leaf: _Leaf, btf: BTF) -> Label:
    t = btf.resolve(leaf.type_id)
    names = {v.value: v.name for v in t.values} if isinstance(t, Enum) else {}
    decoders = [make_decoder(name, table, names) for name, table in lc.decoders]
    name = lc.name or (metric_name(leaf.path.replace(".", "_")) if leaf.path else "key")
    get = operator.attrgetter(leaf.path) if leaf.path else _identity
    if not decoders:
        return Label(name, get, _default_text(btf, leaf), path=leaf.path, offset=leaf.offset, fmt=leaf.fmt)

    def text(value: object) -> str:
        for d in decoders:
            value = d(value)
        return label_text(value)

    return Label(name, get, text, path=leaf.path, offset=leaf.offset, fmt=leaf.fmt, raw=True)


def _identity(value: object) -> object:
    return value
