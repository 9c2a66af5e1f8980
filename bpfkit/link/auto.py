"""Attaching by name: from a program's section (libbpf's auto-attach) or from a probe spec.

Sections that name their target, as libbpf reads them:

    kprobe/SYMBOL[+OFFSET]          kretprobe/SYMBOL
    ksyscall/NAME                   kretsyscall/NAME          (through the syscall wrapper)
    tracepoint/GROUP/NAME           tp/GROUP/NAME
    uprobe/BINARY:FUNCTION[+OFFSET] uprobe/BINARY:0xOFFSET     uretprobe/BINARY:FUNCTION
    (also uprobe.s/ and uretprobe.s/; BINARY is a path such as /usr/lib/.../libc.so.6, or a
    library name such as libc.so.6)
    uprobe.multi/BINARY:PATTERN     kprobe.multi/PATTERN      (and the ret/.s kinds: one multi link)
    uprobe.session/BINARY:PATTERN   kprobe.session/PATTERN    (entry and return: one session link)

A section without a target (``SEC("kprobe")``) or of a kind this module does not attach is
skipped with a note; attach such programs by hand.
"""

from __future__ import annotations

import dataclasses
import importlib
import re
from typing import Any, Callable, Iterable, Iterator, Mapping

from ..errors import BPFKitError, NotSupportedError, ParseError, UsageError
from .base import Link
from .kprobe import kprobe, kretprobe, ksyscall
from .perf_event import AttachMode
from .tracepoint import split_tracepoint, tracepoint
from .uprobe import Executable

__all__ = ["AttachOptions", "SectionTarget", "skip_reason", "auto_attach", "parse_section", "attach_section", "attach_all", "AttachedLinks", "attach_probe"]

