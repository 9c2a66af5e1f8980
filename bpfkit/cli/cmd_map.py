# SPDX-License-Identifier: Apache-2.0
"""``bpfkit map list|show|dump``: the maps in the system, like ``bpftool map``.

    bpfkit map list [--json]
    bpfkit map show ID|PINNED_PATH [--json]
    bpfkit map dump ID|PINNED_PATH|NAME [--json | --hist [--unit UNIT]]

JSON: list/show {"id", "name", "type", "key_size", "value_size", "max_entries", "flags",
"btf_id", "pinned"}; dump prints what ``bpftool -j map dump`` prints (one JSON array, entries
decoded through the map's BTF by bpfkit.btf.bpftool_json). Without --json, dump prints one
entry a line, decoded through BTF (hex for maps without); --hist draws the histograms
bpfkit.hist recognises in the map instead. Documented in docs/cli.md.
"""

from __future__ import annotations

import argparse
import errno
import os
import sys
from collections.abc import Iterator
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
    dump.add_argument("target", metavar="MAP", type=argtypes.id_or_path("map"),
                      help="a map id, a pinned path (with a '/'), or a map name")
    shape = dump.add_mutually_exclusive_group()
    shape.add_argument("--json", action="store_true", help="what `bpftool -j map dump` prints")
    shape.add_argument("--hist", action="store_true",
                       help="draw the log2/linear histograms found in the map (as bcc's print_log2_hist)")
    dump.add_argument("--unit", default="value", metavar="UNIT",
                      help="the histogram's unit label, e.g. usecs (with --hist; default: value)")


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


def _map_btf(info: Any) -> tuple[Any, int, int]:
    """(BTF, key type id, value type id) of a map as bpftool finds them: struct_ops values in
    vmlinux, else the map's own BTF object (by info.btf_id); (None, 0, 0) without value BTF."""
    from ..btf import kernel as kbtf

    if int(info.btf_vmlinux_value_type_id):
        return kbtf.vmlinux(), int(info.btf_key_type_id), int(info.btf_vmlinux_value_type_id)
    if not int(info.btf_value_type_id) or not int(info.btf_id):
        return None, 0, 0
    return kbtf.by_id(int(info.btf_id)), int(info.btf_key_type_id), int(info.btf_value_type_id)


_NO_BATCH = (errno.EINVAL, errno.ENOTSUP, errno.EOPNOTSUPP, 524)  # 524: kernel-internal ENOTSUPP


def raw_batches(m: Any, value_size: int, batch: int = 4096) -> Iterator[tuple[bytes, bytes, int, int]]:
    """(keys, values, count, errno) for every entry of ``m``: ``count`` keys of ``m.key_size``
    bytes and values of ``value_size`` bytes (one slot per possible CPU for per-CPU maps).
    BPF_MAP_LOOKUP_BATCH (5.6+) takes a few thousand entries a syscall; maps and kernels
    without it go key by key as bpftool does (GET_NEXT_KEY, LOOKUP_ELEM), one entry a batch,
    with the errno of a failed lookup (an absent prog/map-array slot gives nothing)."""
    from .._kernel import bpf as _bpf
    from .._kernel.abi import ffi
    from .._kernel.consts import Cmd
    from ..errors import KernelError

    ks = m.key_size
    fd_array = m.type.kernel_name in ("prog_array", "array_of_maps", "hash_of_maps")
    if ks and not fd_array:
        keys, values = ffi.new("char[]", ks * batch), ffi.new("char[]", max(value_size, 1) * batch)
        in_batch, out_batch = None, ffi.new("char[]", max(ks, 8))
        while True:
            try:
                count, done = _bpf.map_batch(Cmd.MAP_LOOKUP_BATCH, m.fd, keys, values, batch, in_batch, out_batch)
            except KernelError as exc:
                if exc.errno == errno.ENOSPC:  # a hash bucket bigger than the batch
                    batch *= 2
                    keys, values = ffi.new("char[]", ks * batch), ffi.new("char[]", max(value_size, 1) * batch)
                    continue
                if in_batch is None and exc.errno in _NO_BATCH:
                    break  # no batch ops for this map type or kernel: key by key below
                raise exc.wrap(f"batch lookup in map {m.name!r}")
            if count:
                yield ffi.buffer(keys, ks * count)[:], ffi.buffer(values, value_size * count)[:], count, 0
            if done:
                return
            in_batch, out_batch = out_batch, in_batch or ffi.new("char[]", max(ks, 8))
    key, prev = ffi.new("char[]", max(ks, 1)), ffi.NULL
    value = ffi.new("char[]", max(value_size, 1))
    while _bpf.map_next_key(m.fd, prev, key):
        k = ffi.buffer(key, ks)[:]
        try:
            err = 0 if _bpf.map_lookup(m.fd, key, value) else errno.ENOENT
        except KernelError as exc:
            err = exc.errno
        if not (err == errno.ENOENT and fd_array):  # an empty slot: bpftool prints nothing either
            yield k, ffi.buffer(value, value_size)[:] if not err else b"", 1, err
        prev = ffi.new("char[]", k)


