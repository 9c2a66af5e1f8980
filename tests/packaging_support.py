# SPDX-License-Identifier: Apache-2.0
"""What bpfkit's wheel must hold, checked on its file list: by tests/test_packaging.py and by
scripts/wheel-legs.sh (which also compares the wheel built from the sdist with one built from
the tree). Plain Python, no pytest: the script imports it from the checkout."""

from __future__ import annotations

import hashlib
import re
import zipfile
from email.message import Message
from email.parser import Parser
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

# Files the installed package needs at run time or that its metadata promises.
REQUIRED = [
    "bpfkit/__init__.py",
    "_bpfkit_console.py",  # the console script's entry point (quiet Ctrl-C before bpfkit is imported)
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
    should not be in it (anything outside bpfkit/, _bpfkit_console.py, its .dist-info and .data; an object file
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
        if top not in ("bpfkit", "_bpfkit_console.py", info, info.replace(".dist-info", ".data")):
            problems.append(f"unexpected file outside the package: {n}")
        elif n.endswith((".o", ".pyc")) or "/__pycache__/" in n:
            problems.append(f"unexpected build product: {n}")
    return problems


def wheel_members(wheel: Path) -> dict[str, str]:
    """A wheel's files and their SHA-256 digests, RECORD aside (it lists the others)."""
    with zipfile.ZipFile(wheel) as z:
        return {n: hashlib.sha256(z.read(n)).hexdigest() for n in z.namelist() if not n.endswith("/RECORD")}


def wheel_differences(from_sdist: Path, direct: Path) -> list[str]:
    """How the wheel built from the sdist differs from the one built from the tree: files only in
    one, files whose bytes differ."""
    a, b = wheel_members(from_sdist), wheel_members(direct)
    out = [f"only in the wheel built from the sdist: {n}" for n in sorted(a.keys() - b.keys())]
    out += [f"only in the wheel built from the tree: {n}" for n in sorted(b.keys() - a.keys())]
    return out + [f"differs between the two wheels: {n}" for n in sorted(a.keys() & b.keys()) if a[n] != b[n]]


def wheel_metadata(wheel: Path) -> Message:
    """The wheel's METADATA (Requires-Dist, License-Expression, ...)."""
    with zipfile.ZipFile(wheel) as z:
        return Parser().parsestr(z.read(next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))).decode())
