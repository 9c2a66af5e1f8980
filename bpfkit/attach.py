# SPDX-License-Identifier: Apache-2.0
"""The one attach path: a program at a probe spec, at its section, or every program of a
collection. Everything that turns "where" into links lives here, above ``bpfkit.link``,
``bpfkit.usdt`` and struct_ops; ``bpfkit.link.attach_probe`` / ``attach_section`` /
``attach_all`` / ``attach_network`` and ``Collection.attach_all`` are these functions, and
``bpfkit attach`` calls :func:`attach_probe` once per SPEC or :func:`attach_all` once.

Probe specs (bpftrace's grammar, :mod:`bpfkit.probespec`), every kind:

    kprobe:FN[+OFF] kretprobe:FN    (a wildcard: one kprobe_multi link, else a perf event each)
    uprobe:BIN:FN   uretprobe:BIN:FN (a wildcard: one uprobe_multi link, else a perf event each)
    kprobe.session:FN   uprobe.session:BIN:FN          (entry and return: one session link)
    tracepoint:GROUP:NAME   rawtracepoint:NAME   fentry:FN   fexit:FN   usdt:BIN:[PROV:]NAME
    profile:UNIT:N  interval:UNIT:N  software:EVENT[:N]  hardware:EVENT[:N]   (perf_event sampling)
    xdp:IFACE   tc:IFACE:ingress|egress   netkit:IFACE[:primary|peer]

Sections that name their target, as libbpf reads them:

    kprobe/SYMBOL[+OFFSET]          kretprobe/SYMBOL
    ksyscall/NAME                   kretsyscall/NAME          (through the syscall wrapper)
    tracepoint/GROUP/NAME           tp/GROUP/NAME
    uprobe/BINARY:FUNCTION[+OFFSET] uprobe/BINARY:0xOFFSET     uretprobe/BINARY:FUNCTION
    (also uprobe.s/ and uretprobe.s/; BINARY is a path such as /usr/lib/.../libc.so.6, or a
    library name such as libc.so.6)
    uprobe.multi/BINARY:PATTERN     kprobe.multi/PATTERN      (and the ret/.s kinds: one multi link)
    uprobe.session/BINARY:PATTERN   kprobe.session/PATTERN    (entry and return: one session link)
    usdt/BINARY:[PROVIDER:]NAME     raw_tp/NAME (and .w)      iter/TARGET
    fentry, fexit, fmod_ret, tp_btf, lsm, freplace            (the target fixed at load)

A section without a target (``SEC("kprobe")``) or of a kind not attached here is skipped with
a note by :func:`attach_all`; attach such programs by hand. struct_ops maps are registered by
:func:`attach_all` like programs, by map name.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, Union

from ._closing import ClosesOnExit
from ._kernel.consts import PerfSwId
from ._kernel.cpus import online_cpus
from ._kernel.fd import FD
from .errors import BPFKitError, NotSupportedError, ParseError, UsageError
from .link._net import NetAttachMode
from .link.base import Link
from .link.kprobe import kprobe, kretprobe, ksyscall
from .link.perf_event import AttachMode
from .link.sampling import perf_event_sample, resolve_event
from .link.tracepoint import split_tracepoint, tracepoint
from .link.xdp import XdpMode, xdp
from .probespec import ProbeSpec, parse_probe

if TYPE_CHECKING:
    from .collection import Collection
    from .link.multi import MultiMode, Progress
    from .maps import Map
    from .program import Program

__all__ = [
    "attach_probe",
    "attach_section",
    "attach_all",
    "attach_network",
    "auto_attach",
    "skip_reason",
    "parse_section",
    "SectionTarget",
    "AttachOptions",
    "AttachedLinks",
    "NETWORK_KINDS",
]

# A loaded program (its fd, name and, for sections, its section), or a bare program fd.
ProgramArg = Union["Program", FD, int]
# What attach_all walks: a Collection, a name -> Program mapping, or Programs.
ProgramsArg = Union["Collection", Mapping[str, "Program"], Iterable["Program"]]
# attach_all's progress: (programs attached so far + 1, how many to attach, the one now).
AllProgress = Callable[[int, int, str], None]

NETWORK_KINDS = frozenset({"xdp", "tc", "netkit"})


@dataclasses.dataclass(frozen=True)
class SectionTarget:
    """What a section asks to attach to."""

    kind: str  # kprobe, kretprobe, ksyscall, kretsyscall, tracepoint, uprobe, uretprobe, uprobe_multi, ...
    target: str = ""  # empty: the section names no target
    symbol: str = ""  # kernel symbol, syscall name, tracepoint name or binary function
    offset: int = 0
    group: str = ""  # tracepoint group
    binary: str = ""  # uprobe binary (path or library name)
    file_offset: int | None = None  # uprobe BINARY:0xOFFSET


@dataclasses.dataclass(frozen=True)
class AttachOptions:
    """What the caller of attach_probe / attach_section / attach_all asked for."""

    mode: AttachMode | str = AttachMode.AUTO  # perf-event attach: auto, link or ioctl
    pid: int | None = None  # uprobes, USDT and sampling: this process only
    cookie: int = 0  # bpf_get_attach_cookie(); every target of a multi link gets it
    progress: Progress | None = None  # wildcards and USDT: progress(done, total)
    max_perf_targets: int | None = None  # a wildcard's perf-event fallback: at most this many
    net_mode: NetAttachMode | str = NetAttachMode.AUTO  # xdp/tc: auto, link or netlink
    xdp_mode: XdpMode | str | None = XdpMode.AUTO  # xdp only: auto, generic, driver, offload
    netns: object = None  # xdp/tc: the network namespace (name, path or fd) of the interface
    cgroup: str | int | None = None  # cgroup programs: the cgroup v2 directory (a path or an fd)
    netkit: str | int | None = None  # netkit/primary|peer programs: the netkit pair's primary device


# ------------------------------------------------------------------------ shared pieces
def _multi_modes(options: AttachOptions) -> tuple[MultiMode, AttachMode]:
    """AttachOptions.mode -> (MultiMode, perf AttachMode): IOCTL asks for the legacy path,
    which is one perf event per target."""
    from .link.multi import MultiMode

    perf = AttachMode.of(options.mode)
    return (MultiMode.PERF if perf == AttachMode.IOCTL else MultiMode.AUTO), perf


class _SameCookie(dict[str, int]):
    """A name -> cookie mapping giving every target the same cookie (a wildcard's targets are
    known only once it is resolved, inside bpfkit.link.multi)."""

    def __init__(self, cookie: int) -> None:
        super().__init__()
        self.cookie = cookie

    def get(self, key: str, default: object = None) -> int:
        return self.cookie


def _same_cookie(cookie: int) -> _SameCookie | None:
    return _SameCookie(cookie) if cookie else None


def _no_wildcard_offset(spec: ProbeSpec) -> None:
    if spec.offset:
        raise UsageError(f"{spec}: a wildcard probe takes no offset")


def _binary_pattern(target: SectionTarget, api: str) -> tuple[str, str]:
    """``BINARY:PATTERN`` of a uprobe.multi/uprobe.session section."""
    if not target.target:
        raise NotSupportedError(f"auto-attach of a {target.kind} section without a target",
                                f"the section names no binary; attach with bpfkit.link.{api}")
    binary, colon, pattern = target.target.rpartition(":")
    if not colon or not binary or not pattern:
        raise ParseError(f"section target {target.target!r}: expected BINARY:PATTERN")
    return binary, pattern


def _require_pattern(target: SectionTarget, api: str) -> str:
    if not target.target:
        raise NotSupportedError(f"auto-attach of a {target.kind} section without a pattern",
                                f"the section names no functions; attach with bpfkit.link.{api}")
    return target.target


# ------------------------------------------------------------------------- probe specs
def _probe_kprobe(spec: ProbeSpec, prog: ProgramArg, o: AttachOptions) -> Link:
    from .link.multi import kprobe_multi

    retprobe = spec.kind == "kretprobe"
    if spec.is_wildcard:
        if spec.module:
            raise NotSupportedError(f"wildcard probe {spec} with a module", "kprobe_multi matches plain function names")
        _no_wildcard_offset(spec)
        mode, perf = _multi_modes(o)
        return kprobe_multi(spec.function, prog, cookies=_same_cookie(o.cookie), retprobe=retprobe, mode=mode,
                            perf_mode=perf, progress=o.progress, max_perf_targets=o.max_perf_targets)
    symbol = f"{spec.module}:{spec.function}" if spec.module else spec.function
    if retprobe:
        return kretprobe(symbol, prog, mode=o.mode, cookie=o.cookie)
    return kprobe(symbol, prog, offset=spec.offset, mode=o.mode, cookie=o.cookie)


def _probe_uprobe(spec: ProbeSpec, prog: ProgramArg, o: AttachOptions) -> Link:
    from .link.multi import uprobe_multi
    from .link.uprobe import Executable

    retprobe = spec.kind == "uretprobe"
    if spec.is_wildcard:
        _no_wildcard_offset(spec)
        mode, perf = _multi_modes(o)
        return uprobe_multi(spec.binary, spec.function, prog, cookies=_same_cookie(o.cookie), pid=o.pid,
                            retprobe=retprobe, mode=mode, perf_mode=perf, progress=o.progress,
                            max_perf_targets=o.max_perf_targets)
    exe = Executable(spec.binary)
    symbol = None if spec.address is not None else spec.function
    if retprobe:
        return exe.uretprobe(symbol, prog, address=spec.address, pid=o.pid, mode=o.mode, cookie=o.cookie)
    return exe.uprobe(symbol, prog, address=spec.address, offset=spec.offset, pid=o.pid, mode=o.mode,
                      cookie=o.cookie)


def _probe_session(spec: ProbeSpec, prog: ProgramArg, o: AttachOptions) -> Link:
    """``kprobe.session:PATTERN`` or ``uprobe.session:BINARY:PATTERN``: one session link (names
    or wildcards). ``mode=ioctl`` is refused: sessions have no perf-event form."""
    from .link.multi import kprobe_session, uprobe_session

    if AttachMode.of(o.mode) == AttachMode.IOCTL:
        raise UsageError(f"{spec}: a session has no perf-event (ioctl) form; drop --mode ioctl")
    if spec.kind == "kprobe.session":
        return kprobe_session(spec.function, prog, cookies=_same_cookie(o.cookie), progress=o.progress)
    return uprobe_session(spec.binary, spec.function, prog, pid=o.pid, cookies=_same_cookie(o.cookie),
                          progress=o.progress)


def _probe_tracepoint(spec: ProbeSpec, prog: ProgramArg, o: AttachOptions) -> Link:
    if spec.is_wildcard:
        raise NotSupportedError(f"wildcard probe {spec}", "a tracepoint spec names one event; attach each event")
    return tracepoint(spec.category, spec.function, prog, mode=o.mode, cookie=o.cookie)


def _probe_raw_tracepoint(spec: ProbeSpec, prog: ProgramArg, o: AttachOptions) -> Link:
    """``rawtracepoint:[MODULE:]NAME`` (the kernel finds module tracepoints by name)."""
    from .link.tracing import raw_tracepoint

    return raw_tracepoint(spec.function, prog, cookie=o.cookie)


def _probe_tracing(spec: ProbeSpec, prog: ProgramArg, o: AttachOptions) -> Link:
    """``fentry:[MODULE:]FN`` / ``fexit:[MODULE:]FN``: ``prog`` must have been loaded for that
    function (a tracing program's target is part of the program, fixed at load)."""
    from ._kernel.consts import AttachType
    from .link.tracing import _TRACING_KINDS, _spec_target, attach_tracing

    want = AttachType.TRACE_FENTRY if spec.kind == "fentry" else AttachType.TRACE_FEXIT
    name = getattr(prog, "name", "")
    have = getattr(prog, "attach_type", None)
    if have is not None and have != want:
        raise UsageError(f"probe {spec}: program {name!r} was loaded as "
                         f"{_TRACING_KINDS.get(have, getattr(have, 'name', have))}, not {spec.kind}")
    loaded_for = _spec_target(prog)
    wanted = f"{spec.module}:{spec.function}" if spec.module else spec.function
    if loaded_for and loaded_for != wanted and loaded_for.rpartition(":")[2] != wanted:
        raise UsageError(
            f"probe {spec}: program {name!r} was loaded for {loaded_for!r}, and a tracing program's target is "
            f"fixed at load time; load it for {wanted!r} (spec.programs[{name!r}].set_attach_target({wanted!r}))"
        )
    return attach_tracing(prog, cookie=o.cookie)


def _probe_usdt(spec: ProbeSpec, prog: ProgramArg, o: AttachOptions) -> Link:
    """``usdt:BINARY:[PROVIDER:]NAME`` (bpftrace's form)."""
    from .usdt.attach import attach_usdt

    return attach_usdt(prog, spec.binary, spec.provider, spec.function, pid=o.pid, cookie=o.cookie,
                       mode=o.mode, progress=o.progress)


_UNIT_NS = {"s": 1_000_000_000, "ms": 1_000_000, "us": 1_000}


def _probe_sampling(spec: ProbeSpec, prog: ProgramArg, o: AttachOptions) -> Link:
    """``profile:UNIT:N`` / ``interval:UNIT:N`` / ``software:EVENT[:COUNT]`` /
    ``hardware:EVENT[:COUNT]`` with bpftrace's meaning: profile is cpu-clock on every CPU
    (``hz``: a frequency, else a period of N seconds/ms/us of CPU time); interval the same on
    one CPU (the first online); software/hardware sample EVENT on every CPU every COUNT events
    (bpftrace's default period without one). ``pid`` follows one process instead."""
    if spec.kind in ("profile", "interval"):
        freq = spec.count if spec.unit == "hz" else None
        period = None if spec.unit == "hz" else spec.count * _UNIT_NS[spec.unit]
        cpu = online_cpus()[0] if spec.kind == "interval" and o.pid is None else None
        return perf_event_sample(prog, PerfSwId.CPU_CLOCK, period=period, freq=freq, cpu=cpu, pid=o.pid,
                                 cookie=o.cookie, mode=o.mode)
    ev = resolve_event(f"{spec.kind}:{spec.event}")
    return perf_event_sample(prog, ev, period=spec.count or ev.default_period, pid=o.pid, cookie=o.cookie,
                             mode=o.mode)


def _probe_network(spec: ProbeSpec, prog: ProgramArg, o: AttachOptions) -> Link:
    from .link.netkit import attach_netkit
    from .link.tc import tc

    if spec.kind == "xdp":
        return xdp(spec.iface, prog, mode=o.net_mode, xdp_mode=o.xdp_mode, netns=o.netns)
    if XdpMode.of(o.xdp_mode) != XdpMode.AUTO:
        raise UsageError(f"xdp_mode= applies to xdp specs, not {spec}")
    if spec.kind == "netkit":
        if NetAttachMode.of(o.net_mode) == NetAttachMode.NETLINK:
            raise UsageError(f"{spec}: netkit programs attach only through links (no netlink mode)")
        return attach_netkit(prog, spec.iface, spec.direction == "peer", netns=o.netns)
    return tc(spec.iface, prog, spec.direction, mode=o.net_mode, netns=o.netns)


ProbeAttacher = Callable[[ProbeSpec, ProgramArg, AttachOptions], Link]
# Every kind bpfkit.probespec parses (KINDS), and the function that attaches it.
_PROBE_KINDS: dict[str, ProbeAttacher] = {
    "kprobe": _probe_kprobe,
    "kretprobe": _probe_kprobe,
    "uprobe": _probe_uprobe,
    "uretprobe": _probe_uprobe,
    "kprobe.session": _probe_session,
    "uprobe.session": _probe_session,
    "tracepoint": _probe_tracepoint,
    "rawtracepoint": _probe_raw_tracepoint,
    "fentry": _probe_tracing,
    "fexit": _probe_tracing,
    "usdt": _probe_usdt,
    "profile": _probe_sampling,
    "interval": _probe_sampling,
    "software": _probe_sampling,
    "hardware": _probe_sampling,
    "xdp": _probe_network,
    "tc": _probe_network,
    "netkit": _probe_network,
}


def attach_probe(
    spec: str | ProbeSpec,
    prog: ProgramArg,
    *,
    mode: AttachMode | str = AttachMode.AUTO,
    pid: int | None = None,
    cookie: int = 0,
    progress: Progress | None = None,
    max_perf_targets: int | None = None,
    net_mode: NetAttachMode | str = NetAttachMode.AUTO,
    xdp_mode: XdpMode | str | None = XdpMode.AUTO,
    netns: object = None,
) -> Link:
    """Attach ``prog`` at a bpftrace-style probe spec (``tracepoint:syscalls:sys_enter_openat``,
    ``kprobe:do_sys_openat2``, ``uprobe:/bin/bash:readline``, ``ur:libc:malloc``,
    ``kprobe:vfs_*``, ``usdt:BIN:NAME``, ``profile:hz:99``, ``xdp:eth0``...), given as text or a
    parsed :class:`bpfkit.probespec.ProbeSpec`.

    ``mode``: perf-event attach (auto, link, ioctl; ioctl makes a wildcard one perf event per
    match). ``pid``: uprobes, USDT and sampling fire only in that process. ``cookie``: what
    bpf_get_attach_cookie() returns (every match of a wildcard). ``progress(done, total)`` and
    ``max_perf_targets``: a wildcard's per-match fallback and USDT sites. ``net_mode``,
    ``xdp_mode`` and ``netns``: xdp/tc specs (see :func:`bpfkit.link.xdp`, :func:`bpfkit.link.tc`).
    """
    parsed = parse_probe(spec) if isinstance(spec, str) else spec
    attacher = _PROBE_KINDS.get(parsed.kind)
    if attacher is None:
        raise NotSupportedError(f"attaching {parsed.kind} probes", f"bpfkit.attach handles {', '.join(_PROBE_KINDS)}")
    options = AttachOptions(mode, pid, cookie, progress, max_perf_targets, net_mode, xdp_mode, netns)
    return attacher(parsed, prog, options)


def attach_network(
    prog: ProgramArg,
    spec: str | ProbeSpec,
    *,
    mode: NetAttachMode | str = NetAttachMode.AUTO,
    xdp_mode: XdpMode | str | None = XdpMode.AUTO,
    netns: object = None,
) -> Link:
    """Attach ``prog`` where ``spec`` says: ``xdp:IFACE`` or ``tc:IFACE:ingress|egress`` (text or
    a parsed ProbeSpec). ``mode`` (auto/link/netlink), ``xdp_mode`` (XDP only) and ``netns`` are
    passed on to :func:`bpfkit.link.xdp` / :func:`bpfkit.link.tc`."""
    parsed = parse_probe(spec) if isinstance(spec, str) else spec
    if parsed.kind not in NETWORK_KINDS:
        raise UsageError(f"{parsed} is not a network attach point: expected xdp:IFACE, tc:IFACE:ingress|egress "
                         "or netkit:IFACE[:primary|peer]")
    return _probe_network(parsed, prog, AttachOptions(net_mode=mode, xdp_mode=xdp_mode, netns=netns))


# ---------------------------------------------------------------------------- sections
_FUNC_OFF = re.compile(r"^(?P<func>[^+]+?)(?:\+(?P<off>(?:0x[0-9a-fA-F]+|\d+)))?$")
# Sections parsed here into symbol/offset/group/binary and attached by _attach_named.
_NAMED_KINDS = {
    "kprobe": "kprobe",
    "kretprobe": "kretprobe",
    "ksyscall": "ksyscall",
    "kretsyscall": "kretsyscall",
    "tracepoint": "tracepoint",
    "tp": "tracepoint",
    "uprobe": "uprobe",
    "uprobe.s": "uprobe",
    "uretprobe": "uretprobe",
    "uretprobe.s": "uretprobe",
}
# Sections that are never auto-attached, with the reason attach_all reports.
_NEVER_AUTO = {
    "struct_ops": "struct_ops callbacks run through their struct_ops map, which attach_all registers (link.struct_ops)",
    "struct_ops.s": "struct_ops callbacks run through their struct_ops map, which attach_all registers (link.struct_ops)",
    "perf_event": ("perf_event programs sample counters chosen at run time; attach with "
                   "bpfkit.link.perf_event_sample (or a profile:/software:/hardware: probe spec)"),
    "socket": "a socket filter goes on a socket chosen at run time: attach with bpfkit.link.attach_socket_filter",
    "sk_reuseport": "a reuseport program goes on a socket group: attach with bpfkit.link.attach_reuseport",
    "sk_skb": "sk_skb programs attach to a sockmap: attach with bpfkit.link.attach_sockmap(map, prog)",
    "sk_msg": "sk_msg programs attach to a sockmap: attach with bpfkit.link.attach_sockmap(map, prog)",
    "netfilter": ("a netfilter program needs a family, hook and priority, which a section does not name; attach "
                  "with bpfkit.link.attach_netfilter(prog, family, hook, priority)"),
    "sk_lookup": ("an sk_lookup program acts on a whole network namespace, which a section does not name; attach "
                  "with bpfkit.link.attach_netns(prog, netns)"),
    "flow_dissector": ("a flow dissector acts on a whole network namespace, which a section does not name; attach "
                       "with bpfkit.link.attach_netns(prog, netns)"),
}


def _attach_named(prog: ProgramArg, target: SectionTarget, o: AttachOptions, section: str) -> Link:
    from .link.uprobe import Executable

    if target.kind == "kprobe":
        return kprobe(target.symbol, prog, offset=target.offset, mode=o.mode, cookie=o.cookie)
    if target.kind == "kretprobe":
        return kretprobe(target.symbol, prog, mode=o.mode, cookie=o.cookie)
    if target.kind in ("ksyscall", "kretsyscall"):
        return ksyscall(target.symbol, prog, retprobe=target.kind == "kretsyscall", mode=o.mode, cookie=o.cookie)
    if target.kind == "tracepoint":
        return tracepoint(target.group, target.symbol, prog, mode=o.mode, cookie=o.cookie)
    exe = Executable(target.binary)
    symbol = target.symbol if target.file_offset is None else None
    if target.kind == "uprobe":
        return exe.uprobe(symbol, prog, offset=target.offset, file_offset=target.file_offset, pid=o.pid,
                          mode=o.mode, cookie=o.cookie)
    if target.offset:
        raise ParseError(f"section {section!r}: a uretprobe takes no offset")
    return exe.uretprobe(symbol, prog, file_offset=target.file_offset, pid=o.pid, mode=o.mode, cookie=o.cookie)


def _section_kprobe_multi(prog: ProgramArg, target: SectionTarget, o: AttachOptions) -> Link:
    """``kprobe.multi/PATTERN`` and ``kretprobe.multi/PATTERN`` (libbpf)."""
    from .link.multi import kprobe_multi

    pattern = _require_pattern(target, "kprobe_multi")
    mode, perf = _multi_modes(o)
    return kprobe_multi(pattern, prog, retprobe=target.kind == "kretprobe_multi", mode=mode, perf_mode=perf,
                        cookies=_same_cookie(o.cookie))


def _section_uprobe_multi(prog: ProgramArg, target: SectionTarget, o: AttachOptions) -> Link:
    """``uprobe.multi/BINARY:PATTERN`` (and uretprobe.multi, the ``.s`` kinds)."""
    from .link.multi import uprobe_multi

    binary, pattern = _binary_pattern(target, "uprobe_multi")
    mode, perf = _multi_modes(o)
    return uprobe_multi(binary, pattern, prog, pid=o.pid, retprobe=target.kind == "uretprobe_multi",
                        mode=mode, perf_mode=perf, cookies=_same_cookie(o.cookie))


def _section_kprobe_session(prog: ProgramArg, target: SectionTarget, o: AttachOptions) -> Link:
    """``kprobe.session/PATTERN`` (libbpf)."""
    from .link.multi import kprobe_session

    return kprobe_session(_require_pattern(target, "kprobe_session"), prog, cookies=_same_cookie(o.cookie))


def _section_uprobe_session(prog: ProgramArg, target: SectionTarget, o: AttachOptions) -> Link:
    """``uprobe.session/BINARY:PATTERN`` (and ``uprobe.session.s``)."""
    from .link.multi import uprobe_session

    binary, pattern = _binary_pattern(target, "uprobe_session")
    return uprobe_session(binary, pattern, prog, pid=o.pid, cookies=_same_cookie(o.cookie))


def _section_usdt(prog: ProgramArg, target: SectionTarget, o: AttachOptions) -> Link:
    """``SEC("usdt/BINARY:PROVIDER:NAME")`` (libbpf's form; ``usdt/BINARY:NAME`` also)."""
    from .usdt.attach import attach_usdt

    if not target.target:
        raise NotSupportedError("auto-attach of a usdt section without a target",
                                "SEC(\"usdt\") names no probe; attach with bpfkit.usdt.attach_usdt")
    parts = target.target.rsplit(":", 2)
    if len(parts) not in (2, 3) or not all(parts):
        raise ParseError(f"USDT target {target.target!r}: expected usdt/BINARY:PROVIDER:NAME")
    binary, provider, name = parts if len(parts) == 3 else (parts[0], "", parts[1])
    return attach_usdt(prog, binary, provider, name, pid=o.pid, cookie=o.cookie, mode=o.mode)


def _section_raw_tracepoint(prog: ProgramArg, target: SectionTarget, o: AttachOptions) -> Link:
    """``raw_tp/NAME``, ``raw_tracepoint/NAME`` and their ``.w`` forms."""
    from .link.tracing import _spec_target, raw_tracepoint

    name = target.target or _spec_target(prog)
    if not name:
        raise NotSupportedError(f"auto-attach of raw tracepoint program {getattr(prog, 'name', '')!r}",
                                "its section names no tracepoint; attach it with link.raw_tracepoint(name, prog)")
    return raw_tracepoint(name, prog, cookie=o.cookie)


def _section_tracing(prog: ProgramArg, target: SectionTarget, o: AttachOptions) -> Link:
    """tp_btf, fentry, fexit, fmod_ret (and .s), lsm (and .s), freplace: the target was fixed
    at load time (attach_btf_id, and freplace's target program), so the section's text is not
    needed here."""
    from .link.tracing import attach_tracing

    return attach_tracing(prog, cookie=o.cookie)


def _section_iter(prog: ProgramArg, target: SectionTarget, o: AttachOptions) -> Link:
    """``iter/TARGET`` and ``iter.s/TARGET`` without parameters (a map iterator needs its map:
    attach it with :func:`bpfkit.link.iterate`); ``pid`` narrows task iterators."""
    from .link.iter import _TASK_TARGETS, iterate

    if o.pid and target.target in _TASK_TARGETS:
        return iterate(prog, pid=o.pid)
    return iterate(prog)


def _section_cgroup(prog: ProgramArg, target: SectionTarget, o: AttachOptions) -> Link:
    """``cgroup/HOOK``, ``cgroup_skb/ingress|egress``, ``sockops``: to the cgroup the caller
    names (a section names the hook, never the cgroup)."""
    from .link.cgroup import attach_cgroup

    if o.cgroup is None:
        raise NotSupportedError(f"auto-attach of cgroup program {getattr(prog, 'name', '')!r}",
                                _NEEDS_CGROUP)
    if getattr(prog, "attach_type", None) is None:
        raise NotSupportedError(f"auto-attach of section {target.kind}/{target.target}",
                                "the section names no hook (use cgroup_skb/ingress or cgroup_skb/egress); "
                                "attach with bpfkit.link.attach_cgroup(path, prog, hook)")
    return attach_cgroup(o.cgroup, prog)


_NEEDS_CGROUP = "a section names the hook, not the cgroup: pass cgroup= (bpfkit attach --cgroup PATH)"


def _section_netkit(prog: ProgramArg, target: SectionTarget, o: AttachOptions) -> Link:
    """``netkit/primary`` and ``netkit/peer`` (libbpf): on the device the caller names."""
    from .link.netkit import attach_netkit

    if o.netkit is None:
        raise NotSupportedError(f"auto-attach of netkit program {getattr(prog, 'name', '')!r}", _NEEDS_NETKIT)
    if target.target not in ("primary", "peer"):
        raise ParseError(f"section netkit/{target.target}: expected netkit/primary or netkit/peer")
    return attach_netkit(prog, o.netkit, target.target == "peer", netns=o.netns)


_NEEDS_NETKIT = ("a section names the device of the pair, not the pair: pass netkit= (the primary's name; "
                 "bpfkit attach --netkit IFACE)")


def _is_netkit_section(section: str) -> bool:
    return _prefix(section) == "netkit"


def _is_cgroup_program(prog: object) -> bool:
    from .link.cgroup import CGROUP_PROG_TYPES

    return getattr(prog, "type", None) in CGROUP_PROG_TYPES


SectionAttacher = Callable[[ProgramArg, SectionTarget, AttachOptions], Link]
# Sections whose attacher reads the text after the first "/" itself (and decides what an empty
# one means): prefix -> (SectionTarget.kind, attacher).
_SECTION_KINDS: dict[str, tuple[str, SectionAttacher]] = {
    "uprobe.multi": ("uprobe_multi", _section_uprobe_multi),
    "uprobe.multi.s": ("uprobe_multi", _section_uprobe_multi),
    "uretprobe.multi": ("uretprobe_multi", _section_uprobe_multi),
    "uretprobe.multi.s": ("uretprobe_multi", _section_uprobe_multi),
    "kprobe.multi": ("kprobe_multi", _section_kprobe_multi),
    "kretprobe.multi": ("kretprobe_multi", _section_kprobe_multi),
    "kprobe.session": ("kprobe_session", _section_kprobe_session),
    "uprobe.session": ("uprobe_session", _section_uprobe_session),
    "uprobe.session.s": ("uprobe_session", _section_uprobe_session),
    "usdt": ("usdt", _section_usdt),
    "raw_tp": ("raw_tracepoint", _section_raw_tracepoint),
    "raw_tracepoint": ("raw_tracepoint", _section_raw_tracepoint),
    "raw_tp.w": ("raw_tracepoint", _section_raw_tracepoint),
    "raw_tracepoint.w": ("raw_tracepoint", _section_raw_tracepoint),
    "tp_btf": ("tp_btf", _section_tracing),
    "fentry": ("fentry", _section_tracing),
    "fexit": ("fexit", _section_tracing),
    "fmod_ret": ("fmod_ret", _section_tracing),
    "fentry.s": ("fentry", _section_tracing),
    "fexit.s": ("fexit", _section_tracing),
    "fmod_ret.s": ("fmod_ret", _section_tracing),
    "lsm": ("lsm", _section_tracing),
    "lsm.s": ("lsm", _section_tracing),
    "freplace": ("freplace", _section_tracing),
    "iter": ("iter", _section_iter),
    "iter.s": ("iter", _section_iter),
    "cgroup": ("cgroup", _section_cgroup),
    "cgroup_skb": ("cgroup", _section_cgroup),
    "sockops": ("cgroup", _section_cgroup),
    "netkit": ("netkit", _section_netkit),
}


def _prefix(section: str) -> str:
    return section.lstrip("?").partition("/")[0]


def parse_section(section: str) -> SectionTarget | None:
    """The attach target a section names, or None when its kind is not attachable here.

    Raises ParseError for a kind handled here but a malformed target.
    """
    name = section.removeprefix("?")
    prefix, _, target = name.partition("/")
    if prefix in _SECTION_KINDS:
        return SectionTarget(_SECTION_KINDS[prefix][0], target)
    kind = _NAMED_KINDS.get(prefix)
    if kind is None:
        return None
    if not target:
        return SectionTarget(kind)
    if kind in ("kprobe", "kretprobe", "ksyscall", "kretsyscall"):
        m = _FUNC_OFF.match(target)
        if not m:
            raise ParseError(f"section {section!r}: expected {prefix}/SYMBOL[+OFFSET]")
        return SectionTarget(kind, target, m["func"], int(m["off"] or "0", 0))
    if kind == "tracepoint":
        try:
            group, event = split_tracepoint(target)
        except UsageError:
            raise ParseError(f"section {section!r}: expected {prefix}/GROUP/NAME") from None
        return SectionTarget(kind, target, event, group=group)
    binary, colon, func = target.rpartition(":")
    if not colon or not binary or not func:
        raise ParseError(f"section {section!r}: expected {prefix}/BINARY:FUNCTION[+OFFSET] or {prefix}/BINARY:0xOFFSET")
    if re.fullmatch(r"0x[0-9a-fA-F]+|\d+", func):
        return SectionTarget(kind, target, binary=binary, file_offset=int(func, 0))
    m = _FUNC_OFF.match(func)
    if not m:
        raise ParseError(f"section {section!r}: bad function {func!r}")
    return SectionTarget(kind, target, m["func"], int(m["off"] or "0", 0), binary=binary)


def _section_of(prog: object) -> str:
    section = getattr(prog, "section", "") or ""
    spec = getattr(prog, "spec", None)
    if not section and spec is not None:
        section = getattr(spec, "section", "") or ""
    return str(section)


def _attach_at_section(prog: ProgramArg, sec: str, options: AttachOptions) -> Link:
    target = parse_section(sec)
    if target is None:
        raise NotSupportedError(f"auto-attach of section {sec!r}", "bpfkit.attach handles "
                                f"{', '.join(list(_NAMED_KINDS) + list(_SECTION_KINDS))} sections")
    plugged = _SECTION_KINDS.get(_prefix(sec))
    if plugged is not None:
        return plugged[1](prog, target, options)
    if not target.target:
        raise NotSupportedError(f"auto-attach of section {sec!r}", "the section names no target; attach it by hand")
    return _attach_named(prog, target, options, sec)


def attach_section(
    prog: ProgramArg,
    section: str | None = None,
    *,
    mode: AttachMode | str = AttachMode.AUTO,
    pid: int | None = None,
    cookie: int = 0,
    cgroup: str | int | None = None,
    netkit: str | int | None = None,
) -> Link:
    """Attach ``prog`` where its section (or ``section``) says. ``pid`` filters uprobes, USDT
    and task iterators; ``mode`` and ``cookie`` as for :func:`attach_probe`; ``cgroup`` (a
    cgroup v2 path or fd) is where cgroup programs (``cgroup/connect4``, ``sockops``...) go;
    ``netkit`` (the primary device of a netkit pair) where netkit/primary and netkit/peer go.

    NotSupportedError when the section names no target or a kind not attached here.
    """
    sec = section if section is not None else _section_of(prog)
    return _attach_at_section(prog, sec, AttachOptions(mode, pid, cookie, cgroup=cgroup, netkit=netkit))


def skip_reason(section: str) -> str | None:
    """Why auto-attach passes over a program of ``section``, or None when it attaches it."""
    prefix = _prefix(section)
    never = _NEVER_AUTO.get(prefix)
    if never:
        return f"section {section!r} is never auto-attached: {never}"
    target = parse_section(section)
    if target is None:
        return f"section {section!r} is not a kind auto-attach handles"
    if section.lstrip("?") == "cgroup/skb":
        return f"section {section!r} names no hook: use cgroup_skb/ingress or cgroup_skb/egress"
    if not target.target and prefix not in _SECTION_KINDS:
        return f"section {section!r} names no target"
    return None


def auto_attach(
    name: str,
    prog: ProgramArg,
    *,
    mode: AttachMode | str = AttachMode.AUTO,
    pid: int | None = None,
    cookie: int = 0,
    cgroup: str | int | None = None,
    netkit: str | int | None = None,
) -> Link | str:
    """Attach program ``name`` where its section says (see :func:`skip_reason` first); a str is
    the reason a section without a target was passed over. Errors name the program."""
    section = _section_of(prog)
    try:
        return _attach_at_section(prog, section, AttachOptions(mode, pid, cookie, cgroup=cgroup, netkit=netkit))
    except NotSupportedError as exc:
        target = parse_section(section)
        if target is None or target.target:
            raise exc.wrap(f"auto-attach program {name!r}")
        # A bare SEC("uprobe.multi"): some kinds find their target elsewhere (fentry's
        # attach_btf_id), the others say they need one; skip those like bare kprobes.
        return f"section {section!r} names no target: {exc}"
    except BPFKitError as exc:
        raise exc.wrap(f"auto-attach program {name!r}")


# -------------------------------------------------------------------------- attach_all
class AttachedLinks(Mapping[str, Link], ClosesOnExit):
    """The links :func:`attach_all` made, by program (or struct_ops map) name; the programs it
    skipped with the reason (``skipped``); and of those, the struct_ops callbacks that run
    through a map it registered (``callbacks``: program -> map). Closing closes every link (in
    reverse order)."""

    def __init__(self) -> None:
        self.links: dict[str, Link] = {}
        self.skipped: dict[str, str] = {}
        self.callbacks: dict[str, str] = {}

    def __getitem__(self, name: str) -> Link:
        return self.links[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self.links)

    def __len__(self) -> int:
        return len(self.links)

    def close(self) -> None:
        errors: list[BPFKitError] = []
        for name in reversed(list(self.links)):
            try:
                self.links[name].close()
            except BPFKitError as exc:
                errors.append(exc)
        if errors:
            raise errors[0]


    def __repr__(self) -> str:
        return f"AttachedLinks({list(self.links)}, skipped={list(self.skipped)})"


def _programs(source: ProgramsArg) -> list[tuple[str, Program]]:
    progs: Any = getattr(source, "programs", source)  # a Collection's, or the mapping/iterable given
    if isinstance(progs, Mapping):
        return list(progs.items())
    return [(getattr(p, "name", str(i)), p) for i, p in enumerate(progs)]


def _struct_ops_maps(source: ProgramsArg) -> dict[str, Map]:
    # struct_ops maps (SEC(".struct_ops[.link]") variables) attach like programs, by map name.
    found = getattr(source, "struct_ops_maps", None)
    return dict(found()) if callable(found) else {}


def attach_all(
    collection: ProgramsArg,
    *,
    mode: AttachMode | str = AttachMode.AUTO,
    pid: int | None = None,
    cookie: int = 0,
    programs: Iterable[str] | None = None,
    progress: AllProgress | None = None,
    cgroup: str | int | None = None,
    netkit: str | int | None = None,
) -> AttachedLinks:
    """Attach every program of ``collection`` (a Collection, a name -> Program mapping or
    Programs) whose section names a target, and register its struct_ops maps. ``programs``
    limits it to those names (programs or struct_ops maps); ``progress(i, n, name)`` is called
    before each program is attached. ``mode``, ``pid`` and ``cookie`` as for :func:`attach_probe`.
    ``cgroup`` (a cgroup v2 path or fd): where every cgroup program goes (cgroup_skb,
    cgroup_sock, cgroup_sock_addr, sock_ops, sockopt, sysctl, device); without it they are skipped.
    ``netkit`` (a netkit pair's primary device, name or ifindex): where netkit/primary and
    netkit/peer programs go; without it they are skipped.

    All-or-nothing: when one attach fails, the links made so far are closed and the error
    (naming the program) propagates.
    """
    progs = _programs(collection)
    maps = _struct_ops_maps(collection)
    wanted = set(programs) if programs is not None else None
    if wanted is not None:
        missing = wanted - {n for n, _ in progs} - set(maps)
        if missing:
            have = ", ".join([n for n, _ in progs] + list(maps)) or "none"
            raise UsageError(f"no program {', '.join(repr(n) for n in sorted(missing))} in the object (it has: {have})")
    result = AttachedLinks()
    todo: list[tuple[str, Program]] = []
    for name, prog in progs:
        if wanted is not None and name not in wanted:
            continue
        reason = skip_reason(_section_of(prog))
        if reason is None and cgroup is None and _is_cgroup_program(prog):
            reason = f"a cgroup program: {_NEEDS_CGROUP}"
        elif reason is None and netkit is None and _is_netkit_section(_section_of(prog)):
            reason = f"a netkit program: {_NEEDS_NETKIT}"
        if reason:
            result.skipped[name] = reason
        else:
            todo.append((name, prog))
    try:
        for i, (name, prog) in enumerate(todo, 1):
            if progress is not None:
                progress(i, len(todo), name)
            made = auto_attach(name, prog, mode=mode, pid=pid, cookie=cookie, cgroup=cgroup, netkit=netkit)
            if isinstance(made, str):
                result.skipped[name] = made
            else:
                result.links[name] = made
        for name, m in maps.items():
            if wanted is not None and name not in wanted:
                continue
            from .link.struct_ops import struct_ops

            try:
                result.links[name] = struct_ops(m)
            except BPFKitError as exc:
                raise exc.wrap(f"auto-attach struct_ops map {name!r}")
            ops: Any = getattr(m, "struct_ops", None)  # bpfkit.struct_ops.StructOps, set by Collection
            for callback in ops.programs.values() if ops is not None else ():
                if callback in result.skipped:
                    result.callbacks[callback] = name
    except BaseException:
        result.close()
        raise
    return result
