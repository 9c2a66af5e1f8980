"""Kernel symbols from /proc/kallsyms: the core kernel's, loaded modules' (``name [module]``)
and BPF programs' (``bpf_prog_<tag>_<name> [bpf]``, listed while bpf_jit_kallsyms is on, the
default with the JIT), loaded once into sorted arrays and looked up by bisection.

kallsyms gives no sizes: an address belongs to the nearest symbol at or below it, as perf and
bcc's ksym take it. Only text symbols (types t, T, w, W) are kept: stacks hold code addresses.

Addresses read as 0 when kernel.kptr_restrict hides them from the reader (1: without
CAP_SYSLOG; 2: from everyone, kernel/kallsyms.c kallsyms_show_value); a table whose every
address is 0 raises :class:`~bpfkit.errors.KernelPermissionError` saying so.
"""

from __future__ import annotations

import bisect
import errno
import re
from array import array
from typing import NamedTuple

from ..errors import KernelPermissionError, NotFoundError, kernel_error

__all__ = ["KernelSymbols", "KernelSymbol", "KALLSYMS"]

KALLSYMS = "/proc/kallsyms"
KPTR_RESTRICT = "/proc/sys/kernel/kptr_restrict"
# "ffffffff81000000 T _stext" or "ffffffffc0a01000 t foo\t[module]"; text types only.
_LINE = re.compile(rb"^([0-9a-f]+) [tTwW] (\S+)(?:\t\[(\S+)\])?$", re.M)


class KernelSymbol(NamedTuple):
    """An address resolved: the symbol, the offset into it, and its module ('' for vmlinux,
    'bpf' for BPF programs)."""

    name: str
    offset: int
    module: str


class KernelSymbols:
    """The kernel's text symbols, sorted by address. ``lookup(addr)`` -> :class:`KernelSymbol`
    or None (below the first symbol); ``address(name)`` -> the address of a name."""

    def __init__(self, text: bytes, source: str = KALLSYMS) -> None:
        found = _LINE.findall(text)
        if found and not any(int(a, 16) for a, _, _ in found):
            raise KernelPermissionError(
                f"read {source}", errno.EPERM, "CAP_SYSLOG",
                detail=f"every address reads as 0 (kernel.kptr_restrict={_kptr_restrict()})",
                hint="kernel symbols need CAP_SYSLOG with kernel.kptr_restrict=1, or kernel.kptr_restrict=0 "
                     "(2 hides them from everyone): kernel stacks cannot be symbolized")
        modules: dict[bytes, int] = {b"": 0}
        rows = sorted((int(a, 16), name, modules.setdefault(mod, len(modules))) for a, name, mod in found)
        self.addresses = array("Q", [r[0] for r in rows])
        self._names = [r[1] for r in rows]
        self._mods = array("H", [r[2] for r in rows])
        self.modules = [m.decode(errors="replace") for m in modules]
        self.source = source

    @classmethod
    def load(cls, path: str = KALLSYMS) -> KernelSymbols:
        try:
            with open(path, "rb") as f:
                text = f.read()
        except FileNotFoundError:
            raise NotFoundError(f"kernel symbols: {path} does not exist") from None
        except OSError as exc:
            raise kernel_error(f"read {path}", exc.errno or 0) from None
        return cls(text, path)

    def __len__(self) -> int:
        return len(self.addresses)

    def lookup(self, addr: int) -> KernelSymbol | None:
        i = bisect.bisect_right(self.addresses, addr) - 1
        if i < 0:
            return None
        return KernelSymbol(self._names[i].decode(errors="replace"), addr - self.addresses[i],
                            self.modules[self._mods[i]])

    def name(self, addr: int) -> str | None:
        """Just the name at ``addr`` (the fast path of folded stacks)."""
        i = bisect.bisect_right(self.addresses, addr) - 1
        return self._names[i].decode(errors="replace") if i >= 0 else None

    def address(self, name: str) -> int | None:
        """The (first) address of text symbol ``name``, or None."""
        want = name.encode()
        for i, n in enumerate(self._names):
            if n == want:
                return self.addresses[i]
        return None


def _kptr_restrict() -> str:
    try:
        with open(KPTR_RESTRICT) as f:
            return f.read().strip()
    except OSError:
        return "?"
