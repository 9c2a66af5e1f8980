# SPDX-License-Identifier: Apache-2.0
"""Program section names: what ``SEC("...")`` means, as libbpf defines it.

clang puts each BPF program in the ELF section its ``SEC()`` names, and libbpf's convention turns
that name into the program type, the expected attach type and the attach target. The table below
is libbpf's ``section_defs`` as data; the rules for reading it are libbpf's:

* ``"kprobe+"``: the section is exactly ``kprobe`` or ``kprobe/<target>``.
* ``"sk_skb/stream_parser"`` (no ``+``): the section must equal it.
* a definition ending in ``/`` needs something after it.
* a leading ``?`` on the section (``SEC("?tp/...")``) means "not loaded automatically".
* the first matching entry wins, in table order.

The target after the prefix's ``/`` becomes :attr:`SectionInfo.attach_to` (``syscalls/
sys_enter_openat`` for ``tracepoint/syscalls/sys_enter_openat``, ``/bin/bash:readline`` for
``uretprobe//bin/bash:readline``), which the link layer uses to attach automatically.

A program using libbpf can teach it more names (``libbpf_register_prog_handler``).
ebpf_exporter does, for two that its objects use, and :data:`REGISTERED_SECTION_DEFS` has them:
``perf_event/type=T,config=C,frequency=F`` (a counter sampled on every CPU; read by
:func:`parse_perf_event_section`) and ``xdp/IFACE`` (XDP on that interface). They are tried
after libbpf's table, so ``xdp/devmap`` and ``xdp/cpumap`` keep libbpf's meaning.
"""

from __future__ import annotations

import enum
import functools

from ._record import FrozenRecord
from .errors import ParseError
from .spec.consts import BPF_F_SLEEPABLE, BPF_F_XDP_HAS_FRAGS, AttachType, ProgType

__all__ = ["SecFlag", "SectionDef", "SectionInfo", "SECTION_DEFS", "REGISTERED_SECTION_DEFS", "LIBBPF_VERSION",
           "match_section", "PerfEventSection", "parse_perf_event_section"]


class SecFlag(enum.IntFlag):
    """libbpf's ``enum sec_def_flags``."""

    NONE = 0
    EXP_ATTACH_OPT = 1  # expected_attach_type may be dropped on kernels that lack it
    ATTACHABLE = 2  # legacy marker of PROG_ATTACH-able types
    ATTACHABLE_OPT = 3
    ATTACH_BTF = 4  # the target is a BTF id (fentry/fexit/tp_btf/lsm/iter/freplace)
    SLEEPABLE = 8  # loaded with BPF_F_SLEEPABLE
    XDP_FRAGS = 16  # loaded with BPF_F_XDP_HAS_FRAGS
    USDT = 32


# Frozen records (bpfkit._record): a frozen dataclass's repr, equality and hashing, without
# generating methods when this module is imported (on every `bpfkit load`'s path).
class SectionDef(FrozenRecord):
    """One entry of the table: libbpf's ``SEC_DEF(sec, prog_type, attach_type, flags)``."""

    __slots__ = ("sec", "prog_type", "attach_type", "flags")
    sec: str
    prog_type: ProgType
    attach_type: AttachType | None
    flags: SecFlag

    def __init__(self, sec: str, prog_type: ProgType, attach_type: AttachType | None, flags: SecFlag) -> None:
        setattr_ = object.__setattr__  # FrozenRecord._set_fields, unrolled: the table makes ~100 at import
        setattr_(self, "sec", sec)
        setattr_(self, "prog_type", prog_type)
        setattr_(self, "attach_type", attach_type)
        setattr_(self, "flags", flags)

    @property
    def prefix(self) -> str:
        """The name without libbpf's ``+``/``/`` markers: ``kretprobe`` for ``kretprobe+``."""
        return self.sec.rstrip("+/") if self.sec.endswith("+") else self.sec.rstrip("/")

    def matches(self, name: str) -> bool:
        sec = self.sec
        if sec.endswith("/"):
            return name.startswith(sec)
        if sec.endswith("+"):
            base = sec[:-1]
            return name == base or name.startswith(base + "/")
        return name == sec


