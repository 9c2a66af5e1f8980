# SPDX-License-Identifier: Apache-2.0
"""``bpfkit gen skeleton OBJ``: a typed Python module for one object (bpftool gen skeleton,
cilium's bpf2go): Record classes for its structs, IntEnums, and a skeleton class whose
attributes are the object's programs, maps and global variables (docs/skeleton.md).
"""

from __future__ import annotations

import argparse
import os
import sys

DESCRIPTION = (
    "gen skeleton OBJ writes a Python module for OBJ: a Record subclass per struct its maps and "
    "variables use (and event structs), an IntEnum per enum, and a class (bpfkit.skeleton.Skeleton) "
    "with typed attributes for its programs, maps (Map[Key, Value]) and global variables, with "
    "open() -> load() -> attach() -> close(). The module passes mypy --strict."
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="action", metavar="WHAT", required=True)
    skel = sub.add_parser("skeleton", help="a typed skeleton module for OBJ",
                          description="Write a typed skeleton module for OBJ (stdout, or -o FILE).")
    skel.add_argument("object", metavar="OBJ", help="the BPF object (ELF, built with -g for BTF)")
    skel.add_argument("-o", "--output", metavar="FILE", help="write the module here (default: stdout); "
                      "the skeleton then finds OBJ relative to FILE's directory")
    skel.add_argument("--name", metavar="CLASS", help="the skeleton class's name (default: from OBJ's name)")


def run(args: argparse.Namespace) -> int:
    from ..skelgen import generate
    from ..spec.load import load_spec

    spec = load_spec(args.object)
    obj = os.path.abspath(args.object)
    command = ["bpfkit gen skeleton", args.object]
    if args.output:
        where = os.path.relpath(obj, os.path.dirname(os.path.abspath(args.output)))
        command += ["-o", args.output]
    else:
        where = obj
    if args.name:
        command += ["--name", args.name]
    text = generate(spec, args.name, object_path=where, command=" ".join(command))
    if args.output:
        from .._files import write_atomic

        write_atomic(args.output, text, "skeleton")  # a new file renamed onto FILE: no symlink followed
        print(f"wrote {args.output}", file=sys.stderr)
    else:
        sys.stdout.write(text)
    return 0
