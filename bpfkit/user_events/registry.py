# SPDX-License-Identifier: Apache-2.0
"""The system's user events: listing them (user_events_status) and deleting them."""

from __future__ import annotations

import dataclasses
import os
import re
import time

from .._kernel import tracefs as _tracefs
from .._kernel import user_events as _ue
from .._kernel.user_events import (
    TRACE_ENTRY_SIZE,
    USER_EVENTS_MULTI_SYSTEM,
    USER_EVENTS_SYSTEM,
)
from ..errors import BusyError, NotFoundError, ParseError
from .fields import _IDENT
from .format import EventFormat


def _find_multi_tracepoint(fmt: EventFormat) -> str:
    """The ``<name>.<hex>`` trace event under user_events_multi whose fields match ``fmt``."""
    pattern = re.compile(rf"^{re.escape(fmt.name)}\.[0-9a-fA-F]+$")
    base = os.path.join(_tracefs.tracefs_root(), "events", USER_EVENTS_MULTI_SYSTEM)
    try:
        names = sorted(n for n in os.listdir(base) if pattern.match(n))
    except FileNotFoundError:
        names = []
    want = [(f.name, f.offset + TRACE_ENTRY_SIZE, f.size) for f in fmt.fields]
    for n in names:
        if _format_fields(USER_EVENTS_MULTI_SYSTEM, n) == want:
            return n
    raise NotFoundError(f"no trace event {USER_EVENTS_MULTI_SYSTEM}/{fmt.name}.<id> with the fields of {fmt.command!r}")


_FORMAT_FIELD = re.compile(r"field:(?P<decl>[^;]*);\s*offset:(?P<off>\d+);\s*size:(?P<size>\d+);")


def _format_fields(system: str, name: str) -> list[tuple[str, int, int]]:
    """(name, offset, size) of the non-common fields in tracefs ``format``."""
    try:
        text = _tracefs.read_file(f"events/{system}/{name}/format")
    except FileNotFoundError:
        return []
    found = []
    for m in _FORMAT_FIELD.finditer(text):
        decl = m["decl"].strip()
        fname = re.sub(r"\[.*$", "", decl.split()[-1])
        if fname.startswith("common_"):
            continue
        found.append((fname, int(m["off"]), int(m["size"])))
    return found


# ------------------------------------------------------------------------------ system-wide
@dataclasses.dataclass(frozen=True)
class RegisteredEvent:
    """A user event the kernel has (any process's)."""

    system: str
    tracepoint: str  # trace event name under events/<system>/
    name: str  # the registered name
    format: EventFormat | None  # from dynamic_events (None when it cannot be matched)
    users: tuple[str, ...]  # who has it enabled: "ftrace", "perf", "other"

    @property
    def command(self) -> str:
        return self.format.command if self.format else self.name


def list_events() -> list[RegisteredEvent]:
    """Every user event, from tracefs user_events_status, with formats from dynamic_events."""
    formats: dict[str, list[EventFormat]] = {}
    for line in _ue.read_dynamic_events():
        try:
            parsed = EventFormat.parse(line)
        except ParseError:
            continue
        formats.setdefault(parsed.name, []).append(parsed)
    root = _tracefs.tracefs_root()
    found = []
    for st in _ue.read_status():
        single = os.path.isdir(os.path.join(root, "events", USER_EVENTS_SYSTEM, st.name))
        system = USER_EVENTS_SYSTEM if single else USER_EVENTS_MULTI_SYSTEM
        name = st.name if single else st.name.rsplit(".", 1)[0]
        fmt: EventFormat | None = None
        candidates = formats.get(name, [])
        if single or len(candidates) == 1:
            fmt = candidates[0] if candidates else None
        else:
            have = _format_fields(system, st.name)
            for c in candidates:
                if [(f.name, f.offset + TRACE_ENTRY_SIZE, f.size) for f in c.fields] == have:
                    fmt = c
        found.append(RegisteredEvent(system, st.name, name, fmt, st.users))
    return sorted(found, key=lambda e: (e.name, e.tracepoint))


def delete(name: str, timeout: float = 1.0, missing_ok: bool = False) -> bool:
    """Delete user event ``name`` (all its formats): DIAG_IOCSDEL on a fresh file, retried while
    the kernel answers EBUSY, for up to ``timeout`` seconds. Returns False when there was no such
    event and ``missing_ok``; raises NotFoundError otherwise, BusyError if it stays referenced."""
    if not _IDENT.match(name):
        raise ParseError(f"user event name {name!r} must match [A-Za-z_][A-Za-z0-9_]*")
    deadline = time.monotonic() + timeout
    pause = 0.001
    with _ue.open_data() as fd:
        while True:
            try:
                _ue.delete(fd, name)
                return True
            except NotFoundError:
                if missing_ok:
                    return False
                raise
            except BusyError as exc:
                if time.monotonic() >= deadline:
                    users = [f"{s.name}: {' '.join(s.users)}" for s in _ue.read_status() if s.name.split(".")[0] == name and s.users]
                    why = f" (enabled by {'; '.join(users)})" if users else " (another registration still holds it)"
                    raise exc.wrap(f"delete user event {name} after {timeout:g} s{why}")
            time.sleep(pause)
            pause = min(pause * 2, 0.05)
