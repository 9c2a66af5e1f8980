# SPDX-License-Identifier: Apache-2.0
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
    lk = link.attach_cgroup("/sys/fs/cgroup/unified/app", prog)   # cgroup link, else BPF_PROG_ATTACH
    lk = link.attach_netns(prog, netns="blue")                   # flow_dissector / sk_lookup
    lk = link.attach_socket_filter(sock, prog)                   # SO_ATTACH_BPF (also attach_reuseport)
    lk = link.attach_sockmap(coll.maps["socks"], verdict)         # sk_skb/sk_msg: sockmap link, else PROG_ATTACH
    lk = link.attach_netfilter(prog, "ipv4", "local_out", priority=100)  # SEC("netfilter"), 6.4+
    lk = link.attach_netkit(prog, "nk0", peer=True)              # netkit device pair, 6.7+
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

import sys
import types

from .. import _lazy as _lazy_imports
from .._lazy import lazy_getattr

# typing costs start-up time; mypy treats TYPE_CHECKING as true.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

if TYPE_CHECKING:
    from ._netdev import NetAttachMode
    from ._netdev import have_tcx as have_tcx
    from ._netdev import have_xdp_link as have_xdp_link
    from .anchor import Anchor
    from .base import (
        EventInfo,
        GroupInfo,
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
    )
    from .base import (
        register_link_class as register_link_class,
    )
    from .cgroup import (
        CGROUP_HOOKS,
        CgroupInfo,
        CgroupLink,
        CgroupProgAttachment,
        CgroupProgram,
        CgroupQuery,
        attach_cgroup,
        cgroup_programs,
        cgroup_query,
    )
    from .cgroup import have_cgroup_link as have_cgroup_link
    from .cgroup import have_cgroup_mprog as have_cgroup_mprog
    from .executable import Executable
    from .group import LinkGroup, attach_many, close_links
    from .iter import CgroupIterOrder, IterInfo, IterLink, iterate
    from .kprobe import kprobe, kretprobe, ksyscall
    from .kprobe import syscall_prefix as syscall_prefix
    from .kprobe import syscall_wrapper as syscall_wrapper
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
    from .netfilter import NetfilterFamily, NetfilterHook, NetfilterInfo, NetfilterLink, attach_netfilter
    from .netfilter import have_netfilter_link as have_netfilter_link
    from .netkit import NetkitInfo, NetkitLink, NetkitQuery, NetkitRole, attach_netkit, netkit_query
    from .netkit import have_netkit_link as have_netkit_link
    from .netns import NETNS_HOOKS, NetnsInfo, NetnsLink, NetnsProgAttachment, NetnsQuery, attach_netns, netns_query
    from .perf_event import AttachMode, PerfEvent, PerfEventIoctlLink, PerfEventLink, attach_perf_event
    from .perf_event import have_perf_link as have_perf_link
    from .prog_attach import ProgAttachment, ProgAttachMode, raw_attach_program, raw_detach_program
    from .sampling import HardwareEvent, SoftwareEvent, perf_event_sample
    from .sampling import SampleEvent as SampleEvent
    from .socket import (
        SOCKMAP_HOOKS,
        ReuseportProgram,
        SocketFilter,
        SockmapInfo,
        SockmapLink,
        SockmapProgAttachment,
        attach_reuseport,
        attach_socket_filter,
        attach_sockmap,
    )
    from .socket import have_sockmap_link as have_sockmap_link
    from .struct_ops import StructOpsInfo, struct_ops
    from .struct_ops import StructOpsLink as StructOpsLink
    from .struct_ops import StructOpsMapLink as StructOpsMapLink
    from .tc import ClsBpfLink as ClsBpfLink
    from .tc import TcDirection, TcFilter, TcQuery, TcxInfo, TcxProgram, tc, tc_query, tcx
    from .tc import TcxLink as TcxLink
    from .tracefs_probes import GcResult, ProbeOwnerInfo, bpfkit_probes, remove_stale_probes, stale_probes
    from .tracepoint import tracepoint
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
    from .uprobe import UprobeTarget as UprobeTarget
    from .uprobe import uprobe, uretprobe
    from .xdp import XdpInfo, XdpMode, XdpQuery, xdp, xdp_detach, xdp_query
    from .xdp import XdpLink as XdpLink
    from .xdp import XdpNetlinkLink as XdpNetlinkLink

