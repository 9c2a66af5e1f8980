# SPDX-License-Identifier: Apache-2.0
"""Registering, emitting and attaching one user event (user_events_data, the enable bit)."""

from __future__ import annotations

import errno
import struct
import weakref
from typing import TYPE_CHECKING, Any

from .._closing import ClosesOnExit
from .._kernel import tracefs as _tracefs
from .._kernel import user_events as _ue
from .._kernel.fd import FD
from .._kernel.user_events import (
    USER_EVENTS_MULTI_SYSTEM,
    USER_EVENTS_SYSTEM,
    Enabler,
    RegFlag,
)
from .._protocols import ProgramArg
from ..errors import BPFKitError, NotFoundError, UsageError
from .format import EventFormat
from .registry import _find_multi_tracepoint, delete

if TYPE_CHECKING:
    from ..link import Link


# ------------------------------------------------------------------------------ the kernel side
def available() -> bool:
    """Whether this kernel offers user_events (tracefs ``user_events_data``)."""
    return _ue.available()


class UserEventsFile(ClosesOnExit):
    """One open ``user_events_data``: register several events on it, each with its own write
    index. A registration holds a reference to its event until the file is closed, so an event
    registered here can only be deleted after :meth:`close`."""

    def __init__(self) -> None:
        self.fd: FD = _ue.open_data()
        self._events: weakref.WeakSet[UserEvent] = weakref.WeakSet()

    def register(self, spec: Any, **kwargs: Any) -> UserEvent:
        return UserEvent(spec, file=self, **kwargs)

    @property
    def closed(self) -> bool:
        return self.fd.closed

    def close(self) -> None:
        """Unregister every event registered here, then close the file."""
        for ev in list(self._events):
            ev.close()
        self.fd.close()



# The enable words of events that could not be unregistered: the kernel may still write into
# them, so their memory must never be freed.
_PINNED_WORDS: list[_ue.EnableWord] = []


def _release(fd: FD, own_fd: bool, word: _ue.EnableWord, enabler: Enabler, registered: list[bool]) -> None:
    """Finalizer and close(): unregister the enabler before the word's memory can go."""
    if registered[0]:
        try:
            if fd.closed:
                with _ue.open_data() as other:
                    _ue.unregister(other, enabler)
            else:
                _ue.unregister(fd, enabler)
        except NotFoundError:
            pass  # already gone (execve cleared it, or it was never made)
        except BPFKitError:
            _PINNED_WORDS.append(word)
        registered[0] = False
    if own_fd:
        fd.close()


