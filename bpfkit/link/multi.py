# SPDX-License-Identifier: Apache-2.0
"""Multi-attach: one program on many kernel functions (kprobe_multi) or many offsets of one
binary (uprobe_multi) through a single bpf_link, each target with its own cookie.

* **kprobe_multi** (5.18, 0dcac2725406; needs CONFIG_FPROBE): BPF_LINK_CREATE with
  BPF_TRACE_KPROBE_MULTI and arrays of symbols (or addresses) and cookies. The kernel sorts
  the symbols itself, carrying the cookies along (``sort_r`` in bpf_kprobe_multi_link_attach),
  so callers pass them in any order; one unknown symbol fails the whole link with ESRCH.
  ``BPF_F_KPROBE_MULTI_RETURN`` makes every target a return probe.
* **uprobe_multi** (6.6, 89ae89f53d20): BPF_LINK_CREATE with BPF_TRACE_UPROBE_MULTI, a path
  and arrays of file offsets, USDT semaphore offsets and cookies, plus a pid filter
  (``BPF_F_UPROBE_MULTI_RETURN`` for return probes).

Link info (BPF_OBJ_GET_INFO_BY_FD) reports the targets of kprobe_multi links since 6.6
(7ac8d0d2616e; ``missed`` since 6.7, cookies since 6.9) and of uprobe_multi links since 6.9.

**Program type.** The kernel runs a multi link's program with its own context for
bpf_get_attach_cookie()/bpf_get_func_ip(), chosen at load time from the program's
expected_attach_type, so a multi link needs a program loaded with BPF_TRACE_KPROBE_MULTI /
BPF_TRACE_UPROBE_MULTI (libbpf's ``kprobe.multi``/``uprobe.multi`` sections), and since
db8eae6bc5c7 (6.5) such a program is refused on a perf event. libbpf and cilium/ebpf do not
fall back for these sections (libbpf decides the attach type at load only for USDT, from a
feature probe). bpfkit does: when the program on hand was loaded for the other path, it is
*reloaded* from its spec (same instructions, same maps, the other expected_attach_type) for
this attachment, and that copy is what the link runs (the link's program id differs from
``prog.id``; maps are shared, so the results are the same). Programs opened from a pin or an
id have no instructions to reload: they must already fit the path taken.

:class:`MultiMode` AUTO takes the multi link when the kernel has it (cached feature probe),
else falls back to one perf-event k/uprobe per target, with that target's cookie, pid and
return flag, gathered in a :class:`MultiPerfGroup` (a LinkGroup, closed concurrently); MULTI
refuses to fall back; PERF always does.

**Sessions** (:func:`kprobe_session`, 6.10; :func:`uprobe_session`, 6.13): the same links, made
with attach type BPF_TRACE_KPROBE_SESSION / BPF_TRACE_UPROBE_SESSION, run one program on entry
*and* return of every target. The entry run's
return value decides the return run: 0 lets it happen, anything else suppresses it. The kfuncs
``bpf_session_is_return()`` and ``bpf_session_cookie()`` (a u64 shared by the entry and the
return run of one call) tell the two apart; since 7.0 (with fsession) both take the program's
context as their one argument (``(void)`` before: see bpf/session_probes.bpf.c for a program
that loads on both). A session has no perf-event equivalent, so there is no fallback: a
kernel without it gives NotSupportedError naming the minimum version.
"""

from __future__ import annotations

import dataclasses
import enum
import errno
import fnmatch
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from .._kernel import bpf as _bpf
from .._kernel import tracefs as _tracefs
from .._kernel.consts import BPF_F_KPROBE_MULTI_RETURN, BPF_F_UPROBE_MULTI_RETURN, AttachType, LinkType, ProgType
from .._kernel.fd import FD
from .._protocols import ProgramArg
from ..errors import BPFKitError, KernelError, NotFoundError, NotSupportedError, UsageError
from .base import Link, LinkInfo, RawLink, _decode_info, _prog_fd, choice_of
from .group import LinkGroup, attach_many
from .kind import (
    AttachOptions,
    LinkKind,
    Section,
    SectionTarget,
    binary_pattern,
    no_wildcard_offset,
    require_pattern,
    same_cookie,
)
from .kprobe import kprobe, kretprobe, validate_kernel_symbol
from .perf_event import AttachMode
from .uprobe import UprobeTarget

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ..probespec import ProbeSpec

__all__ = [
    "MultiMode",
    "KprobeMultiInfo",
    "UprobeMultiInfo",
    "KprobeMultiLink",
    "UprobeMultiLink",
    "MultiPerfGroup",
    "kprobe_multi",
    "kretprobe_multi",
    "uprobe_multi",
    "uretprobe_multi",
    "kprobe_session",
    "uprobe_session",
    "kernel_functions",
]

Progress = Callable[[int, int], None]
_GLOB = set("*?[")
_ENOTSUPP = 524


class MultiMode(enum.Enum):
    """How a multi attach is made."""

    AUTO = "auto"  # one multi link when the kernel has them, else one perf event per target
    MULTI = "multi"  # the multi link, or NotSupportedError naming the feature and version
    PERF = "perf"  # one perf-event k/uprobe per target (a LinkGroup), even where multi links exist

    @classmethod
    def of(cls, value: MultiMode | str) -> MultiMode:
        return choice_of(cls, value, "multi-attach mode")


# ------------------------------------------------------------------------------- info
@dataclasses.dataclass(frozen=True)
class KprobeMultiInfo:
    """A kprobe_multi link's details (6.6+). ``addresses`` are sorted by the kernel, with
    ``cookies`` (6.9+; zeros before) in the same order; both are zeros when kptr_restrict
    hides kernel addresses, and empty in listings (``iter_links``) that only ask for counts."""

    count: int
    retprobe: bool
    missed: int = 0
    addresses: tuple[int, ...] = ()
    cookies: tuple[int, ...] = ()