class SectionInfo(FrozenRecord):
    """What a program's section name says about it."""

    __slots__ = ("section", "prog_type", "attach_type", "attach_to", "prog_flags", "autoload", "definition")
    section: str  # without a leading "?"
    prog_type: ProgType
    attach_type: AttachType | None
    attach_to: str  # the target after the prefix ("" when the section names none)
    prog_flags: int  # BPF_F_SLEEPABLE, BPF_F_XDP_HAS_FRAGS
    autoload: bool  # False for "?sec"
    definition: SectionDef | None  # None when no entry matched

    def __init__(self, section: str, prog_type: ProgType, attach_type: AttachType | None, attach_to: str,
                 prog_flags: int, autoload: bool, definition: SectionDef | None) -> None:
        self._set_fields(section, prog_type, attach_type, attach_to, prog_flags, autoload, definition)

    @property
    def kind(self) -> str:
        """The matched prefix (``tracepoint``, ``tp``, ``kretprobe``, ``uprobe.multi``...), or ''."""
        return self.definition.prefix if self.definition else ""


@functools.lru_cache(maxsize=1024)
def match_section(name: str) -> SectionInfo:
    """Interpret a program section name (libbpf's table first, then the registered names);
    unknown names give ProgType.UNSPEC."""
    autoload = True
    if name.startswith("?"):
        autoload = False
        name = name[1:]
    for sec_def in _ALL_DEFS:
        if sec_def.matches(name):
            base = sec_def.sec.rstrip("+")
            rest = name[len(base):]
            attach_to = rest[1:] if rest.startswith("/") else rest
            if sec_def.sec.endswith("/"):
                attach_to = name[len(base):]
            flags = 0
            if sec_def.flags & SecFlag.SLEEPABLE:
                flags |= BPF_F_SLEEPABLE
            if sec_def.flags & SecFlag.XDP_FRAGS:
                flags |= BPF_F_XDP_HAS_FRAGS
            return SectionInfo(name, sec_def.prog_type, sec_def.attach_type, attach_to, flags, autoload, sec_def)
    return SectionInfo(name, ProgType.UNSPEC, None, "", 0, autoload, None)


# BEGIN GENERATED
# generated by scripts/gen_sections.py from libbpf v1.7.0 (section_defs in src/libbpf.c);
# do not edit by hand: rerun the script against a newer libbpf.c instead.
LIBBPF_VERSION = "1.7.0"

