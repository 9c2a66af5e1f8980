# SPDX-License-Identifier: Apache-2.0
"""scripts/summarize.py: the per-run and total lines the CI and the matrix end with."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "summarize.py"

JUNIT = """<?xml version="1.0"?>
<testsuites><testsuite name="pytest" tests="5" failures="1" errors="0" skipped="2">
<properties><property name="kernel" value="5.10.0-35-amd64"/>
<property name="perf_event_attach" value="PERF_EVENT_IOC_SET_BPF"/>
<property name="hypothesis-statistics-x" value="ZGF0YQ=="/></properties>
<testcase classname="integration.test_vm_kprobe" name="test_kprobe_exact_count[ioctl-pmu]"/>
<testcase classname="integration.test_vm_kprobe" name="test_kprobe_exact_count[link-pmu]"><skipped message="no perf_link"/></testcase>
<testcase classname="integration.test_link" name="test_tracepoint_exact_count[ioctl]"><failure message="x"/></testcase>
<testcase classname="integration.test_link" name="test_tracepoint_exact_count[link]"><skipped message="no perf_link"/></testcase>
<testcase classname="integration.test_maps" name="test_hash"/>
</testsuite></testsuites>
"""


def summarize(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=60)


def test_counts_facts_and_groups(tmp_path: Path) -> None:
    (tmp_path / "j.xml").write_text(JUNIT)
    out = summarize(f"vm-5.10={tmp_path / 'j.xml'}")
    assert out.returncode == 1  # one failure
    assert out.stdout.splitlines() == [
        "vm-5.10: 2 passed, 1 failed, 2 skipped",
        "    kernel: 5.10.0-35-amd64",
        "    perf_event_attach: PERF_EVENT_IOC_SET_BPF",
        "    kprobe tests: 1 passed, 0 failed, 1 skipped",
        "    SET_BPF (ioctl) tests: 1 passed, 1 failed, 0 skipped",
        "total: 2 passed, 1 failed, 2 skipped",
    ]


def test_a_missing_run_counts_as_a_failure(tmp_path: Path) -> None:
    out = summarize(f"vm-6.1={tmp_path / 'absent.xml'}")
    assert out.returncode == 1
    assert out.stdout.splitlines()[0].startswith("vm-6.1: no results (")
    assert out.stdout.splitlines()[-1] == "total: 0 passed, 1 failed, 0 skipped"


def test_same_counts_are_checked(tmp_path: Path) -> None:
    (tmp_path / "a.xml").write_text(JUNIT)
    (tmp_path / "b.xml").write_text(JUNIT)
    (tmp_path / "c.xml").write_text(JUNIT.replace('<testcase classname="integration.test_maps" name="test_hash"/>', "")
                                    .replace('tests="5"', 'tests="4"'))
    out = summarize("--same", "host,container", f"host={tmp_path / 'a.xml'}", f"container={tmp_path / 'b.xml'}")
    assert "container: the same counts as host" in out.stdout.splitlines()
    out = summarize("--same", "host,container", f"host={tmp_path / 'a.xml'}", f"container={tmp_path / 'c.xml'}")
    assert "container: counts differ from host's ((1, 1, 2) vs (2, 1, 2))" in out.stdout.splitlines()
    assert out.returncode == 1
