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
import sys
from array import array
from bisect import bisect_right
from operator import itemgetter
from typing import NamedTuple

from ..errors import KernelPermissionError, NotFoundError, kernel_error

__all__ = ["KernelSymbols", "KernelSymbol", "KALLSYMS"]

KALLSYMS = "/proc/kallsyms"
KPTR_RESTRICT = "/proc/sys/kernel/kptr_restrict"
_READ_SIZE = 1 << 20
_BLOCK = 512  # lines per block of addresses converted together


class KernelSymbol(NamedTuple):
    """An address resolved: the symbol, the offset into it, and its module ('' for vmlinux,
    'bpf' for BPF programs)."""

    name: str
    offset: int
    module: str


class KernelSymbols:
    """The kernel's symbols, sorted by address. ``lookup(addr)`` -> :class:`KernelSymbol` or
    None (below the first text symbol); ``address(name)`` -> the address of a text symbol."""

    def __init__(self, text: bytes, source: str = KALLSYMS) -> None:
        # "ADDRESS TYPE NAME[\t[MODULE]]", the address zero-padded to the word size in lower-case
        # hex: so the lines sort as their addresses do. The load is one decode, one split and
        # one sort (vmlinux's lines come sorted, modules' and BPF programs' follow: timsort
        # merges the runs). Addresses are converted per block of _BLOCK lines when a lookup
        # first lands in it (the block's hex joined, bytes.fromhex, into an array: C loops
        # only); the first line of each block is converted at load. A lookup bisects the block
        # heads, then its block's array, and cuts the name and module out of the one line it
        # lands on; non-text lines stay, a lookup steps over them.
        # benchmarks/bench_symbolize.py measures this against bcc.
        lines = text.decode("utf-8", "replace").split("\n")
        if lines and not lines[-1]:
            lines.pop()
        width = lines[0].find(" ") if lines else -1
        if width <= 0 or len(lines[0]) < width + 3:
            lines, width = [], 16
        lines.sort()
        if lines and int(lines[-1][:width], 16) == 0:  # the highest address is 0: all are
            raise KernelPermissionError(
                f"read {source}", errno.EPERM, "CAP_SYSLOG",
                detail=f"every address reads as 0 (kernel.kptr_restrict={_kptr_restrict()})",
                hint="kernel symbols need CAP_SYSLOG with kernel.kptr_restrict=1, or kernel.kptr_restrict=0 "
                     "(2 hides them from everyone): kernel stacks cannot be symbolized")
        self._lines = lines
        self._width = width
        self._heads = [int(lines[j][:width], 16) for j in range(0, len(lines), _BLOCK)]
        self._blocks: list[array[int] | None] = [None] * len(self._heads)
        self.source = source

    def __len__(self) -> int:
        """How many symbols (all types: text, data, absolute)."""
        return len(self._lines)

    def _block(self, b: int) -> array[int]:
        """Block ``b``'s addresses, converted on first use."""
        blk = self._blocks[b]
        if blk is None:
            blk = self._blocks[b] = _addresses(self._lines[b * _BLOCK:(b + 1) * _BLOCK], self._width)
        return blk

    def index(self, addr: int) -> int:
        """The index of the text symbol (types t, T, w, W) at or below ``addr`` (-1: none). Of
        several names at one address (aliases: __x64_sys_getppid and __do_sys_getppid), a
        global one (T, W) wins over a local one, as perf's choose_best_symbol has it."""
        b = bisect_right(self._heads, addr) - 1
        if b < 0:
            return -1
        blk = self._blocks[b] or self._block(b)
        j = bisect_right(blk, addr) - 1
        i = b * _BLOCK + j
        c = self._lines[i][self._width + 1]
        if c != "T" and c != "W" and (c not in "tw" or j == 0 or blk[j - 1] == blk[j]):
            return self._settle(i)
        return i

    def _settle(self, i: int) -> int:
        """From line ``i`` (the last at its address, not a global text symbol alone there):
        the text symbol chosen at that address, or at the nearest lower address that has one."""
        lines, t, at = self._lines, self._width + 1, self.address_at
        while i >= 0:
            here = at(i)
            j = i
            while j > 0 and at(j - 1) == here:
                j -= 1
            local = -1
            for k in range(i, j - 1, -1):
                c = lines[k][t]
                if c in "TW":
                    return k
                if local < 0 and c in "tw":
                    local = k
            if local >= 0:
                return local
            i = j - 1
        return -1

    def address_at(self, i: int) -> int:
        return self._block(i // _BLOCK)[i % _BLOCK]

    @property
    def addresses(self) -> list[int]:
        """Every symbol's address, sorted."""
        return [a for b in range(len(self._blocks)) for a in self._block(b)]

    def entry(self, i: int) -> tuple[str, str]:
        """(name, module) of the ``i``-th symbol by address (module '' for vmlinux)."""
        line = self._lines[i]
        tab = line.find("\t", self._width + 3)
        return (line[self._width + 3:], "") if tab < 0 else (line[self._width + 3:tab], line[tab + 2:-1])

    @property
    def modules(self) -> list[str]:
        """The modules that have symbols ('' first: vmlinux), in order of address."""
        return list(dict.fromkeys(["", *(self.entry(i)[1] for i, ln in enumerate(self._lines) if "\t" in ln)]))

    @classmethod
    def load(cls, path: str = KALLSYMS) -> KernelSymbols:
        try:
            fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
            try:
                # Large reads: /proc/kallsyms has no size to read up to (st_size 0), and the
                # default buffered read asks for it a few KiB at a time.
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
        w = self._width
        for i, line in enumerate(self._lines):
            if name in line and line[w + 1] in "tTwW" and self.entry(i)[0] == name:
                return self.address_at(i)
        return None


def _addresses(lines: list[str], width: int) -> array[int]:
    """The leading hex address of every line, as one array: the hex digits joined (operator
    .itemgetter slices them in C), bytes.fromhex, big-endian words swapped to the host's."""
    code = {16: "Q", 8: "I"}.get(width)
    if code is None or array(code).itemsize * 2 != width:
        return array("Q", (int(ln[:width], 16) for ln in lines))
    out = array(code)
    out.frombytes(bytes.fromhex("".join(map(itemgetter(slice(0, width)), lines))))
    if sys.byteorder == "little":
        out.byteswap()
    return out


def _kptr_restrict() -> str:
    try:
        with open(KPTR_RESTRICT) as f:
            return f.read().strip()
    except OSError:
        return "?"
