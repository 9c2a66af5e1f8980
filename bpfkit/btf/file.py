"""BTF from a file: a raw BTF blob or an ELF file with a .BTF section (a vmlinux image, the
BTFHub-style ``.btf`` files), for kernels that do not expose their BTF. Pure parsing (the spec
layer); the running kernel's BTF from /sys is bpfkit.btf.kernel, which re-exports this.
"""

from __future__ import annotations

import os
import struct

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
    if data[:4] == b"\x7fELF":
        blob = _elf_section(data, ".BTF")
        if blob is None:
            raise ParseError(f"{path}: ELF file without a .BTF section")
        return BTF.from_bytes(blob, base=base, lazy=True, name=name)
    raise ParseError(f"{path}: neither a BTF blob nor an ELF file with .BTF")


def _elf_section(data: bytes, wanted: str) -> bytes | None:
    """The contents of section ``wanted`` of a little-endian ELF64 file of any machine and
    type (a vmlinux image is ET_EXEC x86-64, which the BPF object reader refuses)."""
    if len(data) < 64 or data[4] != 2 or data[5] != 1:
        raise ParseError("only little-endian ELF64 files are read for BTF")
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    if shentsize != 64 or shoff + shnum * 64 > len(data) or shstrndx >= shnum:
        raise ParseError("ELF section headers are malformed")
    headers = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * 64) for i in range(shnum)]
    str_off, str_size = headers[shstrndx][4], headers[shstrndx][5]
    names = data[str_off : str_off + str_size]
    for name_off, _type, _flags, _addr, offset, size, *_ in headers:
        end = names.find(b"\0", name_off)
        if names[name_off:end].decode(errors="replace") == wanted:
            if offset + size > len(data):
                raise ParseError(f"ELF section {wanted} runs past the end of the file")
            return data[offset : offset + size]
    return None