# Every name above, from its module: imported on first use (PEP 562) when run as the bpfkit
# command, so attaching one tracepoint imports the tracepoint and perf-event modules, not the
# other link kinds (see the end of this file for a program importing the library).
_LAZY = {
    "NetAttachMode": "bpfkit.link._netdev",
    "have_tcx": "bpfkit.link._netdev",
    "have_xdp_link": "bpfkit.link._netdev",
    "EventInfo": "bpfkit.link.base",
    "GroupInfo": "bpfkit.link.base",
    "KprobeInfo": "bpfkit.link.base",
    "Link": "bpfkit.link.base",
    "LinkInfo": "bpfkit.link.base",
    "PerfEventInfo": "bpfkit.link.base",
    "RawLink": "bpfkit.link.base",
    "RawTracepointInfo": "bpfkit.link.base",
    "TracepointInfo": "bpfkit.link.base",
    "UprobeInfo": "bpfkit.link.base",
    "iter_links": "bpfkit.link.base",
    "link_from_fd": "bpfkit.link.base",
    "link_from_id": "bpfkit.link.base",
    "load_pinned_link": "bpfkit.link.base",
    "register_link_class": "bpfkit.link.base",
    "CGROUP_HOOKS": "bpfkit.link.cgroup",
    "CgroupInfo": "bpfkit.link.cgroup",
    "CgroupLink": "bpfkit.link.cgroup",
    "CgroupProgAttachment": "bpfkit.link.cgroup",
    "CgroupProgram": "bpfkit.link.cgroup",
    "CgroupQuery": "bpfkit.link.cgroup",
    "attach_cgroup": "bpfkit.link.cgroup",
    "cgroup_programs": "bpfkit.link.cgroup",
    "cgroup_query": "bpfkit.link.cgroup",
    "have_cgroup_link": "bpfkit.link.cgroup",
    "have_cgroup_mprog": "bpfkit.link.cgroup",
    "LinkGroup": "bpfkit.link.group",
    "attach_many": "bpfkit.link.group",
    "close_links": "bpfkit.link.group",
    "CgroupIterOrder": "bpfkit.link.iter",
    "IterInfo": "bpfkit.link.iter",
    "IterLink": "bpfkit.link.iter",
    "iterate": "bpfkit.link.iter",
    "kprobe": "bpfkit.link.kprobe",
    "kretprobe": "bpfkit.link.kprobe",
    "ksyscall": "bpfkit.link.kprobe",
    "syscall_prefix": "bpfkit.link.kprobe",
    "syscall_wrapper": "bpfkit.link.kprobe",
    "KprobeMultiInfo": "bpfkit.link.multi",
    "KprobeMultiLink": "bpfkit.link.multi",
    "MultiMode": "bpfkit.link.multi",
    "MultiPerfGroup": "bpfkit.link.multi",
    "UprobeMultiInfo": "bpfkit.link.multi",
    "UprobeMultiLink": "bpfkit.link.multi",
    "kprobe_multi": "bpfkit.link.multi",
    "kprobe_session": "bpfkit.link.multi",
    "kretprobe_multi": "bpfkit.link.multi",
    "uprobe_multi": "bpfkit.link.multi",
    "uprobe_session": "bpfkit.link.multi",
    "uretprobe_multi": "bpfkit.link.multi",
    "NetfilterFamily": "bpfkit.link.netfilter",
    "NetfilterHook": "bpfkit.link.netfilter",
    "NetfilterInfo": "bpfkit.link.netfilter",
    "NetfilterLink": "bpfkit.link.netfilter",
    "attach_netfilter": "bpfkit.link.netfilter",
    "have_netfilter_link": "bpfkit.link.netfilter",
    "NetkitInfo": "bpfkit.link.netkit",
    "NetkitLink": "bpfkit.link.netkit",
    "NetkitQuery": "bpfkit.link.netkit",
    "NetkitRole": "bpfkit.link.netkit",
    "attach_netkit": "bpfkit.link.netkit",
    "netkit_query": "bpfkit.link.netkit",
    "have_netkit_link": "bpfkit.link.netkit",
    "NETNS_HOOKS": "bpfkit.link.netns",
    "NetnsInfo": "bpfkit.link.netns",
    "NetnsLink": "bpfkit.link.netns",
    "NetnsProgAttachment": "bpfkit.link.netns",
    "NetnsQuery": "bpfkit.link.netns",
    "attach_netns": "bpfkit.link.netns",
    "netns_query": "bpfkit.link.netns",
    "AttachMode": "bpfkit.link.perf_event",
    "PerfEvent": "bpfkit.link.perf_event",
    "PerfEventIoctlLink": "bpfkit.link.perf_event",
    "PerfEventLink": "bpfkit.link.perf_event",
    "attach_perf_event": "bpfkit.link.perf_event",
    "have_perf_link": "bpfkit.link.perf_event",
    "ProgAttachment": "bpfkit.link.prog_attach",
    "ProgAttachMode": "bpfkit.link.prog_attach",
    "raw_attach_program": "bpfkit.link.prog_attach",
    "raw_detach_program": "bpfkit.link.prog_attach",
    "HardwareEvent": "bpfkit.link.sampling",
    "SoftwareEvent": "bpfkit.link.sampling",
    "perf_event_sample": "bpfkit.link.sampling",
    "SampleEvent": "bpfkit.link.sampling",
    "SOCKMAP_HOOKS": "bpfkit.link.socket",
    "ReuseportProgram": "bpfkit.link.socket",
    "SocketFilter": "bpfkit.link.socket",
    "SockmapInfo": "bpfkit.link.socket",
    "SockmapLink": "bpfkit.link.socket",
    "SockmapProgAttachment": "bpfkit.link.socket",
    "attach_reuseport": "bpfkit.link.socket",
    "attach_socket_filter": "bpfkit.link.socket",
    "attach_sockmap": "bpfkit.link.socket",
    "have_sockmap_link": "bpfkit.link.socket",
    "StructOpsInfo": "bpfkit.link.struct_ops",
    "struct_ops": "bpfkit.link.struct_ops",
    "StructOpsLink": "bpfkit.link.struct_ops",
    "StructOpsMapLink": "bpfkit.link.struct_ops",
    "Anchor": "bpfkit.link.anchor",
    "TcDirection": "bpfkit.link.tc",
    "TcFilter": "bpfkit.link.tc",
    "TcQuery": "bpfkit.link.tc",
    "TcxInfo": "bpfkit.link.tc",
    "TcxProgram": "bpfkit.link.tc",
    "tc": "bpfkit.link.tc",
    "tc_query": "bpfkit.link.tc",
    "tcx": "bpfkit.link.tc",
    "ClsBpfLink": "bpfkit.link.tc",
    "TcxLink": "bpfkit.link.tc",
    "GcResult": "bpfkit.link.tracefs_probes",
    "ProbeOwnerInfo": "bpfkit.link.tracefs_probes",
    "bpfkit_probes": "bpfkit.link.tracefs_probes",
    "remove_stale_probes": "bpfkit.link.tracefs_probes",
    "stale_probes": "bpfkit.link.tracefs_probes",
    "tracepoint": "bpfkit.link.tracepoint",
    "RawTracepointFd": "bpfkit.link.tracing",
    "RawTracepointLink": "bpfkit.link.tracing",
    "TracingInfo": "bpfkit.link.tracing",
    "TracingLink": "bpfkit.link.tracing",
    "attach_tracing": "bpfkit.link.tracing",
    "fentry": "bpfkit.link.tracing",
    "fexit": "bpfkit.link.tracing",
    "fmod_ret": "bpfkit.link.tracing",
    "freplace": "bpfkit.link.tracing",
    "lsm": "bpfkit.link.tracing",
    "raw_tracepoint": "bpfkit.link.tracing",
    "tp_btf": "bpfkit.link.tracing",
    "Executable": "bpfkit.link.executable",
    "UprobeTarget": "bpfkit.link.uprobe",
    "uprobe": "bpfkit.link.uprobe",
    "uretprobe": "bpfkit.link.uprobe",
    "XdpInfo": "bpfkit.link.xdp",
    "XdpMode": "bpfkit.link.xdp",
    "XdpQuery": "bpfkit.link.xdp",
    "xdp": "bpfkit.link.xdp",
    "xdp_detach": "bpfkit.link.xdp",
    "xdp_query": "bpfkit.link.xdp",
    "XdpLink": "bpfkit.link.xdp",
    "XdpNetlinkLink": "bpfkit.link.xdp",
}
_SUBMODULES = frozenset({
    "_binary", "_kinds", "_netdev", "_prog_arg", "anchor", "attach", "base", "kind", "cgroup", "executable", "group",
    "iter", "kprobe", "multi", "netfilter", "netkit", "netns", "perf_event", "prog_attach", "sampling", "socket",
    "struct_ops", "tc", "tracefs_probes", "tracepoint", "tracing", "uprobe", "usdt", "xdp",
})
# Functions named like the module that defines them: importing bpfkit.link.kprobe sets the
# package's attribute "kprobe" to the module (importlib does), and the function must win, as
# it did when this package imported every module eagerly (``from .kprobe import kprobe``).
_SHADOWED = frozenset({"kprobe", "struct_ops", "tc", "tracepoint", "uprobe", "xdp"})


