# SPDX-License-Identifier: Apache-2.0
"""A process's executable mappings (/proc/PID/maps) and its perf map (/tmp/perf-PID.map).

A user address resolves through the mapping holding it: file offset = addr - start + pgoff,
then the file's PT_LOAD segments give the link-time address its symbols are at. Code with no
file behind it (a JIT: Python 3.12+ with -X perf, V8, the JVM with perf-map-agent, LuaJIT)
is described by ``/tmp/perf-PID.map``: one ``START SIZE name`` line per function, addresses
and sizes in hex, the format perf reads (tools/perf/Documentation/jit-interface.txt).
"""

from __future__ import annotations

import bisect
import dataclasses

__all__ = ["Mapping", "parse_maps", "PerfMap", "PROT_EXEC"]

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


class PerfMap:
    """``/tmp/perf-PID.map``: JIT-compiled functions by address."""

    def __init__(self, text: str) -> None:
        rows: list[tuple[int, int, str]] = []
        for line in text.splitlines():
            parts = line.split(None, 2)
            if len(parts) < 3:
                continue
            try:
                rows.append((int(parts[0], 16), int(parts[1], 16), parts[2]))
            except ValueError:
                continue
        rows.sort()
        self._starts = [r[0] for r in rows]
        self._rows = rows

    @classmethod
    def read(cls, pid: int, tmp: str = "/tmp") -> PerfMap | None:
        try:
            with open(f"{tmp}/perf-{pid}.map", "rb") as f:
                return cls(f.read().decode(errors="replace"))
        except OSError:
            return None

    def __len__(self) -> int:
        return len(self._rows)

    def lookup(self, addr: int) -> tuple[str, int] | None:
        i = bisect.bisect_right(self._starts, addr) - 1
        if i < 0:
            return None
        start, size, name = self._rows[i]
        return (name, addr - start) if addr < start + max(size, 1) else None
