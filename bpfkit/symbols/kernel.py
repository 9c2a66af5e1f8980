# SPDX-License-Identifier: Apache-2.0
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

import errno
import os
from bisect import bisect_right
from typing import NamedTuple

from ..errors import KernelPermissionError, NotFoundError, kernel_error

__all__ = ["KernelSymbols", "KernelSymbol", "KALLSYMS"]

KALLSYMS = "/proc/kallsyms"
KPTR_RESTRICT = "/proc/sys/kernel/kptr_restrict"
_READ_SIZE = 8 << 20


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
        # "ADDRESS TYPE NAME[\t[MODULE]]", the address zero-padded to the word size in lower-case
        # hex: so the lines sort as their addresses do, and a lookup bisects the lines
        # themselves (the name and module are cut out of the one it lands on). Nothing is
        # converted per symbol at load, which benchmarks/bench_symbolize.py measures against bcc.
        lines = text.decode("utf-8", "replace").split("\n")
        width = lines[0].find(" ") if lines else -1
        keep = [ln for ln in lines if len(ln) > width + 3 and ln[width + 1] in "tTwW"] if width > 0 else []
        keep.sort()  # vmlinux's come sorted; modules' and BPF programs' follow (timsort: runs)
        if keep and keep[-1].startswith("0" * width):  # the highest address is 0: all are
            raise KernelPermissionError(
                f"read {source}", errno.EPERM, "CAP_SYSLOG",
                detail=f"every address reads as 0 (kernel.kptr_restrict={_kptr_restrict()})",
                hint="kernel symbols need CAP_SYSLOG with kernel.kptr_restrict=1, or kernel.kptr_restrict=0 "
                     "(2 hides them from everyone): kernel stacks cannot be symbolized")
        self._lines = keep
        self._width = width
        self._fmt = f"0{width}x"
        self._skip = width + 3  # the name starts after "ADDRESS T "
        self.source = source

    def __len__(self) -> int:
        return len(self._lines)

    def index(self, addr: int) -> int:
        """The index of the symbol at or below ``addr`` (-1: none). Of several names at one
        address (aliases: __x64_sys_getppid and __do_sys_getppid), a global one (T, W) wins
        over a local one, as perf's choose_best_symbol has it."""
        lines = self._lines
        i = bisect_right(lines, format(addr, self._fmt) + "~") - 1  # "~" sorts after " T name"
        w = self._width
        if i > 0 and lines[i][w + 1] in "tw" and lines[i - 1].startswith(lines[i][:w]):
            prefix = lines[i][:w]
            j = i
            while j > 0 and lines[j - 1].startswith(prefix):
                j -= 1
            for k in range(j, i):
                if lines[k][w + 1] in "TW":
                    return k
        return i

    def address_at(self, i: int) -> int:
        return int(self._lines[i][:self._width], 16)

    @property
    def addresses(self) -> list[int]:
        """Every symbol's address, sorted (computed on each call)."""
        return [int(ln[:self._width], 16) for ln in self._lines]

    def entry(self, i: int) -> tuple[str, str]:
        """(name, module) of the ``i``-th symbol by address (module '' for vmlinux)."""
        rest = self._lines[i][self._skip:]
        tab = rest.find("\t")
        return (rest, "") if tab < 0 else (rest[:tab], rest[tab + 2:-1])  # "name\t[module]"

    @property
    def modules(self) -> list[str]:
        """The modules that have symbols ('' first: vmlinux), in order of appearance."""
        return list(dict.fromkeys(["", *(self.entry(i)[1] for i, ln in enumerate(self._lines) if "\t" in ln)]))

    @classmethod
    def load(cls, path: str = KALLSYMS) -> KernelSymbols:
        try:
            fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
            try:
                # Large reads: /proc/kallsyms has no size to read up to (st_size 0), and the
                # default buffered read asks for it a few KiB at a time (measured: 8 MiB reads
                # take ~60 ms against ~90 ms).
                parts = []
                while chunk := os.read(fd, _READ_SIZE):
                    parts.append(chunk)
            finally:
                os.close(fd)
            text = b"".join(parts)
        except FileNotFoundError:
            raise NotFoundError(f"kernel symbols: {path} does not exist") from None
        except OSError as exc:
            raise kernel_error(f"read {path}", exc.errno or 0) from None
        return cls(text, path)

    def lookup(self, addr: int) -> KernelSymbol | None:
        i = self.index(addr)
        if i < 0:
            return None
        name, module = self.entry(i)
        return KernelSymbol(name, addr - self.address_at(i), module)

    def name(self, addr: int) -> str | None:
        """Just the name at ``addr`` (the fast path of folded stacks)."""
        i = self.index(addr)
        return self.entry(i)[0] if i >= 0 else None

    def address(self, name: str) -> int | None:
        """The (first) address of text symbol ``name``, or None."""
        for i, line in enumerate(self._lines):
            if name in line and self.entry(i)[0] == name:
                return self.address_at(i)
        return None


def _kptr_restrict() -> str:
    try:
        with open(KPTR_RESTRICT) as f:
            return f.read().strip()
    except OSError:
        return "?"
