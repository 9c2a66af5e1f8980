# SPDX-License-Identifier: Apache-2.0
"""Tracepoints: a program on a static trace event, through a perf event.

The event's id comes from tracefs ``events/<group>/<name>/id``; a PERF_TYPE_TRACEPOINT perf
event with that config is opened on CPU 0 for all tasks, and the program runs wherever the
tracepoint fires. Syscall tracepoints (``syscalls/sys_enter_*``) accept BPF programs since 4.14
(cf5f5cea270655).
"""

from __future__ import annotations

from .._kernel import tracefs as _tracefs
from .._protocols import ProgramArg
from ..errors import BPFKitError, NotSupportedError, ParseError, UsageError
from .base import Link
from .kind import AttachOptions, LinkKind, NamedSection, SectionTarget
from .perf_event import AttachMode, PerfEvent, PerfEventIoctlLink, PerfEventLink, attach_perf_event, check_program

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ..probespec import ProbeSpec

__all__ = ["tracepoint", "split_tracepoint"]


def split_tracepoint(target: str) -> tuple[str, str]:
    """``syscalls/sys_enter_openat`` or ``syscalls:sys_enter_openat`` -> (group, name)."""
    for sep in ("/", ":"):
        group, found, name = target.partition(sep)
        if found:
            return group, name
    raise UsageError(f"tracepoint {target!r} must be GROUP/NAME (like syscalls/sys_enter_openat)")


def tracepoint(
    group: str,
    name: str,
    prog: ProgramArg,
    *,
    cookie: int = 0,
    mode: AttachMode | str = AttachMode.AUTO,
) -> PerfEventLink | PerfEventIoctlLink:
    """Attach a tracepoint program to ``group/name`` (``"syscalls", "sys_enter_openat"``).

    ``cookie`` (5.15, link mode only) is what bpf_get_attach_cookie() returns in the program.
    """
    what = f"tracepoint {group}/{name}"
    try:
        check_program(prog, "tracepoint", what)
        event_id = _tracefs.event_id(group, name)
        fd = _tracefs.open_trace_event(event_id, -1, what)
        return attach_perf_event(PerfEvent(fd, what), prog, cookie=cookie, mode=mode)
    except BPFKitError as exc:
        raise exc.wrap(f"attach {what}")


# ----------------------------------------------------------------------- the kind's record
def _parse_section(sec: NamedSection, section: str, target: str) -> SectionTarget:
    try:
        group, event = split_tracepoint(target)
    except UsageError:
        raise ParseError(f"section {section!r}: expected {sec.prefix}/GROUP/NAME") from None
    return SectionTarget(sec.kind, target, event, group=group)


def _attach_section(prog: ProgramArg, target: SectionTarget, o: AttachOptions, section: str) -> Link:
    return tracepoint(target.group, target.symbol, prog, mode=o.mode, cookie=o.cookie)


def _attach_probe(spec: ProbeSpec, prog: ProgramArg, o: AttachOptions) -> Link:
    if spec.is_wildcard:
        raise NotSupportedError(f"wildcard probe {spec}", "a tracepoint spec names one event; attach each event")
    return tracepoint(spec.category, spec.function, prog, mode=o.mode, cookie=o.cookie)


KIND = LinkKind(
    "tracepoint",
    sections=(NamedSection("tracepoint", "tracepoint", _parse_section, _attach_section),
              NamedSection("tp", "tracepoint", _parse_section, _attach_section)),
    probes={"tracepoint": _attach_probe},
    features=("prog_type_tracepoint",),
)
