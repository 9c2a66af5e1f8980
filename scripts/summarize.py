#!/usr/bin/env python3
"""Add up junit XML results of several test runs and print one line per run and a total.

    scripts/summarize.py host=results/host.xml vm-6.1=results/6.1/junit.xml

The last line is ``total: N passed, N failed, N skipped`` (errors count as failed); a run whose
file is missing counts as one failure, so a VM that never booted cannot pass silently.
"""

from __future__ import annotations

import sys
import xml.etree.ElementTree as ET


def count(path: str) -> tuple[int, int, int]:
    root = ET.parse(path).getroot()
    suites = [root] if root.tag == "testsuite" else list(root.iter("testsuite"))
    tests = failed = skipped = 0
    for suite in suites:
        tests += int(suite.get("tests", 0))
        failed += int(suite.get("failures", 0)) + int(suite.get("errors", 0))
        skipped += int(suite.get("skipped", 0))
    return tests - failed - skipped, failed, skipped


def main(args: list[str]) -> int:
    totals = [0, 0, 0]
    for arg in args:
        name, _, path = arg.partition("=")
        try:
            passed, failed, skipped = count(path)
        except (OSError, ET.ParseError) as exc:
            print(f"{name}: no results ({exc})")
            passed, failed, skipped = 0, 1, 0
        else:
            print(f"{name}: {passed} passed, {failed} failed, {skipped} skipped")
        for i, n in enumerate((passed, failed, skipped)):
            totals[i] += n
    print(f"total: {totals[0]} passed, {totals[1]} failed, {totals[2]} skipped")
    return 1 if totals[1] else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
