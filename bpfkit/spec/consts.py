# SPDX-License-Identifier: Apache-2.0
"""bpf(2) constants a spec needs: object types (maps, programs, attach points, links) and their
flags, as enums whose member names are the UAPI names minus a prefix.

Pure data with no imports from the kernel layer, so the spec layer (parsing objects, no
syscalls) can use them; bpfkit._kernel.consts re-exports every name here. ``C_PREFIX`` on each
enum gives the prefix, so ``MapType.RINGBUF`` is ``BPF_MAP_TYPE_RINGBUF``; tests/test_layout.py
checks every value against the installed UAPI headers.
"""

from __future__ import annotations

import enum

TYPE_CHECKING = False  # typing costs ~2 ms to import; these names are for the type checker only
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import ClassVar, TypeVar

    _T = TypeVar("_T", bound=type)

# enum._simple_enum (3.11+, what the stdlib's own enums use: http.HTTPStatus, re.RegexFlag) makes
# an enum from a plain class without the metaclass's per-member checks: ~0.9 ms less for the
# ~220 members below. It is private, so without it the same enum is made by the functional API;
# tests/test_consts.py checks both against enums made the ordinary way (enum._test_simple_enum).
_simple_enum = getattr(enum, "_simple_enum", None)


def _fast_enum(etype: type[enum.Enum], simple: bool = True) -> Callable[[_T], _T]:
    """Class decorator: the plain class's public attributes become the members of an ``etype``
    subclass of the same name, module and docstring."""

    def make(cls: _T) -> _T:
        if simple and _simple_enum is not None:
            return _simple_enum(etype)(cls)  # type: ignore[no-any-return]
        members = [(k, v) for k, v in vars(cls).items() if not k.startswith("_")]
        functional: Callable[..., _T] = etype  # type: ignore[assignment]  # Enum(name, members, module=)
        made = functional(cls.__name__, members, module=cls.__module__, qualname=cls.__qualname__)
        made.__doc__ = cls.__doc__
        return made

    return make


class _CEnum(enum.IntEnum):
    """An enum mirroring a C enum or #define family; ``c_name`` is the kernel's spelling."""

    C_PREFIX: ClassVar[str]  # set on each subclass below (and in bpfkit._kernel.consts)

    @property
    def c_name(self) -> str:
        return self.C_PREFIX + self.name

    @property
    def kernel_name(self) -> str:
        """The lower-case name bpftool prints (``ringbuf``, ``tracepoint``)."""
        return self.name.lower()


# The type checker sees each enum below as the subclass it is; at run time the class statement
# makes a plain class (no EnumType work) that _fast_enum turns into that subclass.
if TYPE_CHECKING:
    _CEnumBody = _CEnum
    _IntFlagBody = enum.IntFlag
else:
    _CEnumBody = _IntFlagBody = object


@_fast_enum(_CEnum)
class Cmd(_CEnumBody):
    """bpf(2) commands (enum bpf_cmd)."""

    MAP_CREATE = 0
    MAP_LOOKUP_ELEM = 1
    MAP_UPDATE_ELEM = 2
    MAP_DELETE_ELEM = 3
    MAP_GET_NEXT_KEY = 4
    PROG_LOAD = 5
    OBJ_PIN = 6
    OBJ_GET = 7
    PROG_ATTACH = 8
    PROG_DETACH = 9
    PROG_TEST_RUN = 10
    PROG_GET_NEXT_ID = 11
    MAP_GET_NEXT_ID = 12
    PROG_GET_FD_BY_ID = 13
    MAP_GET_FD_BY_ID = 14
    OBJ_GET_INFO_BY_FD = 15
    PROG_QUERY = 16
    RAW_TRACEPOINT_OPEN = 17
    BTF_LOAD = 18
    BTF_GET_FD_BY_ID = 19
    TASK_FD_QUERY = 20
    MAP_LOOKUP_AND_DELETE_ELEM = 21
    MAP_FREEZE = 22
    BTF_GET_NEXT_ID = 23
    MAP_LOOKUP_BATCH = 24
    MAP_LOOKUP_AND_DELETE_BATCH = 25
    MAP_UPDATE_BATCH = 26
    MAP_DELETE_BATCH = 27
    LINK_CREATE = 28
    LINK_UPDATE = 29
    LINK_GET_FD_BY_ID = 30
    LINK_GET_NEXT_ID = 31
    ENABLE_STATS = 32
    ITER_CREATE = 33
    LINK_DETACH = 34
    PROG_BIND_MAP = 35
    TOKEN_CREATE = 36
    PROG_STREAM_READ_BY_FD = 37  # 6.17
    PROG_ASSOC_STRUCT_OPS = 38  # 7.0