@dataclasses.dataclass(frozen=True)
class UprobeMultiInfo:
    """A uprobe_multi link's details (6.9+): the binary, its offsets, semaphore offsets and
    cookies in attach order, the pid filter (0: every process)."""

    count: int
    retprobe: bool
    pid: int = 0
    path: str = ""
    offsets: tuple[int, ...] = ()
    ref_ctr_offsets: tuple[int, ...] = ()
    cookies: tuple[int, ...] = ()


def _decode_kprobe_multi(raw: Any) -> KprobeMultiInfo:
    k = raw.kprobe_multi
    return KprobeMultiInfo(int(k.count), bool(k.flags & BPF_F_KPROBE_MULTI_RETURN), int(k.missed))


def _decode_uprobe_multi(raw: Any) -> UprobeMultiInfo:
    u = raw.uprobe_multi
    return UprobeMultiInfo(int(u.count), bool(u.flags & BPF_F_UPROBE_MULTI_RETURN), int(u.pid))


# ------------------------------------------------------------------------------ links
class _MultiLink(RawLink):
    """A multi link: RawLink plus the targets it was made for and full info."""

    def __init__(self, fd: FD, pinned_path: str | None = None, description: str = "",
                 targets: tuple[str, ...] = (), cookies: tuple[int, ...] = ()) -> None:
        super().__init__(fd, pinned_path)
        self.description = description
        self.targets = targets  # names (or hex offsets/addresses) in attach order
        self.cookies = cookies
        self.skipped: dict[str, str] = {}  # pattern matches the kernel refused -> why

    def info(self) -> LinkInfo:
        """The kernel's info, with the target arrays filled in (see the Info classes)."""
        self._check_open("info")
        try:
            raw, name = _bpf.link_info(self.fd)
            arrays = _bpf.link_info_multi(self.fd, raw)
        except BPFKitError as exc:
            raise exc.wrap(f"info of {self.kind} link")
        info = _decode_info(raw, name)
        detail = info.detail
        if isinstance(detail, KprobeMultiInfo) and arrays:
            detail = dataclasses.replace(detail, addresses=tuple(arrays["addrs"]), cookies=tuple(arrays["cookies"]))
        elif isinstance(detail, UprobeMultiInfo) and arrays:
            detail = dataclasses.replace(detail, path=arrays["path"], offsets=tuple(arrays["offsets"]),
                                         ref_ctr_offsets=tuple(arrays["ref_ctr_offsets"]),
                                         cookies=tuple(arrays["cookies"]))
        return dataclasses.replace(info, detail=detail)

    def __len__(self) -> int:
        return len(self.targets)

    def _where(self) -> str:
        return f"{self.description}, " if self.description else ""


class KprobeMultiLink(_MultiLink):
    """A kprobe_multi bpf_link (BPF_LINK_TYPE_KPROBE_MULTI): one fprobe on many functions."""

    kind = "kprobe_multi"


class UprobeMultiLink(_MultiLink):
    """A uprobe_multi bpf_link (BPF_LINK_TYPE_UPROBE_MULTI): many uprobes of one binary."""

    kind = "uprobe_multi"


class MultiPerfGroup(LinkGroup):
    """The fallback of a multi attach: one perf-event k/uprobe link per target (in
    ``targets`` order, each with its cookie), closed concurrently as a LinkGroup."""

    kind = "multi (perf events)"

    def __init__(self, links: Sequence[Any], description: str, targets: tuple[str, ...],
                 cookies: tuple[int, ...]) -> None:
        super().__init__(links)
        self.description = description
        self.targets = targets
        self.cookies = cookies
        self.skipped: dict[str, str] = {}  # pattern matches the kernel refused -> why

    def __repr__(self) -> str:
        return f"MultiPerfGroup({self.description}, {len(self)} links)"


@dataclasses.dataclass(frozen=True)
class _Target:
    """One target of a fallback attach; shown by name in errors ("attach vfs_read (2 of 9)")."""

    name: str
    cookie: int = 0
    offset: int = 0
    ref_ctr_offset: int = 0

    def __repr__(self) -> str:
        return self.name


# --------------------------------------------------------------------- program fitting
def _check_kprobe_type(prog: Any, what: str) -> None:
    ptype = getattr(prog, "type", None)
    if ptype is not None and ptype != ProgType.KPROBE:
        have = ptype.kernel_name if hasattr(ptype, "kernel_name") else str(ptype)
        raise UsageError(f"program {getattr(prog, 'name', '')!r} is a {have} program; {what} needs a kprobe program")
    _prog_fd(prog)


def _attach_type_of(prog: Any) -> int | None:
    """The program's expected_attach_type as bpfkit knows it; None when unknown (a bare fd,
    or a program opened by id or pin: bpf_prog_info does not report it)."""
    spec = getattr(prog, "spec", None)
    if not hasattr(prog, "attach_type") or (spec is not None and not spec.instructions):
        return None
    at = prog.attach_type
    return int(at) if at is not None else 0


