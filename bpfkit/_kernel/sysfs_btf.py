# SPDX-License-Identifier: Apache-2.0
"""The running kernel's BTF as files: /sys/kernel/btf/vmlinux (CONFIG_DEBUG_INFO_BTF, 5.4+) and
one split BTF file per module beside it (CONFIG_DEBUG_INFO_BTF_MODULES, 5.11+). Reads only, no
bpf(2) (loaded BTF objects by id are bpfkit._kernel.bpf's); bpfkit.kernel_btf parses them.
"""

from __future__ import annotations

import os

from ..errors import kernel_error

TYPE_CHECKING = False  # typing costs ~2 ms to import: its names are for the type checker only
if TYPE_CHECKING:
    import mmap

__all__ = ["VMLINUX_BTF", "KERNEL_BTF_DIR", "vmlinux_btf", "module_btf_names", "module_btf"]

VMLINUX_BTF = "/sys/kernel/btf/vmlinux"
_vmlinux_btf_cache: list[bytes | mmap.mmap] = []


def _mapped(fd: int) -> mmap.mmap | None:
    """The file mapped read-only, or None where it cannot be mapped. sysfs hands out at most a
    page per read(2) (1,350 calls for a 5.5 MB vmlinux BTF); since 6.16
    /sys/kernel/btf/vmlinux can be mmapped (btf_sysfs_vmlinux_mmap maps the kernel's own
    read-only .BTF pages), one call and no copy: BTF.from_bytes reads a read-only mapping in
    place (copying vmlinux's 6.8 MB into fresh memory cost ~2.5 ms, mostly page faults). Older
    kernels refuse (ENODEV): the caller reads instead."""
    import mmap

    try:
        return mmap.mmap(fd, 0, mmap.MAP_PRIVATE, mmap.PROT_READ)
    except (OSError, ValueError):  # ValueError: an empty file cannot be mapped
        return None


def vmlinux_btf() -> bytes | mmap.mmap:
    """The running kernel's BTF blob (CONFIG_DEBUG_INFO_BTF, 5.4+), read once per process: a
    read-only mapping of it where the kernel allows one (6.16+; it stays mapped for the
    process's life), else its bytes."""
    if not _vmlinux_btf_cache:
        try:
            with open(VMLINUX_BTF, "rb") as f:
                _vmlinux_btf_cache.append(_mapped(f.fileno()) or f.read())
        except FileNotFoundError:
            from ..errors import NotSupportedError

            raise NotSupportedError("kernel BTF", f"{VMLINUX_BTF} is missing (CONFIG_DEBUG_INFO_BTF)", "5.4") from None
        except OSError as exc:
            raise kernel_error(f"read {VMLINUX_BTF}", exc.errno or 0) from None
    return _vmlinux_btf_cache[0]


KERNEL_BTF_DIR = "/sys/kernel/btf"


def module_btf_names() -> list[str]:
    """Kernel modules that expose BTF (/sys/kernel/btf/<module>, CONFIG_DEBUG_INFO_BTF_MODULES,
    5.11+), sorted; empty when there are none or no kernel BTF at all."""
    try:
        return sorted(name for name in os.listdir(KERNEL_BTF_DIR) if name != "vmlinux")
    except OSError:
        return []


def module_btf(name: str) -> bytes:
    """The split BTF blob of kernel module ``name`` (its ids continue vmlinux's)."""
    path = os.path.join(KERNEL_BTF_DIR, name)
    try:
        with open(path, "rb") as f:
            return f.read()
    except FileNotFoundError:
        from ..errors import NotFoundError

        raise NotFoundError(f"kernel module {name!r} has no BTF ({path} is missing: not loaded?)") from None
    except OSError as exc:
        raise kernel_error(f"read {path}", exc.errno or 0) from None
