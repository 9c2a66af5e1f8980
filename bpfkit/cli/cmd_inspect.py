# SPDX-License-Identifier: Apache-2.0
"""``bpfkit inspect OBJ``: the programs, maps and variables of an object file, without loading it."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

OFFLINE = True  # reads files only: prints no warnings (bpfkit.cli.main.setup_warnings)
DESCRIPTION = """\
Parse a BPF ELF object (no kernel access, no root needed) and list its programs (section, type,
attach type and target, instruction count), maps (type, sizes, flags) and global variables (section,
offset, size, type, initial value). With --core, also each CO-RE relocation and how it resolves
against this kernel's BTF (read from /sys/kernel/btf/vmlinux, which needs no root) or --kernel-btf
FILE: the value the instruction gets, or why it is poisoned.
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("object", metavar="OBJ", help="a BPF object file (clang -target bpf -c)")
    parser.add_argument("--json", action="store_true",
                        help='print one JSON object: {"programs": [...], "maps": [...], "variables": [...], "struct_ops": [...]}')
    parser.add_argument("--core", action="store_true",
                        help="also list the CO-RE relocations and how each resolves on this kernel "
                             '(JSON: a "core" list)')
    parser.add_argument("--kernel-btf", metavar="FILE",
                        help="resolve CO-RE relocations against this BTF (raw or in an ELF file) "
                             "instead of /sys/kernel/btf/vmlinux")


def describe(spec: Any) -> dict[str, list[dict[str, Any]]]:
    """The JSON-ready description ``inspect --json`` prints."""
    programs = [
        {
            "name": p.name,
            "section": p.section,
            "type": p.type.kernel_name,
            "attach_type": p.attach_type.kernel_name if p.attach_type is not None else None,
            "attach_to": p.attach_to,
            "insns": p.insn_count,
            "autoload": p.autoload,
        }
        for p in spec.programs.values()
    ]
    maps = [
        {
            "name": m.name,
            "kernel_name": m.kernel_name or m.name,
            "type": m.type.kernel_name,
            "key_size": m.key_size,
            "value_size": m.value_size,
            "max_entries": m.max_entries,
            "flags": m.flags,
            "pinning": m.pinning.name.lower(),
        }
        for m in spec.maps.values()
    ]
    variables = []
    for v in spec.variables.values():
        value = v.value
        variables.append(
            {
                "name": v.name,
                "section": v.section,
                "offset": v.offset,
                "size": v.size,
                "type": v.type_name,
                "value": value if isinstance(value, int) else value.hex(),
            }
        )
    struct_ops = [
        {
            "map": m.name,
            "type": m.struct_ops.kernel_type_name,
            "section": m.struct_ops.section,
            "link": m.struct_ops.link,
            "autocreate": m.struct_ops.autocreate,
            "members": dict(m.struct_ops.programs),
        }
        for m in spec.maps.values() if m.struct_ops is not None
    ]
    return {"programs": programs, "maps": maps, "variables": variables, "struct_ops": struct_ops}


def describe_core(spec: Any, kernel_btf: str | None = None) -> list[dict[str, Any]]:
    """The JSON-ready CO-RE relocations ``inspect --core`` prints: one entry per relocation,
    with the local spec, the kernel's match and the value change (or why it is poisoned)."""
    out = []
    for program, resolutions in spec.resolve_core(kernel_btf).items():
        for r in resolutions:
            out.append({
                "program": program,
                "insn": r.insn,
                "kind": r.kind.label,
                "local": r.local.describe(),
                "target": r.target.describe() if r.target is not None else None,
                "orig": r.result.orig,
                "new": r.result.new,
                "poisoned": r.poisoned,
                "why": r.why,
                "candidates": r.candidates,
            })
    return out


def _table(rows: list[list[str]]) -> list[str]:
    """Aligned rows; every cell through output.shown: names are the object author's (a section
    name may hold ESC or a newline), printed as visible escapes (--json: as JSON escapes)."""
    from .output import shown

    rows = [[shown(cell) for cell in row] for row in rows]
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return ["  " + "  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in rows]


def run(args: argparse.Namespace) -> int:
    from ..errors import BPFKitError
    from ..spec.load import spec_from_file  # the spec layer: inspect imports no kernel module

    spec = spec_from_file(args.object, action="inspect")
    info: dict[str, Any] = dict(describe(spec))
    if args.core or args.kernel_btf:
        try:
            info["core"] = describe_core(spec, args.kernel_btf)
        except BPFKitError as exc:
            raise exc.wrap(f"inspect {args.object}") from None
    if args.json:
        json.dump(info, sys.stdout, indent=2)
        sys.stdout.write("\n")
        return 0
    from .output import shown

    out = [f"{shown(args.object)}: license {spec.license or '(none)'!r}"
           + (f", kernel version {spec.kernel_version:#x}" if spec.kernel_version else "")]
    out.append(f"programs ({len(info['programs'])}):")
    if info["programs"]:
        rows = [["NAME", "TYPE", "ATTACH TYPE", "SECTION", "TARGET", "INSNS"]]
        for p in info["programs"]:
            name = p["name"] if p["autoload"] else p["name"] + " (not autoloaded)"
            rows.append([name, p["type"], p["attach_type"] or "-", p["section"], p["attach_to"] or "-", str(p["insns"])])
        out += _table(rows)
    out.append(f"maps ({len(info['maps'])}):")
    if info["maps"]:
        rows = [["NAME", "TYPE", "KEY", "VALUE", "MAX ENTRIES", "FLAGS", "PINNING"]]
        for m in info["maps"]:
            rows.append([m["name"], m["type"], str(m["key_size"]), str(m["value_size"]), str(m["max_entries"]),
                         f"{m['flags']:#x}", m["pinning"]])
        out += _table(rows)
    if info["struct_ops"]:
        out.append(f"struct_ops ({len(info['struct_ops'])}): registered by `bpfkit attach` (a bpf_link for .struct_ops.link)")
        rows = [["MAP", "STRUCT", "SECTION", "MEMBERS"]]
        for so in info["struct_ops"]:
            members = ", ".join(f"{k}={v}" for k, v in so["members"].items()) or "-"
            name = so["map"] if so["autocreate"] else so["map"] + " (not created by default)"
            rows.append([name, so["type"], so["section"], members])
        out += _table(rows)
    out.append(f"variables ({len(info['variables'])}):")
    if info["variables"]:
        rows = [["NAME", "SECTION", "OFFSET", "SIZE", "TYPE", "VALUE"]]
        for v in info["variables"]:
            value = v["value"]
            text = str(value) if isinstance(value, int) else (value[:32] + "..." if len(value) > 32 else value or "-")
            rows.append([v["name"], v["section"], str(v["offset"]), str(v["size"]), v["type"] or "-", text])
        out += _table(rows)
    if "core" in info:
        out.append(f"CO-RE relocations ({len(info['core'])}), against {args.kernel_btf or 'this kernel'}:")
        if info["core"]:
            rows = [["PROGRAM", "INSN", "KIND", "LOCAL", "KERNEL", "VALUE"]]
            for r in info["core"]:
                if r["poisoned"]:
                    value = "poisoned: " + (r["why"] or "cannot be satisfied")
                elif r["target"] is None and r["kind"] != "type_id_local":
                    value = f"{r['orig']} -> {r['new']} ({r['why'] or 'not in the kernel'})"
                else:
                    value = f"{r['orig']} -> {r['new']}"
                rows.append([r["program"], str(r["insn"]), r["kind"], r["local"], r["target"] or "-", value])
            out += _table(rows)
    print("\n".join(out))
    return 0