def _reload(prog: Any, attach_type: AttachType | None, why: str) -> Any:
    """A copy of ``prog`` loaded with expected_attach_type ``attach_type`` (None: none)."""
    from ..program import Program

    spec = getattr(prog, "spec", None)
    name = getattr(prog, "name", "")
    if spec is None or not spec.instructions:
        have = _attach_type_of(prog)
        have_name = AttachType(have).kernel_name if have else "no expected_attach_type"
        raise UsageError(
            f"program {name!r} was loaded with {have_name}; {why}, and bpfkit cannot reload it "
            "(it was opened from a pin or id, without its instructions): load it from its object"
        )
    new = dataclasses.replace(spec.copy(), attach_type=attach_type, fd_array=list(spec.fd_array))
    btf: FD | None = None
    try:
        btf_id = int(prog.info().btf_id) if (spec.func_info or spec.line_info) else 0
        if btf_id:
            btf = _bpf.fd_by_id("btf", btf_id)
        else:
            new = dataclasses.replace(new, func_info=b"", line_info=b"")
        return Program(new, btf_fd=int(btf) if btf is not None else 0)
    except BPFKitError as exc:
        raise exc.wrap(f"reload program {name!r} for {why}")
    finally:
        if btf is not None:
            btf.close()


def _fit(prog: Any, want: AttachType | None, why: str) -> tuple[Any, Any]:
    """(the program to attach, a reloaded copy to close afterwards or None)."""
    have = _attach_type_of(prog)
    if have is None:
        return prog, None  # a bare fd: the kernel judges
    wanted = int(want) if want is not None else 0
    multi = (int(AttachType.TRACE_KPROBE_MULTI), int(AttachType.TRACE_UPROBE_MULTI),
             int(AttachType.TRACE_KPROBE_SESSION), int(AttachType.TRACE_UPROBE_SESSION))
    if have == wanted or (want is None and have not in multi):
        return prog, None
    copy = _reload(prog, want, why)
    return copy, copy


# ------------------------------------------------------------------------- resolution
def _is_pattern(text: str) -> bool:
    return any(c in _GLOB for c in text)


def kernel_functions() -> list[str]:
    """Kernel functions that can be probed, as libbpf matches kprobe.multi patterns: tracefs
    ``available_filter_functions`` (module suffixes and ftrace's ``__ftrace_invalid_address___``
    placeholders dropped), else the text symbols of /proc/kallsyms (without the ``__pfx_`` /
    ``__cfi_`` padding symbols). ftrace lists one name per address, so of aliases such as
    ``__x64_sys_getppid``/``__do_sys_getppid`` (Debian 6.12) it may show only one."""
    try:
        text = _tracefs.read_file("available_filter_functions")
    except (OSError, BPFKitError):
        text = None  # e.g. EPERM under lockdown (this host)
    names: set[str] = set()
    if text is not None:
        for line in text.splitlines():
            name = line.split(" ", 1)[0]
            if name and not name.startswith("__ftrace_invalid_address__"):
                names.add(name)
        return sorted(names)
    from .._kernel import kallsyms  # here: read only when tracefs cannot answer (~1.5 ms of imports)

    try:
        names = kallsyms.function_names(exclude=("__pfx_", "__cfi_"))
    except OSError:
        pass
    return sorted(names)


def _cookies_for(names: Sequence[str], cookies: Sequence[int] | Mapping[str, int] | None, what: str) -> list[int]:
    if cookies is None:
        return [0] * len(names)
    if isinstance(cookies, Mapping):
        unknown = sorted(set(cookies) - set(names))
        if unknown:
            raise UsageError(f"cookies name targets that are not attached: {', '.join(unknown)}")
        return [int(cookies.get(n, 0)) for n in names]
    values = [int(c) for c in cookies]
    if len(values) != len(names):
        raise UsageError(f"{len(values)} cookies for {len(names)} targets (give one per target, in order)")
    for c in values:
        if not 0 <= c < 1 << 64:
            raise UsageError(f"cookie {c} is not an unsigned 64-bit value")
    return values


def _check_unique(names: Sequence[str], what: str) -> None:
    seen: set[str] = set()
    dups = sorted({n for n in names if n in seen or seen.add(n)})  # type: ignore[func-returns-value]
    if dups:
        raise UsageError(f"{', '.join(dups)} given more than once")


def _feature(name: str) -> Any:
    from .. import features

    return features.probe(name)


def _require_session(mode: MultiMode, feature: str, what: str) -> None:
    """Sessions have no perf-event fallback: the feature, or NotSupportedError."""
    if mode == MultiMode.PERF:
        raise UsageError(f"{what} has no perf-event form (one program on entry and return with a shared "
                         "cookie exists only as a multi link): use mode=MultiMode.AUTO or MULTI")
    result = _feature(feature)
    if not result.supported:
        raise NotSupportedError(f"{feature.replace('_', ' ')}s ({what})", result.reason, result.min_version)


def _use_multi(mode: MultiMode, feature: str, what: str, requirement: str) -> bool:
    if mode == MultiMode.PERF:
        return False
    result = _feature(feature)
    if result.supported:
        return True
    if mode == MultiMode.MULTI:
        raise NotSupportedError(f"{feature} links ({what})", f"{result.reason}; {requirement}; "
                                "use mode=MultiMode.AUTO or PERF for one perf event per target", result.min_version)
    return False


