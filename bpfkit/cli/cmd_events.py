# SPDX-License-Identifier: Apache-2.0
"""``bpfkit events``: print what BPF programs send through a pinned ring buffer or perf array.

    bpfkit events /sys/fs/bpf/opensnoop/events                       # hex records
    bpfkit events /sys/fs/bpf/opensnoop/events --btf opensnoop.bpf.o --event-type event --json

The same printing serves ``bpfkit attach --events MAP[:TYPE]`` (:class:`EventStream`). Records
print hex unless a struct of the object's BTF, or else of its DWARF, describes them; a record
shorter than its struct prints the fields it holds (execsnoop's); ``--char-arrays`` says how
char arrays print; lost counts go to stderr.
"""

from __future__ import annotations

import argparse
import os
import select
import sys
import threading
from collections.abc import Callable
from typing import Any

from . import argtypes
from .stop_signals import StopSignals

DESCRIPTION = """\
Read a BPF_MAP_TYPE_RINGBUF or PERF_EVENT_ARRAY map pinned in bpffs and print each record: hex by
default, decoded through a BTF struct with --btf OBJ --event-type NAME, one JSON object a line with
--json. Runs until Ctrl-C, --count records or --duration seconds.
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("pinned", metavar="PINNED_MAP", help="path of the map in bpffs")
    parser.add_argument("--btf", metavar="OBJ", help="object file whose BTF describes the records")
    parser.add_argument("--event-type", metavar="STRUCT", default="event",
                        help="struct of one record, from the object's BTF or else its DWARF (default: event)")
    add_char_arrays_argument(parser)
    parser.add_argument("--json", action="store_true", help="one JSON object per record")
    parser.add_argument("--count", type=argtypes.count, default=0, help="stop after N records")
    parser.add_argument("--duration", type=argtypes.seconds, default=0.0, help="stop after S seconds")


def add_char_arrays_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--char-arrays", metavar="MODE|FIELD=MODE", action="append", default=[],
                        help="how decoded char arrays print: text (up to the first NUL; the default), strings (every "
                             "NUL-separated string, as execsnoop's args) or bytes (hex); FIELD=MODE for one field "
                             "(args=strings, fname.pathes=bytes); repeatable")


def char_arrays(values: list[str]) -> dict[str, str] | str | None:
    """--char-arrays as bpfkit.btf.records reads it: a mode for all, and modes by field."""
    from ..btf.records import CHAR_MODES
    from ..errors import UsageError

    default, by_field = None, {}
    for value in values:
        field, eq, mode = value.rpartition("=")
        if mode not in CHAR_MODES or (eq and not field):
            raise UsageError(f"--char-arrays {value}: give MODE or FIELD=MODE, MODE one of {', '.join(CHAR_MODES)}")
        if eq:
            by_field[field] = mode
        else:
            default = mode
    if not by_field:
        return default
    if default is not None:
        by_field.setdefault("", default)
    return by_field


def record_format_of(btf: Any, type_name: str, what: str, *, named: bool) -> Any:
    """The RecordFormat of struct ``type_name`` from the object's BTF or DWARF. Not there, or
    not decodable: a UsageError naming both places when the user ``named`` it, else None
    (records print hex) and a note on stderr saying why."""
    from ..errors import BPFKitError, NotFoundError, UsageError
    from ..events import RecordFormat

    try:
        return RecordFormat.from_btf(btf, type_name)
    except BPFKitError as exc:
        if named:
            raise (UsageError(f"{what}: {exc}") if isinstance(exc, NotFoundError) else exc.wrap(what)) from None
        print(f"bpfkit: note: {what}: {exc}: printing hex (MAP:TYPE names the record type)", file=sys.stderr)
    return None


class EventStream:
    """Readers for some ring buffer / perf array maps, each record printed by a RecordPrinter.

    ``run(stop)`` polls until ``stop`` is set (or ``count`` records were printed)."""

    def __init__(self, maps: list[tuple[Any, Any]], *, json_lines: bool = False, count: int = 0,
                 make_sink: Callable[[Any, Any], Any] | None = None, char_arrays: Any = None) -> None:
        """``maps``: (map, RecordFormat or None) pairs; ``make_sink(map, fmt)``: what takes each
        record (``sink(data, cpu)``, ``sink.lost(cpu, n)``, ``sink.count``) instead of a printer;
        ``char_arrays``: how char arrays print (bpfkit.btf.records)."""
        from ..errors import UsageError
        from ..events import PerfBuffer, RingBuffer
        from .output import RecordPrinter, jsonable

        class Printer(RecordPrinter):
            """Records decoded whole or cut short (RecordFormat.fields), char arrays as asked."""

            def decode(self, data: bytes) -> dict[str, Any] | None:
                if self.fmt is None:
                    return None
                fields = self.fmt.fields(data, char_arrays)
                return {k: (v.hex() if self.fmt.char_mode(k, char_arrays) == "bytes" else jsonable(v))
                        if isinstance(v, bytes) else v for k, v in fields.items()}

        self.readers: list[Any] = []
        self.printers: list[Any] = []
        self.count = count
        ring: Any = None
        try:
            for m, fmt in maps:
                printer = make_sink(m, fmt) if make_sink is not None else Printer(m.name, fmt, json_lines=json_lines)
                self.printers.append(printer)
                tname = getattr(m.type, "name", str(m.type))
                if tname == "RINGBUF":
                    if ring is None:
                        ring = RingBuffer()
                        self.readers.append(ring)
                    ring.add(m, printer)
                elif tname == "PERF_EVENT_ARRAY":
                    self.readers.append(PerfBuffer(m, lambda cpu, data, p=printer: p(data, cpu),
                                                   lambda cpu, n, p=printer: p.lost(cpu, n)))
                else:
                    raise UsageError(f"map {m.name!r} is a {getattr(m.type, 'kernel_name', m.type)} map: "
                                     "--events reads ringbuf and perf_event_array maps")
        except BaseException:
            self.close()
            raise

    @property
    def printed(self) -> int:
        return sum(p.count for p in self.printers)

    def _left(self) -> int | None:
        """How many records may still be printed (None: no --count)."""
        return max(self.count - self.printed, 0) if self.count else None

    def run(self, stop: StopSignals, duration: float = 0.0) -> None:
        """Poll until ``stop``, ``duration`` s or ``count`` records: exactly ``count``, even when
        one wakeup brings a batch (each read is limited to what is left; the rest stay unread)."""
        import time

        deadline = time.monotonic() + duration if duration else None
        step = 0.1 if len(self.readers) == 1 else 0.02
        while not stop.is_set():
            for reader in self.readers:
                reader.poll(timeout=step, limit=self._left())
                if self._left() == 0:
                    return
            if deadline is not None and time.monotonic() >= deadline:
                return
        for reader in self.readers:  # what arrived before the stop
            if self._left() == 0:
                return
            reader.consume(limit=self._left())

    def close(self) -> None:
        for reader in reversed(self.readers):
            reader.close()
        self.readers = []


class TracePipe:
    """bpf_printk output: lines of tracefs ``trace_pipe`` copied to stdout by a thread.

    trace_pipe is consumed by reading it: another reader (``cat trace_pipe``) takes lines away."""

    def __init__(self, out: Callable[[str], None] | None = None) -> None:
        from .._kernel import tracefs

        self.path = os.path.join(tracefs.tracefs_root(), "trace_pipe")
        self.fd = os.open(self.path, os.O_RDONLY | os.O_NONBLOCK)
        self.out = out or (lambda line: (sys.stdout.write(line), sys.stdout.flush()))
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="trace_pipe", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        pending = b""
        while not self._stop.is_set():
            ready, _, _ = select.select([self.fd], [], [], 0.1)
            if not ready:
                continue
            try:
                chunk = os.read(self.fd, 65536)
            except BlockingIOError:
                continue
            except OSError:
                return
            pending += chunk
            *lines, pending = pending.split(b"\n")
            for line in lines:
                self.out(line.decode(errors="replace") + "\n")

    def close(self) -> None:
        self._stop.set()
        self._thread.join(1.0)
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


def run(args: argparse.Namespace) -> int:
    from ..maps import Map

    fmt = None
    modes = char_arrays(args.char_arrays)
    if args.btf:
        import bpfkit

        fmt = record_format_of(bpfkit.load_spec(args.btf).btf, args.event_type, f"--btf {args.btf}", named=True)
    with StopSignals() as stop, Map.load_pinned(args.pinned) as m:
        stream = EventStream([(m, fmt)], json_lines=args.json, count=args.count, char_arrays=modes)
        try:
            stream.run(stop, args.duration)
        finally:
            stream.close()
    return 0
