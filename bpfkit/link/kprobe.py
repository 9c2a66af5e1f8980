# SPDX-License-Identifier: Apache-2.0
"""Kprobes and kretprobes: a kprobe program on a kernel symbol (or symbol+offset).

Two ways to make the probe, as cilium/ebpf's link/kprobe.go:

* the **kprobe PMU** (4.17, e12f03d7031a): perf_event_open with the PMU's type, the symbol in
  config1 and the offset in config2, the retprobe bit where ``format/retprobe`` says. The probe
  lives as long as the perf event; nothing is left in tracefs.
* **kprobe_events** in tracefs, when the PMU is missing, when asked (``tracefs=True``), or when
  a kretprobe's ``maxactive`` is set (only the tracefs syntax ``r<N>:`` carries it, 4.12).
  Probes made there carry a ``bpfkit_<pid>_...`` group and are removed on close.

Symbols may hold dots (gcc clones such as ``udp_send_skb.isra.52``; some older kernels'
PMUs refuse dots with EINVAL, which then falls back to tracefs), an offset, or a module prefix
(``nf_conntrack:nf_conntrack_destroy``). A symbol that is not found is retried with the
architecture's syscall-wrapper prefix (``__x64_sys_openat`` for ``sys_openat``, 4.17+ kernels
with ARCH_HAS_SYSCALL_WRAPPER), so ``kprobe("sys_openat", ...)`` works anywhere.

Errors tell apart: NotFoundError (no such symbol, also naming the prefixed retry),
NotSupportedError (no kprobes at all: the kernel lacks CONFIG_KPROBES), KernelPermissionError,
BusyError.
"""

from __future__ import annotations

import errno
import platform
import re
from typing import Any

from .._kernel import pmu as _pmu
from .._kernel import tracefs as _tracefs
from .._protocols import ProgramArg
from ..errors import BPFKitError, KernelError, NotFoundError, NotSupportedError, ParseError, UsageError
from .base import Link
from .kind import FUNC_OFF, AttachOptions, LinkKind, NamedSection, SectionTarget
from .perf_event import AttachMode, PerfEvent, PerfEventIoctlLink, PerfEventLink, attach_perf_event, check_program
from .tracefs_probes import TracefsProbe

__all__ = ["kprobe", "kretprobe", "ksyscall", "syscall_prefix", "syscall_wrapper", "validate_kernel_symbol"]

_SYMBOL = re.compile(r"^(?:[A-Za-z_][0-9A-Za-z_-]*:)?[A-Za-z_][0-9A-Za-z_.]*$")

# The prefix of syscall entry points on kernels built with ARCH_HAS_SYSCALL_WRAPPER
# (x86_64 since 4.17, arm64 since 4.19, riscv since 6.6, s390 since 5.13).
_SYSCALL_PREFIXES = {"x86_64": "__x64_", "aarch64": "__arm64_", "riscv64": "__riscv_", "s390x": "__s390x_"}
_EILSEQ = errno.EILSEQ
_ENOTSUPP = 524  # the kernel-internal ENOTSUPP


def syscall_prefix() -> str:
    """``__x64_`` on x86_64: what this architecture's syscall wrappers start with."""
    return _SYSCALL_PREFIXES.get(platform.machine(), "")


def syscall_wrapper(symbol: str) -> str:
    """``sys_openat`` -> ``__x64_sys_openat`` (unchanged when already prefixed or unknown)."""
    prefix = syscall_prefix()
    if not prefix or symbol.startswith(prefix) or ":" in symbol:
        return symbol
    return prefix + symbol


def validate_kernel_symbol(symbol: str) -> str:
    """``[MODULE:]SYMBOL`` with ``SYMBOL`` matching ``[A-Za-z_][0-9A-Za-z_.]*``."""
    if not symbol or not _SYMBOL.match(symbol):
        raise ParseError(f"invalid kernel symbol {symbol!r}: expected [MODULE:]NAME with NAME matching [A-Za-z_][0-9A-Za-z_.]*")
    return symbol


