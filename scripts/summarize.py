#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Add up junit XML results of several test runs and print one line per run and a total.

    scripts/summarize.py host=results/host.xml vm-6.1=results/6.1/junit.xml
    scripts/summarize.py --same host,container host=h.xml container=c.xml

The last line is ``total: N passed, N failed, N skipped`` (errors count as failed); a run whose
file is missing counts as one failure, so a VM that never booted cannot pass silently. Under
each run: the kernel and its perf-event attach path (junit properties written by
integration/conftest.py), and how the kprobe tests and the SET_BPF (ioctl) tests came out,
so a matrix shows they ran rather than skipped. ``--same A,B`` (repeatable) fails unless runs
A and B have the same counts (the container image's run and the host's, for one).
"""

from __future__ import annotations

import sys
import xml.etree.ElementTree as ET
from typing import Callable

# The junit properties integration/conftest.py records (plugins such as hypothesis add others).
KERNEL_FACTS = ("kernel", "perf_event_attach")

# Test groups worth seeing per kernel: (label, does this test id belong to it).
GROUPS: list[tuple[str, Callable[[str], bool]]] = [
    ("kprobe tests", lambda test: "test_vm_kprobe" in test or "test_cli_vm" in test),
    ("SET_BPF (ioctl) tests", lambda test: "ioctl" in test.lower() or "set_bpf" in test.lower()),
]


def count(path: str) -> tuple[int, int, int]:
    root = ET.parse(path).getroot()
    suites = [root] if root.tag == "testsuite" else list(root.iter("testsuite"))
    tests = failed = skipped = 0
    for suite in suites:
        tests += int(suite.get("tests", 0))
        failed += int(suite.get("failures", 0)) + int(suite.get("errors", 0))
        skipped += int(suite.get("skipped", 0))
    return tests - failed - skipped, failed, skipped


def outcome(case: ET.Element) -> str:
    if case.find("failure") is not None or case.find("error") is not None:
        return "failed"
    return "skipped" if case.find("skipped") is not None else "passed"


def details(path: str) -> list[str]:
    """The run's kernel facts and its GROUPS' outcomes, a line each."""
    root = ET.parse(path).getroot()
    lines = [f"{p.get('name')}: {p.get('value')}" for p in root.iter("property") if p.get("name") in KERNEL_FACTS]
    for label, member in GROUPS:
        tally = {"passed": 0, "failed": 0, "skipped": 0}
        for case in root.iter("testcase"):
            if member(f"{case.get('classname')}::{case.get('name')}"):
                tally[outcome(case)] += 1
        lines.append(f"{label}: " + ", ".join(f"{n} {k}" for k, n in tally.items()))
    return lines


def main(args: list[str]) -> int:
    same: list[tuple[str, str]] = []
    while len(args) >= 2 and args[0] == "--same":
        first, _, second = args[1].partition(",")
        same.append((first, second))
        args = args[2:]
    totals = [0, 0, 0]
    counts: dict[str, tuple[int, int, int]] = {}
    for arg in args:
        name, _, path = arg.partition("=")
        try:
            passed, failed, skipped = counts[name] = count(path)
        except (OSError, ET.ParseError) as exc:
            print(f"{name}: no results ({exc})")
            passed, failed, skipped = 0, 1, 0
        else:
            print(f"{name}: {passed} passed, {failed} failed, {skipped} skipped")
            for line in details(path):
                print(f"    {line}")
        for i, n in enumerate((passed, failed, skipped)):
            totals[i] += n
    mismatched = 0
    for first, second in same:
        if first in counts and counts.get(first) == counts.get(second):
            print(f"{second}: the same counts as {first}")
        else:
            print(f"{second}: counts differ from {first}'s ({counts.get(second)} vs {counts.get(first)})")
            mismatched += 1
    print(f"total: {totals[0]} passed, {totals[1]} failed, {totals[2]} skipped")
    return 1 if totals[1] or mismatched else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
