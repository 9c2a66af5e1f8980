# SPDX-License-Identifier: Apache-2.0
"""Metrics configs (``bpfkit attach --metrics-config FILE``): what automatic naming cannot know,
in the spirit of ebpf_exporter's configs (docs/metrics.md):

.. code-block:: yaml

    prefix: myapp                 # families are PREFIX_<map>_<field> (default bpfkit_<object>)
    only_listed: true             # serve only the maps below (default: every map, these changed)
    maps:
      calls:                      # a map of the object
        name: myapp_syscalls      # the family (a value alone), or the prefix of its fields'
        help: Syscalls by process
        type: counter             # counter or gauge (default gauge)
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
from typing import Any

import yaml

from .._files import read_regular
from ..btf.spec import BTF
from ..btf.types import Enum
from ..errors import UsageError
from .decoders import DECODERS, make_decoder
from .plan import (
    _LABEL_NAME_OK,
    _METRIC_NAME_OK,
    HistPlan,
    Label,
    MapMetrics,
    _default_text,
    _Leaf,
    _leaves,
    label_problem,
    label_text,
    metric_name,
    name_clash,
    plan_map,
)

__all__ = ["MetricsConfig", "load_config", "parse_config", "apply_config"]


class _Lined(dict[str, Any]):
    """A YAML mapping that remembers the line of itself and of each key (1-based)."""

    line = 0
    key_lines: dict[str, int]


# Bounds on a config (docs/security.md). Real configs are a few KiB, nest under 10 levels and
# have hundreds of nodes (a syscall static_map: ~450 entries). Aliases are counted as expanded:
# a 702-byte file of nine anchors, each a list of nine aliases of the one before, is 9^9 nodes.
CONFIG_LIMIT = 256 << 10
NODE_LIMIT = 20_000  # PyYAML's pure-Python loader: ~0.1 ms a node
DEPTH_LIMIT = 64
INT_DIGITS_LIMIT = 100  # int() of a 1 MiB digit string is slow (base 60 "1:2:...": quadratic)
_MERGE_TAG = "tag:yaml.org,2002:merge"


class _Loader(yaml.SafeLoader):
    """PyYAML's safe loader, bounded: while composing, each node's size and depth with aliases
    expanded are added up from its children's (so a bomb is refused before anything expands),
    and a key must be a scalar. Merge keys (``<<: *base``) work as YAML 1.1 and PyYAML have them:
    the mapping's own keys win over merged ones, and earlier merged mappings over later ones."""

    def __init__(self, text: str, path: str) -> None:
        super().__init__(text)
        self.name = path  # marks and our own messages name the file
        self._depth = 0
        self._cost: dict[int, tuple[int, int]] = {}  # id(node) -> (nodes, depth), aliases expanded

    def _error(self, at: yaml.Node | yaml.Event, what: str) -> UsageError:
        mark = at.start_mark
        return UsageError(f"{self.name}:{mark.line + 1 if mark is not None else 0}: {what}")

    def compose_node(self, parent: yaml.Node | None, index: int) -> yaml.Node | None:
        event: yaml.Event = self.peek_event()  # type: ignore[no-untyped-call]
        if isinstance(event, yaml.AliasEvent):
            node = super().compose_node(parent, index)
            if node is not None and id(node) not in self._cost:
                raise self._error(event, f"alias *{event.anchor} is inside the node it names (a recursive "
                                  "structure, which a config cannot use)")
            return node
        self._depth += 1
        try:
            if self._depth > DEPTH_LIMIT:
                raise self._error(event, f"nested more than {DEPTH_LIMIT} levels deep (bpfkit's limit "
                                  "for a metrics config)")
            node = super().compose_node(parent, index)
        finally:
            self._depth -= 1
        if node is None:
            return None
        children: list[yaml.Node] = []
        if isinstance(node, yaml.SequenceNode):
            children = node.value
        elif isinstance(node, yaml.MappingNode):
            children = [n for pair in node.value for n in pair]
        nodes, depth = 1, 1
        for child in children:
            n, d = self._cost[id(child)]
            nodes += n
            depth = max(depth, d + 1)
        if nodes > NODE_LIMIT:
            raise self._error(node, f"more than {NODE_LIMIT} values once aliases are expanded (bpfkit's limit for a "
                              "metrics config)")
        if depth > DEPTH_LIMIT:
            raise self._error(node, f"nested more than {DEPTH_LIMIT} levels deep once aliases are expanded "
                              "(bpfkit's limit for a metrics config)")
        self._cost[id(node)] = (nodes, depth)
        return node

    def construct_object(self, node: yaml.Node, deep: bool = False) -> Any:
        try:
            return super().construct_object(node, deep)
        except (ValueError, OverflowError) as exc:  # a scalar its tag cannot take: !!float abc, !!timestamp 2001-13-45
            raise self._error(node, f"{_shown(node.value)} is not a valid {node.tag.rsplit(':', 1)[-1]} ({exc})") from None

    def construct_yaml_int(self, node: yaml.ScalarNode) -> int:
        if len(node.value) > INT_DIGITS_LIMIT:
            raise self._error(node, f"a number of {len(node.value)} characters (bpfkit takes up to {INT_DIGITS_LIMIT})")
        return int(super().construct_yaml_int(node))

    def _key(self, key_node: yaml.Node) -> str:
        if not isinstance(key_node, yaml.ScalarNode):
            raise self._error(key_node, f"a key must be text or a number, not {_node_kind(key_node)}")
        return str(self.construct_object(key_node))

    def _pairs(self, node: yaml.MappingNode) -> dict[str, tuple[yaml.Node, yaml.Node]]:
        """key -> (key node, value node) of a mapping with its merge keys applied: its own keys
        win, then merged mappings in the order given (YAML 1.1's merge key)."""
        own: dict[str, tuple[yaml.Node, yaml.Node]] = {}
        merged: list[yaml.Node] = []
        for key_node, value_node in node.value:
            if key_node.tag == _MERGE_TAG:
                merged.extend(value_node.value if isinstance(value_node, yaml.SequenceNode) else [value_node])
                continue
            key = self._key(key_node)
            if key in own:
                raise self._error(key_node, f"{_shown(key)} given twice (first on line {own[key][0].start_mark.line + 1})")
            own[key] = (key_node, value_node)
        out: dict[str, tuple[yaml.Node, yaml.Node]] = {}
        for m in merged:
            if not isinstance(m, yaml.MappingNode):
                raise self._error(m, f"<< (a merge key) takes a mapping or a list of mappings, not {_node_kind(m)}")
            for key, pair in self._pairs(m).items():
                out.setdefault(key, pair)
        out.update(own)
        return out

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        if not isinstance(node, yaml.MappingNode):
            raise self._error(node, f"expected a mapping, got {_node_kind(node)}")
        out = _Lined()
        out.line = node.start_mark.line + 1
        out.key_lines = {}
        for key, (key_node, value_node) in self._pairs(node).items():
            out[key] = self.construct_object(value_node, deep=True)
            out.key_lines[key] = key_node.start_mark.line + 1
        return out


