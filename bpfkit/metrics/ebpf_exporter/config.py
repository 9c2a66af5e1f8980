# SPDX-License-Identifier: Apache-2.0
"""ebpf_exporter's config format, read as ebpf_exporter reads it (its config/config.go), with
bpfkit's file:line errors:

.. code-block:: yaml

    metrics:
      counters:                       # one map each, named as the metric (ebpf_exporter_<name>)
        - name: syscalls_total
          help: Syscalls by number
          perf_event_array: false     # true: the map is a perf event array of counter samples
          flush_interval: 0s          # with perf_event_array: how often the counts reset
          labels:                     # the key's bytes, sliced in order: size bytes, then padding
            - name: syscall
              size: 8
              padding: 0
              decoders:               # a chain: each decoder's text is the next one's input
                - name: uint
                - name: syscall
      histograms:                     # the last label is the bucket (decoded with uint)
        - name: latency_seconds
          help: ...
          bucket_type: exp2           # exp2, exp2zero, linear or fixed (with bucket_keys)
          bucket_min: 0
          bucket_max: 26              # the key bucket_max + 1 holds the sum of observations
          bucket_multiplier: 0.000001
          labels: [...]
    tracing:
      spans:                          # ring buffer records become OpenTelemetry spans
        - name: exec
          ringbuf: exec_spans
          service: exec-trace
          labels: [...]
    kaddrs: [symbol, ...]             # const volatile u64 kaddr_<symbol> set before loading
    cgroup_id_map:                    # a map kept filled with the ids of matching cgroups
      name: cgroup_ids
      type: hash                      # hash or cgrp_storage
      regexps: [...]

A config is found as ``DIR/NAME.yaml`` with its object beside it as ``DIR/NAME.bpf.o``.
"""

from __future__ import annotations

import dataclasses
import math
import os
import re
from typing import Literal

from ...errors import UsageError
from ..config import MetricsConfig
from ..yamlconf import Checker, Lined, kind, load_yaml, read_yaml, shown

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ...spec.collection import CollectionSpec

__all__ = ["ExporterConfig", "Counter", "Histogram", "Label", "DecoderConf", "Span", "CgroupIDMap",
           "BucketType", "BUCKET_TYPES", "DECODER_NAMES", "looks_like_exporter_config",
           "parse_exporter_config", "load_exporter_config", "load_config_dir", "load_metrics_config",
           "prepare_spec", "PREFIX"]

# ebpf_exporter's prometheusNamespace: every family it serves is ebpf_exporter_<name>.
PREFIX = "ebpf_exporter"
BucketType = Literal["exp2", "exp2zero", "linear", "fixed"]
BUCKET_TYPES: tuple[BucketType, ...] = ("exp2", "exp2zero", "linear", "fixed")
# ebpf_exporter's decoder.NewSet, every name it knows.
DECODER_NAMES = ("cgroup", "dname", "errno", "hex", "ifname", "inet_ip", "kstack", "ksym", "majorminor",
                 "pci_class", "pci_device", "pci_subclass", "pci_vendor", "regexp", "static_map", "string",
                 "syscall", "uint")
_NAME_OK = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*\Z").match  # becomes part of a metric or label name
_CONFIG_NAME_OK = re.compile(r"[^/\0]+\Z").match
_DURATION = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h)")
_DURATION_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}
_TOP_KEYS = ("metrics", "tracing", "kaddrs", "cgroup_id_map")


@dataclasses.dataclass(frozen=True)
class DecoderConf:
    """One step of a label's decoder chain."""

    name: str
    static_map: dict[str, str] | None = None  # static_map: input text -> label text
    regexps: tuple[str, ...] | None = None     # regexp: the first that matches wins; none: sample dropped
    allow_unknown: bool = False                # static_map: an unknown input passes through as it is
    line: int = 0


@dataclasses.dataclass(frozen=True)
class Label:
    """A slice of the key: ``size`` bytes decoded by ``decoders``, then ``padding`` bytes skipped."""

    name: str
    size: int
    padding: int
    decoders: tuple[DecoderConf, ...]
    line: int = 0


@dataclasses.dataclass(frozen=True)
class Counter:
    name: str
    help: str
    labels: tuple[Label, ...]
    perf_event_array: bool = False
    flush_interval: float = 0.0  # seconds; 0: unset (the counter starts over every hour)
    line: int = 0


