# SPDX-License-Identifier: Apache-2.0
"""Load, set up and attach ebpf_exporter configs, as its exporter.Attach does, and hold them.

    with Exporter(load_config_dir("examples", ["biolatency", "timers"])) as exp:
        MetricsServer(":9435", [exp.collector])

For each config, in order: its object ``NAME.bpf.o`` is read, each ``kaddrs`` symbol's address
written to ``const volatile u64 kaddr_<symbol>``, the object loaded, the maps the config names
checked (there; a u64 value; a perf event array for ``perf_event_array`` counters), then every
program attached by its section (``bpfkit.attach.attach_all``). A program whose section names
no target is skipped with a note, as ebpf_exporter logs and goes on; ``strict`` refuses it
(``--config.strict``). A failure closes everything made so far and names the config.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping, Sequence
from typing import TextIO

from ..._closing import ClosesOnExit
from ...errors import BPFKitError, UsageError
from ...link.attach import AttachedLinks
from ...maps import Map
from ...spec.consts import MapType
from . import post_attach
from .cgroup_id_map import CgroupIDMapFiller
from .collector import ExporterCollector, LoadedConfig, PerfEventArrayCounter, ProgramEntry, bpf_stats_enabled
from .config import Counter, ExporterConfig, Histogram, prepare_spec
from .decoders import DecoderSet

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ..._kernel.fd import FD
    from ...collection import Collection

__all__ = ["Exporter", "check_unique_names", "check_maps", "collector_for"]


def check_unique_names(configs: Sequence[ExporterConfig]) -> None:
    """Every family is ebpf_exporter_<name>: two configs naming one metric would serve it twice."""
    seen: dict[str, str] = {}
    for cfg in configs:
        for name in cfg.map_names:
            if name in seen:
                raise UsageError(f"{cfg.path}: metric {name!r} is also in config {seen[name]!r}: each "
                                 f"ebpf_exporter_<name> family must come from one config")
            seen[name] = cfg.name


def check_maps(cfg: ExporterConfig, maps: Mapping[str, Map]) -> None:
    """ebpf_exporter's validateMaps: each metric's map exists and holds u64 values."""
    metrics: list[Counter | Histogram] = [*cfg.counters, *cfg.histograms]
    for metric in metrics:
        m = maps.get(metric.name)
        if m is None:
            have = ", ".join(sorted(maps)) or "none"
            raise UsageError(f"{cfg.path}:{metric.line}: metric {metric.name!r} reads the map of that name, which "
                             f"{cfg.object_path} does not have (it has: {have})")
        if isinstance(metric, Counter) and metric.perf_event_array:
            if m.type != MapType.PERF_EVENT_ARRAY:
                raise UsageError(f"{cfg.path}:{metric.line}: counter {metric.name!r} has perf_event_array: true, "
                                 f"but its map is a {m.type.name.lower()}, not a perf_event_array")
        elif m.value_size != 8:
            raise UsageError(f"{cfg.path}:{metric.line}: map {metric.name!r}: its value is {m.value_size} bytes; "
                             "ebpf_exporter's metrics read a u64 (8 bytes)")


def collector_for(cfg: ExporterConfig, maps: Mapping[str, Map], programs: Sequence[ProgramEntry]) -> ExporterCollector:
    """The collector of one config whose object a caller loaded and attached (``bpfkit attach
    OBJ --metrics-config NAME.yaml``); its maps checked, its perf_event_array counters started.
    Close it to stop them."""
    check_maps(cfg, maps)
    decoders = DecoderSet()
    perf: list[PerfEventArrayCounter] = []
    collector = ExporterCollector([LoadedConfig(cfg, maps)], programs, decoders=decoders, perf_counters=perf)
    try:
        if cfg.cgroup_id_map is not None:
            collector.closers.append(CgroupIDMapFiller(cfg.cgroup_id_map, maps[cfg.cgroup_id_map.name], path=cfg.path).close)
        for counter in cfg.counters:
            if counter.perf_event_array:
                perf.append(PerfEventArrayCounter(cfg, counter, maps[counter.name], decoders))
    except BaseException:
        collector.close()
        raise
    return collector


class Exporter(ClosesOnExit):
    """``configs`` loaded, set up and attached; :attr:`collector` serves their metrics."""

    def __init__(self, configs: Sequence[ExporterConfig], *, strict: bool = False, enable_stats: bool = True,
                 say: Callable[[str], None] | None = None, errors: TextIO | None = None,
                 kernel_btf: str | None = None) -> None:
        check_unique_names(configs)
        self.configs = list(configs)
        self.collections: list[Collection] = []
        self.links: list[AttachedLinks] = []
        self.skipped: dict[tuple[str, str], str] = {}  # (config, program) -> why not attached
        self._stats: FD | None = None
        self._closed = False
        self._say = say or (lambda _msg: None)
        self._kernel_btf = kernel_btf
        self.decoders = DecoderSet()
        loaded: list[LoadedConfig] = []
        programs: list[ProgramEntry] = []
        self._perf: list[PerfEventArrayCounter] = []
        self._fillers: list[CgroupIDMapFiller] = []
        self._post_attach = False
        try:
            for cfg in self.configs:
                try:
                    coll, links = self._load(cfg, strict)
                except BPFKitError as exc:
                    raise exc.wrap(f"config {cfg.name} ({cfg.object_path})")
                loaded.append(LoadedConfig(cfg, coll.maps))
                for name, prog in coll.programs.items():
                    programs.append(ProgramEntry(cfg.name, name, prog, name in links.links))  # as attachedProgs
                for counter in cfg.counters:
                    if counter.perf_event_array:
                        self._perf.append(PerfEventArrayCounter(cfg, counter, coll.maps[counter.name], self.decoders))
            if enable_stats:
                self._enable_stats()
            if self._post_attach:
                post_attach.mark()  # every config attached: as ebpf_exporter's Attach() ends
        except BaseException:
            self.close()
            raise
        self.collector = ExporterCollector(loaded, programs, decoders=self.decoders, perf_counters=self._perf,
                                           errors=errors, stats_enabled=self._stats_on)

    def _load(self, cfg: ExporterConfig, strict: bool) -> tuple[Collection, AttachedLinks]:
        from ...collection import Collection
        from ...spec.load import load_spec

        spec = load_spec(cfg.object_path)
        prepare_spec(cfg, spec)  # kaddrs
        coll = Collection(spec, kernel_btf=self._kernel_btf)
        self.collections.append(coll)
        check_maps(cfg, coll.maps)
        if cfg.cgroup_id_map is not None:  # filled before the programs run
            self._fillers.append(CgroupIDMapFiller(cfg.cgroup_id_map, coll.maps[cfg.cgroup_id_map.name], path=cfg.path))
        links = AttachedLinks()
        self.links.append(links)
        for name, program in coll.programs.items():  # one at a time: a failure is noted, the rest go on
            try:
                if post_attach.is_post_attach(program.spec.section):
                    got = AttachedLinks()
                    got.links[name] = post_attach.attach(program)
                    self._post_attach = True
                else:
                    got = coll.attach_all(programs=[name])
            except BPFKitError as exc:
                if strict:
                    raise exc.wrap("attach with --config.strict (every program must attach)")
                got = AttachedLinks()
                got.skipped[name] = str(exc)
            links.links.update(got.links)
            for prog, why in got.skipped.items():
                self.skipped[(cfg.name, prog)] = why
                if strict:
                    raise UsageError(f"program {prog} was not attached ({why}), and --config.strict wants every "
                                     "program attached")
                print(f"bpfkit: note: {cfg.name}: program {prog} not attached: {why}", file=sys.stderr)
        for name, lk in links.links.items():
            self._say(f"{cfg.name}: attached {name}: {lk!r}")
        return coll, links

    def _enable_stats(self) -> None:
        """Programs' run time and count while the exporter runs (BPF_ENABLE_STATS, 5.8); a kernel
        or a process without it still serves everything else."""
        from ..._kernel.bpf import enable_stats

        try:
            self._stats = enable_stats()
        except BPFKitError as exc:
            print(f"bpfkit: note: programs' run time and count are not served: BPF_ENABLE_STATS failed: {exc}",
                  file=sys.stderr)

    def _stats_on(self) -> bool:
        return self._stats is not None or bpf_stats_enabled()

    @property
    def program_count(self) -> int:
        return sum(len(links.links) for links in self.links)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        errors: list[BaseException] = []
        for step in [*[pc.close for pc in self._perf], *[f.close for f in self._fillers], *[lk.close for lk in reversed(self.links)],
                     *[c.close for c in reversed(self.collections)]]:
            try:
                step()
            except Exception as exc:  # keep closing the others
                errors.append(exc)
        if self._stats is not None:
            self._stats.close()
        if errors:
            raise errors[0]
