"""user_events: trace events that this Python process defines and emits.

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

import dataclasses
import errno
import inspect
import os
import re
import struct
import sys
import time
import typing
import weakref
from typing import Any, Callable, Iterable, Sequence

from ._kernel import tracefs as _tracefs
from ._kernel import user_events as _ue
from ._kernel.fd import FD
from ._kernel.user_events import (
    MAX_EVENT_DESC,
    MAX_FIELD_ARRAY_SIZE,
    TRACE_ENTRY_SIZE,
    USER_EVENTS_MULTI_SYSTEM,
    USER_EVENTS_SYSTEM,
    Enabler,
    RegFlag,
)
from .errors import BPFKitError, BusyError, NotFoundError, ParseError, UsageError

__all__ = [
    "Field",
    "EventFormat",
    "UserEvent",
    "UserEventsFile",
    "EventInfo",
    "Type",
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

_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")

# Basic types user_field_size() knows (kernel/trace/trace_events_user.c): size, signed, struct
# code. "long" is refused by the kernel: its size differs between user and kernel space.
_BASIC: dict[str, tuple[int, bool, str]] = {
    "s64": (8, True, "q"), "u64": (8, False, "Q"),
    "s32": (4, True, "i"), "u32": (4, False, "I"),
    "int": (4, True, "i"), "unsigned int": (4, False, "I"),
    "s16": (2, True, "h"), "u16": (2, False, "H"),
    "short": (2, True, "h"), "unsigned short": (2, False, "H"),
    "s8": (1, True, "b"), "u8": (1, False, "B"),
    "char": (1, True, "b"), "unsigned char": (1, False, "B"),
}
_ARRAY = re.compile(r"^(char|unsigned char)\[(\d+)\]$")
_DYN_PREFIXES = ("__rel_loc ", "__data_loc ")


# ------------------------------------------------------------------------------ fields
@dataclasses.dataclass(frozen=True)
class Field:
    """One field of a user event, as the kernel lays it out.

    ``offset`` counts from the start of the payload (what :meth:`UserEvent.emit` writes after
    the write index); in the trace record the kernel builds, the field sits at
    ``TRACE_ENTRY_SIZE + offset`` (after ``struct trace_entry``).
    """

    type: str  # kernel spelling: "u32", "char[16]", "__rel_loc char[]", "struct point"
    name: str
    size: int  # bytes in the fixed part (4 for dynamic fields)
    offset: int = 0

    @property
    def dynamic(self) -> str:
        """"rel_loc", "data_loc", or "" for a fixed field."""
        for prefix in _DYN_PREFIXES:
            if self.type.startswith(prefix):
                return prefix.strip()[2:]
        return ""

    @property
    def is_string(self) -> bool:
        """(signed) char arrays, fixed or dynamic: str in Python."""
        base = self.type.split(" ", 1)[1] if self.dynamic else self.type
        return base.startswith("char[") or (bool(self.dynamic) and base == "char")

    @property
    def needs_nul(self) -> bool:
        """Dynamic data the kernel drops unless its last byte is NUL: any dynamic type whose
        name contains "char" (user_event_add_field(): VALIDATOR_ENSURE_NULL)."""
        return bool(self.dynamic) and "char" in self.type

    @property
    def is_struct(self) -> bool:
        return self.type.startswith("struct ")

    @property
    def signed(self) -> bool:
        return _BASIC.get(self.type, (0, False, ""))[1]

    @property
    def decl(self) -> str:
        """The field as the registration command spells it (``struct`` fields carry a size)."""
        text = f"{self.type} {self.name}"
        return f"{text} {self.size}" if self.is_struct else text

    @property
    def code(self) -> str:
        """struct module code of the fixed part."""
        if self.dynamic:
            return "I"
        if self.type in _BASIC:
            return _BASIC[self.type][2]
        return f"{self.size}s"


def _parse_field(text: str, offset: int, where: str) -> Field:
    """``type name [size]`` as user_event_parse_field() reads it."""
    words = text.split()
    if not words:
        raise ParseError(f"{where}: empty field")
    # Types with a space: "unsigned X", "struct X", "__data_loc [unsigned ]X", "__rel_loc ..."
    head = 1
    if words[0] in ("__rel_loc", "__data_loc"):
        head = 3 if len(words) > 1 and words[1] == "unsigned" else 2
    elif words[0] in ("unsigned", "struct"):
        head = 2
    if len(words) < head + 1:
        raise ParseError(f"{where}: field {text.strip()!r} needs a type and a name")
    ftype, name, rest = " ".join(words[:head]), words[head], words[head + 1:]
    if not _IDENT.match(name):
        raise ParseError(f"{where}: field name {name!r} must match [A-Za-z_][A-Za-z0-9_]*")
    if ftype.startswith("struct "):
        if len(rest) != 1 or not rest[0].isdigit() or int(rest[0]) == 0:
            raise ParseError(f"{where}: {ftype} {name} needs its size in bytes: '{ftype} {name} SIZE'")
        return Field(ftype, name, int(rest[0]), offset)
    if rest:
        raise ParseError(f"{where}: unexpected {' '.join(rest)!r} after field {ftype} {name} (only struct fields take a size)")
    if ftype.startswith(_DYN_PREFIXES):
        inner = ftype.split(" ", 1)[1]
        if not inner:
            raise ParseError(f"{where}: {ftype!r} needs an element type")
        return Field(ftype, name, 4, offset)
    if ftype in _BASIC:
        return Field(ftype, name, _BASIC[ftype][0], offset)
    m = _ARRAY.match(ftype)
    if m:
        size = int(m[2])
        if not 0 < size <= MAX_FIELD_ARRAY_SIZE:
            raise ParseError(f"{where}: {ftype} {name}: array size must be 1..{MAX_FIELD_ARRAY_SIZE}")
        return Field(ftype, name, size, offset)
    if ftype in ("long", "unsigned long"):
        raise ParseError(f"{where}: {ftype} is refused by the kernel (its size differs between user and kernel space): use s64/u64")
    raise ParseError(
        f"{where}: unknown field type {ftype!r}: the kernel knows s8..s64, u8..u64, int, short, char "
        f"(and unsigned ones), char[N], unsigned char[N], 'struct NAME name SIZE', __rel_loc/__data_loc TYPE"
    )


# ------------------------------------------------------------------------------ formats
class Type:
    """An annotation naming the kernel type of a dataclass field or parameter:
    ``count: Annotated[int, Type("u32")]`` (or the aliases :data:`U32`, :func:`Char` ...)."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return f"Type({self.name!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Type) and other.name == self.name

    def __hash__(self) -> int:
        return hash(self.name)


U8 = typing.Annotated[int, Type("u8")]
U16 = typing.Annotated[int, Type("u16")]
U32 = typing.Annotated[int, Type("u32")]
U64 = typing.Annotated[int, Type("u64")]
S8 = typing.Annotated[int, Type("s8")]
S16 = typing.Annotated[int, Type("s16")]
S32 = typing.Annotated[int, Type("s32")]
S64 = typing.Annotated[int, Type("s64")]
String = typing.Annotated[str, Type("__rel_loc char[]")]
# u8[], not unsigned char[]: the kernel wants a NUL at the end of any dynamic "char" type.
Blob = typing.Annotated[bytes, Type("__rel_loc u8[]")]


def Char(size: int) -> Any:  # noqa: N802 - reads like a type in annotations
    """``char[size]``: a str (UTF-8) or bytes of at most ``size`` bytes, NUL-padded."""
    return typing.Annotated[str, Type(f"char[{size}]")]


def Bytes(size: int) -> Any:  # noqa: N802
    """``unsigned char[size]``: bytes of at most ``size``, zero-padded."""
    return typing.Annotated[bytes, Type(f"unsigned char[{size}]")]


# Plain Python annotations: the widest honest kernel type.
_PY_TYPES = {int: "s64", bool: "u8", str: "__rel_loc char[]", bytes: "__rel_loc u8[]"}


def _kernel_type(annotation: Any, where: str) -> str:
    if isinstance(annotation, str):
        text = annotation.strip()
        if text in _BASIC or _ARRAY.match(text) or text.startswith(_DYN_PREFIXES):
            return text
        raise ParseError(f"{where}: cannot resolve the annotation {annotation!r} to a kernel type")
    if typing.get_origin(annotation) is typing.Annotated:
        for meta in annotation.__metadata__:
            if isinstance(meta, Type):
                return meta.name
        annotation = typing.get_args(annotation)[0]
    if isinstance(annotation, Type):
        return annotation.name
    if annotation in _PY_TYPES:
        return _PY_TYPES[annotation]
    raise ParseError(f"{where}: no kernel type for annotation {annotation!r}: use U32, Char(16), String ... or int/bool/str/bytes")


class EventFormat:
    """A user event's name and fields: parsing, the registration command, payload packing.

    Pure data: no kernel access, usable (and tested) anywhere.
    """

    def __init__(self, name: str, fields: Iterable[Field | str] | str = (), *,
                 signature: inspect.Signature | None = None, source: Any = None) -> None:
        if not _IDENT.match(name):
            raise ParseError(f"user event name {name!r} must match [A-Za-z_][A-Za-z0-9_]*")
        self.name = name
        where = f"user event {name}"
        if isinstance(fields, str):
            fields = [f for f in fields.split(";") if f.strip()]
        laid: list[Field] = []
        offset = 0
        for f in fields:
            parsed = _parse_field(f, offset, where) if isinstance(f, str) else dataclasses.replace(f, offset=offset)
            laid.append(parsed)
            offset += parsed.size
        names = [f.name for f in laid]
        dup = {n for n in names if names.count(n) > 1}
        if dup:
            raise ParseError(f"{where}: field names repeat: {', '.join(sorted(dup))}")
        self.fields: tuple[Field, ...] = tuple(laid)
        self.fixed_size = offset  # the kernel's min_size: shorter writes get EINVAL
        self.source = source  # the dataclass or function the format came from, if any
        self._struct = struct.Struct("<" + "".join(f.code for f in laid))
        # Fields whose Python value needs converting before struct.pack, decided once here so
        # that packing plain integer fields is one struct.pack call.
        self._special: list[tuple[int, Field, str]] = []
        for i, f in enumerate(laid):
            if f.dynamic:
                self._special.append((i, f, "dynamic"))
            elif f.code.endswith("s"):
                self._special.append((i, f, "bytes"))
            elif f.type in ("char", "unsigned char"):
                self._special.append((i, f, "char"))
        self.signature = signature or inspect.Signature(
            [inspect.Parameter(f.name, inspect.Parameter.POSITIONAL_OR_KEYWORD) for f in laid]
        )
        if len(self.command) >= MAX_EVENT_DESC:
            raise ParseError(f"{where}: description of {len(self.command)} bytes; the kernel takes at most {MAX_EVENT_DESC - 1}")

    # -------------------------------------------------------------- constructors
    @classmethod
    def parse(cls, command: str) -> "EventFormat":
        """``name[ field;field...]``, the DIAG_IOCSREG / dynamic_events syntax (``u:`` prefix
        optional): ``request u32 status;char[16] method``."""
        text = command.strip()
        if text.startswith(_ue.USER_EVENTS_PREFIX):
            text = text[len(_ue.USER_EVENTS_PREFIX):]
        name, _, args = text.partition(" ")
        if ":" in name:
            raise ParseError(f"user event {name!r}: no ':FLAG' suffixes exist yet (the kernel refuses them)")
        return cls(name, args)

    @classmethod
    def from_dataclass(cls, dc: type, name: str | None = None) -> "EventFormat":
        """One field per dataclass field, typed by its annotation (``U32``, ``Char(16)``,
        ``str``...); the event name defaults to the class name."""
        if not dataclasses.is_dataclass(dc) or not isinstance(dc, type):
            raise UsageError(f"{dc!r} is not a dataclass")
        hints = _hints(dc)
        where = f"dataclass {dc.__name__}"
        fields = [f"{_kernel_type(hints.get(f.name, f.type), f'{where}.{f.name}')} {f.name}"
                  for f in dataclasses.fields(dc)]
        params = []
        for f in dataclasses.fields(dc):
            default = inspect.Parameter.empty
            if f.default is not dataclasses.MISSING:
                default = f.default
            elif f.default_factory is not dataclasses.MISSING:  # type: ignore[misc]
                default = f.default_factory()  # type: ignore[misc]
            params.append(inspect.Parameter(f.name, inspect.Parameter.POSITIONAL_OR_KEYWORD, default=default))
        return cls(name or dc.__name__, fields, signature=inspect.Signature(params), source=dc)

    @classmethod
    def from_signature(cls, func: Callable[..., Any], name: str | None = None) -> "EventFormat":
        """One field per parameter of ``func``, typed by its annotation; defaults apply when
        emitting. The event name defaults to the function's name."""
        sig = inspect.signature(func)
        hints = _hints(func)
        where = f"function {getattr(func, '__qualname__', func)}"
        fields, params = [], []
        for p in sig.parameters.values():
            if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
                raise ParseError(f"{where}: *{p.name} cannot be an event field")
            ann = hints.get(p.name, p.annotation)
            if ann is inspect.Parameter.empty:
                raise ParseError(f"{where}: parameter {p.name} needs a type annotation")
            fields.append(f"{_kernel_type(ann, f'{where}({p.name})')} {p.name}")
            params.append(p.replace(annotation=inspect.Parameter.empty))
        return cls(name or func.__name__, fields, signature=sig.replace(parameters=params, return_annotation=inspect.Signature.empty),
                   source=func)

    @classmethod
    def of(cls, spec: "EventFormat | str | type | Callable[..., Any]", name: str | None = None) -> "EventFormat":
        """Whatever describes an event: an EventFormat, a command string, a dataclass, a function."""
        if isinstance(spec, EventFormat):
            return spec if name is None or name == spec.name else cls(name, spec.fields, signature=spec.signature, source=spec.source)
        if isinstance(spec, str):
            fmt = cls.parse(spec)
            return fmt if name is None else cls(name, fmt.fields)
        if isinstance(spec, type) and dataclasses.is_dataclass(spec):
            return cls.from_dataclass(spec, name)
        if callable(spec):
            return cls.from_signature(spec, name)
        raise UsageError(f"cannot make a user event format from {spec!r}")

    # -------------------------------------------------------------- views
    @property
    def command(self) -> str:
        """``name field; field``: what DIAG_IOCSREG gets (and dynamic_events shows after u:)."""
        if not self.fields:
            return self.name
        return f"{self.name} " + "; ".join(f.decl for f in self.fields)

    @property
    def field_names(self) -> tuple[str, ...]:
        return tuple(f.name for f in self.fields)

    def same_layout(self, other: "EventFormat") -> bool:
        return [f.decl for f in self.fields] == [f.decl for f in other.fields]

    def __eq__(self, other: object) -> bool:
        return isinstance(other, EventFormat) and self.command == other.command

    def __hash__(self) -> int:
        return hash(self.command)

    def __repr__(self) -> str:
        return f"EventFormat({self.command!r})"

    # -------------------------------------------------------------- payloads
    def values(self, *args: Any, **kwargs: Any) -> list[Any]:
        """Field values in order from positional/keyword arguments, a dataclass instance (of
        the source class, or any object with attributes of the field names), or a mapping."""
        n = len(self.fields)
        if not kwargs and len(args) == n and (n != 1 or not _is_record(args[0])):
            return list(args)
        if len(args) == 1 and not kwargs and _is_record(args[0]):
            obj = args[0]
            if isinstance(obj, dict):
                return self.values(**obj)
            try:
                return [getattr(obj, f.name) for f in self.fields]
            except AttributeError as exc:
                raise UsageError(f"user event {self.name}: {type(obj).__name__} lacks field {exc.name!r}") from None
        try:
            bound = self.signature.bind(*args, **kwargs)
        except TypeError as exc:
            raise UsageError(f"user event {self.name}: {exc}") from None
        bound.apply_defaults()
        return [bound.arguments[f.name] for f in self.fields]

    def pack(self, *args: Any, **kwargs: Any) -> bytes:
        """The payload for these values: fixed fields packed in order without padding, then
        the data of dynamic fields in field order (``__rel_loc``: offset from the end of the
        32-bit field; ``__data_loc``: offset from the start of the trace record)."""
        return self.pack_values(self.values(*args, **kwargs))

    def pack_values(self, values: Sequence[Any]) -> bytes:
        if len(values) != len(self.fields):
            raise UsageError(f"user event {self.name}: {len(values)} values for {len(self.fields)} fields")
        fixed = values
        tail = b""
        if self._special:
            fixed = list(values)
            for i, f, kind in self._special:
                v = values[i]
                if kind == "dynamic":
                    data = _dynamic_bytes(f, v, self.name)
                    here = self.fixed_size + len(tail)
                    off = here - (f.offset + 4) if f.dynamic == "rel_loc" else TRACE_ENTRY_SIZE + here
                    if len(data) > 0xFFFF or off > 0xFFFF:
                        raise UsageError(f"user event {self.name}: field {f.name}: dynamic data past 64 KiB")
                    fixed[i] = (len(data) << 16) | off
                    tail += data
                elif kind == "bytes":
                    fixed[i] = _fixed_bytes(f, v, self.name)
                elif isinstance(v, (str, bytes)):  # char: one byte given as text
                    raw = v.encode() if isinstance(v, str) else v
                    if len(raw) != 1:
                        raise UsageError(f"user event {self.name}: field {f.name} ({f.type}) takes one byte, got {v!r}")
                    fixed[i] = raw[0] if f.type == "unsigned char" else struct.unpack("b", raw)[0]
        try:
            head = self._struct.pack(*fixed)
        except struct.error as exc:
            raise UsageError(f"user event {self.name}: {_which_bad(self, fixed) or exc}") from None
        return head + tail if tail else head

    def unpack(self, payload: bytes | memoryview, *, record: bool = False) -> dict[str, Any]:
        """Field values from a payload (``record=True``: from a whole trace record, which starts
        with the 8-byte trace_entry). Strings come back as str without the padding/NUL."""
        data = bytes(payload)
        base = TRACE_ENTRY_SIZE if record else 0
        if len(data) < base + self.fixed_size:
            raise ParseError(f"user event {self.name}: {len(data) - base} payload bytes, the fields need {self.fixed_size}")
        raw = self._struct.unpack_from(data, base)
        out: dict[str, Any] = {}
        for f, v in zip(self.fields, raw):
            if f.dynamic:
                size, off = v >> 16, v & 0xFFFF
                start = base + f.offset + 4 + off if f.dynamic == "rel_loc" else off - TRACE_ENTRY_SIZE + base
                chunk = data[start:start + size]
                if len(chunk) != size or start < 0:
                    raise ParseError(f"user event {self.name}: field {f.name} points outside the payload")
                out[f.name] = chunk.rstrip(b"\0").decode(errors="replace") if f.is_string else chunk
            elif isinstance(v, bytes):
                out[f.name] = v.split(b"\0", 1)[0].decode(errors="replace") if f.is_string else v
            else:
                out[f.name] = v
        return out


def _hints(obj: Any) -> dict[str, Any]:
    """Resolved annotations; when some cannot be resolved (a kernel type name written as a
    string, ``a: "u32"``, under ``from __future__ import annotations``), each is evaluated on
    its own and kept as text if that fails."""
    try:
        return typing.get_type_hints(obj, include_extras=True)
    except Exception:
        pass
    raw: dict[str, Any] = {}
    for klass in reversed(getattr(obj, "__mro__", (obj,))):
        raw.update(getattr(klass, "__annotations__", {}) or {})
    module = sys.modules.get(getattr(obj, "__module__", "") or "")
    namespace = getattr(obj, "__globals__", None) or (vars(module) if module else {})
    out = {}
    for key, value in raw.items():
        if isinstance(value, str):
            try:
                value = eval(value, dict(namespace))  # noqa: S307 - the caller's own annotation
            except Exception:
                pass
        out[key] = value
    return out


def _is_record(obj: Any) -> bool:
    return isinstance(obj, dict) or (dataclasses.is_dataclass(obj) and not isinstance(obj, type))


def _fixed_bytes(f: Field, v: Any, event: str) -> bytes:
    raw = v.encode() if isinstance(v, str) else bytes(v)
    if len(raw) > f.size:
        raise UsageError(f"user event {event}: field {f.name} ({f.type}) holds {f.size} bytes, got {len(raw)}")
    if f.is_struct and len(raw) != f.size:
        raise UsageError(f"user event {event}: field {f.name} ({f.type}) takes exactly {f.size} bytes, got {len(raw)}")
    return raw


def _dynamic_bytes(f: Field, v: Any, event: str) -> bytes:
    if isinstance(v, str):
        raw = v.encode()
    elif isinstance(v, (bytes, bytearray, memoryview)):
        raw = bytes(v)
    else:
        raise UsageError(f"user event {event}: field {f.name} ({f.type}) takes str or bytes, got {type(v).__name__}")
    if f.needs_nul and not raw.endswith(b"\0"):
        raw += b"\0"  # the kernel drops a string field whose last byte is not NUL (EFAULT)
    return raw


def _which_bad(fmt: EventFormat, values: Sequence[Any]) -> str:
    for f, v in zip(fmt.fields, values):
        if f.type in _BASIC:
            size, signed, _ = _BASIC[f.type]
            lo, hi = (-(1 << (size * 8 - 1)), (1 << (size * 8 - 1)) - 1) if signed else (0, (1 << (size * 8)) - 1)
            if not isinstance(v, int):
                return f"field {f.name} ({f.type}) takes an int, got {type(v).__name__}"
            if not lo <= v <= hi:
                return f"field {f.name} ({f.type}) value {v} is outside {lo}..{hi}"
    return ""


def parse_format(command: str) -> EventFormat:
    """:meth:`EventFormat.parse`."""
    return EventFormat.parse(command)


# ------------------------------------------------------------------------------ the kernel side
def available() -> bool:
    """Whether this kernel offers user_events (tracefs ``user_events_data``)."""
    return _ue.available()


class UserEventsFile:
    """One open ``user_events_data``: register several events on it, each with its own write
    index. A registration holds a reference to its event until the file is closed, so an event
    registered here can only be deleted after :meth:`close`."""

    def __init__(self) -> None:
        self.fd: FD = _ue.open_data()
        self._events: "weakref.WeakSet[UserEvent]" = weakref.WeakSet()

    def register(self, spec: Any, **kwargs: Any) -> "UserEvent":
        return UserEvent(spec, file=self, **kwargs)

    @property
    def closed(self) -> bool:
        return self.fd.closed

    def close(self) -> None:
        """Unregister every event registered here, then close the file."""
        for ev in list(self._events):
            ev.close()
        self.fd.close()

    def __enter__(self) -> "UserEventsFile":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# The enable words of events that could not be unregistered: the kernel may still write into
# them, so their memory must never be freed.
_PINNED_WORDS: list[Any] = []


def _release(fd: FD, own_fd: bool, word: Any, enabler: Enabler, registered: list[bool]) -> None:
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


class UserEvent:
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
        # The word the kernel sets bit 0 of while the event is enabled: cffi memory owned by
        # this object, so its address stays valid for as long as the registration.
        self._word = _ue.ffi.new("uint32_t *")
        self._enabler = Enabler(int(_ue.ffi.cast("uintptr_t", self._word)), 0, 4)
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
        return self._word[0] != 0

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
        if not self._word[0]:
            return False
        return self._write(self.format.pack(*args, **kwargs))

    def emit_raw(self, *parts: bytes | bytearray | memoryview, force: bool = False) -> bool:
        """Write an already packed payload (several buffers are gathered, as writev does).

        ``force`` skips the enabled-bit check (after unregister(), the bit no longer follows the
        tracers); the kernel still drops a write to a disabled event."""
        if not force and not self._word[0]:
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
    def attach(self, prog: Any, *, pid: int | None = None, **kwargs: Any) -> Any:
        """Attach a tracepoint program to this event's trace event (a link: close it to detach).

        The link enables the event. By default its perf event is on CPU 0 for all tasks (as
        link.tracepoint() makes it); ``pid`` makes it follow that thread on every CPU instead
        (perf_event_open takes a thread id: ``os.getpid()`` is the main thread).
        Mainline kernels do not run the program for user events (see the module docstring):
        a kprobe on perf_tp_event() sees the payloads, on the CPUs where this perf event is.
        ``kwargs`` go to the link (``cookie=``, ``mode=``).
        """
        from . import link

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

    def status(self) -> "_ue.Status | None":
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

    def __enter__(self) -> "UserEvent":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self.closed else ("enabled" if self.enabled else "disabled")
        return f"UserEvent({self.format.command!r}, index={self.write_index}, {state})"


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
class EventInfo:
    """A user event the kernel has (any process's)."""

    system: str
    tracepoint: str  # trace event name under events/<system>/
    name: str  # the registered name
    format: EventFormat | None  # from dynamic_events (None when it cannot be matched)
    users: tuple[str, ...]  # who has it enabled: "ftrace", "perf", "other"

    @property
    def command(self) -> str:
        return self.format.command if self.format else self.name


def list_events() -> list[EventInfo]:
    """Every user event, from tracefs user_events_status, with formats from dynamic_events."""
    formats: dict[str, list[EventFormat]] = {}
    for line in _ue.read_dynamic_events():
        try:
            fmt = EventFormat.parse(line)
        except ParseError:
            continue
        formats.setdefault(fmt.name, []).append(fmt)
    root = _tracefs.tracefs_root()
    found = []
    for st in _ue.read_status():
        single = os.path.isdir(os.path.join(root, "events", USER_EVENTS_SYSTEM, st.name))
        system = USER_EVENTS_SYSTEM if single else USER_EVENTS_MULTI_SYSTEM
        name = st.name if single else st.name.rsplit(".", 1)[0]
        fmt = None
        candidates = formats.get(name, [])
        if single or len(candidates) == 1:
            fmt = candidates[0] if candidates else None
        else:
            have = _format_fields(system, st.name)
            for c in candidates:
                if [(f.name, f.offset + TRACE_ENTRY_SIZE, f.size) for f in c.fields] == have:
                    fmt = c
        found.append(EventInfo(system, st.name, name, fmt, st.users))
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
