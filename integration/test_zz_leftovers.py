# SPDX-License-Identifier: Apache-2.0
"""Runs last (file name order): the suite left no kernel state behind.

* kprobe_events / uprobe_events hold no probe of bpfkit's that this process (or a process that
  has died) made, and no feature-probe leftover (group ``bpfkit_probe``);
* no pin or directory of this run is left in bpffs (entries of any name made since this
  session started, still there a moment later: other runs on the same machine come and go;
  a test that pins under a name of its own is held to the same rule; a name carrying another
  live process's pid is that run's);
* this process holds no bpf or perf event fd.
"""

from __future__ import annotations

import os
import re
import time

from bpfkit import link
from bpfkit._kernel import tracefs as _tracefs

from .conftest import kernel_object_fds

BPFFS = "/sys/fs/bpf"


def _process_start() -> float:
    """This process's start time (seconds since the epoch), from /proc."""
    with open("/proc/self/stat") as f:
        ticks = int(f.read().rsplit(")", 1)[1].split()[19])
    with open("/proc/stat") as f:
        boot = next(int(line.split()[1]) for line in f if line.startswith("btime "))
    return boot + ticks / os.sysconf("SC_CLK_TCK")


def test_no_bpfkit_probes_left_in_tracefs() -> None:
    mine_or_dead = [p for p in link.bpfkit_probes() if p.pid == os.getpid() or not p.alive]
    assert not mine_or_dead, "probes left behind (remove with `bpfkit gc`): " + ", ".join(
        f"{p.event.kind} {p.name} (pid {p.pid})" for p in mine_or_dead
    )
    for kind in _tracefs.PROBE_KINDS:
        # feature probes' events are p<pid>_<n>: another run's may exist for a moment
        assert not [e for e in _tracefs.list_probe_events(kind)
                    if e.group == "bpfkit_probe" and not _another_runs(e.name.removeprefix("p").split("_")[0])]


def _another_runs(name: str) -> bool:
    """Whether ``name`` (a pin, an event) carries the pid of another live process, as each
    run names what it makes (bpfkit_test_tracing_<pid>): a second copy of the suite
    running at the same time (scripts/test-twice.sh) leaves its own entries for a while."""
    return any(tok.isdigit() and int(tok) != os.getpid() and os.path.exists(f"/proc/{int(tok)}")
               for tok in re.split(r"[_.-]", name))


def test_no_pins_left() -> None:
    if not os.path.isdir(BPFFS):
        return
    since = _process_start() - 1

    def recent() -> set[str]:
        found = set()
        for name in os.listdir(BPFFS):
            try:
                if os.lstat(os.path.join(BPFFS, name)).st_ctime >= since:
                    found.add(name)
            except FileNotFoundError:
                pass
        return found

    first = {name for name in recent() if not _another_runs(name)}
    if first:
        time.sleep(2)
    left = first & recent()
    assert not left, f"pins left in {BPFFS} by this run: {sorted(left)}"


def test_no_kernel_object_fds_left() -> None:
    import gc

    gc.collect()
    assert kernel_object_fds() == {}
