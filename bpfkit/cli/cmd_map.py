# SPDX-License-Identifier: Apache-2.0
"""``bpfkit map list|show|dump``: the maps in the system, like ``bpftool map``.

    bpfkit map list [--json]
    bpfkit map show ID|PINNED_PATH [--json]
    bpfkit map dump ID|PINNED_PATH|NAME [--json | --hist [--unit UNIT]]

JSON: list/show {"id", "name", "type", "key_size", "value_size", "max_entries", "flags",
"btf_id", "pinned"}; dump prints what ``bpftool -j map dump`` prints (one JSON array, entries
decoded through the map's BTF by bpfkit.cli.bpftool_json). Without --json, dump prints one
entry a line, decoded through BTF (hex for maps without); --hist draws the histograms
bpfkit.hist recognises in the map instead. Documented in docs/cli.md.

Event maps dump as bpftool 7.x dumps them: a perf event array key by key, each value the
lookup's error (the kernel reads no perf event fd back: ENOTSUPP, "Unknown error 524"); a ring
buffer (or user ring buffer) has no keys (BPF_MAP_GET_NEXT_KEY: ENOTSUPP), so the dump is empty
("[]") and the command fails with the kernel's error, as bpftool (which exits with -524 & 0xff).
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import TYPE_CHECKING, Any

from . import argtypes
from .output import add_list_show

if TYPE_CHECKING:
    from ..btf import BTF
    from ..maps import Map, MapInfo

DESCRIPTION = "List every BPF map in the system, show one, or dump its entries (like bpftool map)."

COLUMNS = [("id", "ID"), ("type", "TYPE"), ("name", "NAME"), ("key_size", "KEY"), ("value_size", "VALUE"),
           ("max_entries", "MAX"), ("flags", "FLAGS")]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = add_list_show(parser, "map")
    dump = sub.add_parser("dump", help="the entries of one map")
    dump.add_argument("target", metavar="MAP", type=argtypes.id_or_path("map"),
                      help="a map id, a pinned path (with a '/'), or a map name")
    shape = dump.add_mutually_exclusive_group()
    shape.add_argument("--json", action="store_true", help="what `bpftool -j map dump` prints")
    shape.add_argument("--hist", action="store_true",
                       help="draw the log2/linear histograms found in the map (as bcc's print_log2_hist)")
    dump.add_argument("--unit", default="value", metavar="UNIT",
                      help="the histogram's unit label, e.g. usecs (with --hist; default: value)")


def describe(m: Map[Any, Any]) -> dict[str, Any]:
    info = m.info()
    return {
        "id": info.id,
        "name": m.name,
        "type": info.type_name,
        "key_size": info.key_size,
        "value_size": info.value_size,
        "max_entries": info.max_entries,
        "flags": info.map_flags,
        "btf_id": info.btf_id,
        "pinned": m.pinned_path,
    }


def open_named(name: str) -> Any:
    """The one map whose kernel name is ``name``; an error listing the ids when several are."""
    from ..errors import NotFoundError, UsageError
    from ..maps import Map, map_ids
    from .output import opened_by_ids

    found: list[Any] = []
    for m in opened_by_ids(map_ids(), Map.from_id, (ValueError,)):
        if m.name == name:
            found.append(m)
        else:
            m.close()
    if len(found) == 1:
        return found[0]
    ids = [m.id for m in found]
    for m in found:
        m.close()
    if not found:
        raise NotFoundError(f"no map named {name!r} (`bpfkit map list` shows the maps; "
                            "a pinned path needs a '/')")
    raise UsageError(f"map name {name!r} is ambiguous: ids {', '.join(map(str, ids))} "
                     "(give an id or a pinned path)")


def _open_for_dump(target: int | str) -> Any:
    from ..maps import Map

    if isinstance(target, int):
        return Map.from_id(target)
    if "/" in target:
        return Map.load_pinned(target, readonly=True)  # as bpftool: BPF_F_RDONLY
    return open_named(target)


def _map_btf(info: MapInfo) -> tuple[BTF | None, int, int]:
    """(BTF, key type id, value type id) of a map as bpftool finds them: struct_ops values in
    vmlinux, else the map's own BTF object (by info.btf_id); (None, 0, 0) without value BTF."""
    from .. import kernel_btf as kbtf

    if info.btf_vmlinux_value_type_id:
        return kbtf.vmlinux(), info.btf_key_type_id, info.btf_vmlinux_value_type_id
    if not info.btf_value_type_id or not info.btf_id:
        return None, 0, 0
    return kbtf.by_id(info.btf_id), info.btf_key_type_id, info.btf_value_type_id


