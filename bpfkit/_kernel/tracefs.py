# SPDX-License-Identifier: Apache-2.0
"""tracefs: where it is, mounting it, and reading trace event ids.

Terminology (as in cilium/ebpf's link/perf_event.go):
* a *trace event* is an entry under tracefs ``events/<group>/<name>`` with an ``id``;
* a *tracepoint* is a trace event the kernel defines statically (``syscalls/sys_enter_openat``);
* a *kprobe*/*uprobe* trace event is made at run time by writing a definition to
  ``kprobe_events``/``uprobe_events``;
* a *perf event* is what perf_event_open returns; a BPF program attaches to it.
"""

from __future__ import annotations

import errno
import functools
import os
import re
from collections.abc import Iterator

from .._record import FrozenRecord
from ..errors import KernelError, KernelPermissionError, NotFoundError, NotSupportedError, ParseError, kernel_error
from .fd import FD
from .mountinfo import mountinfo

_CANDIDATES = ("/sys/kernel/tracing", "/sys/kernel/debug/tracing")
_NAME = re.compile(r"^[a-zA-Z_][0-9a-zA-Z_]*$")
# Static trace events (tracepoints) need not start with a letter: the 9p module's group is "9p".
_STATIC_NAME = re.compile(r"^[0-9a-zA-Z_-]+$")  # existing tracepoints: 9p_client_req, group spi-mem


def _is_tracefs(path: str) -> bool:
    """Whether ``path`` holds a tracing tree; one this process may not enter counts (so the
    caller's later access fails with a permission error, not a wrong "no tracefs")."""
    try:
        os.stat(os.path.join(path, "events"))
    except PermissionError:
        return os.path.isdir(path)
    except OSError:
        return False
    return True


@functools.cache
def tracefs_root() -> str:
    """The tracefs directory: a mounted tracefs, debugfs's tracing/, or a fresh mount.

    Mounting needs CAP_SYS_ADMIN; when nothing works the error says what was tried.
    """
    mounts = mountinfo()
    for point, fstype in mounts:
        if fstype == "tracefs" and _is_tracefs(point):
            return point
    # Before 4.1 (and where only debugfs is mounted) tracing lives in debugfs's tracing/.
    for point, fstype in mounts:
        if fstype == "debugfs" and _is_tracefs(os.path.join(point, "tracing")):
            return os.path.join(point, "tracing")
    for path in _CANDIDATES:
        if _is_tracefs(path):
            return path
    tried = []
    for path in _CANDIDATES[:1]:
        try:
            _mount("tracefs", path, "tracefs")
        except OSError as exc:
            tried.append(f"mount -t tracefs {path}: {os.strerror(exc.errno or 0)}")
            continue
        if _is_tracefs(path):
            return path
    raise NotSupportedError(
        "tracefs",
        "no tracefs mount found in /proc/self/mountinfo or at " + ", ".join(_CANDIDATES)
        + (" and " + "; ".join(tried) if tried else ""),
    )


def _mount(source: str, target: str, fstype: str) -> None:
    """mount(2) through libc (no util-linux needed)."""
    from .abi import ffi, libc

    ret = libc.mount(source.encode(), target.encode(), fstype.encode(), 0, ffi.NULL)
    if ret != 0:
        raise OSError(ffi.errno, os.strerror(ffi.errno))


NAME_MAX = 255  # include/uapi/linux/limits.h


def validate_name(kind: str, name: str, *, static: bool = False) -> str:
    """Trace event group and event names must be ``[a-zA-Z_][0-9a-zA-Z_]*`` (the kernel's
    is_good_name() for kprobe/uprobe events): anything else could escape the tracefs tree or be
    misparsed by the kernel. ``static``: an existing tracepoint's, which may start with a digit and whose group (the
    TRACE_SYSTEM) may hold a dash (spi-mem)."""
    if len(name) > NAME_MAX:  # each is a directory under events/: one file name, NAME_MAX bytes
        raise ParseError(f"invalid trace event {kind} {name[:40]!r}... ({len(name)} characters): longer than "
                         f"{NAME_MAX}, the longest file name tracefs can hold")
    if static and _STATIC_NAME.match(name):
        return name
    if not _NAME.match(name):
        raise ParseError(f"invalid trace event {kind} {name!r}: must match [a-zA-Z_][0-9a-zA-Z_]*")
    return name


def event_dir(group: str, event: str) -> str:
    validate_name("group", group, static=True)
    validate_name("name", event, static=True)
    return os.path.join(tracefs_root(), "events", group, event)