SECTION_DEFS: tuple[SectionDef, ...] = (
    SectionDef("socket", ProgType.SOCKET_FILTER, None, SecFlag.NONE),
    SectionDef("sk_reuseport/migrate", ProgType.SK_REUSEPORT, AttachType.SK_REUSEPORT_SELECT_OR_MIGRATE, SecFlag.ATTACHABLE),
    SectionDef("sk_reuseport", ProgType.SK_REUSEPORT, AttachType.SK_REUSEPORT_SELECT, SecFlag.ATTACHABLE),
    SectionDef("kprobe+", ProgType.KPROBE, None, SecFlag.NONE),
    SectionDef("uprobe+", ProgType.KPROBE, None, SecFlag.NONE),
    SectionDef("uprobe.s+", ProgType.KPROBE, None, SecFlag.SLEEPABLE),
    SectionDef("kretprobe+", ProgType.KPROBE, None, SecFlag.NONE),
    SectionDef("uretprobe+", ProgType.KPROBE, None, SecFlag.NONE),
    SectionDef("uretprobe.s+", ProgType.KPROBE, None, SecFlag.SLEEPABLE),
    SectionDef("kprobe.multi+", ProgType.KPROBE, AttachType.TRACE_KPROBE_MULTI, SecFlag.NONE),
    SectionDef("kretprobe.multi+", ProgType.KPROBE, AttachType.TRACE_KPROBE_MULTI, SecFlag.NONE),
    SectionDef("kprobe.session+", ProgType.KPROBE, AttachType.TRACE_KPROBE_SESSION, SecFlag.NONE),
    SectionDef("uprobe.multi+", ProgType.KPROBE, AttachType.TRACE_UPROBE_MULTI, SecFlag.NONE),
    SectionDef("uretprobe.multi+", ProgType.KPROBE, AttachType.TRACE_UPROBE_MULTI, SecFlag.NONE),
    SectionDef("uprobe.session+", ProgType.KPROBE, AttachType.TRACE_UPROBE_SESSION, SecFlag.NONE),
    SectionDef("uprobe.multi.s+", ProgType.KPROBE, AttachType.TRACE_UPROBE_MULTI, SecFlag.SLEEPABLE),
    SectionDef("uretprobe.multi.s+", ProgType.KPROBE, AttachType.TRACE_UPROBE_MULTI, SecFlag.SLEEPABLE),
    SectionDef("uprobe.session.s+", ProgType.KPROBE, AttachType.TRACE_UPROBE_SESSION, SecFlag.SLEEPABLE),
    SectionDef("ksyscall+", ProgType.KPROBE, None, SecFlag.NONE),
    SectionDef("kretsyscall+", ProgType.KPROBE, None, SecFlag.NONE),
    SectionDef("usdt+", ProgType.KPROBE, None, SecFlag.USDT),
    SectionDef("usdt.s+", ProgType.KPROBE, None, SecFlag.USDT | SecFlag.SLEEPABLE),
    SectionDef("tc/ingress", ProgType.SCHED_CLS, AttachType.TCX_INGRESS, SecFlag.NONE),
    SectionDef("tc/egress", ProgType.SCHED_CLS, AttachType.TCX_EGRESS, SecFlag.NONE),
    SectionDef("tcx/ingress", ProgType.SCHED_CLS, AttachType.TCX_INGRESS, SecFlag.NONE),
    SectionDef("tcx/egress", ProgType.SCHED_CLS, AttachType.TCX_EGRESS, SecFlag.NONE),
    SectionDef("tc", ProgType.SCHED_CLS, None, SecFlag.NONE),
    SectionDef("classifier", ProgType.SCHED_CLS, None, SecFlag.NONE),
    SectionDef("action", ProgType.SCHED_ACT, None, SecFlag.NONE),
    SectionDef("netkit/primary", ProgType.SCHED_CLS, AttachType.NETKIT_PRIMARY, SecFlag.NONE),
    SectionDef("netkit/peer", ProgType.SCHED_CLS, AttachType.NETKIT_PEER, SecFlag.NONE),
    SectionDef("tracepoint+", ProgType.TRACEPOINT, None, SecFlag.NONE),
    SectionDef("tp+", ProgType.TRACEPOINT, None, SecFlag.NONE),
    SectionDef("raw_tracepoint+", ProgType.RAW_TRACEPOINT, None, SecFlag.NONE),
    SectionDef("raw_tp+", ProgType.RAW_TRACEPOINT, None, SecFlag.NONE),
    SectionDef("raw_tracepoint.w+", ProgType.RAW_TRACEPOINT_WRITABLE, None, SecFlag.NONE),
    SectionDef("raw_tp.w+", ProgType.RAW_TRACEPOINT_WRITABLE, None, SecFlag.NONE),
    SectionDef("tp_btf+", ProgType.TRACING, AttachType.TRACE_RAW_TP, SecFlag.ATTACH_BTF),
    SectionDef("fentry+", ProgType.TRACING, AttachType.TRACE_FENTRY, SecFlag.ATTACH_BTF),
    SectionDef("fmod_ret+", ProgType.TRACING, AttachType.MODIFY_RETURN, SecFlag.ATTACH_BTF),
    SectionDef("fexit+", ProgType.TRACING, AttachType.TRACE_FEXIT, SecFlag.ATTACH_BTF),
    SectionDef("fentry.s+", ProgType.TRACING, AttachType.TRACE_FENTRY, SecFlag.ATTACH_BTF | SecFlag.SLEEPABLE),
    SectionDef("fmod_ret.s+", ProgType.TRACING, AttachType.MODIFY_RETURN, SecFlag.ATTACH_BTF | SecFlag.SLEEPABLE),
    SectionDef("fexit.s+", ProgType.TRACING, AttachType.TRACE_FEXIT, SecFlag.ATTACH_BTF | SecFlag.SLEEPABLE),
    SectionDef("fsession+", ProgType.TRACING, AttachType.TRACE_FSESSION, SecFlag.ATTACH_BTF),
    SectionDef("fsession.s+", ProgType.TRACING, AttachType.TRACE_FSESSION, SecFlag.ATTACH_BTF | SecFlag.SLEEPABLE),
    SectionDef("freplace+", ProgType.EXT, None, SecFlag.ATTACH_BTF),
    SectionDef("lsm+", ProgType.LSM, AttachType.LSM_MAC, SecFlag.ATTACH_BTF),
    SectionDef("lsm.s+", ProgType.LSM, AttachType.LSM_MAC, SecFlag.ATTACH_BTF | SecFlag.SLEEPABLE),
    SectionDef("lsm_cgroup+", ProgType.LSM, AttachType.LSM_CGROUP, SecFlag.ATTACH_BTF),
    SectionDef("iter+", ProgType.TRACING, AttachType.TRACE_ITER, SecFlag.ATTACH_BTF),
    SectionDef("iter.s+", ProgType.TRACING, AttachType.TRACE_ITER, SecFlag.ATTACH_BTF | SecFlag.SLEEPABLE),
    SectionDef("syscall", ProgType.SYSCALL, None, SecFlag.SLEEPABLE),
    SectionDef("xdp.frags/devmap", ProgType.XDP, AttachType.XDP_DEVMAP, SecFlag.XDP_FRAGS),
    SectionDef("xdp/devmap", ProgType.XDP, AttachType.XDP_DEVMAP, SecFlag.ATTACHABLE),
    SectionDef("xdp.frags/cpumap", ProgType.XDP, AttachType.XDP_CPUMAP, SecFlag.XDP_FRAGS),
    SectionDef("xdp/cpumap", ProgType.XDP, AttachType.XDP_CPUMAP, SecFlag.ATTACHABLE),
    SectionDef("xdp.frags", ProgType.XDP, AttachType.XDP, SecFlag.XDP_FRAGS),
    SectionDef("xdp", ProgType.XDP, AttachType.XDP, SecFlag.ATTACHABLE_OPT),
    SectionDef("perf_event", ProgType.PERF_EVENT, None, SecFlag.NONE),
    SectionDef("lwt_in", ProgType.LWT_IN, None, SecFlag.NONE),
    SectionDef("lwt_out", ProgType.LWT_OUT, None, SecFlag.NONE),
    SectionDef("lwt_xmit", ProgType.LWT_XMIT, None, SecFlag.NONE),
    SectionDef("lwt_seg6local", ProgType.LWT_SEG6LOCAL, None, SecFlag.NONE),
    SectionDef("sockops", ProgType.SOCK_OPS, AttachType.CGROUP_SOCK_OPS, SecFlag.ATTACHABLE_OPT),
    SectionDef("sk_skb/stream_parser", ProgType.SK_SKB, AttachType.SK_SKB_STREAM_PARSER, SecFlag.ATTACHABLE_OPT),
    SectionDef("sk_skb/stream_verdict", ProgType.SK_SKB, AttachType.SK_SKB_STREAM_VERDICT, SecFlag.ATTACHABLE_OPT),
    SectionDef("sk_skb/verdict", ProgType.SK_SKB, AttachType.SK_SKB_VERDICT, SecFlag.ATTACHABLE_OPT),
    SectionDef("sk_skb", ProgType.SK_SKB, None, SecFlag.NONE),
    SectionDef("sk_msg", ProgType.SK_MSG, AttachType.SK_MSG_VERDICT, SecFlag.ATTACHABLE_OPT),
    SectionDef("lirc_mode2", ProgType.LIRC_MODE2, AttachType.LIRC_MODE2, SecFlag.ATTACHABLE_OPT),
    SectionDef("flow_dissector", ProgType.FLOW_DISSECTOR, AttachType.FLOW_DISSECTOR, SecFlag.ATTACHABLE_OPT),
    SectionDef("cgroup_skb/ingress", ProgType.CGROUP_SKB, AttachType.CGROUP_INET_INGRESS, SecFlag.ATTACHABLE_OPT),
    SectionDef("cgroup_skb/egress", ProgType.CGROUP_SKB, AttachType.CGROUP_INET_EGRESS, SecFlag.ATTACHABLE_OPT),
    SectionDef("cgroup/skb", ProgType.CGROUP_SKB, None, SecFlag.NONE),
    SectionDef("cgroup/sock_create", ProgType.CGROUP_SOCK, AttachType.CGROUP_INET_SOCK_CREATE, SecFlag.ATTACHABLE),
    SectionDef("cgroup/sock_release", ProgType.CGROUP_SOCK, AttachType.CGROUP_INET_SOCK_RELEASE, SecFlag.ATTACHABLE),
    SectionDef("cgroup/sock", ProgType.CGROUP_SOCK, AttachType.CGROUP_INET_SOCK_CREATE, SecFlag.ATTACHABLE_OPT),
    SectionDef("cgroup/post_bind4", ProgType.CGROUP_SOCK, AttachType.CGROUP_INET4_POST_BIND, SecFlag.ATTACHABLE),
    SectionDef("cgroup/post_bind6", ProgType.CGROUP_SOCK, AttachType.CGROUP_INET6_POST_BIND, SecFlag.ATTACHABLE),
    SectionDef("cgroup/bind4", ProgType.CGROUP_SOCK_ADDR, AttachType.CGROUP_INET4_BIND, SecFlag.ATTACHABLE),
    SectionDef("cgroup/bind6", ProgType.CGROUP_SOCK_ADDR, AttachType.CGROUP_INET6_BIND, SecFlag.ATTACHABLE),
    SectionDef("cgroup/connect4", ProgType.CGROUP_SOCK_ADDR, AttachType.CGROUP_INET4_CONNECT, SecFlag.ATTACHABLE),
    SectionDef("cgroup/connect6", ProgType.CGROUP_SOCK_ADDR, AttachType.CGROUP_INET6_CONNECT, SecFlag.ATTACHABLE),
    SectionDef("cgroup/connect_unix", ProgType.CGROUP_SOCK_ADDR, AttachType.CGROUP_UNIX_CONNECT, SecFlag.ATTACHABLE),
    SectionDef("cgroup/sendmsg4", ProgType.CGROUP_SOCK_ADDR, AttachType.CGROUP_UDP4_SENDMSG, SecFlag.ATTACHABLE),
    SectionDef("cgroup/sendmsg6", ProgType.CGROUP_SOCK_ADDR, AttachType.CGROUP_UDP6_SENDMSG, SecFlag.ATTACHABLE),
    SectionDef("cgroup/sendmsg_unix", ProgType.CGROUP_SOCK_ADDR, AttachType.CGROUP_UNIX_SENDMSG, SecFlag.ATTACHABLE),
    SectionDef("cgroup/recvmsg4", ProgType.CGROUP_SOCK_ADDR, AttachType.CGROUP_UDP4_RECVMSG, SecFlag.ATTACHABLE),
    SectionDef("cgroup/recvmsg6", ProgType.CGROUP_SOCK_ADDR, AttachType.CGROUP_UDP6_RECVMSG, SecFlag.ATTACHABLE),
    SectionDef("cgroup/recvmsg_unix", ProgType.CGROUP_SOCK_ADDR, AttachType.CGROUP_UNIX_RECVMSG, SecFlag.ATTACHABLE),
    SectionDef("cgroup/getpeername4", ProgType.CGROUP_SOCK_ADDR, AttachType.CGROUP_INET4_GETPEERNAME, SecFlag.ATTACHABLE),
    SectionDef("cgroup/getpeername6", ProgType.CGROUP_SOCK_ADDR, AttachType.CGROUP_INET6_GETPEERNAME, SecFlag.ATTACHABLE),
    SectionDef("cgroup/getpeername_unix", ProgType.CGROUP_SOCK_ADDR, AttachType.CGROUP_UNIX_GETPEERNAME, SecFlag.ATTACHABLE),
    SectionDef("cgroup/getsockname4", ProgType.CGROUP_SOCK_ADDR, AttachType.CGROUP_INET4_GETSOCKNAME, SecFlag.ATTACHABLE),
    SectionDef("cgroup/getsockname6", ProgType.CGROUP_SOCK_ADDR, AttachType.CGROUP_INET6_GETSOCKNAME, SecFlag.ATTACHABLE),
    SectionDef("cgroup/getsockname_unix", ProgType.CGROUP_SOCK_ADDR, AttachType.CGROUP_UNIX_GETSOCKNAME, SecFlag.ATTACHABLE),
    SectionDef("cgroup/sysctl", ProgType.CGROUP_SYSCTL, AttachType.CGROUP_SYSCTL, SecFlag.ATTACHABLE),
    SectionDef("cgroup/getsockopt", ProgType.CGROUP_SOCKOPT, AttachType.CGROUP_GETSOCKOPT, SecFlag.ATTACHABLE),
    SectionDef("cgroup/setsockopt", ProgType.CGROUP_SOCKOPT, AttachType.CGROUP_SETSOCKOPT, SecFlag.ATTACHABLE),
    SectionDef("cgroup/dev", ProgType.CGROUP_DEVICE, AttachType.CGROUP_DEVICE, SecFlag.ATTACHABLE_OPT),
    SectionDef("struct_ops+", ProgType.STRUCT_OPS, None, SecFlag.NONE),
    SectionDef("struct_ops.s+", ProgType.STRUCT_OPS, None, SecFlag.SLEEPABLE),
    SectionDef("sk_lookup", ProgType.SK_LOOKUP, AttachType.SK_LOOKUP, SecFlag.ATTACHABLE),
    SectionDef("netfilter", ProgType.NETFILTER, AttachType.NETFILTER, SecFlag.NONE),
)
# END GENERATED