def _fallback(targets: Sequence[Any], attach_one: Callable[[Any], Any], progress: Progress | None,
              max_targets: int | None, description: str, names: tuple[str, ...], cookies: tuple[int, ...],
              refusal: Callable[[Any, KernelError], str] | None = None) -> MultiPerfGroup:
    """One perf event per target; with ``refusal``, a target the kernel cannot probe is left
    out (``skipped``: name -> ``refusal(target, error)``) unless all are."""
    if max_targets is not None and len(targets) > max_targets:
        raise UsageError(f"{len(targets)} targets match (more than {max_targets}, one perf event each without "
                         "multi links): narrow the pattern")
    refused: dict[str, str] = {}

    def skip(target: Any, exc: BPFKitError) -> bool:
        # A pattern's match the kernel cannot probe is left out, as bpftrace does for wildcards.
        if refusal is None or not (isinstance(exc, KernelError) and exc.errno in _PER_TARGET):
            return False
        refused[target.name] = refusal(target, exc)
        return len(refused) < len(targets)  # all refused: the last error says so

    group = attach_many(targets, attach_one, progress=progress, skip=skip)
    kept = [i for i, n in enumerate(names) if n not in refused]
    made = MultiPerfGroup(group.links, _less_refused(description, len(names), len(kept)),
                          tuple(names[i] for i in kept), tuple(cookies[i] for i in kept))
    made.skipped = refused
    return made


# Errors of BPF_LINK_CREATE/perf_event_open for one uprobe target the kernel cannot probe:
# ENOTSUPP from arch_uprobe_analyze_insn (x86: an instruction it cannot single-step or
# emulate), EINVAL (arm64 refuses such instructions with it; an offset past the file's end).
_PER_TARGET = (_ENOTSUPP, errno.EINVAL)
MAX_REFUSED = 16  # refused targets looked for before giving up (each look is one BPF_LINK_CREATE)


def _find_refused(create: Callable[[list[int]], FD], count: int, first: KernelError) -> list[tuple[int, KernelError]]:
    """Which of targets 0..count-1 the kernel refuses, after ``first`` refused them all at once:
    halving, depth first (a part that links is closed at once; one target that fails is
    refused), at most MAX_REFUSED. A failure that is not per-target propagates."""
    found: list[tuple[int, KernelError]] = []

    def search(part: list[int], exc: KernelError | None) -> None:
        if len(found) >= MAX_REFUSED:
            return
        if exc is None:
            try:
                create(part).close()
                return
            except KernelError as err:
                if err.errno not in _PER_TARGET:
                    raise
                exc = err
        if len(part) == 1:
            found.append((part[0], exc))
            return
        mid = len(part) // 2
        search(part[:mid], None)
        search(part[mid:], None)

    search(list(range(count)), first)
    return found


def _link_refused(create: Callable[[list[int]], FD], count: int) -> bool:
    """Whether the first two targets each fail alone with EINVAL: then the link itself is
    refused (a program of the wrong attach type, a bad flag), not one target."""
    for i in range(min(count, 2)):
        try:
            create([i]).close()
            return False
        except KernelError as exc:
            if exc.errno != errno.EINVAL:
                return False
    return True


def _refusal(path: str, name: str, offset: int, exc: KernelError) -> str:
    """"pthread_spin_lock (file offset 0x8ff70, ENOTSUPP: instruction f0 ff 0f 75...: ...)"."""
    from .uprobe import instruction_refused

    why = "ENOTSUPP" if exc.errno == _ENOTSUPP else errno.errorcode.get(exc.errno, str(exc.errno))
    if exc.errno == _ENOTSUPP:
        why += f": {instruction_refused(path, offset)}"
    return f"{name} (file offset {offset:#x}, {why})"


def _less_refused(description: str, matched: int, kept: int) -> str:
    """"... (5 functions)" -> "... (4 of 5 functions, 1 refused)" when some were left out."""
    if kept == matched:
        return description
    return description.replace(f"({matched} functions)", f"({kept} of {matched} functions, {matched - kept} refused)")


def _warn_skipped(what: str, total: int, refused: Mapping[str, str]) -> None:
    import warnings

    warnings.warn(f"bpfkit: {what}: skipped {len(refused)} of {total} functions the kernel refused: "
                  + "; ".join(refused.values()), RuntimeWarning, stacklevel=4)


# --------------------------------------------------------------------------- kprobes
def _kprobe_multi(symbols: str | Sequence[str] | None, prog: Any, cookies: Any, retprobe: bool,
                  mode: MultiMode | str, addresses: Sequence[int] | None, perf_mode: AttachMode | str,
                  progress: Progress | None, max_perf_targets: int | None,
                  session: bool = False) -> KprobeMultiLink | MultiPerfGroup:
    kind = "kprobe_session" if session else "kretprobe_multi" if retprobe else "kprobe_multi"
    if isinstance(symbols, str):
        shown = symbols
    elif addresses is not None and not symbols:
        shown = f"{len(addresses)} addresses"
    else:
        shown = ",".join(list(symbols or ())[:4]) + (",..." if symbols and len(symbols) > 4 else "")
    what = f"{kind} {shown}"
    try:
        mode = MultiMode.of(mode)
        _check_kprobe_type(prog, kind)
        if addresses is not None and symbols:
            raise UsageError("give symbols or addresses=, not both")
        if addresses is not None:
            addrs = [int(a) for a in addresses]
            if not addrs:
                raise UsageError("no addresses given")
            names = [f"{a:#x}" for a in addrs]
        else:
            addrs = []
            if isinstance(symbols, str) and _is_pattern(symbols):
                names = [n for n in kernel_functions() if fnmatch.fnmatchcase(n, symbols)]
                if not names:
                    raise NotFoundError(f"no kernel function matches {symbols!r} (in available_filter_functions or /proc/kallsyms)")
            else:
                names = [symbols] if isinstance(symbols, str) else list(symbols or ())
                if not names:
                    raise UsageError("no symbols given")
                for n in names:
                    validate_kernel_symbol(n)
                    if ":" in n:
                        raise UsageError(f"{n!r}: kprobe_multi takes plain function names (no MODULE: prefix)")
                _check_unique(names, what)
        values = _cookies_for(names, cookies, what)
        description = f"{what} ({len(names)} functions)" if len(names) > 1 or _is_pattern(shown) else what
        if session:
            _require_session(mode, "kprobe_session", "BPF_TRACE_KPROBE_SESSION")
        if session or _use_multi(mode, "kprobe_multi", "BPF_TRACE_KPROBE_MULTI", "kprobe_multi needs CONFIG_FPROBE"):
            want = AttachType.TRACE_KPROBE_SESSION if session else AttachType.TRACE_KPROBE_MULTI
            run, copy = _fit(prog, want, f"a {kind} link")
            try:
                fd = _kprobe_multi_link(run, names, addrs, values, retprobe, want)
            finally:
                if copy is not None:
                    copy.close()
            lk = KprobeMultiLink(fd, None, description, tuple(names), tuple(values))
            if progress is not None:
                progress(len(names), len(names))
            return lk
        if addrs:
            raise NotSupportedError(f"{kind} by address without kprobe_multi links",
                                    "the perf-event fallback attaches by symbol name; give symbols")
        run, copy = _fit(prog, None, "a perf-event kprobe")
        attach = kretprobe if retprobe else kprobe
        targets = [_Target(n, c) for n, c in zip(names, values)]
        try:
            return _fallback(targets, lambda t: attach(t.name, run, cookie=t.cookie, mode=perf_mode), progress,
                             max_perf_targets, description, tuple(names), tuple(values))
        finally:
            if copy is not None:
                copy.close()
    except BPFKitError as exc:
        raise exc.wrap(f"attach {what}")


