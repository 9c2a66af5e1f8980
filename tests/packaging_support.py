# SPDX-License-Identifier: Apache-2.0
"""What bpfkit's wheel must hold, checked on its file list: by tests/test_packaging.py and by
scripts/wheel-legs.sh (which also compares the wheel built from the sdist with one built from
the tree). Plain Python, no pytest: the script imports it from the checkout."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

# Files the installed package needs at run time or that its metadata promises.
REQUIRED = [
    "bpfkit/__init__.py",
    "bpfkit/py.typed",  # PEP 561: the package's own type hints (Typing :: Typed).
    "bpfkit/_kernel/_abi_ffi.py",  # cffi's pre-generated out-of-line ABI module (scripts/gen_abi.py).
    "bpfkit/examples/opensnoop.bpf.c",  # docs/cli.md: ships with the package.
]
# The dist-info directory's: the licence texts (PEP 639's license-files) and the console script.
DIST_INFO_REQUIRED = ["licenses/LICENSE", "entry_points.txt", "METADATA"]


def licence_texts() -> list[str]:
    """The checkout's LICENSES/*.txt, as the wheel's dist-info holds them."""
    return sorted(f"licenses/LICENSES/{p.name}" for p in (REPO / "LICENSES").glob("*.txt"))


def wheel_problems(names: list[str]) -> list[str]:
    """What is wrong with a wheel whose members are NAMES: a file missing from it, or one that
    should not be in it (anything outside bpfkit/, its .dist-info and .data; an object file
    built against this machine's kernel; bytecode)."""
    infos = {n.split("/", 1)[0] for n in names if re.fullmatch(r"bpfkit-[^/]+\.dist-info/.*", n)}
    if len(infos) != 1:
        return [f"expected one bpfkit-*.dist-info directory, found {sorted(infos) or 'none'}"]
    info = infos.pop()
    have = set(names)
    problems = [f"missing {n}" for n in REQUIRED if n not in have]
    problems += [f"missing {info}/{n}" for n in DIST_INFO_REQUIRED + licence_texts() if f"{info}/{n}" not in have]
    for n in names:
        top = n.split("/", 1)[0]
        if top not in ("bpfkit", info, info.replace(".dist-info", ".data")):
            problems.append(f"unexpected file outside the package: {n}")
        elif n.endswith((".o", ".pyc")) or "/__pycache__/" in n:
            problems.append(f"unexpected build product: {n}")
    return problems
