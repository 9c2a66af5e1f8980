# SPDX-License-Identifier: Apache-2.0
"""bpfkit's ebpf_exporter-style test objects (bpf/eex_*.bpf.c) agree with their configs
(integration/ebpf_exporter/eex_*.yaml), read without a kernel: every config parses, every metric's
map is in the object with u64 values and a key exactly as long as its labels' size + padding (a
per-CPU map with a last label ``cpu``: 2 bytes less, the exporter appends the CPU), every kaddrs
symbol has its ``kaddr_<symbol>`` variable. A config that drifted from its object would fail in
integration/test_ebpf_exporter_prometheus.py with a less direct message, or on the VM kernels only."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import REPO, bpf_object

pytest.importorskip("yaml")

from bpfkit.metrics.ebpf_exporter.config import load_exporter_config
from bpfkit.spec.consts import MapType
from bpfkit.spec.load import load_spec

CONFIGS = sorted((REPO / "integration" / "ebpf_exporter").glob("eex_*.yaml"))
PER_CPU = (MapType.PERCPU_ARRAY, MapType.PERCPU_HASH, MapType.LRU_PERCPU_HASH)


def test_every_object_has_a_config() -> None:
    objects = {p.name.removesuffix(".bpf.c") for p in (REPO / "bpf").glob("eex_*.bpf.c")}
    configs = {p.stem for p in CONFIGS}
    # eex_* objects of other tests (sections, tracing) have no config here; these all do.
    assert {"eex_syscalls", "eex_exits", "eex_percpu", "eex_writes", "eex_uprobe", "eex_comm", "eex_udp",
            "eex_kprobe", "eex_fentry"} <= configs <= objects


@pytest.mark.parametrize("path", CONFIGS, ids=[p.stem for p in CONFIGS])
def test_config_matches_object(path: Path) -> None:
    cfg = load_exporter_config(str(path))
    spec = load_spec(bpf_object(cfg.name))
    for metric in (*cfg.counters, *cfg.histograms):
        m = spec.maps.get(metric.name)
        assert m is not None, f"{path.name}: {metric.name} is not a map of {cfg.name}.bpf.o"
        assert m.value_size == 8, f"{metric.name}: ebpf_exporter reads u64 values"
        size = sum(lb.size + lb.padding for lb in metric.labels)
        if m.type in PER_CPU and metric.labels and metric.labels[-1].name == "cpu":
            size -= metric.labels[-1].size + metric.labels[-1].padding
        assert m.key_size == size, f"{metric.name}: key of {m.key_size} bytes, labels slice {size}"
    for sym in cfg.kaddrs:
        assert f"kaddr_{sym}" in spec.variables, f"{path.name}: kaddrs {sym} has no kaddr_{sym} in the object"
