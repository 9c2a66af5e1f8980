# SPDX-License-Identifier: Apache-2.0
"""Probe specs in bpftrace's grammar: ``kprobe:do_sys_open``, ``u:libc:malloc``, ``t:syscalls:sys_enter_openat``.

Pure parsing: a string becomes a :class:`ProbeSpec`; nothing touches the kernel. A malformed spec
raises :class:`~bpfkit.errors.ParseError` whose message repeats the spec with a caret under
the bad part::

    bad probe spec: kprobe:do_sys_open+x
                                       ^ offset must be a number (decimal or 0x hex)

Grammar (bpftrace's, with its short aliases):

    kprobe:FN[+OFF]  kprobe:MODULE:FN[+OFF]           k
    kretprobe:FN  kretprobe:MODULE:FN                 kr
    uprobe:BINARY:FN[+OFF]  uprobe:BINARY:0xADDR      u      (BINARY: a path or a library name)
    uretprobe:BINARY:FN                               ur
    kprobe.session:FN                                        (entry and return, one link; 6.10)
    uprobe.session:BINARY:FN                                 (entry and return, one link; 6.13)
    usdt:BINARY:[PROVIDER:]NAME                       U
    tracepoint:CATEGORY:NAME                          t
    rawtracepoint:[MODULE:]NAME                       rt
    fentry:[MODULE:]FN  fexit:[MODULE:]FN             f, fr
    profile:UNIT:N      (UNIT hz, s, ms, us)          p      (every CPU)
    interval:UNIT:N     (UNIT hz, s, ms, us)                 (one CPU)
    software:EVENT[:COUNT]  hardware:EVENT[:COUNT]    s, h
    xdp:IFACE  tc:IFACE:ingress|egress                (network attach points)
    netkit:IFACE[:primary|peer]                       (a netkit pair, by its primary)

Function and tracepoint names may hold ``*`` and ``?`` wildcards; :attr:`ProbeSpec.is_wildcard`
tells, and the attach layer expands them against the kernel's or the binary's symbols.
"""

from __future__ import annotations

import dataclasses
import re

from ._kernel.consts import HARDWARE_EVENT_NAMES, SOFTWARE_EVENT_NAMES
from .errors import ParseError

__all__ = ["ProbeSpec", "parse_probe", "ALIASES", "KINDS"]

ALIASES = {
    "k": "kprobe",
    "kr": "kretprobe",
    "u": "uprobe",
    "ur": "uretprobe",
    "U": "usdt",
    "t": "tracepoint",
    "rt": "rawtracepoint",
    "f": "fentry",
    "fr": "fexit",
    "p": "profile",
    "s": "software",
    "h": "hardware",
}
KINDS = frozenset(ALIASES.values()) | {"xdp", "tc", "netkit", "interval", "kprobe.session", "uprobe.session"}  # no short aliases

SOFTWARE_EVENTS = SOFTWARE_EVENT_NAMES  # name -> PERF_COUNT_SW_* (bpfkit._kernel.consts)
HARDWARE_EVENTS = HARDWARE_EVENT_NAMES  # name -> PERF_COUNT_HW_*
PROFILE_UNITS = ("hz", "s", "ms", "us")

_IDENT = re.compile(r"^[A-Za-z_*?][A-Za-z0-9_.*?]*$")  # function names: dots for .isra.0 clones
# A binary's function may name a symbol version: memcpy@GLIBC_2.2.5 (a compat one),
# memcpy@@GLIBC_2.14 (the default, what a plain name means already); no wildcard with one.
_UFUNC = re.compile(r"^([A-Za-z_][A-Za-z0-9_.]*@@?[A-Za-z0-9_.]+|[A-Za-z_*?][A-Za-z0-9_.*?]*)$")
_EVENT_NAME = re.compile(r"^[A-Za-z_*?][A-Za-z0-9_*?]*$")
# Kernel module names and static tracepoints' groups and names may start with a digit: the 9p
# module, its TRACE_SYSTEM 9p and tracepoint 9p_client_req.
_KERNEL_NAME = re.compile(r"^[A-Za-z0-9_*?]+$")
# A tracepoint's group is its TRACE_SYSTEM, which may hold a dash: spi-mem (drivers/spi).
_TP_GROUP = re.compile(r"^[A-Za-z0-9_*?-]+$")
_IFACE = re.compile(r"^[A-Za-z0-9_.:@-]{1,15}$")


@dataclasses.dataclass(frozen=True)
class ProbeSpec:
    """A parsed probe spec. Which fields are set depends on ``kind``:

    kprobe/kretprobe: function, offset, module; uprobe/uretprobe: binary, function or address,
    offset; usdt: binary, provider, function (the probe name); tracepoint: category, function
    (the event name); rawtracepoint/fentry/fexit: function, module; profile/interval: unit, count;
    software/hardware: event, config, count; xdp: iface; tc: iface, direction; netkit: iface,
    direction (``primary`` or ``peer``, default primary).
    """

    kind: str
    text: str
    function: str = ""
    offset: int = 0
    module: str = ""
    binary: str = ""
    address: int | None = None
    provider: str = ""
    category: str = ""
    unit: str = ""
    event: str = ""
    config: int = 0
    count: int = 0
    iface: str = ""
    direction: str = ""

    @property
    def is_wildcard(self) -> bool:
        return any(c in self.function + self.category for c in "*?")

    @property
    def is_return(self) -> bool:
        return self.kind in ("kretprobe", "uretprobe", "fexit")

    def __str__(self) -> str:
        return self.text


