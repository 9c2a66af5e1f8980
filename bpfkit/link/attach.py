# SPDX-License-Identifier: Apache-2.0
"""The one attach path: a program at a probe spec, at its section, or every program of a
collection. It reads the link kinds' records (:mod:`bpfkit.link.kind`: each kind's module
declares its section prefixes, probe-spec kinds and attach functions) through the index
:mod:`bpfkit.link._kinds`, importing only the kinds it uses; ``bpfkit.attach`` (the name it had
before it moved here), ``bpfkit.link.attach_probe`` / ``attach_section`` / ``attach_all`` /
``attach_network`` and ``Collection.attach_all`` are these functions, and ``bpfkit attach``
calls :func:`attach_probe` once per SPEC or :func:`attach_all` once.

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
    perf_event/type=T,config=C,frequency=F   (ebpf_exporter's: sampled on every online CPU)
    xdp/IFACE                                (ebpf_exporter's: XDP on that interface)

A section without a target (``SEC("kprobe")``) or of a kind not attached here is skipped with
a note by :func:`attach_all`; attach such programs by hand. A kind that attaches the targets of
a prefix may still give a never-auto reason for it: that reason is for the sections of the
prefix whose libbpf name takes no target (``SEC("perf_event")``, ``SEC("xdp")``,
``SEC("xdp/devmap")``). struct_ops maps are registered by :func:`attach_all` like programs, by
map name.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, Union

from .._closing import ClosesOnExit
from .._kernel.fd import FD
from ..errors import BPFKitError, KernelError, NotSupportedError, UsageError
from ..probespec import ProbeSpec, parse_probe
from ..sections import match_section
from ..spec.twins import Twin, find_twins
from . import _kinds
from ._netdev import NetAttachMode
from .base import Link
from .kind import AttachOptions, LinkKind, NamedSection, ProbeAttacher, Section, SectionAttacher, SectionTarget
from .kind import same_cookie as _same_cookie  # noqa: F401  # its name when it lived here
from .perf_event import AttachMode
from .xdp import XdpMode

if TYPE_CHECKING:
    from ..collection import Collection
    from ..maps import Map
    from ..program import Program
    from .multi import Progress

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

# The probe kinds attach_network takes (records with network=True).
NETWORK_KINDS = _kinds.NETWORK_PROBES


# --------------------------------------------------------------- the records, as tables
def _tables() -> dict[str, Any]:
    """Every kind's record as the tables attach.py kept before the records (tests and tools
    read them): imports every link kind."""
    probes: dict[str, ProbeAttacher] = {}
    named: dict[str, str] = {}
    plugged: dict[str, tuple[str, SectionAttacher]] = {}
    never: dict[str, str] = {}
    for kind in _kinds.all_kinds():
        probes.update(kind.probes)
        never.update(kind.never_auto)
        for sec in kind.sections:
            if isinstance(sec, NamedSection):
                named[sec.prefix] = sec.kind
            else:
                plugged[sec.prefix] = (sec.kind, sec.attach)
    return {"_PROBE_KINDS": probes, "_NAMED_KINDS": named, "_SECTION_KINDS": plugged, "_NEVER_AUTO": never}


def __getattr__(name: str) -> Any:
    # _PROBE_KINDS (probe kind -> attacher), _NAMED_KINDS (prefix -> kind), _SECTION_KINDS
    # (prefix -> (kind, attacher)) and _NEVER_AUTO (prefix -> reason), made on first use.
    if name in ("_PROBE_KINDS", "_NAMED_KINDS", "_SECTION_KINDS", "_NEVER_AUTO"):
        tables = _tables()
        globals().update(tables)
        return tables[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _section_def(prefix: str) -> Section | NamedSection | None:
    kind = _kinds.for_section(prefix)
    if kind is None:
        return None
    return next(sec for sec in kind.sections if sec.prefix == prefix)


# ------------------------------------------------------------------------- probe specs
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
    kind = _kinds.for_probe(parsed.kind)
    if kind is None:
        raise NotSupportedError(f"attaching {parsed.kind} probes", f"bpfkit.attach handles {', '.join(_kinds.PROBES)}")
    options = AttachOptions(mode, pid, cookie, progress, max_perf_targets, net_mode, xdp_mode, netns)
    return kind.probes[parsed.kind](parsed, prog, options)


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
    kind = _kinds.for_probe(parsed.kind) if parsed.kind in NETWORK_KINDS else None
    if kind is None:
        raise UsageError(f"{parsed} is not a network attach point: expected xdp:IFACE, tc:IFACE:ingress|egress "
                         "or netkit:IFACE[:primary|peer]")
    options = AttachOptions(AttachMode.AUTO, net_mode=mode, xdp_mode=xdp_mode, netns=netns)
    return kind.probes[parsed.kind](parsed, prog, options)


# ---------------------------------------------------------------------------- sections
def _prefix(section: str) -> str:
    return section.lstrip("?").partition("/")[0]


def parse_section(section: str) -> SectionTarget | None:
    """The attach target a section names, or None when its kind is not attachable here.

    Raises ParseError for a kind handled here but a malformed target.
    """
    name = section.removeprefix("?")
    prefix, _, target = name.partition("/")
    sec = _section_def(prefix)
    if sec is None:
        return None
    if isinstance(sec, Section):
        return SectionTarget(sec.kind, target)
    if not target:
        return SectionTarget(sec.kind)
    return sec.parse(sec, section, target)


def _section_of(prog: object) -> str:
    section = getattr(prog, "section", "") or ""
    spec = getattr(prog, "spec", None)
    if not section and spec is not None:
        section = getattr(spec, "section", "") or ""
    return str(section)


def _never_reason(section: str) -> str | None:
    """Why ``section`` is attached by hand only: its prefix has a never-auto reason, and no kind
    attaches that prefix's targets or the section's libbpf name takes none (``perf_event``
    beside ``perf_event/type=...``, ``xdp/devmap`` beside ``xdp/IFACE``)."""
    prefix = _prefix(section)
    never_by = _kinds.for_never_auto(prefix)
    if never_by is None or (prefix in _kinds.SECTIONS and match_section(section).attach_to):
        return None
    return never_by.never_auto[prefix]


def _attach_at_section(prog: ProgramArg, sec: str, options: AttachOptions) -> Link:
    if _prefix(sec) in _kinds.SECTIONS and (why := _never_reason(sec)):
        raise NotSupportedError(f"auto-attach of section {sec!r}", why)
    target = parse_section(sec)
    if target is None:
        raise NotSupportedError(f"auto-attach of section {sec!r}", "bpfkit.attach handles "
                                f"{', '.join(_kinds.SECTION_PREFIXES)} sections")
    found = _section_def(_prefix(sec))
    if isinstance(found, Section):
        return found.attach(prog, target, options)
    if not target.target or found is None:
        raise NotSupportedError(f"auto-attach of section {sec!r}", "the section names no target; attach it by hand")
    return found.attach(prog, target, options, sec)


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
    return _attach_at_section(prog, sec, _options(mode, pid, cookie, cgroup, netkit))


def _options(mode: AttachMode | str, pid: int | None, cookie: int, cgroup: str | int | None,
             netkit: str | int | None) -> AttachOptions:
    return AttachOptions(mode, pid, cookie, net_mode=NetAttachMode.AUTO, xdp_mode=XdpMode.AUTO, cgroup=cgroup,
                         netkit=netkit)


def skip_reason(section: str) -> str | None:
    """Why auto-attach passes over a program of ``section``, or None when it attaches it."""
    prefix = _prefix(section)
    never = _never_reason(section)
    if never is not None:
        return f"section {section!r} is never auto-attached: {never}"
    target = parse_section(section)
    if target is None:
        return f"section {section!r} is not a kind auto-attach handles"
    if section.lstrip("?") == "cgroup/skb":
        return f"section {section!r} names no hook: use cgroup_skb/ingress or cgroup_skb/egress"
    if not target.target and not isinstance(_section_def(prefix), Section):
        return f"section {section!r} names no target"
    return None


def _needs_option(section: str, cgroup: str | int | None, netkit: str | int | None) -> str | None:
    """The note attach_all gives a program whose kind needs an option not given (a section
    names a cgroup program's hook, not the cgroup; a netkit program's device, not the pair)."""
    kind: LinkKind | None = _kinds.for_section(_prefix(section))
    if kind is None or kind.needs is None:
        return None
    option, note = kind.needs
    return note if {"cgroup": cgroup, "netkit": netkit}[option] is None else None


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
        return _attach_at_section(prog, section, _options(mode, pid, cookie, cgroup, netkit))
    except NotSupportedError as exc:
        target = parse_section(section)
        if target is None or target.target or isinstance(exc, KernelError):
            raise exc.wrap(f"auto-attach program {name!r}")
        # A bare SEC("uprobe.multi"): some kinds find their target elsewhere (fentry's
        # attach_btf_id), the others say they need one; skip those like bare kprobes (not
        # those the kernel refused: EOPNOTSUPP/ENOTSUPP are NotSupportedErrors too).
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


def _attach_twin(twin: Twin, preferred: Program, fallback: Program, attach: Callable[[str, Program], Link | str],
                 skipped: dict[str, str]) -> tuple[str, Link | str]:
    """Attach ``twin``'s preferred program, else (the kernel refused it) its fallback, as
    libbpf-tools keep one of the pair (runqlat.c); the other is noted in ``skipped``."""
    try:
        made, used = attach(twin.preferred, preferred), twin.preferred
    except BPFKitError as exc:
        try:
            made, used = attach(twin.fallback, fallback), twin.fallback
        except BPFKitError as again:
            raise again.wrap(f"its twin {twin.preferred!r} was refused too ({exc})")
        skipped[twin.preferred] = f"the kernel refused it ({exc}); its twin {twin.fallback!r} on {twin.hook} runs instead"
        return used, made
    skipped[twin.fallback] = twin.note(used)
    return used, made


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

    Twins (a tp_btf and a raw_tp program on one tracepoint, fentry and kprobe on one function,
    fexit and kretprobe: :mod:`bpfkit.spec.twins`) both loaded would handle each event twice:
    without ``programs``, the BTF one is attached, or its twin when the kernel refuses it, and
    the other is in ``skipped`` with why. Name both in ``programs`` to attach both.

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
        section = _section_of(prog)
        reason = skip_reason(section) or _needs_option(section, cgroup, netkit)
        if reason:
            result.skipped[name] = reason
        else:
            todo.append((name, prog))
    # Twins (tp_btf and raw_tp on one tracepoint, fentry and kprobe on one function; see
    # bpfkit.spec.twins) would handle each event twice: unless both are named, one attaches.
    twins = {t.preferred: t for t in find_twins({n: _section_of(p) for n, p in todo})} if wanted is None else {}
    held = {t.fallback: dict(todo)[t.fallback] for t in twins.values()}
    todo = [(n, p) for n, p in todo if n not in held]

    def attach(name: str, prog: Program) -> Link | str:
        return auto_attach(name, prog, mode=mode, pid=pid, cookie=cookie, cgroup=cgroup, netkit=netkit)

    try:
        for i, (first, prog) in enumerate(todo, 1):
            if progress is not None:
                progress(i, len(todo), first)
            twin = twins.get(first)
            if twin is not None:
                name, made = _attach_twin(twin, prog, held[twin.fallback], attach, result.skipped)
            else:
                name, made = first, attach(first, prog)
            if isinstance(made, str):
                result.skipped[name] = made
            else:
                result.links[name] = made
        for name, m in maps.items():
            if wanted is not None and name not in wanted:
                continue
            from .struct_ops import struct_ops

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
