# SPDX-License-Identifier: Apache-2.0
"""What the running kernel says about itself outside bpf(): its build configuration and its
symbol table. Used to resolve ``__kconfig`` and ``__ksym`` externs, as libbpf does.

* Kconfig: ``/boot/config-$(uname -r)``, else ``/proc/config.gz`` (CONFIG_IKCONFIG_PROC), else
  ``/usr/lib/modules/$(uname -r)/config`` (Debian 7.x), plain or gzip-compressed (libbpf reads
  both through gzopen). Debian kernels ship only the first.
* Symbols: ``/proc/kallsyms``, through :mod:`bpfkit._kernel.kallsyms` (its one reader).
  Addresses read as 0 unless the reader may see them
  (kptr_restrict, CAP_SYSLOG); callers treat an all-zero table as "hidden".
"""

from __future__ import annotations

import gzip
import io
import os

from .._files import CONFIG_LIMIT, read_regular
from ..errors import NotFoundError, UsageError, kernel_error

__all__ = ["kconfig_candidates", "read_kconfig", "read_kallsyms", "has_syscall_wrapper"]

PROC_CONFIG = "/proc/config.gz"


def kconfig_candidates() -> list[str]:
    """Where the running kernel's configuration is looked for, in order: libbpf's two places,
    then /usr/lib/modules/RELEASE/config, where Debian's split kernel packages (sid, 7.x) and
    kernel-install layouts keep it."""
    release = os.uname().release
    return [f"/boot/config-{release}", PROC_CONFIG, f"/usr/lib/modules/{release}/config"]


def read_kconfig(path: str | None = None) -> tuple[str, str]:
    """(text of the kernel configuration, the file it came from). ``path`` overrides the
    search; NotFoundError names every place looked at."""
    paths = [path] if path else kconfig_candidates()
    for candidate in paths:
        try:
            raw = read_regular(candidate, "kernel config", CONFIG_LIMIT)
        except NotFoundError:
            continue
        if raw[:2] == b"\x1f\x8b":
            try:
                # Bounded: a small gzip can expand to gigabytes.
                with gzip.GzipFile(fileobj=io.BytesIO(raw)) as gz:
                    raw = gz.read(CONFIG_LIMIT + 1)
            except (OSError, EOFError) as exc:
                raise NotFoundError(f"kernel config {candidate} is not valid gzip: {exc}") from None
            if len(raw) > CONFIG_LIMIT:
                raise UsageError(f"kernel config {candidate} decompresses to more than bpfkit's limit for a "
                                 f"kernel config ({CONFIG_LIMIT >> 20} MiB)")
        return raw.decode("utf-8", errors="replace"), candidate
    raise NotFoundError(f"no kernel configuration found (looked at {', '.join(paths)})")


def read_kallsyms() -> dict[str, int]:
    """{symbol: address} of /proc/kallsyms (:func:`bpfkit._kernel.kallsyms.addresses`): a name
    at several addresses maps to -1."""
    from .kallsyms import addresses  # here: only __ksym externs need it (~1.5 ms of imports)

    return addresses()


def has_syscall_wrapper(kallsyms: dict[str, int] | None = None) -> bool:
    """Whether syscalls enter through arch wrappers (``__x64_sys_bpf``, 4.17+ on x86-64 with
    CONFIG_ARCH_HAS_SYSCALL_WRAPPER): what libbpf reports as LINUX_HAS_SYSCALL_WRAPPER.
    libbpf asks by creating a kprobe on the wrapper; the symbol table answers the same
    question without kprobes (absent on some kernels)."""
    prefix = {"x86_64": "x64", "aarch64": "arm64", "s390x": "s390", "riscv64": "riscv"}.get(os.uname().machine)
    if prefix is None:
        return False
    name = f"__{prefix}_sys_bpf"
    if kallsyms is not None:
        return name in kallsyms
    from .kallsyms import KALLSYMS, has_symbol

    try:
        return has_symbol(name)  # bytes.find over the file: no table built for one name
    except OSError as exc:
        raise kernel_error(f"read {KALLSYMS}", exc.errno or 0) from None