class _Package(types.ModuleType):
    def __setattr__(self, name: str, value: object) -> None:
        if name in _SHADOWED and isinstance(value, types.ModuleType) and value.__name__ == f"{__name__}.{name}":
            value = getattr(value, name)
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package
_lazy = lazy_getattr(__name__, _LAZY, globals(), _SUBMODULES)

# Only the `bpfkit` command (bpfkit._lazy.IN_COMMAND, which it sets first thing) imports link
# kinds on first use, to start fast. A program importing the library gets every kind now, as
# this package always gave them: it may drop privileges later and then be unable to read a
# module it had not imported yet (a lazy import would then fail where an attach used to).
if not _lazy_imports.IN_COMMAND:
    from . import (  # type: ignore[assignment]  # noqa: F401  # the modules; their functions win (_Package)
        _binary,
        _netdev,
        _prog_arg,
        anchor,
        base,
        cgroup,
        executable,
        group,
        iter,
        kprobe,
        multi,
        netfilter,
        netkit,
        netns,
        perf_event,
        prog_attach,
        sampling,
        socket,
        struct_ops,
        tc,
        tracefs_probes,
        tracepoint,
        tracing,
        uprobe,
        xdp,
    )

    globals().update({name: getattr(sys.modules[module], name) for name, module in _LAZY.items()})

