# SPDX-License-Identifier: Apache-2.0
"""CPU sets from sysfs: which CPUs are online and which could ever be (per-CPU maps size by it)."""

from __future__ import annotations

import functools

from ..errors import ParseError


def parse_cpu_list(text: str) -> list[int]:
    """Parse the kernel's cpulist format (``0-3,5,7-8``) into sorted CPU numbers."""
    cpus: list[int] = []
    for part in text.strip().split(","):
        if not part:
            continue
        try:
            if "-" in part:
                lo, hi = part.split("-", 1)
                cpus.extend(range(int(lo), int(hi) + 1))
            else:
                cpus.append(int(part))
        except ValueError:
            raise ParseError(f"bad CPU list {text.strip()!r}") from None
    return sorted(set(cpus))


def _read(path: str) -> list[int]:
    with open(path) as f:
        return parse_cpu_list(f.read())


@functools.cache
def possible_cpus() -> list[int]:
    """CPUs that may ever exist; per-CPU map values have one slot per possible CPU."""
    return _read("/sys/devices/system/cpu/possible")


def online_cpus() -> list[int]:
    """CPUs online now (not cached: CPUs can go offline)."""
    return _read("/sys/devices/system/cpu/online")


def num_possible_cpus() -> int:
    """Slots in a per-CPU value: highest possible CPU + 1 (the kernel's nr_cpu_ids)."""
    return max(possible_cpus()) + 1
