# SPDX-License-Identifier: Apache-2.0
"""SIGINT and SIGTERM at random moments of ``bpfkit attach``, through the real console script
(the bpfkit console script beside the running interpreter): starting, loading, attaching, waiting, detaching. Nothing may stay attached
(no tracefs probe of the process, no link or program of it in ``bpftool link``/``prog``) and
nothing may print a traceback.

Where the moments start: SIGTERM from the exec (before bpfkit's code runs, its default action
ends the process silently); SIGINT from the moment bpfkit's first import installed its quiet
handler (seen as SIGTERM caught in /proc/PID/status SigCgt). Before that the interpreter is
still starting (site, .pth files: about 40 ms with an editable install) and Python's own
handler turns SIGINT into a KeyboardInterrupt traceback ("Fatal Python error:
init_import_site") that no code of a package can prevent; the test reports that window.

BPFKIT_SIGNAL_RUNS sets the number of runs (default 20; the issue's figure is 100) and
BPFKIT_SIGNAL_SEED the random seed (printed, to replay a failure)."""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from bpfkit._kernel import tracefs as _tracefs
from bpfkit.link import tracefs_probes as tp
from conftest import console_script

pytestmark = pytest.mark.root

REPO = Path(__file__).resolve().parent.parent
BPFKIT = Path(console_script())
PROGS = {"count_getppid", "old_kprobe", "count_len"}


def _bpftool(*args: str) -> list[dict[str, Any]]:
    out = subprocess.run(["bpftool", "-j", *args], capture_output=True, text=True, timeout=60)
    return json.loads(out.stdout or "[]") if out.returncode == 0 else []


def _unowned(before_links: set[int], before_progs: set[int]) -> list[str]:
    """Links and programs named like ours, made since the start, that no process holds (bpftool's
    ``pids``) and no pin keeps (``-f``: another run's `bpfkit load` pins its own)."""
    progs = {p["id"]: p for p in _bpftool("-f", "prog", "show") if p.get("name") in PROGS}
    found = []
    for lk in _bpftool("-f", "link", "show"):
        if (lk["id"] not in before_links and lk.get("prog_id") in progs and not lk.get("pids")
                and not lk.get("pinned")):
            found.append(f"link {lk['id']} ({lk.get('type')}, prog {progs[lk['prog_id']]['name']})")
    for pid, p in progs.items():
        if pid not in before_progs and not p.get("pids") and not p.get("pinned"):
            found.append(f"prog {pid} {p['name']}")
    return found


def _orphans(before_links: set[int], before_progs: set[int]) -> list[str]:
    """What _unowned finds twice, a second apart: objects that would live on in the kernel.
    Other processes' are held, or pinned, or (a run of another copy of the suite that is
    exiting) gone a moment later: names are shared, so one look proves nothing."""
    first = _unowned(before_links, before_progs)
    if first:
        time.sleep(1)
        again = set(_unowned(before_links, before_progs))
        first = [o for o in first if o in again]
    return first


def _probes_of(pid: int) -> list[str]:
    left = []
    for kind in _tracefs.PROBE_KINDS:
        for ev in _tracefs.list_probe_events(kind):
            owner = tp.parse_owner(ev.group)
            if owner and owner[0] == pid:
                left.append(f"{ev.group}/{ev.event}")
    return left


def _wait_for_handler(pid: int, timeout: float = 20.0) -> float:
    """When process ``pid`` catches SIGTERM (bpfkit's quiet handler is in place): monotonic time."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        try:
            with open(f"/proc/{pid}/status") as f:
                for line in f:
                    if line.startswith("SigCgt:"):
                        if int(line.split()[1], 16) & (1 << (signal.SIGTERM - 1)):
                            return time.monotonic()
                        break
        except OSError:
            break
        time.sleep(0.0005)
    return time.monotonic()


@pytest.mark.skipif(shutil.which("bpftool") is None, reason="needs bpftool")
def test_signals_at_random_moments_leave_nothing_attached(bpf_obj, sleeper: int) -> None:
    from bpfkit import features

    runs = int(os.environ.get("BPFKIT_SIGNAL_RUNS", "20"))
    seed = int(os.environ.get("BPFKIT_SIGNAL_SEED", str(random.randrange(1 << 30))))
    rng = random.Random(seed)
    scenarios = [[str(bpf_obj("minimal"))]]  # a tracepoint (perf event + link or ioctl)
    if features.probe("uprobe_pmu").supported:
        # loader_legacy's kprobe program calls no 5.15+ helper: it loads on 5.10 too
        up = [str(bpf_obj("loader_legacy")), "uprobe:libc:getpid", "--program", "old_kprobe", "--pid", str(sleeper)]
        scenarios.append(up)
        scenarios.append(up + ["--mode", "ioctl"])  # PERF_EVENT_IOC_SET_BPF instead of a bpf_link
    before_links = {lk["id"] for lk in _bpftool("link", "show")}
    before_progs = {p["id"] for p in _bpftool("prog", "show")}
    # How long a run takes to be attached and waiting: the random moments span 2x that.
    t = time.monotonic()
    probe = subprocess.Popen([str(BPFKIT), "attach", *scenarios[0]], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert probe.stdout is not None
    for line in probe.stdout:
        if "attached; Ctrl-C" in line:
            break
    ready = time.monotonic() - t
    probe.send_signal(signal.SIGINT)
    probe.communicate(timeout=60)
    span = max(0.3, ready * 2)
    outcomes: dict[str, int] = {}
    windows: list[float] = []
    for i in range(runs):
        args = rng.choice(scenarios)
        signum = rng.choice([signal.SIGINT, signal.SIGTERM])
        delay = rng.uniform(0, span)
        started = time.monotonic()
        proc = subprocess.Popen([str(BPFKIT), "attach", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        if signum == signal.SIGINT:
            windows.append(_wait_for_handler(proc.pid) - started)
        time.sleep(delay)
        proc.send_signal(signum)
        try:
            out, err = proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, err = proc.communicate()
            pytest.fail(f"run {i} (seed {seed}): {signal.Signals(signum).name} after {delay:.3f}s: still running after 60 s\n{err}")
        where = f"run {i} (seed {seed}): {signal.Signals(signum).name} after {delay:.3f}s of {' '.join(args[1:]) or 'sections'}"
        assert "Traceback" not in err and "Exception ignored" not in err, f"{where}:\n{err}"
        assert proc.returncode in (0, 128 + signum, 130, -signum), f"{where}: exit {proc.returncode}\n{err}"
        left = _probes_of(proc.pid)
        assert not left, f"{where}: tracefs probes left: {left}"
        stage = "detached" if "detached" in out else ("attached" if "attached" in out else "before attaching")
        outcomes[stage] = outcomes.get(stage, 0) + 1
    orphans = _orphans(before_links, before_progs)
    assert not orphans, f"seed {seed}: left in the kernel: {orphans}"
    window = f"; SIGINT handler installed {1000 * sorted(windows)[len(windows) // 2]:.0f} ms after exec (median)" if windows else ""
    print(f"{runs} runs (seed {seed}, moments in 0-{span:.2f}s; ready after {ready:.2f}s{window}): {outcomes}")
