# SPDX-License-Identifier: Apache-2.0
"""Stale-probe gc judges owners by (pid in the initial PID namespace, start time) (issue #19
item 8): a reused PID is not the owner, and a container's bpfkit names itself by the PID the
rest of the machine sees. Real processes, real tracefs probes, a real PID namespace."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from bpfkit._kernel import owner as _owner
from bpfkit._kernel import tracefs as _tracefs
from bpfkit.link import tracefs_probes as tp
from conftest import console_script

pytestmark = [pytest.mark.root, pytest.mark.feature("uprobe_events")]

REPO = Path(__file__).resolve().parent.parent
BPFKIT = Path(console_script())
PY = sys.executable
# Makes one uprobe through uprobe_events, prints its group, then waits for stdin to close
# (or, with "die", is SIGKILLed at once so the probe stays behind).
MAKER = r"""
import os, signal, sys
from bpfkit.link.tracefs_probes import TracefsProbe
p = TracefsProbe.create("uprobe", os.path.realpath(sys.executable) + ":0x0", hint="gc_owner_test")
print(p.group, os.getpid(), flush=True)
if sys.argv[1] == "die":
    os.kill(os.getpid(), signal.SIGKILL)
sys.stdin.read()
"""


def _groups() -> set[str]:
    return {ev.group for ev in _tracefs.list_probe_events("uprobe")}


def _make(*prefix: str, die: bool = False) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen([*prefix, PY, "-c", MAKER, "die" if die else "live"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True, cwd=REPO)
    assert proc.stdout is not None
    line = proc.stdout.readline().split()
    assert line, f"the probe maker printed nothing (exit {proc.wait()})"
    return proc, line[0]


def _gc(*prefix: str) -> str:
    out = subprocess.run([*prefix, str(BPFKIT), "gc"], capture_output=True, text=True, timeout=60, cwd=REPO)
    assert out.returncode == 0 and "Traceback" not in out.stderr, out.stderr
    return out.stdout


def _removed(out: str, group: str, pid: int) -> bool:
    """Whether ``group`` is gone and `bpfkit gc` (which printed ``out``) removed it, or another gc
    on the machine did first: gc is machine-wide, and a second copy of this suite runs the same
    test at the same moment (both judge the owner with the same code)."""
    said = f"removed  uprobe {group}/gc_owner_test (pid {pid} started" in out
    return group not in _groups() and (said or group not in out)


def _cleanup(group: str) -> None:
    try:
        _tracefs.remove_probe_event("uprobe", group, "gc_owner_test")
    except Exception:
        pass


def test_group_names_pid_and_start_time() -> None:
    group = tp.new_group()
    pid, start = tp.parse_owner(group) or (0, 0)
    assert pid == os.getpid() and start == _owner.start_time("self")
    assert tp.parse_owner("bpfkit_123_abcdef01") == (123, None)  # groups of older versions


def test_dead_owner_removed_live_owner_kept() -> None:
    live, live_group = _make()
    dead, dead_group = _make(die=True)
    dead.wait()
    try:
        out = _gc()
        assert _removed(out, dead_group, dead.pid), out
        assert live_group in _groups()
    finally:
        live.communicate("")
        _cleanup(dead_group)
    assert live_group not in _groups()


def _take_pid(pid: int, tries: int = 50) -> subprocess.Popen[bytes] | None:
    """Start a process that gets ``pid`` (ns_last_pid = pid - 1, then fork; other processes on the
    machine may take it first, so a few tries)."""
    for _ in range(tries):
        with open("/proc/sys/kernel/ns_last_pid", "w") as f:
            f.write(str(pid - 1))
        proc = subprocess.Popen(["sleep", "60"])
        if proc.pid == pid:
            return proc
        proc.kill()
        proc.wait()
    return None


def test_reused_pid_is_not_the_owner() -> None:
    if not _owner.in_initial_pid_ns():
        pytest.skip("ns_last_pid steers PIDs of this namespace only; needs the initial PID namespace")
    dead, group = _make(die=True)
    dead.wait()
    squatter = _take_pid(dead.pid)
    if squatter is None:
        pytest.skip(f"could not get pid {dead.pid} again (other processes took it)")
    try:
        assert _owner.start_time(dead.pid) is not None  # a process with the owner's pid runs
        out = _gc()
        assert _removed(out, group, dead.pid), out
    finally:
        squatter.kill()
        squatter.wait()
        _cleanup(group)


UNSHARE = ["unshare", "--pid", "--fork", "--mount-proc"]


def _child_of(pid: int) -> int:
    for _ in range(100):
        try:
            children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
        except OSError:
            children = []
        if children:
            return int(children[0])
        time.sleep(0.02)
    raise AssertionError(f"unshare ({pid}) has no child")


@pytest.mark.skipif(shutil.which("unshare") is None, reason="needs unshare(1) from util-linux")
def test_pid_namespace_owner_uses_the_machine_wide_pid() -> None:
    container, group = _make(*UNSHARE)
    try:
        inner = _child_of(container.pid)  # the maker, pid 1 in its namespace
        pid, start = tp.parse_owner(group) or (0, 0)
        assert pid == inner and start == _owner.start_time(inner), (group, inner)
        # Seen from the machine, the owner runs: kept.
        out = _gc()  # (it may remove another run's stale probes: a second copy of the suite)
        assert f"uprobe {group}/" not in out and group in _groups(), out
        # Seen from another container, owners cannot be looked up: nothing is removed, and it says why.
        dead, dead_group = _make(die=True)
        dead.wait()
        out = _gc(*UNSHARE)
        assert "not judged: this process's /proc belongs to a PID namespace of its own" in out, out
        # This gc removed neither (another copy of the suite's gc, judging from the machine, may
        # have removed the dead one meanwhile: it is stale there).
        assert group in _groups() and f"uprobe {dead_group}/" not in out, out
        _cleanup(dead_group)
    finally:
        container.communicate("")
    # The container's bpfkit removed its own probe at exit.
    assert group not in _groups()


@pytest.mark.skipif(shutil.which("unshare") is None, reason="needs unshare(1) from util-linux")
def test_probe_left_by_a_killed_container_process_is_collected() -> None:
    container, group = _make(*UNSHARE)
    inner = _child_of(container.pid)
    try:
        os.kill(inner, signal.SIGKILL)
        container.wait(10)
        out = _gc()
        assert _removed(out, group, inner), out
    finally:
        _cleanup(group)
