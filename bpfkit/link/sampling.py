# SPDX-License-Identifier: Apache-2.0
"""Sampling: a SEC("perf_event") program run on every overflow of a perf counter.

A counter (a software event such as cpu-clock or page-faults, or a hardware one such as cycles,
which needs the CPU's PMU) is opened with perf_event_open as a *sampling* event: every
``period`` counts, or ``freq`` times a second (attr.freq=1; the kernel keeps adjusting the period
to hit the rate), the kernel calls the overflow handler, which runs the program with a
``struct bpf_perf_event_data`` (the registers, ``sample_period``, ``addr``).

Scope, as perf_event_open(2) has it:

* **per CPU** (``pid=None``): one event per online CPU (``pid=-1, cpu=N``), counting whatever
  runs there, combined into a :class:`~bpfkit.link.group.LinkGroup`. What ``perf record -a`` and
  bpftrace's ``profile:hz:99`` do.
* **per task** (``pid=N``): one event that follows the task (``cpu=-1``) onto whichever CPU it
  runs; ``inherit=True`` extends it to children forked after the attach (a child's event copies
  the parent's program: kernel/events/core.c, perf_event_alloc).

Each event is attached with the perf-event machinery of :mod:`.perf_event` (a bpf_link on
5.15+, else PERF_EVENT_IOC_SET_BPF) and enabled only once the program is on it.

ebpf_exporter's ``SEC("perf_event/type=T,config=C,frequency=F")`` names the event and rate in
the section: :func:`bpfkit.link.attach_all` samples those on every online CPU (a bare
``SEC("perf_event")`` is attached by hand: it names neither).

Limits: ``freq`` above ``kernel.perf_event_max_sample_rate`` is refused by the kernel (EINVAL),
and the kernel lowers that sysctl by itself when sampling interrupts take too long
("perf: interrupt took too long" in dmesg). cpu-clock and task-clock count nanoseconds, so
their ``period`` is a time in ns. Hardware events need a PMU: most virtual machines have none
(perf_event_open gives ENOENT), which is reported as NotSupportedError.
"""

from __future__ import annotations

import dataclasses
import errno
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, Union

if TYPE_CHECKING:
    from ..probespec import ProbeSpec

from .._kernel import perf as _perf
from .._kernel.consts import (
    HARDWARE_EVENT_NAMES,
    SOFTWARE_EVENT_NAMES,
    PerfAttrFlag,
    PerfHwId,
    PerfSwId,
    PerfType,
    ProgType,
)
from .._kernel.cpus import online_cpus
from .._kernel.fd import FD
from .._protocols import ProgramArg
from ..errors import BPFKitError, KernelError, NotSupportedError, UsageError, errno_name
from ..sections import parse_perf_event_section
from .base import Link, _prog_fd
from .group import LinkGroup, close_links
from .kind import AttachOptions, LinkKind, Section, SectionTarget
from .perf_event import AttachMode, PerfEvent, PerfEventIoctlLink, PerfEventLink, attach_perf_event

__all__ = [
    "SoftwareEvent",
    "HardwareEvent",
    "SampleEvent",
    "SamplingGroup",
    "resolve_event",
    "perf_event_sample",
    "DEFAULT_PERIODS",
]

# The enums of bpfkit._kernel.consts under the names this API uses.
SoftwareEvent = PerfSwId
HardwareEvent = PerfHwId

EventLike = Union[PerfSwId, PerfHwId, str, "SampleEvent", tuple[int, int]]

