# SPDX-License-Identifier: Apache-2.0
"""The example tools (examples/*/NAME.py) end to end: each runs as a real process, with the
object `make -C bpf` built from examples/NAME/NAME.bpf.c, while a child process makes a known
number of events; the printed output must state exactly that. Ctrl-C (SIGINT) must end a tool
cleanly: exit status 0, no traceback, nothing left attached.
"""

from __future__ import annotations

import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
ENV = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
TIMEOUT = 900 if os.environ.get("BPFKIT_VM_KERNEL") else 60

# A child that waits for a line on stdin, then runs the Python statement it was given (the
# events to count), prints "done" and waits for stdin to close.
CHILD = "import os, sys\nsys.stdin.readline()\n{body}\nprint('done', flush=True)\nsys.stdin.read()\n"


class Tool:
    """An example tool running in the background; its stdout collected line by line."""

    def __init__(self, name: str, *args: str, folder: str = "") -> None:
        script = REPO / "examples" / (folder or name) / f"{name}.py"
        obj = REPO / "bpf/.output/examples" / f"{name}.bpf.o"
        if not obj.exists():
            pytest.skip(f"{obj} is not built (make -C bpf)")
        self.proc = subprocess.Popen([sys.executable, str(script), *args], stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True, env=ENV)
        self.lines: queue.Queue[str | None] = queue.Queue()
        self.seen: list[str] = []
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line.rstrip("\n"))
        self.lines.put(None)

    def wait_for(self, pattern: str, timeout: float = TIMEOUT) -> re.Match[str]:
        """The first new line matching ``pattern``; fails with everything printed so far."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                line = self.lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                line = None
            if line is None:
                self.proc.kill()
                err = self.proc.stderr.read() if self.proc.stderr else ""
                pytest.fail(f"no line matching {pattern!r}; stdout: {self.seen}; stderr: {err}")
            self.seen.append(line)
            found = re.search(pattern, line)
            if found:
                return found

    def finish(self, interrupt: bool = False) -> str:
        """Wait for the tool to exit (after SIGINT when ``interrupt``): its stderr, checked clean."""
        if interrupt:
            self.proc.send_signal(signal.SIGINT)
        try:
            self.proc.wait(timeout=TIMEOUT)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            raise
        err = self.proc.stderr.read() if self.proc.stderr else ""
        assert self.proc.returncode == 0, f"exit {self.proc.returncode}: {err}"
        assert "Traceback" not in err, err
        while True:  # the rest of stdout
            line = self.lines.get(timeout=TIMEOUT)
            if line is None:
                return err
            self.seen.append(line)


class Child:
    """A Python child that runs ``body`` when :meth:`go` is called."""

    def __init__(self, body: str) -> None:
        self.proc = subprocess.Popen([sys.executable, "-c", CHILD.format(body=body)], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True)
        self.pid = self.proc.pid

    def go(self) -> None:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write("go\n")
        self.proc.stdin.flush()
        assert self.proc.stdout.readline().strip() == "done"

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        self.proc.wait(timeout=TIMEOUT)
        if self.proc.stdout is not None:
            self.proc.stdout.close()


@pytest.fixture
def child(request: pytest.FixtureRequest):  # type: ignore[no-untyped-def]
    made: list[Child] = []

    def make(body: str) -> Child:
        made.append(Child(body))
        return made[-1]

    yield make
    for c in made:
        c.close()


# ---------------------------------------------------------------------------- syscount
N = 137  # an unusual count, so no other process matches it by chance


def test_syscount_counts_one_syscall_exactly(child) -> None:  # type: ignore[no-untyped-def]
    kid = child(f"for _ in range({N}): os.getppid()")
    tool = Tool("syscount", "--pid", str(kid.pid), "--syscall", "getppid", "--interval", "1.5", "--count", "1")
    tool.wait_for("^Tracing")
    kid.go()
    tool.finish()
    rows = [line.split() for line in tool.seen if re.match(r"^\d+\s", line)]
    assert [(pid, count) for pid, _comm, count in rows] == [(str(kid.pid), str(N))], tool.seen


def test_syscount_by_process_top_and_interrupt(child) -> None:  # type: ignore[no-untyped-def]
    kid = child(f"for _ in range({N}): os.getppid()")
    tool = Tool("syscount", "--pid", str(kid.pid), "--interval", "0.5")
    tool.wait_for("^Tracing")
    kid.go()
    found = tool.wait_for(rf"^{kid.pid}\s+\S+\s+(\d+)$")
    assert int(found.group(1)) >= N  # getppid() N times, and the write of "done"
    tool.wait_for(r"^\[\d\d:\d\d:\d\d\] \d+ system calls so far$")  # the next report: counts were cleared, periodic
    tool.finish(interrupt=True)


# --------------------------------------------------------------------------- execsnoop
def test_execsnoop_argv_and_failures(child) -> None:  # type: ignore[no-untyped-def]
    kid = child("import subprocess\n"
                "subprocess.run(['/bin/echo', 'alpha', 'beta gamma'], stdout=subprocess.DEVNULL)\n"
                "try: subprocess.run(['/nonexistent/bpfkit-example', '-x'])\n"
                "except FileNotFoundError: pass")
    tool = Tool("execsnoop", "--ppid", str(kid.pid), "--fails", "--count", "2")
    tool.wait_for("^Tracing")
    kid.go()
    ok = tool.wait_for(r"^\S+\s+echo\s+(\d+)\s+(\d+)\s+0 /bin/echo alpha beta gamma$")
    assert int(ok.group(2)) == kid.pid
    failed = tool.wait_for(r"^\S+\s+\S+\s+(\d+)\s+(\d+)\s+-2 /nonexistent/bpfkit-example -x$")  # ENOENT
    assert int(failed.group(2)) == kid.pid
    tool.finish()


def test_execsnoop_ctrl_c(child) -> None:  # type: ignore[no-untyped-def]
    tool = Tool("execsnoop")
    tool.wait_for("^PCOMM|^TIME")
    tool.finish(interrupt=True)


def test_execsnoop_varlen_prints_argv_of_cut_records(child) -> None:  # type: ignore[no-untyped-def]
    """libbpf-tools' record, cut where the arguments end: an empty argument, a failure, and an
    argv longer than --max-args (4: "..."), each line exactly."""
    kid = child("import subprocess\n"
                "subprocess.run(['/bin/echo', 'alpha', '', 'beta gamma'], stdout=subprocess.DEVNULL)\n"
                "try: subprocess.run(['/nonexistent/bpfkit-varlen', '-x'])\n"
                "except FileNotFoundError: pass\n"
                "subprocess.run(['/bin/true', 'one', 'two', 'three', 'four', 'five'])")
    comm = Path(f"/proc/{kid.pid}/comm").read_text().strip()
    tool = Tool("execsnoop_varlen", "--ppid", str(kid.pid), "-x", "--max-args", "4", "--count", "3", folder="execsnoop")
    tool.wait_for("^PCOMM +PID +PPID +RET ARGS$")
    kid.go()
    tool.finish()
    pids = [m.group(1) for line in tool.seen[1:] if (m := re.match(r"^\S+ +(\d+) ", line))]
    assert tool.seen[1:] == [
        f"{'echo':<16} {pids[0]:<6} {kid.pid:<6}   0 /bin/echo alpha  beta gamma",  # the empty argument: two spaces
        f"{comm:<16} {pids[1]:<6} {kid.pid:<6}  -2 /nonexistent/bpfkit-varlen -x",  # ENOENT; the comm not replaced
        f"{'true':<16} {pids[2]:<6} {kid.pid:<6}   0 /bin/true one two three ...",
    ], tool.seen


def test_execsnoop_varlen_ctrl_c() -> None:
    tool = Tool("execsnoop_varlen", "-T", "-U", folder="execsnoop")
    tool.wait_for("^TIME     UID    PCOMM")
    tool.finish(interrupt=True)


# --------------------------------------------------------------------------- opensnoop
OPENS = 23  # an unusual count


def test_opensnoop_opens_failures_and_filters(child, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """A child opens a known file OPENS times and a missing one once: opensnoop -p prints each,
    -x -n only the failure, with the errno's name (-E) or number; -n of another name nothing."""
    known = tmp_path / "opensnoop-known"
    known.write_text("x")
    missing = tmp_path / "opensnoop-missing"
    kid = child(f"for _ in range({OPENS}): os.close(os.open({str(known)!r}, os.O_RDONLY))\n"
                f"try: os.open({str(missing)!r}, os.O_RDONLY)\n"
                "except FileNotFoundError: pass")
    comm = Path(f"/proc/{kid.pid}/comm").read_text().strip()
    every = Tool("opensnoop", "-p", str(kid.pid), "-E")
    failed = Tool("opensnoop", "-p", str(kid.pid), "-x", "-n", comm[:4])
    other = Tool("opensnoop", "-p", str(kid.pid), "-n", "no-such-comm")
    for tool in (every, failed, other):
        tool.wait_for("^PID    COMM              FD ERR PATH$")
    kid.go()
    every.wait_for("opensnoop-missing$")
    failed.wait_for("opensnoop-missing$")
    for tool in (every, failed, other):
        tool.finish(interrupt=True)
    # From the first line naming the test's files: a slow start of the child (a loaded VM) may
    # let the tools see its interpreter's own opens first, all before it reads "go".
    lines, fails = from_first(every.seen, str(tmp_path)), from_first(failed.seen, str(tmp_path))
    fd = re.match(rf"^{kid.pid} +\S+ +(\d+) ", lines[0]).group(1)  # type: ignore[union-attr]
    assert lines == [f"{kid.pid:<6} {comm:<16} {fd:>3}   0 {known}"] * OPENS + [
        f"{kid.pid:<6} {comm:<16}  -1 ENOENT {missing}"], every.seen
    assert fails == [f"{kid.pid:<6} {comm:<16}  -1   2 {missing}"], failed.seen
    assert other.seen[1:] == [], other.seen


