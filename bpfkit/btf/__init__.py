"""BTF: the BPF Type Format. Parsing and marshalling of .BTF and .BTF.ext, the type model,
CO-RE relocations and sanitising for older kernels.

    btf = BTF.from_bytes(open("/sys/kernel/btf/vmlinux", "rb").read(), lazy=True)
    task = btf.lookup("task_struct", Kind.STRUCT)
    btf.size_of(task.id)

Modules: ``types`` (one class per kind), ``spec`` (BTF blobs, lazy parsing, lookups),
``ext`` (.BTF.ext), ``core`` (CO-RE relocations), ``sanitize`` (rewrites for older kernels),
``kernel`` (the running kernel's BTF, cached). Pure data except ``kernel``, which gets the
bytes from bpfkit._kernel (loading BTF is bpfkit._kernel.bpf.btf_load). docs/core.md.
"""

from .ext import BTFExt, CORERelo, InfoBlock
from .spec import BTF, StringTable, TypeTable, essential_name
from .types import *  # noqa: F403
from .types import __all__ as _types_all

__all__ = ["BTF", "BTFExt", "CORERelo", "InfoBlock", "StringTable", "TypeTable", "essential_name", *_types_all]
