# SPDX-License-Identifier: Apache-2.0
"""k/uprobes made through tracefs (kprobe_events, uprobe_events): naming, ownership, cleanup.

Unlike a PMU probe, which lives exactly as long as its perf event fd, a probe written into
``kprobe_events``/``uprobe_events`` is a system-wide trace event that outlives the process that
made it unless someone removes it. bpfkit therefore:

* names each probe's group ``bpfkit_<pid>_<start>_<8 hex digits>`` (one group per probe, as
  cilium/ebpf does, so any number of probes on one symbol can coexist), so the owning process
  can be read back from the name: its PID in the initial PID namespace (tracefs is shared by
  every container on the machine) and its start time, so a reused PID is not taken for the
  owner (bpfkit._kernel.owner; pid 0 when it could not be found out, start 0 when unknown);
* removes the probe when its link or perf event closes, when an attach fails half-way, and at
  interpreter exit (a finalizer that runs at exit, in the owner's process only: a forked child
  never removes its parent's probes);
* offers :func:`stale_probes` / :func:`remove_stale_probes` (``bpfkit gc``) for probes whose
  owner died without cleaning up (SIGKILL, a crash).

The kernel refuses to remove a trace event that a perf event still uses (EBUSY), so a probe
behind a pinned link stays until the pin goes away; ``bpfkit gc`` reports such probes as busy.
"""

from __future__ import annotations

import atexit
import dataclasses
import os
import re
import threading
import weakref
from typing import Any, Protocol

from .._kernel import owner as _owner
from .._kernel import tracefs as _tracefs
from ..errors import BPFKitError, BusyError, NotFoundError, NotSupportedError, UsageError

__all__ = [
    "GROUP_PREFIX",
    "TracefsProbe",
    "ProbeOwnerInfo",
    "GcResult",
    "new_group",
    "parse_group",
    "event_name",
    "bpfkit_probes",
    "stale_probes",
    "remove_stale_probes",
]

GROUP_PREFIX = "bpfkit"
# bpfkit_<pid>_<start>_<tag>; groups of older bpfkit versions lack <start>.
_GROUP = re.compile(rf"^{GROUP_PREFIX}_(?P<pid>\d+)(?:_(?P<start>\d+))?_(?P<tag>[0-9a-f]{{8}})$")
# The kernel limits group and event names to MAX_EVENT_NAME_LEN - 1 = 63 characters.
_MAX_NAME = 63
_EVENT_MAX = 48


def new_group(pid: int | None = None, start: int | None = None) -> str:
    """A fresh group name ``bpfkit_<pid>_<start>_<random>`` owned by the process ``pid`` (in the
    initial PID namespace) started at ``start`` (default: this process)."""
    if pid is None:
        pid = _owner.global_pid() or 0
        start = _owner.own_start_time() if start is None else start
    # os.urandom(4).hex() is secrets.token_hex(4), without importing secrets (hashlib, random)
    return f"{GROUP_PREFIX}_{pid}_{start or 0}_{os.urandom(4).hex()}"


def parse_owner(group: str) -> tuple[int, int | None] | None:
    """(pid, start time or None) of a bpfkit group name; None for any other group."""
    m = _GROUP.match(group)
    if not m:
        return None
    return int(m["pid"]), (int(m["start"]) if m["start"] is not None else None)


def parse_group(group: str) -> int | None:
    """The owner pid encoded in a bpfkit group name, or None for any other group."""
    owner = parse_owner(group)
    return owner[0] if owner else None


def event_name(hint: str) -> str:
    """A valid trace event name from a symbol or target: runs of characters other than
    ``[A-Za-z0-9]`` become ``_``, a leading digit gets a ``_`` before it, capped at 48."""
    name = re.sub(r"[^A-Za-z0-9]+", "_", hint).strip("_") or "probe"
    if name[0].isdigit():
        name = "_" + name
    return name[:_EVENT_MAX]


def _remove(kind: str, group: str, event: str, owner: int) -> None:
    """Finalizer body: remove the probe if this process still is its owner."""
    if os.getpid() != owner:
        return
    try:
        _tracefs.remove_probe_event(kind, group, event)
    except (BPFKitError, OSError):
        pass


