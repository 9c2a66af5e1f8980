# SPDX-License-Identifier: Apache-2.0
"""ebpf_exporter's ``perf_event_array: true`` counters (bpfkit.metrics.ebpf_exporter), on the
kernel: the program (bpf/eex_perf_counts.bpf.c) outputs each getppid()/gettid() syscall number
of this process to a perf event array; the exporter's reader counts the records by their decoded
labels, serves them as a counter, and starts over every ``flush_interval``. Through the library
(bpfkit.metrics.ebpf_exporter.run.Exporter), the way `bpfkit exporter` runs it."""

from __future__ import annotations

import os
import shutil
import struct
import threading
import time
from pathlib import Path

import pytest

pytest.importorskip("prometheus_client")
pytest.importorskip("yaml")

from bpfkit.metrics.ebpf_exporter.config import load_exporter_config
from bpfkit.metrics.ebpf_exporter.run import Exporter
from conftest import bpf_object

pytestmark = pytest.mark.root

CONFIG = """\
metrics:
  counters:
    - name: eex_perf_syscalls_total
      help: Syscalls seen as perf event records
      perf_event_array: true
      flush_interval: {flush}
      labels:
        - name: syscall
          size: 8
          decoders:
            - name: uint
            - name: syscall
"""


def _config(tmp_path: Path, flush: str) -> Path:
    (tmp_path / "perf.yaml").write_text(CONFIG.format(flush=flush))
    shutil.copy(bpf_object("eex_perf_counts"), tmp_path / "perf.bpf.o")
    return tmp_path / "perf.yaml"


def _samples(exp: Exporter) -> dict[str, float]:
    out = {}
    for family in exp.collector.collect():
        if family.name == "ebpf_exporter_eex_perf_syscalls":
            for sample in family.samples:
                if sample.name.endswith("_total"):
                    out[sample.labels["syscall"]] = sample.value
    return out


def _wait_for(exp: Exporter, want: dict[str, float], timeout: float = 10.0) -> dict[str, float]:
    deadline = time.monotonic() + timeout
    got = _samples(exp)
    while got != want and time.monotonic() < deadline:
        time.sleep(0.1)
        got = _samples(exp)
    return got


def _target(exp: Exporter) -> None:
    """Count this process only (eex_target: its tgid)."""
    exp.collections[0].maps["eex_target"].update(struct.pack("=I", 0), struct.pack("=I", os.getpid()))


def test_records_are_counted_by_their_labels(tmp_path: Path) -> None:
    threads = threading.active_count()
    with Exporter([load_exporter_config(str(_config(tmp_path, "1h")))]) as exp:
        _target(exp)
        for _ in range(13):
            os.getppid()
        got = _wait_for(exp, {"getppid": 13.0})
        assert got == {"getppid": 13.0}
        errors = {s.labels["config"]: s.value for f in exp.collector.collect() if f.name == "bpfkit_decoder_errors"
                  for s in f.samples}
        assert errors == {"perf": 0.0}
    assert threading.active_count() == threads  # the reader's thread is gone


def test_counts_start_over_every_flush_interval(tmp_path: Path) -> None:
    with Exporter([load_exporter_config(str(_config(tmp_path, "1s")))]) as exp:
        _target(exp)
        for _ in range(5):
            os.getppid()
        assert _wait_for(exp, {"getppid": 5.0}) == {"getppid": 5.0}
        assert _wait_for(exp, {}, timeout=5.0) == {}  # flushed within a second or so
        os.getppid()
        assert _wait_for(exp, {"getppid": 1.0}) == {"getppid": 1.0}