def _node_kind(node: yaml.Node) -> str:
    return "a list" if isinstance(node, yaml.SequenceNode) else "a mapping" if isinstance(node, yaml.MappingNode) else "a scalar"


_Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _Loader.construct_mapping)
_Loader.add_constructor("tag:yaml.org,2002:int", _Loader.construct_yaml_int)


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


class _Checker:
    def __init__(self, path: str) -> None:
        self.path = path

    def error(self, line: int, where: str, what: str) -> UsageError:
        return UsageError(f"{self.path}:{line}: {where}: {what}" if where else f"{self.path}:{line}: {what}")

    def mapping(self, value: object, where: str, line: int, allowed: tuple[str, ...]) -> _Lined:
        if not isinstance(value, _Lined):
            raise self.error(line, where, f"expected a mapping (key: value lines), got {_kind(value)}")
        for key in value:
            if key not in allowed:
                raise self.error(value.key_lines.get(str(key), value.line), where,
                                 f"unknown key {_shown(key)} (known: {', '.join(allowed)})")
        return value

    def line_of(self, m: _Lined, key: str) -> int:
        return m.key_lines.get(key, m.line)

    def text(self, m: _Lined, key: str, where: str, *, check: Any = None, what: str = "") -> str | None:
        value = m.get(key)
        if value is None:
            return None
        if not isinstance(value, str) or not value:
            raise self.error(self.line_of(m, key), f"{where}.{key}", f"expected text, got {_kind(value)}")
        if check is not None and not check(value):
            raise self.error(self.line_of(m, key), f"{where}.{key}", f"{_shown(value)} is not {what}")
        return value

    def number(self, m: _Lined, key: str, where: str, default: float, kind: type) -> Any:
        value = m.get(key, default)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or (kind is int and not isinstance(value, int)):
            raise self.error(self.line_of(m, key), f"{where}.{key}", f"expected {'an integer' if kind is int else 'a number'}, "
                             f"got {_kind(value)}")
        return value

    def choice(self, m: _Lined, key: str, where: str, choices: tuple[str, ...]) -> str | None:
        value = m.get(key)
        if value is None:
            return None
        if value not in choices:
            raise self.error(self.line_of(m, key), f"{where}.{key}", f"{_shown(value)} is not one of {', '.join(choices)}")
        return str(value)

    def seq(self, m: _Lined, key: str, where: str) -> list[tuple[object, int]] | None:
        value = m.get(key)
        if value is None:
            return None
        if not isinstance(value, list):
            raise self.error(self.line_of(m, key), f"{where}.{key}", f"expected a list (- item lines), got {_kind(value)}")
        return [(v, v.line if isinstance(v, _Lined) else self.line_of(m, key)) for v in value]


    def fields(self, m: _Lined, key: str, where: str, allowed: tuple[str, ...], what: str) -> list[tuple[str, _Lined, str]] | None:
        """The list at ``key`` of mappings that each name a ``field``: (where, mapping, field)."""
        items = self.seq(m, key, where)
        if items is None:
            return None
        out = []
        for i, (item, line) in enumerate(items):
            iw = f"{where}.{key}[{i}]"
            im = self.mapping(item, iw, line, allowed)
            field = self.text(im, "field", iw)
            if field is None:
                raise self.error(im.line, iw, f"needs field: ({what})")
            out.append((iw, im, field))
        return out


