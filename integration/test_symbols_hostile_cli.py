# SPDX-License-Identifier: Apache-2.0
"""``bpfkit attach --stacks`` beside a process whose perf map is a FIFO (issue 35, item 4).

Anyone may create /tmp/perf-PID.map for their own process. Made a FIFO with no writer, the
profile was never written: opening it waited for a writer, and SIGINT is ignored while the
profile is written. Now the perf map is skipped with one warning and the profile is written,
the process's frames in its own binary still named."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from integration.stack_workload import Workload, attach_stacks, build, chain_samples, own_name

SECONDS = 2


@pytest.fixture(scope="module")
def workload(tmp_path_factory: pytest.TempPathFactory) -> Workload:
    return build(tmp_path_factory.mktemp("stacks"))


def test_cli_stacks_output_beside_a_fifo_perf_map(bpf_obj: Any, workload: Workload, tmp_path: Path) -> None:
    out = tmp_path / "profile.folded"
    exe = own_name(workload, tmp_path)
    proc = subprocess.Popen([str(exe), "spin", "30"])
    fifo = Path(f"/tmp/perf-{proc.pid}.map")
    try:
        os.mkfifo(fifo)
        status, rest = attach_stacks(bpf_obj("stacks"), out, SECONDS)
    finally:
        proc.kill()
        proc.wait()
        fifo.unlink(missing_ok=True)
    assert status == 0, rest
    assert f"wrote {out} (folded):" in rest
    # This run's FIFO only: a second copy of the suite plants one for its own workload.
    warned = [line for line in rest.splitlines() if "perf map" in line and str(fifo) in line]
    assert warned == [f"bpfkit: warning: perf map {fifo} is a FIFO, not a regular file; skipped: process "
                      f"{proc.pid}'s frames outside its files show as [unknown]"], rest
    total, good = chain_samples(out.read_text(), exe.name)
    assert total >= 20 and good >= 0.9 * total, out.read_text()
