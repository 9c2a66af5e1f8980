"""`bpfkit attach` and `bpfkit gc` as a user runs them: separate processes, real signals."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from typing import Any

import pytest

from bpfkit import link
from bpfkit._kernel import pmu, tracefs as _tracefs
from bpfkit.program import Program

from .test_link import REPO, SUBPROCESS_TIMEOUT, _child, _groups, _loader_works

OBJ = str(REPO / "bpf/.output/link_probes.bpf.o")
NAMES = {"tp_getppid", "up_getppid", "uret_getppid"}
ENV = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))


def bpfkit_cmd(*args: str) -> list[str]:
    return [sys.executable, "-m", "bpfkit.cli", *args]


def perf_links_of(names: set[str]) -> list[tuple[str, Any]]:
    """(program name, LinkInfo) of the system's perf_event links running one of ``names``."""
    found = []
    for info in link.iter_links():
        if info.type_name != "perf_event":
            continue
        try:
            with Program.from_id(info.program_id) as prog:
                name = prog.name
        except Exception:
            continue
        if name in names:
            found.append((name, info))
    return found


class Attached:
    """`bpfkit attach ...` running in the background until stop()."""

    def __init__(self, *args: str) -> None:
        self.proc = subprocess.Popen(bpfkit_cmd("attach", *args), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     text=True, env=ENV)
        self.lines: list[str] = []
        assert self.proc.stdout
        for line in self.proc.stdout:
            self.lines.append(line.rstrip("\n"))
            if "to detach" in line:
                break
        else:
            err = self.proc.stderr.read() if self.proc.stderr else ""
            raise AssertionError(f"bpfkit attach ended early ({self.proc.wait()}): {self.lines} {err}")

    def stop(self, sig: int = signal.SIGTERM) -> tuple[int, str, str]:
        self.proc.send_signal(sig)
        out, err = self.proc.communicate(timeout=SUBPROCESS_TIMEOUT)
        return self.proc.returncode, out, err


needs_loader = pytest.mark.skipif(not _loader_works(), reason="needs the loader to load bpf/link_probes.bpf.o")


@needs_loader
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_attach_auto_until_signal(sig: int) -> None:
    run = Attached(OBJ)
    try:
        assert {line.split()[1].rstrip(":") for line in run.lines if line.startswith("attached ")} == NAMES
        assert sorted(n for n, _ in perf_links_of(NAMES)) == sorted(NAMES) or link.have_perf_link() is False
    finally:
        rc, out, err = run.stop(sig)
    assert rc == 0, err
    assert "detached" in out
    assert "skipped program kp_any" in err
    assert perf_links_of(NAMES) == []


@needs_loader
def test_attach_spec_with_program_in_ioctl_mode() -> None:
    run = Attached(OBJ, "uprobe:libc:getppid", "--program", "up_getppid", "--mode", "ioctl", "--pid", str(os.getpid()))
    try:
        (line,) = [x for x in run.lines if x.startswith("attached ")]
        assert "up_getppid" in line and "libc.so.6:getppid" in line and line.endswith("(ioctl)")
        assert perf_links_of(NAMES) == []  # ioctl mode: no bpf_link
    finally:
        rc, out, err = run.stop()
    assert rc == 0, err


@needs_loader
def test_attach_errors_and_exit_codes() -> None:
    several = subprocess.run(bpfkit_cmd("attach", OBJ, "tracepoint:syscalls:sys_enter_getppid"),
                             capture_output=True, text=True, env=ENV, timeout=SUBPROCESS_TIMEOUT)
    assert several.returncode == 2 and "--program" in several.stderr
    if not (pmu.has_pmu("kprobe") or _tracefs.has_probe_events("kprobe")):
        kp = subprocess.run(bpfkit_cmd("attach", OBJ, "kprobe:do_sys_openat2", "--program", "kp_any"),
                            capture_output=True, text=True, env=ENV, timeout=SUBPROCESS_TIMEOUT)
        assert kp.returncode == 3 and "CONFIG_KPROBES" in kp.stderr, kp.stderr


def test_gc_removes_probes_of_dead_processes() -> None:
    (group,) = _child("kill")
    try:
        dry = subprocess.run(bpfkit_cmd("gc", "--dry-run"), capture_output=True, text=True, env=ENV, timeout=SUBPROCESS_TIMEOUT)
        assert dry.returncode == 0 and group in dry.stdout and group in _groups()
        done = subprocess.run(bpfkit_cmd("gc"), capture_output=True, text=True, env=ENV, timeout=SUBPROCESS_TIMEOUT)
        assert done.returncode == 0, done.stderr
        assert any(line.startswith("removed") and group in line for line in done.stdout.splitlines()), done.stdout
        assert group not in _groups()
    finally:
        link.remove_stale_probes()