@_fast_enum(_CEnum)
class MapType(_CEnumBody):
    """enum bpf_map_type."""

    UNSPEC = 0
    HASH = 1
    ARRAY = 2
    PROG_ARRAY = 3
    PERF_EVENT_ARRAY = 4
    PERCPU_HASH = 5
    PERCPU_ARRAY = 6
    STACK_TRACE = 7
    CGROUP_ARRAY = 8
    LRU_HASH = 9
    LRU_PERCPU_HASH = 10
    LPM_TRIE = 11
    ARRAY_OF_MAPS = 12
    HASH_OF_MAPS = 13
    DEVMAP = 14
    SOCKMAP = 15
    CPUMAP = 16
    XSKMAP = 17
    SOCKHASH = 18
    CGROUP_STORAGE = 19
    REUSEPORT_SOCKARRAY = 20
    PERCPU_CGROUP_STORAGE = 21
    QUEUE = 22
    STACK = 23
    SK_STORAGE = 24
    DEVMAP_HASH = 25
    STRUCT_OPS = 26
    RINGBUF = 27
    INODE_STORAGE = 28
    TASK_STORAGE = 29
    BLOOM_FILTER = 30
    USER_RINGBUF = 31
    CGRP_STORAGE = 32
    ARENA = 33
    INSN_ARRAY = 34  # 6.19: instruction offsets through verification and JIT
    RHASH = 35  # 7.2: resizable hash map (BPF_F_NO_PREALLOC only)


@_fast_enum(_CEnum)
class ProgType(_CEnumBody):
    """enum bpf_prog_type."""

    UNSPEC = 0
    SOCKET_FILTER = 1
    KPROBE = 2
    SCHED_CLS = 3
    SCHED_ACT = 4
    TRACEPOINT = 5
    XDP = 6
    PERF_EVENT = 7
    CGROUP_SKB = 8
    CGROUP_SOCK = 9
    LWT_IN = 10
    LWT_OUT = 11
    LWT_XMIT = 12
    SOCK_OPS = 13
    SK_SKB = 14
    CGROUP_DEVICE = 15
    SK_MSG = 16
    RAW_TRACEPOINT = 17
    CGROUP_SOCK_ADDR = 18
    LWT_SEG6LOCAL = 19
    LIRC_MODE2 = 20
    SK_REUSEPORT = 21
    FLOW_DISSECTOR = 22
    CGROUP_SYSCTL = 23
    RAW_TRACEPOINT_WRITABLE = 24
    CGROUP_SOCKOPT = 25
    TRACING = 26
    STRUCT_OPS = 27
    EXT = 28
    LSM = 29
    SK_LOOKUP = 30
    SYSCALL = 31
    NETFILTER = 32


