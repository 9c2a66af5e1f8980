# SPDX-License-Identifier: Apache-2.0
"""ebpf_exporter's post-attach hook (bpfkit.metrics.ebpf_exporter.post_attach) on the kernel: a
program on ``uprobe//proc/self/exe:post_attach_mark`` (bpf/eex_post_attach.bpf.c) runs exactly
once when everything is attached, and its counter, named without ``_total``, is served under
that very name and passes promtool."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

pytest.importorskip("prometheus_client")
pytest.importorskip("yaml")

from prometheus_client import CollectorRegistry, generate_latest

from bpfkit.errors import UsageError
from bpfkit.metrics.ebpf_exporter.config import load_exporter_config
from bpfkit.metrics.ebpf_exporter.post_attach import is_post_attach
from bpfkit.metrics.ebpf_exporter.run import Exporter
from conftest import bpf_object
from tests.metrics_exposition import check_exposition

pytestmark = pytest.mark.root

CONFIG = """\
metrics:
  counters:
    - name: eex_post_attach_runs
      help: Runs of the post-attach program
"""


def test_runs_once_after_attaching(tmp_path: Path) -> None:
    (tmp_path / "pa.yaml").write_text(CONFIG)
    shutil.copy(bpf_object("eex_post_attach"), tmp_path / "pa.bpf.o")
    with Exporter([load_exporter_config(str(tmp_path / "pa.yaml"))]) as exp:
        runs = exp.collections[0].maps["eex_post_attach_runs"].lookup(0)  # BTF-typed: a u64
        assert runs == 1
        registry = CollectorRegistry(auto_describe=False)
        registry.register(exp.collector)
        text = generate_latest(registry).decode()
        assert "# TYPE ebpf_exporter_eex_post_attach_runs untyped" in text
        assert "ebpf_exporter_eex_post_attach_runs 1.0" in text.splitlines()
        check_exposition(text)
        assert [p.attached for p in exp.collector.programs] == [True]


@pytest.mark.parametrize("section", ["uprobe//proc/self/exe:main", "uretprobe//proc/self/exe:post_attach_mark"])
def test_other_functions_of_the_exporter_are_refused(section: str) -> None:
    with pytest.raises(UsageError, match="/proc/self/exe is the Python interpreter under bpfkit"):
        is_post_attach(section)
