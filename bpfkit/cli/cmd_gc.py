"""``bpfkit gc``: remove the tracefs probes of bpfkit processes that no longer run.

Probes that bpfkit makes through kprobe_events/uprobe_events are named
``bpfkit_<pid>_<tag>/<event>``; a process killed with SIGKILL cannot remove its own. This
command finds those whose pid is gone and removes them; one still used by a perf event (a
pinned link) is kept and reported as busy.
"""

from __future__ import annotations

import argparse

HELP = "remove tracefs probes left by bpfkit processes that died"
DESCRIPTION = (
    "Find the k/uprobes in tracefs kprobe_events and uprobe_events whose bpfkit_<pid>_... group "
    "names a process that no longer runs, and remove them. Probes still in use (behind a pinned "
    "link) are kept and reported."
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--dry-run", "-n", action="store_true", help="only list what would be removed")
    parser.add_argument("--all", action="store_true", help="also list the probes of bpfkit processes still running")


def run(args: argparse.Namespace) -> int:
    from .. import link

    if args.all:
        for probe in link.bpfkit_probes():
            if probe.alive:
                print(f"live     {probe.event.kind} {probe.name} (pid {probe.pid}): {probe.event.target}")
    results = link.remove_stale_probes(dry_run=args.dry_run)
    removed = kept = 0
    for r in results:
        p = r.probe
        where = f"{p.event.kind} {p.name} (pid {p.pid} gone): {p.event.target}"
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
