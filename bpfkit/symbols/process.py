# SPDX-License-Identifier: Apache-2.0
"""A process's executable mappings (/proc/PID/maps) and its perf map (/tmp/perf-PID.map).

A user address resolves through the mapping holding it: file offset = addr - start + pgoff,
then the file's PT_LOAD segments give the link-time address its symbols are at. Code with no
file behind it (a JIT: Python 3.12+ with -X perf, V8, the JVM with perf-map-agent, LuaJIT)
is described by ``/tmp/perf-PID.map``: one ``START SIZE name`` line per function, addresses
and sizes in hex, the format perf reads (tools/perf/Documentation/jit-interface.txt). Anyone
can write that file for their own process (make it a FIFO, a link to /dev/zero, a sparse
file of gigabytes), so it is opened as bpfkit opens files it is given (O_NONBLOCK, a regular
file only), read line by line under a size limit, and kept as columns.
"""

from __future__ import annotations

import bisect
import dataclasses
import itertools
import operator
from array import array
from collections.abc import Iterable

from .._files import iter_lines
from ..errors import NotFoundError, ParseError

__all__ = ["Mapping", "parse_maps", "PerfMap", "PROT_EXEC", "PERF_MAP_LIMIT", "PERF_MAP_ENTRIES"]

PROT_EXEC = 4


@dataclasses.dataclass(slots=True)
class Mapping:
    """One executable mapping: [start, end) of ``path`` from file offset ``pgoff``."""

    start: int
    end: int
    pgoff: int
    path: str
    maj: int = 0
    min: int = 0
    ino: int = 0
    prot: int = PROT_EXEC
    time: int = 0

    def contains(self, addr: int) -> bool:
        return self.start <= addr < self.end

    def file_offset(self, addr: int) -> int:
        return addr - self.start + self.pgoff


def parse_maps(text: str) -> list[Mapping]:
    """Executable, file-backed (or [vdso]) mappings from /proc/PID/maps text, by address."""
    out = []
    for line in text.splitlines():
        # "start-end perms offset maj:min inode   path", perms like "r-xp": most lines are data
        # mappings, passed over by their x alone.
        sp = line.find(" ")
        if line[sp + 3:sp + 4] != "x":
            continue
        parts = line.split(None, 5)
        if len(parts) < 5:
            continue
        path = parts[5].strip() if len(parts) > 5 else ""
        if not path or (path.startswith("[") and path != "[vdso]"):
            continue
        lo, hi = parts[0].split("-")
        maj, mn = parts[3].split(":")
        out.append(Mapping(int(lo, 16), int(hi, 16), int(parts[2], 16), path.removesuffix(" (deleted)"),
                           int(maj, 16), int(mn, 16), int(parts[4]), PROT_EXEC | 1))
    out.sort(key=lambda m: m.start)
    return out


def find_mapping(maps: list[Mapping], addr: int) -> Mapping | None:
    """The mapping of ``maps`` (sorted by start) holding ``addr``."""
    i = bisect.bisect_right(maps, addr, key=lambda m: m.start) - 1
    if i >= 0 and maps[i].contains(addr):
        return maps[i]
    return None


# A perf map has one line per JIT-compiled function: a big JVM's (perf-map-agent) is tens of
# MiB, V8's and Python's (-X perf) less. Bounded in bytes and in entries; 24 bytes are kept per
# entry (start, size, where its name is) and the names in one bytes object.
PERF_MAP_LIMIT = 128 << 20
PERF_MAP_ENTRIES = 1 << 21


class PerfMap:
    """``/tmp/perf-PID.map``: JIT-compiled functions by address, as sorted columns (a later
    line for the same start wins, as perf's does)."""

    def __init__(self, lines: Iterable[bytes], path: str = "perf map") -> None:
        starts, sizes, begins = array("Q"), array("Q"), array("I")
        names = bytearray()
        for line in lines:
            parts = line.split(None, 2)
            if len(parts) < 3:
                continue
            try:
                start, size = int(parts[0], 16), int(parts[1], 16)
            except ValueError:
                continue
            if not (0 <= start < 1 << 64 and 0 <= size < 1 << 64):
                continue
            if len(starts) >= PERF_MAP_ENTRIES:
                raise ParseError(f"{path}: over bpfkit's limit of {PERF_MAP_ENTRIES} entries")
            starts.append(start)
            sizes.append(size)
            begins.append(len(names))
            names += parts[2].rstrip(b"\r")
        ends = begins[1:]
        ends.append(len(names))
        if any(map(operator.gt, starts, itertools.islice(starts, 1, None))):  # not in order: sorted (stably)
            order = sorted(range(len(starts)), key=starts.__getitem__)
            starts, sizes, begins, ends = (array(a.typecode, map(a.__getitem__, order))
                                           for a in (starts, sizes, begins, ends))
        self._starts, self._sizes, self._begins, self._ends = starts, sizes, begins, ends
        self._names = names

    @classmethod
    def load(cls, path: str) -> PerfMap:
        """The perf map at ``path``, read line by line as a regular file of at most
        :data:`PERF_MAP_LIMIT` bytes (bpfkit errors: missing, not a regular file, too large)."""
        try:
            return cls(iter_lines(path, "perf map", PERF_MAP_LIMIT), f"perf map {path}")
        except MemoryError:
            raise ParseError(f"perf map {path}: out of memory reading it") from None

    @classmethod
    def read(cls, pid: int, tmp: str = "/tmp") -> PerfMap | None:
        """Process ``pid``'s perf map in ``tmp``; None when it has none (other errors raised)."""
        try:
            return cls.load(f"{tmp}/perf-{pid}.map")
        except NotFoundError:
            return None

    def __len__(self) -> int:
        return len(self._starts)

    @property
    def nbytes(self) -> int:
        return 32 * len(self._starts) + len(self._names)

    def lookup(self, addr: int) -> tuple[str, int] | None:
        i = bisect.bisect_right(self._starts, addr) - 1
        if i < 0:
            return None
        start = self._starts[i]
        if addr >= start + max(self._sizes[i], 1):
            return None
        return self._names[self._begins[i]:self._ends[i]].decode(errors="replace"), addr - start
