# SPDX-License-Identifier: Apache-2.0
"""/proc/self/mountinfo: where each filesystem is mounted (tracefs, cgroup2 ...)."""

from __future__ import annotations

__all__ = ["mountinfo"]


def mountinfo() -> list[tuple[str, str]]:
    """(mount point, fs type) of every mount this process sees, in mountinfo's order."""
    found = []
    try:
        with open("/proc/self/mountinfo") as f:
            for line in f:
                left, _, right = line.partition(" - ")
                fields = left.split()
                fstype = right.split()[0] if right else ""
                if len(fields) >= 5:
                    found.append((fields[4].replace("\\040", " "), fstype))
    except OSError:
        pass
    return found