class TracefsProbe:
    """One probe event in kprobe_events/uprobe_events, removed by :meth:`remove`.

    ``id`` is the trace event id a PERF_TYPE_TRACEPOINT perf event takes as its config.
    """

    def __init__(self, kind: str, group: str, event: str, event_id: int, line: str) -> None:
        self.kind = kind
        self.group = group
        self.event = event
        self.id = event_id
        self.line = line
        self.owner = os.getpid()
        self._finalizer = weakref.finalize(self, _remove, kind, group, event, self.owner)

    @classmethod
    def create(cls, kind: str, target: str, *, retprobe: bool = False, maxactive: int = 0, hint: str = "") -> TracefsProbe:
        """Write ``p|r[MAXACTIVE]:<group>/<event> <target>`` and read the new event's id.

        ``target`` is ``[MOD:]SYM[+offs]`` for kprobes, ``PATH:0xOFFSET[(0xREF_CTR)]`` for
        uprobes. Kernel errors keep their errno (ENOENT/EINVAL: unknown symbol).
        """
        if maxactive and (kind != "kprobe" or not retprobe):
            raise UsageError("maxactive applies to kretprobes only")
        group = new_group()
        event = event_name(hint or target)
        _tracefs.validate_name("group", group)
        _tracefs.validate_name("name", event)
        kind_char = ("r" + (str(maxactive) if maxactive else "")) if retprobe else "p"
        line = f"{kind_char}:{group}/{event} {target}"
        try:
            # Inside the try: a KeyboardInterrupt (Ctrl-C, SIGTERM in the CLI) taken after the
            # kernel made the event, before this returns, must not leave it in tracefs.
            _tracefs.add_probe_event(kind, line)
            try:
                event_id = _tracefs.event_id(group, event)
            except NotFoundError:
                if maxactive:
                    # Before 4.12 (696ced4fb1d7) a maxactive kretprobe was created under an
                    # auto-generated name kprobes/r_<sym>_0 instead of ours.
                    sym = target.split("+", 1)[0]
                    try:
                        _tracefs.remove_probe_event(kind, "kprobes", event_name(f"r_{sym}_0"))
                    except BPFKitError:
                        pass
                    raise NotSupportedError("kretprobe maxactive", "the kernel ignored the event name", "4.12") from None
                raise
        except BaseException:
            _remove(kind, group, event, os.getpid())
            raise
        return cls(kind, group, event, event_id, line)

    @property
    def removed(self) -> bool:
        return not self._finalizer.alive

    def remove(self) -> None:
        """Remove the probe from tracefs (idempotent). BusyError while a perf event uses it."""
        if not self._finalizer.alive:
            return
        if os.getpid() != self.owner:
            self._finalizer.detach()
            return
        try:
            _tracefs.remove_probe_event(self.kind, self.group, self.event)
        except NotFoundError:
            pass  # removed by someone else (bpfkit gc, a human)
        self._finalizer.detach()

    def keep(self) -> None:
        """Leave the probe in tracefs (a pinned link uses it); ``bpfkit gc`` removes it later."""
        self._finalizer.detach()

    def __repr__(self) -> str:
        state = "removed" if self.removed else f"id={self.id}"
        return f"TracefsProbe({self.kind} {self.group}/{self.event}, {state})"


# ------------------------------------------------------------- cleanup at interpreter exit
class _Closable(Protocol):
    def close(self) -> Any: ...


_owners: dict[int, weakref.ref[Any]] = {}
_owners_lock = threading.Lock()


def register_owner(obj: _Closable) -> None:
    """Have ``obj.close()`` called at interpreter exit if it is still open then (objects that
    hold tracefs probes: the probe can only be removed once the perf event and link close)."""
    with _owners_lock:
        _owners[id(obj)] = weakref.ref(obj)


def unregister_owner(obj: object) -> None:
    with _owners_lock:
        _owners.pop(id(obj), None)


@atexit.register
def _close_owners() -> None:
    with _owners_lock:
        refs = list(_owners.values())
        _owners.clear()
    for ref in reversed(refs):
        obj = ref()
        if obj is None:
            continue
        try:
            obj.close()
        except Exception:
            pass


# ------------------------------------------------------------------------ garbage collection
@dataclasses.dataclass(frozen=True)
class ProbeOwnerInfo:
    """A bpfkit probe found in kprobe_events/uprobe_events, with its owner's state."""

    event: _tracefs.ProbeEvent
    pid: int  # in the initial PID namespace; 0: unknown
    alive: bool  # True also when it cannot be told (see ``known``): such probes are never stale
    start: int | None = None  # the owner's start time (ticks after boot); None/0: not recorded
    known: bool = True  # False: this process cannot tell (its /proc numbers PIDs otherwise)

    @property
    def name(self) -> str:
        return f"{self.event.group}/{self.event.event}"

    @property
    def owner(self) -> str:
        """``pid 123`` / ``pid 123 started 4567``, for messages."""
        if not self.pid:
            return "owner unknown"
        return f"pid {self.pid}" + (f" started {self.start}" if self.start else "")


@dataclasses.dataclass(frozen=True)
class GcResult:
    probe: ProbeOwnerInfo
    removed: bool
    reason: str = ""  # why it was kept: "busy (a pinned link uses it)", ...


def bpfkit_probes() -> list[ProbeOwnerInfo]:
    """Every probe in kprobe_events and uprobe_events whose group bpfkit made."""
    found = []
    for kind in _tracefs.PROBE_KINDS:
        for ev in _tracefs.list_probe_events(kind):
            owner = parse_owner(ev.group)
            if owner is not None:
                pid, start = owner
                alive = _owner.owner_alive(pid, start)
                found.append(ProbeOwnerInfo(ev, pid, alive is not False, start, alive is not None))
    return found


def stale_probes() -> list[ProbeOwnerInfo]:
    """bpfkit probes whose owning process no longer runs: its PID is gone or now names a process
    started at another time (PID reuse). Probes whose owner this process cannot judge (it runs
    in a PID namespace with its own /proc; the owner's PID was unknown) are never stale."""
    return [p for p in bpfkit_probes() if not p.alive]


def remove_stale_probes(dry_run: bool = False) -> list[GcResult]:
    """Remove the probes of dead bpfkit processes; a probe still used by a perf event (a pinned
    link) is kept and reported busy."""
    results = []
    for probe in stale_probes():
        if dry_run:
            results.append(GcResult(probe, False, "dry run"))
            continue
        try:
            _tracefs.remove_probe_event(probe.event.kind, probe.event.group, probe.event.event)
        except NotFoundError:
            results.append(GcResult(probe, False, "already gone"))
        except BusyError:
            results.append(GcResult(probe, False, "busy: a perf event still uses it (a pinned link?)"))
        else:
            results.append(GcResult(probe, True))
    return results