@dataclasses.dataclass(frozen=True)
class Histogram:
    name: str
    help: str
    bucket_type: BucketType
    labels: tuple[Label, ...]  # the last one is the bucket
    bucket_multiplier: float = 1.0
    bucket_min: int = 0
    bucket_max: int = 0
    bucket_keys: tuple[float, ...] = ()
    line: int = 0


@dataclasses.dataclass(frozen=True)
class Span:
    name: str
    ringbuf: str
    service: str
    labels: tuple[Label, ...]
    line: int = 0


@dataclasses.dataclass(frozen=True)
class CgroupIDMap:
    name: str
    type: Literal["hash", "cgrp_storage"]
    regexps: tuple[str, ...]
    line: int = 0


@dataclasses.dataclass(frozen=True)
class ExporterConfig:
    """One ebpf_exporter config: ``name`` (the file's stem), its metrics, spans and set-up."""

    name: str
    path: str
    counters: tuple[Counter, ...] = ()
    histograms: tuple[Histogram, ...] = ()
    spans: tuple[Span, ...] = ()
    kaddrs: tuple[str, ...] = ()
    cgroup_id_map: CgroupIDMap | None = None

    @property
    def object_path(self) -> str:
        """Where ebpf_exporter finds the object: NAME.bpf.o beside NAME.yaml."""
        return os.path.join(os.path.dirname(self.path), f"{self.name}.bpf.o")

    @property
    def map_names(self) -> tuple[str, ...]:
        """The maps read for metrics (perf event arrays included)."""
        return tuple(c.name for c in self.counters) + tuple(h.name for h in self.histograms)


def looks_like_exporter_config(doc: Lined) -> bool:
    """Whether a parsed YAML document is in ebpf_exporter's format rather than bpfkit's own
    (its top level has ``metrics:`` or ``tracing:``, keys bpfkit's own format does not use)."""
    return "metrics" in doc or "tracing" in doc


def _duration(c: Checker, m: Lined, key: str, where: str) -> float:
    """A Go time.Duration as YAML gives it to ebpf_exporter (``5s``, ``1m30s``, ``250ms``) or
    a bare number of nanoseconds; seconds."""
    value = m.get(key)
    if value is None:
        return 0.0
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value * 1e-9
    text = str(value) if isinstance(value, str) else ""
    if text == "0":
        return 0.0
    pos, total = 0, 0.0
    while pos < len(text):
        found = _DURATION.match(text, pos)
        if found is None:
            break
        total += float(found.group(1)) * _DURATION_UNITS[found.group(2)]
        pos = found.end()
    if not text or pos != len(text):
        raise c.error(c.line_of(m, key), f"{where}.{key}", f"{shown(value)} is not a duration (like 10s, 1m30s, 500ms)")
    return total


def _uint(c: Checker, m: Lined, key: str, where: str, default: int = 0) -> int:
    value = c.number(m, key, where, default, int)
    if value < 0:
        raise c.error(c.line_of(m, key), f"{where}.{key}", f"must be 0 or more, not {value}")
    return int(value)


def _bool(c: Checker, m: Lined, key: str, where: str) -> bool:
    value = m.get(key, False)
    if not isinstance(value, bool):
        raise c.error(c.line_of(m, key), f"{where}.{key}", f"expected true or false, got {kind(value)}")
    return value


def _required_text(c: Checker, m: Lined, key: str, where: str, what: str) -> str:
    value = c.text(m, key, where)
    if value is None:
        raise c.error(m.line, where, f"needs {key}: ({what})")
    return value


