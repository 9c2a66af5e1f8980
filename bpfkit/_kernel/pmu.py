"""Dynamic PMUs in sysfs: /sys/bus/event_source/devices/<pmu>/{type,format/*}.

The kprobe PMU (4.17) and uprobe PMU (4.17) let perf_event_open create k/uprobes without
tracefs; their ``type`` file holds the perf type number and ``format/retprobe`` says which config
bit asks for a return probe (``config:0``). ``format/ref_ctr_offset`` (4.20) says where the
USDT semaphore offset goes (``config:32-63``).
"""

from __future__ import annotations

import functools
import re

from ..errors import NotSupportedError, ParseError

PMU_ROOT = "/sys/bus/event_source/devices"

# Where each PMU came from, for NotSupportedError messages.
_PMU_SINCE = {"kprobe": ("CONFIG_KPROBES with the kprobe PMU", "4.17"), "uprobe": ("the uprobe PMU", "4.17")}


@functools.cache
def pmu_type(pmu: str) -> int:
    """The perf ``type`` number of a dynamic PMU (``kprobe``, ``uprobe``)."""
    path = f"{PMU_ROOT}/{pmu}/type"
    try:
        with open(path) as f:
            return int(f.read().strip())
    except FileNotFoundError:
        what, since = _PMU_SINCE.get(pmu, (f"the {pmu} PMU", ""))
        raise NotSupportedError(f"{pmu} PMU", f"{path} does not exist (this kernel lacks {what})", since) from None
    except ValueError:
        raise ParseError(f"{path}: not a number") from None


_FORMAT = re.compile(r"^config(\d?):(\d+)(?:-(\d+))?$")


@functools.cache
def pmu_format(pmu: str, field: str) -> tuple[str, int, int]:
    """Where a PMU format field lives: (``config``/``config1``/..., first bit, last bit).

    ``pmu_format("uprobe", "retprobe")`` is ``("config", 0, 0)`` on every kernel so far.
    """
    path = f"{PMU_ROOT}/{pmu}/format/{field}"
    try:
        with open(path) as f:
            text = f.read().strip()
    except FileNotFoundError:
        raise NotSupportedError(f"{pmu} PMU field {field}", f"{path} does not exist") from None
    match = _FORMAT.match(text)
    if not match:
        raise ParseError(f"{path}: unexpected format {text!r}")
    word = "config" + match.group(1)
    first = int(match.group(2))
    last = int(match.group(3) or first)
    return word, first, last


def has_pmu(pmu: str) -> bool:
    try:
        pmu_type(pmu)
    except NotSupportedError:
        return False
    return True