def _no_kprobes() -> NotSupportedError:
    return NotSupportedError(
        "kprobes",
        f"this kernel has no kprobe PMU ({_pmu.PMU_ROOT}/kprobe) and no kprobe_events in tracefs: "
        "it was built without CONFIG_KPROBES (or CONFIG_KPROBE_EVENTS)",
    )


class _DotsRefused(Exception):
    """The PMU refused a symbol with dots (older kernels): retry through tracefs."""


def _classify(exc: KernelError, symbol: str, offset: int) -> BPFKitError:
    err = exc.errno
    if err == errno.ENOENT:
        # Since 97c753e62e6c a missing symbol gives ENOENT (EINVAL before).
        return NotFoundError(f"kernel symbol {symbol!r} not found")
    if err == errno.EINVAL:
        exists = _tracefs.kernel_symbol_exists(symbol)
        if exists is False:
            # 6.11+ tracefs and pre-4.x PMUs say EINVAL for unknown symbols.
            return NotFoundError(f"kernel symbol {symbol!r} not found")
    if err == _EILSEQ:
        # ab105a4fb894: sym+offset does not fall on an instruction boundary.
        return exc.wrap(f"{symbol}+{offset:#x} is not on an instruction boundary")
    if err == errno.ERANGE:
        return exc.wrap(f"offset {offset:#x} is beyond {symbol}")
    return exc


def _pmu_kprobe(symbol: str, offset: int, retprobe: bool, what: str) -> PerfEvent:
    try:
        fd = _pmu.open_probe("kprobe", symbol, offset, retprobe=retprobe, what=what)
    except KernelError as exc:
        if exc.errno == errno.EINVAL and "." in symbol:
            raise _DotsRefused() from None
        raise _classify(exc, symbol, offset) from None
    return PerfEvent(fd, what)


def _tracefs_kprobe(symbol: str, offset: int, retprobe: bool, maxactive: int, what: str) -> PerfEvent:
    target = f"{symbol}+{offset:#x}" if offset else symbol
    try:
        probe = TracefsProbe.create("kprobe", target, retprobe=retprobe, maxactive=maxactive, hint=symbol)
    except KernelError as exc:
        raise _classify(exc, symbol, offset) from None
    try:
        fd = _tracefs.open_trace_event(probe.id, -1, what)
    except BaseException:
        probe.remove()
        raise
    return PerfEvent(fd, what, probe)


def _open_kprobe(symbol: str, offset: int, retprobe: bool, maxactive: int, force_tracefs: bool, what: str) -> PerfEvent:
    has_pmu = _pmu.has_pmu("kprobe")
    has_events = _tracefs.has_probe_events("kprobe")
    if not has_pmu and not has_events:
        raise _no_kprobes()
    use_tracefs = force_tracefs or bool(maxactive) or not has_pmu
    if use_tracefs and not has_events:
        why = "kretprobe maxactive is only expressed through kprobe_events" if maxactive else "tracefs was asked for"
        raise NotSupportedError("kprobe_events in tracefs", f"{why}, and this kernel lacks CONFIG_KPROBE_EVENTS")
    candidates = [symbol]
    wrapped = syscall_wrapper(symbol)
    if wrapped != symbol:
        candidates.append(wrapped)
    for sym in candidates:
        try:
            if not use_tracefs:
                try:
                    return _pmu_kprobe(sym, offset, retprobe, what)
                except _DotsRefused:
                    if not has_events:
                        raise NotSupportedError("kprobe PMU symbols with dots",
                                                f"the PMU refused {sym!r} and there is no kprobe_events") from None
            return _tracefs_kprobe(sym, offset, retprobe, maxactive, what)
        except NotFoundError:
            continue
    tried = " (also tried " + repr(candidates[1]) + ")" if len(candidates) > 1 else ""
    raise NotFoundError(f"kernel symbol {symbol!r} not found{tried}: see /proc/kallsyms")


