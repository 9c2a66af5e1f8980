# SPDX-License-Identifier: Apache-2.0
"""The `bpfkit` command end to end: real subprocesses, real probes, real signals.

The bundled example (bpfkit/examples/opensnoop.bpf.c, built as bpf/.output/cli_opensnoop.bpf.o)
has a tracepoint (sys_enter_openat) and a uprobe (libc fopen) feeding one ring buffer. Tests
attach it, trigger both from a child process with a unique file name, read the printed events,
send SIGINT and check that nothing stays attached (the system's links, tracefs uprobe_events).
A run's objects are known by id (from the command's /proc/PID/fdinfo, or its pins), never by
program name: the suite passes beside other BPF users and beside a second copy of itself.
(`bpfkit gc` after SIGKILL is tested in integration/test_link_cli.py.)
"""

from __future__ import annotations

import json
import os
import queue
import shutil
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any, Callable

import pytest
from conftest import bpf_ids_held_by, links_running

from bpfkit import features, link
from bpfkit._kernel import pmu, tracefs as _tracefs

REPO = Path(__file__).resolve().parent.parent
ENV = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
TIMEOUT = 900 if os.environ.get("BPFKIT_VM_KERNEL") else 60


def bpfkit_cmd(*args: str) -> list[str]:
    return [sys.executable, "-m", "bpfkit.cli", *args]


# Background runs dump every thread's stack on SIGUSR1, so one that does not stop in time
# says where it is stuck (Running.stop) before it is killed.
DUMPABLE_CLI = ("import faulthandler, runpy, signal; faulthandler.register(signal.SIGUSR1, all_threads=True); "
                "runpy.run_module('bpfkit.cli', run_name='__main__', alter_sys=True)")


def trigger(path: str) -> None:
    """openat(2) and libc fopen() of ``path`` in a fresh process (it need not exist)."""
    code = f"import ctypes, os\ntry: os.close(os.open({path!r}, os.O_RDONLY))\nexcept OSError: pass\n" \
           f"ctypes.CDLL(None).fopen({path!r}.encode(), b'r')\n"
    subprocess.run([sys.executable, "-c", code], check=True, timeout=TIMEOUT)


def bpftool_link_ids() -> set[int]:
    """Link ids `bpftool link list` shows (a second opinion on links_running)."""
    tool = shutil.which("bpftool") or "/usr/sbin/bpftool"
    if not os.path.exists(tool):
        return set()
    out = subprocess.run([tool, "-j", "link", "list"], capture_output=True, text=True, timeout=TIMEOUT)
    return {entry.get("id") for entry in json.loads(out.stdout or "[]")}


def uprobe_groups_of(pid: int) -> set[str]:
    if not _tracefs.has_probe_events("uprobe"):
        return set()
    return {e.group for e in _tracefs.list_probe_events("uprobe") if e.group.startswith(f"bpfkit_{pid}_")}


def process_state(pid: int) -> str:
    """Signal masks, state and kernel stack of every thread of ``pid`` (for a stuck process)."""
    lines = []
    for tid in sorted(os.listdir(f"/proc/{pid}/task"), key=int):
        base = f"/proc/{pid}/task/{tid}"
        try:
            with open(f"{base}/status") as f:
                wanted = [ln.strip() for ln in f if ln.startswith(("State", "SigPnd", "ShdPnd", "SigBlk", "SigIgn", "SigCgt"))]
            with open(f"{base}/stack") as f:
                stack = [ln.strip() for ln in f][:12]
        except OSError as exc:
            wanted, stack = [f"unreadable: {exc}"], []
        lines.append(f"thread {tid}: {', '.join(wanted)}; kernel stack: {' < '.join(stack)}")
    return "\n".join(lines)


