# SPDX-License-Identifier: Apache-2.0
"""`bpfkit attach` and `bpfkit gc` as a user runs them: separate processes, real signals."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from typing import Any

import pytest
from conftest import bpf_ids_held_by, links_running

from bpfkit import link
from bpfkit._kernel import pmu
from bpfkit._kernel import tracefs as _tracefs

from .test_link import REPO, SUBPROCESS_TIMEOUT, _child, _groups, _loader_works

OBJ = str(REPO / "bpf/.output/link_probes.bpf.o")
NAMES = {"tp_getppid", "up_getppid", "uret_getppid"}
ENV = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))


def bpfkit_cmd(*args: str) -> list[str]:
    return [sys.executable, "-m", "bpfkit.cli", *args]


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
        # What this run attached, by id (its /proc/PID/fdinfo): never the system's links by name.
        self.prog_ids, self.link_ids = bpf_ids_held_by(self.proc.pid)

    def perf_links(self) -> list[tuple[str, Any]]:
        """(program name, LinkInfo) of this run's perf_event links that still exist."""
        return [(n, i) for n, i in links_running(self.prog_ids, self.link_ids) if getattr(i, "type_name", "") == "perf_event"]

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
        assert sorted(n for n, _ in run.perf_links()) == sorted(NAMES) or link.have_perf_link() is False
    finally:
        rc, out, err = run.stop(sig)
    assert rc == 0, err
    assert "detached" in out
    assert "skipped program kp_any" in err
    assert run.prog_ids and run.perf_links() == []


@needs_loader
def test_attach_spec_with_program_in_ioctl_mode() -> None:
    run = Attached(OBJ, "uprobe:libc:getppid", "--program", "up_getppid", "--mode", "ioctl", "--pid", str(os.getpid()))
    try:
        (line,) = [x for x in run.lines if x.startswith("attached ")]
        assert "up_getppid" in line and "libc.so.6:getppid" in line and line.endswith("(ioctl)")
        assert run.prog_ids and run.perf_links() == []  # ioctl mode: no bpf_link
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
        # gc is machine-wide: another bpfkit gc (a second copy of this suite, running this test
        # at the same moment) may remove this run's stale probe first; then ours finds none.
        removed_elsewhere = group not in _groups()
        assert dry.returncode == 0 and (group in dry.stdout or removed_elsewhere), dry.stdout
        done = subprocess.run(bpfkit_cmd("gc"), capture_output=True, text=True, env=ENV, timeout=SUBPROCESS_TIMEOUT)
        assert done.returncode == 0, done.stderr
        removed = any(line.startswith("removed") and group in line for line in done.stdout.splitlines())
        assert removed or group not in dry.stdout or "no stale bpfkit probes" in done.stdout, done.stdout
        assert group not in _groups()
    finally:
        link.remove_stale_probes()


# ------------------------------------------------------------------- the one attach path
class _RecordedLink:
    """Stands in for what the attach entry point returns (a mock: these tests are about which
    function the CLI calls, once per spec; the real attachments are the tests above)."""

    description = "recorded"

    def __init__(self) -> None:
        self.pinned: list[str] = []
        self.closed = False

    def pin(self, path: str) -> None:
        self.pinned.append(path)

    def unpin(self) -> None:
        self.pinned.clear()

    def close(self) -> None:
        self.closed = True


@pytest.fixture
def bpffs_dir():
    import shutil

    path = f"/sys/fs/bpf/bpfkit-test-attach-path-{os.getpid()}"
    yield path
    shutil.rmtree(path, ignore_errors=True)


@needs_loader
def test_cli_attach_calls_attach_probe_once_per_spec(monkeypatch: pytest.MonkeyPatch, bpffs_dir: str) -> None:
    from bpfkit import attach
    from bpfkit.cli.main import main

    calls: list[tuple[str, str, dict[str, Any]]] = []
    made: list[_RecordedLink] = []

    def attach_probe(spec: Any, prog: Any, **kw: Any) -> _RecordedLink:
        calls.append((spec.text, prog.name, kw))
        made.append(_RecordedLink())
        return made[-1]

    monkeypatch.setattr(attach, "attach_probe", attach_probe)
    monkeypatch.setattr(attach, "attach_all", lambda *a, **kw: pytest.fail("attach_all called with SPECs"))
    specs = ["tracepoint:syscalls:sys_enter_getppid", "uprobe:libc:getpp*", "xdp:lo"]
    rc = main(["attach", OBJ, *specs, "-p", "tp_getppid", "--cookie", "7", "--pin", bpffs_dir])
    assert rc == 0
    assert [(text, name) for text, name, _ in calls] == [(s, "tp_getppid") for s in specs]
    for _, _, kw in calls:
        assert (kw["mode"], kw["pid"], kw["cookie"], kw["max_perf_targets"]) == ("auto", None, 7, 1000)
    assert all(lk.pinned and lk.closed for lk in made)  # pinned under DIR, then the process let go


@needs_loader
def test_cli_attach_without_spec_calls_attach_all_once(monkeypatch: pytest.MonkeyPatch, bpffs_dir: str,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    from bpfkit import attach
    from bpfkit.cli.main import main

    calls: list[dict[str, Any]] = []

    def attach_all(coll: Any, **kw: Any) -> attach.AttachedLinks:
        calls.append(dict(kw, names=sorted(coll.programs)))
        result = attach.AttachedLinks()
        result.links["tp_getppid"] = _RecordedLink()  # type: ignore[assignment]
        result.skipped["kp_any"] = "section 'kprobe' names no target"
        return result

    monkeypatch.setattr(attach, "attach_all", attach_all)
    monkeypatch.setattr(attach, "attach_probe", lambda *a, **kw: pytest.fail("attach_probe called without SPEC"))
    assert main(["attach", OBJ, "--mode", "ioctl", "--pin", bpffs_dir]) == 0
    (call,) = calls
    assert call["mode"] == "ioctl" and call["programs"] is None and "kp_any" in call["names"]
    assert "skipped program kp_any: section 'kprobe' names no target" in capsys.readouterr().err

