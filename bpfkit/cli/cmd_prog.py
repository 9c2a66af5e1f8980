# SPDX-License-Identifier: Apache-2.0
"""``bpfkit prog list|show``: the programs loaded in the system, like ``bpftool prog``.

    bpfkit prog list [--json]
    bpfkit prog show ID|PINNED_PATH [--json]

JSON (one object a line): {"id", "name", "type", "tag", "gpl", "loaded_at", "uid", "btf_id",
"map_count", "xlated_len", "jited_len", "pinned"}; documented in docs/cli.md.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from .output import add_list_show

if TYPE_CHECKING:
    from ..program import Program

DESCRIPTION = "List every BPF program loaded in the system, or show one by id or pinned path (like bpftool prog)."

COLUMNS = [("id", "ID"), ("type", "TYPE"), ("name", "NAME"), ("tag", "TAG"), ("map_count", "MAPS"),
           ("xlated_len", "XLATED"), ("jited_len", "JITED")]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_list_show(parser, "program")


def describe(prog: Program) -> dict[str, Any]:
    """The JSON shape of one program (from the kernel's bpf_prog_info)."""
    info = prog.info()
    return {
        "id": info.id,
        "name": prog.name,
        "type": info.type_name,
        "tag": info.tag.hex(),
        "gpl": info.gpl_compatible,
        "loaded_at": info.load_time,  # ns since boot
        "uid": info.created_by_uid,
        "btf_id": info.btf_id,
        "map_count": info.nr_map_ids,
        "xlated_len": info.xlated_prog_len,
        "jited_len": info.jited_prog_len,
        "pinned": prog.pinned_path,
    }


def run(args: argparse.Namespace) -> int:
    from ..program import Program, program_ids
    from .output import list_or_show

    return list_or_show(args, Program, program_ids, describe, COLUMNS)