def _kprobe_multi_link(prog: Any, names: list[str], addrs: list[int], cookies: list[int], retprobe: bool,
                       attach_type: AttachType = AttachType.TRACE_KPROBE_MULTI) -> FD:
    flags = BPF_F_KPROBE_MULTI_RETURN if retprobe else 0
    kw: dict[str, Any] = dict(cookies=cookies if any(cookies) else None, flags=flags, attach_type=attach_type)
    try:
        if addrs:
            return _bpf.link_create_kprobe_multi(_prog_fd(prog), addrs=addrs, **kw)
        return _bpf.link_create_kprobe_multi(_prog_fd(prog), syms=names, **kw)
    except KernelError as exc:
        if exc.errno == errno.ESRCH and not addrs:
            known = set(kernel_functions())
            missing = [n for n in names if n not in known]
            if missing:
                raise NotFoundError(f"kernel function {', '.join(repr(m) for m in missing[:5])} not found "
                                    "(not in available_filter_functions / kallsyms)") from None
            raise exc.wrap("the kernel could not resolve a symbol")
        if exc.errno in (errno.EOPNOTSUPP, _ENOTSUPP):
            session = attach_type == AttachType.TRACE_KPROBE_SESSION
            raise NotSupportedError("kprobe sessions" if session else "kprobe_multi links",
                                    "the kernel lacks CONFIG_FPROBE", "6.10" if session else "5.18") from None
        if exc.errno == errno.EINVAL and _attach_type_of(prog) is None:
            sec = "kprobe.session" if attach_type == AttachType.TRACE_KPROBE_SESSION else "kprobe.multi"
            raise exc.wrap(f"was the program loaded with expected_attach_type {attach_type.c_name} (SEC(\"{sec}\"))?")
        raise


def kprobe_multi(
    symbols: str | Sequence[str] | None,
    prog: Any,
    *,
    cookies: Sequence[int] | Mapping[str, int] | None = None,
    retprobe: bool = False,
    mode: MultiMode | str = MultiMode.AUTO,
    addresses: Sequence[int] | None = None,
    perf_mode: AttachMode | str = AttachMode.AUTO,
    progress: Progress | None = None,
    max_perf_targets: int | None = None,
) -> KprobeMultiLink | MultiPerfGroup:
    """Run ``prog`` on entry to (``retprobe``: return from) every kernel function in
    ``symbols``: a list of names, one name, or a glob pattern (``"vfs_*"``) matched like
    libbpf against available_filter_functions (else kallsyms); or ``addresses=``.

    ``cookies``: one per target in order, or a name -> cookie mapping (others get 0); what
    bpf_get_attach_cookie() returns there. ``mode``: see :class:`MultiMode`; ``perf_mode``
    is the AttachMode of the fallback's perf events, ``progress(done, total)`` follows it and
    ``max_perf_targets`` caps it. Returns a KprobeMultiLink, or a MultiPerfGroup after a
    fallback.
    """
    return _kprobe_multi(symbols, prog, cookies, retprobe, mode, addresses, perf_mode, progress, max_perf_targets)


def kretprobe_multi(symbols: str | Sequence[str] | None, prog: Any, **kw: Any) -> KprobeMultiLink | MultiPerfGroup:
    """:func:`kprobe_multi` with ``retprobe=True``."""
    return kprobe_multi(symbols, prog, retprobe=True, **kw)


