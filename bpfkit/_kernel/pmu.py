# SPDX-License-Identifier: Apache-2.0
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

TYPE_CHECKING = False  # typing costs ~2 ms to import (this module is on `bpfkit features`' path)
if TYPE_CHECKING:
    from .fd import FD

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


def _place(pmu: str, field: str, value: int) -> tuple[str, int]:
    """Shift ``value`` into the bits its format file names; returns (config word, bits)."""
    word, first, last = pmu_format(pmu, field)
    width = last - first + 1
    if value >= (1 << width):
        raise ParseError(f"{pmu} PMU field {field}: {value:#x} does not fit in {width} bits")
    return word, value << first


def open_probe(
    pmu: str,
    target: str,
    offset: int = 0,
    retprobe: bool = False,
    ref_ctr_offset: int = 0,
    pid: int = -1,
    what: str = "",
) -> FD:
    """perf_event_open on the kprobe or uprobe PMU: a probe that lives as long as the fd.

    ``target`` is the kernel symbol (kprobe: config1 = kprobe_func, config2 = probe_offset)
    or the binary's path (uprobe: config1 = uprobe_path, config2 = file offset). The retprobe
    and ref_ctr_offset (USDT semaphore, 4.20) bits go where ``format/`` says. Like any
    k/uprobe perf event, one opened for every task (pid -1) must name a CPU: CPU 0 is used,
    and the BPF program attached still runs on every CPU.
    """
    from . import perf
    from .abi import ffi

    attr = perf.new_attr()
    attr.type = pmu_type(pmu)
    words = {"config": 0, "config1": 0, "config2": 0}
    if retprobe:
        word, bits = _place(pmu, "retprobe", 1)
        words[word] |= bits
    if ref_ctr_offset:
        word, bits = _place(pmu, "ref_ctr_offset", ref_ctr_offset)
        words[word] |= bits
    ctarget = ffi.new("char[]", target.encode())
    attr.config = words["config"]
    attr.config1 = int(ffi.cast("uintptr_t", ctarget))
    attr.config2 = offset
    fd = perf.perf_event_open(attr, pid, 0 if pid == -1 else -1, what=what or f"{pmu} {target}")
    del ctarget  # kept alive until the kernel has copied the string
    return fd