class UserEvent(ClosesOnExit):
    """A registered user event: :attr:`enabled`, :meth:`emit`, :meth:`attach`, :meth:`close`,
    :meth:`delete`.

    ``spec`` is an :class:`EventFormat`, a command string (``"name u32 a; char[16] b"``), a
    dataclass or an annotated function. ``persist=True`` (6.5, needs CAP_PERFMON) keeps the event
    after this process lets go; ``multi_format=True`` (6.10) lets events of one name differ in
    format: each format gets its own tracepoint ``user_events_multi/<name>.<hex id>``.
    ``file`` shares one :class:`UserEventsFile` between events (default: one file per event).
    """

    def __init__(self, spec: Any, *, name: str | None = None, persist: bool = False,
                 multi_format: bool = False, file: UserEventsFile | None = None) -> None:
        self.format = EventFormat.of(spec, name)
        self.flags = RegFlag(0) | (RegFlag.PERSIST if persist else 0) | (RegFlag.MULTI_FORMAT if multi_format else 0)
        self._file = file
        self._own_fd = file is None
        fd = _ue.open_data() if file is None else file.fd
        # The word the kernel sets bit 0 of while the event is enabled, owned by this object
        # (and by _release), so its address stays valid for as long as the registration.
        self._word = _ue.EnableWord()
        self._enabler = self._word.enabler
        self._registered = [False]
        self._fd = fd
        self._tp_name: str | None = None
        try:
            index = _ue.register(fd, self.format.command, self._enabler, int(self.flags))
        except BPFKitError as exc:
            if self._own_fd:
                fd.close()
            raise exc.wrap(f"register user event {self.format.name}")
        except BaseException:
            if self._own_fd:
                fd.close()
            raise
        self._registered[0] = True
        self.write_index = index
        self._index = struct.pack("<i", index)
        self._finalizer = weakref.finalize(self, _release, fd, self._own_fd, self._word, self._enabler, self._registered)
        if file is not None:
            file._events.add(self)

    # -------------------------------------------------------------- state
    @property
    def name(self) -> str:
        return self.format.name

    @property
    def enabled(self) -> bool:
        """Whether any tracer has the event enabled: one read of the word the kernel updates."""
        return self._word.enabled

    @property
    def registered(self) -> bool:
        return self._registered[0]

    @property
    def closed(self) -> bool:
        return not self._finalizer.alive

    @property
    def system(self) -> str:
        """The trace event group: ``user_events``, or ``user_events_multi`` for multi-format."""
        return USER_EVENTS_MULTI_SYSTEM if self.flags & RegFlag.MULTI_FORMAT else USER_EVENTS_SYSTEM

    @property
    def tracepoint_name(self) -> str:
        """The trace event's name: the event name, or ``<name>.<hex id>`` for a multi-format
        event (found by matching this format against tracefs ``format`` files)."""
        if self._tp_name is None:
            if self.flags & RegFlag.MULTI_FORMAT:
                self._tp_name = _find_multi_tracepoint(self.format)
            else:
                self._tp_name = self.name
        return self._tp_name

    @property
    def tracepoint(self) -> str:
        """``system/name`` of the trace event, as link.tracepoint() and perf take it."""
        return f"{self.system}/{self.tracepoint_name}"

    @property
    def id(self) -> int:
        """The trace event id (tracefs ``events/<system>/<name>/id``): PERF_TYPE_TRACEPOINT's
        config, and the ``type`` of the records the kernel makes for this event."""
        if not self.flags & RegFlag.MULTI_FORMAT:
            return _tracefs.event_id(self.system, self.tracepoint_name)
        # "<name>.<hex id>" is no valid name for tracefs.event_id(): read the file directly.
        path = f"events/{self.system}/{self.tracepoint_name}/id"
        try:
            return int(_tracefs.read_file(path).strip())
        except FileNotFoundError:
            raise NotFoundError(f"trace event {self.tracepoint} not found ({path} does not exist)") from None

    # -------------------------------------------------------------- emitting
    def emit(self, *args: Any, **kwargs: Any) -> bool:
        """Emit one event if a tracer has it enabled; returns whether it was written. Values
        come as positional/keyword arguments by field, or one dataclass instance or dict.
        Nothing is packed while the event is disabled."""
        if not self._word.view[0] & 1:  # .enabled without a call: the check on every emit
            return False
        return self._write(self.format.pack(*args, **kwargs))

    def emit_raw(self, *parts: bytes | bytearray | memoryview, force: bool = False) -> bool:
        """Write an already packed payload (several buffers are gathered, as writev does).

        ``force`` skips the enabled-bit check (after unregister(), the bit no longer follows the
        tracers); the kernel still drops a write to a disabled event."""
        if not force and not self._word.view[0] & 1:
            return False
        return self._write(*parts)

    def _write(self, *parts: bytes | bytearray | memoryview) -> bool:
        if self.closed:
            raise UsageError(f"emit user event {self.name}: the event is closed")
        try:
            _ue.write(self._fd, self._index, parts)
        except BPFKitError as exc:
            # EBADF: the event is not enabled (user_events_write_core(); a tracer went away
            # between the bit check and the write). Checked after the size (EINVAL).
            if getattr(exc, "errno", 0) == errno.EBADF:
                return False
            raise exc.wrap(f"emit user event {self.name}")
        return True

    # -------------------------------------------------------------- tracers
    def attach(self, prog: ProgramArg, *, pid: int | None = None, **kwargs: Any) -> Link:
        """Attach a tracepoint program to this event's trace event (a link: close it to detach).

        The link enables the event. By default its perf event is on CPU 0 for all tasks (as
        link.tracepoint() makes it); ``pid`` makes it follow that thread on every CPU instead
        (perf_event_open takes a thread id: ``os.getpid()`` is the main thread).
        Mainline kernels do not run the program for user events (see the module docstring):
        a kprobe on perf_tp_event() sees the payloads, on the CPUs where this perf event is.
        ``kwargs`` go to the link (``cookie=``, ``mode=``).
        """
        from .. import link

        if pid is None and not self.flags & RegFlag.MULTI_FORMAT:
            return link.tracepoint(self.system, self.tracepoint_name, prog, **kwargs)
        # A pid, or a multi-format name (its '.' fails link.tracepoint's name check): open the
        # perf event on the id here and attach through the same perf event code.
        what = f"tracepoint {self.tracepoint}" + (f" pid {pid}" if pid is not None else "")
        try:
            fd = _tracefs.open_trace_event(self.id, -1 if pid is None else pid, what)
            return link.attach_perf_event(link.PerfEvent(fd, what), prog, **kwargs)
        except BPFKitError as exc:
            raise exc.wrap(f"attach {what}")

    def status(self) -> _ue.Status | None:
        """This event's line of user_events_status (who has it enabled), None if absent."""
        for st in _ue.read_status():
            if st.name == self.tracepoint_name:
                return st
        return None

    # -------------------------------------------------------------- lifetime
    def unregister(self) -> None:
        """DIAG_IOCSUNREG: stop the enabled-bit updates (the bit is cleared). The write index
        stays usable until :meth:`close`."""
        if not self._registered[0]:
            return
        try:
            _ue.unregister(self._fd, self._enabler)
        except NotFoundError:
            pass
        except BPFKitError as exc:
            raise exc.wrap(f"unregister user event {self.name}")
        self._registered[0] = False

    def close(self) -> None:
        """Unregister and close this event's file (its reference to the event goes with it).
        Idempotent."""
        if self._finalizer.alive:
            self._finalizer()

    def delete(self, timeout: float = 1.0) -> None:
        """Close, then remove the event from the system (DIAG_IOCSDEL, retried while EBUSY up
        to ``timeout`` seconds: the kernel drops references in a work item). An event that the
        kernel deleted by itself (no ``persist``, 6.5+) counts as deleted."""
        if self._file is not None and not self._file.closed:
            raise UsageError(
                f"delete user event {self.name}: it is registered on a shared UserEventsFile, "
                "which holds a reference until the file is closed"
            )
        self.close()
        delete(self.name, timeout=timeout, missing_ok=True)


    def __repr__(self) -> str:
        state = "closed" if self.closed else ("enabled" if self.enabled else "disabled")
        return f"UserEvent({self.format.command!r}, index={self.write_index}, {state})"
