# SPDX-License-Identifier: Apache-2.0
"""Addresses -> symbols, for the whole of bpfkit (docs/stacks.md).

* :class:`~bpfkit.symbols.kernel.KernelSymbols`: /proc/kallsyms (vmlinux, modules, BPF
  programs), sorted arrays, bisection.
* :class:`~bpfkit.symbols.elf.FileSymbols`: one binary's .symtab/.dynsym, completed from a
  separate debug file (by build id or path) or MiniDebugInfo.
* :class:`Symbolizer`: the one cache of both, files keyed by (device, inode, mtime) so a
  rebuilt or replaced binary is read again and the same file reached by two paths once;
  processes' mappings from /proc/PID/maps and their perf maps. The process tracker
  (bpfkit.events.process) resolves through it too.
* :mod:`~bpfkit.symbols.stacks`: stack-trace map values and bpf_get_stack buffers decoded.
"""

from __future__ import annotations

import collections
import dataclasses
import os
import time
from bisect import bisect_right
from collections.abc import Iterable
from typing import NamedTuple

from ..errors import BPFKitError
from .elf import DEFAULT_DEBUG_ROOT, FileSymbols
from .kernel import _BLOCK, KALLSYMS, KernelSymbol, KernelSymbols
from .process import Mapping, PerfMap, parse_maps
from .stacks import BuildIdFrame, decode_build_id_stack, decode_stack

__all__ = [
    "Frame", "Symbolizer", "KernelSymbols", "KernelSymbol", "FileSymbols", "Mapping", "parse_maps", "PerfMap",
    "BuildIdFrame", "decode_stack", "decode_build_id_stack", "default_symbolizer",
]


class Frame(NamedTuple):
    """One symbolized address: ``name`` (None when unknown), the offset into it, the module
    (a file path, ``[kernel]``, a kernel module ``[ext4]``, ``[bpf]``, ``[vdso]``, or '' when
    no mapping holds the address)."""

    addr: int
    name: str | None
    offset: int = 0
    module: str = ""

    def __str__(self) -> str:
        if self.name is not None:
            return f"{self.name}+{self.offset:#x}"
        return f"{self.module}+{self.offset:#x}" if self.module else f"{self.addr:#x}"

    @property
    def label(self) -> str:
        """The name, or ``[module]`` / ``[unknown]``: what folded stacks and flame graphs show."""
        if self.name is not None:
            return self.name
        if self.module:
            return self.module if self.module.startswith("[") else f"[{os.path.basename(self.module)}]"
        return "[unknown]"


_new_frame = tuple.__new__  # Frame(...) without the NamedTuple's Python-level __new__ (hot paths)


@dataclasses.dataclass(slots=True)
class _Proc:
    maps: list[Mapping]
    perf_map: PerfMap | None
    read_at: float
    files: dict[int, FileSymbols | None] = dataclasses.field(default_factory=dict)  # by mapping start
    starts: list[int] = dataclasses.field(default_factory=list)

    def find(self, addr: int) -> Mapping | None:
        i = bisect_right(self.starts, addr) - 1
        if i >= 0 and addr < self.maps[i].end:
            return self.maps[i]
        return None