def _fail(text: str, start: int, why: str) -> ParseError:
    caret = " " * (len("bad probe spec: ") + start) + "^ " + why
    return ParseError(f"bad probe spec: {text}\n{caret}")


def _number(text: str, part: str, start: int, what: str) -> int:
    try:
        return int(part, 0)
    except ValueError:
        raise _fail(text, start, f"{what} must be a number (decimal or 0x hex)") from None


def _split_offset(text: str, part: str, start: int) -> tuple[str, int]:
    name, plus, off = part.partition("+")
    if not plus:
        return name, 0
    return name, _number(text, off, start + len(name) + 1, "offset")


def _check(pattern: re.Pattern[str], text: str, part: str, start: int, what: str) -> str:
    if not part:
        raise _fail(text, start, f"missing {what}")
    if not pattern.match(part):
        raise _fail(text, start, f"invalid {what} {part!r}")
    return part


def _fields(text: str) -> tuple[list[str], list[int]]:
    """Split on ':' but keep a uprobe path's own colons? Paths never hold ':' in bpftrace's
    grammar either, so a plain split is faithful; returns the parts and their start columns."""
    parts = text.split(":")
    starts, pos = [], 0
    for part in parts:
        starts.append(pos)
        pos += len(part) + 1
    return parts, starts


MAX_SPEC = 4096 + 512  # PATH_MAX plus room for the kind, a function and an offset


def parse_probe(text: str) -> ProbeSpec:
    """Parse one probe spec; raises ParseError pointing at the bad part."""
    text = text.strip()
    if not text:
        raise ParseError("bad probe spec: empty")
    if len(text) > MAX_SPEC:
        raise ParseError(f"bad probe spec {text[:40]!r}... ({len(text)} characters): longer than {MAX_SPEC}, "
                         "the longest bpfkit accepts (a path is at most 4095 bytes, a name 255)")
    parts, starts = _fields(text)
    kind = ALIASES.get(parts[0], parts[0])
    if kind not in KINDS:
        known = ", ".join(sorted(KINDS))
        raise _fail(text, 0, f"unknown probe type {parts[0]!r} (known: {known})")
    args, argstarts = parts[1:], starts[1:]
    if not args or (len(args) == 1 and not args[0]):
        raise _fail(text, len(text), "missing target after ':'")
    parse = _PARSERS[kind]
    return parse(kind, text, args, argstarts)


def _arity(text: str, args: list[str], starts: list[int], low: int, high: int, form: str) -> None:
    if len(args) < low:
        raise _fail(text, len(text), f"too few fields: expected {form}")
    if len(args) > high:
        raise _fail(text, starts[high], f"too many fields: expected {form}")


def _kprobe(kind: str, text: str, args: list[str], starts: list[int]) -> ProbeSpec:
    _arity(text, args, starts, 1, 2, f"{kind}:[MODULE:]FUNCTION[+OFFSET]")
    module = ""
    if len(args) == 2:
        module = _check(_KERNEL_NAME, text, args[0], starts[0], "module name")
    func, offset = _split_offset(text, args[-1], starts[-1])
    _check(_IDENT, text, func, starts[-1], "function name")
    if offset and kind == "kretprobe":
        raise _fail(text, starts[-1] + len(func), "a kretprobe takes no offset")
    return ProbeSpec(kind, text, function=func, offset=offset, module=module)


def _uprobe(kind: str, text: str, args: list[str], starts: list[int]) -> ProbeSpec:
    _arity(text, args, starts, 2, 2, f"{kind}:BINARY:FUNCTION[+OFFSET] or {kind}:BINARY:0xADDRESS")
    binary = args[0]
    if not binary:
        raise _fail(text, starts[0], "missing binary (a path or a library name such as libc)")
    target = args[1]
    if re.match(r"^(0x[0-9a-fA-F]+|\d+)$", target):
        return ProbeSpec(kind, text, binary=binary, address=int(target, 0))
    func, offset = _split_offset(text, target, starts[1])
    _check(_UFUNC, text, func, starts[1], "function name")
    if offset and kind == "uretprobe":
        raise _fail(text, starts[1] + len(func), "a uretprobe takes no offset")
    return ProbeSpec(kind, text, binary=binary, function=func, offset=offset)


def _session(kind: str, text: str, args: list[str], starts: list[int]) -> ProbeSpec:
    """kprobe.session:FN and uprobe.session:BINARY:FN (libbpf's section names): a session
    link takes function names or wildcards, no offsets, addresses or modules."""
    if kind == "kprobe.session":
        _arity(text, args, starts, 1, 1, "kprobe.session:FUNCTION")
        return ProbeSpec(kind, text, function=_check(_IDENT, text, args[0], starts[0], "function name"))
    _arity(text, args, starts, 2, 2, "uprobe.session:BINARY:FUNCTION")
    binary = args[0]
    if not binary:
        raise _fail(text, starts[0], "missing binary")
    return ProbeSpec(kind, text, binary=binary, function=_check(_UFUNC, text, args[1], starts[1], "function name"))


