"""BTF: the BPF Type Format. Parsing and marshalling of .BTF and .BTF.ext, and the type model.

    btf = BTF.from_bytes(open("/sys/kernel/btf/vmlinux", "rb").read())
    task = btf.lookup("task_struct", Kind.STRUCT)
    btf.size_of(task.id)

Pure data: nothing here talks to the kernel (loading BTF is bpfkit._kernel.bpf.btf_load).
"""

from .ext import BTFExt, CORERelo, InfoBlock
from .spec import BTF, StringTable
from .types import *  # noqa: F401,F403
from .types import __all__ as _types_all

__all__ = ["BTF", "BTFExt", "CORERelo", "InfoBlock", "StringTable", *_types_all]
