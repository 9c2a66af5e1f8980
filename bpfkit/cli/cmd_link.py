# SPDX-License-Identifier: Apache-2.0
"""``bpfkit link list|show|pin|detach``: the bpf_links in the system, like ``bpftool link``.

    bpfkit link list [--json]
    bpfkit link show ID|PINNED_PATH [--json]
    bpfkit link pin ID PATH           # keep a link alive past its owner
    bpfkit link detach ID|PATH        # BPF_LINK_DETACH (5.9): the program stops running

JSON: {"id", "type", "prog_id", "prog_name", "detail": {...} or null, "pinned"}; ``detail``
holds the kind's typed info (a perf_event link: {"event_type", "function"|"path"|"name", ...}).
Documented in docs/cli.md.
"""

from __future__ import annotations

import argparse
from typing import Any

from . import argtypes
from .output import add_list_show

DESCRIPTION = "List every bpf_link in the system, show one, pin one, or detach one (like bpftool link)."

COLUMNS = [("id", "ID"), ("type", "TYPE"), ("prog_id", "PROG"), ("prog_name", "NAME"), ("target", "TARGET")]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = add_list_show(parser, "link")
    pin = sub.add_parser("pin", help="pin a link (by id) in bpffs")
    pin.add_argument("target", metavar="ID", type=argtypes.object_id("link"))
    pin.add_argument("path", metavar="PATH")
    det = sub.add_parser("detach", help="detach a link's program (BPF_LINK_DETACH)")
    det.add_argument("target", metavar="ID|PATH", type=argtypes.id_or_path("link"))


def _detail(detail: Any) -> Any:
    import dataclasses

    if detail is None:
        return None
    if dataclasses.is_dataclass(detail):
        out = {}
        for f in dataclasses.fields(detail):
            value = getattr(detail, f.name)
            out[f.name] = _detail(value) if dataclasses.is_dataclass(value) else value
        return out
    return str(detail)


_cgroup_paths: dict[int, str] | None = None


def _cgroup_target(detail: Any) -> str:
    """``cgroup PATH HOOK`` of a cgroup link (the hierarchy walked once per command)."""
    global _cgroup_paths
    if _cgroup_paths is None:
        from .._kernel.cgroupfs import cgroup_paths

        _cgroup_paths = cgroup_paths()
    where = _cgroup_paths.get(detail.cgroup_id, f"id {detail.cgroup_id}")
    return f"cgroup {where} {detail.hook}"


def _ifname(ifindex: int) -> str:
    """``nk0(5)`` as bpftool prints an interface, when this namespace has ifindex ``ifindex``
    (the kernel reports the index in the link's namespace, which may not be this one); else
    ``ifindex 5``."""
    import socket

    try:
        return f"{socket.if_indextoname(ifindex)}({ifindex})"
    except OSError:
        return f"ifindex {ifindex}"


def _target(detail: Any) -> str:
    """A short text of where the link is attached, from its typed info."""
    if detail is None:
        return ""
    if hasattr(detail, "cgroup_id") and hasattr(detail, "hook"):
        return _cgroup_target(detail)
    if hasattr(detail, "priority") and hasattr(detail, "family"):
        fam, hook = (getattr(v, "name", str(v)).lower() for v in (detail.family, detail.hook))
        return f"{fam} {hook} priority {detail.priority}" + (" defrag" if detail.defrag else "")
    if hasattr(detail, "map_id") and hasattr(detail, "hook"):
        return f"map {detail.map_id} {detail.hook}"
    if hasattr(detail, "netns_ino") and hasattr(detail, "hook"):
        return f"netns {detail.netns_ino} {detail.hook}"  # the inode `ls -l /proc/PID/ns/net` shows
    if hasattr(detail, "ifindex"):  # xdp, tcx, netkit
        where = _ifname(detail.ifindex)
        side = getattr(detail, "role", None) or getattr(detail, "direction", None)
        return where + (f" {getattr(side, 'value', side)}" if side is not None else "")
    d = _detail(detail)
    inner = d.get("detail") if isinstance(d, dict) and isinstance(d.get("detail"), dict) else d
    if not isinstance(inner, dict):
        return str(inner)
    for key in ("function", "path", "name", "ifname", "ifindex"):
        if inner.get(key):
            text = str(inner[key])
            if inner.get("offset"):
                text += f"+{inner['offset']:#x}"
            if inner.get("retprobe"):
                text += " (return)"
            return text
    return ""


def describe(info: Any, pinned: str | None = None) -> dict[str, Any]:
    from ..program import Program
    from .output import jsonable

    try:
        with Program.from_id(info.program_id) as prog:
            prog_name = prog.name
    except Exception:
        prog_name = None
    detail = jsonable(_detail(info.detail))
    return {
        "id": int(info.id),
        "type": info.type_name,
        "prog_id": int(info.program_id),
        "prog_name": prog_name,
        "detail": detail,
        "target": _target(info.detail),
        "pinned": pinned,
    }


def open_link(target: int | str) -> Any:
    from .. import link
    from .output import open_by_id_or_path

    return open_by_id_or_path(target, link.link_from_id, link.load_pinned_link)


def run(args: argparse.Namespace) -> int:
    from .. import link
    from .output import print_record, print_rows

    if args.action == "list":
        print_rows([describe(info) for info in link.iter_links()], COLUMNS, args.json)
        return 0
    if args.action == "pin":
        import os

        from .._kernel.bpffs import check_pin_dir

        # The same check (and exit code 2) as load and attach --pin, before opening the link.
        check_pin_dir(os.path.dirname(os.path.abspath(args.path)) or "/", "PATH's directory")
        with open_link(args.target) as lk:
            lk.pin(args.path)
        print(f"pinned link {args.target} at {args.path}")
        return 0
    with open_link(args.target) as lk:
        if args.action == "detach":
            lk.detach()
            print(f"detached link {args.target}")
            return 0
        row = describe(lk.info(), lk.pinned_path)
    print_record(row, args.json, width=10, empty=(None, ""))
    return 0
