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

``mode=link.AttachMode.IOCTL`` forces PERF_EVENT_IOC_SET_BPF (the pre-5.15 way),
``AttachMode.LINK`` a bpf_link; AUTO (the default) takes the link when the kernel has it.
Links made through tracefs are removed on close, on a failed attach and at interpreter exit;
``link.remove_stale_probes()`` (``bpfkit gc``) removes those of processes that died.
"""

from __future__ import annotations

from .auto import AttachedLinks, SectionTarget, attach_all, attach_probe, attach_section, parse_section
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
from ._net import NetAttachMode, have_tcx, have_xdp_link
from .net_spec import attach_network
from .tc import Anchor, ClsBpfLink, TcDirection, TcFilter, TcQuery, TcxInfo, TcxLink, TcxProgram, tc, tc_query, tcx
from .xdp import XdpInfo, XdpLink, XdpMode, XdpNetlinkLink, XdpQuery, xdp, xdp_detach, xdp_query
from .uprobe import Executable, uprobe, uretprobe

__all__ = [
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
]
