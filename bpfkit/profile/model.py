# SPDX-License-Identifier: Apache-2.0
"""A profile: stacks (frame names, root first) with a value each, and what the value counts."""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Iterable

__all__ = ["Profile", "KERNEL_SUFFIX"]

# Kernel frames are marked as stackcollapse-perf.pl --kernel marks them (and flamegraph.pl's
# --colors=java colours them): the name with "_[k]" appended.
KERNEL_SUFFIX = "_[k]"


@dataclasses.dataclass
class Profile:
    """``stacks``: root-first frame names -> value (samples, or a time in ``unit``).

    ``sample_type``/``unit`` name the value (pprof's sample type: ("samples", "count") for
    sampling, ("off_cpu", "microseconds") for time off CPU); ``period``/``period_type``/
    ``period_unit`` what one sample stands for (99 Hz cpu-clock: 10101010 nanoseconds of cpu)."""

    stacks: Counter[tuple[str, ...]] = dataclasses.field(default_factory=Counter)
    name: str = "bpfkit"
    sample_type: str = "samples"
    unit: str = "count"
    period: int = 0
    period_type: str = "cpu"
    period_unit: str = "nanoseconds"
    duration_ns: int = 0
    time_ns: int = 0

    def add(self, stack: Iterable[str], value: int = 1) -> None:
        self.stacks[tuple(stack)] += value

    @property
    def total(self) -> int:
        return sum(self.stacks.values())

    def self_values(self) -> Counter[str]:
        """Value by leaf frame (where the samples were taken)."""
        out: Counter[str] = Counter()
        for stack, value in self.stacks.items():
            if stack:
                out[stack[-1]] += value
        return out

    def top(self, n: int = 5) -> list[tuple[str, int]]:
        """The ``n`` leaf frames with the most value (what ``pprof -top`` sorts by flat)."""
        return self.self_values().most_common(n)