def _decoder(c: Checker, item: object, where: str, line: int) -> DecoderConf:
    m = c.mapping(item, where, line, ("name", "static_map", "regexps", "allow_unknown"))
    name = _required_text(c, m, "name", where, "the decoder: " + ", ".join(DECODER_NAMES))
    if name not in DECODER_NAMES:
        raise c.error(c.line_of(m, "name"), where, f"unknown decoder {shown(name)} (known: {', '.join(DECODER_NAMES)})")
    table: dict[str, str] | None = None
    raw = m.get("static_map")
    if raw is not None:
        if not isinstance(raw, Lined):
            raise c.error(c.line_of(m, "static_map"), f"{where}.static_map", f"expected a mapping, got {kind(raw)}")
        table = {}
        for k, v in raw.items():
            if isinstance(v, (dict, list)) or v is None:
                raise c.error(c.line_of(raw, k), f"{where}.static_map[{k}]", f"expected the label's text, got {kind(v)}")
            key_text, value_text = raw.raw[k]  # as written: Go's map[string]string takes yes and 0x10 as text
            table[key_text] = value_text if value_text is not None else str(v)
    regexps: tuple[str, ...] | None = None
    rx = c.seq(m, "regexps", where)
    if rx is not None:
        out = []
        for i, (expr, eline) in enumerate(rx):
            if not isinstance(expr, str):
                raise c.error(eline, f"{where}.regexps[{i}]", f"expected a regular expression, got {kind(expr)}")
            try:
                re.compile(expr)
            except re.error as exc:
                raise c.error(eline, f"{where}.regexps[{i}]", f"{shown(expr)} is not a regular expression: {exc}") from None
            out.append(expr)
        regexps = tuple(out)
    if name == "regexp" and not regexps:
        raise c.error(m.line, where, "the regexp decoder needs regexps: (a list; the first that matches gives the label)")
    return DecoderConf(name, table, regexps, _bool(c, m, "allow_unknown", where), m.line)


def _labels(c: Checker, m: Lined, where: str, *, attributes: bool = False) -> tuple[Label, ...]:
    """The labels of a metric (Prometheus label names) or, with ``attributes``, of a span
    (OpenTelemetry attribute names: any text, ``cpu.orig``)."""
    out = []
    for i, (item, line) in enumerate(c.seq(m, "labels", where) or []):
        lw = f"{where}.labels[{i}]"
        lm = c.mapping(item, lw, line, ("name", "size", "padding", "decoders"))
        name = _required_text(c, lm, "name", lw, "the label's name")
        if not attributes and not _NAME_OK(name):
            raise c.error(c.line_of(lm, "name"), lw, f"{shown(name)} is not a label name ([a-zA-Z_][a-zA-Z0-9_]*)")
        size = _uint(c, lm, "size", lw)
        if size == 0:
            raise c.error(lm.line, lw, f"label {name!r} needs size: (how many bytes of the key it decodes)")
        decoders = tuple(_decoder(c, d, f"{lw}.decoders[{j}]", dline)
                         for j, (d, dline) in enumerate(c.seq(lm, "decoders", lw) or []))
        if not decoders:
            raise c.error(lm.line, lw, f"label {name!r} needs decoders: (at least one, such as - name: uint)")
        out.append(Label(name, size, _uint(c, lm, "padding", lw), decoders, lm.line))
    return tuple(out)


def _metric_head(c: Checker, m: Lined, where: str) -> tuple[str, str]:
    name = _required_text(c, m, "name", where, "the map, which is also the metric's name")
    if not _NAME_OK(name):
        raise c.error(c.line_of(m, "name"), where, f"{shown(name)} is not a metric name ([a-zA-Z_][a-zA-Z0-9_]*)")
    return name, _required_text(c, m, "help", where, "the metric's help text")


def _counter(c: Checker, item: object, where: str, line: int) -> Counter:
    m = c.mapping(item, where, line, ("name", "help", "perf_event_array", "flush_interval", "labels"))
    name, help_text = _metric_head(c, m, where)
    return Counter(name, help_text, _labels(c, m, where), _bool(c, m, "perf_event_array", where),
                   _duration(c, m, "flush_interval", where), m.line)


