"""``bpfkit map list|show|dump``: the maps in the system, like ``bpftool map``.

    bpfkit map list [--json]
    bpfkit map show ID|PINNED_PATH [--json]
    bpfkit map dump ID|PINNED_PATH [--json]

JSON: list/show {"id", "name", "type", "key_size", "value_size", "max_entries", "flags",
"btf_id", "pinned"}; dump one {"key": HEX, "value": HEX} a line (per-CPU maps: "values":
[HEX per CPU]). Documented in docs/cli.md.
"""

from __future__ import annotations

import argparse
from typing import Any

from . import argtypes
from .output import add_list_show

HELP = "list, show or dump the system's BPF maps"
DESCRIPTION = "List every BPF map in the system, show one, or dump its entries (like bpftool map)."

COLUMNS = [("id", "ID"), ("type", "TYPE"), ("name", "NAME"), ("key_size", "KEY"), ("value_size", "VALUE"),
           ("max_entries", "MAX"), ("flags", "FLAGS")]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    add_list_show(sub, "map", argtypes.id_or_path("map"))
    dump = sub.add_parser("dump", help="the entries of one map")
    dump.add_argument("target", metavar="ID|PATH", type=argtypes.id_or_path("map"))
    dump.add_argument("--json", action="store_true", help="JSON objects, one a line")


def _type_name(value: Any) -> str:
    from .._kernel.consts import MapType

    try:
        return MapType(int(value)).kernel_name
    except ValueError:
        return f"type {int(value)}"


def describe(m: Any) -> dict[str, Any]:
    info = m.info()
    return {
        "id": int(info.id),
        "name": m.name,
        "type": _type_name(info.type),
        "key_size": int(info.key_size),
        "value_size": int(info.value_size),
        "max_entries": int(info.max_entries),
        "flags": int(info.map_flags),
        "btf_id": int(info.btf_id),
        "pinned": getattr(m, "pinned_path", None),
    }


def open_map(target: int | str) -> Any:
    from ..maps import Map
    from .output import open_by_id_or_path

    return open_by_id_or_path(target, Map.from_id, Map.load_pinned)


def _hex(value: Any) -> Any:
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value).hex()
    if isinstance(value, (list, tuple)):
        return [_hex(v) for v in value]
    return value


def run(args: argparse.Namespace) -> int:
    from ..errors import UsageError
    from ..maps import Map, map_ids
    from .output import hexdump, opened_by_ids, print_json, print_record, print_rows

    if args.action == "list":
        rows = []
        for m in opened_by_ids(map_ids(), Map.from_id, (ValueError,)):  # ValueError: a map type newer than bpfkit
            with m:
                rows.append(describe(m))
        print_rows(rows, COLUMNS, args.json)
        return 0
    with open_map(args.target) as m:
        if args.action == "show":
            print_record(describe(m), args.json)
            return 0
        if m.type.kernel_name in ("ringbuf", "perf_event_array", "user_ringbuf"):
            raise UsageError(f"map {m.name!r} is a {m.type.kernel_name}: it has no entries to dump "
                             "(read its records with `bpfkit events PINNED_MAP`)")
        count = 0
        for key, value in m.items():
            count += 1
            k, v = _hex(key), _hex(value)
            if args.json:
                print_json({"key": k, "values": v} if isinstance(v, list) else {"key": k, "value": v})
            else:
                vs = " | ".join(hexdump(bytes.fromhex(x)) for x in v) if isinstance(v, list) else (
                    hexdump(bytes.fromhex(v)) if isinstance(v, str) else v)
                ks = hexdump(bytes.fromhex(k)) if isinstance(k, str) else k
                print(f"key: {ks}  value: {vs}")
        if not args.json:
            print(f"{count} entr{'y' if count == 1 else 'ies'}")
    return 0
