# SPDX-License-Identifier: Apache-2.0
"""``bpfkit cgroup show|tree``: the programs attached to cgroups, like ``bpftool cgroup``.

    bpfkit cgroup show PATH [--effective] [--json]   # every hook of one cgroup
    bpfkit cgroup tree [ROOT] [--effective] [--json] # every cgroup below ROOT that has programs

ROOT defaults to the cgroup2 mount (read from /proc/self/mountinfo). ``--effective`` lists
what runs for the cgroup's processes, inherited programs included (BPF_F_QUERY_EFFECTIVE; the
kernel reports no attach flags then). JSON: one object a line, {"cgroup", "id", "attach_type",
"attach_flags", "name"}. Documented in docs/cli.md.
"""

from __future__ import annotations

import argparse
from typing import Any

DESCRIPTION = ("List the BPF programs attached to a cgroup v2 directory, hook by hook (show), or to every "
               "cgroup below ROOT (tree; default: the cgroup2 mount), like bpftool cgroup.")

COLUMNS = [("id", "ID"), ("attach_type", "AttachType"), ("attach_flags", "AttachFlags"), ("name", "Name")]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    show = sub.add_parser("show", help="the programs of one cgroup")
    show.add_argument("path", metavar="PATH", help="a cgroup v2 directory")
    tree = sub.add_parser("tree", help="every cgroup below ROOT that has programs")
    tree.add_argument("root", metavar="ROOT", nargs="?", default=None,
                      help="where to start (default: the cgroup2 mount point)")
    for p in (show, tree):
        p.add_argument("--effective", action="store_true", help="what runs there, inherited programs included")
        p.add_argument("--json", action="store_true", help="one JSON object a line")


def _rows(path: str, effective: bool, names: dict[int, str | None]) -> list[dict[str, Any]]:
    from .. import link
    from ..program import Program

    rows = []
    for p in link.cgroup_programs(path, effective=effective):
        if p.prog_id not in names:
            try:
                with Program.from_id(p.prog_id) as prog:
                    names[p.prog_id] = prog.name
            except Exception:  # detached and freed since the query
                names[p.prog_id] = None
        rows.append({"cgroup": path, "id": p.prog_id, "attach_type": p.hook, "attach_flags": p.flags,
                     "name": names[p.prog_id]})
    return rows


def _line(row: dict[str, Any]) -> str:
    # bpftool's layout: fixed columns under each cgroup's path.
    return (f"{row['id']!s:<8} {row['attach_type']!s:<16} {row['attach_flags'] or '-'!s:<12} "
            f"{row['name'] or '-'}").rstrip()


def run(args: argparse.Namespace) -> int:
    from .._kernel import cgroupfs
    from .output import print_json, print_rows

    names: dict[int, str | None] = {}
    if args.action == "show":
        print_rows(_rows(args.path, args.effective, names), COLUMNS, args.json)
        return 0
    root = args.root or cgroupfs.cgroup2_root()
    cgroupfs.open_cgroup(root).close()  # a clear error for a ROOT that is no cgroup v2 directory
    if not args.json:
        print("CgroupPath")
        print(_line({k: title for k, title in COLUMNS}))
    for path in cgroupfs.walk(root):
        try:
            rows = _rows(path, args.effective, names)
        except Exception as exc:  # a cgroup removed while walking
            if getattr(exc, "errno", None) == 2 or type(exc).__name__ == "NotFoundError":
                continue
            raise
        if not rows:
            continue
        if args.json:
            for row in rows:
                print_json(row)
        else:
            print(path)
            for row in rows:
                print(_line(row))
    return 0
