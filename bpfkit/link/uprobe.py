# SPDX-License-Identifier: Apache-2.0
"""Uprobes and uretprobes: a kprobe-type program on a user-space binary's code.

The kernel places a uprobe at a *file offset* of a binary (inode + offset), so it fires in
every process that maps that file, now or later (or in one process with ``pid``).
:class:`UprobeTarget` turns a function name into that offset (``.symtab``/``.dynsym``, STT_FUNC,
through its PT_LOAD segment), or takes a virtual address or a raw file offset, and resolves
library names (``libc`` -> /usr/lib/x86_64-linux-gnu/libc.so.6) as bpftrace does.

The probe is made through the uprobe PMU (4.17, 33ea4b24277b: the path in config1, the offset
in config2, retprobe and ref_ctr_offset bits where ``format/`` says), or through
``uprobe_events`` in tracefs (``tracefs=True``, or when the PMU is missing, or when the PMU
lacks ``ref_ctr_offset`` (4.20, a6ca88b241d5)).

``ref_ctr_offset`` is the file offset of a USDT semaphore: the kernel increments that u16 in
every process mapping the binary while the probe exists (1cc33161a83d), which is how
``if (PROVIDER_NAME_ENABLED())`` guards in traced programs switch on.
"""

from __future__ import annotations

import errno
import os
import re
from typing import Any

from .._kernel import pmu as _pmu
from .._kernel import tracefs as _tracefs
from .._protocols import ProgramArg
from ..errors import BPFKitError, KernelError, NotFoundError, NotSupportedError, ParseError, UsageError
from ._binary import STT_FUNC, STT_GNU_IFUNC, BinaryImage, ElfSymbol, resolve_binary
from .base import Link
from .kind import FUNC_OFF, AttachOptions, LinkKind, NamedSection, SectionTarget
from .perf_event import AttachMode, PerfEvent, PerfEventIoctlLink, PerfEventLink, attach_perf_event, check_program
from .tracefs_probes import TracefsProbe

__all__ = ["UprobeTarget", "uprobe", "uretprobe"]

_ENOTSUPP = 524  # kernel-internal: e.g. a uprobe on a trap instruction


