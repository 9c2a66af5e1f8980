# SPDX-License-Identifier: Apache-2.0
"""Build bpfkit's API reference from its docstrings with pdoc, and fail on any pdoc warning.

    .venv/bin/python scripts/api_docs.py [OUTPUT_DIR]     # default: build/api

The modules are bpfkit's public ones (what docs/ and README.md teach); run by scripts/test.sh so
that a docstring or annotation pdoc cannot read fails CI.
"""

from __future__ import annotations

import importlib
import sys
import warnings
from pathlib import Path

import pdoc

PUBLIC_MODULES = [
    "bpfkit", "bpfkit.spec", "bpfkit.btf", "bpfkit.elf", "bpfkit.sections", "bpfkit.asm",
    "bpfkit.collection", "bpfkit.maps", "bpfkit.program", "bpfkit.struct_ops", "bpfkit.kernel_btf",
    "bpfkit.features", "bpfkit.link", "bpfkit.probespec", "bpfkit.usdt", "bpfkit.skeleton", "bpfkit.events",
    "bpfkit.user_events", "bpfkit.hist", "bpfkit.symbols", "bpfkit.profile", "bpfkit.metrics", "bpfkit.syscalls",
]
# The rest of bpfkit's top level serves the modules above or the command line, not users:
# module -> what it is (tests/test_api_docs.py checks that every module is in one list or the other).
INTERNAL_MODULES = {
    "bpfkit.cli": "the command line (docs/cli.md and the man pages document it)",
    "bpfkit.kernelfit": "fits a spec to the running kernel, inside Collection's load",
    "bpfkit.skelgen": "the text of generated skeletons (`bpfkit gen skeleton`; bpfkit.skeleton is the API)",
    "bpfkit.attach": "the old name of bpfkit.link.attach, kept importable",
    "bpfkit.probelist": "`bpfkit list`'s probe listing",
    "bpfkit.freplace": "freplace targets, used through bpfkit.link.freplace",
}
# Names that packages resolve lazily (a module __getattr__): resolved first so pdoc sees them.
LAZY = {"bpfkit.usdt": ["attach_usdt", "USDTLink"], "bpfkit.maps": ["MapInfo"], "bpfkit.program": ["ProgramInfo"]}


def main(argv: list[str]) -> int:
    out = Path(argv[1] if len(argv) > 1 else "build/api")
    for module, names in LAZY.items():
        mod = importlib.import_module(module)
        for name in names:
            getattr(mod, name)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        pdoc.pdoc(*PUBLIC_MODULES, output_directory=out)
    if caught:
        for w in caught:
            print(f"api_docs: pdoc warning: {w.message}", file=sys.stderr)
        print(f"api_docs: {len(caught)} warning(s); fix the docstrings or annotations above", file=sys.stderr)
        return 1
    pages = sorted(out.rglob("*.html"))
    print(f"api_docs: {len(pages)} pages in {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