@_fast_enum(_CEnum)
class AttachType(_CEnumBody):
    """enum bpf_attach_type."""

    CGROUP_INET_INGRESS = 0
    CGROUP_INET_EGRESS = 1
    CGROUP_INET_SOCK_CREATE = 2
    CGROUP_SOCK_OPS = 3
    SK_SKB_STREAM_PARSER = 4
    SK_SKB_STREAM_VERDICT = 5
    CGROUP_DEVICE = 6
    SK_MSG_VERDICT = 7
    CGROUP_INET4_BIND = 8
    CGROUP_INET6_BIND = 9
    CGROUP_INET4_CONNECT = 10
    CGROUP_INET6_CONNECT = 11
    CGROUP_INET4_POST_BIND = 12
    CGROUP_INET6_POST_BIND = 13
    CGROUP_UDP4_SENDMSG = 14
    CGROUP_UDP6_SENDMSG = 15
    LIRC_MODE2 = 16
    FLOW_DISSECTOR = 17
    CGROUP_SYSCTL = 18
    CGROUP_UDP4_RECVMSG = 19
    CGROUP_UDP6_RECVMSG = 20
    CGROUP_GETSOCKOPT = 21
    CGROUP_SETSOCKOPT = 22
    TRACE_RAW_TP = 23
    TRACE_FENTRY = 24
    TRACE_FEXIT = 25
    MODIFY_RETURN = 26
    LSM_MAC = 27
    TRACE_ITER = 28
    CGROUP_INET4_GETPEERNAME = 29
    CGROUP_INET6_GETPEERNAME = 30
    CGROUP_INET4_GETSOCKNAME = 31
    CGROUP_INET6_GETSOCKNAME = 32
    XDP_DEVMAP = 33
    CGROUP_INET_SOCK_RELEASE = 34
    XDP_CPUMAP = 35
    SK_LOOKUP = 36
    XDP = 37
    SK_SKB_VERDICT = 38
    SK_REUSEPORT_SELECT = 39
    SK_REUSEPORT_SELECT_OR_MIGRATE = 40
    PERF_EVENT = 41
    TRACE_KPROBE_MULTI = 42
    LSM_CGROUP = 43
    STRUCT_OPS = 44
    NETFILTER = 45
    TCX_INGRESS = 46
    TCX_EGRESS = 47
    TRACE_UPROBE_MULTI = 48
    CGROUP_UNIX_CONNECT = 49
    CGROUP_UNIX_SENDMSG = 50
    CGROUP_UNIX_RECVMSG = 51
    CGROUP_UNIX_GETPEERNAME = 52
    CGROUP_UNIX_GETSOCKNAME = 53
    NETKIT_PRIMARY = 54
    NETKIT_PEER = 55
    TRACE_KPROBE_SESSION = 56
    TRACE_UPROBE_SESSION = 57  # 6.13 (absent from 6.12's UAPI headers)
    TRACE_FSESSION = 58  # 7.0 (not in 6.18's BTF, in 7.2's); named in libbpf 1.7's section table
    TRACE_FENTRY_MULTI = 59  # 7.2, with BPF_LINK_TYPE_TRACING_MULTI
    TRACE_FEXIT_MULTI = 60  # 7.2
    TRACE_FSESSION_MULTI = 61  # 7.2


@_fast_enum(_CEnum)
class LinkType(_CEnumBody):
    """enum bpf_link_type."""

    UNSPEC = 0
    RAW_TRACEPOINT = 1
    TRACING = 2
    CGROUP = 3
    ITER = 4
    NETNS = 5
    XDP = 6
    PERF_EVENT = 7
    KPROBE_MULTI = 8
    STRUCT_OPS = 9
    NETFILTER = 10
    TCX = 11
    UPROBE_MULTI = 12
    NETKIT = 13
    SOCKMAP = 14
    TRACING_MULTI = 15  # 7.2


@_fast_enum(_CEnum)
class PerfEventType(_CEnumBody):
    """enum bpf_perf_event_type (bpf_link_info.perf_event.type)."""

    UNSPEC = 0
    UPROBE = 1
    URETPROBE = 2
    KPROBE = 3
    KRETPROBE = 4
    TRACEPOINT = 5
    EVENT = 6


@_fast_enum(_CEnum)
class FuncId(_CEnumBody):
    """A few helper ids (enum bpf_func_id) the feature probes and tests call."""

    map_lookup_elem = 1
    map_update_elem = 2
    ktime_get_ns = 5
    trace_printk = 6
    get_current_pid_tgid = 14
    perf_event_output = 25
    get_attach_cookie = 174
    ringbuf_output = 130
    ringbuf_reserve = 131
    ringbuf_submit = 132


@_fast_enum(_CEnum)
class StatsType(_CEnumBody):
    """enum bpf_stats_type."""

    RUN_TIME = 0