def from_first(lines: list[str], needle: str) -> list[str]:
    """``lines`` from the first that contains ``needle`` on (none if none does)."""
    return next((lines[i:] for i, line in enumerate(lines) if needle in line), [])


# ------------------------------------------------------------------ log2 histograms
def histogram_total(lines: list[str]) -> int:
    """The sum of the counts of every bucket line ("  4 -> 7   : 12   |***  |") in ``lines``."""
    return sum(int(m.group(1)) for line in lines if (m := re.match(r"^\s*\d+ -> \d+\s+: (\d+)\s+\|", line)))


def test_runqlat_counts_a_child_s_wakeups(child) -> None:  # type: ignore[no-untyped-def]
    sleeps = 40
    kid = child(f"import time\nfor _ in range({sleeps}): time.sleep(0.002)")
    tool = Tool("runqlat", "--pid", str(kid.pid), "2", "1")
    tool.wait_for("^Tracing")
    kid.go()
    tool.finish()
    assert any(re.match(r"^\s+usecs\s+: count\s+distribution$", line) for line in tool.seen), tool.seen
    # Each 2 ms sleep blocks, so it ends in a wakeup and a switch-in. The read of "go" adds one
    # only if the child was already asleep on the pipe (a CI run once saw exactly 40), and a
    # preemption of the child (it stays runnable) adds one more wait, which a busy host may cause.
    total = histogram_total(tool.seen)
    assert sleeps <= total <= 2 * sleeps, tool.seen


