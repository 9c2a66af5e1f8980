# SPDX-License-Identifier: Apache-2.0
"""BTF from a file: a raw BTF blob or an ELF file with a .BTF section (a vmlinux image, the
BTFHub-style ``.btf`` files), for kernels that do not expose their BTF. Pure parsing (the spec
layer); the running kernel's BTF from /sys is bpfkit.kernel_btf, which re-exports this.
"""

from __future__ import annotations

import os

from ..errors import ParseError
from .spec import BTF, BTF_MAGIC

__all__ = ["load_file"]


def load_file(path: str | os.PathLike[str], base: BTF | None = None) -> BTF:
    """BTF from a file: a raw BTF blob (what /sys/kernel/btf/vmlinux holds, or ``bpftool btf
    dump ... format raw`` output's source) or an ELF file with a .BTF section (a vmlinux
    image, or the BTFHub-style ``.btf`` files). For kernels that do not expose their BTF."""
    from .._files import BTF_LIMIT, read_regular

    data = read_regular(path, "BTF file", BTF_LIMIT)
    name = os.path.basename(os.fspath(path))
    if data[:2] == BTF_MAGIC.to_bytes(2, "little"):
        return BTF.from_bytes(data, base=base, lazy=True, name=name)
    from ..elf.headers import is_elf
    from ..elf.reader import SHT_NOBITS, ElfImage

    if is_elf(data):
        sec = ElfImage(data, os.fspath(path)).section_named(".BTF")
        if sec is None or sec.type == SHT_NOBITS:
            raise ParseError(f"{path}: ELF file without a .BTF section")
        return BTF.from_bytes(bytes(sec.data), base=base, lazy=True, name=name)
    raise ParseError(f"{path}: neither a BTF blob nor an ELF file with .BTF")

