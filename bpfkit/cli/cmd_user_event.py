# SPDX-License-Identifier: Apache-2.0
"""``bpfkit user-event``: list, register, emit and delete Linux user_events (CONFIG_USER_EVENTS).

    bpfkit user-event list
    bpfkit user-event register myapp_req "u32 status; char[8] method; __rel_loc char[] path"
    bpfkit user-event emit myapp_req status=200 method=GET path=/index.html --wait 10
    bpfkit user-event delete myapp_req

``register`` makes a persistent event (USER_EVENT_REG_PERSIST, 6.5+, CAP_PERFMON) so it outlives
the command; ``--hold`` instead keeps it registered until Ctrl-C and prints each time a tracer
enables or disables it. ``emit`` takes the event's format from tracefs dynamic_events (or
``--format``), joins the event with it and writes one payload per ``--count``; the kernel
keeps a payload only while a tracer has the event enabled (``--wait`` waits for one).
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from typing import Any

from . import argtypes

DESCRIPTION = (
    "Linux user_events (CONFIG_USER_EVENTS, 6.4+): trace events that user processes define and "
    "write, traced like kernel tracepoints under user_events/. Fields use the kernel's syntax: "
    "'u32 a; char[16] b; __rel_loc char[] msg'."
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="action", metavar="ACTION")
    sub.required = True

    sub.add_parser("list", help="the user events this kernel has, their formats and tracers")

    reg = sub.add_parser("register", help="register an event (persistent unless --hold)")
    reg.add_argument("name", help="event name ([A-Za-z_][A-Za-z0-9_]*)")
    reg.add_argument("fields", nargs="*", default=[], help="fields, e.g. 'u32 a; char[16] b' (one or several words)")
    reg.add_argument("--hold", action="store_true",
                     help="stay registered until Ctrl-C, printing enable/disable changes (not persistent)")
    reg.add_argument("--multi-format", action="store_true",
                     help="USER_EVENT_REG_MULTI_FORMAT (6.10): one tracepoint per format, user_events_multi/NAME.<id>")

    emit = sub.add_parser("emit", help="write one event (values by position or NAME=VALUE)")
    emit.add_argument("name")
    emit.add_argument("values", nargs="*", default=[], help="field values; ints take 0x..., bytes fields hex:0a0b...")
    emit.add_argument("--format", dest="fields", metavar="FIELDS",
                      help="the event's fields, when dynamic_events cannot tell (multi-format events)")
    emit.add_argument("--wait", type=argtypes.seconds, default=0.0, metavar="SECONDS",
                      help="wait up to this long for a tracer to enable the event (default: no wait)")
    emit.add_argument("--count", type=argtypes.count, default=1, help="write this many times (default 1)")
    emit.add_argument("--multi-format", action="store_true", help="join the multi-format event of this format")

    dele = sub.add_parser("delete", help="delete an event (DIAG_IOCSDEL, retried while busy)")
    dele.add_argument("name")
    dele.add_argument("--timeout", type=argtypes.seconds, default=1.0, help="seconds to retry while EBUSY (default 1)")


def parse_values(fmt: Any, words: list[str]) -> dict[str, Any]:
    """Command-line words to field values: positional in field order, or NAME=VALUE."""
    from ..errors import UsageError

    values: dict[str, Any] = {}
    fields = {f.name: f for f in fmt.fields}
    position = 0
    for word in words:
        name, eq, text = word.partition("=")
        if eq and name in fields:
            field = fields[name]
        elif eq and name.isidentifier():
            raise UsageError(f"user event {fmt.name} has no field {name!r} (fields: {', '.join(fields) or 'none'})")
        else:
            if position >= len(fmt.fields):
                raise UsageError(f"user event {fmt.name}: more values than its {len(fmt.fields)} fields")
            field, text = fmt.fields[position], word
            position += 1
        values[field.name] = _convert(fmt.name, field, text)
    return values


def _convert(event: str, field: Any, text: str) -> Any:
    from ..errors import UsageError

    if field.dynamic or field.is_struct or "[" in field.type:
        if text.startswith("hex:"):
            try:
                return bytes.fromhex(text[4:])
            except ValueError:
                raise UsageError(f"user event {event}: field {field.name}: bad hex {text[4:]!r}") from None
        return text if field.is_string else text.encode()
    try:
        return int(text, 0)
    except ValueError:
        if field.type in ("char", "unsigned char") and len(text.encode()) == 1:
            return text
        raise UsageError(f"user event {event}: field {field.name} ({field.type}): {text!r} is not an integer") from None


def _list() -> int:
    from .. import user_events

    events = user_events.list_events()
    if not events:
        print("no user events")
        return 0
    width = max(len(f"{e.system}/{e.tracepoint}") for e in events)
    for e in events:
        users = f"  [{' '.join(e.users)}]" if e.users else ""
        fields = e.command[len(e.name):].strip() if e.format else "(format unknown)"
        print(f"{e.system + '/' + e.tracepoint:<{width}}  {fields or '(no fields)'}{users}")
    return 0


def _register(args: argparse.Namespace) -> int:
    from .. import user_events

    fmt = user_events.EventFormat(args.name, " ".join(args.fields))
    ev = user_events.UserEvent(fmt, persist=not args.hold, multi_format=args.multi_format)
    try:
        print(f"registered {ev.tracepoint}: {fmt.command}")
        if not args.hold:
            print(f"persistent: remove with 'bpfkit user-event delete {fmt.name}'")
            return 0
        print("holding it; Ctrl-C to unregister")
        state = None
        while True:
            if ev.enabled != state:
                state = ev.enabled
                print(f"{time.strftime('%H:%M:%S')} {'enabled' if state else 'disabled'}", flush=True)
            time.sleep(0.1)
    except KeyboardInterrupt:
        return 0
    finally:
        ev.close()


def _emit(args: argparse.Namespace) -> int:
    from .. import user_events
    from ..errors import NotFoundError, UsageError

    if args.fields is not None:
        fmt = user_events.EventFormat(args.name, args.fields)
    else:
        found = [e for e in user_events.list_events() if e.name == args.name and e.format]
        if not found:
            raise NotFoundError(f"emit user event {args.name}: no such event in dynamic_events (register it, or give --format)")
        formats = {e.format for e in found}
        if len(formats) > 1:
            raise UsageError(f"emit user event {args.name}: it has {len(formats)} formats; choose one with --format")
        first = found[0].format
        assert first is not None  # found keeps events with a format
        fmt = first
        args.multi_format = args.multi_format or found[0].system == user_events.USER_EVENTS_MULTI_SYSTEM
    values = parse_values(fmt, args.values)
    with user_events.UserEvent(fmt, multi_format=args.multi_format) as ev:
        payload = fmt.pack(**values)
        deadline = time.monotonic() + args.wait
        while not ev.enabled and time.monotonic() < deadline:
            time.sleep(0.05)
        written = sum(1 for _ in range(max(args.count, 0)) if ev.emit_raw(payload))
        if written:
            print(f"emitted {written} x {len(payload)} bytes to {ev.tracepoint}")
        else:
            print(f"not emitted: nothing traces {ev.tracepoint} (the kernel drops events no tracer enabled)")
    return 0


def _delete(args: argparse.Namespace) -> int:
    from .. import user_events

    user_events.delete(args.name, timeout=args.timeout)
    print(f"deleted user event {args.name}")
    return 0


def run(args: argparse.Namespace) -> int:
    actions: dict[str, Callable[[], int]] = {
        "list": _list, "register": lambda: _register(args), "emit": lambda: _emit(args), "delete": lambda: _delete(args)}
    return actions[args.action]()
