# SPDX-License-Identifier: Apache-2.0
"""``bpfkit list [PATTERN] [--json]``: probes in bpftrace's spelling, like ``bpftrace -l``."""

from __future__ import annotations

import argparse
import json
import sys

DESCRIPTION = (
    "List the probes this kernel (or a binary) offers, one a line, in bpftrace's spelling: "
    "tracepoint:GROUP:NAME, kprobe:FN, rawtracepoint:NAME, fentry:FN, fexit:FN (kernel modules: "
    "kprobe:MOD:FN, fentry:MOD:FN), uprobe:/path:FUNC and usdt:/path:PROVIDER:NAME. PATTERN is a "
    "glob: 'tracepoint:syscalls:*open*', 'kprobe:vfs_*', '*open*' (every kernel kind); uprobes "
    "and USDT probes need the binary: 'uprobe:/bin/bash:*', 'uprobe:libc:mall*', 'usdt:/path:*'. "
    "What cannot be listed (no kprobes, no BTF) is said on stderr."
)
OFFLINE = True  # reads tracefs, BTF and binaries; makes no kernel object


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("pattern", nargs="?", default="", metavar="PATTERN",
                        help="a glob in bpftrace's grammar (default: every kernel probe)")
    parser.add_argument("--json", action="store_true",
                        help='print one JSON list: [{"probe", "kind", "target", "name", ("provider")}, ...]')


def run(args: argparse.Namespace) -> int:
    from ..probelist import list_probes

    listing = list_probes(args.pattern)
    for note in listing.notes:
        print(f"bpfkit: note: {note}", file=sys.stderr)
    if args.json:
        json.dump([p.to_dict() for p in listing.probes], sys.stdout, separators=(",", ":"))
        sys.stdout.write("\n")
    else:
        sys.stdout.write("".join(f"{p}\n" for p in listing.probes))
    return 0