class UprobeTarget:
    """A binary to place uprobes in: a path (``/usr/bin/bash``), a program on $PATH (``bash``)
    or a library name (``libc``, ``libc.so.6``). What uprobe_multi links and USDT probes build
    on; :class:`bpfkit.link.Executable` adds them as methods.

    >>> exe = UprobeTarget("libc")
    >>> lk = exe.uprobe("malloc", prog, pid=1234)
    """

    def __init__(self, binary: str) -> None:
        self.name = binary
        self.path = resolve_binary(binary)
        self._image: BinaryImage | None = None

    @property
    def image(self) -> BinaryImage:
        if self._image is None:
            self._image = BinaryImage.cached(self.path)
        return self._image

    def symbols(self) -> dict[str, int]:
        """Function name -> file offset, for every defined function."""
        image = self.image
        out = {}
        for name, sym in image.functions.items():
            off = image.file_offset(sym.value)
            if off is not None:
                out[name] = off
        return out

    def symbol_offset(self, symbol: str, offset: int = 0) -> int:
        """The file offset of ``symbol`` + ``offset``.

        A plain name means what the dynamic linker binds it to: the default version
        (``memcpy`` in glibc is ``memcpy@@GLIBC_2.14``); ``name@VERSION`` picks a compat
        version. NotFoundError says whether the symbol is absent, only imported (then: attach
        in the library that defines it), an IFUNC, or not a function.
        """
        image = self.image
        fn = image.resolve(symbol) if "@" in symbol else image.functions.get(symbol)
        if fn is None or fn.type != STT_FUNC:
            raise self._why_not_found(symbol)
        base = image.file_offset(fn.value)
        if base is None:
            raise NotFoundError(f"{symbol!r} in {self.path}: address {fn.value:#x} is in no PT_LOAD segment")
        if offset and fn.size and offset >= fn.size:
            raise UsageError(f"offset {offset:#x} is past the end of {symbol} ({fn.size} bytes)")
        return base + offset

    def address_offset(self, address: int) -> int:
        """The file offset of virtual address ``address`` (as ``nm``/``objdump`` show it)."""
        off = self.image.file_offset(address)
        if off is None:
            raise NotFoundError(f"address {address:#x} is in no loadable segment of {self.path}")
        return off

    def _why_not_found(self, symbol: str) -> NotFoundError:
        image = self.image
        entries = image.lookup(symbol)
        bound = image.resolve(symbol)
        if bound is not None and bound.type == STT_GNU_IFUNC:
            return NotFoundError(
                f"{bound.full_name!r} in {self.path} is an indirect function (STT_GNU_IFUNC): its symbol "
                "points at the resolver that picks an implementation at load time; attach to "
                "the implementation instead" + _ifunc_choice(self.path, self.image, bound)
                + _other_versions(entries, bound)
            )
        if bound is not None:
            return NotFoundError(f"{symbol!r} in {self.path} is not a function")
        if entries:
            libs = ", ".join(image.needed) or "a shared library"
            return NotFoundError(
                f"{symbol!r} is imported by {self.path}, not defined there: attach in the library "
                f"that defines it (it links {libs}), e.g. Executable('libc').uprobe({symbol!r}, prog)"
            )
        tables = {s.table for s in image.symbols}
        stripped = "" if ".symtab" in tables else " (the binary is stripped: only .dynsym was searched)"
        return NotFoundError(f"symbol {symbol!r} not found in {self.path}{stripped}")

    def _offset(self, symbol: str | None, offset: int, address: int | None, file_offset: int | None) -> int:
        given = [x is not None for x in (address, file_offset)] + [bool(symbol)]
        if sum(given) != 1:
            raise UsageError("give exactly one of a symbol, address= (virtual) or file_offset=")
        if offset < 0:
            raise UsageError(f"negative offset {offset}")
        if symbol:
            return self.symbol_offset(symbol, offset)
        if address is not None:
            return self.address_offset(address) + offset
        assert file_offset is not None
        return file_offset + offset

    def _attach(self, symbol: str | None, prog: ProgramArg, retprobe: bool, offset: int, address: int | None,
                file_offset: int | None, pid: int | None, ref_ctr_offset: int, cookie: int,
                mode: AttachMode | str, tracefs: bool) -> PerfEventLink | PerfEventIoctlLink:
        kind = "uretprobe" if retprobe else "uprobe"
        where = symbol or f"{address if address is not None else file_offset:#x}"
        what = f"{kind} {self.path}:{where}" + (f"+{offset:#x}" if offset and symbol else "")
        try:
            if retprobe and offset:
                raise UsageError("a uretprobe takes no offset (it fires when the function returns)")
            check_program(prog, "uprobe", what)
            file_off = self._offset(symbol, offset, address, file_offset)
            hint = f"{os.path.basename(self.path)}_{symbol or hex(file_off)}"
            event = _open_uprobe(self.path, file_off, retprobe, pid, ref_ctr_offset, tracefs, hint, what)
            return attach_perf_event(event, prog, cookie=cookie, mode=mode)
        except BPFKitError as exc:
            raise exc.wrap(f"attach {what}")

    def uprobe(
        self,
        symbol: str | None,
        prog: ProgramArg,
        *,
        offset: int = 0,
        address: int | None = None,
        file_offset: int | None = None,
        pid: int | None = None,
        ref_ctr_offset: int = 0,
        cookie: int = 0,
        mode: AttachMode | str = AttachMode.AUTO,
        tracefs: bool = False,
    ) -> PerfEventLink | PerfEventIoctlLink:
        """Run ``prog`` when ``symbol`` (+ ``offset``) is executed, in any process mapping
        this binary or only in ``pid``. Instead of a symbol: ``address=`` (a virtual address)
        or ``file_offset=``. ``ref_ctr_offset``: a USDT semaphore's file offset."""
        return self._attach(symbol, prog, False, offset, address, file_offset, pid, ref_ctr_offset, cookie, mode, tracefs)

    def uretprobe(
        self,
        symbol: str | None,
        prog: ProgramArg,
        *,
        address: int | None = None,
        file_offset: int | None = None,
        pid: int | None = None,
        ref_ctr_offset: int = 0,
        cookie: int = 0,
        mode: AttachMode | str = AttachMode.AUTO,
        tracefs: bool = False,
    ) -> PerfEventLink | PerfEventIoctlLink:
        """Run ``prog`` when the function at ``symbol`` returns (the kernel hijacks the return
        address on entry)."""
        return self._attach(symbol, prog, True, 0, address, file_offset, pid, ref_ctr_offset, cookie, mode, tracefs)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.path!r})"


