"""tracefs: where it is, mounting it, and reading trace event ids.

Terminology (as in cilium/ebpf's link/perf_event.go):
* a *trace event* is an entry under tracefs ``events/<group>/<name>`` with an ``id``;
* a *tracepoint* is a trace event the kernel defines statically (``syscalls/sys_enter_openat``);
* a *kprobe*/*uprobe* trace event is made at run time by writing a definition to
  ``kprobe_events``/``uprobe_events``;
* a *perf event* is what perf_event_open returns; a BPF program attaches to it.
"""

from __future__ import annotations

import functools
import os
import re

from ..errors import KernelError, NotFoundError, NotSupportedError, ParseError

_CANDIDATES = ("/sys/kernel/tracing", "/sys/kernel/debug/tracing")
_NAME = re.compile(r"^[a-zA-Z_][0-9a-zA-Z_]*$")


def _mounts() -> list[tuple[str, str]]:
    """(mount point, fs type) from /proc/self/mountinfo."""
    found = []
    try:
        with open("/proc/self/mountinfo") as f:
            for line in f:
                left, _, right = line.partition(" - ")
                fields = left.split()
                fstype = right.split()[0] if right else ""
                if len(fields) >= 5:
                    found.append((fields[4].replace("\\040", " "), fstype))
    except OSError:
        pass
    return found


def _is_tracefs(path: str) -> bool:
    return os.path.exists(os.path.join(path, "events"))


@functools.cache
def tracefs_root() -> str:
    """The tracefs directory: a mounted tracefs, debugfs's tracing/, or a fresh mount.

    Mounting needs CAP_SYS_ADMIN; when nothing works the error says what was tried.
    """
    for point, fstype in _mounts():
        if fstype == "tracefs" and _is_tracefs(point):
            return point
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
    from .abi import ffi

    if not hasattr(_mount, "fn"):
        ffi.cdef("int mount(const char *, const char *, const char *, unsigned long, const void *);", override=True)
        _mount.fn = ffi.dlopen(None).mount  # type: ignore[attr-defined]
    ret = _mount.fn(source.encode(), target.encode(), fstype.encode(), 0, ffi.NULL)  # type: ignore[attr-defined]
    if ret != 0:
        raise OSError(ffi.errno, os.strerror(ffi.errno))


def validate_name(kind: str, name: str) -> str:
    """Trace event group and event names must be ``[a-zA-Z_][0-9a-zA-Z_]*``: anything else could
    escape the tracefs tree or be misparsed by the kernel."""
    if not _NAME.match(name):
        raise ParseError(f"invalid trace event {kind} {name!r}: must match [a-zA-Z_][0-9a-zA-Z_]*")
    return name


def event_dir(group: str, event: str) -> str:
    validate_name("group", group)
    validate_name("name", event)
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
        raise KernelError(f"read {path}", exc.errno or 13) from None


def read_file(name: str) -> str:
    with open(os.path.join(tracefs_root(), name)) as f:
        return f.read()


def append_line(name: str, line: str) -> None:
    """Append one line to a tracefs control file (``kprobe_events``, ``uprobe_events``).

    Python's open(..., "a") seeks to the end, which tracefs refuses with EINVAL; O_APPEND
    without the seek works.
    """
    path = os.path.join(tracefs_root(), name)
    fd = os.open(path, os.O_WRONLY | os.O_APPEND)
    try:
        os.write(fd, line.encode())
    finally:
        os.close(fd)