def _histogram(c: Checker, item: object, where: str, line: int) -> Histogram:
    m = c.mapping(item, where, line, ("name", "help", "bucket_type", "bucket_multiplier", "bucket_min", "bucket_max",
                                      "bucket_keys", "labels"))
    name, help_text = _metric_head(c, m, where)
    chosen = c.choice(m, "bucket_type", where, BUCKET_TYPES)
    btype = next((t for t in BUCKET_TYPES if t == chosen), None)
    if btype is None:
        raise c.error(m.line, where, f"needs bucket_type: ({', '.join(BUCKET_TYPES)})")
    multiplier = float(c.number(m, "bucket_multiplier", where, 1.0, float))
    if multiplier == 0:
        multiplier = 1.0  # ebpf_exporter: 0 (unset) means 1
    if not math.isfinite(multiplier) or multiplier < 0:
        raise c.error(c.line_of(m, "bucket_multiplier"), f"{where}.bucket_multiplier",
                      f"must be a finite number above 0, not {multiplier}")
    labels = _labels(c, m, where)
    if not labels:
        raise c.error(m.line, where, "a histogram needs labels: (the last one is the bucket, decoded with uint)")
    keys: list[float] = []
    for i, (k, kline) in enumerate(c.seq(m, "bucket_keys", where) or []):
        if isinstance(k, bool) or not isinstance(k, (int, float)) or not math.isfinite(k):
            raise c.error(kline, f"{where}.bucket_keys[{i}]", f"expected a number, got {kind(k)}")
        if keys and k <= keys[-1]:
            raise c.error(kline, f"{where}.bucket_keys[{i}]", f"{k} is not above the key before it ({keys[-1]}): "
                          "bucket keys go up")
        keys.append(float(k))
    bmin, bmax = _uint(c, m, "bucket_min", where), _uint(c, m, "bucket_max", where)
    if btype == "fixed":
        if not keys:
            raise c.error(m.line, where, "bucket_type fixed needs bucket_keys: (the bucket keys the program writes)")
    elif bmax <= bmin:
        raise c.error(c.line_of(m, "bucket_max"), where, f"bucket_max ({bmax}) must be above bucket_min ({bmin}): "
                      "ebpf_exporter refuses a histogram of zero size")
    return Histogram(name, help_text, btype, labels, multiplier, bmin, bmax, tuple(keys), m.line)


def _span(c: Checker, item: object, where: str, line: int) -> Span:
    m = c.mapping(item, where, line, ("name", "ringbuf", "service", "labels"))
    name = _required_text(c, m, "name", where, "the span's name")
    ringbuf = _required_text(c, m, "ringbuf", where, "the ring buffer map the program submits spans to")
    service = c.text(m, "service", where) or ""  # none: $OTEL_SERVICE_NAME, else ebpf_exporter (as its tracing does)
    return Span(name, ringbuf, service, _labels(c, m, where, attributes=True), m.line)


def _cgroup_id_map(c: Checker, item: object, where: str, line: int) -> CgroupIDMap:
    m = c.mapping(item, where, line, ("name", "type", "regexps"))
    name = _required_text(c, m, "name", where, "the map to fill with cgroup ids")
    ctype = c.choice(m, "type", where, ("hash", "cgrp_storage"))
    if ctype is None:
        raise c.error(m.line, where, "needs type: (hash or cgrp_storage)")
    regexps = []
    for i, (expr, eline) in enumerate(c.seq(m, "regexps", where) or []):
        if not isinstance(expr, str):
            raise c.error(eline, f"{where}.regexps[{i}]", f"expected a regular expression, got {kind(expr)}")
        try:
            re.compile(expr)
        except re.error as exc:
            raise c.error(eline, f"{where}.regexps[{i}]", f"{shown(expr)} is not a regular expression: {exc}") from None
        regexps.append(expr)
    return CgroupIDMap(name, "hash" if ctype == "hash" else "cgrp_storage", tuple(regexps), m.line)


def _items(c: Checker, m: Lined, key: str, where: str) -> list[tuple[str, object, int]]:
    return [(f"{where}.{key}[{i}]", item, line) for i, (item, line) in enumerate(c.seq(m, key, where) or [])]


def parse_exporter_config(text: str, path: str, name: str | None = None) -> ExporterConfig:
    """An ebpf_exporter config from YAML text; ``name`` defaults to the file's stem
    (``timers.yaml`` -> ``timers``). UsageError naming ``path`` and the line on any mistake."""
    doc = load_yaml(text, path)
    return _exporter_config(doc, path, name)


