# SPDX-License-Identifier: Apache-2.0
"""RLIMIT_MEMLOCK for kernels that still charge BPF memory to it.

Before 5.11 the kernel charged map and program memory to RLIMIT_MEMLOCK (often 64 KiB or 8 MiB),
so creating a modest map fails with EPERM. 5.11 moved the accounting to memory cgroups
("bpf: Eliminate rlimit-based memory accounting for bpf maps"). Like libbpf, bpfkit raises the
limit once, only on such kernels, and carries on if it may not (no CAP_SYS_RESOURCE).
"""

from __future__ import annotations

import functools
import os


def _release() -> tuple[int, int]:
    parts = os.uname().release.split(".")
    try:
        return int(parts[0]), int(parts[1])
    except (IndexError, ValueError):
        return (0, 0)


@functools.cache
def bump_memlock() -> bool:
    """Raise RLIMIT_MEMLOCK to unlimited on kernels before 5.11; True if it was raised."""
    if _release() >= (5, 11):
        return False
    import resource  # before 5.11 only: a shared library, ~0.15 ms of every command's start-up

    try:
        resource.setrlimit(resource.RLIMIT_MEMLOCK, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
    except (ValueError, OSError):
        return False
    return True
