# SPDX-License-Identifier: Apache-2.0
"""The spec layer: what an object file holds, as plain data, with no kernel in sight.

Parsing an object (bpfkit.elf), its BTF (bpfkit.btf) and its section names (bpfkit.sections)
gives a :class:`CollectionSpec` of :class:`ProgramSpec`, :class:`MapSpec`,
:class:`VariableSpec` and :class:`StructOpsSpec`. Nothing in this layer makes a syscall or
imports the kernel layer (bpfkit._kernel, maps/program/collection's kernel objects, link,
events), so specs can be built, inspected, edited, fuzzed and CO-RE-resolved against a BTF file
offline; tests/test_layers.py checks it (docs/architecture.md).

    spec = bpfkit.spec.load_spec("prog.bpf.o")

Names are imported lazily, so ``bpfkit.spec.consts`` (imported by the ABI layer) stays cheap.
"""

from __future__ import annotations

from .._lazy import lazy_getattr

_LAZY = {
    "CollectionSpec": "bpfkit.spec.collection",
    "VariableSpec": "bpfkit.spec.collection",
    "MapSpec": "bpfkit.spec.maps",
    "PinType": "bpfkit.spec.maps",
    "ProgramSpec": "bpfkit.spec.programs",
    "Reference": "bpfkit.spec.programs",
    "RefKind": "bpfkit.spec.programs",
    "StructOpsSpec": "bpfkit.spec.struct_ops",
    "load_spec": "bpfkit.spec.load",
    "spec_from_file": "bpfkit.spec.load",
    "object_name": "bpfkit.spec.load",
    "MapType": "bpfkit.spec.consts",
    "ProgType": "bpfkit.spec.consts",
    "AttachType": "bpfkit.spec.consts",
}

__all__ = [
    "CollectionSpec", "VariableSpec", "MapSpec", "PinType", "ProgramSpec", "Reference", "RefKind",
    "StructOpsSpec", "load_spec", "spec_from_file", "object_name", "MapType", "ProgType", "AttachType",
]
assert set(__all__) == set(_LAZY)  # one list for the lazy table and the star-import


__getattr__ = lazy_getattr("bpfkit.spec", _LAZY, globals())