def test_runqlat_ctrl_c_draws_the_histogram() -> None:
    tool = Tool("runqlat")
    tool.wait_for("^Tracing")
    time.sleep(0.5)
    tool.finish(interrupt=True)
    assert histogram_total(tool.seen) > 0, tool.seen  # the whole system's switches in 0.5 s


def test_funclatency_counts_libc_calls_exactly(child) -> None:  # type: ignore[no-untyped-def]
    kid = child(f"for _ in range({N}): os.getppid()")  # libc's getppid(), N times
    tool = Tool("funclatency", "--func", "getppid", "--pid", str(kid.pid), "-i", "1.5", "-c", "1")
    tool.wait_for("^Tracing libc:getppid")
    kid.go()
    tool.finish()
    assert any(re.match(r"^\s+nsecs\s+: count\s+distribution$", line) for line in tool.seen), tool.seen
    assert histogram_total(tool.seen) == N, tool.seen


def test_funclatency_unknown_function() -> None:
    tool = Tool("funclatency", "--func", "no_such_function_bpfkit")
    proc = tool.proc
    proc.wait(timeout=TIMEOUT)
    err = proc.stderr.read() if proc.stderr else ""
    assert proc.returncode == 1 and "Traceback" not in err, err
    assert err.startswith("funclatency: attach uprobe ") and "symbol 'no_such_function_bpfkit' not found in" in err, err
