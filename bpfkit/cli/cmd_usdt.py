# SPDX-License-Identifier: Apache-2.0
"""``bpfkit usdt list BINARY``: the USDT probes a binary carries, with their arguments.

Reads the binary's ``.note.stapsdt`` notes (no root, no kernel): one line per probe site
with its address, the uprobe file offset, the semaphore (and its file offset, the uprobe's
ref_ctr_offset) and each argument decoded (size, sign, where it is). Attach with
``bpfkit attach OBJ PROG usdt:BINARY:PROVIDER:NAME`` or SEC("usdt/BINARY:PROVIDER:NAME").
"""

from __future__ import annotations

import argparse

OFFLINE = True  # reads files only: prints no warnings (bpfkit.cli.main.setup_warnings)
DESCRIPTION = """\
List the USDT (sys/sdt.h) probes in a binary's .note.stapsdt notes: provider, name, address, uprobe
file offset, semaphore and argument specs. BINARY is a path, a program on $PATH or a library name
(libc, libstdc++).
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="usdt_command", metavar="ACTION", required=True)
    ls = sub.add_parser("list", help="list the probes of BINARY")
    ls.add_argument("binary", metavar="BINARY")
    ls.add_argument("probe", metavar="[PROVIDER:]NAME", nargs="?", help="only this probe")
    ls.add_argument("--json", action="store_true", help="one JSON object per probe site")


def _arg_text(arg) -> str:  # type: ignore[no-untyped-def]
    where = {0: f"${arg.value}", 1: f"%{arg.register}", 2: f"{arg.offset}(%{arg.register})"}[int(arg.kind)]
    return f"{'s' if arg.signed else 'u'}{arg.size * 8}@{where}"


def run(args: argparse.Namespace) -> int:
    from ..link import Executable
    from ..usdt import find_probes, read_probes
    from .output import print_json, print_table

    path = Executable(args.binary).path
    probes = read_probes(path)
    if args.probe:
        provider, _, name = args.probe.rpartition(":")
        probes = find_probes(probes, provider, name, path)
    if args.json:
        for p in probes:
            error = p.args_error
            print_json({
                "binary": path, "provider": p.provider, "name": p.name, "address": p.address,
                "file_offset": p.file_offset, "semaphore": p.semaphore or None,
                "semaphore_offset": p.semaphore_offset or None, "args_text": p.args_text,
                "args": [] if error else [
                    {"size": a.size, "signed": a.signed, "kind": a.kind.name.lower(), "register": a.register or None,
                     "offset": a.offset, "value": a.value} for a in p.args],
                "error": p.problem or error or None,
            })
        return 0
    if not probes:
        print(f"{path}: no USDT probes")
        return 0
    rows = []
    for p in probes:
        error = p.problem or p.args_error
        rows.append({
            "probe": p.full_name, "address": f"{p.address:#x}", "offset": f"{p.file_offset:#x}",
            "semaphore": (f"{p.semaphore:#x}" + ("" if p.problem else f" (+{p.semaphore_offset:#x})"))
            if p.semaphore else None,
            "args": f"{p.args_text}  [unsupported: {error.split(f'{p.path}: ', 1)[-1]}]" if error
            else " ".join(_arg_text(a) for a in p.args) or None,
        })
    print_table(rows, [("probe", "PROBE"), ("address", "ADDRESS"), ("offset", "FILE OFFSET"),
                       ("semaphore", "SEMAPHORE (FILE OFFSET)"), ("args", "ARGS")])
    return 0