# The period a ``software:EVENT`` / ``hardware:EVENT`` spec without a COUNT gets (bpftrace picks
# a default per event too): clocks every ms of CPU time, frequent events every 100-1M.
DEFAULT_PERIODS: dict[tuple[int, int], int] = {
    (PerfType.SOFTWARE, PerfSwId.CPU_CLOCK): 1_000_000,
    (PerfType.SOFTWARE, PerfSwId.TASK_CLOCK): 1_000_000,
    (PerfType.SOFTWARE, PerfSwId.PAGE_FAULTS): 100,
    (PerfType.SOFTWARE, PerfSwId.CONTEXT_SWITCHES): 1_000,
    (PerfType.SOFTWARE, PerfSwId.PAGE_FAULTS_MIN): 100,
    (PerfType.HARDWARE, PerfHwId.CPU_CYCLES): 1_000_000,
    (PerfType.HARDWARE, PerfHwId.INSTRUCTIONS): 1_000_000,
    (PerfType.HARDWARE, PerfHwId.CACHE_REFERENCES): 1_000_000,
    (PerfType.HARDWARE, PerfHwId.CACHE_MISSES): 1_000_000,
    (PerfType.HARDWARE, PerfHwId.BRANCH_INSTRUCTIONS): 100_000,
    (PerfType.HARDWARE, PerfHwId.BRANCH_MISSES): 100_000,
    (PerfType.HARDWARE, PerfHwId.BUS_CYCLES): 100_000,
    (PerfType.HARDWARE, PerfHwId.STALLED_CYCLES_FRONTEND): 1_000_000,
    (PerfType.HARDWARE, PerfHwId.STALLED_CYCLES_BACKEND): 1_000_000,
    (PerfType.HARDWARE, PerfHwId.REF_CPU_CYCLES): 1_000_000,
}
_DEFAULT_PERIOD = 1  # rare events: migrations, major faults, alignment faults ...

# PMU-backed event types: ENOENT/EOPNOTSUPP from perf_event_open means no PMU serves them.
_PMU_TYPES = (PerfType.HARDWARE, PerfType.HW_CACHE, PerfType.RAW)
_NO_PMU = "no hardware PMU (virtual machine?)"


@dataclasses.dataclass(frozen=True)
class SampleEvent:
    """A counter to sample: perf_event_attr ``type`` and ``config``, and a name for messages."""

    type: int
    config: int
    name: str

    @property
    def is_hardware(self) -> bool:
        return self.type in _PMU_TYPES

    @property
    def default_period(self) -> int:
        return DEFAULT_PERIODS.get((self.type, self.config), _DEFAULT_PERIOD)

    def __str__(self) -> str:
        return self.name


def _enum_name(member: PerfSwId | PerfHwId, table: dict[str, Any]) -> str:
    """perf's spelling of an enum member (the first table name that maps to it)."""
    return next((name for name, value in table.items() if value == member), member.name.lower())


def resolve_event(event: EventLike) -> SampleEvent:
    """A :class:`SampleEvent` from a SoftwareEvent/HardwareEvent, a perf name (``cpu-clock``,
    ``page-faults``, ``cycles``, optionally prefixed ``software:``/``hardware:``) or a raw
    ``(type, config)`` pair (any PMU: type from /sys/bus/event_source/devices/*/type)."""
    if isinstance(event, SampleEvent):
        return event
    if isinstance(event, PerfSwId):
        return SampleEvent(PerfType.SOFTWARE, int(event), _enum_name(event, SOFTWARE_EVENT_NAMES))
    if isinstance(event, PerfHwId):
        return SampleEvent(PerfType.HARDWARE, int(event), _enum_name(event, HARDWARE_EVENT_NAMES))
    if isinstance(event, str):
        kind, colon, name = event.partition(":")
        if not colon:
            kind, name = "", event
        tables: dict[str, dict[str, PerfSwId] | dict[str, PerfHwId]] = {
            "software": SOFTWARE_EVENT_NAMES, "hardware": HARDWARE_EVENT_NAMES}
        if kind and kind not in tables:
            raise UsageError(f"unknown event kind {kind!r} in {event!r}: expected software:NAME or hardware:NAME")
        for table_kind, table in tables.items():
            if kind in ("", table_kind) and name in table:
                kind_type = PerfType.SOFTWARE if table_kind == "software" else PerfType.HARDWARE
                return SampleEvent(kind_type, int(table[name]), name)
        known = ", ".join(sorted({*SOFTWARE_EVENT_NAMES, *HARDWARE_EVENT_NAMES}))
        raise UsageError(f"unknown perf event {event!r} (known: {known})")
    if isinstance(event, tuple) and len(event) == 2 and all(isinstance(v, int) for v in event):
        ptype, config = event
        try:
            if PerfType(ptype) == PerfType.SOFTWARE and config in PerfSwId._value2member_map_:
                return resolve_event(PerfSwId(config))
            if PerfType(ptype) == PerfType.HARDWARE and config in PerfHwId._value2member_map_:
                return resolve_event(PerfHwId(config))
        except ValueError:
            pass
        return SampleEvent(ptype, config, f"raw event type {ptype} config {config:#x}")
    raise UsageError(f"not a perf event: {event!r} (a SoftwareEvent, HardwareEvent, name or (type, config))")