_KINDS = {
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
# Section kinds attached by other modules: prefix -> (kind, "module:function"), the module
# relative to bpfkit.link and imported on first use. The function is called as
# ``function(prog, target: SectionTarget, options: AttachOptions) -> Link``; ``target.target``
# is the text after the first "/" (empty when the section names none).
_PLUGGED_SECTIONS: dict[str, tuple[str, str]] = {
    "uprobe.multi": ("uprobe_multi", "multi:attach_uprobe_multi_section"),
    "uprobe.multi.s": ("uprobe_multi", "multi:attach_uprobe_multi_section"),
    "uretprobe.multi": ("uretprobe_multi", "multi:attach_uprobe_multi_section"),
    "uretprobe.multi.s": ("uretprobe_multi", "multi:attach_uprobe_multi_section"),
    "kprobe.multi": ("kprobe_multi", "multi:attach_kprobe_multi_section"),
    "kretprobe.multi": ("kretprobe_multi", "multi:attach_kprobe_multi_section"),
    "kprobe.session": ("kprobe_session", "multi:attach_kprobe_session_section"),
    "uprobe.session": ("uprobe_session", "multi:attach_uprobe_session_section"),
    "uprobe.session.s": ("uprobe_session", "multi:attach_uprobe_session_section"),
    "usdt": ("usdt", "bpfkit.usdt.attach:attach_usdt_section"),
    "raw_tp": ("raw_tracepoint", "tracing:auto_raw_tracepoint"),
    "raw_tracepoint": ("raw_tracepoint", "tracing:auto_raw_tracepoint"),
    "raw_tp.w": ("raw_tracepoint", "tracing:auto_raw_tracepoint"),
    "raw_tracepoint.w": ("raw_tracepoint", "tracing:auto_raw_tracepoint"),
    "tp_btf": ("tp_btf", "tracing:auto_tracing"),
    "fentry": ("fentry", "tracing:auto_tracing"),
    "fexit": ("fexit", "tracing:auto_tracing"),
    "fmod_ret": ("fmod_ret", "tracing:auto_tracing"),
    "fentry.s": ("fentry", "tracing:auto_tracing"),
    "fexit.s": ("fexit", "tracing:auto_tracing"),
    "fmod_ret.s": ("fmod_ret", "tracing:auto_tracing"),
    "lsm": ("lsm", "tracing:auto_tracing"),
    "lsm.s": ("lsm", "tracing:auto_tracing"),
    "freplace": ("freplace", "tracing:auto_freplace"),
    "iter": ("iter", "iter:auto_iter"),
    "iter.s": ("iter", "iter:auto_iter"),
}
# Probe-spec kinds (bpfkit.probespec) attached by other modules: kind -> "module:function",
# called as ``function(spec: ProbeSpec, prog, options: AttachOptions) -> Link``.
_PLUGGED_PROBES: dict[str, str] = {
    "usdt": "bpfkit.usdt.attach:attach_usdt_probe",
    "kprobe.session": "multi:attach_session_probe",
    "uprobe.session": "multi:attach_session_probe",
    "rawtracepoint": "tracing:probe_raw_tracepoint",
    "fentry": "tracing:probe_tracing",
    "fexit": "tracing:probe_tracing",
    "profile": "sampling:attach_sampling_probe",
    "interval": "sampling:attach_sampling_probe",
    "software": "sampling:attach_sampling_probe",
    "hardware": "sampling:attach_sampling_probe",
}
# Sections that are never auto-attached, with the reason attach_all reports.
_NEVER_AUTO = {
    "struct_ops": "struct_ops callbacks run through their struct_ops map, which attach_all registers (link.struct_ops)",
    "struct_ops.s": "struct_ops callbacks run through their struct_ops map, which attach_all registers (link.struct_ops)",
    "perf_event": "perf_event programs sample counters chosen at run time; attach with bpfkit.link.perf_event_sample (or a profile:/software:/hardware: probe spec)",
}
_FUNC_OFF = re.compile(r"^(?P<func>[^+]+?)(?:\+(?P<off>(?:0x[0-9a-fA-F]+|\d+)))?$")


@dataclasses.dataclass(frozen=True)
class SectionTarget:
    """What a section asks to attach to."""

    kind: str  # kprobe, kretprobe, ksyscall, kretsyscall, tracepoint, uprobe, uretprobe
    target: str = ""  # empty: the section names no target
    symbol: str = ""  # kernel symbol, syscall name, tracepoint name or binary function
    offset: int = 0
    group: str = ""  # tracepoint group
    binary: str = ""  # uprobe binary (path or library name)
    file_offset: int | None = None  # uprobe BINARY:0xOFFSET


@dataclasses.dataclass(frozen=True)
class AttachOptions:
    """What the caller of attach_section / attach_all / attach_probe asked for."""

    mode: AttachMode | str = AttachMode.AUTO
    pid: int | None = None
    cookie: int = 0


def _plugged(ref: str) -> Callable[..., Link]:
    module, _, func = ref.partition(":")
    # "bpfkit.x.y:func" names a module outside bpfkit.link (bpfkit.usdt.attach).
    name = module if module.startswith("bpfkit.") else f"{__package__}.{module}"
    return getattr(importlib.import_module(name), func)


def parse_section(section: str) -> SectionTarget | None:
    """The attach target a section names, or None when its kind is not attachable here.

    Raises ParseError for a kind this module handles but a malformed target.
    """
    name = section[1:] if section.startswith("?") else section
    prefix, _, target = name.partition("/")
    if prefix in _PLUGGED_SECTIONS:
        return SectionTarget(_PLUGGED_SECTIONS[prefix][0], target)
    kind = _KINDS.get(prefix)
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


def _section_of(prog: Any) -> str:
    section = getattr(prog, "section", "") or ""
    spec = getattr(prog, "spec", None)
    if not section and spec is not None:
        section = getattr(spec, "section", "") or ""
    return section


def attach_section(
    prog: Any,
    section: str | None = None,
    *,
    mode: AttachMode | str = AttachMode.AUTO,
    pid: int | None = None,
    cookie: int = 0,
) -> Link:
    """Attach ``prog`` where its section (or ``section``) says. ``pid`` filters uprobes.

    NotSupportedError when the section names no target or a kind not attached here.
    """
    sec = section if section is not None else _section_of(prog)
    target = parse_section(sec)
    if target is None:
        raise NotSupportedError(f"auto-attach of section {sec!r}", "bpfkit.link.attach_section handles k(ret)probe, ksyscall, tracepoint and u(ret)probe sections")
    prefix = sec.lstrip("?").partition("/")[0]
    if prefix in _PLUGGED_SECTIONS:
        return _plugged(_PLUGGED_SECTIONS[prefix][1])(prog, target, AttachOptions(mode, pid, cookie))
    if not target.target:
        raise NotSupportedError(f"auto-attach of section {sec!r}", "the section names no target; attach it by hand")
    kw: dict[str, Any] = {"mode": mode, "cookie": cookie}
    if target.kind == "kprobe":
        return kprobe(target.symbol, prog, offset=target.offset, **kw)
    if target.kind == "kretprobe":
        return kretprobe(target.symbol, prog, **kw)
    if target.kind in ("ksyscall", "kretsyscall"):
        return ksyscall(target.symbol, prog, retprobe=target.kind == "kretsyscall", **kw)
    if target.kind == "tracepoint":
        return tracepoint(target.group, target.symbol, prog, **kw)
    exe = Executable(target.binary)
    if target.kind == "uprobe":
        if target.file_offset is not None:
            return exe.uprobe(None, prog, file_offset=target.file_offset, pid=pid, **kw)
        return exe.uprobe(target.symbol, prog, offset=target.offset, pid=pid, **kw)
    if target.file_offset is not None:
        return exe.uretprobe(None, prog, file_offset=target.file_offset, pid=pid, **kw)
    if target.offset:
        raise ParseError(f"section {sec!r}: a uretprobe takes no offset")
    return exe.uretprobe(target.symbol, prog, pid=pid, **kw)


class AttachedLinks(Mapping[str, Link]):
    """The links :func:`attach_all` made, by program name, and the programs it skipped with
    the reason (``skipped``). Closing closes every link (in reverse order)."""

    def __init__(self) -> None:
        self.links: dict[str, Link] = {}
        self.skipped: dict[str, str] = {}

    def __getitem__(self, name: str) -> Link:
        return self.links[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self.links)

    def __len__(self) -> int:
        return len(self.links)

    def close(self) -> None:
        errors = []
        for name in reversed(list(self.links)):
            try:
                self.links[name].close()
            except BPFKitError as exc:
                errors.append(exc)
        if errors:
            raise errors[0]

    def __enter__(self) -> "AttachedLinks":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"AttachedLinks({list(self.links)}, skipped={list(self.skipped)})"


def _programs(source: Any) -> Iterable[tuple[str, Any]]:
    progs = getattr(source, "programs", source)
    if isinstance(progs, Mapping):
        return list(progs.items())
    return [(getattr(p, "name", str(i)), p) for i, p in enumerate(progs)]


def skip_reason(section: str) -> str | None:
    """Why auto-attach passes over a program of ``section``, or None when it attaches it."""
    prefix = section.lstrip("?").partition("/")[0]
    never = _NEVER_AUTO.get(prefix)
    if never:
        return f"section {section!r} is never auto-attached: {never}"
    target = parse_section(section)
    if target is None:
        return f"section {section!r} is not a kind auto-attach handles"
    if not target.target and prefix not in _PLUGGED_SECTIONS:
        return f"section {section!r} names no target"
    return None


def auto_attach(
    name: str, prog: Any, *, mode: AttachMode | str = AttachMode.AUTO, pid: int | None = None, cookie: int = 0
) -> Link | str:
    """Attach program ``name`` where its section says (see :func:`skip_reason` first); a str is
    the reason a section without a target was passed over. Errors name the program."""
    section = _section_of(prog)
    try:
        return attach_section(prog, section, mode=mode, pid=pid, cookie=cookie)
    except NotSupportedError as exc:
        if parse_section(section).target:  # type: ignore[union-attr]
            raise exc.wrap(f"auto-attach program {name!r}")
        # A bare SEC("uprobe.multi"): some kinds find their target elsewhere (fentry's
        # attach_btf_id), the others say they need one; skip those like bare kprobes.
        return f"section {section!r} names no target: {exc}"
    except BPFKitError as exc:
        raise exc.wrap(f"auto-attach program {name!r}")


def attach_all(
    collection: Any,
    *,
    mode: AttachMode | str = AttachMode.AUTO,
    pid: int | None = None,
    programs: Iterable[str] | None = None,
) -> AttachedLinks:
    """Attach every program of ``collection`` (a Collection, a name -> Program mapping or
    Programs) whose section names a target. ``programs`` limits it to those names.

    All-or-nothing: when one attach fails, the links made so far are closed and the error
    (naming the program) propagates.
    """
    wanted = set(programs) if programs is not None else None
    result = AttachedLinks()
    try:
        for name, prog in _programs(collection):
            if wanted is not None and name not in wanted:
                continue
            section = _section_of(prog)
            reason = skip_reason(section)
            if reason:
                result.skipped[name] = reason
                continue
            made = auto_attach(name, prog, mode=mode, pid=pid)
            if isinstance(made, str):
                result.skipped[name] = made
            else:
                result.links[name] = made
        # struct_ops maps (SEC(".struct_ops[.link]") variables) attach like programs, by map name.
        struct_ops_maps = getattr(collection, "struct_ops_maps", None)
        for name, m in (struct_ops_maps() if callable(struct_ops_maps) else {}).items():
            if wanted is not None and name not in wanted:
                continue
            from .struct_ops import struct_ops

            try:
                result.links[name] = struct_ops(m)
            except BPFKitError as exc:
                raise exc.wrap(f"auto-attach struct_ops map {name!r}")
        if wanted is not None:
            missing = wanted - set(result.links) - set(result.skipped)
            if missing:
                raise UsageError(f"no program named {', '.join(sorted(missing))}")
    except BaseException:
        result.close()
        raise
    return result


def attach_probe(
    spec: Any,
    prog: Any,
    *,
    mode: AttachMode | str = AttachMode.AUTO,
    pid: int | None = None,
    cookie: int = 0,
) -> Link:
    """Attach ``prog`` at a bpftrace-style probe spec (``tracepoint:syscalls:sys_enter_openat``,
    ``kprobe:do_sys_openat2``, ``uprobe:/bin/bash:readline``, ``ur:libc:malloc``), given as text
    or a parsed :class:`bpfkit.probespec.ProbeSpec`."""
    if isinstance(spec, str):
        from ..probespec import parse_probe

        spec = parse_probe(spec)
    kind = spec.kind
    kw: dict[str, Any] = {"mode": mode, "cookie": cookie}
    if kind in _PLUGGED_PROBES:
        return _plugged(_PLUGGED_PROBES[kind])(spec, prog, AttachOptions(mode, pid, cookie))
    if getattr(spec, "is_wildcard", False):
        raise NotSupportedError(f"wildcard probe {spec}", "attach_probe takes one target; wildcards need multi-attach")
    if kind in ("kprobe", "kretprobe"):
        symbol = f"{spec.module}:{spec.function}" if spec.module else spec.function
        if kind == "kprobe":
            return kprobe(symbol, prog, offset=spec.offset, **kw)
        return kretprobe(symbol, prog, **kw)
    if kind == "tracepoint":
        return tracepoint(spec.category, spec.function, prog, **kw)
    if kind in ("uprobe", "uretprobe"):
        exe = Executable(spec.binary)
        where: dict[str, Any] = {"address": spec.address} if spec.address is not None else {}
        symbol = None if spec.address is not None else spec.function
        if kind == "uprobe":
            return exe.uprobe(symbol, prog, offset=spec.offset, pid=pid, **where, **kw)
        return exe.uretprobe(symbol, prog, pid=pid, **where, **kw)
    raise NotSupportedError(f"attaching {kind} probes", f"bpfkit.link.attach_probe handles kprobe, kretprobe, tracepoint, uprobe and uretprobe (not {spec})")
