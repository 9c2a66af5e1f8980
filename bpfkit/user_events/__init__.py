# SPDX-License-Identifier: Apache-2.0
"""user_events: trace events that this Python process defines and emits.

Modules: ``fields`` (field declarations and the annotations naming them), ``format`` (an
event's format and payload packing), ``event`` (registering, emitting, attaching),
``registry`` (the system's user events: listing, deleting).

Concepts (Documentation/trace/user_events.rst, kernel/trace/trace_events_user.c; Linux 6.4+
with CONFIG_USER_EVENTS):

* A *user event* is a trace event made at run time by a process: a name and a list of fields
  (``request u32 status; char[16] method; __rel_loc char[] path``). It appears in tracefs as
  ``events/user_events/<name>`` (``user_events_multi/<name>.<hex id>`` for multi-format events),
  so ftrace, perf and BPF links attach to it like to a kernel tracepoint.
* *Registering* it hands the kernel an address and a bit in this process's memory: the kernel
  sets the bit while any tracer has the event enabled. :attr:`UserEvent.enabled` reads that
  word: no system call, so an untraced event costs one memory read per call site.
* *Emitting* is one ``writev()`` of the write index and the payload: the fields packed in
  order, without padding. Dynamic fields (``__rel_loc``, ``__data_loc``) are 32-bit
  ``size << 16 | offset`` words pointing at data after the fixed part.
* *Unregistering* stops the bit updates; *deleting* removes the event from the system, which
  the kernel refuses (EBUSY) while anything references it. Since 6.5 an event is deleted by
  the kernel once its last reference goes, unless it was registered with ``persist=True``.

::

    from bpfkit import user_events as ue

    with ue.UserEvent("request u32 status; char[8] method; __rel_loc char[] path") as ev:
        if ev.enabled:                         # a tracer is attached
            ev.emit(200, "GET", "/index.html")

    @dataclasses.dataclass
    class Request:
        status: ue.U32
        method: ue.Char(8)
        path: str                              # -> __rel_loc char[]
    ev = ue.UserEvent(Request)                 # event "Request"; ev.emit(Request(...))

BPF programs attach through :meth:`UserEvent.attach` (a tracepoint link on the event's trace
event). That link enables the event (the bit turns on) and perf records it, but mainline
kernels do not run BPF tracepoint programs for user events: the BPF hook of user_events was
removed in 5.18 (commit "tracing/user_events: Remove eBPF interfaces") and never came back, so
user_event_perf() hands the record to perf_trace_buf_submit() -> perf_tp_event() without
trace_call_bpf(). A BPF program sees the payload by probing perf_tp_event() (see
bpf/user_events_tap.bpf.c and docs/user_events.md).
"""

from __future__ import annotations

from .._kernel.user_events import TRACE_ENTRY_SIZE, USER_EVENTS_MULTI_SYSTEM, USER_EVENTS_SYSTEM, RegFlag
from .event import UserEvent, UserEventsFile, available
from .fields import S8, S16, S32, S64, U8, U16, U32, U64, Blob, Bytes, Char, Field, FieldType, String
from .format import EventFormat, parse_format
from .registry import RegisteredEvent, delete, list_events

__all__ = [
    "Field",
    "EventFormat",
    "UserEvent",
    "UserEventsFile",
    "RegisteredEvent",
    "FieldType",
    "U8", "U16", "U32", "U64", "S8", "S16", "S32", "S64", "Char", "Bytes", "String", "Blob",
    "RegFlag",
    "available",
    "parse_format",
    "list_events",
    "delete",
    "USER_EVENTS_SYSTEM",
    "USER_EVENTS_MULTI_SYSTEM",
    "TRACE_ENTRY_SIZE",
]
