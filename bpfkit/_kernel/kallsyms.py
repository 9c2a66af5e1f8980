# SPDX-License-Identifier: Apache-2.0
"""/proc/kallsyms, the kernel's symbol table: the one module that reads it.

Each line is ``ADDRESS TYPE NAME`` and, for a loaded module's symbol, a tab and ``[MODULE]``
(``[bpf]`` for BPF programs, listed while bpf_jit_kallsyms is on; kernel/kallsyms.c
s_show). ADDRESS is zero-padded lower-case hex of the word size; TYPE is nm's letter (t/T
text, w/W weak, d/D data, ...). vmlinux's lines come sorted by address, modules' and BPF
programs' follow. The file has no size (st_size 0): it is read in 256 KiB pieces, at most
:data:`LIMIT` bytes (a kernel's is ~5-20 MiB), and streamed: no more than one piece and one
line are held, except where a caller keeps the whole table (the symbolizer's).

Addresses read as 0 when kernel.kptr_restrict hides them from the reader (1: without
CAP_SYSLOG; 2: from everyone; kernel/kallsyms.c kallsyms_show_value): the names stay right,
every address is 0. Reading needs no privilege (mode 0444).

What callers ask of it:

* :func:`symbols`: the lines parsed, one ``(address, type, name, module)`` at a time.
* :func:`addresses`: name -> address, for ``__ksym`` variables and kconfig's syscall wrapper.
* :func:`has_symbol`: is ``name`` (or ``module:name``) present, for telling a missing kprobe
  target from other EINVALs.
* :func:`function_names`: the text symbols, for kprobe.multi patterns and did-you-mean hints.
* :class:`KernelSymbols`: address -> symbol, for the symbolizer and the ``ksym`` metrics
  decoder.

Every function takes the path, so tests read a small file of the same format.
"""

from __future__ import annotations

import collections
import errno
import os
import sys
from array import array
from bisect import bisect_right
from operator import itemgetter

from ..errors import KernelPermissionError, NotFoundError, UsageError, kernel_error

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterator
    from typing import NamedTuple, TypeAlias

    _Addresses: TypeAlias = array[int]
else:
    _Addresses = array  # array[int] is not subscriptable at run time before Python 3.12 (pdoc evaluates it)

__all__ = ["KALLSYMS", "LIMIT", "read", "symbols", "parse_line", "addresses", "has_symbol", "function_names",
           "KernelSymbols", "KernelSymbol", "kptr_restrict"]

KALLSYMS = "/proc/kallsyms"
KPTR_RESTRICT = "/proc/sys/kernel/kptr_restrict"
# The largest kallsyms seen: ~20 MiB (a distribution kernel with CONFIG_KALLSYMS_ALL and a few
# hundred modules loaded). A path given for tests is bounded by the same.
LIMIT = 256 << 20
_READ_SIZE = 256 << 10  # a piece: its lines, decoded, are what a streaming reader holds
_BLOCK = 512  # lines per block of addresses converted together (KernelSymbols)

Ksym = tuple[int, str, str, str]  # (address, type, name, module): module '' for vmlinux


