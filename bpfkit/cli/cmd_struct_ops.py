# SPDX-License-Identifier: Apache-2.0
"""``bpfkit struct-ops list|show|unregister``: the struct_ops maps in the system (BPF TCP
congestion controls, sched_ext schedulers, ...), like ``bpftool struct_ops``.

    bpfkit struct-ops list [--json]
    bpfkit struct-ops show ID|NAME|PINNED [--json]
    bpfkit struct-ops unregister ID|NAME|PINNED

NAME is the map's name (the kernel keeps 15 characters) or the table's own ``name`` member
(what setsockopt(TCP_CONGESTION) takes); PINNED (a path, with a '/') is the map's pin or the
pin of the struct_ops link that registers it. JSON: {"id", "name", "type", "ops_name",
"state", "registered", "link_id", "pinned"}. Unregistering is what bpftool does for a map
registered without a link (BPF_MAP_DELETE_ELEM of key 0, bpfkit.struct_ops.unregister_map);
a BPF_F_LINK map refuses that (EOPNOTSUPP), so its struct_ops link is detached
(BPF_LINK_DETACH, 6.10 for struct_ops links). Documented in docs/cli.md.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from . import argtypes

if TYPE_CHECKING:
    from ..struct_ops import StructOpsMapInfo

DESCRIPTION = ("List every struct_ops map in the system (TCP congestion controls, sched_ext schedulers), "
               "show one, or unregister one (like bpftool struct_ops).")

COLUMNS = [("id", "ID"), ("name", "NAME"), ("type", "TYPE"), ("ops_name", "OPS_NAME"), ("state", "STATE"),
           ("link_id", "LINK")]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    lst = sub.add_parser("list", help="every struct_ops map")
    lst.add_argument("--json", action="store_true", help="one JSON object a line")
    target_help = "a map id, a map or table name, or a pinned path (with a '/') of the map or of its link"
    show = sub.add_parser("show", help="one struct_ops map by id, name or pinned path")
    show.add_argument("target", metavar="ID|NAME|PINNED", type=argtypes.id_or_path("map"), help=target_help)
    show.add_argument("--json", action="store_true", help="one JSON object")
    unreg = sub.add_parser("unregister", help="unregister a struct_ops map (delete key 0, or detach its link)")
    unreg.add_argument("target", metavar="ID|NAME|PINNED", type=argtypes.id_or_path("map"), help=target_help)


def _struct_ops_links() -> dict[int, int]:
    """map id -> the id of the struct_ops link that registers it."""
    from .. import link

    return {int(info.detail.map_id): int(info.id) for info in link.iter_links()
            if info.type_name == "struct_ops" and info.detail is not None}


def describe(info: StructOpsMapInfo, links: dict[int, int], pinned: str | None = None) -> dict[str, Any]:
    link_id = links.get(info.id)
    return {
        "id": info.id,
        "name": info.name,
        "type": info.type_name,  # bpftool's "kernel_struct_ops"
        "ops_name": info.ops_name,
        "state": info.state,
        # a map-only registration is "inuse"; a BPF_F_LINK map stays "ready" while its link registers it
        "registered": link_id is not None if info.link else info.state == "inuse",
        "link_id": link_id,
        "pinned": pinned,
    }


def _struct_ops_maps() -> list[Any]:
    """Every struct_ops map of the system, opened (the caller closes them)."""
    from .._kernel.consts import MapType
    from ..maps import Map, map_ids
    from .output import opened_by_ids

    found = []
    for m in opened_by_ids(map_ids(), Map.from_id, (ValueError,)):
        if m.type == MapType.STRUCT_OPS:
            found.append(m)
        else:
            m.close()
    return found


def _open(target: int | str) -> tuple[Any, int | None, str | None]:
    """(the struct_ops map, the link id when PINNED is its link's pin, the pin) for ``target``."""
    from ..errors import NotFoundError, UsageError
    from ..maps import Map
    from ..struct_ops import inspect_map

    if isinstance(target, int):
        try:
            m = Map.from_id(target)
        except Exception as exc:  # KernelError ENOENT: no such id
            if not isinstance(exc, NotFoundError) and getattr(exc, "errno", None) != 2:
                raise
            raise NotFoundError(f"no map with id {target} (`bpfkit struct-ops list` shows the struct_ops maps)") from None
        return m, None, None
    if "/" in target:
        from .. import link

        try:
            lk = link.load_pinned_link(target)
        except UsageError:  # pinned, but not a link: the map's own pin
            return Map.load_pinned(target), None, target
        with lk:
            detail = lk.info().detail
            if lk.info().type_name != "struct_ops" or detail is None:
                raise UsageError(f"{target} is a {lk.info().type_name} link, not a struct_ops link")
            if not detail.map_id:  # detached (BPF_LINK_DETACH): the link holds no map any more
                raise NotFoundError(f"{target} is a detached struct_ops link (its map was unregistered): "
                                    "remove the pin")
            return Map.from_id(int(detail.map_id)), int(lk.info().id), target
    found, ids = None, []
    for m in _struct_ops_maps():
        info = inspect_map(m)
        if target in (info.name, info.ops_name):
            ids.append(info.id)
            if found is None:
                found = m
                continue
        m.close()
    if len(ids) > 1 and found is not None:
        found.close()
        raise UsageError(f"struct_ops name {target!r} is ambiguous: map ids {', '.join(map(str, ids))} "
                         "(give an id or a pinned path)")
    if found is None:
        raise NotFoundError(f"no struct_ops map named {target!r} (`bpfkit struct-ops list` shows them; "
                            "a pinned path needs a '/')")
    return found, None, None


def _unregister(m: Any, info: StructOpsMapInfo, link_id: int | None) -> str:
    from .. import link
    from ..errors import NotFoundError, NotSupportedError
    from ..struct_ops import unregister_map

    what = f"struct_ops map {info.id} ({info.name}, {info.type_name})"
    if not info.link:
        unregister_map(m)
        return f"unregistered {what}"
    if link_id is None:
        link_id = _struct_ops_links().get(info.id)
    if link_id is None:
        raise NotFoundError(f"unregister {what}: it is not registered (no struct_ops link holds it)")
    with link.link_from_id(link_id) as lk:
        try:
            lk.detach()
        except NotSupportedError as exc:  # struct_ops links detach from 6.10 (73287fe22872)
            raise exc.wrap(f"unregister {what} (detach its link {link_id}; before 6.10: remove the link's pins "
                           "and end the process holding it)") from None
    return f"unregistered {what}: detached its link {link_id} (a pin of the link stays, detached: remove it)"


def run(args: argparse.Namespace) -> int:
    from ..struct_ops import inspect_map
    from .output import print_record, print_rows

    if args.action == "list":
        links = _struct_ops_links()
        rows = []
        for m in _struct_ops_maps():
            with m:
                rows.append(describe(inspect_map(m), links))
        print_rows(rows, COLUMNS, args.json)
        return 0
    m, link_id, pinned = _open(args.target)
    with m:
        info = inspect_map(m)
        if args.action == "unregister":
            print(_unregister(m, info, link_id))
            return 0
        links = _struct_ops_links()
        if link_id is not None:
            links[info.id] = link_id
        row = describe(info, links, pinned)
    print_record(row, args.json, width=11)
    return 0
