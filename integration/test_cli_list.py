# SPDX-License-Identifier: Apache-2.0
"""`bpfkit list` against the running kernel: tracepoints agree with tracefs's events/, raw
tracepoints and fentry targets with vmlinux BTF, kprobes with available_filter_functions (or a
note says why there are none), and every listed probe parses as the spec `bpfkit attach` takes.
bpftrace is not needed: the known probes are checked against the kernel's own files."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from bpfkit._kernel import tracefs
from bpfkit.errors import ParseError
from bpfkit.probelist import list_probes
from bpfkit.probespec import parse_probe

REPO = Path(__file__).resolve().parent.parent
HAS_BTF = os.path.exists("/sys/kernel/btf/vmlinux")
ENV = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))


def bpfkit_list(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "bpfkit.cli", "list", *args], capture_output=True, text=True,
                          env=ENV, timeout=120)


def test_tracepoints_match_tracefs_and_are_fast() -> None:
    events = os.path.join(tracefs.tracefs_root(), "events", "syscalls")
    if not os.path.isdir(events):
        pytest.skip("no syscalls tracepoints (CONFIG_FTRACE_SYSCALLS)")
    want = sorted(f"tracepoint:syscalls:{n}" for n in os.listdir(events)
                  if "open" in n and os.path.isdir(os.path.join(events, n)))
    proc = bpfkit_list("tracepoint:syscalls:*open*")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == want
    assert "tracepoint:syscalls:sys_enter_openat" in want and "tracepoint:syscalls:sys_exit_openat" in want
    assert bpfkit_list("t:syscalls:*open*").stdout == proc.stdout  # bpftrace's alias
    start = time.perf_counter()
    every = list_probes("tracepoint:*").probes
    assert time.perf_counter() - start < 0.5, "listing every tracepoint should be well under a second"
    groups = {g for g in os.listdir(os.path.join(tracefs.tracefs_root(), "events"))
              if os.path.isdir(os.path.join(tracefs.tracefs_root(), "events", g))}
    # events/ftrace holds ftrace's own record formats (function, ...), not tracepoints a BPF
    # program can attach to; available_events leaves them out.
    assert {p.target for p in every} == groups - {"ftrace"}


def test_btf_kinds() -> None:
    if not HAS_BTF:
        pytest.skip("no vmlinux BTF (CONFIG_DEBUG_INFO_BTF)")
    found = {str(p) for p in list_probes("*:vfs_read").probes}
    assert {"fentry:vfs_read", "fexit:vfs_read"} <= found
    assert "rawtracepoint:sched_switch" in {str(p) for p in list_probes("rawtracepoint:sched_sw*").probes}
    assert "rawtracepoint:sys_enter" in {str(p) for p in list_probes("rt:sys_enter").probes}


def test_pattern_without_a_kind_searches_every_kernel_kind() -> None:
    proc = bpfkit_list("*openat*")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    kinds = {line.split(":")[0] for line in lines}
    assert "tracepoint:syscalls:sys_enter_openat" in lines
    if HAS_BTF:
        assert {"fentry", "fexit"} <= kinds and "fentry:do_sys_openat2" in lines
    assert all("openat" in line for line in lines)


def test_kprobes_listed_or_said_why_not() -> None:
    proc = bpfkit_list("kprobe:vfs_*")
    assert proc.returncode == 0, proc.stderr
    try:
        tracefs.available_filter_functions()
        readable = True
    except OSError:
        readable = False
    if readable:
        assert "kprobe:vfs_read" in proc.stdout.splitlines()
    else:
        assert proc.stdout == ""
        assert "cannot read tracefs available_filter_functions" in proc.stderr
    if not tracefs.has_probe_events("kprobe"):
        # This host: no kprobe_events; the note says so on stderr, the listing goes on.
        assert proc.stderr.startswith("bpfkit: note: kprobes are not available on this kernel "
                                      "(tracefs has no kprobe_events)")


def test_json_and_every_probe_parses() -> None:
    proc = bpfkit_list("--json", "*sched_switch*")
    assert proc.returncode == 0, proc.stderr
    items = json.loads(proc.stdout)
    assert {"probe": "tracepoint:sched:sched_switch", "kind": "tracepoint", "target": "sched",
            "name": "sched_switch"} in items
    unparsed = []
    for probe in list_probes("").probes:  # every one: ~0.4 s for 116,000 here
        try:
            assert parse_probe(str(probe)).kind == probe.kind, probe
        except ParseError as exc:
            unparsed.append(str(exc).splitlines()[0] + " " + str(exc).splitlines()[-1].strip())
    assert not unparsed, f"{len(unparsed)} listed probes do not parse: {unparsed[:10]}"
