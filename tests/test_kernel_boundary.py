# SPDX-License-Identifier: Apache-2.0
"""cffi stays inside bpfkit._kernel (issue #36 item 4), checked by reading the sources with ast.

The map and program objects and the commands that show them hand bytes and typed records
(MapInfo, ProgramInfo) across the syscall layer: none of them imports cffi or the ABI module,
or uses an ``ffi`` name, even inside a function. And ``bpfkit map dump`` reads through Map's one
batch reader (Map.dump_batches), with no batch loop of its own (issue #36 item 1).
"""

from __future__ import annotations

import ast

import pytest

from conftest import package_dir

PACKAGE = package_dir()
# The modules that must not touch a cffi object: the kernel objects, and the commands over them.
NO_CFFI = ["maps.py", "program.py", "cli/cmd_map.py", "cli/cmd_prog.py"]


def cffi_uses(source: str) -> list[str]:
    """Where ``source`` imports cffi or bpfkit._kernel.abi (the ffi), or uses a name ``ffi``."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [f"line {node.lineno}: import {a.name}" for a in node.names if a.name.split(".")[0] == "cffi"]
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            names = {a.name for a in node.names}
            if module.split(".")[0] == "cffi" or module.endswith("_kernel.abi") or module.endswith("_abi_ffi") \
                    or (module.endswith("_kernel") and names & {"abi", "_abi_ffi"}):
                found.append(f"line {node.lineno}: from {'.' * node.level}{module} import {', '.join(sorted(names))}")
        elif isinstance(node, ast.Name) and node.id == "ffi":
            found.append(f"line {node.lineno}: ffi")
    return found


@pytest.mark.parametrize("module", NO_CFFI)
def test_no_cffi_outside_the_kernel_layer(module: str) -> None:
    uses = cffi_uses((PACKAGE / module).read_text())
    assert not uses, f"bpfkit/{module} uses cffi outside bpfkit._kernel: {uses}"


def test_the_check_sees_what_it_looks_for() -> None:
    """The checker itself: each way of reaching the ffi is found (so a pass means something)."""
    for source in ("from ._kernel.abi import ffi", "from .._kernel import abi", "import cffi",
                   "def f():\n    from bpfkit._kernel.abi import ffi\n    return ffi.NULL", "x = ffi"):
        assert cffi_uses(source), source
    assert not cffi_uses("from ._kernel import info as _info\nx = _info.map_info(3)")


def test_map_dump_reads_through_the_map() -> None:
    """cli/cmd_map.py has no batch loop (no bpf() map command, no _NO_BATCH) of its own."""
    tree = ast.parse((PACKAGE / "cli/cmd_map.py").read_text())
    imports = [n for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)]
    kernel_imports = [f"line {n.lineno}: {n.module}" for n in imports
                      if (n.module or "").endswith(("_kernel.bpf", "_kernel.map_elems"))
                      or ((n.module or "").endswith("_kernel") and {a.name for a in n.names} & {"bpf", "map_elems"})]
    names = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)} | \
            {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)}
    assert not kernel_imports, kernel_imports
    assert not names & {"_NO_BATCH", "map_batch", "map_next_key", "map_lookup", "lookup_batches"}
    assert "dump_batches" in names
