# SPDX-License-Identifier: Apache-2.0
"""Shared printing for the ``bpfkit`` sub-commands: tables, JSON lines, and event records.

Text output is for people and may change; ``--json`` output is one JSON object per line with
the shapes documented in docs/cli.md, and stays stable (new keys may be added, none removed).
Text goes through :func:`shown` (bpfkit._visible): a name from an object, a map or a process
(a section name holding ESC or a newline) prints as ``\\x1b``, never as a terminal escape
sequence or a forged line. JSON needs nothing more: json.dumps escapes every control character.

Records a program sends (ring buffer, perf event array) print as hex by default; when a BTF
struct describes them (``RecordFormat.from_btf``) they print decoded, one record a line::

    events: ts_ns=5103 pid=812 comm=cat filename=/etc/hostname
    {"map": "events", "cpu": null, "size": 176, "fields": {"ts_ns": 5103, "pid": 812, ...}}
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterable, Sequence
from typing import Any, TextIO

__all__ = ["print_table", "print_json", "RecordPrinter", "record_format", "jsonable", "shown"]


def shown(value: object) -> str:
    """``str(value)`` for a terminal or a text log: control characters, bidirectional
    overrides and the like as visible escapes (bpfkit._visible)."""
    from .._visible import visible

    return visible(str(value))


def jsonable(value: Any) -> Any:
    """Plain JSON values: enums by name (bpfkit's lower-case, BTF enums as the C source spells
    them), bytes as text (NUL-terminated C strings) or hex, BTF records as objects."""
    import enum

    from ..btf.values import Record

    if isinstance(value, enum.Enum) and type(value).__module__ == Record.__module__:
        return value.name  # an enum of a BTF type (typed maps): MT_BLUE
    if isinstance(value, Record):
        return jsonable(value.to_dict())  # a struct or union of a typed map
    if isinstance(value, enum.Enum):
        return getattr(value, "kernel_name", None) or value.name.lower()
    if isinstance(value, (bytes, bytearray, memoryview)):
        return _bytes_text(bytes(value))
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    return value


def print_json(obj: Any, out: TextIO | None = None) -> None:
    """One object, one line (compact, keys in the order given)."""
    (out or sys.stdout).write(json.dumps(jsonable(obj), separators=(",", ":")) + "\n")


def print_table(rows: Sequence[dict[str, Any]], columns: Sequence[tuple[str, str]], out: TextIO | None = None) -> None:
    """Left-aligned columns (``(key, header)`` pairs), the last one unpadded."""
    out = out or sys.stdout
    cells = [[h for _, h in columns]] + [[_cell(r.get(k)) for k, _ in columns] for r in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(columns))]
    for row in cells:
        parts = [c.ljust(widths[i]) for i, c in enumerate(row[:-1])] + [row[-1]]
        out.write("  ".join(parts).rstrip() + "\n")


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, (list, tuple)):
        return ",".join(shown(v) for v in value) or "-"
    v = jsonable(value)
    return shown(v)


def _bytes_text(raw: bytes) -> str:
    """A char array as text: up to the first NUL when that is printable UTF-8, else hex."""
    text = raw.split(b"\0", 1)[0]
    try:
        s = text.decode()
    except UnicodeDecodeError:
        return raw.hex()
    if s.isprintable() and (len(text) == len(raw) or not raw[len(text):].strip(b"\0") or text):
        return s
    return raw.hex()


def hexdump(data: bytes) -> str:
    """``0011aabb 2233ccdd ...``: 4-byte groups, as the bytes lie in memory."""
    h = data.hex()
    return " ".join(h[i:i + 8] for i in range(0, len(h), 8))


def record_format(btf: Any, type_name: str) -> Any:
    """The RecordFormat of BTF struct ``type_name`` (``struct event`` or ``event``), or None when
    the object's BTF has no such struct or it cannot be decoded (bitfields)."""
    from ..errors import BPFKitError

    if btf is None or not type_name:
        return None
    name = type_name.removeprefix("struct ").strip()
    try:
        from ..events import RecordFormat

        return RecordFormat.from_btf(btf, name)
    except (BPFKitError, KeyError, LookupError):
        return None


