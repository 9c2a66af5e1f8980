# SPDX-License-Identifier: Apache-2.0
"""``bpfkit attach --stacks`` beside a process whose perf map is a FIFO (issue 35, item 4).

Anyone may create /tmp/perf-PID.map for their own process. Made a FIFO with no writer, the
profile was never written: opening it waited for a writer, and SIGINT is ignored while the
profile is written. Now the perf map is skipped with one warning and the profile is written,
the process's frames in its own binary still named."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from integration.stack_workload import CHAIN, Workload, build

SECONDS = 2


@pytest.fixture(scope="module")
def workload(tmp_path_factory: pytest.TempPathFactory) -> Workload:
    return build(tmp_path_factory.mktemp("stacks"))


def test_cli_stacks_output_beside_a_fifo_perf_map(bpf_obj: Any, workload: Workload, tmp_path: Path) -> None:
    out = tmp_path / "profile.folded"
    proc = subprocess.Popen([str(workload.workload), "spin", "30"])
    fifo = Path(f"/tmp/perf-{proc.pid}.map")
    os.mkfifo(fifo)
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parent.parent))
    cli = subprocess.Popen([sys.executable, "-m", "bpfkit.cli", "attach", str(bpf_obj("stacks")), "profile:hz:99",
                            "--stacks", "counts", "--stack-map", "stacks", "--output", str(out)],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    try:
        assert cli.stdout is not None
        for line in cli.stdout:
            if "attached; Ctrl-C" in line:
                break
        time.sleep(SECONDS)
        cli.send_signal(signal.SIGINT)
        try:
            rest = cli.communicate(timeout=60)[0]
        except subprocess.TimeoutExpired:
            pytest.fail(f"bpfkit attach did not finish within 60 s of SIGINT (waiting on the FIFO {fifo}?)")
    finally:
        proc.kill()
        proc.wait()
        if cli.poll() is None:
            cli.kill()
            cli.communicate()
        fifo.unlink()
    assert cli.returncode == 0, rest
    assert f"wrote {out} (folded):" in rest
    warned = [line for line in rest.splitlines() if "perf map" in line]
    assert warned == [f"bpfkit: warning: perf map {fifo}: perf map {fifo} is a FIFO, not a regular file; "
                      f"process {proc.pid}'s frames outside its files show as [unknown]"], rest
    mine = {line.rsplit(" ", 1)[0]: int(line.rsplit(" ", 1)[1]) for line in out.read_text().splitlines()
            if line.startswith("workload;")}
    total = sum(mine.values())
    user = {s: [f for f in s.split(";") if not f.endswith("_[k]")] for s in mine}
    good = sum(n for s, n in mine.items() if user[s][-5:] == CHAIN[::-1])
    assert total >= 20 and good >= 0.9 * total, mine
