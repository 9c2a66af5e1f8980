# SPDX-License-Identifier: Apache-2.0
"""The perf_event enums (perf_type_id, perf_sw_ids, perf_hw_id, perf_event_type,
perf_event_sample_format, perf_event_attr's flag bits, PERF_EVENT_IOC_*). Defined here and
imported by :mod:`bpfkit._kernel.consts` on first use (its ``__getattr__``): about 120 enum
members cost ~3 ms to create, which commands that make no perf event (``bpfkit load``,
``bpfkit features``) need not pay. Import them from ``bpfkit._kernel.consts`` as before."""

from __future__ import annotations

import enum

from ..spec.consts import _CEnum
from .ioctl import IOC_NONE, IOC_READ, IOC_WRITE, ioc


# ----------------------------------------------------------------------------- perf_event
class PerfType(_CEnum):
    """enum perf_type_id."""

    HARDWARE = 0
    SOFTWARE = 1
    TRACEPOINT = 2
    HW_CACHE = 3
    RAW = 4
    BREAKPOINT = 5


class PerfSwId(_CEnum):
    """enum perf_sw_ids."""

    CPU_CLOCK = 0
    TASK_CLOCK = 1
    PAGE_FAULTS = 2
    CONTEXT_SWITCHES = 3
    CPU_MIGRATIONS = 4
    PAGE_FAULTS_MIN = 5
    PAGE_FAULTS_MAJ = 6
    ALIGNMENT_FAULTS = 7
    EMULATION_FAULTS = 8
    DUMMY = 9
    BPF_OUTPUT = 10
    CGROUP_SWITCHES = 11


class PerfHwId(_CEnum):
    """enum perf_hw_id."""

    CPU_CYCLES = 0
    INSTRUCTIONS = 1
    CACHE_REFERENCES = 2
    CACHE_MISSES = 3
    BRANCH_INSTRUCTIONS = 4
    BRANCH_MISSES = 5
    BUS_CYCLES = 6
    STALLED_CYCLES_FRONTEND = 7
    STALLED_CYCLES_BACKEND = 8
    REF_CPU_CYCLES = 9


# perf's event names (``perf list``, bpftrace's software:/hardware: probes) with aliases:
# the one table the probe-spec parser and bpfkit.link.sampling share.
SOFTWARE_EVENT_NAMES: dict[str, PerfSwId] = {
    "cpu-clock": PerfSwId.CPU_CLOCK, "cpu": PerfSwId.CPU_CLOCK, "task-clock": PerfSwId.TASK_CLOCK,
    "page-faults": PerfSwId.PAGE_FAULTS, "faults": PerfSwId.PAGE_FAULTS,
    "context-switches": PerfSwId.CONTEXT_SWITCHES, "cs": PerfSwId.CONTEXT_SWITCHES,
    "cpu-migrations": PerfSwId.CPU_MIGRATIONS, "migrations": PerfSwId.CPU_MIGRATIONS,
    "minor-faults": PerfSwId.PAGE_FAULTS_MIN, "major-faults": PerfSwId.PAGE_FAULTS_MAJ,
    "alignment-faults": PerfSwId.ALIGNMENT_FAULTS, "emulation-faults": PerfSwId.EMULATION_FAULTS,
    "dummy": PerfSwId.DUMMY, "bpf-output": PerfSwId.BPF_OUTPUT, "cgroup-switches": PerfSwId.CGROUP_SWITCHES,
}
HARDWARE_EVENT_NAMES: dict[str, PerfHwId] = {
    "cpu-cycles": PerfHwId.CPU_CYCLES, "cycles": PerfHwId.CPU_CYCLES, "instructions": PerfHwId.INSTRUCTIONS,
    "cache-references": PerfHwId.CACHE_REFERENCES, "cache-misses": PerfHwId.CACHE_MISSES,
    "branch-instructions": PerfHwId.BRANCH_INSTRUCTIONS, "branches": PerfHwId.BRANCH_INSTRUCTIONS,
    "branch-misses": PerfHwId.BRANCH_MISSES, "bus-cycles": PerfHwId.BUS_CYCLES,
    "frontend-stalls": PerfHwId.STALLED_CYCLES_FRONTEND, "backend-stalls": PerfHwId.STALLED_CYCLES_BACKEND,
    "ref-cycles": PerfHwId.REF_CPU_CYCLES,
}


class PerfRecord(_CEnum):
    """enum perf_event_type: PERF_RECORD_* in the mmap ring."""

    MMAP = 1
    LOST = 2
    COMM = 3
    EXIT = 4
    THROTTLE = 5
    UNTHROTTLE = 6
    FORK = 7
    READ = 8
    SAMPLE = 9
    MMAP2 = 10
    AUX = 11
    ITRACE_START = 12
    LOST_SAMPLES = 13
    SWITCH = 14
    SWITCH_CPU_WIDE = 15
    NAMESPACES = 16
    KSYMBOL = 17
    BPF_EVENT = 18
    CGROUP = 19
    TEXT_POKE = 20
    AUX_OUTPUT_HW_ID = 21


