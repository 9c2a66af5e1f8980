# SPDX-License-Identifier: Apache-2.0
"""The Prometheus families of loaded ebpf_exporter configs, read as its exporter/exporter.go reads
them when Prometheus scrapes:

* a counter map's raw key is cut into labels (:mod:`.decoders`); its value is a u64. Entries
  whose labels decode alike are summed (a recycled cgroup id), so no series repeats. A per-CPU
  map is summed over CPUs unless its last label is named ``cpu``: then each CPU is its own series
  (the CPU's number appended to the key as a u16, decoded like any label). A key of four zero
  bytes with no labels is the map's single value;
* a histogram map's last label is the bucket key; :mod:`.histogram` makes the series;
* a ``perf_event_array`` counter counts the records the program outputs, each record's bytes
  decoded as the key, reset every ``flush_interval`` (1 h when unset, as ebpf_exporter);
* the families are ``ebpf_exporter_<name>`` (dashboards keep working: a counter whose name does
  not end in ``_total`` is served untyped under that very name); bpfkit's own figures
  are ``bpfkit_*``: enabled configs, each program's id, tag and whether it attached, its run time
  and count while BPF stats are on (BPF_ENABLE_STATS, 5.8), decoder errors, lost perf records.

A map that cannot be read or decoded is left out of that scrape, counted in
``bpfkit_decoder_errors_total{config}`` and said on ``errors`` once per map and reason.
"""

from __future__ import annotations

import dataclasses
import struct
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import TextIO

from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
    UnknownMetricFamily,
)
from prometheus_client.registry import Collector

from ...errors import BPFKitError
from ...maps import PERCPU_TYPES, Map
from ...program import Program
from .config import PREFIX, Counter, ExporterConfig, Histogram, Label
from .decoders import DecoderSet, SkipLabelSet
from .histogram import transform

TYPE_CHECKING = False
if TYPE_CHECKING:
    from .tracing import Tracing

__all__ = ["LoadedConfig", "ProgramEntry", "ExporterCollector", "PerfEventArrayCounter", "bpf_stats_enabled"]

_U64 = struct.Struct("=Q")
_ZERO_KEY = b"\0\0\0\0"
_FLUSH_DEFAULT = 3600.0  # ebpf_exporter's perf_event_array flush interval when none is given


@dataclasses.dataclass
class ProgramEntry:
    """One program of a config, for the self-metrics."""

    config: str
    name: str
    program: Program
    attached: bool
    id: int = 0
    tag: str = ""

    def __post_init__(self) -> None:
        info = self.program.info()
        self.id, self.tag = info.id, info.tag.hex()


@dataclasses.dataclass
class LoadedConfig:
    """A config with its object's maps, loaded."""

    config: ExporterConfig
    maps: Mapping[str, Map]


def bpf_stats_enabled() -> bool:
    """Whether kernel.bpf_stats_enabled is on (BPF_ENABLE_STATS' fd turns the counting on
    without showing in the sysctl: its holder knows)."""
    try:
        with open("/proc/sys/kernel/bpf_stats_enabled") as f:
            return f.read().strip() not in ("", "0")
    except OSError:
        return False


def _metric(name: str) -> str:
    return f"{PREFIX}_{name}"


class PerfEventArrayCounter:
    """A ``perf_event_array: true`` counter: a thread reads the map's rings and counts each
    record's decoded labels. :meth:`close` stops it and closes the rings."""

    def __init__(self, config: ExporterConfig, counter: Counter, pmap: Map, decoders: DecoderSet) -> None:
        from ...events.perf import PerfBuffer  # here: only a perf_event_array counter opens rings

        self.config, self.counter, self.decoders = config, counter, decoders
        self.counts: dict[tuple[str, ...], int] = {}
        self.lost = 0
        self.errors = 0
        self._size = sum(label.size + label.padding for label in counter.labels)
        self._lock = threading.Lock()
        self._flush = counter.flush_interval or _FLUSH_DEFAULT
        self._flushed = time.monotonic()
        self._stop = threading.Event()
        self._buffer = PerfBuffer(pmap, self._record, self._lost, pages=64)
        self._thread = threading.Thread(target=self._run, name=f"bpfkit-perf-{counter.name}", daemon=True)
        self._thread.start()

    def _record(self, _cpu: int, view: memoryview) -> None:
        raw = bytes(view[: self._size])  # the kernel pads samples to 8 bytes: only the labels' bytes count
        try:
            labels = self.decoders.decode_labels_cached(raw, self.counter.name, self.counter.labels)
        except BPFKitError:  # counted in bpfkit_decoder_errors_total; the other records go on
            with self._lock:
                self.errors += 1
            return
        if labels is None:
            return
        key = tuple(labels)
        with self._lock:
            self.counts[key] = self.counts.get(key, 0) + 1

    def _lost(self, _cpu: int, count: int) -> None:
        with self._lock:
            self.lost += count

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self._buffer.poll(timeout=0.3)
            except BPFKitError:
                with self._lock:
                    self.errors += 1
                self._stop.wait(1.0)
            if time.monotonic() - self._flushed >= self._flush:
                with self._lock:
                    self.counts = {}
                    self._flushed = time.monotonic()

    def snapshot(self) -> dict[tuple[str, ...], int]:
        with self._lock:
            return dict(self.counts)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        self._buffer.close()