# Names libbpf knows only once a program registers a handler for them
# (libbpf_register_prog_handler): ebpf_exporter's two (exporter/perf_event.go, exporter/xdp.go),
# with the program and attach types it registers them with, and no flags (a registered
# handler has none). libbpf tries registered handlers before its own table, so under
# ebpf_exporter SEC("xdp/devmap") would name an interface "devmap"; here they come after it,
# and libbpf's xdp/devmap and xdp/cpumap keep their meaning.
REGISTERED_SECTION_DEFS: tuple[SectionDef, ...] = (
    SectionDef("perf_event/", ProgType.PERF_EVENT, AttachType.PERF_EVENT, SecFlag.NONE),
    SectionDef("xdp/", ProgType.XDP, AttachType.XDP, SecFlag.NONE),
)
_ALL_DEFS = SECTION_DEFS + REGISTERED_SECTION_DEFS


# ------------------------------------------------------- perf_event/type=T,config=C,frequency=F
class PerfEventSection(FrozenRecord):
    """What ``SEC("perf_event/type=T,config=C,frequency=F")`` asks for: a perf event of
    perf_event_attr ``type`` and ``config``, sampled ``frequency`` times a second."""

    __slots__ = ("type", "config", "frequency")
    type: int
    config: int
    frequency: int

    def __init__(self, type: int, config: int, frequency: int) -> None:
        self._set_fields(type, config, frequency)