for _enum, _prefix in (
    (PerfType, "PERF_TYPE_"),
    (PerfSwId, "PERF_COUNT_SW_"),
    (PerfHwId, "PERF_COUNT_HW_"),
    (PerfRecord, "PERF_RECORD_"),
):
    type.__setattr__(_enum, "C_PREFIX", _prefix)


class PerfSample(enum.IntFlag):
    """enum perf_event_sample_format (PERF_SAMPLE_*)."""

    IP = 1 << 0
    TID = 1 << 1
    TIME = 1 << 2
    ADDR = 1 << 3
    READ = 1 << 4
    CALLCHAIN = 1 << 5
    ID = 1 << 6
    CPU = 1 << 7
    PERIOD = 1 << 8
    STREAM_ID = 1 << 9
    RAW = 1 << 10
    BRANCH_STACK = 1 << 11
    REGS_USER = 1 << 12
    STACK_USER = 1 << 13
    WEIGHT = 1 << 14
    DATA_SRC = 1 << 15
    IDENTIFIER = 1 << 16
    TRANSACTION = 1 << 17
    REGS_INTR = 1 << 18
    PHYS_ADDR = 1 << 19
    AUX = 1 << 20
    CGROUP = 1 << 21
    DATA_PAGE_SIZE = 1 << 22
    CODE_PAGE_SIZE = 1 << 23
    WEIGHT_STRUCT = 1 << 24


class PerfAttrFlag(enum.IntFlag):
    """The bitfield word of struct perf_event_attr (``disabled:1, inherit:1, ...``), in order:
    C gives a word's one-bit members bit 0, 1, 2 ... in declaration order, as enum.auto() does
    an IntFlag's members (tests/test_layout.py checks each bit against the UAPI header)."""

    DISABLED = enum.auto()
    INHERIT = enum.auto()
    PINNED = enum.auto()
    EXCLUSIVE = enum.auto()
    EXCLUDE_USER = enum.auto()
    EXCLUDE_KERNEL = enum.auto()
    EXCLUDE_HV = enum.auto()
    EXCLUDE_IDLE = enum.auto()
    MMAP = enum.auto()
    COMM = enum.auto()
    FREQ = enum.auto()
    INHERIT_STAT = enum.auto()
    ENABLE_ON_EXEC = enum.auto()
    TASK = enum.auto()
    WATERMARK = enum.auto()
    PRECISE_IP_0 = enum.auto()  # precise_ip is two bits wide
    PRECISE_IP_1 = enum.auto()
    MMAP_DATA = enum.auto()
    SAMPLE_ID_ALL = enum.auto()
    EXCLUDE_HOST = enum.auto()
    EXCLUDE_GUEST = enum.auto()
    EXCLUDE_CALLCHAIN_KERNEL = enum.auto()
    EXCLUDE_CALLCHAIN_USER = enum.auto()
    MMAP2 = enum.auto()
    COMM_EXEC = enum.auto()
    USE_CLOCKID = enum.auto()
    CONTEXT_SWITCH = enum.auto()
    WRITE_BACKWARD = enum.auto()
    NAMESPACES = enum.auto()
    KSYMBOL = enum.auto()
    BPF_EVENT = enum.auto()
    AUX_OUTPUT = enum.auto()
    CGROUP = enum.auto()
    TEXT_POKE = enum.auto()
    BUILD_ID = enum.auto()
    INHERIT_THREAD = enum.auto()
    REMOVE_ON_EXEC = enum.auto()
    SIGTRAP = enum.auto()


# ------------------------------------------------------------------------------- ioctls

class PerfIoctl(_CEnum):
    """PERF_EVENT_IOC_* request numbers, derived exactly as linux/perf_event.h does."""

    ENABLE = ioc(IOC_NONE, "$", 0, 0)
    DISABLE = ioc(IOC_NONE, "$", 1, 0)
    REFRESH = ioc(IOC_NONE, "$", 2, 0)
    RESET = ioc(IOC_NONE, "$", 3, 0)
    PERIOD = ioc(IOC_WRITE, "$", 4, 8)  # _IOW('$', 4, __u64)
    SET_OUTPUT = ioc(IOC_NONE, "$", 5, 0)
    SET_FILTER = ioc(IOC_WRITE, "$", 6, 8)  # _IOW('$', 6, char *)
    ID = ioc(IOC_READ, "$", 7, 8)  # _IOR('$', 7, __u64 *)
    SET_BPF = ioc(IOC_WRITE, "$", 8, 4)  # _IOW('$', 8, __u32)
    PAUSE_OUTPUT = ioc(IOC_WRITE, "$", 9, 4)  # _IOW('$', 9, __u32)
    QUERY_BPF = ioc(IOC_READ | IOC_WRITE, "$", 10, 8)  # _IOWR('$', 10, struct ... *)
    MODIFY_ATTRIBUTES = ioc(IOC_WRITE, "$", 11, 8)  # _IOW('$', 11, struct perf_event_attr *)


type.__setattr__(PerfIoctl, "C_PREFIX", "PERF_EVENT_IOC_")

# Which ioctls accept PERF_IOC_FLAG_GROUP as their argument (apply to the whole group).
PERF_IOCTLS_WITH_GROUP_FLAG = frozenset(
    {PerfIoctl.ENABLE, PerfIoctl.DISABLE, PerfIoctl.RESET}
)