class Running:
    """`bpfkit attach ...` in the background; stdout lines arrive on a queue (a reader thread
    keeps the pipe drained: the openat tracepoint sees the whole machine)."""

    def __init__(self, *args: str, ready_on: str = "stdout") -> None:
        self.proc = subprocess.Popen([sys.executable, "-c", DUMPABLE_CLI, "attach", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     text=True, env=ENV)
        self.out: queue.Queue[str | None] = queue.Queue()
        self.err: list[str] = []
        self.status: list[str] = []
        self._ready = threading.Event()
        self._threads = [threading.Thread(target=self._pump, args=(self.proc.stdout, ready_on == "stdout"), daemon=True),
                         threading.Thread(target=self._pump_err, args=(ready_on == "stderr",), daemon=True)]
        for t in self._threads:
            t.start()
        if not self._ready.wait(TIMEOUT) or self.proc.poll() is not None:
            self.proc.kill()
            self.proc.wait()
            raise AssertionError(f"bpfkit attach did not get ready (rc {self.proc.returncode}): {self.err}")
        # What this run attached: the ids in its fdinfo, for checks that it leaves nothing.
        self.prog_ids, self.link_ids = bpf_ids_held_by(self.proc.pid)

    def links(self) -> list[tuple[str, Any]]:
        """(program name, LinkInfo) of the links this run made that still exist."""
        return links_running(self.prog_ids, self.link_ids)

    def _pump(self, stream: Any, ready_here: bool) -> None:
        for line in stream:
            line = line.rstrip("\n")
            if ready_here and "to detach" in line:
                self.status.append(line)
                self._ready.set()
                continue
            if ready_here and not self._ready.is_set():
                self.status.append(line)
                continue
            self.out.put(line)
        self.out.put(None)
        self._ready.set()

    def _pump_err(self, ready_here: bool) -> None:
        assert self.proc.stderr
        for line in self.proc.stderr:
            self.err.append(line)
            if ready_here and "to detach" in line:
                self._ready.set()
        self._ready.set()

    def wait_for(self, pred: Callable[[str], bool], deadline: float = 10.0) -> list[str]:
        """Lines until one satisfies ``pred`` (all lines read, for the caller to look at)."""
        seen = []
        end = time.monotonic() + deadline
        while time.monotonic() < end:
            try:
                line = self.out.get(timeout=0.2)
            except queue.Empty:
                continue
            if line is None:
                break
            seen.append(line)
            if pred(line):
                return seen
        raise AssertionError(f"no matching line in {len(seen)} lines; stderr: {''.join(self.err)}")

    def stop(self, sig: int = signal.SIGINT) -> int:
        self.proc.send_signal(sig)
        try:
            rc = self.proc.wait(timeout=TIMEOUT)
        except subprocess.TimeoutExpired:
            kernel_view = process_state(self.proc.pid)  # before SIGUSR1 changes what is pending
            self.proc.send_signal(signal.SIGUSR1)  # faulthandler: the stacks go to stderr
            time.sleep(5)
            self.proc.kill()
            self.proc.wait()
            for t in self._threads:
                t.join(TIMEOUT)
            raise AssertionError(f"bpfkit attach did not exit {TIMEOUT} s after signal {sig}; the kernel's "
                                 f"view of it:\n{kernel_view}\nits threads then:\n{''.join(self.err)}") from None
        for t in self._threads:
            t.join(TIMEOUT)
        return rc


@pytest.fixture
def example(bpf_obj: Any) -> str:
    return str(bpf_obj("cli_opensnoop"))


def test_attach_tracepoint_and_uprobe_prints_events_then_detaches(example: str) -> None:
    token = f"/tmp/bpfkit-cli-{uuid.uuid4().hex[:12]}"
    run = Running(example, "--events", "events", "--json", ready_on="stderr")
    try:
        if features.probe("perf_link"):  # before 5.15 the attach is PERF_EVENT_IOC_SET_BPF: no links
            assert sorted(n for n, _ in run.links()) == ["handle_fopen", "handle_openat"]
        got: dict[int, dict[str, Any]] = {}

        def ours(line: str) -> bool:
            rec = json.loads(line)
            if rec["fields"]["filename"] == token:
                got[rec["fields"]["source"]] = rec
            return set(got) == {0, 1}

        trigger(token)
        run.wait_for(ours)
    finally:
        rc = run.stop(signal.SIGINT)
    assert rc == 0, run.err
    opened, fopened = got[0], got[1]
    assert opened["map"] == "events" and opened["size"] >= 168 and opened["cpu"] is None
    assert fopened["fields"]["comm"].startswith("python")
    assert opened["fields"]["pid"] == fopened["fields"]["pid"] > 0
    assert "detached" in "".join(run.err)
    # Nothing stays attached: not in the kernel's link list, not in bpftool's, not in tracefs.
    assert run.prog_ids and run.links() == []
    assert not (bpftool_link_ids() & run.link_ids)
    assert uprobe_groups_of(run.proc.pid) == set()


def test_attach_refuses_an_event_type_it_cannot_find(example: str) -> None:
    # A record type named (--event-type, --events MAP:TYPE) that neither the object's BTF nor its
    # DWARF has is an error before anything is attached (it printed hex before: issue 38).
    for named in (["--event-type", "no_such_struct"], []):
        events = "events:no_such_struct" if not named else "events"
        proc = subprocess.run([sys.executable, "-m", "bpfkit.cli", "attach", example, "uprobe:libc:fopen", "--program",
                               "handle_fopen", "--events", events, *named, "--mode", "ioctl"],
                              capture_output=True, text=True, timeout=120, check=False)
        assert proc.returncode == 2, proc.stderr
        assert "record type 'no_such_struct': BTF has no struct named 'no_such_struct'" in proc.stderr, proc.stderr
        assert "attached" not in proc.stdout


@pytest.mark.feature("uprobe_multi")
def test_wildcard_uprobe_is_one_multi_link(example: str) -> None:
    # uprobe_multi (6.6): every match of the pattern through one link (the fallback: below).
    run = Running(example, "uprobe:libc:fopen*", "--program", "handle_fopen")
    try:
        attached = [line for line in run.status if line.startswith("attached ")]
        assert len(attached) == 1, run.status
        assert "uprobe_multi" in attached[0] and ":fopen* (" in attached[0] and attached[0].endswith("(link)")
        kinds = [info.type_name for _, info in run.links()]
        assert kinds == ["uprobe_multi"], kinds
    finally:
        rc = run.stop()
    assert rc == 0, run.err
    assert run.links() == []


def test_wildcard_uprobe_with_ioctl_is_one_perf_event_per_match(example: str) -> None:
    run = Running(example, "uprobe:libc:fopen*", "--program", "handle_fopen", "--mode", "ioctl")
    try:
        attached = [line for line in run.status if line.startswith("attached ")]
        assert len(attached) == 1 and "perf events, ioctl)" in attached[0], run.status
        count = int(attached[0].rsplit("(", 1)[1].split()[0])
        assert count >= 2
    finally:
        rc = run.stop()
    assert rc == 0, run.err
    assert uprobe_groups_of(run.proc.pid) == set()


@pytest.mark.skipif(pmu.has_pmu("kprobe") or _tracefs.has_probe_events("kprobe"), reason="this kernel has kprobes")
def test_kprobe_on_a_kernel_without_kprobes_says_so(example: str) -> None:
    proc = subprocess.run(bpfkit_cmd("attach", example, "kprobe:do_sys_open", "--program", "handle_kprobe"),
                          capture_output=True, text=True, env=ENV, timeout=TIMEOUT)
    assert proc.returncode == 3, proc.stderr
    first = proc.stderr.splitlines()[0]
    assert first.startswith("bpfkit: error: kprobes are not available: this kernel was built without CONFIG_KPROBES")
    assert len(proc.stderr.splitlines()) <= 2 and proc.stdout == ""


def test_missing_uprobe_symbol_suggests_the_close_ones(example: str) -> None:
    proc = subprocess.run(bpfkit_cmd("attach", example, "uprobe:libc:fopne", "-p", "handle_fopen"),
                          capture_output=True, text=True, env=ENV, timeout=TIMEOUT)
    assert proc.returncode == 1
    assert "symbol fopne not found in" in proc.stderr and "did you mean fopen" in proc.stderr


def test_bad_spec_points_at_the_bad_part(example: str) -> None:
    proc = subprocess.run(bpfkit_cmd("attach", example, "uprobe:libc:fopen+x", "-p", "handle_fopen"),
                          capture_output=True, text=True, env=ENV, timeout=TIMEOUT)
    assert proc.returncode == 2
    spec_line, caret_line = proc.stderr.splitlines()[:2]
    assert caret_line.index("^") == spec_line.index("+x") + 1


@pytest.mark.feature("perf_link")  # pinning needs a bpf_link
def test_pin_then_list_show_and_remove(example: str, tmp_path: Path) -> None:
    from bpfkit._kernel.bpffs import bpffs_mount_of

    pin_dir = f"/sys/fs/bpf/bpfkit_cli_test_{os.getpid()}"
    pinned_ids: set[int] = set()
    try:
        bpffs_mount_of("/sys/fs/bpf")
    except Exception:
        pytest.skip("no bpffs at /sys/fs/bpf")
    try:
        proc = subprocess.run(bpfkit_cmd("attach", example, "--pin", pin_dir), capture_output=True, text=True,
                              env=ENV, timeout=TIMEOUT)
        assert proc.returncode == 0, proc.stderr
        assert sorted(os.listdir(pin_dir)) == sorted(["handle_openat", "handle_fopen", "events", "rodata", "bss"])
        # The pins are this run's own: their ids identify its links (never their names).
        for name in ("handle_openat", "handle_fopen"):
            with link.load_pinned_link(f"{pin_dir}/{name}") as pinned:
                pinned_ids.add(pinned.info().id)
        assert sorted(n for n, _ in links_running(set(), pinned_ids)) == ["handle_fopen", "handle_openat"]  # outlived the command
        listed = subprocess.run(bpfkit_cmd("link", "list", "--json"), capture_output=True, text=True, env=ENV, timeout=TIMEOUT)
        assert listed.returncode == 0, listed.stderr
        rows = [json.loads(line) for line in listed.stdout.splitlines()]
        mine = [r for r in rows if r["id"] in pinned_ids]
        assert len(mine) == 2 and all(r["type"] == "perf_event" for r in mine)
        assert sorted(r["prog_name"] for r in mine) == ["handle_fopen", "handle_openat"]
        shown = subprocess.run(bpfkit_cmd("link", "show", f"{pin_dir}/handle_openat", "--json"), capture_output=True,
                               text=True, env=ENV, timeout=TIMEOUT)
        link_row = json.loads(shown.stdout)
        assert link_row["prog_name"] == "handle_openat" and link_row["pinned"] == f"{pin_dir}/handle_openat"
        prog = subprocess.run(bpfkit_cmd("prog", "show", str(link_row["prog_id"]), "--json"), capture_output=True,
                              text=True, env=ENV, timeout=TIMEOUT)
        prog_row = json.loads(prog.stdout)
        assert prog_row["name"] == "handle_openat" and prog_row["type"] == "tracepoint" and prog_row["gpl"] is True
        dump = subprocess.run(bpfkit_cmd("map", "dump", f"{pin_dir}/rodata", "--json"), capture_output=True,
                              text=True, env=ENV, timeout=TIMEOUT)
        assert json.loads(dump.stdout) == [{"key": ["0x00"] * 4, "value": ["0x00"] * 4,  # as bpftool -j prints it
                                            "formatted": {"value": {".rodata": [{"targ_pid": 0}]}}}]
        shown_map = subprocess.run(bpfkit_cmd("map", "show", f"{pin_dir}/events", "--json"), capture_output=True,
                                   text=True, env=ENV, timeout=TIMEOUT)
        map_row = json.loads(shown_map.stdout)
        assert map_row["type"] == "ringbuf" and map_row["max_entries"] == 256 * 1024
        ring_dump = subprocess.run(bpfkit_cmd("map", "dump", f"{pin_dir}/events"), capture_output=True, text=True,
                                   env=ENV, timeout=TIMEOUT)
        assert ring_dump.returncode == 3 and "bpfkit events" in ring_dump.stderr  # as bpftool: ENOTSUPP (exit 3: not supported)
        # The pinned programs keep sending: `bpfkit events` reads the pinned ring buffer.
        reader = subprocess.Popen(bpfkit_cmd("events", f"{pin_dir}/events", "--btf", example, "--count", "1", "--json"),
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV)
        deadline = time.monotonic() + TIMEOUT
        while True:
            # handle_openat sees every process's openat(2): this one's will do, without the
            # seconds a fresh interpreter costs in an emulated VM while `bpfkit events` starts.
            try:
                os.close(os.open(f"/tmp/bpfkit-cli-{uuid.uuid4().hex[:12]}", os.O_RDONLY))
            except OSError:
                pass
            try:
                out, err = reader.communicate(timeout=0.5)
                break
            except subprocess.TimeoutExpired:
                if time.monotonic() > deadline:
                    reader.kill()
                    reader.communicate()
                    raise AssertionError("bpfkit events printed nothing") from None
        assert reader.returncode == 0, err
        record = json.loads(out.splitlines()[0])
        assert record["map"] == "events" and {"pid", "comm", "filename"} <= set(record["fields"])
    finally:
        if os.path.isdir(pin_dir):
            for name in os.listdir(pin_dir):
                os.unlink(os.path.join(pin_dir, name))
            os.rmdir(pin_dir)
    assert pinned_ids and links_running(set(), pinned_ids) == []