def _exporter_config(doc: Lined, path: str, name: str | None) -> ExporterConfig:
    c = Checker(path)
    top = c.mapping(doc, "", 1, _TOP_KEYS)
    if name is None:
        name = os.path.basename(path).removesuffix(".yaml").removesuffix(".yml")
    counters: list[Counter] = []
    histograms: list[Histogram] = []
    raw = top.get("metrics")
    if raw is not None:
        mm = c.mapping(raw, "metrics", c.line_of(top, "metrics"), ("counters", "histograms"))
        counters = [_counter(c, item, w, line) for w, item, line in _items(c, mm, "counters", "metrics")]
        histograms = [_histogram(c, item, w, line) for w, item, line in _items(c, mm, "histograms", "metrics")]
    spans: list[Span] = []
    raw = top.get("tracing")
    if raw is not None:
        tm = c.mapping(raw, "tracing", c.line_of(top, "tracing"), ("spans",))
        spans = [_span(c, item, w, line) for w, item, line in _items(c, tm, "spans", "tracing")]
    if not counters and not histograms and not spans:
        raise UsageError(f"{path}:1: neither metrics nor tracing are defined (ebpf_exporter needs "
                         "metrics: counters:/histograms: or tracing: spans:)")
    seen: dict[str, int] = {}
    metrics: list[Counter | Histogram] = [*counters, *histograms]
    for metric in metrics:
        if metric.name in seen:
            raise c.error(metric.line, "metrics", f"{metric.name!r} is named twice (first on line {seen[metric.name]}): "
                          "one map, one metric")
        seen[metric.name] = metric.line
    kaddrs: list[str] = []
    for i, (sym, line) in enumerate(c.seq(top, "kaddrs", "kaddrs") or []):
        if not isinstance(sym, str) or not sym:
            raise c.error(line, f"kaddrs[{i}]", f"expected a kernel symbol's name, got {kind(sym)}")
        kaddrs.append(sym)
    cgroup_map = None
    if top.get("cgroup_id_map") is not None:
        cgroup_map = _cgroup_id_map(c, top["cgroup_id_map"], "cgroup_id_map", c.line_of(top, "cgroup_id_map"))
    return ExporterConfig(name, path, tuple(counters), tuple(histograms), tuple(spans), tuple(kaddrs), cgroup_map)


def load_exporter_config(path: str, name: str | None = None) -> ExporterConfig:
    """Read and check the ebpf_exporter config at ``path``."""
    return parse_exporter_config(read_yaml(path, "ebpf_exporter config"), path, name)


def prepare_spec(cfg: ExporterConfig, spec: CollectionSpec) -> None:
    """What a config sets before its object is loaded: ``kaddrs: [sym]`` -> ``const volatile u64
    kaddr_sym = <its address>``."""
    if cfg.cgroup_id_map is not None and cfg.cgroup_id_map.name not in spec.maps:
        raise UsageError(f"{cfg.path}:{cfg.cgroup_id_map.line}: cgroup_id_map names map {cfg.cgroup_id_map.name!r}, "
                         f"which the object does not have (it has: {', '.join(sorted(spec.maps)) or 'none'})")
    if not cfg.kaddrs:
        return
    from ..._kernel.kallsyms import KernelSymbols

    table = KernelSymbols.load()
    for sym in cfg.kaddrs:
        var = spec.variables.get(f"kaddr_{sym}")
        if var is None:
            raise UsageError(f"{cfg.path}: kaddrs: {sym!r}: the object has no variable kaddr_{sym} (a const "
                             "volatile u64 the address is written to)")
        addr = table.address(sym)
        if addr is None:
            raise UsageError(f"{cfg.path}: kaddrs: {sym!r}: no such symbol in /proc/kallsyms")
        if addr == 0:
            raise UsageError(f"{cfg.path}: kaddrs: {sym!r}: /proc/kallsyms shows its address as 0 "
                             "(kernel.kptr_restrict hides addresses: run as root with CAP_SYSLOG)")
        var.value = addr


def load_metrics_config(path: str) -> ExporterConfig | MetricsConfig:
    """``--metrics-config FILE``: an ebpf_exporter config when its top level says so
    (:func:`looks_like_exporter_config`), else bpfkit's own format."""
    text = read_yaml(path, "metrics config")
    doc = load_yaml(text, path)
    if looks_like_exporter_config(doc):
        return _exporter_config(doc, path, None)
    from ..config import parse_config

    return parse_config(text, path)


def load_config_dir(directory: str, names: list[str]) -> list[ExporterConfig]:
    """``--config.dir DIR --config.names a,b``: DIR/a.yaml, DIR/b.yaml, in that order."""
    if not os.path.isdir(directory):
        raise UsageError(f"--config.dir {directory}: not a directory")
    if not names:
        raise UsageError("--config.names: name at least one config (a comma-separated list: biolatency,timers)")
    out: list[ExporterConfig] = []
    for name in names:
        if not _CONFIG_NAME_OK(name) or name in (".", ".."):
            raise UsageError(f"--config.names: {name!r} is not a config name (a file name without .yaml)")
        if name in (cfg.name for cfg in out):
            raise UsageError(f"--config.names: {name!r} is given twice")
        out.append(load_exporter_config(os.path.join(directory, f"{name}.yaml"), name))
    return out