def _attach(symbol: str, prog: ProgramArg, offset: int, retprobe: bool, maxactive: int, cookie: int,
            mode: AttachMode | str, tracefs: bool) -> PerfEventLink | PerfEventIoctlLink:
    kind = "kretprobe" if retprobe else "kprobe"
    what = f"{kind} {symbol}" + (f"+{offset:#x}" if offset else "")
    try:
        validate_kernel_symbol(symbol)
        if offset < 0:
            raise UsageError(f"negative offset {offset}")
        if retprobe and offset:
            raise UsageError("a kretprobe takes no offset (the kernel refuses return probes off a function's entry)")
        if maxactive < 0 or (maxactive and not retprobe):
            raise UsageError("maxactive applies to kretprobes only and must be positive")
        check_program(prog, "kprobe", what)
        event = _open_kprobe(symbol, offset, retprobe, maxactive, tracefs, what)
        return attach_perf_event(event, prog, cookie=cookie, mode=mode)
    except BPFKitError as exc:
        raise exc.wrap(f"attach {what}")


def kprobe(
    symbol: str,
    prog: ProgramArg,
    *,
    offset: int = 0,
    cookie: int = 0,
    mode: AttachMode | str = AttachMode.AUTO,
    tracefs: bool = False,
) -> PerfEventLink | PerfEventIoctlLink:
    """Run ``prog`` when kernel ``symbol`` (+ ``offset``) executes.

    ``cookie``: what bpf_get_attach_cookie() returns (5.15, link mode). ``tracefs=True`` makes
    the probe through kprobe_events even when the kprobe PMU exists.
    """
    return _attach(symbol, prog, offset, False, 0, cookie, mode, tracefs)


def kretprobe(
    symbol: str,
    prog: ProgramArg,
    *,
    maxactive: int = 0,
    cookie: int = 0,
    mode: AttachMode | str = AttachMode.AUTO,
    tracefs: bool = False,
) -> PerfEventLink | PerfEventIoctlLink:
    """Run ``prog`` when kernel ``symbol`` returns.

    ``maxactive``: how many instances of the function may be probed at once (the kernel's
    default is about 2 x NR_CPUS; misses beyond it are counted in the link info). It forces
    kprobe_events, whose ``r<N>:`` syntax is the only way to say it.
    """
    return _attach(symbol, prog, 0, True, maxactive, cookie, mode, tracefs)


def ksyscall(name: str, prog: ProgramArg, *, retprobe: bool = False, **kw: Any) -> PerfEventLink | PerfEventIoctlLink:
    """libbpf's ksyscall: a k(ret)probe on syscall ``name`` (``openat``) through its wrapper."""
    symbol = name if name.startswith("sys_") or name.startswith(syscall_prefix() or "\0") else "sys_" + name
    symbol = syscall_wrapper(symbol)
    return kretprobe(symbol, prog, **kw) if retprobe else kprobe(symbol, prog, **kw)


# ----------------------------------------------------------------------- the kind's record
def _parse_section(sec: NamedSection, section: str, target: str) -> SectionTarget:
    m = FUNC_OFF.match(target)
    if not m:
        raise ParseError(f"section {section!r}: expected {sec.prefix}/SYMBOL[+OFFSET]")
    return SectionTarget(sec.kind, target, m["func"], int(m["off"] or "0", 0))


def _attach_section(prog: ProgramArg, target: SectionTarget, o: AttachOptions, section: str) -> Link:
    if target.kind == "kprobe":
        return kprobe(target.symbol, prog, offset=target.offset, mode=o.mode, cookie=o.cookie)
    if target.kind == "kretprobe":
        return kretprobe(target.symbol, prog, mode=o.mode, cookie=o.cookie)
    return ksyscall(target.symbol, prog, retprobe=target.kind == "kretsyscall", mode=o.mode, cookie=o.cookie)


# kprobe:FN and kretprobe:FN probe specs are bpfkit.link.multi's (a wildcard is a multi link).
KIND = LinkKind(
    "kprobe",
    sections=tuple(NamedSection(prefix, prefix, _parse_section, _attach_section)
                   for prefix in ("kprobe", "kretprobe", "ksyscall", "kretsyscall")),
    features=("kprobe_pmu",),
)
