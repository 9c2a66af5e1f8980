# SPDX-License-Identifier: Apache-2.0
"""bpfkit: load eBPF objects, attach them and read what they send, from pure Python.

The top level re-exports the everyday names lazily, so ``import bpfkit`` stays cheap:

    spec = bpfkit.load_spec("prog.bpf.o")      # CollectionSpec: plain data
    with bpfkit.Collection(spec) as coll:      # maps, then programs
        ...
"""

from __future__ import annotations

from ._lazy import lazy_getattr
from ._version import __version__

_LAZY = {
    "Map": "bpfkit.maps",
    "MapSpec": "bpfkit.spec.maps",
    "Program": "bpfkit.program",
    "ProgramSpec": "bpfkit.spec.programs",
    "LoadOptions": "bpfkit.program",
    "load_spec": "bpfkit.spec.load",
    "CollectionSpec": "bpfkit.spec.collection",
    "VariableSpec": "bpfkit.spec.collection",
    "Collection": "bpfkit.collection",
    "open": "bpfkit.skeleton",  # bpfkit.open(OBJ): the object as a skeleton, names made at run time
    # The spec layer's names come from it directly: bpfkit.load_spec() imports no kernel module.
    "MapType": "bpfkit.spec.consts",
    "ProgType": "bpfkit.spec.consts",
    "AttachType": "bpfkit.spec.consts",
    "LinkType": "bpfkit.spec.consts",
}

__all__ = [
    "AttachType",
    "Collection",
    "CollectionSpec",
    "LinkType",
    "LoadOptions",
    "Map",
    "MapSpec",
    "MapType",
    "ProgType",
    "Program",
    "ProgramSpec",
    "VariableSpec",
    "load_spec",
    "open",
    "errors",
    "__version__",
]


__getattr__ = lazy_getattr("bpfkit", _LAZY, globals(), (
    "errors", "features", "link", "events", "asm", "btf", "elf", "spec", "user_events", "usdt", "hist"))
