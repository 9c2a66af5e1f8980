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

HELP = "list, show or dump the system's BPF maps"
DESCRIPTION = "List every BPF map in the system, show one, or dump its entries (like bpftool map)."

COLUMNS = [("id", "ID"), ("type", "TYPE"), ("name", "NAME"), ("key_size", "KEY"), ("value_size", "VALUE"),
           ("max_entries", "MAX"), ("flags", "FLAGS")]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    lst = sub.add_parser("list", help="every map")
    lst.add_argument("--json", action="store_true", help="one JSON object a line")
    for name, text in (("show", "one map by id or pinned path"), ("dump", "the entries of one map")):
        p = sub.add_parser(name, help=text)
        p.add_argument("target", metavar="ID|PATH", type=argtypes.id_or_path("map"))
        p.add_argument("--json", action="store_true", help="JSON object(s), one a line")


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

    if isinstance(target, int):
        return Map.from_id(target)
    return Map.load_pinned(target)


def _hex(value: Any) -> Any:
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value).hex()
    if isinstance(value, (list, tuple)):
        return [_hex(v) for v in value]
    return value


def run(args: argparse.Namespace) -> int:
    from ..errors import NotFoundError, UsageError
    from ..maps import Map, map_ids
    from .output import hexdump, print_json, print_table

    if args.action == "list":
        rows = []
        for mid in map_ids():
            try:
                m = Map.from_id(mid)
            except NotFoundError:
                continue
            except Exception as exc:
                if getattr(exc, "errno", None) == 2 or isinstance(exc, ValueError):
                    continue  # gone since listed; or a map type newer than bpfkit
                raise
            with m:
                rows.append(describe(m))
        for row in rows if args.json else []:
            print_json(row)
        if not args.json:
            print_table(rows, COLUMNS)
        return 0
    with open_map(args.target) as m:
        if args.action == "show":
            row = describe(m)
            if args.json:
                print_json(row)
            else:
                for key, value in row.items():
                    print(f"{key + ':':<12} {'-' if value is None else value}")
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