def _kind(value: object) -> str:
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    return f"{type(value).__name__} {_shown(value)}"


def _shown(value: object) -> str:
    """repr() of a value from the file, cut short (a 256 KiB string is no help in a message)."""
    text = repr(value)
    return text if len(text) <= 80 else f"{text[:60]}... ({len(text)} characters)"


def _check_table(c: _Checker, table: _Lined, where: str) -> None:
    """A static_map's values are label texts: text or numbers, not lists, mappings or nothing."""
    for key, value in table.items():
        if isinstance(value, (dict, list, tuple, set)) or value is None:
            raise c.error(c.line_of(table, key), f"{where}[{key}]", f"expected the label's text, got {_kind(value)}")


def parse_config(text: str, path: str = "<config>") -> MetricsConfig:
    """A config from YAML text; UsageError naming ``path`` and the line on any mistake."""
    loader: _Loader | None = None
    try:
        loader = _Loader(text, path)
        doc = loader.get_single_data()
    except yaml.reader.ReaderError as exc:  # a character YAML does not allow (NUL, other controls)
        line = text.count("\n", 0, exc.position) + 1
        raise UsageError(f"{path}:{line}: not valid YAML: character U+{exc.character:04X} is not allowed (no control "
                         "characters but tab and line breaks)") from None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark is not None else 0
        raise UsageError(f"{path}:{line}: not valid YAML: {exc.problem or exc.context}") from None
    finally:
        if loader is not None:
            loader.dispose()
    if doc is None:
        doc = _Lined()
        doc.line, doc.key_lines = 1, {}
    c = _Checker(path)
    top = c.mapping(doc, "", 1, ("prefix", "only_listed", "maps"))
    prefix = c.text(top, "prefix", "prefix", check=_METRIC_NAME_OK, what="a metric name ([a-zA-Z_:][a-zA-Z0-9_:]*)")
    only = top.get("only_listed", False)
    if not isinstance(only, bool):
        raise c.error(c.line_of(top, "only_listed"), "only_listed", f"expected true or false, got {_kind(only)}")
    maps: dict[str, MapConfig] = {}
    raw_maps = top.get("maps")
    if raw_maps is not None:
        if not isinstance(raw_maps, _Lined):
            raise c.error(c.line_of(top, "maps"), "maps", f"expected a mapping of map names, got {_kind(raw_maps)}")
        for name, body in raw_maps.items():
            maps[str(name)] = _map_config(c, str(name), body, raw_maps.key_lines.get(str(name), raw_maps.line))
    return MetricsConfig(path, prefix, only, maps)