class SamplingGroup(LinkGroup):
    """The per-CPU links of one :func:`perf_event_sample`: a LinkGroup with a description."""

    kind = "perf_event group"

    def __init__(self, links: Iterable[Any], description: str) -> None:
        super().__init__(links)
        self.description = description

    def __repr__(self) -> str:
        return f"SamplingGroup({self.description}, {len(self)} links)"


def _cpu_list(cpus: list[int]) -> str:
    """``0-3,6``: the kernel's cpulist spelling."""
    runs: list[list[int]] = []
    for c in sorted(set(cpus)):
        if runs and runs[-1][1] == c - 1:
            runs[-1][1] = c
        else:
            runs.append([c, c])
    return ",".join(f"{lo}-{hi}" if lo != hi else str(lo) for lo, hi in runs)


# ------------------------------------------------------------------------------ checks
def _check_program(prog: ProgramArg) -> None:
    ptype = getattr(prog, "type", None)
    if ptype is not None and ptype != ProgType.PERF_EVENT:
        have = ptype.kernel_name if hasattr(ptype, "kernel_name") else str(ptype)
        raise UsageError(f"program {getattr(prog, 'name', '')!r} is a {have} program; sampling needs a "
                         'perf_event program (SEC("perf_event"))')
    _prog_fd(prog)


def _check_rate(period: int | None, freq: int | None) -> tuple[int, bool]:
    """(sample_period or sample_freq, is_freq)."""
    if (period is None) == (freq is None):
        raise UsageError("give exactly one of period= (events per sample) or freq= (samples per second)")
    value = period if period is not None else freq
    what = "period" if period is not None else "freq"
    if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
        raise UsageError(f"{what} must be a positive integer, not {value!r}")
    if freq is not None:
        limit = _perf.max_sample_rate()
        if limit is not None and freq > limit:
            raise UsageError(_rate_message(freq, limit))
    return value, freq is not None


def _rate_message(freq: int, limit: int | None) -> str:
    return (f"sample frequency {freq} Hz is above kernel.perf_event_max_sample_rate ({limit} Hz): "
            f"ask for at most {limit} Hz or raise {_perf.MAX_SAMPLE_RATE_PATH} (the kernel also "
            "lowers it by itself when sampling interrupts take too long)")


def _targets(cpu: int | Iterable[int] | None, pid: int | None) -> list[tuple[int, int]]:
    """(pid, cpu) pairs for perf_event_open."""
    if pid is not None and (not isinstance(pid, int) or pid < 0):
        raise UsageError(f"pid must be a process id (0: this process), not {pid!r}")
    if cpu is None:
        if pid is not None:
            return [(pid, -1)]
        return [(-1, c) for c in online_cpus()]
    cpus = [cpu] if isinstance(cpu, int) else list(cpu)
    if not cpus:
        raise UsageError("cpu= names no CPU")
    for c in cpus:
        if not isinstance(c, int) or c < 0:
            raise UsageError(f"cpu must be a CPU number (or None: every online CPU), not {c!r}")
    return [(-1 if pid is None else pid, c) for c in cpus]


# ---------------------------------------------------------------------------- opening
def _where(pid: int, cpu: int) -> str:
    if pid == -1:
        return f"CPU {cpu}"
    return f"pid {pid}" + (f" on CPU {cpu}" if cpu >= 0 else "")