def _no_uprobes() -> NotSupportedError:
    return NotSupportedError(
        "uprobes",
        f"this kernel has no uprobe PMU ({_pmu.PMU_ROOT}/uprobe) and no uprobe_events in tracefs: "
        "it was built without CONFIG_UPROBES (or CONFIG_UPROBE_EVENTS)",
    )


def _classify(exc: KernelError, path: str, offset: int) -> BPFKitError:
    if exc.errno == errno.ENOENT:
        return NotFoundError(f"{path} not found by the kernel")
    if exc.errno == _ENOTSUPP:
        return exc.wrap(f"the kernel cannot probe {path} at {offset:#x} ({instruction_refused(path, offset)})")
    if exc.errno == errno.EINVAL:
        return exc.wrap(f"the kernel refused offset {offset:#x} in {path} (past the end of the file, or a bad ref_ctr_offset?)")
    return exc


def instruction_refused(path: str, offset: int) -> str:
    """Why the kernel's uprobe code gives ENOTSUPP for ``offset``: it cannot single-step or
    emulate the instruction there (arch_uprobe_analyze_insn; on x86 a lock or segment prefix,
    int3, syscall ...), with its first bytes read from the file."""
    try:
        with open(path, "rb") as f:
            f.seek(offset)
            head = f.read(4)
    except OSError:
        head = b""
    shown = f"instruction {head.hex(' ')}...: " if head else ""
    return f"{shown}uprobes cannot single-step or emulate it (on x86: a lock or segment prefix, int3, syscall ...)"


def _ifunc_choice(path: str, image: BinaryImage, bound: ElfSymbol) -> str:
    """" (here the dynamic linker chose __memmove_avx_unaligned_erms at 0x16d800: ...)": what
    the IFUNC's resolver picked in this process, when ``path`` is loaded here (the choice
    depends on the CPU, so other processes on this machine normally get the same)."""
    if bound.hidden:
        return ""  # dlsym finds the default version only
    import ctypes

    try:
        handle = ctypes.CDLL(path, mode=os.RTLD_NOLOAD | os.RTLD_LAZY)  # only if already loaded
        address = ctypes.cast(getattr(handle, bound.name), ctypes.c_void_p).value
        with open("/proc/self/maps") as maps:
            base = next(int(f[0].split("-")[0], 16) for f in (line.split() for line in maps)
                        if len(f) >= 6 and int(f[2], 16) == 0 and os.path.realpath(f[5]) == path)
    except (OSError, AttributeError, StopIteration, ValueError):
        return ""
    if address is None:
        return ""
    vaddr = address - base + min((seg.vaddr for seg in image.segments), default=0)
    if image.file_offset(vaddr) is None:
        return ""
    named = image.symbol_at(vaddr)
    what = f"{named[0].name} at {vaddr:#x}" if named and named[1] == 0 else f"the code at {vaddr:#x}"
    return (f" (in this process the dynamic linker chose {what}: attach there, e.g. "
            f"uprobe:{path}:{named[0].name if named and named[1] == 0 else hex(vaddr)})")


def _other_versions(entries: list[ElfSymbol], bound: ElfSymbol) -> str:
    """", or name one of its other versions: memcpy@GLIBC_2.2.5" when the name has some."""
    others = sorted({e.full_name for e in entries if e.defined and e.type == STT_FUNC and e.version
                     and e.version != bound.version})
    return f", or name one of its other versions: {', '.join(others)}" if others else ""