# --------------------------------------------------------------------------- uprobes
def _uprobe_multi(exe: UprobeTarget, symbols: str | Sequence[str] | None, prog: Any, offsets: Sequence[int] | None,
                  ref_ctr_offsets: Sequence[int] | None, cookies: Any, pid: int | None, retprobe: bool,
                  mode: MultiMode | str, perf_mode: AttachMode | str, progress: Progress | None,
                  max_perf_targets: int | None, session: bool = False) -> UprobeMultiLink | MultiPerfGroup:
    kind = "uprobe_session" if session else "uretprobe_multi" if retprobe else "uprobe_multi"
    if isinstance(symbols, str):
        shown = symbols
    elif symbols:
        shown = ",".join(list(symbols)[:4]) + (",..." if len(symbols) > 4 else "")
    else:
        shown = f"{len(offsets or ())} offsets"
    what = f"{kind} {exe.path}:{shown}"
    pattern = isinstance(symbols, str) and _is_pattern(symbols)  # refused matches are skipped
    try:
        mode = MultiMode.of(mode)
        _check_kprobe_type(prog, kind)
        if pid is not None and pid < 0:
            raise UsageError(f"negative pid {pid}")
        if offsets is not None and symbols:
            raise UsageError("give symbols or offsets= (file offsets), not both")
        if offsets is not None:
            offs = [int(o) for o in offsets]
            if not offs or any(o < 0 for o in offs):
                raise UsageError("offsets= must be a non-empty list of file offsets")
            names = [f"{o:#x}" for o in offs]
        elif isinstance(symbols, str) and _is_pattern(symbols):
            table = exe.symbols()
            names = sorted(n for n in table if fnmatch.fnmatchcase(n, symbols))
            if not names:
                raise NotFoundError(f"no function in {exe.path} matches {symbols!r}")
            offs = [table[n] for n in names]
        else:
            names = [symbols] if isinstance(symbols, str) else list(symbols or ())
            if not names:
                raise UsageError("no symbols given")
            _check_unique(names, what)
            offs = [exe.symbol_offset(n) for n in names]
        values = _cookies_for(names, cookies, what)
        refs = [int(r) for r in ref_ctr_offsets] if ref_ctr_offsets is not None else [0] * len(names)
        if len(refs) != len(names):
            raise UsageError(f"{len(refs)} ref_ctr_offsets for {len(names)} targets")
        description = f"{what} ({len(names)} functions)" if len(names) > 1 or _is_pattern(shown) else what
        if session:
            _require_session(mode, "uprobe_session", "BPF_TRACE_UPROBE_SESSION")
        if session or _use_multi(mode, "uprobe_multi", "BPF_TRACE_UPROBE_MULTI", "uprobe_multi links came in Linux 6.6"):
            want = AttachType.TRACE_UPROBE_SESSION if session else AttachType.TRACE_UPROBE_MULTI
            run, copy = _fit(prog, want, f"a {kind} link")

            def create(sel: list[int]) -> FD:
                return _bpf.link_create_uprobe_multi(
                    _prog_fd(run), exe.path, [offs[i] for i in sel],
                    ref_ctr_offsets=[refs[i] for i in sel] if any(refs) else None,
                    cookies=[values[i] for i in sel] if any(values) else None,
                    flags=BPF_F_UPROBE_MULTI_RETURN if retprobe else 0, pid=pid or 0, attach_type=want)

            kept = list(range(len(names)))
            refused: dict[str, str] = {}
            failure: BPFKitError | None = None  # targets named and refused: raised as is
            try:
                try:
                    fd = create(kept)
                except KernelError as exc:
                    if exc.errno not in _PER_TARGET or (exc.errno == errno.EINVAL and _link_refused(create, len(names))):
                        raise
                    # The kernel refuses the whole link for one target it cannot probe and
                    # says neither which nor why: find them (halving), name them, and leave
                    # them out of a pattern as bpftrace does (a list of names fails).
                    found = _find_refused(create, len(names), exc)
                    if not found or (exc.errno == errno.EINVAL and len(found) == len(names)):
                        raise
                    refused = {names[i]: _refusal(exe.path, names[i], offs[i], err) for i, err in found}
                    listing = "; ".join(refused.values())
                    if len(found) >= MAX_REFUSED:
                        listing += f" (and perhaps more: stopped looking after {MAX_REFUSED})"
                    if not pattern or len(found) == len(names) or len(found) >= MAX_REFUSED:
                        failure = exc.wrap(f"the kernel refused {len(found)} of the {len(names)} targets: {listing}")
                    else:
                        kept = [i for i in kept if names[i] not in refused]
                        fd = create(kept)
            except KernelError as exc:
                raise _classify_uprobe_multi(exc, exe.path, pid, want) from None
            finally:
                if copy is not None:
                    copy.close()
            if failure is not None:
                raise failure
            lk = UprobeMultiLink(fd, None, _less_refused(description, len(names), len(kept)),
                                 tuple(names[i] for i in kept), tuple(values[i] for i in kept))
            lk.skipped = refused
            if refused:
                _warn_skipped(what, len(names), refused)
            if progress is not None:
                progress(len(names), len(names))
            return lk
        run, copy = _fit(prog, None, "a perf-event uprobe")
        targets = [_Target(n, c, o, r) for n, c, o, r in zip(names, values, offs, refs)]
        sym = offsets is None

        def one(t: _Target) -> Any:
            kw: dict[str, Any] = dict(pid=pid, ref_ctr_offset=t.ref_ctr_offset, cookie=t.cookie, mode=perf_mode)
            if not sym:
                kw["file_offset"] = t.offset
            if retprobe:
                return exe.uretprobe(t.name if sym else None, run, **kw)
            return exe.uprobe(t.name if sym else None, run, **kw)

        try:
            def refusal(t: _Target, exc: KernelError) -> str:
                return _refusal(exe.path, t.name, t.offset, exc)

            group = _fallback(targets, one, progress, max_perf_targets, description, tuple(names), tuple(values),
                              refusal if pattern else None)
            if group.skipped:
                _warn_skipped(what, len(names), group.skipped)
            return group
        finally:
            if copy is not None:
                copy.close()
    except BPFKitError as exc:
        raise exc.wrap(f"attach {what}")


