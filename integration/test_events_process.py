# SPDX-License-Identifier: Apache-2.0
"""The process tracker against the kernel: a test process forks, the child execs a new
Python, which dlopens a freshly built library; the tracker follows all of it from live
sideband records and resolves an address in that library to its symbol. Processes that
existed before the tracker started come from the /proc snapshot (status-only records)."""

from __future__ import annotations

import ctypes
import os
import shutil
import subprocess
import sys
import time

import pytest

from bpfkit.events import ProcessTracker
from bpfkit.events.records import Comm, Fork, Mmap2

LIB_C = r"""
int bpfkit_tracker_marker(int x) { return 3 * x + 1; }
int bpfkit_tracker_other(int x) { return bpfkit_tracker_marker(x) * 2; }
"""

# The traced program: fork; the child execs Python, which dlopens the library, reports its
# pid and the marker's address, and waits to be told to exit.
PARENT = r"""
import os, sys
pid = os.fork()
if pid == 0:
    os.execv(sys.executable, [sys.executable, "-c", sys.argv[1], sys.argv[2]])
print(os.getpid(), pid, flush=True)
os.waitpid(pid, 0)
"""
CHILD = r"""
import ctypes, sys
lib = ctypes.CDLL(sys.argv[1])
addr = ctypes.cast(lib.bpfkit_tracker_marker, ctypes.c_void_p).value
print(addr, flush=True)
sys.stdin.readline()
"""


@pytest.fixture(scope="module")
def library(tmp_path_factory):
    cc = shutil.which("gcc") or shutil.which("cc") or shutil.which("clang-19")
    if cc is None:
        pytest.skip("needs a C compiler to build the test library")
    d = tmp_path_factory.mktemp("tracker")
    src = d / "marker.c"
    src.write_text(LIB_C)
    lib = d / "libbpfkit_marker.so"
    subprocess.run([cc, "-shared", "-fPIC", "-O1", "-o", str(lib), str(src)], check=True)
    return str(lib)


def test_follows_fork_exec_dlopen_and_resolves(library):
    seen = []
    with ProcessTracker(on_record=seen.append) as tracker:
        proc = subprocess.Popen(
            [sys.executable, "-c", PARENT, CHILD, library],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
        )
        try:
            parent_pid, child_pid = map(int, proc.stdout.readline().split())
            addr = int(proc.stdout.readline())
            res = tracker.resolve(child_pid, addr)
            child = tracker.process(child_pid)
            parent = tracker.process(parent_pid)
        finally:
            proc.stdin.write("\n")
            proc.stdin.close()
            proc.wait(timeout=30)
        tracker.sync()
        exited = tracker.process(child_pid).exited

    assert res is not None, f"no mapping for {addr:#x} in {child}"
    assert res.path == library and res.symbol == "bpfkit_tracker_marker" and res.symbol_offset == 0
    assert res.offset == res.mapping.file_offset(addr)
    # learned from live records, not the snapshot: the child did not exist at the start
    assert not child.from_snapshot and not parent.from_snapshot
    assert child.ppid == parent_pid and parent.ppid == os.getpid()
    assert os.path.realpath(child.exe) == os.path.realpath(sys.executable)
    kinds = [what for _, what, _ in child.log]
    assert kinds[0] == "fork" and "exec" in kinds
    assert any(what == "mmap" and library in detail for _, what, detail in child.log)
    assert kinds.index("exec") < max(i for i, (_, w, d) in enumerate(child.log) if library in d)
    assert exited is not None
    # the records were applied in timestamp order, live ones for our child included
    times = [r.time for r in seen if r.time]
    assert times == sorted(times)
    assert any(isinstance(r, Fork) and r.pid == child_pid and not r.status_only for r in seen)
    assert any(isinstance(r, Comm) and r.pid == child_pid and r.exec for r in seen)
    assert any(isinstance(r, Mmap2) and r.pid == child_pid and r.filename == library for r in seen)


def test_existing_processes_come_from_the_snapshot(library):
    lib = ctypes.CDLL(library)  # mapped in this process before the tracker starts
    addr = ctypes.cast(lib.bpfkit_tracker_other, ctypes.c_void_p).value
    with ProcessTracker() as tracker:
        tracker.sync()
        me = tracker.process(os.getpid())
        assert me is not None and me.from_snapshot
        assert me.comm and os.path.realpath(me.exe) == os.path.realpath(sys.executable)
        res = tracker.resolve(os.getpid(), addr + 4)
        assert res is not None and res.symbol == "bpfkit_tracker_other" and res.symbol_offset == 4
        assert "bpfkit_tracker_other+0x4" in str(res)
        assert tracker.resolve(os.getpid(), 8) is None  # unmapped
        assert not tracker.sideband_ioctl and "never merged" in tracker.sideband_reason


def test_exit_is_recorded_and_short_lived_processes_stay_resolvable():
    with ProcessTracker() as tracker:
        p = subprocess.run(["/bin/true"], check=True)
        time.sleep(0.05)
        tracker.sync()
        trues = [pr for pr in tracker.processes.values() if pr.exe.endswith("/true") and not pr.from_snapshot]
        assert trues and all(pr.exited is not None for pr in trues)
        assert any(m.path.endswith("/true") for m in trues[-1].maps)