def _open_uprobe(path: str, offset: int, retprobe: bool, pid: int | None, ref_ctr_offset: int,
                 force_tracefs: bool, hint: str, what: str) -> PerfEvent:
    pid_arg = pid if pid is not None and pid > 0 else -1
    has_pmu = _pmu.has_pmu("uprobe")
    # uprobe_events is looked for only when it may be used (a stat per probe otherwise).
    has_events = (force_tracefs or not has_pmu or bool(ref_ctr_offset)) and _tracefs.has_probe_events("uprobe")
    if not has_pmu and not has_events:
        raise _no_uprobes()
    use_tracefs = force_tracefs or not has_pmu
    if ref_ctr_offset and not use_tracefs:
        try:
            _pmu.pmu_format("uprobe", "ref_ctr_offset")
        except NotSupportedError:
            if not has_events:
                raise NotSupportedError("uprobe ref_ctr_offset", "neither the uprobe PMU nor uprobe_events take it", "4.20") from None
            use_tracefs = True
    if use_tracefs and not has_events:
        raise NotSupportedError("uprobe_events in tracefs", "tracefs was asked for, and this kernel lacks CONFIG_UPROBE_EVENTS")
    if not use_tracefs:
        try:
            fd = _pmu.open_probe("uprobe", path, offset, retprobe=retprobe, ref_ctr_offset=ref_ctr_offset,
                                 pid=pid_arg, what=what)
        except KernelError as exc:
            raise _classify(exc, path, offset) from None
        return PerfEvent(fd, what)
    target = f"{path}:{offset:#x}" + (f"({ref_ctr_offset:#x})" if ref_ctr_offset else "")
    if any(c.isspace() for c in path):
        raise UsageError(f"uprobe_events cannot name a path with spaces: {path!r}")
    try:
        probe = TracefsProbe.create("uprobe", target, retprobe=retprobe, hint=hint)
    except KernelError as exc:
        raise _classify(exc, path, offset) from None
    try:
        fd = _tracefs.open_trace_event(probe.id, pid_arg, what)
    except BaseException:
        probe.remove()
        raise
    return PerfEvent(fd, what, probe)


def uprobe(binary: str, symbol: str | None, prog: ProgramArg, **kw: Any) -> PerfEventLink | PerfEventIoctlLink:
    """``UprobeTarget(binary).uprobe(symbol, prog, **kw)``."""
    return UprobeTarget(binary).uprobe(symbol, prog, **kw)


def uretprobe(binary: str, symbol: str | None, prog: ProgramArg, **kw: Any) -> PerfEventLink | PerfEventIoctlLink:
    """``UprobeTarget(binary).uretprobe(symbol, prog, **kw)``."""
    return UprobeTarget(binary).uretprobe(symbol, prog, **kw)


# ----------------------------------------------------------------------- the kind's record
def _parse_section(sec: NamedSection, section: str, target: str) -> SectionTarget:
    prefix, kind = sec.prefix, sec.kind
    binary, colon, func = target.rpartition(":")
    if not colon or not binary or not func:
        raise ParseError(f"section {section!r}: expected {prefix}/BINARY:FUNCTION[+OFFSET] or {prefix}/BINARY:0xOFFSET")
    if re.fullmatch(r"0x[0-9a-fA-F]+|\d+", func):
        return SectionTarget(kind, target, binary=binary, file_offset=int(func, 0))
    m = FUNC_OFF.match(func)
    if not m:
        raise ParseError(f"section {section!r}: bad function {func!r}")
    return SectionTarget(kind, target, m["func"], int(m["off"] or "0", 0), binary=binary)


def _attach_section(prog: ProgramArg, target: SectionTarget, o: AttachOptions, section: str) -> Link:
    exe = UprobeTarget(target.binary)
    symbol = target.symbol if target.file_offset is None else None
    if target.kind == "uprobe":
        return exe.uprobe(symbol, prog, offset=target.offset, file_offset=target.file_offset, pid=o.pid,
                          mode=o.mode, cookie=o.cookie)
    if target.offset:
        raise ParseError(f"section {section!r}: a uretprobe takes no offset")
    return exe.uretprobe(symbol, prog, file_offset=target.file_offset, pid=o.pid, mode=o.mode, cookie=o.cookie)


# uprobe:BIN:FN and uretprobe:BIN:FN probe specs are bpfkit.link.multi's (a wildcard is a multi link).
KIND = LinkKind(
    "uprobe",
    sections=tuple(NamedSection(prefix, prefix.removesuffix(".s"), _parse_section, _attach_section)
                   for prefix in ("uprobe", "uprobe.s", "uretprobe", "uretprobe.s")),
    features=("uprobe_pmu",),
)
