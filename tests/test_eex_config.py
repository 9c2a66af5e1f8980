# SPDX-License-Identifier: Apache-2.0
"""ebpf_exporter's config format (bpfkit.metrics.ebpf_exporter.config): every construct read as its
config.go reads it, and every mistake a UsageError naming the file, line and key. Kernel-free."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

pytest.importorskip("yaml")

from bpfkit.errors import UsageError
from bpfkit.metrics.config import MetricsConfig
from bpfkit.metrics.ebpf_exporter.config import (
    ExporterConfig,
    load_config_dir,
    load_metrics_config,
    parse_exporter_config,
)

FULL = """\
metrics:
  counters:
    - name: syscalls_total
      help: Syscalls by number
      labels:
        - name: comm
          size: 16
          decoders:
            - name: string
            - name: regexp
              regexps:
                - ^(sshd|bash)$
        - name: syscall
          size: 8
          padding: 4
          decoders:
            - name: uint
            - name: syscall
        - name: kind
          size: 4
          decoders:
            - name: uint
            - name: static_map
              allow_unknown: true
              static_map:
                1: read
                2: write
                yes: on
    - name: events_total
      help: Events from a perf event array
      perf_event_array: true
      flush_interval: 1m30s
      labels:
        - name: cpu
          size: 2
          decoders:
            - name: uint
  histograms:
    - name: latency_seconds
      help: Latency
      bucket_type: exp2
      bucket_min: 0
      bucket_max: 26
      bucket_multiplier: 0.000001
      labels:
        - name: bucket
          size: 8
          decoders:
            - name: uint
    - name: sizes_bytes
      help: Sizes
      bucket_type: fixed
      bucket_keys: [1, 10, 100]
      labels:
        - name: bucket
          size: 8
          decoders:
            - name: uint
tracing:
  spans:
    - name: exec
      ringbuf: exec_spans
      labels:
        - name: cpu.orig
          size: 4
          decoders:
            - name: uint
kaddrs:
  - bpf_jit_current
cgroup_id_map:
  name: cgroup_ids
  type: hash
  regexps:
    - ^.*(system.slice/.*)$