# Each item's largest value: perf_event_attr.type is a __u32, config and sample_freq __u64s.
_PERF_EVENT_ITEMS = {"type": 2**32 - 1, "config": 2**64 - 1, "frequency": 2**64 - 1}


def parse_perf_event_section(section: str) -> PerfEventSection:
    """Read ``perf_event/ITEM=N,...`` as ebpf_exporter does (exporter/perf_event.go): items
    ``type``, ``config`` and ``frequency`` separated by ``,``, each a decimal integer;
    ``type`` and ``config`` are 0 when absent (its perf_event_attr starts zeroed), and
    ``frequency`` sets attr.freq and sample_freq. Stricter where ebpf_exporter would open an
    event that never samples or take the last of two values: ``frequency`` is required and at
    least 1, an item appears once, values are plain decimal digits within the field's range.

    Raises ParseError naming the section and the item.
    """
    body = section.removeprefix("?").removeprefix("perf_event/")
    values: dict[str, int] = {}
    for item in body.split(","):
        key, eq, text = item.partition("=")
        if not eq or not key:
            raise ParseError(f"section {section!r}: item {item!r} is not KEY=VALUE "
                             f"(expected perf_event/type=T,config=C,frequency=F)")
        if key not in _PERF_EVENT_ITEMS:
            raise ParseError(f"section {section!r}: unknown item {item!r} (known: {', '.join(_PERF_EVENT_ITEMS)})")
        if key in values:
            raise ParseError(f"section {section!r}: item {key!r} is given twice")
        if not (text.isascii() and text.isdigit()):
            raise ParseError(f"section {section!r}: item {item!r}: {text!r} is not a decimal integer")
        value = int(text)
        if value > _PERF_EVENT_ITEMS[key]:
            raise ParseError(f"section {section!r}: item {item!r}: {key} is at most {_PERF_EVENT_ITEMS[key]}")
        values[key] = value
    frequency = values.get("frequency", 0)
    if frequency < 1:
        raise ParseError(f"section {section!r}: " + ("frequency=0 never samples" if "frequency" in values else
                         "no frequency=F item (samples a second; without one the event never samples)"))
    return PerfEventSection(values.get("type", 0), values.get("config", 0), frequency)
