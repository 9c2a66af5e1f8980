# SPDX-License-Identifier: Apache-2.0
"""Label decoders of metrics configs (docs/metrics.md), as ebpf_exporter's: each turns a key
field's value (an int, or the bytes of an array) into the label's text.

    ksym        a kernel address -> the symbol containing it (/proc/kallsyms; "0x..." if none)
    syscall     a syscall number -> its name (x86_64, arm64; the number elsewhere)
    cgroup      a cgroup v2 id (bpf_get_current_cgroup_id()) -> its path under the cgroup2 mount
    ipv4        a __be32 (or 4 bytes) -> dotted quad
    ipv6        16 bytes -> RFC 5952 text
    errno       an errno, negative or not -> its name (ENOENT, the kernel's ERESTARTSYS; unknown:N)
    static_map  a table of value -> text (``static_map: {1: read, 2: write}``)
    string      bytes -> the text up to the first NUL
"""

from __future__ import annotations

import socket
import struct
from collections.abc import Callable, Mapping

from ..errors import KernelPermissionError, errno_name
from .cgroup_paths import CgroupPaths

TYPE_CHECKING = False
if TYPE_CHECKING:
    from .._kernel.kallsyms import KernelSymbols

__all__ = ["DECODERS", "make_decoder"]

Decoder = Callable[[object], object]


def _as_int(value: object) -> int | None:
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int):
        return int(value)
    return None


def _as_bytes(value: object) -> bytes | None:
    if isinstance(value, (bytes, bytearray)):
        return bytes(value)
    if isinstance(value, str):  # a byte array the codec took for text (printable up to a NUL)
        return value.encode()
    if isinstance(value, list) and all(isinstance(v, int) and 0 <= v < 256 for v in value):
        return bytes(value)
    return None


class _Kallsyms:
    """The ksym decoder: the text symbol containing an address, as the symbolizer names it
    (:class:`bpfkit._kernel.kallsyms.KernelSymbols`, read on first use); "0x..." below the
    first symbol, or for every address while kptr_restrict hides them (all read as 0)."""

    def __init__(self) -> None:
        self.table: KernelSymbols | None = None
        self.hidden = False

    def __call__(self, value: object) -> object:
        addr = _as_int(value)
        if addr is None:
            return value
        table = self.table
        if table is None and not self.hidden:
            from .._kernel.kallsyms import KernelSymbols  # here: only a ksym label reads the kernel's symbols

            try:
                table = self.table = KernelSymbols.load()
            except KernelPermissionError:  # every address reads as 0
                self.hidden = True
        name = table.name(addr) if table is not None else None
        return f"0x{addr:x}" if name is None else name


def _syscall(value: object) -> object:
    nr = _as_int(value)
    if nr is None:
        return value
    from .syscall_tables import syscall_name  # here: only a syscall label reads the tables

    return syscall_name(nr) or str(nr)


class _Cgroups:
    """cgroup v2 ids -> paths in the hierarchy (``/system.slice/x.service``), as
    /proc/PID/cgroup shows them (:class:`~bpfkit.metrics.cgroup_paths.CgroupPaths`)."""

    def __init__(self) -> None:
        self.paths = CgroupPaths()

    def __call__(self, value: object) -> object:
        cid = _as_int(value)
        if cid is None:
            return value
        path = self.paths.path(cid)
        return str(cid) if path is None else self.paths.in_hierarchy(path)


def _ipv4(value: object) -> object:
    n = _as_int(value)
    raw = struct.pack("=I", n & 0xFFFFFFFF) if n is not None else _as_bytes(value)  # __be32: bytes in memory order
    if raw is None or len(raw) != 4:
        return value
    return socket.inet_ntop(socket.AF_INET, raw)


def _ipv6(value: object) -> object:
    raw = _as_bytes(value)
    if raw is None:
        return value
    raw = raw.ljust(16, b"\0")  # a NUL-ended text form lost its zero tail
    return socket.inet_ntop(socket.AF_INET6, raw[:16]) if len(raw) == 16 else value


# The kernel's own errnos above the UAPI's (include/linux/errno.h): never meant for user space,
# but a program reading a return value (a syscall exit, a function's) meets them.
KERNEL_ERRNOS = {512: "ERESTARTSYS", 513: "ERESTARTNOINTR", 514: "ERESTARTNOHAND", 515: "ENOIOCTLCMD",
                 516: "ERESTART_RESTARTBLOCK", 517: "EPROBE_DEFER", 518: "EOPENSTALLED", 519: "ENOPARAM",
                 521: "EBADHANDLE", 522: "ENOTSYNC", 523: "EBADCOOKIE", 524: "ENOTSUPP", 525: "ETOOSMALL",
                 526: "ESERVERFAULT", 527: "EBADTYPE", 528: "EJUKEBOX", 529: "EIOCBQUEUED", 530: "ERECALLCONFLICT",
                 531: "ENOGRACE"}


def _errno(value: object) -> object:
    n = _as_int(value)
    if n is None:
        return value
    n = abs(n)
    name = KERNEL_ERRNOS.get(n) or errno_name(n)
    return f"unknown:{n}" if name.startswith("errno ") else name  # ebpf_exporter's text for a number it cannot name


def _string(value: object) -> object:
    raw = _as_bytes(value)
    return value if raw is None else raw.split(b"\0", 1)[0].decode(errors="replace")


def _static_map(table: Mapping[object, object], enum_names: Mapping[int, str]) -> Decoder:
    by_text = {str(k): str(v) for k, v in table.items()}

    def decode(value: object) -> object:
        if isinstance(value, int) and not isinstance(value, bool):
            number = int(value)  # IntEnum members too
            found = by_text.get(str(number))
            if found is None and number in enum_names:
                found = by_text.get(enum_names[number])  # an enum's member name as the table's key
            return value if found is None else found
        return by_text.get(str(value), value)

    return decode


DECODERS = ("ksym", "syscall", "cgroup", "ipv4", "ipv6", "errno", "static_map", "string")


def make_decoder(name: str, table: Mapping[object, object] | None = None, enum_names: Mapping[int, str] | None = None) -> Decoder:
    """The decoder ``name`` (one of :data:`DECODERS`); ``static_map`` takes ``table``, whose
    keys may be numbers or, for an enum field (``enum_names``: value -> member), member names."""
    if name == "ksym":
        return _Kallsyms()
    if name == "cgroup":
        return _Cgroups()
    if name == "static_map":
        return _static_map(table or {}, enum_names or {})
    simple: dict[str, Decoder] = {"syscall": _syscall, "ipv4": _ipv4, "ipv6": _ipv6, "errno": _errno, "string": _string}
    return simple[name]
