# SPDX-License-Identifier: Apache-2.0
"""A user event's format: its name and fields, built from the kernel's command text, a dataclass
or a function signature, and how values are packed into the payload emit() writes."""

from __future__ import annotations

import dataclasses
import inspect
import struct
import sys
import typing
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from .._kernel import user_events as _ue
from .._kernel.user_events import (
    MAX_EVENT_DESC,
    TRACE_ENTRY_SIZE,
)
from ..errors import ParseError, UsageError
from .fields import _BASIC, _IDENT, Field, _kernel_type, _parse_field


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
    def parse(cls, command: str) -> EventFormat:
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
    def from_dataclass(cls, dc: type, name: str | None = None) -> EventFormat:
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
            elif f.default_factory is not dataclasses.MISSING:
                default = f.default_factory()
            params.append(inspect.Parameter(f.name, inspect.Parameter.POSITIONAL_OR_KEYWORD, default=default))
        return cls(name or dc.__name__, fields, signature=inspect.Signature(params), source=dc)

    @classmethod
    def from_signature(cls, func: Callable[..., Any], name: str | None = None) -> EventFormat:
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
    def of(cls, spec: EventFormat | str | type | Callable[..., Any], name: str | None = None) -> EventFormat:
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

    def same_layout(self, other: EventFormat) -> bool:
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
        out[key] = value
        if isinstance(value, str):
            try:
                out[key] = eval(value, dict(namespace))
            except Exception:
                pass
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


