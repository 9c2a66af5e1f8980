# SPDX-License-Identifier: Apache-2.0
"""``bpfkit features``: what this kernel supports, probed like ``bpftool feature probe``."""

from __future__ import annotations

import argparse
import sys

DESCRIPTION = (
    "Probe the running kernel for the BPF features bpfkit uses (system call, links, kprobes and "
    "uprobes, BTF kinds, program and map types, iterator targets) and print whether each is supported "
    "and why. "
    "Every probe is a small real experiment; nothing is left behind."
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("names", nargs="*", default=[], metavar="FEATURE",
                        help="probe only these features (default: all; iterator targets as iter_TARGET)")
    parser.add_argument("--json", action="store_true",
                        help='print one JSON object: {"<feature>": {"supported": bool, "reason": str}, ...}')
    parser.add_argument("--unsupported", action="store_true", help="list only unsupported features")
    parser.add_argument("--newer-than", metavar="VERSION",
                        help="only features whose first kernel is newer than VERSION (e.g. 6.18: what a newer "
                             "kernel offers beyond it)")


def _version(text: str) -> tuple[int, ...]:
    from ..errors import UsageError

    try:
        return tuple(int(x) for x in text.split("."))
    except ValueError:
        raise UsageError(f"--newer-than {text!r}: expected a kernel version such as 6.18") from None


def run(args: argparse.Namespace) -> int:
    from .. import features
    from ..features import probes

    # Iterator targets come last: a kernel may refuse one target while it loads others.
    wanted = args.names or [*features.names(), *probes.ITERATORS]
    if args.newer_than:
        floor = _version(args.newer_than)
        wanted = [n for n in wanted if features.describe(n).min_version
                  and _version(features.describe(n).min_version) > floor]
    results = features.probe_many(wanted)
    if args.unsupported:
        results = {n: r for n, r in results.items() if not r.supported}
    if args.json:
        import json

        json.dump({n: {"supported": r.supported, "reason": r.reason} for n, r in results.items()},
                  sys.stdout, indent=2)
        sys.stdout.write("\n")
        return 0
    width = max((len(n) for n in results), default=10)
    by_group: dict[str, list[str]] = {}
    for name in results:
        by_group.setdefault(features.describe(name).group, []).append(name)
    out = []
    for group in (*features.groups(), probes.ITER_GROUP):
        members = by_group.get(group)
        if not members:
            continue
        out.append(f"{group}:")
        for name in members:
            r = results[name]
            since = f"{r.min_version}+" if r.min_version else ""
            out.append(f"  {name:<{width}}  {'yes' if r.supported else 'no ':<3}  {since:<7}  {r.reason}")
        out.append("")
    total = len(results)
    yes = sum(r.supported for r in results.values())
    out.append(f"{yes} of {total} features supported")
    print("\n".join(out))
    return 0