def _open_error(exc: KernelError, ev: SampleEvent, pid: int, cpu: int, value: int, is_freq: bool,
                opened: int) -> BPFKitError:
    """The kernel's answer to perf_event_open, said in sampling terms."""
    where = _where(pid, cpu)
    err = exc.errno
    if err in (errno.ENOENT, errno.EOPNOTSUPP, errno.ENODEV) and ev.is_hardware:
        new: BPFKitError = NotSupportedError(
            f"hardware event {ev.name} on {where}",
            f"perf_event_open gave {errno_name(err)}: {_NO_PMU}; "
            "software events (cpu-clock, task-clock, page-faults ...) work without one")
    elif err == errno.ENOENT and ev.type == PerfType.SOFTWARE:
        new = NotSupportedError(f"software event {ev.name} (config {ev.config})",
                                "perf_event_open gave ENOENT: this kernel does not know it")
    elif err == errno.EINVAL and is_freq and (limit := _perf.max_sample_rate()) is not None and value > limit:
        new = UsageError(_rate_message(value, limit))
    elif err in (errno.EINVAL, errno.ENODEV) and pid == -1 and cpu not in online_cpus():
        new = UsageError(f"CPU {cpu} is not online (online: {','.join(map(str, online_cpus()))})")
    elif err == errno.ESRCH:
        new = _add(exc, f"no process {pid}")
    elif err in (errno.EACCES, errno.EPERM):
        new = _add(exc, f"kernel.perf_event_paranoid is {_perf.paranoid()}; CPU-wide events need CAP_PERFMON "
                        "(or CAP_SYS_ADMIN) above level 0")
    elif err in (errno.EMFILE, errno.ENFILE):
        new = _out_of_fds(exc, opened)
    else:
        new = exc
    if new is not exc:
        new.__cause__ = exc
    return new


def _add(exc: KernelError, text: str) -> KernelError:
    exc.message = f"{exc.message}: {text}"
    exc.args = (exc.message,)
    return exc


def _out_of_fds(exc: KernelError, opened: int) -> KernelError:
    return _add(exc, f"out of file descriptors after {opened} perf event(s) (one per CPU, each with "
                     "a bpf_link in link mode); raise the limit (ulimit -n)")


def _open(ev: SampleEvent, pid: int, cpu: int, value: int, is_freq: bool, inherit: bool, opened: int) -> FD:
    attr = _perf.new_attr()
    attr.type = ev.type
    attr.config = ev.config
    attr.sample_period = value  # a union with sample_freq: attr.freq says which
    flags = PerfAttrFlag.DISABLED  # enabled once the program is on it
    if is_freq:
        flags |= PerfAttrFlag.FREQ
    if inherit:
        flags |= PerfAttrFlag.INHERIT
    attr.flags = int(flags)
    try:
        return _perf.perf_event_open(attr, pid, cpu, what=f"{ev.name} on {_where(pid, cpu)}")
    except KernelError as exc:
        raise _open_error(exc, ev, pid, cpu, value, is_freq, opened) from None


def _attach_one(prog: ProgramArg, ev: SampleEvent, pid: int, cpu: int, value: int, is_freq: bool, inherit: bool,
                cookie: int, mode: AttachMode | str, opened: int) -> PerfEventLink | PerfEventIoctlLink:
    rate = f"{value} Hz" if is_freq else f"every {value}"
    description = f"perf_event {ev.name} {rate} on {_where(pid, cpu)}"
    fd = _open(ev, pid, cpu, value, is_freq, inherit, opened)
    try:
        lk = attach_perf_event(PerfEvent(fd, description), prog, cookie=cookie, mode=mode)  # closes fd on failure
    except KernelError as exc:
        if exc.errno in (errno.EMFILE, errno.ENFILE):
            raise _out_of_fds(exc, opened) from None
        raise
    try:
        _perf.enable(fd)  # the ioctl path enabled it already; enabling twice is harmless
    except BaseException:
        lk.close()
        raise
    return lk


def perf_event_sample(
    prog: ProgramArg,
    event: EventLike,
    *,
    period: int | None = None,
    freq: int | None = None,
    cpu: int | Iterable[int] | None = None,
    pid: int | None = None,
    inherit: bool = False,
    cookie: int = 0,
    mode: AttachMode | str = AttachMode.AUTO,
) -> Link:
    """Run the perf_event program ``prog`` every ``period`` counts of ``event`` or ``freq``
    times a second (exactly one of them).

    ``event``: a :data:`SoftwareEvent` / :data:`HardwareEvent`, a perf name (``"cpu-clock"``,
    ``"page-faults"``, ``"cycles"``) or a raw ``(type, config)``. Where: ``pid=None`` samples
    every online CPU (``cpu`` limits it to one CPU or a list); ``pid=N`` follows process N
    (0: this process) on every CPU, or only on ``cpu``; ``inherit`` extends a per-task event to
    children forked afterwards. ``cookie`` (link mode, 5.15+) is what bpf_get_attach_cookie()
    returns.

    Returns the link itself for one event, a :class:`SamplingGroup` (a LinkGroup: closes its
    members concurrently) of per-CPU links for several.
    All or nothing: when one CPU fails, the events already made are closed. Raises
    NotSupportedError naming the event and the CPU when no hardware PMU serves a hardware
    event, UsageError for a freq above kernel.perf_event_max_sample_rate.
    """
    what = "perf_event sampling"
    try:
        ev = resolve_event(event)
        what = f"sample {ev.name}"
        _check_program(prog)
        value, is_freq = _check_rate(period, freq)
        mode = AttachMode.of(mode)
        targets = _targets(cpu, pid)
        if inherit and pid is None:
            raise UsageError("inherit=True needs pid=: only a per-task event is inherited by children")
        group = _sample_group(prog, ev, value, is_freq, targets, inherit, cookie, mode)
        return group[0] if len(group) == 1 else group
    except BPFKitError as exc:
        raise exc.wrap(what)


