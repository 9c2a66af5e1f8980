# SPDX-License-Identifier: Apache-2.0
"""Kernel constants bpfkit uses, as enums whose member names are the UAPI names minus a prefix.

The bpf(2) ones (map/program/attach/link types, flags) are defined in bpfkit.spec.consts, pure
data the spec layer uses without importing the kernel layer, and re-exported here; perf_event,
ioctl and syscall numbers are defined here (the perf_event enums in perf_consts.py, made on first
use and reached through this module as before).

``C_PREFIX`` on each enum gives the prefix, so ``MapType.RINGBUF`` is ``BPF_MAP_TYPE_RINGBUF``;
tests/test_layout.py checks every value against the installed UAPI headers.
"""

from __future__ import annotations

import os

from ..spec.consts import (
    BPF_ANY as BPF_ANY,
)
from ..spec.consts import (
    BPF_EXIST as BPF_EXIST,
)
from ..spec.consts import (
    BPF_F_AFTER as BPF_F_AFTER,
)
from ..spec.consts import (
    BPF_F_ANY_ALIGNMENT as BPF_F_ANY_ALIGNMENT,
)
from ..spec.consts import (
    BPF_F_BEFORE as BPF_F_BEFORE,
)
from ..spec.consts import (
    BPF_F_ID as BPF_F_ID,
)
from ..spec.consts import (
    BPF_F_KPROBE_MULTI_RETURN as BPF_F_KPROBE_MULTI_RETURN,
)
from ..spec.consts import (
    BPF_F_LINK as BPF_F_LINK,
)
from ..spec.consts import (
    BPF_F_LOCK as BPF_F_LOCK,
)
from ..spec.consts import (
    BPF_F_RDONLY as BPF_F_RDONLY,
)
from ..spec.consts import (
    BPF_F_REPLACE as BPF_F_REPLACE,
)
from ..spec.consts import (
    BPF_F_SLEEPABLE as BPF_F_SLEEPABLE,
)
from ..spec.consts import (
    BPF_F_STRICT_ALIGNMENT as BPF_F_STRICT_ALIGNMENT,
)
from ..spec.consts import (
    BPF_F_TEST_RND_HI32 as BPF_F_TEST_RND_HI32,
)
from ..spec.consts import (
    BPF_F_TEST_STATE_FREQ as BPF_F_TEST_STATE_FREQ,
)
from ..spec.consts import (
    BPF_F_UPROBE_MULTI_RETURN as BPF_F_UPROBE_MULTI_RETURN,
)
from ..spec.consts import (
    BPF_F_WRONLY as BPF_F_WRONLY,
)
from ..spec.consts import (
    BPF_F_XDP_DEV_BOUND_ONLY as BPF_F_XDP_DEV_BOUND_ONLY,
)
from ..spec.consts import (
    BPF_F_XDP_HAS_FRAGS as BPF_F_XDP_HAS_FRAGS,
)
from ..spec.consts import (
    BPF_NOEXIST as BPF_NOEXIST,
)
from ..spec.consts import (
    BPF_RINGBUF_BUSY_BIT as BPF_RINGBUF_BUSY_BIT,
)
from ..spec.consts import (
    BPF_RINGBUF_DISCARD_BIT as BPF_RINGBUF_DISCARD_BIT,
)
from ..spec.consts import (
    BPF_RINGBUF_HDR_SZ as BPF_RINGBUF_HDR_SZ,
)
from ..spec.consts import (
    KERNEL_VERSION_MAGIC as KERNEL_VERSION_MAGIC,
)
from ..spec.consts import (
    AttachType as AttachType,
)
from ..spec.consts import (
    Cmd as Cmd,
)
from ..spec.consts import (
    FuncId as FuncId,
)
from ..spec.consts import (
    LinkType as LinkType,
)
from ..spec.consts import (
    MapFlag as MapFlag,
)
from ..spec.consts import (
    MapType as MapType,
)
from ..spec.consts import (
    PerfEventType as PerfEventType,
)
from ..spec.consts import (
    ProgType as ProgType,
)
from ..spec.consts import (
    StatsType as StatsType,
)

# The bpf(2) enums and flags live in the spec layer (pure data; docs/architecture.md) and are
# re-exported here for the ABI layer.
from ..spec.consts import (
    _CEnum as _CEnum,
)

