#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""How fast does the `bpfkit` command start? One command (root):

    python3 benchmarks/bench_startup.py [-r RUNS] [--only TEXT] [--settle SECONDS] [--bpfkit PATH]

Rows (whole processes, wall time; every round runs each row once, alternating the order):

* ``python -c pass``: the interpreter alone (the same interpreter bpfkit runs on): the floor.
* ``bpfkit --help``, ``bpfkit features``: target within 10 ms of the floor.
* ``bpfkit load`` of a 1-program object (bpf/.output/minimal.bpf.o) and of a CO-RE object
  (bpf/.output/loader_core.bpf.o: task->real_parent->tgid, execsnoop's ppid), pinning programs
  and maps in a fresh bpffs directory, next to ``bpftool prog loadall OBJ DIR pinmaps DIR`` of
  the same object. Target: bpfkit's time above the floor <= 2x bpftool's + 10 ms.
* time to first event: from spawning ``bpfkit attach bpf/.output/cli_first_event.bpf.o
  --events events`` (one tracepoint program on sys_enter_openat, one ring buffer) to reading
  its first printed record, while this process opens a file every millisecond. It covers
  interpreter start, imports, ELF parsing, map and program load, attach and the first poll.
  Target: 0.1 s.

Prints the median and min of each, the load average, the user and system CPU time of
``bpfkit features`` (system: the probes' kernel work), and the CPU time the attach process had
used when its first event arrived (wall times on a loaded machine mostly measure the wait for
a CPU). Needs `make -C bpf` (scripts/setup.sh does it); compiles bpfkit's bytecode first when
a module's .pyc is missing or stale (with PYTHONDONTWRITEBYTECODE set, each run would compile it).
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
import uuid
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
OBJ = REPO / "bpf/.output/cli_first_event.bpf.o"
LOAD_OBJ = REPO / "bpf/.output/minimal.bpf.o"
CORE_OBJ = REPO / "bpf/.output/loader_core.bpf.o"


def bpfkit_command(explicit: str | None) -> list[str]:
    if explicit:
        return [explicit]
    venv = REPO / ".venv/bin/bpfkit"
    if venv.exists():
        return [str(venv)]
    found = shutil.which("bpfkit")
    return [found] if found else [sys.executable, "-m", "bpfkit"]


def timed(cmd: list[str]) -> float:
    t0 = time.perf_counter()
    subprocess.run(cmd, stdout=subprocess.DEVNULL, check=True)
    return time.perf_counter() - t0


RUSAGE: dict[str, list[tuple[float, float]]] = {}  # row -> (user, sys) seconds of each run (for some rows)


def timed_rusage(name: str, cmd: list[str]) -> float:
    """:func:`timed`, keeping the child's user and system CPU time under ``name`` (what a loaded
    machine cannot inflate; sys is the kernel's share: for ``bpfkit features``, the probes'
    system calls and reading vmlinux BTF, beyond what the interpreter's start takes)."""
    import resource

    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    elapsed = timed(cmd)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    RUSAGE.setdefault(name, []).append((after.ru_utime - before.ru_utime, after.ru_stime - before.ru_stime))
    return elapsed


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


def load_rows(cmd: list[str]) -> list[tuple[str, Callable[[], float]]]:
    """bpfkit load and bpftool prog loadall of the same objects, each into a fresh bpffs dir."""
    bpftool = shutil.which("bpftool") or "/usr/sbin/bpftool"
    rows: list[tuple[str, Callable[[], float]]] = []
    for label, obj in (("1 program", LOAD_OBJ), ("CO-RE", CORE_OBJ)):
        def ours(obj: Path = obj) -> float:
            return pinned([*cmd, "load", str(obj)], [])

        def theirs(obj: Path = obj) -> float:
            return pinned([bpftool, "prog", "loadall", str(obj)], ["pinmaps"], maps_dir=True)

        rows.append((f"bpfkit load {label}", ours))
        if os.path.exists(bpftool):
            rows.append((f"bpftool loadall {label}", theirs))
    return rows


def pinned(cmd: list[str], tail: list[str], maps_dir: bool = False) -> float:
    target = f"/sys/fs/bpf/bpfkit-startup-{uuid.uuid4().hex[:8]}"
    try:
        return timed([*cmd, target, *tail, *([target + "-maps"] if maps_dir else [])])
    finally:
        shutil.rmtree(target, ignore_errors=True)
        shutil.rmtree(target + "-maps", ignore_errors=True)


def stale_bytecode() -> list[str]:
    """bpfkit modules whose .pyc is missing or older than the source: with PYTHONDONTWRITEBYTECODE
    set (as on the development machine), every run would compile them again and time that."""
    import importlib.util

    stale = []
    for source in sorted((REPO / "bpfkit").rglob("*.py")):
        cached = Path(importlib.util.cache_from_source(str(source)))
        if not cached.exists() or cached.stat().st_mtime < source.stat().st_mtime:
            stale.append(str(source.relative_to(REPO)))
    return stale


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-r", "--runs", type=int, default=7)
    parser.add_argument("--settle", type=float, default=0.05, metavar="SECONDS",
                        help="pause before each sample, for the last one's deferred kernel work (default 0.05)")
    parser.add_argument("--only", metavar="TEXT", action="append", default=[],
                        help="only the rows whose name contains TEXT (repeatable; the floor and bpftool's rows always run)")
    parser.add_argument("--bpfkit", help="the bpfkit executable (default: .venv/bin/bpfkit, else PATH, else python -m)")
    args = parser.parse_args()
    if not all(o.exists() for o in (OBJ, LOAD_OBJ, CORE_OBJ)):
        subprocess.run(["make", "-s", "-C", str(REPO / "bpf")], check=True)
    stale = stale_bytecode()
    if stale:
        print(f"compiling {len(stale)} stale bpfkit modules first ({stale[0]}, ...): python -m compileall", file=sys.stderr)
        subprocess.run([sys.executable, "-m", "compileall", "-q", str(REPO / "bpfkit")], check=True,
                       stdout=subprocess.DEVNULL)
    cmd = bpfkit_command(args.bpfkit)
    python = [str(Path(cmd[0]).with_name("python"))] if cmd[0].endswith("bpfkit") else [sys.executable]
    rows: list[tuple[str, Callable[[], float]]] = [
        ("python -c pass", lambda: timed_rusage("python -c pass", [*python, "-c", "pass"])),
        ("bpfkit --help", lambda: timed([*cmd, "--help"])),
        ("bpfkit features", lambda: timed_rusage("bpfkit features", [*cmd, "features"])),
        *load_rows(cmd),
        ("time to first event", lambda: first_event(cmd)),
    ]
    if args.only:
        rows = [(name, fn) for name, fn in rows
                if name == "python -c pass" or name.startswith("bpftool") or any(t in name for t in args.only)]
    samples: dict[str, list[float]] = {name: [] for name, _ in rows}
    for r in range(args.runs):
        for name, fn in rows if r % 2 == 0 else rows[::-1]:
            # The kernel frees a process's BPF objects after an RCU grace period, in kworkers:
            # a pause lets the last row's (116 probes' in bpfkit features) finish instead of
            # competing with the next row for the CPUs.
            time.sleep(args.settle)
            samples[name].append(fn())
    med = {name: statistics.median(v) for name, v in samples.items()}
    floor = med["python -c pass"]
    targets: dict[str, tuple[float, str]] = {
        "bpfkit --help": (floor + 0.010, "floor + 10 ms"),
        "bpfkit features": (floor + 0.010, "floor + 10 ms"),
        "time to first event": (0.100, "0.1 s"),
    }
    for label in ("1 program", "CO-RE"):
        tool = med.get(f"bpftool loadall {label}")
        if tool is not None:
            targets[f"bpfkit load {label}"] = (floor + 2 * tool + 0.010, "floor + 2x bpftool + 10 ms")
    load = os.getloadavg()
    print(f"{args.runs} runs, {' '.join(cmd)}, load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} ({os.cpu_count()} CPUs)")
    print(f"{'what':<26} {'median':>8} {'min':>8} {'-floor':>8}   target")
    for name, values in samples.items():
        goal = ""
        if name in targets:
            limit, how = targets[name]
            goal = f"<= {limit * 1000:.0f}ms ({how}): " + ("met" if med[name] <= limit else "NOT met")
        print(f"{name:<26} {med[name] * 1000:>6.1f}ms {min(values) * 1000:>6.1f}ms {(med[name] - floor) * 1000:>6.1f}ms   {goal}")
        if name == "bpfkit features":
            user, system = (statistics.median(r[i] for r in RUSAGE[name]) * 1000 for i in (0, 1))
            f_user, f_sys = (statistics.median(r[i] for r in RUSAGE["python -c pass"]) * 1000 for i in (0, 1))
            print(f"{'  its user / sys':<26} {user:>6.1f}ms {system:>6.1f}ms {system - f_sys:>6.1f}ms   "
                  f"(medians; python -c pass: {f_user:.1f} / {f_sys:.1f} ms; -floor: the kernel's share above "
                  "the interpreter's, i.e. the probes' system calls and reading vmlinux BTF)")
    if CPU:
        print(f"{'  its CPU time':<26} {statistics.median(CPU) * 1000:>6.1f}ms {min(CPU) * 1000:>6.1f}ms"
              "            (user+sys of bpfkit attach until its first event: what a loaded machine cannot inflate)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
