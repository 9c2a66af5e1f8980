#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Generate bpfkit/metrics/syscall_tables.py: syscall numbers -> names for x86_64 and arm64,
from the kernel's own syscall tables (the files its build generates <asm/unistd_64.h> from).
The `syscall` label decoders of metrics configs (bpfkit's own and ebpf_exporter's) read it.

    python3 scripts/gen_syscalls.py [--kernel VERSION] X86_64_TBL ARM64_TBL

X86_64_TBL  arch/x86/entry/syscalls/syscall_64.tbl; the ABIs "common" and "64" (x32's are
            left out), as arch/x86/entry/syscalls/Makefile builds unistd_64.h.
ARM64_TBL   scripts/syscall.tbl (6.11 and later; arch/arm64/tools/syscall_64.tbl links to it),
            with the ABIs of scripts/Makefile.asm-headers (common, 64) and of
            arch/arm64/kernel/Makefile.syscalls (renameat, rlimit, memfd_secret).

The kernel version named in the module is --kernel, or read from the Makefile at the top of
the tree the first table is in (VERSION, PATCHLEVEL, SUBLEVEL). A Debian linux-source-X.Y
package holds such a tree (/usr/src/linux-source-X.Y.tar.xz): the tables are append-only (a
number is never given to another syscall), so the newest kernel's tables serve every older one.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

OUT = Path(__file__).resolve().parent.parent / "bpfkit/metrics/syscall_tables.py"
X86_64_ABIS = ("common", "64")
ARM64_ABIS = ("common", "64", "renameat", "rlimit", "memfd_secret")


def read_table(path: Path, abis: tuple[str, ...]) -> dict[int, str]:
    """{number: name} of the lines of ``path`` (``<number> <abi> <name> [<entry point> ...]``)
    whose ABI is one of ``abis``; a number given twice among them is an error."""
    table: dict[int, str] = {}
    for lineno, line in enumerate(path.read_text().splitlines(), 1):
        fields = line.split("#", 1)[0].split()
        if not fields:
            continue
        if len(fields) < 3 or not fields[0].isdigit():
            raise SystemExit(f"{path}:{lineno}: not a syscall table line: {line!r}")
        nr, abi, name = int(fields[0]), fields[1], fields[2]
        if abi not in abis:
            continue
        if nr in table:
            raise SystemExit(f"{path}:{lineno}: {nr} is {table[nr]} and {name} for the ABIs {', '.join(abis)}")
        table[nr] = name
    if not table:
        raise SystemExit(f"{path}: no syscall of the ABIs {', '.join(abis)}")
    return table


def kernel_version(table: Path) -> str:
    """VERSION.PATCHLEVEL.SUBLEVEL from the top Makefile of the tree ``table`` is in."""
    for top in table.resolve().parents:
        makefile = top / "Makefile"
        if makefile.is_file():
            head = makefile.read_text(errors="replace")[:2000]
            found = dict(re.findall(r"^(VERSION|PATCHLEVEL|SUBLEVEL|EXTRAVERSION)\s*=[ \t]*(\S*)", head, re.M))
            if "VERSION" in found and "PATCHLEVEL" in found:
                return f"{found['VERSION']}.{found['PATCHLEVEL']}.{found.get('SUBLEVEL') or 0}{found.get('EXTRAVERSION', '')}"
    raise SystemExit(f"{table}: no kernel Makefile above it to read the version from; pass --kernel")


def render(version: str, tables: dict[str, dict[int, str]]) -> str:
    lines = [
        "# SPDX-License-Identifier: Apache-2.0",
        f'"""Syscall numbers -> names of x86_64 and arm64, from Linux {version}\'s syscall tables (generated',
        "by scripts/gen_syscalls.py: do not edit; run it again on a newer kernel's tables).",
        "",
        "x86_64: arch/x86/entry/syscalls/syscall_64.tbl, ABIs " + ", ".join(X86_64_ABIS) + " (not x32's);",
        "arm64: scripts/syscall.tbl, ABIs " + ", ".join(ARM64_ABIS) + " (arch/arm64/kernel/Makefile.syscalls).",
        "The tables only grow: a number keeps its syscall, so these name every older kernel's too.",
        '"""',
        "",
        "from __future__ import annotations",
        "",
        "import os",
        "",
        '__all__ = ["KERNEL", "X86_64", "ARM64", "syscall_name"]',
        "",
        f"KERNEL = {version!r}",
    ]
    # Since 5.1 every architecture numbers new syscalls alike (424 on: the kernel's syscall.tbl
    # unification): what the tables share is written once.
    first, *others = tables.values()
    shared = {nr: name for nr, name in first.items() if all(t.get(nr) == name for t in others)}
    lines += ["", "# The numbers every table gives the same name.", "_SHARED: dict[int, str] = {"]
    lines += [f"    {nr}: {name!r}," for nr, name in sorted(shared.items())]
    lines += ["}"]
    for var, table in tables.items():
        lines += ["", f"{var}: dict[int, str] = {{"]
        lines += [f"    {nr}: {name!r}," for nr, name in sorted(table.items()) if nr not in shared]
        lines += ["    **_SHARED,", "}"]
    lines += [
        "",
        "# uname(2)'s machine (platform.machine()) -> table: arm64 is aarch64 there.",
        '_TABLES = {"x86_64": X86_64, "amd64": X86_64, "aarch64": ARM64, "arm64": ARM64}',
        "",
        "",
        "def syscall_name(nr: int, machine: str | None = None) -> str | None:",
        '    """The name of syscall ``nr`` on ``machine`` (this one\'s by default, as uname(2) and',
        '    platform.machine() name it: x86_64, aarch64); None for a number without a syscall, or a',
        '    machine without a table."""',
        "    table = _TABLES.get(os.uname().machine if machine is None else machine)",
        "    return None if table is None else table.get(nr)",
        "",
    ]
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("x86_64", type=Path, help="arch/x86/entry/syscalls/syscall_64.tbl")
    parser.add_argument("arm64", type=Path, help="scripts/syscall.tbl")
    parser.add_argument("--kernel", help="the kernel version the tables are from (default: from the tree's Makefile)")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    version = args.kernel or kernel_version(args.x86_64)
    tables = {"X86_64": read_table(args.x86_64, X86_64_ABIS), "ARM64": read_table(args.arm64, ARM64_ABIS)}
    args.out.write_text(render(version, tables))
    print(f"{args.out}: Linux {version}: " + ", ".join(f"{k} {len(v)} syscalls" for k, v in tables.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