def _map_config(c: _Checker, name: str, body: object, line: int) -> MapConfig:
    where = f"maps.{name}"
    if body is None:
        body = _Lined()
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
                    raise c.error(c.line_of(dm, "name"), dw, f"unknown decoder {_shown(dname)} (known: {', '.join(DECODERS)})")
                table = dm.get("static_map")
                if dname == "static_map" and not isinstance(table, dict):
                    raise c.error(c.line_of(dm, "static_map") if table is not None else dm.line, dw,
                                  "static_map needs a table (static_map: {1: read, 2: write})")
                if isinstance(table, _Lined):
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
                       ("bucket_type", "bucket_min", "bucket_multiplier", "base", "step"))
        step = c.number(hm, "step", hw, 1, int)
        if step < 1:
            raise c.error(c.line_of(hm, "step"), f"{hw}.step", f"must be 1 or more, not {step}")
        multiplier = float(c.number(hm, "bucket_multiplier", hw, 1.0, float))
        if not math.isfinite(multiplier) or multiplier <= 0:  # bounds must be finite and increasing
            raise c.error(c.line_of(hm, "bucket_multiplier"), f"{hw}.bucket_multiplier",
                          f"must be a finite number above 0, not {multiplier}")
        hist = HistConfig(c.choice(hm, "bucket_type", hw, ("exp2", "linear")), c.number(hm, "bucket_min", hw, 0, int),
                          multiplier, c.number(hm, "base", hw, 0, int), step, hm.line)
    return MapConfig(name, c.text(m, "name", where, **metric_ok), c.text(m, "help", where),
                     c.choice(m, "type", where, ("counter", "gauge")), labels, values, hist, line)


def load_config(path: str) -> MetricsConfig:
    """Read and check the config at ``path``."""
    data = read_regular(path, "metrics config", limit=CONFIG_LIMIT)  # NotFoundError/KernelError name the file
    try:
        text = data.decode()
    except UnicodeDecodeError as exc:
        raise UsageError(f"{path}: not UTF-8 text (byte {exc.start})") from None
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
        f.kind = mc.type or f.kind  # type: ignore[assignment]
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
    if mc.values is not None:
        by_path = {f.path or "value": f for f in plan.fields}
        fields = []
        for vcfg in mc.values:
            found = by_path.get(vcfg.field)
            if found is None:
                raise UsageError(f"{path}:{vcfg.line}: {where}.values: field {vcfg.field!r}: not a numeric value field "
                                 f"(served: {', '.join(by_path) or 'none'})")
            fields.append(dataclasses.replace(found, name=vcfg.name or found.name, help=vcfg.help or found.help,
                                              kind=vcfg.type or found.kind))  # type: ignore[arg-type]
        plan.fields = fields
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