def _classify_uprobe_multi(exc: KernelError, path: str, pid: int | None,
                           attach_type: AttachType = AttachType.TRACE_UPROBE_MULTI) -> BPFKitError:
    if exc.errno == errno.ESRCH and pid:
        return NotFoundError(f"no process {pid} (the pid filter)")
    if exc.errno == errno.ENOENT:
        return NotFoundError(f"{path} not found by the kernel")
    if exc.errno == errno.EINVAL:
        return exc.wrap(f"the kernel refused it (a program not loaded with {attach_type.c_name}, an offset past "
                        "the end of the file, or a bad ref_ctr_offset?)")
    return exc


def uprobe_multi(
    binary: str | UprobeTarget,
    symbols: str | Sequence[str] | None,
    prog: Any,
    *,
    offsets: Sequence[int] | None = None,
    ref_ctr_offsets: Sequence[int] | None = None,
    cookies: Sequence[int] | Mapping[str, int] | None = None,
    pid: int | None = None,
    retprobe: bool = False,
    mode: MultiMode | str = MultiMode.AUTO,
    perf_mode: AttachMode | str = AttachMode.AUTO,
    progress: Progress | None = None,
    max_perf_targets: int | None = None,
) -> UprobeMultiLink | MultiPerfGroup:
    """Run ``prog`` at (``retprobe``: on return from) every function ``symbols`` names in
    ``binary`` (a path, a program on $PATH or a library name such as ``libc``): a list of
    names, one name, or a glob pattern (``"str*"``) matched against the binary's functions
    (.symtab and .dynsym), in name order. Or ``offsets=``: file offsets.

    ``ref_ctr_offsets``: USDT semaphore file offsets, one per target. ``cookies``: one per
    target in order, or name -> cookie. ``pid``: fire only in that process. ``mode`` and the
    rest as for :func:`kprobe_multi`. Returns an UprobeMultiLink, or a MultiPerfGroup.
    """
    exe = binary if isinstance(binary, UprobeTarget) else UprobeTarget(binary)
    return _uprobe_multi(exe, symbols, prog, offsets, ref_ctr_offsets, cookies, pid, retprobe, mode, perf_mode,
                         progress, max_perf_targets)


def uretprobe_multi(binary: str | UprobeTarget, symbols: str | Sequence[str] | None, prog: Any,
                    **kw: Any) -> UprobeMultiLink | MultiPerfGroup:
    """:func:`uprobe_multi` with ``retprobe=True``."""
    return uprobe_multi(binary, symbols, prog, retprobe=True, **kw)


# --------------------------------------------------------------------------- sessions
def kprobe_session(
    symbols: str | Sequence[str] | None,
    prog: Any,
    *,
    cookies: Sequence[int] | Mapping[str, int] | None = None,
    addresses: Sequence[int] | None = None,
    progress: Progress | None = None,
) -> KprobeMultiLink:
    """Run ``prog`` on entry to and return from every kernel function ``symbols`` names (as
    for :func:`kprobe_multi`), through one kprobe_multi link made with
    BPF_TRACE_KPROBE_SESSION (6.10, CONFIG_FPROBE). The program (libbpf's
    ``SEC("kprobe.session")``) tells the runs apart with ``bpf_session_is_return()``; its
    entry run returning non-zero suppresses that call's return run. NotSupportedError on a
    kernel without kprobe sessions (there is no perf-event fallback)."""
    lk = _kprobe_multi(symbols, prog, cookies, False, MultiMode.MULTI, addresses, AttachMode.AUTO, progress, None,
                       session=True)
    assert isinstance(lk, KprobeMultiLink)  # MULTI: never the perf-event fallback
    return lk


def uprobe_session(
    binary: str | UprobeTarget,
    symbols: str | Sequence[str] | None,
    prog: Any,
    *,
    offsets: Sequence[int] | None = None,
    ref_ctr_offsets: Sequence[int] | None = None,
    cookies: Sequence[int] | Mapping[str, int] | None = None,
    pid: int | None = None,
    progress: Progress | None = None,
) -> UprobeMultiLink:
    """Run ``prog`` on entry to and return from every function ``symbols`` names in
    ``binary`` (as for :func:`uprobe_multi`), through one uprobe_multi link made with
    BPF_TRACE_UPROBE_SESSION (6.13). Entry and return, suppression and the session cookie as
    for :func:`kprobe_session` (libbpf's ``SEC("uprobe.session")``)."""
    exe = binary if isinstance(binary, UprobeTarget) else UprobeTarget(binary)
    lk = _uprobe_multi(exe, symbols, prog, offsets, ref_ctr_offsets, cookies, pid, False, MultiMode.MULTI,
                       AttachMode.AUTO, progress, None, session=True)
    assert isinstance(lk, UprobeMultiLink)  # MULTI: never the perf-event fallback
    return lk


# ----------------------------------------------------------------------- the kind's record
def _modes(options: AttachOptions) -> tuple[MultiMode, AttachMode]:
    """AttachOptions.mode -> (MultiMode, perf AttachMode): IOCTL asks for the legacy path,
    which is one perf event per target."""
    perf = AttachMode.of(options.mode)
    return (MultiMode.PERF if perf == AttachMode.IOCTL else MultiMode.AUTO), perf


def _probe_kprobe(spec: ProbeSpec, prog: ProgramArg, o: AttachOptions) -> Link:
    """``kprobe:[MODULE:]FN[+OFF]``/``kretprobe:``: a perf-event kprobe; a wildcard is one
    kprobe_multi link (else a perf event per match)."""
    retprobe = spec.kind == "kretprobe"
    if spec.is_wildcard:
        if spec.module:
            raise NotSupportedError(f"wildcard probe {spec} with a module", "kprobe_multi matches plain function names")
        no_wildcard_offset(spec)
        mode, perf = _modes(o)
        return kprobe_multi(spec.function, prog, cookies=same_cookie(o.cookie), retprobe=retprobe, mode=mode,
                            perf_mode=perf, progress=o.progress, max_perf_targets=o.max_perf_targets)
    symbol = f"{spec.module}:{spec.function}" if spec.module else spec.function
    if retprobe:
        return kretprobe(symbol, prog, mode=o.mode, cookie=o.cookie)
    return kprobe(symbol, prog, offset=spec.offset, mode=o.mode, cookie=o.cookie)