class ExporterCollector(Collector):
    """prometheus_client Collector of ``configs`` (each with its loaded maps) and their
    ``programs``; ``perf_counters`` are the running perf_event_array counters."""

    def __init__(self, configs: Sequence[LoadedConfig], programs: Sequence[ProgramEntry] = (), *,
                 decoders: DecoderSet | None = None, perf_counters: Sequence[PerfEventArrayCounter] = (),
                 errors: TextIO | None = None, stats_enabled: Callable[[], bool] = bpf_stats_enabled) -> None:
        self.configs = list(configs)
        self.programs = list(programs)
        self.decoders = decoders if decoders is not None else DecoderSet()
        self.perf_counters = list(perf_counters)
        self.closers: list[Callable[[], None]] = []  # what else close() stops (a cgroup_id_map filler)
        self.tracing: Tracing | None = None  # the spans' counters, when bpfkit exporter reads tracing: configs
        self.decoder_errors: dict[str, int] = {lc.config.name: 0 for lc in self.configs}
        self.stats_enabled = stats_enabled
        self._errors = errors if errors is not None else sys.stderr
        self._said: set[tuple[str, str]] = set()

    # ------------------------------------------------------------------------- reading
    def _failed(self, config: str, metric: str, why: str) -> None:
        self.decoder_errors[config] = self.decoder_errors.get(config, 0) + 1
        if (metric, why) not in self._said:
            self._said.add((metric, why))
            print(f"bpfkit: metrics: {config}: map {metric}: {why}", file=self._errors)

    def _entries(self, m: Map, labels: Sequence[Label]) -> Iterator[tuple[bytes, int]]:
        """(key bytes to decode, value) of every entry; per-CPU values split or summed as the
        labels ask (ebpf_exporter's readMapValues)."""
        percpu = m.type in PERCPU_TYPES
        split = percpu and bool(labels) and labels[-1].name == "cpu"
        ksize, stride = m.key_size, m.value_stride
        slot = (m.value_size + 7) & ~7
        for kraw, vraw, count in m.raw_batches(256):
            for i in range(count):
                key = kraw[i * ksize:(i + 1) * ksize]
                base = i * stride
                if not percpu:
                    yield key, _U64.unpack_from(vraw, base)[0]
                    continue
                values = [_U64.unpack_from(vraw, base + cpu * slot)[0] for cpu in range(stride // slot)]
                if not split:
                    yield key, sum(values)
                    continue
                if len(labels) == 1 and key[:4] == _ZERO_KEY:
                    key = key[4:]  # a per-CPU array of one u32 key with only the cpu label
                for cpu, value in enumerate(values):
                    yield key + struct.pack("=H", cpu), value

    def _series(self, lc: LoadedConfig, name: str, labels: Sequence[Label]) -> dict[tuple[str, ...], int] | None:
        """Decoded label values -> summed value, or None when the map could not be read."""
        m = lc.maps.get(name)
        if m is None:
            self._failed(lc.config.name, name, "the object has no such map")
            return None
        out: dict[tuple[str, ...], int] = {}
        try:
            for raw, value in self._entries(m, labels):
                if not labels and raw == _ZERO_KEY:
                    key: tuple[str, ...] = ()
                else:
                    decoded = self.decoders.decode_labels_cached(raw, name, labels)
                    if decoded is None:
                        continue  # a regexp decoder dropped it
                    key = tuple(decoded)
                out[key] = out.get(key, 0) + value
        except SkipLabelSet:  # pragma: no cover - decode_labels_cached turns it into None
            return None
        except BPFKitError as exc:
            self._failed(lc.config.name, name, str(exc))
            return None
        return out

    # ---------------------------------------------------------------------- families
    def _counter(self, lc: LoadedConfig, counter: Counter) -> Metric | None:
        names = [label.name for label in counter.labels]
        family: CounterMetricFamily | UnknownMetricFamily
        if counter.name.endswith("_total"):
            family = CounterMetricFamily(_metric(counter.name), counter.help, labels=names)
        else:
            # ebpf_exporter serves the counter under its name as given; a counter's samples end in
            # _total (OpenMetrics, promtool's lint), so one named otherwise keeps its name untyped.
            family = UnknownMetricFamily(_metric(counter.name), counter.help, labels=names)
        if counter.perf_event_array:
            found = next((p for p in self.perf_counters if p.config is lc.config and p.counter is counter), None)
            series = found.snapshot() if found is not None else {}
        else:
            got = self._series(lc, counter.name, counter.labels)
            if got is None:
                return None
            series = got
        for key, value in series.items():
            family.add_metric(list(key), float(value))
        return family

    def _histogram(self, lc: LoadedConfig, hist: Histogram) -> Metric | None:
        series = self._series(lc, hist.name, hist.labels)
        if series is None:
            return None
        grouped: dict[tuple[str, ...], dict[float, int]] = {}
        for key, value in series.items():
            try:
                bucket = float(int(key[-1], 0))  # strconv.ParseUint(s, 0, 64): 0x.. and 0o.. too
            except ValueError:
                self._failed(lc.config.name, hist.name, f"bucket label {hist.labels[-1].name!r} decoded to "
                             f"{key[-1]!r}, not a number (decode it with uint)")
                return None
            counts = grouped.setdefault(key[:-1], {})
            counts[bucket] = counts.get(bucket, 0) + value
        family = HistogramMetricFamily(_metric(hist.name), hist.help, labels=[label.name for label in hist.labels[:-1]])
        for labels, counts in grouped.items():
            buckets, _count, total = transform(counts, hist)
            family.add_metric(list(labels), buckets, total)
        return family

    def _self_metrics(self) -> Iterator[Metric]:
        enabled = GaugeMetricFamily("bpfkit_enabled_configs", "The set of enabled configs", labels=["name"])
        for lc in self.configs:
            enabled.add_metric([lc.config.name], 1)
        yield enabled
        info = GaugeMetricFamily("bpfkit_ebpf_program_info", "Info about eBPF programs",
                                 labels=["config", "program", "tag", "id"])
        attached = GaugeMetricFamily("bpfkit_ebpf_program_attached", "Whether a program is attached", labels=["id"])
        for p in self.programs:
            info.add_metric([p.config, p.name, p.tag, str(p.id)], 1)
            attached.add_metric([str(p.id)], 1 if p.attached else 0)
        yield info
        yield attached
        if self.programs and self.stats_enabled():
            run_time = CounterMetricFamily("bpfkit_ebpf_program_run_time_seconds",
                                           "How long a program has run (while BPF stats are enabled)", labels=["id"])
            run_count = CounterMetricFamily("bpfkit_ebpf_program_run_count",
                                            "How many times a program has run (while BPF stats are enabled)",
                                            labels=["id"])
            for p in self.programs:
                try:
                    pi = p.program.info()
                except BPFKitError:
                    continue
                run_time.add_metric([str(p.id)], pi.run_time_ns / 1e9)
                run_count.add_metric([str(p.id)], float(pi.run_cnt))
            yield run_time
            yield run_count
        errors = CounterMetricFamily("bpfkit_decoder_errors", "How many times decoders have met errors",
                                     labels=["config"])
        counts = dict(self.decoder_errors)
        for pc in self.perf_counters:
            counts[pc.config.name] = counts.get(pc.config.name, 0) + pc.errors
        sinks = self.tracing.sinks if self.tracing is not None else []
        for sink in sinks:
            counts[sink.config.name] = counts.get(sink.config.name, 0) + sink.decode_errors
        for name, count in counts.items():
            errors.add_metric([name], float(count))
        yield errors
        if sinks:
            exported = CounterMetricFamily("bpfkit_spans_exported", "Spans sent to the OTLP endpoint", labels=["config"])
            dropped = CounterMetricFamily("bpfkit_spans_dropped", "Spans that could not be sent (the endpoint "
                                          "refused or did not answer, or the queue was full)", labels=["config"])
            for sink in sinks:
                exported.add_metric([sink.config.name], float(sink.exported))
                dropped.add_metric([sink.config.name], float(sink.dropped))
            yield exported
            yield dropped
        if self.perf_counters:
            lost = CounterMetricFamily("bpfkit_perf_event_array_lost", "Records the kernel could not write to a "
                                       "perf_event_array counter's rings (the reader fell behind)",
                                       labels=["config", "map"])
            for pc in self.perf_counters:
                lost.add_metric([pc.config.name, pc.counter.name], float(pc.lost))
            yield lost

    def collect(self) -> Iterator[Metric]:
        families: list[Metric] = []
        for lc in self.configs:
            for counter in lc.config.counters:
                fam = self._counter(lc, counter)
                if fam is not None:
                    families.append(fam)
            for hist in lc.config.histograms:
                fam = self._histogram(lc, hist)
                if fam is not None:
                    families.append(fam)
        yield from families
        yield from self._self_metrics()  # after the maps: their decoder errors are counted

    def describe(self) -> Iterable[Metric]:
        return []  # families are known only once read (unchecked registration)

    def close(self) -> None:
        for pc in self.perf_counters:
            pc.close()
        for closer in self.closers:
            closer()