class Symbolizer:
    """Kernel and user addresses -> :class:`Frame`. ``debug_root``: where separate debug files
    live (``/usr/lib/debug``); ``kallsyms``, ``perf_map_dir``: other sources for tests."""

    REREAD_AFTER = 0.5  # s: an address outside every known mapping re-reads /proc/PID/maps at most this often

    def __init__(self, debug_root: str = DEFAULT_DEBUG_ROOT, *, max_files: int = 256, kallsyms: str = KALLSYMS,
                 perf_map_dir: str = "/tmp") -> None:
        self.debug_root = debug_root
        self.kallsyms = kallsyms
        self.perf_map_dir = perf_map_dir
        self._max = max_files
        self._files: collections.OrderedDict[tuple[int, int, int], FileSymbols | None] = collections.OrderedDict()
        self._kernel: KernelSymbols | None = None
        self._procs: dict[int, _Proc] = {}

    # ------------------------------------------------------------------ kernel
    @property
    def kernel(self) -> KernelSymbols:
        """/proc/kallsyms, read on first use (KernelPermissionError when kptr_restrict hides it)."""
        if self._kernel is None:
            self._kernel = KernelSymbols.load(self.kallsyms)
        return self._kernel

    def kernel_frame(self, addr: int) -> Frame:
        # KernelSymbols.index and entry inlined: this is the per-frame hot path
        # (benchmarks/bench_symbolize.py, against bcc's BPF.ksym).
        k = self._kernel
        if k is None:
            k = self.kernel
        b = bisect_right(k._heads, addr) - 1
        if b < 0:
            return _new_frame(Frame, (addr, None, addr, "[kernel]"))
        blk = k._blocks[b] or k._block(b)
        j = bisect_right(blk, addr) - 1
        i = b * _BLOCK + j
        start = blk[j]
        w = k._width
        line = k._lines[i]
        c = line[w + 1]
        if c != "T" and c != "W" and (c not in "tw" or j == 0 or blk[j - 1] == start):
            # not a global text symbol alone at its address: see KernelSymbols._settle
            i = k._settle(i)
            if i < 0:
                return _new_frame(Frame, (addr, None, addr, "[kernel]"))
            line = k._lines[i]
            start = k.address_at(i)
        tab = line.find("\t", w + 3)
        if tab < 0:  # vmlinux
            return _new_frame(Frame, (addr, line[w + 3:], addr - start, "[kernel]"))
        return _new_frame(Frame, (addr, line[w + 3:tab], addr - start, line[tab + 1:]))  # "[module]"

    def kernel_stack(self, addrs: Iterable[int]) -> list[Frame]:
        return [self.kernel_frame(a) for a in addrs]

    # ------------------------------------------------------------------ files
    def file(self, path: str, name: str | None = None) -> FileSymbols | None:
        """The symbols of the binary at ``path`` (None: not an ELF file, unreadable, gone),
        cached by (device, inode, mtime). ``name``: its path inside its mount namespace."""
        try:
            st = os.stat(path)
        except OSError:
            return None
        return self._file(path, name, st)

    def _file(self, path: str, name: str | None, st: os.stat_result) -> FileSymbols | None:
        key = (st.st_dev, st.st_ino, st.st_mtime_ns)
        if key in self._files:
            self._files.move_to_end(key)
            return self._files[key]
        try:
            syms: FileSymbols | None = FileSymbols.load(path, self.debug_root, name)
        except BPFKitError:  # not an ELF file, unreadable, gone, malformed: no symbols
            syms = None
        if len(self._files) >= self._max:
            self._files.popitem(last=False)
        self._files[key] = syms
        return syms

    def lookup(self, path: str, offset: int, key: object = None) -> tuple[str, int] | None:
        """File offset in the binary at ``path`` -> (function, offset into it), or None.
        (``key`` is accepted for the process tracker's older signature; files are keyed by
        their stat.)"""
        syms = self.file(path)
        return syms.lookup(offset) if syms is not None else None

    # ------------------------------------------------------------------ processes
    def _proc(self, pid: int, fresh: bool = False) -> _Proc | None:
        proc = self._procs.get(pid)
        if proc is not None and not fresh:
            return proc
        try:
            with open(f"/proc/{pid}/maps", "rb") as f:
                text = f.read().decode(errors="replace")
        except OSError:
            return proc  # gone: keep what was known
        maps = parse_maps(text)
        proc = self._procs[pid] = _Proc(maps, PerfMap.read(pid, self.perf_map_dir), time.monotonic(),
                                        starts=[m.start for m in maps])
        return proc

    def process_maps(self, pid: int, refresh: bool = False) -> list[Mapping]:
        """Process ``pid``'s executable mappings, read from /proc/PID/maps now (or the cached
        ones; ``refresh`` re-reads). Kept after the process exits, so read them while it lives
        (processes gone before that need the process tracker's records: docs/stacks.md)."""
        proc = self._proc(pid, refresh)
        return list(proc.maps) if proc is not None else []

    def forget(self, pid: int) -> None:
        """Drop what is cached about ``pid`` (its mappings, its perf map)."""
        self._procs.pop(pid, None)

    def user_frame(self, pid: int, addr: int) -> Frame:
        """``addr`` in process ``pid``: through its mapping's file, else its perf map."""
        proc = self._procs.get(pid) or self._proc(pid)
        m = proc.find(addr) if proc is not None else None
        if m is None and proc is not None and time.monotonic() - proc.read_at > self.REREAD_AFTER:
            proc = self._proc(pid, fresh=True)
            m = proc.find(addr) if proc is not None else None
        if m is None:
            found = proc.perf_map.lookup(addr) if proc is not None and proc.perf_map is not None else None
            return Frame(addr, found[0], found[1], "[perf-map]") if found else Frame(addr, None, addr, "")
        assert proc is not None
        files = proc.files
        if m.start in files:
            syms = files[m.start]
        else:
            syms = files[m.start] = self.mapping_symbols(m, pid)
        return _frame(syms, m, addr)

    def mapping_symbols(self, m: Mapping, pid: int | None = None) -> FileSymbols | None:
        """The symbols of mapping ``m``'s file (of process ``pid``, whose mount namespace is
        used while it lives: /proc/PID/root/<path>); None for [vdso] and unreadable files."""
        if not m.path.startswith("/"):
            return None
        if pid is not None:
            inside = f"/proc/{pid}/root{m.path}"
            try:
                return self._file(inside, m.path, os.stat(inside))
            except OSError:
                pass  # the process is gone (or its root unreadable): the path as seen from here
        return self.file(m.path, m.path)

    def mapping_frame(self, m: Mapping, addr: int, pid: int | None = None) -> Frame:
        """``addr`` inside mapping ``m`` (one the caller knows, such as the process tracker's
        for a process that has exited)."""
        return _frame(self.mapping_symbols(m, pid), m, addr)

    def user_stack(self, pid: int, addrs: Iterable[int]) -> list[Frame]:
        return [self.user_frame(pid, a) for a in addrs]


def _frame(syms: FileSymbols | None, m: Mapping, addr: int) -> Frame:
    offset = m.file_offset(addr)
    found = syms.lookup(offset) if syms is not None else None
    if found is None:
        return Frame(addr, None, offset, m.path)
    return Frame(addr, found[0], found[1], m.path)


_DEFAULT: Symbolizer | None = None


def default_symbolizer() -> Symbolizer:
    """The process-wide Symbolizer (one cache for all of bpfkit)."""
    global _DEFAULT
    if _DEFAULT is None:
        _DEFAULT = Symbolizer()
    return _DEFAULT