"""


def test_every_construct() -> None:
    cfg = parse_exporter_config(FULL, "/etc/x/full.yaml")
    assert cfg.name == "full" and cfg.object_path == "/etc/x/full.bpf.o"
    syscalls, events = cfg.counters
    comm, syscall, kind = syscalls.labels
    assert (comm.size, syscall.size, syscall.padding) == (16, 8, 4)
    assert comm.decoders[1].regexps == ("^(sshd|bash)$",)
    assert kind.decoders[1].allow_unknown
    assert kind.decoders[1].static_map == {"1": "read", "2": "write", "yes": "on"}  # text as written, as Go keeps it
    assert events.perf_event_array and events.flush_interval == 90.0
    lat, sizes = cfg.histograms
    assert (lat.bucket_type, lat.bucket_min, lat.bucket_max, lat.bucket_multiplier) == ("exp2", 0, 26, 1e-6)
    assert sizes.bucket_keys == (1.0, 10.0, 100.0) and sizes.bucket_multiplier == 1.0
    (span,) = cfg.spans
    assert span.service == "" and span.labels[0].name == "cpu.orig"  # attribute names may hold dots
    assert cfg.kaddrs == ("bpf_jit_current",)
    assert cfg.cgroup_id_map is not None and cfg.cgroup_id_map.type == "hash"
    assert cfg.map_names == ("syscalls_total", "events_total", "latency_seconds", "sizes_bytes")


@pytest.mark.parametrize("text, message", [
    ("maps: {}\n", r"c.yaml:1: unknown key 'maps' \(known: metrics, tracing, kaddrs, cgroup_id_map\)"),
    ("metrics: {}\n", r"c.yaml:1: neither metrics nor tracing are defined"),
    ("metrics:\n  counters:\n    - help: x\n", r"c.yaml:3: metrics.counters\[0\]: needs name:"),
    ("metrics:\n  counters:\n    - name: a\n", r"c.yaml:3: metrics.counters\[0\]: needs help:"),
    ("metrics:\n  counters:\n    - name: a-b\n      help: x\n", r"c.yaml:3: metrics.counters\[0\]: 'a-b' is not a metric name"),
    ("metrics:\n  counters:\n    - name: a\n      help: x\n      labels:\n        - name: l\n          decoders: [{name: uint}]\n",
     r"c.yaml:6: metrics.counters\[0\].labels\[0\]: label 'l' needs size:"),
    ("metrics:\n  counters:\n    - name: a\n      help: x\n      labels:\n        - name: l\n          size: 4\n",
     r"c.yaml:6: metrics.counters\[0\].labels\[0\]: label 'l' needs decoders:"),
    ("metrics:\n  counters:\n    - name: a\n      help: x\n      labels:\n        - name: l\n          size: 4\n"
     "          decoders:\n            - name: ksyms\n",
     r"c.yaml:9: metrics.counters\[0\].labels\[0\].decoders\[0\]: unknown decoder 'ksyms' \(known: cgroup, dname,"),
    ("metrics:\n  counters:\n    - name: a\n      help: x\n      labels:\n        - name: l\n          size: 4\n"
     "          decoders:\n            - name: regexp\n",
     r"c.yaml:9: .*the regexp decoder needs regexps:"),
    ("metrics:\n  counters:\n    - name: a\n      help: x\n      labels:\n        - name: l\n          size: 4\n"
     "          decoders:\n            - name: regexp\n              regexps: ['(']\n",
     r"c.yaml:10: .*regexps\[0\]: '\(' is not a regular expression"),
    ("metrics:\n  counters:\n    - name: a\n      help: x\n      flush_interval: soon\n",
     r"c.yaml:5: metrics.counters\[0\].flush_interval: 'soon' is not a duration"),
    ("metrics:\n  histograms:\n    - name: h\n      help: x\n      labels: [{name: b, size: 8, decoders: [{name: uint}]}]\n",
     r"c.yaml:3: metrics.histograms\[0\]: needs bucket_type: \(exp2, exp2zero, linear, fixed\)"),
    ("metrics:\n  histograms:\n    - name: h\n      help: x\n      bucket_type: fixed\n"
     "      labels: [{name: b, size: 8, decoders: [{name: uint}]}]\n",
     r"c.yaml:3: metrics.histograms\[0\]: bucket_type fixed needs bucket_keys:"),
    ("metrics:\n  histograms:\n    - name: h\n      help: x\n      bucket_type: fixed\n      bucket_keys: [5, 1]\n"
     "      labels: [{name: b, size: 8, decoders: [{name: uint}]}]\n",
     r"c.yaml:6: metrics.histograms\[0\].bucket_keys\[1\]: 1 is not above the key before it"),
    ("metrics:\n  histograms:\n    - name: h\n      help: x\n      bucket_type: exp2\n      bucket_max: 4\n",
     r"c.yaml:3: metrics.histograms\[0\]: a histogram needs labels:"),
    ("metrics:\n  counters:\n    - {name: a, help: x}\n    - {name: a, help: y}\n",
     r"c.yaml:4: metrics: 'a' is named twice \(first on line 3\)"),
    ("tracing:\n  spans:\n    - name: s\n", r"c.yaml:3: tracing.spans\[0\]: needs ringbuf:"),
    ("metrics:\n  counters:\n    - {name: a, help: x}\ncgroup_id_map:\n  name: m\n  type: array\n",
     r"c.yaml:6: cgroup_id_map.type: 'array' is not one of hash, cgrp_storage"),
])
def test_mistakes_name_the_line(text: str, message: str) -> None:
    with pytest.raises(UsageError, match=message):
        parse_exporter_config(text, "c.yaml")


def test_metrics_config_option_takes_either_format(tmp_path: Path) -> None:
    theirs = tmp_path / "timers.yaml"
    theirs.write_text("metrics:\n  counters:\n    - {name: timer_starts_total, help: Timers fired}\n")
    ours = tmp_path / "mine.yaml"
    ours.write_text("prefix: mine\nmaps:\n  calls: {type: counter}\n")
    assert isinstance(load_metrics_config(str(theirs)), ExporterConfig)
    assert isinstance(load_metrics_config(str(ours)), MetricsConfig)


def test_config_dir(tmp_path: Path) -> None:
    for name in ("a", "b"):
        (tmp_path / f"{name}.yaml").write_text(f"metrics:\n  counters:\n    - {{name: {name}_total, help: x}}\n")
    got = load_config_dir(str(tmp_path), ["b", "a"])
    assert [c.name for c in got] == ["b", "a"]
    assert got[0].object_path == os.path.join(str(tmp_path), "b.bpf.o")
    with pytest.raises(UsageError, match=r"--config.names: 'a' is given twice"):
        load_config_dir(str(tmp_path), ["a", "a"])
    with pytest.raises(UsageError, match=r"--config.names: '../a' is not a config name"):
        load_config_dir(str(tmp_path), ["../a"])
    with pytest.raises(UsageError, match=r"--config.dir .*: not a directory"):
        load_config_dir(str(tmp_path / "nope"), ["a"])
    with pytest.raises(Exception, match=r"c.yaml"):
        load_config_dir(str(tmp_path), ["c"])  # a missing file names itself