# ------------------------------------------------------------------ attaching to hooks
# BPF_PROG_ATTACH attach_flags of cgroup hooks (4.10/4.15): without either, a cgroup holds one
# program that sub-cgroups cannot override; ALLOW_OVERRIDE lets a sub-cgroup's program replace
# it, ALLOW_MULTI runs every program of the cgroup and its ancestors (links behave as MULTI).
BPF_F_ALLOW_OVERRIDE = 1 << 0
BPF_F_ALLOW_MULTI = 1 << 1
# BPF_PROG_QUERY query_flags: the programs that run for a cgroup, inherited ones included.
BPF_F_QUERY_EFFECTIVE = 1 << 0
# BPF_LINK_CREATE netfilter.flags (6.6, 91721c2d02d3): defragment IP packets before the program.
BPF_F_NETFILTER_IP_DEFRAG = 1 << 0

# perf_event_open flags.
PERF_FLAG_FD_NO_GROUP = 1 << 0
PERF_FLAG_FD_OUTPUT = 1 << 1
PERF_FLAG_PID_CGROUP = 1 << 2
PERF_FLAG_FD_CLOEXEC = 1 << 3

# Sizes of struct perf_event_attr as it grew (PERF_ATTR_SIZE_VER*), with the release that
# introduced each; the kernel rejects a larger size with E2BIG and writes back the one it knows.
PERF_ATTR_SIZES = {
    0: (64, "2.6.32"),
    1: (72, "2.6.33"),
    2: (80, "3.4"),
    3: (96, "3.7"),
    4: (104, "3.19"),
    5: (112, "4.1"),
    6: (120, "4.17"),
    7: (128, "5.13"),
    8: (136, "6.3"),
}

PERF_RECORD_MISC_CPUMODE_MASK = 7
PERF_RECORD_MISC_MMAP_DATA = 1 << 13
PERF_RECORD_MISC_COMM_EXEC = 1 << 13
PERF_RECORD_MISC_SWITCH_OUT = 1 << 13
PERF_RECORD_MISC_MMAP_BUILD_ID = 1 << 14
PERF_EVENT_IOC_FLAG_GROUP = 1


# ------------------------------------------------------------------------------ syscalls
_SYSCALLS = {
    "x86_64": {"bpf": 321, "perf_event_open": 298},
    "aarch64": {"bpf": 280, "perf_event_open": 241},
    "riscv64": {"bpf": 280, "perf_event_open": 241},
}


def syscall_number(name: str) -> int:
    """The syscall number of ``name`` on this machine's architecture."""
    arch = os.uname().machine  # platform.machine(), without importing platform (~1 ms)
    try:
        return _SYSCALLS[arch][name]
    except KeyError:
        from ..errors import NotSupportedError

        raise NotSupportedError(f"{name} on {arch}", "bpfkit knows x86_64, aarch64 and riscv64") from None


# The perf_event enums live in perf_consts.py and are made on first use (module __getattr__,
# PEP 562): creating their ~120 members costs ~3 ms that `bpfkit load` does not need.
TYPE_CHECKING = False  # typing's costs ~2 ms to import; names for the type checker only
_PERF_NAMES = frozenset({"PerfType", "PerfSwId", "PerfHwId", "PerfRecord", "PerfSample", "PerfAttrFlag", "PerfIoctl",
                         "SOFTWARE_EVENT_NAMES", "HARDWARE_EVENT_NAMES", "PERF_IOCTLS_WITH_GROUP_FLAG"})
if TYPE_CHECKING:
    from .perf_consts import HARDWARE_EVENT_NAMES as HARDWARE_EVENT_NAMES
    from .perf_consts import PERF_IOCTLS_WITH_GROUP_FLAG as PERF_IOCTLS_WITH_GROUP_FLAG
    from .perf_consts import SOFTWARE_EVENT_NAMES as SOFTWARE_EVENT_NAMES
    from .perf_consts import PerfAttrFlag as PerfAttrFlag
    from .perf_consts import PerfHwId as PerfHwId
    from .perf_consts import PerfIoctl as PerfIoctl
    from .perf_consts import PerfRecord as PerfRecord
    from .perf_consts import PerfSample as PerfSample
    from .perf_consts import PerfSwId as PerfSwId
    from .perf_consts import PerfType as PerfType


def __getattr__(name: str) -> object:
    if name in _PERF_NAMES:
        from . import perf_consts

        value = getattr(perf_consts, name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
