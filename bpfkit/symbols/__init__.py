# SPDX-License-Identifier: Apache-2.0
"""Addresses -> symbols, for the whole of bpfkit (docs/stacks.md).

* :class:`~bpfkit._kernel.kallsyms.KernelSymbols`: /proc/kallsyms (vmlinux, modules, BPF
  programs), sorted arrays, bisection; bpfkit._kernel.kallsyms is the one reader of the file.
* :class:`~bpfkit.symbols.elf.FileSymbols`: one binary's .symtab/.dynsym, completed from a
  separate debug file (by build id or path) or MiniDebugInfo.
* :class:`Symbolizer`: the one cache of both, files keyed by (device, inode, mtime) so a
  rebuilt or replaced binary is read again and the same file reached by two paths once;
  processes' mappings from /proc/PID/maps and their perf maps. The process tracker
  (bpfkit.events.process) resolves through it too. Its memory is bounded: files are evicted,
  oldest used first, past ``max_files`` or ``max_bytes`` (what their symbols hold), and so
  are other processes' perf maps past ``max_bytes`` of them. A file or perf map that cannot
  be used (over a limit, malformed: elf.py, process.py) gets one warning; its frames are
  unnamed, every other file's are named.
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

from .._kernel.kallsyms import _BLOCK, KALLSYMS, KernelSymbol, KernelSymbols
from ..errors import BPFKitError, KernelError, NotFoundError
from .elf import DEFAULT_DEBUG_ROOT, FileSymbols, NotElfError, warn_refused
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


# The symbol cache's default memory budget: a whole-system profile's few hundred libraries hold
# tens of MiB; one binary may hold up to ~420 MiB (elf.SYMBOLS_LIMIT, elf.STRINGS_LIMIT).
MAX_BYTES = 512 << 20
_WARNED_MAX = 4096  # files and perf maps remembered as warned about (then forgotten, and warned again)


@dataclasses.dataclass(slots=True)
class _Entry:
    """A cached file's symbols (None: none usable); ``evicted`` once dropped from the cache
    (processes holding it read the file again)."""

    syms: FileSymbols | None
    evicted: bool = False

    @property
    def nbytes(self) -> int:
        return self.syms.nbytes if self.syms is not None else 0


_NO_FILE = _Entry(None)  # [vdso], and mappings whose file is gone


@dataclasses.dataclass(slots=True)
class _Proc:
    maps: list[Mapping]
    perf_map: PerfMap | None
    read_at: float
    files: dict[int, _Entry] = dataclasses.field(default_factory=dict)  # by mapping start
    starts: list[int] = dataclasses.field(default_factory=list)
    perf_key: tuple[int, ...] | None = None  # the stat of the perf map read (or refused)

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
                 perf_map_dir: str = "/tmp", max_bytes: int = MAX_BYTES) -> None:
        self.debug_root = debug_root
        self.kallsyms = kallsyms
        self.perf_map_dir = perf_map_dir
        self._max = max_files
        self.max_bytes = max_bytes
        self._files: collections.OrderedDict[tuple[int, int, int], _Entry] = collections.OrderedDict()
        self._kernel: KernelSymbols | None = None
        self._procs: dict[int, _Proc] = {}
        self._warned: set[tuple[object, ...]] = set()

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
        return self._file(path, name, st).syms

    def _file(self, path: str, name: str | None, st: os.stat_result) -> _Entry:
        key = (st.st_dev, st.st_ino, st.st_mtime_ns)
        files = self._files
        entry = files.get(key)
        if entry is not None:
            files.move_to_end(key)
            return entry
        syms: FileSymbols | None = None
        why: BaseException | str | None = None
        try:
            syms = FileSymbols.load(path, self.debug_root, name)
        except (NotFoundError, KernelError, NotElfError):  # gone, unreadable, not an ELF file: no symbols
            pass
        except (BPFKitError, MemoryError) as exc:  # malformed, over a limit: no symbols, said once
            why = f"{path}: out of memory reading its symbols" if isinstance(exc, MemoryError) else exc
        if syms is not None and syms.nbytes > self.max_bytes:
            why = f"{path}: its symbols take {syms.nbytes} bytes, over the symbol cache's {self.max_bytes}"
            syms = None
        if why is not None:
            self._warn(key, why, f"no symbols read from it: its frames show as [{os.path.basename(name or path)}]")
        entry = _Entry(syms)
        # Evicted oldest used first, past max_files or max_bytes (counted here, as files are
        # added: a file's debug symbols, read at its first miss, are bounded by elf.Limits).
        total = sum(e.nbytes for e in files.values()) + entry.nbytes
        while files and (len(files) >= self._max or total > self.max_bytes):
            _, old = files.popitem(last=False)
            total -= old.nbytes
            old.syms, old.evicted = None, True
        files[key] = entry
        return entry

    def _warn(self, key: tuple[object, ...], why: object, instead: str) -> None:
        """One warning per file (by its stat, as ``key``): ``why`` (naming the file), and
        what its frames show instead."""
        if key in self._warned:
            return
        if len(self._warned) >= _WARNED_MAX:
            self._warned.clear()
        self._warned.add(key)
        warn_refused(why, instead)

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
        perf_map, perf_key = self._perf_map(pid, proc)
        proc = self._procs[pid] = _Proc(maps, perf_map, time.monotonic(), starts=[m.start for m in maps],
                                        perf_key=perf_key)
        return proc

    def _perf_map(self, pid: int, old: _Proc | None) -> tuple[PerfMap | None, tuple[int, ...] | None]:
        """Process ``pid``'s perf map and the stat it was read with: the one ``old`` read if
        unchanged (a perf map is appended to as code is compiled), read again if not."""
        path = f"{self.perf_map_dir}/perf-{pid}.map"
        try:
            st = os.stat(path)  # (a FIFO's stat does not wait for a writer)
        except OSError:
            return None, None
        key = (st.st_dev, st.st_ino, st.st_mtime_ns, st.st_size)
        if old is not None and old.perf_key == key:
            return old.perf_map, key
        try:
            perf_map = PerfMap.load(path)
        except NotFoundError:
            return None, None
        except BPFKitError as exc:  # a FIFO, a device, too large, unreadable: skipped, said once
            self._warn(("perf map", *key), exc, f"skipped: process {pid}'s frames outside its files show as [unknown]")
            return None, key
        # Other processes' perf maps are dropped (read again at their next miss) past max_bytes.
        total = perf_map.nbytes
        for proc in sorted(self._procs.values(), key=lambda p: -p.read_at):
            if proc.perf_map is not None and proc is not old:
                total += proc.perf_map.nbytes
                if total > self.max_bytes:
                    proc.perf_map, proc.perf_key = None, None
        return perf_map, key

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
        entry = proc.files.get(m.start)
        if entry is None or entry.evicted:
            entry = proc.files[m.start] = self._mapping_entry(m, pid)
        return _frame(entry.syms, m, addr)

    def mapping_symbols(self, m: Mapping, pid: int | None = None) -> FileSymbols | None:
        """The symbols of mapping ``m``'s file (of process ``pid``, whose mount namespace is
        used while it lives: /proc/PID/root/<path>); None for [vdso] and unreadable files."""
        return self._mapping_entry(m, pid).syms

    def _mapping_entry(self, m: Mapping, pid: int | None) -> _Entry:
        if not m.path.startswith("/"):
            return _NO_FILE
        for path in ((f"/proc/{pid}/root{m.path}",) if pid is not None else ()) + (m.path,):
            try:
                return self._file(path, m.path, os.stat(path))
            except OSError:
                continue  # the process is gone (or its root unreadable): the path as seen from here
        return _NO_FILE

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
