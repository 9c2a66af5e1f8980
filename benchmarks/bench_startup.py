#!/usr/bin/env python3
"""How fast does the `bpfkit` command start? One command (root):

    python3 benchmarks/bench_startup.py [-r RUNS] [--bpfkit PATH]

* ``bpfkit --help``: interpreter start-up plus building the parser (sub-command modules are
  imported, the library is not);
* time to first event: from spawning ``bpfkit attach bpf/.output/cli_first_event.bpf.o
  --events events`` (one tracepoint program on sys_enter_openat, one ring buffer) to reading
  its first printed record, while this process opens a file every millisecond. It covers
  interpreter start, imports, ELF parsing, map and program load, attach and the first poll.
  Aim: under 0.3 s on the development machine.
* ``python -c pass``: the interpreter alone, for scale.

Prints the median and min of each, and the CPU time the attach process had used when its
first event arrived (wall times on a loaded machine mostly measure the wait for a CPU). Needs `make -C bpf` (scripts/setup.sh does it).
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
OBJ = REPO / "bpf/.output/cli_first_event.bpf.o"


def bpfkit_command(explicit: str | None) -> list[str]:
    if explicit:
        return [explicit]
    venv = REPO / ".venv/bin/bpfkit"
    if venv.exists():
        return [str(venv)]
    found = shutil.which("bpfkit")
    return [found] if found else [sys.executable, "-m", "bpfkit.cli"]


def timed(cmd: list[str]) -> float:
    t0 = time.perf_counter()
    subprocess.run(cmd, stdout=subprocess.DEVNULL, check=True)
    return time.perf_counter() - t0


def cpu_seconds(pid: int) -> float:
    """user + system CPU time of a running process (/proc/PID/stat utime, stime)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


CPU: list[float] = []  # the CPU time each first_event() run took, as a second opinion on a loaded machine


def first_event(cmd: list[str]) -> float:
    stop = threading.Event()

    def opener() -> None:
        while not stop.is_set():
            try:
                os.close(os.open("/etc/hostname", os.O_RDONLY))
            except OSError:
                pass
            time.sleep(0.001)

    thread = threading.Thread(target=opener, daemon=True)
    thread.start()
    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    t0 = time.perf_counter()
    proc = subprocess.Popen([*cmd, "attach", str(OBJ), "--events", "events"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env)
    try:
        assert proc.stdout
        for line in proc.stdout:
            if line.startswith("events:"):
                elapsed = time.perf_counter() - t0
                CPU.append(cpu_seconds(proc.pid))
                return elapsed
        raise RuntimeError(f"bpfkit attach printed no event: {proc.stderr.read() if proc.stderr else ''}")
    finally:
        stop.set()
        proc.send_signal(signal.SIGINT)
        proc.communicate(timeout=60)
        thread.join()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-r", "--runs", type=int, default=7)
    parser.add_argument("--bpfkit", help="the bpfkit executable (default: .venv/bin/bpfkit, else PATH, else python -m)")
    args = parser.parse_args()
    if not OBJ.exists():
        subprocess.run(["make", "-s", "-C", str(REPO / "bpf")], check=True)
    cmd = bpfkit_command(args.bpfkit)
    rows = [
        ("python -c pass", lambda: timed([sys.executable, "-c", "pass"])),
        ("bpfkit --help", lambda: timed([*cmd, "--help"])),
        ("time to first event", lambda: first_event(cmd)),
    ]
    print(f"{'what':<22} {'median':>9} {'min':>9}   ({args.runs} runs, {' '.join(cmd)}, load {os.getloadavg()[0]:.1f})")
    for name, fn in rows:
        samples = [fn() for _ in range(args.runs)]
        print(f"{name:<22} {statistics.median(samples) * 1000:>7.0f}ms {min(samples) * 1000:>7.0f}ms")
    print(f"{'  its CPU time':<22} {statistics.median(CPU) * 1000:>7.0f}ms {min(CPU) * 1000:>7.0f}ms"
          "   (user+sys of bpfkit attach until then: what a loaded machine cannot inflate)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
