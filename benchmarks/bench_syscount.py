#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The syscall counter in bpfkit (examples/syscount) next to the same tool in bcc
(benchmarks/bcc/syscount_bcc.py: same options, same output): lines of code, start-up time
(spawn to the first line printed, which each prints once its probe is attached; and the CPU
time of the whole run, one report 0.2 s later) and peak memory (the process's maximum RSS, from wait4's rusage). As root:

    python3 benchmarks/bench_syscount.py [-r RUNS]

bcc is Debian's python3-bpfcc, installed here (apt-get) when /usr/bin/python3 cannot import it;
setup.sh does not install it. bcc compiles the tool's C when it starts, against the running
kernel's headers (/lib/modules/$(uname -r)/build, or /sys/kernel/kheaders.tar.xz from
CONFIG_IKHEADERS). When it finds none, this prints bcc's error and retries with Debian's
linux-headers-amd64 (installed here if missing: other-version headers, which a
tracepoint-only tool tolerates, since bcc takes the tracepoint's layout from tracefs) merged
into one tree in a temporary directory, passed as BCC_KERNEL_SOURCE; the figures say so.
"""

from __future__ import annotations

import argparse
import glob
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
BPFKIT_TOOL = REPO / "examples/syscount/syscount.py"
BCC_TOOL = REPO / "benchmarks/bcc/syscount_bcc.py"
SYSTEM_PYTHON = "/usr/bin/python3"  # python3-bpfcc installs bcc for Debian's interpreter


def code_lines(path: Path) -> tuple[int, int]:
    """(all lines, lines with code: not blank, not only a comment, not in a docstring)."""
    lines = path.read_text().splitlines()
    code, in_doc, in_text = 0, False, False
    for line in lines:
        s = line.strip()
        quotes = s.count('"""') % 2 == 1
        if in_doc:
            in_doc = not quotes  # until the closing quotes
            continue
        if not in_text and s.startswith('"""'):
            in_doc = quotes  # a docstring; one line, or the first of several
            continue
        in_text ^= quotes  # a string in code (bcc's C text): its lines count as code
        if s and not s.startswith(("#", "//", "/*", "*")):
            code += 1
    return len(lines), code


def ensure_bcc() -> None:
    if subprocess.run([SYSTEM_PYTHON, "-c", "import bcc"], check=False, capture_output=True).returncode == 0:
        return
    print("installing python3-bpfcc (apt-get) ...", file=sys.stderr)
    subprocess.run(["apt-get", "install", "-y", "-qq", "--no-install-recommends", "python3-bpfcc"], check=True,
                   env=dict(os.environ, DEBIAN_FRONTEND="noninteractive"), stdout=subprocess.DEVNULL)


def bcc_error(env: dict[str, str]) -> str:
    """What bcc says when it compiles a trivial program here; '' when it can."""
    proc = subprocess.run([SYSTEM_PYTHON, "-c", "from bcc import BPF; BPF(text='int f(void *c) { return 0; }')"],
                          check=False, capture_output=True, text=True, env=env)
    if proc.returncode == 0:
        return ""
    lines = [line for line in proc.stderr.splitlines() if line.strip() and not line.startswith(("  ", "Traceback"))]
    return " / ".join(lines)


def merged_headers(tmp: str) -> str:
    """Debian's linux-headers (a -common tree and an arch tree) as one tree under ``tmp``."""
    if not glob.glob("/usr/src/linux-headers-*-common"):
        print("installing linux-headers-amd64 (apt-get) ...", file=sys.stderr)
        subprocess.run(["apt-get", "install", "-y", "-qq", "--no-install-recommends", "linux-headers-amd64"], check=True,
                       env=dict(os.environ, DEBIAN_FRONTEND="noninteractive"), stdout=subprocess.DEVNULL)
    common = sorted(glob.glob("/usr/src/linux-headers-*-common"))[-1]
    arch = common.replace("-common", "-amd64")
    tree = os.path.join(tmp, "ksrc")
    os.mkdir(tree)
    subprocess.run(["cp", "-rs", f"{common}/.", tree], check=True)
    subprocess.run(["cp", "-rsf", f"{arch}/.", tree], check=True)
    return tree


def run_once(cmd: list[str], env: dict[str, str]) -> tuple[float, int, float]:
    """(seconds from spawn to the first stdout line, peak RSS in KiB, CPU seconds of the whole
    run: user + system, which a loaded machine's waits for a CPU do not inflate)."""
    start = time.monotonic()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    assert proc.stdout is not None and proc.stderr is not None
    first = proc.stdout.readline()
    ready = time.monotonic() - start
    proc.stdout.read()
    err = proc.stderr.read()
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0 or not first:
        raise SystemExit(f"{' '.join(cmd)}: exit {proc.returncode}: {err.strip()}")
    return ready, usage.ru_maxrss, usage.ru_utime + usage.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-r", "--runs", type=int, default=5)
    args = parser.parse_args()
    if os.geteuid() != 0:
        raise SystemExit("bench_syscount: run as root (both tools load BPF programs)")

    print("lines of code (all / code: no blanks, comments or docstrings)")
    files = [("bpfkit", BPFKIT_TOOL), ("bpfkit", REPO / "examples/syscount/syscount.bpf.c"),
             ("bcc", BCC_TOOL)]
    totals: dict[str, list[int]] = {}
    for tool, path in files:
        total, code = code_lines(path)
        t = totals.setdefault(tool, [0, 0])
        t[0] += total
        t[1] += code
        print(f"  {tool:<7} {path.relative_to(REPO)!s:<40} {total:>4} / {code:>4}")
    for tool, (total, code) in totals.items():
        print(f"  {tool:<7} {'total':<40} {total:>4} / {code:>4}")
    skel_total, skel_code = code_lines(REPO / "examples/syscount/syscount_skel.py")
    print(f"  (bpfkit's generated examples/syscount/syscount_skel.py: {skel_total} / {skel_code}, not written by hand)")

    ensure_bcc()
    env = dict(os.environ)
    note = ""
    with tempfile.TemporaryDirectory() as tmp:
        error = bcc_error(env)
        if error:
            print(f"\nbcc cannot compile here as installed: {error}")
            env["BCC_KERNEL_SOURCE"] = merged_headers(tmp)
            error = bcc_error(env)
            if error:
                raise SystemExit(f"bcc fails with BCC_KERNEL_SOURCE={env['BCC_KERNEL_SOURCE']} too: {error}")
            note = " (BCC_KERNEL_SOURCE: Debian's linux-headers-amd64, another kernel's)"
        tools = {
            "bpfkit": [sys.executable, str(BPFKIT_TOOL), "--interval", "0.2", "--count", "1"],
            "bcc": [SYSTEM_PYTHON, str(BCC_TOOL), "--interval", "0.2", "--count", "1"],
        }
        results: dict[str, list[tuple[float, int, float]]] = {name: [] for name in tools}
        for _ in range(args.runs):
            for name, cmd in tools.items():  # alternated, so both see the same machine
                results[name].append(run_once(cmd, env))
    print(f"\nstart-up (spawn to first output) and peak RSS, {args.runs} runs each, "
          f"{os.uname().release}, {os.cpu_count()} CPUs{note}")
    print(f"  load average {os.getloadavg()[0]:.1f} (wall times on a busy machine mostly wait for a CPU)")
    for name, rows in results.items():
        times = [r[0] for r in rows]
        rss = [r[1] for r in rows]
        cpu = [r[2] for r in rows]
        print(f"  {name:<7} start-up median {statistics.median(times):.3f} s (min {min(times):.3f})   "
              f"CPU median {statistics.median(cpu):.3f} s   "
              f"peak RSS median {statistics.median(rss) / 1024:.1f} MiB (max {max(rss) / 1024:.1f})")
    b, c = (statistics.median([r[0] for r in results[n]]) for n in ("bpfkit", "bcc"))
    rb, rc = (statistics.median([r[1] for r in results[n]]) for n in ("bpfkit", "bcc"))
    cb, cc = (statistics.median([r[2] for r in results[n]]) for n in ("bpfkit", "bcc"))
    print(f"  bcc/bpfkit: start-up {c / b:.1f}x, CPU {cc / cb:.1f}x, peak RSS {rc / rb:.1f}x")


if __name__ == "__main__":
    main()