def dump(m: Any, as_json: bool, out: Any) -> int:
    """Write ``m``'s entries to ``out``: bpftool's JSON array, or one entry a line."""
    from .._kernel.cpus import num_possible_cpus
    from ..btf.bpftool_json import EntryFormatter, TypeFormatter
    from .output import hexdump

    info = m.info()
    btf, key_id, value_id = _map_btf(info)
    percpu = num_possible_cpus() if m.type.kernel_name in PERCPU else 0
    fmt = EntryFormatter(btf, key_id, value_id, key_size=m.key_size, value_size=m.value_size,
                         percpu_cpus=percpu, map_in_map=m.type.kernel_name in ("array_of_maps", "hash_of_maps"))
    ks, vsz = m.key_size, fmt.value_buf_size
    count = 0
    if as_json:
        sep = "["
        for kbuf, vbuf, n, err in raw_batches(m, vsz):
            texts = fmt.entries(kbuf, vbuf, n) if not err else [fmt.error(kbuf, os.strerror(err))]
            out.write(sep + ",".join(texts))
            sep, count = ",", count + n
        out.write("[]\n" if not count else "]\n")
        return count
    types = TypeFormatter(btf, plain=True) if btf is not None else None
    vs, slot = m.value_size, fmt.slot
    key_text = types.render(key_id) if types and key_id else lambda b, o: hexdump(b[o:o + ks])
    value_text = types.render(value_id) if types else lambda b, o: hexdump(b[o:o + vs])
    label = "values" if percpu else "value"
    for kbuf, vbuf, n, err in raw_batches(m, vsz):
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
    out.write(f"{count} entr{'y' if count == 1 else 'ies'}\n")
    return count


PERCPU = frozenset({"percpu_hash", "percpu_array", "lru_percpu_hash", "percpu_cgroup_storage"})


def run(args: argparse.Namespace) -> int:
    from ..errors import UsageError
    from ..maps import Map, map_ids
    from .output import opened_by_ids, print_record, print_rows

    if args.action == "list":
        rows = []
        for m in opened_by_ids(map_ids(), Map.from_id, (ValueError,)):  # ValueError: a map type newer than bpfkit
            with m:
                rows.append(describe(m))
        print_rows(rows, COLUMNS, args.json)
        return 0
    if args.action == "show":
        with open_map(args.target) as m:
            print_record(describe(m), args.json)
        return 0
    with _open_for_dump(args.target) as m:
        if m.type.kernel_name in ("ringbuf", "perf_event_array", "user_ringbuf"):
            raise UsageError(f"map {m.name!r} is a {m.type.kernel_name}: it has no entries to dump "
                             "(read its records with `bpfkit events PINNED_MAP`)")
        if args.hist:
            from ..hist import render_map

            print(render_map(m, args.unit))
        else:
            dump(m, args.json, sys.stdout)
    return 0