def _usdt(kind: str, text: str, args: list[str], starts: list[int]) -> ProbeSpec:
    _arity(text, args, starts, 2, 3, "usdt:BINARY:[PROVIDER:]NAME")
    provider = ""
    if len(args) == 3:
        provider = _check(_EVENT_NAME, text, args[1], starts[1], "provider")
    name = _check(_EVENT_NAME, text, args[-1], starts[-1], "probe name")
    if not args[0]:
        raise _fail(text, starts[0], "missing binary")
    return ProbeSpec(kind, text, binary=args[0], provider=provider, function=name)


def _tracepoint(kind: str, text: str, args: list[str], starts: list[int]) -> ProbeSpec:
    _arity(text, args, starts, 2, 2, "tracepoint:CATEGORY:NAME")
    category = _check(_TP_GROUP, text, args[0], starts[0], "tracepoint category")
    name = _check(_KERNEL_NAME, text, args[1], starts[1], "tracepoint name")
    return ProbeSpec(kind, text, category=category, function=name)


def _btf_func(kind: str, text: str, args: list[str], starts: list[int]) -> ProbeSpec:
    _arity(text, args, starts, 1, 2, f"{kind}:[MODULE:]NAME")
    module = _check(_KERNEL_NAME, text, args[0], starts[0], "module name") if len(args) == 2 else ""
    if kind == "rawtracepoint":  # a tracepoint's name, which may start with a digit: 9p_client_req
        func = _check(_KERNEL_NAME, text, args[-1], starts[-1], "tracepoint name")
    else:
        func = _check(_IDENT, text, args[-1], starts[-1], "function name")
    return ProbeSpec(kind, text, function=func, module=module)


def _profile(kind: str, text: str, args: list[str], starts: list[int]) -> ProbeSpec:
    _arity(text, args, starts, 2, 2, f"{kind}:UNIT:N with UNIT one of hz, s, ms, us")
    if args[0] not in PROFILE_UNITS:
        raise _fail(text, starts[0], f"unknown unit {args[0]!r} (hz, s, ms or us)")
    count = _number(text, args[1], starts[1], "rate")
    if count <= 0:
        raise _fail(text, starts[1], "rate must be positive")
    return ProbeSpec(kind, text, unit=args[0], count=count)


def _counter(kind: str, text: str, args: list[str], starts: list[int]) -> ProbeSpec:
    _arity(text, args, starts, 1, 2, f"{kind}:EVENT[:COUNT]")
    table = SOFTWARE_EVENTS if kind == "software" else HARDWARE_EVENTS
    if args[0] not in table:
        known = ", ".join(sorted(table))
        raise _fail(text, starts[0], f"unknown {kind} event {args[0]!r} (known: {known})")
    count = _number(text, args[1], starts[1], "count") if len(args) == 2 else 0
    if len(args) == 2 and count <= 0:
        raise _fail(text, starts[1], "count must be positive")
    return ProbeSpec(kind, text, event=args[0], config=table[args[0]], count=count)


def _xdp(kind: str, text: str, args: list[str], starts: list[int]) -> ProbeSpec:
    _arity(text, args, starts, 1, 1, "xdp:INTERFACE")
    iface = _check(_IFACE, text, args[0], starts[0], "interface name")
    return ProbeSpec(kind, text, iface=iface)


def _tc(kind: str, text: str, args: list[str], starts: list[int]) -> ProbeSpec:
    _arity(text, args, starts, 2, 2, "tc:INTERFACE:ingress|egress")
    iface = _check(_IFACE, text, args[0], starts[0], "interface name")
    if args[1] not in ("ingress", "egress"):
        raise _fail(text, starts[1], "direction must be ingress or egress")
    return ProbeSpec(kind, text, iface=iface, direction=args[1])


def _netkit(kind: str, text: str, args: list[str], starts: list[int]) -> ProbeSpec:
    _arity(text, args, starts, 1, 2, "netkit:INTERFACE[:primary|peer]")
    iface = _check(_IFACE, text, args[0], starts[0], "interface name")
    if len(args) == 2 and args[1] not in ("primary", "peer"):
        raise _fail(text, starts[1], "device must be primary or peer")
    return ProbeSpec(kind, text, iface=iface, direction=args[1] if len(args) == 2 else "primary")


_PARSERS = {
    "kprobe": _kprobe,
    "kretprobe": _kprobe,
    "uprobe": _uprobe,
    "uretprobe": _uprobe,
    "kprobe.session": _session,
    "uprobe.session": _session,
    "usdt": _usdt,
    "tracepoint": _tracepoint,
    "rawtracepoint": _btf_func,
    "fentry": _btf_func,
    "fexit": _btf_func,
    "profile": _profile,
    "interval": _profile,
    "software": _counter,
    "hardware": _counter,
    "xdp": _xdp,
    "tc": _tc,
    "netkit": _netkit,
}
