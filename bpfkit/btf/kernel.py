"""The running kernel's BTF, parsed once per process and cached.

    from bpfkit.btf import kernel
    vmlinux = kernel.vmlinux()              # /sys/kernel/btf/vmlinux (5.4+), lazily decoded
    nf = kernel.module("nf_conntrack")      # split BTF on top of vmlinux (5.11+)
    kernel.modules()                        # every loaded module with BTF
    custom = kernel.load_file("vmlinux-5.4.btf")   # for kernels without /sys/kernel/btf

Parsing is lazy (BTF.from_bytes(lazy=True)): finding the ~130k types of vmlinux takes about a
tenth of a second, and a type is decoded when something asks for it. The bytes come from
bpfkit._kernel.bpf, the only place that reads /sys.
"""

from __future__ import annotations

import os
import threading

from ..errors import NotFoundError, ParseError
from .spec import BTF, BTF_MAGIC

__all__ = ["vmlinux", "module", "modules", "load_file", "clear_cache"]

_lock = threading.RLock()
_cache: dict[str, BTF] = {}


def vmlinux() -> BTF:
    """The running kernel's BTF (NotSupportedError when the kernel has none)."""
    with _lock:
        btf = _cache.get("vmlinux")
        if btf is None:
            from .._kernel import bpf as _bpf

            btf = _cache["vmlinux"] = BTF.from_bytes(_bpf.vmlinux_btf(), lazy=True, name="vmlinux")
        return btf


def module(name: str) -> BTF:
    """A loaded kernel module's BTF, split on top of :func:`vmlinux`."""
    with _lock:
        key = "module:" + name
        btf = _cache.get(key)
        if btf is None:
            from .._kernel import bpf as _bpf

            base = vmlinux()
            btf = _cache[key] = BTF.from_bytes(_bpf.module_btf(name), base=base, lazy=True, name=name)
        return btf


def module_names() -> list[str]:
    """Names of the loaded modules that have BTF."""
    from .._kernel import bpf as _bpf

    return _bpf.module_btf_names()


def modules() -> list[BTF]:
    """The BTF of every loaded module that has some (each parsed once)."""
    found = []
    for name in module_names():
        try:
            found.append(module(name))
        except NotFoundError:
            continue  # unloaded meanwhile
    return found


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
        from ..elf.reader import SHT_NOBITS, ElfImage

        sec = ElfImage(data, os.fspath(path)).section_named(".BTF")
        if sec is None or sec.type == SHT_NOBITS:
            raise ParseError(f"{path}: ELF file without a .BTF section")
        return BTF.from_bytes(bytes(sec.data), base=base, lazy=True, name=name)
    raise ParseError(f"{path}: neither a BTF blob nor an ELF file with .BTF")


def clear_cache() -> None:
    """Forget parsed kernel BTF (tests; after loading modules)."""
    with _lock:
        _cache.clear()
