#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""How fast does the `bpfkit` command start? One command (root):

    python3 benchmarks/bench_startup.py [-r RUNS] [--only TEXT] [--settle SECONDS] [--no-bcc] [--bpfkit PATH]

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
  Target: 0.1 s. The reference, in the same run where python3-bpfcc is installed: bcc doing
  the same job (benchmarks/bcc/first_event_bcc.py: compile the same program's C, load, attach
  the tracepoint, poll the ring buffer, print each record) on the same interpreter, bcc's
  package directory on its path and its kernel headers found as bench_events.py finds them;
  left out, saying why, where bcc cannot run (--no-bcc leaves it out on purpose).

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


CPU: dict[str, list[float]] = {}  # row -> the CPU time each first-event run took, a second opinion on a loaded machine


def first_event(row: str, argv: list[str], env_extra: dict[str, str] | None = None) -> float:
    """Seconds from spawning ``argv`` (a tool that prints ``events: ...`` per openat(2)) to its
    first such line, while this process opens a file every millisecond."""
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
    env.update(env_extra or {})
    t0 = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        assert proc.stdout
        for line in proc.stdout:
            if line.startswith("events:"):
                elapsed = time.perf_counter() - t0
                CPU.setdefault(row, []).append(cpu_seconds(proc.pid))
                return elapsed
        raise RuntimeError(f"{row}: printed no event: {proc.stderr.read() if proc.stderr else ''}")
    finally:
        stop.set()
        proc.send_signal(signal.SIGINT)
        proc.communicate(timeout=60)
        thread.join()


def bcc_first_event_row(python: str) -> tuple[str, Callable[[], float]] | None:
    """The same job in bcc (benchmarks/bcc/first_event_bcc.py) on bpfkit's interpreter, bcc's
    package directory on its path (as bench_events.py runs bcc's consumers), or None, saying
    why, where bcc cannot run (python3-bpfcc missing, no kernel headers for it to compile)."""
    import tempfile

    from bench_events import bcc_setup, default_harness

    build = Path(tempfile.mkdtemp(prefix="bench-startup-bcc-"))
    extra, pythonpath, why = bcc_setup(python, "/usr/bin/python3", build, Path(default_harness()))
    if extra is None:
        print(f"bcc time to first event left out: {why}", file=sys.stderr)
        return None
    env = {**extra, "PYTHONPATH": pythonpath.split("=", 1)[1]}
    argv = [python, str(REPO / "benchmarks/bcc/first_event_bcc.py")]
    return "bcc time to first event", lambda: first_event("bcc time to first event", argv, env)


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
    parser.add_argument("--no-bcc", action="store_true", help="leave out bcc's time to first event (the reference)")
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
        ("time to first event", lambda: first_event("time to first event", [*cmd, "attach", str(OBJ), "--events", "events"])),
    ]
    if not args.no_bcc and (not args.only or any("first event" in t or "bcc" in t for t in args.only)):
        bcc_row = bcc_first_event_row(python[0])
        if bcc_row is not None:
            rows.append(bcc_row)
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
    for row, cpu in CPU.items():
        label = "  bcc's CPU time" if row.startswith("bcc") else "  its CPU time"
        print(f"{label:<26} {statistics.median(cpu) * 1000:>6.1f}ms {min(cpu) * 1000:>6.1f}ms"
              "            (user+sys until its first event: what a loaded machine cannot inflate)")
    bcc = med.get("bcc time to first event")
    if bcc is not None:
        print(f"bcc / bpfkit, time to first event: {bcc / med['time to first event']:.1f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
