# SPDX-License-Identifier: Apache-2.0
"""A symbol table's defined functions as columns (st_value, st_size, st_name), for the
symbolizer: no per-symbol Python objects, so a table of millions of entries loads in
milliseconds (benchmarks/bench_symbolize.py).

A table is filtered with bytes-level operations (st_info through a translation table,
st_shndx tested non-zero, itertools.compress over memoryview casts) and read in chunks of
:data:`_CHUNK` entries (what a table costs while read is that, not its size); its entries are
charged to the binary's :class:`~bpfkit.elf.headers.Limits` before anything is read, and its
string table is read once (:meth:`~bpfkit.elf.headers.ElfHeaders.strings`). Names are cut out
of the string table at lookup. :meth:`~bpfkit.elf.reader.ElfImage.read_symbols` is the other
reader of the same entries, one Symbol each with its version, for uprobes and the loader.
"""

from __future__ import annotations

import sys
from array import array

from .headers import NAME_LIMIT, SHT_DYNSYM, SHT_SYMTAB, STT_FUNC, STT_GNU_IFUNC, ElfHeaders

__all__ = ["FunctionTable", "function_tables"]

# st_info -> 1 for STT_FUNC and STT_GNU_IFUNC (the low nibble is the type), else 0.
_IS_FUNC = bytes(1 if (i & 0xF) in (STT_FUNC, STT_GNU_IFUNC) else 0 for i in range(256))
_NONZERO = bytes([0] + [1] * 255)
# Symbol-table entries converted at a time (1.5 MiB of a 64-bit table): what a table costs
# while read is this, not its size.
_CHUNK = 1 << 16


class FunctionTable:
    """One symbol table as columns, entry by entry: st_value (0 for every entry that is not a
    defined function: STT_FUNC or STT_GNU_IFUNC with st_shndx != SHN_UNDEF), st_size,
    st_name; and its string table (shared with the other tables linking to it)."""

    def __init__(self, values: array[int], sizes: array[int], names: array[int], strtab: bytes,
                 dynamic: bool) -> None:
        self.values, self.sizes, self.names, self.strtab, self.dynamic = values, sizes, names, strtab, dynamic

    @classmethod
    def read(cls, elf: ElfHeaders, i: int) -> FunctionTable:
        """Symbol-table section ``i`` of ``elf``, charged to ``elf.limits``."""
        _, t, _, _, off, size, link, *_ = elf.shdrs[i]
        ent = 24 if elf.is64 else 16
        n = size // ent
        what = f"symbol table (section {i})"
        if elf.limits is not None:
            elf.limits.take_symbols(n, elf.path, what)
        elf.image.check(off, n * ent, what)  # all of it, before the first chunk is read
        code = "Q" if elf.is64 else "I"
        values, sizes, names = array(code), array(code), array("I")
        for lo in range(0, n, _CHUNK):
            m = min(_CHUNK, n - lo)
            _columns(bytes(elf.image.read(off + lo * ent, m * ent, what)), m, elf.is64, values, sizes, names)
        if elf.little != (sys.byteorder == "little"):
            for a in (values, sizes, names):
                a.byteswap()
        if code != "Q":
            values, sizes = array("Q", values), array("Q", sizes)
        return cls(values, sizes, names, elf.strings(link), t == SHT_DYNSYM)

    @property
    def nbytes(self) -> int:
        """The memory its columns hold (the string table is counted by FileSymbols, once)."""
        return sum(a.itemsize * len(a) for a in (self.values, self.sizes, self.names))

    def name(self, k: int) -> str:
        """The ``k``-th function's name, without the version .symtab may append (``name@@VER``,
        ``name@VER``)."""
        s = self.strtab
        off = self.names[k]
        if off >= len(s):
            return ""
        end = s.find(b"\0", off, off + NAME_LIMIT)
        raw = s[off:end if end >= 0 else off + NAME_LIMIT]
        at = raw.find(b"@")
        return (raw[:at] if at > 0 else raw).decode("utf-8", "replace")


def function_tables(elf: ElfHeaders) -> list[FunctionTable]:
    """The defined functions of .dynsym and .symtab, in section order: the first section of
    each type (the gABI allows one of each; more are ignored, not each read)."""
    out, seen = [], set()
    for i, s in enumerate(elf.shdrs):
        t, link = s[1], s[6]
        if t in (SHT_SYMTAB, SHT_DYNSYM) and t not in seen and 0 <= link < len(elf.shdrs):
            seen.add(t)
            out.append(FunctionTable.read(elf, i))
    return out


def _columns(raw: bytes, n: int, is64: bool, values: array[int], sizes: array[int], names: array[int]) -> None:
    """Append the ``n`` entries of ``raw`` to the columns (in the file's byte order)."""
    ent, word = (24, 8) if is64 else (16, 4)
    info_at, shndx_at = (4, 6) if is64 else (12, 14)  # st_info, st_shndx in Elf64_Sym / Elf32_Sym
    # One byte per entry, 1 where it is a defined function: st_info's type through _IS_FUNC,
    # AND st_shndx != 0 (either byte non-zero), as big integers (one C operation each);
    # times 0xFF, and spread over a word per entry: a mask that zeroes the other entries'
    # st_value. Columns come out of the entries as strided memoryviews: no per-entry code.
    func = int.from_bytes(raw[info_at::ent].translate(_IS_FUNC), "little")
    defined = (int.from_bytes(raw[shndx_at::ent].translate(_NONZERO), "little")
               | int.from_bytes(raw[shndx_at + 1::ent].translate(_NONZERO), "little"))
    keep = ((func & defined) * 0xFF).to_bytes(n, "little")
    spread = bytearray(word * n)
    for b in range(word):
        spread[b::word] = keep
    cols = memoryview(raw).cast("Q") if is64 else memoryview(raw).cast("I")
    per = ent // word  # words per entry
    value_bytes = cols[1::per].tobytes()
    values.frombytes((int.from_bytes(value_bytes, "little") & int.from_bytes(spread, "little")).to_bytes(
        len(value_bytes), "little"))
    sizes.frombytes(cols[2::per].tobytes())
    names.frombytes(memoryview(raw).cast("I")[0::ent // 4].tobytes())