class RecordPrinter:
    """Prints the records of one map: decoded through ``fmt`` (a RecordFormat) when given and
    the record is at least as long as the struct, else as hex. ``json``: one object a line."""

    def __init__(self, map_name: str, fmt: Any = None, *, json_lines: bool = False, out: TextIO | None = None) -> None:
        self.map_name = map_name
        self.fmt = fmt
        self.size = fmt.size if fmt is not None else 0
        self.names: list[str] = list(fmt.names) if fmt is not None else []
        self.json = json_lines
        self.out = out or sys.stdout
        self.count = 0

    def decode(self, data: bytes) -> dict[str, Any] | None:
        if self.fmt is None or len(data) < self.size:
            return None
        values = self.fmt.unpack(data[: self.size])
        return {n: (_bytes_text(v) if isinstance(v, bytes) else v) for n, v in zip(self.names, values)}

    def __call__(self, data: Any, cpu: int | None = None) -> None:
        raw = bytes(data)
        fields = self.decode(raw)
        self.count += 1
        if self.json:
            obj: dict[str, Any] = {"map": self.map_name, "cpu": cpu, "size": len(raw)}
            if fields is not None:
                obj["fields"] = fields
            else:
                obj["hex"] = raw.hex()
            print_json(obj, self.out)
        elif fields is not None:
            body = " ".join(f"{k}={v}" for k, v in fields.items())
            self.out.write(shown(f"{self.map_name}: {body}") + "\n")
        else:
            where = f" cpu {cpu}" if cpu is not None else ""
            self.out.write(f"{shown(self.map_name)}{where} [{len(raw)} bytes]: {hexdump(raw)}\n")
        self.out.flush()

    def lost(self, cpu: int | None, count: int) -> None:
        """Lost records go to stderr (text) so stdout stays parseable."""
        where = f" on cpu {cpu}" if cpu is not None else ""
        sys.stderr.write(f"bpfkit: lost {count} record(s) from {shown(self.map_name)}{where}\n")
        sys.stderr.flush()


def rows_of(items: Iterable[Any], fields: Sequence[str], getter: Callable[[Any, str], Any] = getattr) -> list[dict[str, Any]]:
    return [{f: getter(item, f) for f in fields} for item in items]


# ----------------------------------------------------- list/show of kernel objects (map, prog, link)
def add_list_show(parser: Any, what: str) -> Any:
    """The ACTION sub-commands of ``bpfkit map|prog|link`` with their ``list [--json]`` and
    ``show ID|PATH [--json]``; returns them, for the command's own actions (``map dump``)."""
    from . import argtypes  # here: the commands that print records (inspect, events) need none of it

    sub = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    lst = sub.add_parser("list", help=f"every {what}")
    lst.add_argument("--json", action="store_true", help="one JSON object a line")
    show = sub.add_parser("show", help=f"one {what} by id or pinned path")
    show.add_argument("target", metavar="ID|PATH", type=argtypes.id_or_path(what))
    show.add_argument("--json", action="store_true", help="one JSON object")
    return sub


def print_rows(rows: Sequence[dict[str, Any]], columns: Sequence[tuple[str, str]], as_json: bool) -> None:
    """``list``: one JSON object a line, or a table."""
    if as_json:
        for row in rows:
            print_json(row)
    else:
        print_table(rows, columns)


def print_record(row: dict[str, Any], as_json: bool, width: int = 12, empty: tuple[Any, ...] = (None,)) -> None:
    """``show``: one JSON object, or ``key: value`` lines (``-`` for a value in ``empty``)."""
    if as_json:
        print_json(row)
        return
    for key, value in row.items():
        print(f"{key + ':':<{width}} {'-' if value in empty else shown(value)}")


def list_or_show(args: Any, cls: Any, ids: Callable[[], Iterable[int]], describe: Callable[[Any], dict[str, Any]],
                 columns: Sequence[tuple[str, str]], skip: tuple[type[Exception], ...] = ()) -> int:
    """``bpfkit map|prog list`` (every object of ``ids()``, opened with ``cls.from_id``, passing
    over those that raise one of ``skip``) or ``show`` (one, by id or pinned path), each object
    as ``describe`` gives it."""
    if args.action == "show":
        with open_by_id_or_path(args.target, cls.from_id, cls.load_pinned) as obj:
            row = describe(obj)
        print_record(row, args.json)
        return 0
    rows = []
    for obj in opened_by_ids(ids(), cls.from_id, skip):
        with obj:
            rows.append(describe(obj))
    print_rows(rows, columns, args.json)
    return 0


def open_by_id_or_path(target: int | str, from_id: Callable[[int], Any], load_pinned: Callable[[str], Any]) -> Any:
    """The object with kernel id ``target`` (an int) or pinned at ``target`` (a path)."""
    return from_id(target) if isinstance(target, int) else load_pinned(target)


def opened_by_ids(ids: Iterable[int], from_id: Callable[[int], Any],
                  skip: tuple[type[Exception], ...] = ()) -> Iterable[Any]:
    """Open each id in turn, passing over objects gone since they were listed (ENOENT) and
    those whose opening raises one of ``skip``."""
    from ..errors import NotFoundError

    for oid in ids:
        try:
            obj = from_id(oid)
        except NotFoundError:
            continue
        except Exception as exc:  # vanished between listing and opening (ENOENT)
            if getattr(exc, "errno", None) == 2 or isinstance(exc, skip):
                continue
            raise
        yield obj