# The public API: attach functions, the Link protocol and the classes docs/links.md names,
# options, info/query dataclasses, pinned-link and stale-probe helpers. Mechanism (the network
# and struct_ops link classes, section parsing, feature checks, syscall-name helpers, the
# link-class registry) stays importable here and from its module, but out of __all__.
__all__ = [
    # kprobes, uprobes, tracepoints
    "tracepoint",
    "kprobe",
    "kretprobe",
    "ksyscall",
    "Executable",
    "uprobe",
    "uretprobe",
    "kprobe_multi",
    "kretprobe_multi",
    "uprobe_multi",
    "uretprobe_multi",
    "kprobe_session",
    "uprobe_session",
    "MultiMode",
    # perf events
    "attach_perf_event",
    "PerfEvent",
    "AttachMode",
    "perf_event_sample",
    "SoftwareEvent",
    "HardwareEvent",
    # BPF trampolines, raw tracepoints, iterators, struct_ops
    "raw_tracepoint",
    "attach_tracing",
    "fentry",
    "fexit",
    "fmod_ret",
    "freplace",
    "tp_btf",
    "lsm",
    "iterate",
    "CgroupIterOrder",
    "struct_ops",
    # network
    "xdp",
    "xdp_query",
    "xdp_detach",
    "XdpMode",
    "tc",
    "tcx",
    "tc_query",
    "TcDirection",
    "Anchor",
    "NetAttachMode",
    "attach_network",
    # cgroups
    "attach_cgroup",
    "cgroup_query",
    "cgroup_programs",
    "CGROUP_HOOKS",
    "CgroupLink",
    "CgroupProgAttachment",
    "CgroupInfo",
    "CgroupQuery",
    "CgroupProgram",
    # network namespaces
    "attach_netns",
    "netns_query",
    "NETNS_HOOKS",
    "NetnsLink",
    "NetnsProgAttachment",
    "NetnsInfo",
    "NetnsQuery",
    # netfilter
    "attach_netfilter",
    "NetfilterFamily",
    "NetfilterHook",
    "NetfilterLink",
    "NetfilterInfo",
    # netkit
    "attach_netkit",
    "netkit_query",
    "NetkitRole",
    "NetkitLink",
    "NetkitInfo",
    "NetkitQuery",
    # sockets
    "attach_socket_filter",
    "attach_reuseport",
    "attach_sockmap",
    "SOCKMAP_HOOKS",
    "SocketFilter",
    "ReuseportProgram",
    "SockmapLink",
    "SockmapProgAttachment",
    "SockmapInfo",
    # BPF_PROG_ATTACH
    "ProgAttachMode",
    "ProgAttachment",
    "raw_attach_program",
    "raw_detach_program",
    # from section names and probe specs
    "attach_all",
    "attach_section",
    "attach_probe",
    "auto_attach",
    "AttachedLinks",
    # links, groups, pins
    "Link",
    "RawLink",
    "PerfEventLink",
    "PerfEventIoctlLink",
    "RawTracepointLink",
    "RawTracepointFd",
    "TracingLink",
    "IterLink",
    "KprobeMultiLink",
    "UprobeMultiLink",
    "MultiPerfGroup",
    "LinkGroup",
    "attach_many",
    "close_links",
    "load_pinned_link",
    "link_from_id",
    "link_from_fd",
    "iter_links",
    # what info() and the queries report
    "LinkInfo",
    "GroupInfo",
    "KprobeInfo",
    "UprobeInfo",
    "TracepointInfo",
    "EventInfo",
    "PerfEventInfo",
    "RawTracepointInfo",
    "TracingInfo",
    "IterInfo",
    "StructOpsInfo",
    "KprobeMultiInfo",
    "UprobeMultiInfo",
    "XdpInfo",
    "XdpQuery",
    "TcxInfo",
    "TcQuery",
    "TcxProgram",
    "TcFilter",
    # tracefs probes left by processes that died
    "bpfkit_probes",
    "stale_probes",
    "remove_stale_probes",
    "ProbeOwnerInfo",
    "GcResult",
]

# Attaching at a spec or section is bpfkit.link.attach (also bpfkit.attach), the one attach path,
# which reads the kinds' records: loaded on first use of these names, not here.
_FROM_ATTACH = frozenset({"AttachedLinks", "SectionTarget", "attach_all", "attach_probe", "attach_section",
                          "auto_attach", "parse_section", "skip_reason", "attach_network"})

if TYPE_CHECKING:
    from .attach import (
        AttachedLinks,
        attach_all,
        attach_network,
        attach_probe,
        attach_section,
        auto_attach,
    )
    from .attach import (
        SectionTarget as SectionTarget,
    )
    from .attach import (
        parse_section as parse_section,
    )
    from .attach import (
        skip_reason as skip_reason,
    )


def __getattr__(name: str) -> Any:
    if name in _FROM_ATTACH:
        from . import attach

        value = getattr(attach, name)
        globals()[name] = value  # resolved once
        return value
    return _lazy(name)