def _sample_group(prog: ProgramArg, ev: SampleEvent, value: int, is_freq: bool, targets: list[tuple[int, int]],
                  inherit: bool, cookie: int, mode: AttachMode, section: str = "") -> SamplingGroup:
    """One event per (pid, cpu) of ``targets``, each with ``prog`` on it, as one group. All or
    nothing: when one fails, the events already made are closed."""
    links: list[Link] = []
    try:
        for p, c in targets:
            links.append(_attach_one(prog, ev, p, c, value, is_freq, inherit, cookie, mode, len(links)))
    except BaseException as exc:
        try:
            close_links(links)
        except Exception as cleanup:
            exc.add_note(f"also failed to close the events made before: {cleanup}")
        raise
    rate = f"{value} Hz" if is_freq else f"every {value}"
    pids = {p for p, _ in targets}
    cpus = [c for _, c in targets if c >= 0]
    where = f" on CPUs {_cpu_list(cpus)}" if cpus else ""
    who = f" for pid {pids.pop()}" if pids != {-1} else ""
    of = f" (section {section})" if section else ""
    return SamplingGroup(links, f"perf_event {ev.name} {rate}{where}{who}{of}")


# ----------------------------------------------------------------------- the kind's record
_UNIT_NS = {"s": 1_000_000_000, "ms": 1_000_000, "us": 1_000}


def _attach_probe(spec: ProbeSpec, prog: ProgramArg, o: AttachOptions) -> Link:
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


def _attach_section(prog: ProgramArg, target: SectionTarget, o: AttachOptions) -> Link:
    """``SEC("perf_event/type=T,config=C,frequency=F")``, ebpf_exporter's (exporter/perf_event.go):
    the event of perf_event_attr type T and config C sampled F times a second (attr.freq=1), one
    event for all threads (pid -1) on every online CPU (/sys/devices/system/cpu/online), the
    program on each: one :class:`SamplingGroup` owning them all, even for one CPU. ``pid``
    follows that process instead (one event, cpu -1), as the probe specs do."""
    if not target.target:  # attach_section refuses a bare SEC("perf_event") before this
        raise NotSupportedError("auto-attach of section 'perf_event'", KIND.never_auto["perf_event"])
    section = f"perf_event/{target.target}"
    want = parse_perf_event_section(section)  # ParseError naming the section and the item
    ev = resolve_event((want.type, want.config))
    try:
        _check_program(prog)
        value, is_freq = _check_rate(None, want.frequency)
        return _sample_group(prog, ev, value, is_freq, _targets(None, o.pid), False, o.cookie, AttachMode.of(o.mode),
                             section)
    except BPFKitError as exc:
        raise exc.wrap(f"section {section!r}: sample {ev.name}")


KIND = LinkKind(
    "sampling",
    sections=(Section("perf_event", "perf_event", _attach_section),),
    probes={kind: _attach_probe for kind in ("profile", "interval", "software", "hardware")},
    never_auto={"perf_event": ("perf_event programs sample counters chosen at run time; attach with "
                               "bpfkit.link.perf_event_sample (or a profile:/software:/hardware: probe spec), "
                               "or name the counter in the section as ebpf_exporter's objects do: "
                               "perf_event/type=T,config=C,frequency=F")},
    features=("prog_type_perf_event",),
)
