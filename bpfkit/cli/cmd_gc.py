# SPDX-License-Identifier: Apache-2.0
"""``bpfkit gc``: remove the tracefs probes of bpfkit processes that no longer run.

Probes that bpfkit makes through kprobe_events/uprobe_events are named
``bpfkit_<pid>_<start>_<tag>/<event>`` (pid in the initial PID namespace, start time from
/proc/PID/stat); a process killed with SIGKILL cannot remove its own. This command finds those
whose owner is gone (no such pid, or the pid reused by a process started at another time) and
removes them; one still used by a perf event (a pinned link) is kept and reported as busy. In a
PID namespace with its own /proc no owner can be judged, and nothing is removed.
"""

from __future__ import annotations

import argparse

DESCRIPTION = (
    "Find the k/uprobes in tracefs kprobe_events and uprobe_events whose bpfkit_<pid>_<start>_... "
    "group names a process that no longer runs (its pid gone, or reused by a process started at "
    "another time), and remove them. Probes still in use (behind a pinned link) are kept and reported."
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--dry-run", "-n", action="store_true", help="only list what would be removed")
    parser.add_argument("--all", action="store_true", help="also list the probes of bpfkit processes still running")


def run(args: argparse.Namespace) -> int:
    from .. import link
    from .._kernel import owner as _owner

    unknown = 0
    for probe in link.bpfkit_probes():
        if not probe.known or not probe.pid:
            unknown += 1
            if args.all:
                print(f"unknown  {probe.event.kind} {probe.name} ({probe.owner}): {probe.event.target}")
        elif probe.alive and args.all:
            print(f"live     {probe.event.kind} {probe.name} ({probe.owner}): {probe.event.target}")
    if unknown and not _owner.proc_numbers_globally():
        print(f"{unknown} bpfkit probe(s) not judged: this process's /proc belongs to a PID namespace "
              "of its own, so owners (named by their pid in the initial namespace) cannot be looked up; "
              "run bpfkit gc outside the container")
    results = link.remove_stale_probes(dry_run=args.dry_run)
    removed = kept = 0
    for r in results:
        p = r.probe
        where = f"{p.event.kind} {p.name} ({p.owner} gone): {p.event.target}"
        if r.removed:
            removed += 1
            print(f"removed  {where}")
        else:
            kept += 1
            print(f"{'stale' if args.dry_run else 'kept':<8} {where}" + ("" if args.dry_run else f": {r.reason}"))
    if not results:
        print("no stale bpfkit probes")
    elif args.dry_run:
        print(f"{kept} stale probe(s) would be removed")
    else:
        print(f"removed {removed} stale probe(s)" + (f", kept {kept}" if kept else ""))
    return 0