def _probe_uprobe(spec: ProbeSpec, prog: ProgramArg, o: AttachOptions) -> Link:
    """``uprobe:BIN:FN[+OFF]``/``uretprobe:``: a perf-event uprobe; a wildcard is one
    uprobe_multi link (else a perf event per match)."""
    retprobe = spec.kind == "uretprobe"
    if spec.is_wildcard:
        no_wildcard_offset(spec)
        mode, perf = _modes(o)
        return uprobe_multi(spec.binary, spec.function, prog, cookies=same_cookie(o.cookie), pid=o.pid,
                            retprobe=retprobe, mode=mode, perf_mode=perf, progress=o.progress,
                            max_perf_targets=o.max_perf_targets)
    exe = UprobeTarget(spec.binary)
    symbol = None if spec.address is not None else spec.function
    if retprobe:
        return exe.uretprobe(symbol, prog, address=spec.address, pid=o.pid, mode=o.mode, cookie=o.cookie)
    return exe.uprobe(symbol, prog, address=spec.address, offset=spec.offset, pid=o.pid, mode=o.mode,
                      cookie=o.cookie)


def _probe_session(spec: ProbeSpec, prog: ProgramArg, o: AttachOptions) -> Link:
    """``kprobe.session:PATTERN`` or ``uprobe.session:BINARY:PATTERN``: one session link (names
    or wildcards). ``mode=ioctl`` is refused: sessions have no perf-event form."""
    if AttachMode.of(o.mode) == AttachMode.IOCTL:
        raise UsageError(f"{spec}: a session has no perf-event (ioctl) form; drop --mode ioctl")
    if spec.kind == "kprobe.session":
        return kprobe_session(spec.function, prog, cookies=same_cookie(o.cookie), progress=o.progress)
    return uprobe_session(spec.binary, spec.function, prog, pid=o.pid, cookies=same_cookie(o.cookie),
                          progress=o.progress)


def _section_kprobe_multi(prog: ProgramArg, target: SectionTarget, o: AttachOptions) -> Link:
    """``kprobe.multi/PATTERN`` and ``kretprobe.multi/PATTERN`` (libbpf)."""
    pattern = require_pattern(target, "kprobe_multi")
    mode, perf = _modes(o)
    return kprobe_multi(pattern, prog, retprobe=target.kind == "kretprobe_multi", mode=mode, perf_mode=perf,
                        cookies=same_cookie(o.cookie))


def _section_uprobe_multi(prog: ProgramArg, target: SectionTarget, o: AttachOptions) -> Link:
    """``uprobe.multi/BINARY:PATTERN`` (and uretprobe.multi, the ``.s`` kinds)."""
    binary, pattern = binary_pattern(target, "uprobe_multi")
    mode, perf = _modes(o)
    return uprobe_multi(binary, pattern, prog, pid=o.pid, retprobe=target.kind == "uretprobe_multi",
                        mode=mode, perf_mode=perf, cookies=same_cookie(o.cookie))


def _section_kprobe_session(prog: ProgramArg, target: SectionTarget, o: AttachOptions) -> Link:
    """``kprobe.session/PATTERN`` (libbpf)."""
    return kprobe_session(require_pattern(target, "kprobe_session"), prog, cookies=same_cookie(o.cookie))


def _section_uprobe_session(prog: ProgramArg, target: SectionTarget, o: AttachOptions) -> Link:
    """``uprobe.session/BINARY:PATTERN`` (and ``uprobe.session.s``)."""
    binary, pattern = binary_pattern(target, "uprobe_session")
    return uprobe_session(binary, pattern, prog, pid=o.pid, cookies=same_cookie(o.cookie))


KIND = LinkKind(
    "multi",
    sections=(
        Section("uprobe.multi", "uprobe_multi", _section_uprobe_multi),
        Section("uprobe.multi.s", "uprobe_multi", _section_uprobe_multi),
        Section("uretprobe.multi", "uretprobe_multi", _section_uprobe_multi),
        Section("uretprobe.multi.s", "uretprobe_multi", _section_uprobe_multi),
        Section("kprobe.multi", "kprobe_multi", _section_kprobe_multi),
        Section("kretprobe.multi", "kretprobe_multi", _section_kprobe_multi),
        Section("kprobe.session", "kprobe_session", _section_kprobe_session),
        Section("uprobe.session", "uprobe_session", _section_uprobe_session),
        Section("uprobe.session.s", "uprobe_session", _section_uprobe_session),
    ),
    probes={"kprobe": _probe_kprobe, "kretprobe": _probe_kprobe, "uprobe": _probe_uprobe, "uretprobe": _probe_uprobe,
            "kprobe.session": _probe_session, "uprobe.session": _probe_session},
    link_classes={LinkType.KPROBE_MULTI: KprobeMultiLink, LinkType.UPROBE_MULTI: UprobeMultiLink},
    info_decoders={LinkType.KPROBE_MULTI: _decode_kprobe_multi, LinkType.UPROBE_MULTI: _decode_uprobe_multi},
    features=("kprobe_multi", "uprobe_multi", "kprobe_session", "uprobe_session"),
)