# Prefixes that turn member names into the kernel's (checked by tests/test_layout.py).
for _enum, _prefix in (
    (Cmd, "BPF_"),
    (MapType, "BPF_MAP_TYPE_"),
    (ProgType, "BPF_PROG_TYPE_"),
    (AttachType, "BPF_"),
    (LinkType, "BPF_LINK_TYPE_"),
    (PerfEventType, "BPF_PERF_EVENT_"),
    (FuncId, "BPF_FUNC_"),
    (StatsType, "BPF_STATS_"),
):
    type.__setattr__(_enum, "C_PREFIX", _prefix)


@_fast_enum(enum.IntFlag)
class MapFlag(_IntFlagBody):
    """map_flags of BPF_MAP_CREATE (BPF_F_*)."""

    NO_PREALLOC = 1 << 0
    NO_COMMON_LRU = 1 << 1
    NUMA_NODE = 1 << 2
    RDONLY = 1 << 3
    WRONLY = 1 << 4
    STACK_BUILD_ID = 1 << 5
    ZERO_SEED = 1 << 6
    RDONLY_PROG = 1 << 7
    WRONLY_PROG = 1 << 8
    CLONE = 1 << 9
    MMAPABLE = 1 << 10
    PRESERVE_ELEMS = 1 << 11
    INNER_MAP = 1 << 12
    LINK = 1 << 13
    PATH_FD = 1 << 14
    VTYPE_BTF_OBJ_FD = 1 << 15
    TOKEN_FD = 1 << 16
    SEGV_ON_FAULT = 1 << 17
    NO_USER_CONV = 1 << 18
    RB_OVERWRITE = 1 << 19  # 6.19: a ring buffer that overwrites its oldest records when full


# BPF_MAP_UPDATE_ELEM flags.
BPF_ANY = 0
BPF_NOEXIST = 1
BPF_EXIST = 2
BPF_F_LOCK = 4

# BPF_PROG_LOAD prog_flags.
BPF_F_STRICT_ALIGNMENT = 1 << 0
BPF_F_ANY_ALIGNMENT = 1 << 1
BPF_F_TEST_RND_HI32 = 1 << 2
BPF_F_TEST_STATE_FREQ = 1 << 3
BPF_F_SLEEPABLE = 1 << 4
BPF_F_XDP_HAS_FRAGS = 1 << 5
BPF_F_XDP_DEV_BOUND_ONLY = 1 << 6

# BPF_LINK_CREATE flags for multi links.
BPF_F_KPROBE_MULTI_RETURN = 1 << 0
BPF_F_UPROBE_MULTI_RETURN = 1 << 0

# BPF_PROG_ATTACH / BPF_LINK_CREATE / BPF_LINK_UPDATE flags. REPLACE (5.6) makes an update
# conditional on the old program; BEFORE/AFTER/ID/LINK (6.6, 053c8e1f235d "bpf: Add generic
# attach/detach/query API for multi-progs") place a program relative to another one of a
# multi-program hook (tcx, netkit): relative_fd/relative_id names a program, or with BPF_F_LINK
# a link; BEFORE or AFTER with no relative means the head or the tail.
BPF_F_REPLACE = 1 << 2
BPF_F_BEFORE = 1 << 3
BPF_F_AFTER = 1 << 4
BPF_F_ID = 1 << 5
BPF_F_LINK = 1 << 13

# bpf_attr.file_flags for BPF_OBJ_GET.
BPF_F_RDONLY = 1 << 3
BPF_F_WRONLY = 1 << 4

# Ring buffer record header bits (include/uapi/linux/bpf.h).
BPF_RINGBUF_BUSY_BIT = 1 << 31
BPF_RINGBUF_DISCARD_BIT = 1 << 30
BPF_RINGBUF_HDR_SZ = 8

# The value libbpf and the kernel use for kern_version when "any" is meant.
KERNEL_VERSION_MAGIC = 0xFFFFFFFE

# The ELF sections of struct_ops maps (libbpf: SEC(".struct_ops"), SEC(".struct_ops.link")); here, not in
# spec/struct_ops.py, so an object without them is parsed without importing that module.
STRUCT_OPS_SECTIONS = (".struct_ops", ".struct_ops.link")