def dump(m: Map[Any, Any], as_json: bool, out: Any) -> int:
    """Write ``m``'s entries to ``out``: bpftool's JSON array, or one entry a line (read by
    Map.dump_batches: BPF_MAP_LOOKUP_BATCH a few thousand entries a syscall, or key by key as
    bpftool reads, with the errno of a failed lookup)."""
    from .._kernel.cpus import num_possible_cpus
    from ..errors import KernelError
    from .bpftool_json import EntryFormatter, TypeFormatter
    from .output import hexdump

    info = m.info()
    btf, key_id, value_id = _map_btf(info)
    percpu = num_possible_cpus() if m.type.kernel_name in PERCPU else 0
    fmt = EntryFormatter(btf, key_id, value_id, key_size=m.key_size, value_size=m.value_size,
                         percpu_cpus=percpu, map_in_map=m.type.kernel_name in ("array_of_maps", "hash_of_maps"))
    ks, vsz = m.key_size, fmt.value_buf_size  # m.value_stride: the same layout
    count = 0
    if as_json:
        sep = "["
        try:
            for kbuf, vbuf, n, err in m.dump_batches():
                texts = fmt.entries(kbuf, vbuf, n) if not err else [fmt.error(kbuf, os.strerror(err))]
                out.write(sep + ",".join(texts))
                sep, count = ",", count + n
        except KernelError:  # as bpftool, a failed key walk closes the array it began (a ring buffer's "[]")
            out.write("[]\n" if not count else "]\n")
            raise
        out.write("[]\n" if not count else "]\n")
        return count
    types = TypeFormatter(btf, plain=True) if btf is not None else None
    vs, slot = m.value_size, fmt.slot
    key_text = types.render(key_id) if types and key_id else lambda b, o: hexdump(b[o:o + ks])
    value_text = types.render(value_id) if types else lambda b, o: hexdump(b[o:o + vs])
    label = "values" if percpu else "value"
    try:
        for kbuf, vbuf, n, err in m.dump_batches():
            lines = []
            for i in range(n):
                ko, vo = i * ks, i * vsz
                if err:
                    value = f"<{os.strerror(err)}>"
                elif percpu:
                    value = "[" + ", ".join(value_text(vbuf, vo + c * slot) for c in range(percpu)) + "]"
                else:
                    value = value_text(vbuf, vo)
                lines.append(f"key: {key_text(kbuf, ko)}  {label}: {value}\n")
            out.write("".join(lines))
            count += n
    except KernelError:  # a failed key walk (a ring buffer's) still ends with the count, as bpftool's
        out.write(f"{count} entr{'y' if count == 1 else 'ies'}\n")
        raise
    out.write(f"{count} entr{'y' if count == 1 else 'ies'}\n")
    return count


PERCPU = frozenset({"percpu_hash", "percpu_array", "lru_percpu_hash", "percpu_cgroup_storage"})


def run(args: argparse.Namespace) -> int:
    from ..errors import KernelError
    from ..maps import Map, map_ids
    from .output import list_or_show

    if args.action in ("list", "show"):  # ValueError: a map type newer than bpfkit, left out of the list
        return list_or_show(args, Map, map_ids, describe, COLUMNS, (ValueError,))
    with _open_for_dump(args.target) as m:
        if args.hist:
            from ..hist import render_map

            print(render_map(m, args.unit))
            return 0
        try:
            dump(m, args.json, sys.stdout)
        except KernelError as exc:
            if m.type.kernel_name not in EVENT_MAPS:
                raise
            where = args.target if isinstance(args.target, str) and "/" in args.target else "PINNED_MAP"
            how = f"read them with `bpfkit events {where}`" if m.type.kernel_name == "ringbuf" else \
                "user space writes them, programs drain them"
            raise exc.wrap(f"dump map {m.name!r}: a {m.type.kernel_name} has no keys, only records ({how})") from None
    return 0


EVENT_MAPS = frozenset({"ringbuf", "user_ringbuf"})  # no keys: BPF_MAP_GET_NEXT_KEY gives ENOTSUPP
