# SPDX-License-Identifier: Apache-2.0
"""BTF: the BPF Type Format. Parsing and marshalling of .BTF and .BTF.ext, the type model,
CO-RE relocations and sanitising for older kernels.

    btf = BTF.from_bytes(open("/sys/kernel/btf/vmlinux", "rb").read(), lazy=True)
    task = btf.lookup("task_struct", Kind.STRUCT)
    btf.size_of(task.id)

Modules: ``types`` (one class per kind), ``spec`` (BTF blobs, lazy parsing, lookups),
``ext`` (.BTF.ext), ``core`` (CO-RE relocations), ``sanitize`` (rewrites for older kernels),
``layout`` (where each part of a typed value lies: the one walker), ``values`` (typed values
<-> bytes), ``file`` (BTF from a raw or ELF file). Pure data: the running kernel's BTF is
bpfkit.kernel_btf's, bpftool's JSON of values bpfkit.cli.bpftool_json's, and loading BTF
bpfkit._kernel.bpf.btf_load's. docs/core.md.
"""

from . import types
from .ext import BTFExt, CORERelo, InfoBlock
from .spec import BTF, StringTable, TypeTable, essential_name
from .types import *  # noqa: F403 - the type model, one class per kind: all of types.__all__

# tests/test_btf.py checks that this re-exports all of btf.types.__all__.
__all__ = ["BTF", "BTFExt", "CORERelo", "InfoBlock", "StringTable", "TypeTable", "essential_name"]
__all__ += types.__all__
