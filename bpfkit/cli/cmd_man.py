# SPDX-License-Identifier: Apache-2.0
"""``bpfkit man [COMMAND]``: bpfkit's man pages, generated from its parser (bpfkit.cli.manpage)."""

from __future__ import annotations

import argparse
import sys

OFFLINE = True  # reads the parser only
DESCRIPTION = (
    "Show the man page of bpfkit, or of bpfkit COMMAND, generated from bpfkit's parser: through "
    "man(1) on a terminal, as roff otherwise (bpfkit man attach > bpfkit-attach.1). The wheel "
    "installs the same pages under share/man/man1, where man bpfkit-attach finds them."
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from . import COMMANDS

    parser.add_argument("page", nargs="?", metavar="COMMAND", choices=[name for name, _ in COMMANDS],
                        help="the command whose page to show (default: bpfkit's own)")
    parser.add_argument("--directory", metavar="DIR",
                        help="write every page into DIR as bpfkit.1 and bpfkit-COMMAND.1 instead")


def run(args: argparse.Namespace) -> int:
    from .manpage import render, write_pages

    build_parser = args._build_parser  # bpfkit.cli.main's, passed in (main imports this module)

    if args.directory:
        for path in write_pages(build_parser(), args.directory):
            print(path)
        return 0
    page = render(build_parser(), args.page)
    if sys.stdout.isatty():
        import shutil
        import subprocess

        if shutil.which("man"):
            return subprocess.run(["man", "-l", "-"], input=page, text=True, check=False).returncode
    sys.stdout.write(page)
    return 0
