# SPDX-License-Identifier: Apache-2.0
"""bpfkit's profile against perf's on the same workload at the same time: ``perf record -F 99
-g`` of the C workload in "mix" mode (five functions w1..w5 spinning 16:8:4:2:1 of the time),
while examples/profile samples it too, for 3 s. The functions with the most samples (the leaf,
perf's "self") agree: the same first two (w1, w2), w1..w3 in both top fives, and each of
w1..w5 within 10 points of the same share of the samples, or within four standard deviations
of the difference where a loaded machine leaves few samples (the two tools' timers are
independent: at ~150-300 samples the smallest shares, ~6 and ~3%, may swap places). Needs
Debian's linux-perf.

(A syscall-heavy workload makes a poor referee on this host: other sessions' BPF programs on
the syscall tracepoints put their own frames into the kernel stacks, and aliases at one kernel
address are named by each tool's own rule.)"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from bpfkit.profile import KERNEL_SUFFIX, from_folded
from integration.stack_workload import Workload, build

REPO = Path(__file__).resolve().parent.parent
PROFILE = REPO / "examples" / "profile" / "profile.py"
# Under TCG emulation (integration/vm.py) starting perf or Python takes a minute or more.
TIMEOUT = 900 if os.environ.get("BPFKIT_VM_KERNEL") else 120


@pytest.fixture(scope="module")
def workload(tmp_path_factory: pytest.TempPathFactory) -> Workload:
    return build(tmp_path_factory.mktemp("perf"))


MIX_WEIGHTS = (16, 8, 4, 2, 1)  # the workload's "mix" mode: w1..w5's shares of its time


def share_tolerance(share: float, samples_a: int, samples_b: int) -> float:
    """How far two independent samplings' shares of one function may differ: 10 points, or
    four standard deviations of the difference of two binomial proportions where the sample
    counts are small (a loaded machine gives the workload less CPU, so fewer samples: at 60
    and 190 samples a 13% share's difference has a standard deviation of 5 points)."""
    sigma = (share * (1 - share) * (1 / samples_a + 1 / samples_b)) ** 0.5
    return max(0.10, 4 * sigma)


def perf_leaves(script: str) -> Counter[str]:
    """Leaf function of each sample of ``perf script`` output."""
    leaves: Counter[str] = Counter()
    lines = iter(script.splitlines())
    for line in lines:
        if line and not line[0].isspace():  # a sample's header; its first frame follows
            frame = next(lines, "").split()
            if len(frame) >= 2:
                leaves[frame[1].split("+0x")[0]] += 1
    return leaves


def test_same_top_functions_as_perf(bpf_obj: Any, workload: Workload, tmp_path: Path) -> None:
    perf = shutil.which("perf")
    if perf is None:
        pytest.skip("perf is not installed (Debian's linux-perf)")
    bpf_obj("stacks")
    # The mix is stationary, so the two tools' 3 s need not coincide: the workload runs until
    # both are done (killed below), however long each takes to start (a minute or more under
    # emulation, where a fixed run of the workload ended before perf opened its events: ESRCH).
    proc = subprocess.Popen([str(workload.workload), "mix", str(2 * TIMEOUT)])
    data, out = tmp_path / "perf.data", tmp_path / "p.folded"
    try:
        # -B -N: no build-id pass over the samples and no copy into ~/.debug at the end (perf
        # script names the frames from the files themselves, which are still there).
        rec = subprocess.Popen([perf, "record", "-q", "-B", "-N", "-F", "99", "-g", "-p", str(proc.pid),
                                "-o", str(data), "--", "sleep", "3"],
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        try:
            ours = subprocess.run([sys.executable, str(PROFILE), "--pid", str(proc.pid), "--duration", "3",
                                   "--output", str(out)], capture_output=True, text=True, timeout=TIMEOUT,
                                  check=False, env=dict(os.environ, PYTHONPATH=str(REPO)))
            try:
                _, rec_err = rec.communicate(timeout=TIMEOUT)
            except subprocess.TimeoutExpired:
                pytest.skip(f"perf record -- sleep 3 did not finish in {TIMEOUT} s here: no reference to compare with")
        finally:
            if rec.poll() is None:
                rec.kill()
                rec.communicate()
    finally:
        proc.kill()
        proc.wait()
    assert ours.returncode == 0, ours.stderr
    if rec.returncode != 0:
        pytest.skip(f"perf record failed here: {rec_err.strip()[-300:]}")
    script = subprocess.run([perf, "script", "-i", str(data)], capture_output=True, text=True, check=True,
                            timeout=TIMEOUT).stdout
    theirs = perf_leaves(script)
    mine = Counter({name.removesuffix(KERNEL_SUFFIX): n for name, n in from_folded(out.read_text()).top(1000)})
    top_perf = [n for n, _ in theirs.most_common(5)]
    top_mine = [n for n, _ in mine.most_common(5)]
    print("perf:", theirs.most_common(5), "\nbpfkit:", mine.most_common(5))
    assert top_perf[:2] == top_mine[:2] == ["w1", "w2"], (top_perf, top_mine)
    assert {"w1", "w2", "w3"} <= set(top_perf) & set(top_mine), (top_perf, top_mine)
    total_perf, total_mine = sum(theirs.values()), sum(mine.values())
    for name, weight in zip(("w1", "w2", "w3", "w4", "w5"), MIX_WEIGHTS):
        share_perf, share_mine = theirs[name] / total_perf, mine[name] / total_mine
        limit = share_tolerance(weight / sum(MIX_WEIGHTS), total_perf, total_mine)
        assert abs(share_perf - share_mine) < limit, (name, share_perf, share_mine, limit)