def event_id(group: str, event: str) -> int:
    """The id of trace event ``group/event`` (what PERF_TYPE_TRACEPOINT wants in config)."""
    path = os.path.join(event_dir(group, event), "id")
    try:
        with open(path) as f:
            return int(f.read().strip())
    except FileNotFoundError:
        raise NotFoundError(f"trace event {group}/{event} not found ({path} does not exist)") from None
    except PermissionError as exc:
        raise KernelPermissionError(
            f"read {path}", exc.errno or errno.EACCES, "",
            "tracefs is for root only unless mounted with a gid= or mode= that admits this user",
        ) from None
    except (OSError, ValueError) as exc:
        raise KernelError(f"read trace event {group}/{event} id", getattr(exc, "errno", None) or errno.EINVAL,
                          path) from None


def _path(name: str) -> str:
    """``name`` under the tracefs root, refusing anything that would leave it."""
    root = tracefs_root()
    path = os.path.normpath(os.path.join(root, name))
    if os.path.commonpath([root, path]) != root:
        raise ParseError(f"tracefs path {name!r} escapes {root}")
    return path


def read_file(name: str) -> str:
    with open(_path(name)) as f:
        return f.read()


def append_line(name: str, line: str) -> None:
    """Append one line to a tracefs control file (``kprobe_events``, ``uprobe_events``).

    Python's open(..., "a") seeks to the end, which tracefs refuses with EINVAL; O_APPEND
    without the seek works.
    """
    path = _path(name)
    fd = os.open(path, os.O_WRONLY | os.O_APPEND)
    try:
        os.write(fd, line.encode())
    finally:
        os.close(fd)


# ------------------------------------------------------------------ dynamic probe events
# kprobe_events (CONFIG_KPROBE_EVENTS) and uprobe_events (CONFIG_UPROBE_EVENTS) take one
# definition per write (Documentation/trace/kprobetrace.rst, uprobetracer.rst):
#   p[:[GRP/]EVENT] [MOD:]SYM[+offs]|MEMADDR        r[MAXACTIVE][:[GRP/]EVENT] [MOD:]SYM[+0]
#   p[:[GRP/]EVENT] PATH:OFFSET[(REF_CTR_OFFSET)]   r[:[GRP/]EVENT] PATH:OFFSET[(REF_CTR_OFFSET)]
#   -:[GRP/]EVENT                                   (remove; EBUSY while a perf event uses it)
PROBE_KINDS = ("kprobe", "uprobe")
_PROBE_LINE = re.compile(r"^(?P<type>[pr])(?P<maxactive>\d*):(?P<group>[^/\s]+)/(?P<event>\S+)\s+(?P<target>.*)$")


class ProbeEvent(FrozenRecord):
    """One line of kprobe_events / uprobe_events. (A frozen record, bpfkit._record: a frozen
    dataclass's methods, not generated at import: ~0.5 ms of `bpfkit features`.)"""

    __slots__ = ("kind", "retprobe", "group", "event", "target", "maxactive")
    kind: str  # "kprobe" or "uprobe"
    retprobe: bool
    group: str
    event: str
    target: str  # ``do_sys_open+0x10``, ``/usr/bin/bash:0x0000000000031234``
    maxactive: int

    def __init__(self, kind: str, retprobe: bool, group: str, event: str, target: str, maxactive: int = 0) -> None:
        self._set_fields(kind, retprobe, group, event, target, maxactive)


def probe_events_file(kind: str) -> str:
    if kind not in PROBE_KINDS:
        raise ParseError(f"unknown probe kind {kind!r}: expected one of {PROBE_KINDS}")
    return f"{kind}_events"


def has_probe_events(kind: str) -> bool:
    """Whether tracefs offers ``<kind>_events`` (absent without CONFIG_{K,U}PROBE_EVENTS)."""
    try:
        return os.path.exists(_path(probe_events_file(kind)))
    except NotSupportedError:
        return False


def add_probe_event(kind: str, line: str) -> None:
    """Write one probe definition; errors keep the kernel's errno (ENOENT/EINVAL for an unknown
    symbol, EEXIST for a taken name, EILSEQ for an offset off an instruction boundary)."""
    name = probe_events_file(kind)
    try:
        fd = os.open(_path(name), os.O_WRONLY | os.O_APPEND)
    except FileNotFoundError:
        raise NotSupportedError(
            f"{kind} trace events", f"{tracefs_root()}/{name} does not exist (the kernel lacks "
            f"CONFIG_{kind.upper()}_EVENTS)"
        ) from None
    except OSError as exc:
        raise kernel_error(f"open {name}", exc.errno or errno.EIO) from None
    try:
        os.write(fd, line.encode())
    except OSError as exc:
        raise kernel_error(f"write {name}", exc.errno or errno.EIO, repr(line)) from None
    finally:
        os.close(fd)


