# SPDX-License-Identifier: Apache-2.0
"""The running kernel's BTF, parsed once per process and cached.

    from bpfkit import kernel_btf as kernel
    vmlinux = kernel.vmlinux()              # /sys/kernel/btf/vmlinux (5.4+), lazily decoded
    nf = kernel.module("nf_conntrack")      # split BTF on top of vmlinux (5.11+)
    kernel.modules()                        # every loaded module with BTF
    custom = kernel.load_file("vmlinux-5.4.btf")   # for kernels without /sys/kernel/btf

Parsing is lazy (BTF.from_bytes(lazy=True)): finding the ~130k types of vmlinux takes about
10 ms, and a type is decoded when something asks for it. The bytes come from
bpfkit._kernel.bpf, the only place that reads /sys: this module belongs to the kernel side (its
functions read the running kernel); ``load_file`` is bpfkit.btf.file's, re-exported.
"""

from __future__ import annotations

import _thread  # threading.RLock() makes a _thread.RLock; importing threading costs ~0.4 ms of start-up

from .btf.file import load_file as load_file  # re-exported: kernel.load_file(path)
from .btf.spec import BTF
from .errors import NotFoundError

__all__ = ["vmlinux", "module", "modules", "load_file", "clear_cache", "by_id"]

_lock = _thread.RLock()
_cache: dict[str, BTF] = {}


def vmlinux() -> BTF:
    """The running kernel's BTF (NotSupportedError when the kernel has none)."""
    with _lock:
        btf = _cache.get("vmlinux")
        if btf is None:
            from ._kernel import sysfs_btf as _sysfs_btf

            # read in place: the kernel's BTF does not change while it runs
            btf = _cache["vmlinux"] = BTF.from_bytes(_sysfs_btf.vmlinux_btf(), lazy=True, name="vmlinux", unchanging=True)
        return btf


def module(name: str) -> BTF:
    """A loaded kernel module's BTF, split on top of :func:`vmlinux`."""
    with _lock:
        key = "module:" + name
        btf = _cache.get(key)
        if btf is None:
            from ._kernel import sysfs_btf as _sysfs_btf

            base = vmlinux()
            btf = _cache[key] = BTF.from_bytes(_sysfs_btf.module_btf(name), base=base, lazy=True, name=name)
        return btf


def module_names() -> list[str]:
    """Names of the loaded modules that have BTF."""
    from ._kernel import sysfs_btf as _sysfs_btf

    return _sysfs_btf.module_btf_names()


def modules() -> list[BTF]:
    """The BTF of every loaded module that has some (each parsed once)."""
    found = []
    for name in module_names():
        try:
            found.append(module(name))
        except NotFoundError:
            continue  # unloaded meanwhile
    return found


def by_id(btf_id: int) -> BTF:
    """A loaded BTF object by its id (a map's or program's ``btf_id``), parsed; not cached
    (ids are not reused while the object lives, but a caller holds the result as long as it
    needs it). NotFoundError/KernelError (ENOENT) when it is gone."""
    from ._kernel import bpf as _bpf

    return BTF.from_bytes(_bpf.btf_by_id(btf_id), lazy=True, name=f"btf id {btf_id}")


def clear_cache() -> None:
    """Forget parsed kernel BTF (tests; after loading modules)."""
    with _lock:
        _cache.clear()