# --------------------------------------------------------------------------- reading
def _blocks(path: str) -> Iterator[bytes]:
    """``path`` in pieces of whole lines (of about :data:`_READ_SIZE` bytes; the last one's
    newline optional), at most :data:`LIMIT` bytes read. OSError as the kernel gives it.

    procfs answers a read of /proc/kallsyms with one seq_file page (~4 KiB) whatever the size
    asked, so each read goes into the free end of one buffer, and a piece is copied out once
    it is full (an os.read of its own a time allocated the whole size for each 4 KiB: ~40%
    slower than one buffer, in a fresh process, 5.4 MiB of kallsyms on 6.18)."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        buf = bytearray(_READ_SIZE)
        total = filled = 0
        while True:
            with memoryview(buf) as view:
                n = os.readv(fd, [view[filled:]])
            filled += n
            total += n
            if total > LIMIT:
                raise UsageError(f"kernel symbols {path} is over bpfkit's size limit for it ({LIMIT >> 20} MiB)")
            if n and filled < len(buf):
                continue
            if not n:
                if filled:
                    yield bytes(buf[:filled])
                return
            cut = buf.rfind(b"\n", 0, filled) + 1
            if not cut:  # a line longer than the buffer (bounded by LIMIT): a larger buffer
                buf.extend(bytes(len(buf)))
                continue
            yield bytes(buf[:cut])
            buf[:filled - cut] = buf[cut:filled]
            filled -= cut
    finally:
        os.close(fd)


def read(path: str = KALLSYMS) -> bytes:
    """All of ``path``, for a caller that keeps the whole table."""
    return b"".join(_blocks(path))


def _line_lists(path: str) -> Iterator[list[str]]:
    """The lines of each piece of :func:`_blocks`, decoded (one decode a piece, whole lines:
    no character is cut), a list a piece: no generator step a line."""
    for block in _blocks(path):
        yield block.decode("utf-8", "replace").split("\n")


def parse_line(line: str) -> Ksym | None:
    """``(address, type, name, module)`` of one line; None for one that is not a symbol."""
    parts = line.split()
    if len(parts) < 3:
        return None
    try:
        address = int(parts[0], 16)
    except ValueError:
        return None
    return address, parts[1], parts[2], parts[3].strip("[]") if len(parts) > 3 else ""


def symbols(path: str = KALLSYMS) -> Iterator[Ksym]:
    """Every symbol of ``path``, streamed. OSError as the kernel gives it."""
    for lines in _line_lists(path):
        for line in lines:
            sym = parse_line(line)
            if sym is not None:
                yield sym


# --------------------------------------------------------------------------- lookups
def addresses(path: str = KALLSYMS) -> dict[str, int]:
    """{symbol: address}; a name defined more than once at different addresses (static
    symbols in several files) maps to -1. Module symbols (``name [module]``) are included.
    An unreadable file raises the KernelError of ``read PATH``."""
    table: dict[str, int] = {}
    try:
        for lines in _line_lists(path):
            for line in lines:
                parts = line.split()
                if len(parts) < 3:
                    continue
                name = parts[2]
                address = int(parts[0], 16)
                known = table.get(name)
                if known is None:
                    table[name] = address
                elif known != address:
                    table[name] = -1
    except OSError as exc:
        raise kernel_error(f"read {path}", exc.errno or 0) from None
    return table


def has_symbol(symbol: str, path: str = KALLSYMS) -> bool:
    """Whether ``path`` lists ``symbol``, of any type (``mod:sym`` looks in module ``mod``
    only). OSError as the kernel gives it."""
    module, _, name = symbol.rpartition(":")
    needle = (" " + name).encode()
    in_module = f"[{module}]".encode()
    for data in _blocks(path):
        # bytes.find over each piece (C), not a loop over its lines: a piece holds whole lines.
        pos = 0
        while (pos := data.find(needle, pos)) >= 0:
            end = data.find(b"\n", pos)
            end = len(data) if end < 0 else end
            rest = data[pos + len(needle):end]
            if (rest == b"" or rest[:1] == b"\t") and (not module or rest.strip() == in_module):
                return True
            pos = end
    return False


def function_names(path: str = KALLSYMS, types: tuple[str, ...] = ("t", "T"), exclude: tuple[str, ...] = ()) -> set[str]:
    """The names of the symbols of ``types`` (text: t, T), module suffixes dropped, but those
    starting with one of ``exclude``. OSError as the kernel gives it."""
    names: set[str] = set()
    for lines in _line_lists(path):
        for line in lines:
            parts = line.split()
            if len(parts) >= 3 and parts[1] in types and (not exclude or not parts[2].startswith(exclude)):
                names.add(parts[2])
    return names


def kptr_restrict() -> str:
    """kernel.kptr_restrict, as text ('?' when unreadable)."""
    try:
        with open(KPTR_RESTRICT) as f:
            return f.read().strip()
    except OSError:
        return "?"


# --------------------------------------------------------------------------- address -> symbol
if TYPE_CHECKING:
    class KernelSymbol(NamedTuple):
        """An address resolved: the symbol, the offset into it, and its module ('' for
        vmlinux, 'bpf' for BPF programs)."""

        name: str
        offset: int
        module: str
else:  # collections' namedtuple: typing costs ~2 ms to import, and kinfo is on `bpfkit load`'s path
    KernelSymbol = collections.namedtuple("KernelSymbol", ["name", "offset", "module"])
    KernelSymbol.__doc__ = ("An address resolved: the symbol, the offset into it, and its module ('' for vmlinux, "
                            "'bpf' for BPF programs).")


class KernelSymbols:
    """The kernel's symbols, sorted by address. ``lookup(addr)`` -> :class:`KernelSymbol` or
    None (below the first text symbol); ``address(name)`` -> the address of a text symbol.

    kallsyms gives no sizes: an address belongs to the nearest symbol at or below it, as perf
    and bcc's ksym take it. Only text symbols (types t, T, w, W) are found: stacks hold code
    addresses. A table whose every address is 0 (kptr_restrict) raises
    :class:`~bpfkit.errors.KernelPermissionError` saying so."""

    def __init__(self, text: bytes, source: str = KALLSYMS) -> None:
        # The address zero-padded to the word size in lower-case hex: so the lines sort as
        # their addresses do. The load is one decode, one split and one sort (vmlinux's lines
        # come sorted, modules' and BPF programs' follow: timsort merges the runs). Addresses
        # are converted per block of _BLOCK lines when a lookup first lands in it (the block's
        # hex joined, bytes.fromhex, into an array: C loops only); the first line of each
        # block is converted at load. A lookup bisects the block heads, then its block's
        # array, and cuts the name and module out of the one line it lands on; non-text lines
        # stay, a lookup steps over them. benchmarks/bench_symbolize.py measures this against bcc.
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
                detail=f"every address reads as 0 (kernel.kptr_restrict={kptr_restrict()})",
                hint="kernel symbols need CAP_SYSLOG with kernel.kptr_restrict=1, or kernel.kptr_restrict=0 "
                     "(2 hides them from everyone): kernel stacks cannot be symbolized")
        self._lines = lines
        self._width = width
        self._heads = [int(lines[j][:width], 16) for j in range(0, len(lines), _BLOCK)]
        self._blocks: list[_Addresses | None] = [None] * len(self._heads)
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
            text = read(path)
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