def remove_probe_event(kind: str, group: str, event: str) -> None:
    """Remove ``group/event``: NotFoundError if it is gone, BusyError while a perf event uses it."""
    validate_name("group", group)
    validate_name("name", event)
    name = probe_events_file(kind)
    try:
        fd = os.open(_path(name), os.O_WRONLY | os.O_APPEND)
    except FileNotFoundError:
        raise NotFoundError(f"remove {kind} event {group}/{event}: {name} does not exist") from None
    except OSError as exc:
        raise kernel_error(f"open {name}", exc.errno or errno.EIO) from None
    try:
        os.write(fd, f"-:{group}/{event}".encode())
    except OSError as exc:
        err = exc.errno or errno.EIO
        if err == errno.ENOENT:
            raise NotFoundError(f"remove {kind} event {group}/{event}: no such event") from None
        raise kernel_error(f"write {name}", err, f"remove {group}/{event}") from None
    finally:
        os.close(fd)


def list_probe_events(kind: str) -> list[ProbeEvent]:
    """The probe events defined in ``<kind>_events`` (empty when the file does not exist)."""
    try:
        text = read_file(probe_events_file(kind))
    except FileNotFoundError:
        return []
    except NotSupportedError:
        return []
    return parse_probe_events(kind, text)


def parse_probe_events(kind: str, text: str) -> list[ProbeEvent]:
    """Parse the contents of ``<kind>_events`` (``p:grp/ev target`` lines)."""
    found = []
    for line in text.splitlines():
        m = _PROBE_LINE.match(line.strip())
        if m:
            found.append(
                ProbeEvent(
                    kind, m["type"] == "r", m["group"], m["event"], m["target"].strip(),
                    int(m["maxactive"] or 0),
                )
            )
    return found


def iter_event_groups() -> Iterator[str]:
    """Names of the trace event groups (directories under events/)."""
    try:
        yield from sorted(os.listdir(_path("events")))
    except FileNotFoundError:
        return


def open_trace_event(event: int, pid: int = -1, what: str = "") -> FD:
    """perf_event_open(PERF_TYPE_TRACEPOINT, config=``event``): a perf event on a trace event
    (a tracepoint, or a kprobe/uprobe made through kprobe_events/uprobe_events).

    With pid -1 the event counts on one CPU only, so it is opened on CPU 0; a BPF program
    attached to it still runs on every CPU (the program hangs off the trace event, not the
    perf event's CPU). With a pid it follows that task on any CPU.
    """
    from . import perf
    from .consts import PerfSample, PerfType  # the perf enums are made on first use

    attr = perf.new_attr()
    attr.type = int(PerfType.TRACEPOINT)
    attr.config = event
    attr.sample_type = int(PerfSample.RAW)
    attr.sample_period = 1
    attr.wakeup_events = 1
    return perf.perf_event_open(attr, pid, 0 if pid == -1 else -1, what=what)


# Kernel symbols, for telling "no such symbol" apart from other EINVALs of kprobe creation.
def kernel_symbol_exists(symbol: str) -> bool | None:
    """Whether /proc/kallsyms lists ``symbol`` (``mod:sym`` looks in module ``mod``);
    None when kallsyms cannot be read."""
    from .kallsyms import has_symbol  # here: only a refused kprobe asks (~1.5 ms of imports)

    try:
        return has_symbol(symbol)
    except OSError:
        return None


# Listings (bpfkit list): what tracefs says can be traced.
def list_trace_events() -> list[tuple[str, str]]:
    """Every trace event as (group, name): available_events (one read, "group:name" a line),
    else a walk of events/ (each group's directories)."""
    try:
        text = read_file("available_events")
    except OSError:
        text = ""
    if text:
        found = []
        for line in text.splitlines():
            group, sep, name = line.partition(":")
            if sep:
                found.append((group, name))
        return found
    found = []
    for group in iter_event_groups():
        if group == "ftrace":
            continue  # ftrace's own record formats, not tracepoints (available_events omits them)
        try:
            with os.scandir(_path(os.path.join("events", group))) as entries:
                found.extend((group, e.name) for e in entries if e.is_dir())
        except (NotADirectoryError, FileNotFoundError):
            continue
    return found


def available_filter_functions() -> list[tuple[str, str]]:
    """The functions ftrace can trace, which kprobes may probe: (name, module or ""), from
    available_filter_functions ("name" or "name [module]" a line). OSError when it cannot be
    read (EPERM under lockdown or without CAP_SYSLOG-like rights; ENOENT without ftrace)."""
    found = []
    for line in read_file("available_filter_functions").splitlines():
        name, _, rest = line.partition(" ")
        if name and not name.startswith("__ftrace_invalid_address__"):
            found.append((name, rest.strip().strip("[]")))
    return found
