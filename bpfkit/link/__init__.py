"""Attaching programs: every attach function returns a :class:`Link`.

    from bpfkit import link

    with link.tracepoint("syscalls", "sys_enter_openat", prog) as lk: ...
    lk = link.kprobe("do_sys_openat2", prog, cookie=7)          # kprobe PMU, else kprobe_events
    lk = link.kretprobe("do_sys_openat2", prog, maxactive=64)   # kprobe_events (r64:)
    exe = link.Executable("libc")                               # library names like bpftrace
    lk = exe.uprobe("malloc", prog, pid=1234)
    lk = exe.uretprobe("malloc", prog)
    lk.pin("/sys/fs/bpf/mytool/malloc")                         # outlives the process
    links = link.attach_all(collection)                          # targets from section names
    lk = link.attach_probe("uprobe:/bin/bash:readline", prog)    # bpftrace-style spec
    lk = link.xdp("eth0", prog, netns="blue")                    # XDP link, else netlink
    lk = link.tc("eth0", prog, "ingress")                        # tcx link, else cls_bpf
    lk = link.attach_network(prog, "tc:eth0:egress")             # xdp:/tc: probe specs
    lk = link.raw_tracepoint("sys_enter", prog)                 # SEC("raw_tp/...")
    lk = link.fentry(prog, cookie=7)                              # target fixed at load (also fexit, tp_btf, lsm...)
    lk = link.freplace(ext_prog)                                  # SEC("freplace/FUNC"): replaces FUNC of its target
    lk = link.struct_ops(coll.maps["my_cc"])                      # register a struct_ops map (tcp_congestion_ops...)
    with link.iterate(prog) as it: text = it.read_all()         # SEC("iter/task")
    lk = link.perf_event_sample(prog, "cpu-clock", freq=99)      # every CPU: a LinkGroup
    group = link.attach_many(syms, lambda s: exe.uprobe(s, prog))  # LinkGroup; closes concurrently

``mode=link.AttachMode.IOCTL`` forces PERF_EVENT_IOC_SET_BPF (the pre-5.15 way),
``AttachMode.LINK`` a bpf_link; AUTO (the default) takes the link when the kernel has it.
Links made through tracefs are removed on close, on a failed attach and at interpreter exit;
``link.remove_stale_probes()`` (``bpfkit gc``) removes those of processes that died.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .base import (
    EventInfo,
    KprobeInfo,
    Link,
    LinkInfo,
    PerfEventInfo,
    RawLink,
    RawTracepointInfo,
    TracepointInfo,
    UprobeInfo,
    iter_links,
    link_from_fd,
    link_from_id,
    load_pinned_link,
    register_link_class,
)
from .kprobe import kprobe, kretprobe, ksyscall, syscall_prefix, syscall_wrapper
from .perf_event import AttachMode, PerfEvent, PerfEventIoctlLink, PerfEventLink, attach_perf_event, have_perf_link
from .tracefs_probes import GcResult, ProbeOwnerInfo, bpfkit_probes, remove_stale_probes, stale_probes
from .tracepoint import tracepoint
from .sampling import HardwareEvent, SampleEvent, SoftwareEvent, perf_event_sample
from ._net import NetAttachMode, have_tcx, have_xdp_link
from .tc import Anchor, ClsBpfLink, TcDirection, TcFilter, TcQuery, TcxInfo, TcxLink, TcxProgram, tc, tc_query, tcx
from .xdp import XdpInfo, XdpLink, XdpMode, XdpNetlinkLink, XdpQuery, xdp, xdp_detach, xdp_query
from .uprobe import Executable, uprobe, uretprobe
from .tracing import (
    RawTracepointFd,
    RawTracepointLink,
    TracingInfo,
    TracingLink,
    attach_tracing,
    fentry,
    fexit,
    fmod_ret,
    freplace,
    lsm,
    raw_tracepoint,
    tp_btf,
)
from .iter import CgroupIterOrder, IterInfo, IterLink, iterate
from .struct_ops import StructOpsInfo, StructOpsLink, StructOpsMapLink, struct_ops
from .group import LinkGroup, attach_many, close_links
from .multi import (
    KprobeMultiInfo,
    KprobeMultiLink,
    MultiMode,
    MultiPerfGroup,
    UprobeMultiInfo,
    UprobeMultiLink,
    kprobe_multi,
    kprobe_session,
    kretprobe_multi,
    uprobe_multi,
    uprobe_session,
    uretprobe_multi,
)

__all__ = [
    "raw_tracepoint",
    "attach_tracing",
    "fentry",
    "fexit",
    "fmod_ret",
    "freplace",
    "struct_ops",
    "StructOpsLink",
    "StructOpsMapLink",
    "StructOpsInfo",
    "tp_btf",
    "lsm",
    "RawTracepointLink",
    "RawTracepointFd",
    "TracingLink",
    "TracingInfo",
    "iterate",
    "IterLink",
    "IterInfo",
    "CgroupIterOrder",
    "Link",
    "RawLink",
    "LinkInfo",
    "PerfEventInfo",
    "KprobeInfo",
    "UprobeInfo",
    "TracepointInfo",
    "EventInfo",
    "RawTracepointInfo",
    "AttachMode",
    "PerfEvent",
    "PerfEventLink",
    "PerfEventIoctlLink",
    "attach_perf_event",
    "have_perf_link",
    "tracepoint",
    "perf_event_sample",
    "SoftwareEvent",
    "HardwareEvent",
    "SampleEvent",
    "kprobe",
    "kretprobe",
    "ksyscall",
    "syscall_prefix",
    "syscall_wrapper",
    "Executable",
    "uprobe",
    "uretprobe",
    "attach_all",
    "attach_section",
    "attach_probe",
    "parse_section",
    "skip_reason",
    "auto_attach",
    "SectionTarget",
    "AttachedLinks",
    "load_pinned_link",
    "link_from_id",
    "link_from_fd",
    "iter_links",
    "register_link_class",
    "bpfkit_probes",
    "stale_probes",
    "remove_stale_probes",
    "ProbeOwnerInfo",
    "GcResult",
    "NetAttachMode",
    "have_xdp_link",
    "have_tcx",
    "xdp",
    "xdp_query",
    "xdp_detach",
    "XdpMode",
    "XdpLink",
    "XdpNetlinkLink",
    "XdpInfo",
    "XdpQuery",
    "tc",
    "tcx",
    "tc_query",
    "TcDirection",
    "Anchor",
    "TcxLink",
    "ClsBpfLink",
    "TcxInfo",
    "TcxProgram",
    "TcQuery",
    "TcFilter",
    "attach_network",
    "MultiMode",
    "KprobeMultiLink",
    "UprobeMultiLink",
    "KprobeMultiInfo",
    "UprobeMultiInfo",
    "MultiPerfGroup",
    "kprobe_multi",
    "kretprobe_multi",
    "uprobe_multi",
    "uretprobe_multi",
    "kprobe_session",
    "uprobe_session",
    "LinkGroup",
    "attach_many",
    "close_links",
]

# Attaching at a spec or section is bpfkit.attach, the one attach path above this package (it
# imports link modules, so it is loaded on first use of these names, not here).
_FROM_ATTACH = frozenset({"AttachedLinks", "SectionTarget", "attach_all", "attach_probe", "attach_section",
                          "auto_attach", "parse_section", "skip_reason", "attach_network"})

if TYPE_CHECKING:
    from ..attach import (
        AttachedLinks,
        SectionTarget,
        attach_all,
        attach_network,
        attach_probe,
        attach_section,
        auto_attach,
        parse_section,
        skip_reason,
    )


def __getattr__(name: str) -> Any:
    if name in _FROM_ATTACH:
        from .. import attach

        value = getattr(attach, name)
        globals()[name] = value  # resolved once
        return value
    raise AttributeError(f"module 'bpfkit.link' has no attribute {name!r}")
