# SPDX-License-Identifier: Apache-2.0
"""The program argument of the attach kinds that take one by fd (xdp, tc, netkit, cgroup,
netns, socket, netfilter, prog_attach, anchor): checked against the hook's program types,
named for messages, its id, a duplicate of its fd, whether it is attached at a hook
(BPF_PROG_QUERY); the name of a hook's attach type and the hook of a link's info
(HookInfo); and explained(), the errno hint these kinds put on a KernelError.
"""

from __future__ import annotations

import errno
from collections.abc import Mapping
from typing import Any, ClassVar

from .._kernel import bpf as _bpf
from .._kernel.consts import AttachType, ProgType
from .._kernel.fd import FD
from .._protocols import ProgramArg
from ..errors import BPFKitError, KernelError, UsageError, kernel_error
from .base import _enum, _prog_fd

__all__ = ["check_program", "prog_name", "dup_prog_fd", "prog_id_of", "attached_at", "attach_type_name", "HookInfo",
           "info_attach_type", "explained"]


def check_program(prog: ProgramArg, allowed: tuple[ProgType, ...], hook: str) -> int:
    """The fd of ``prog``, refusing up front a program of a type ``hook`` cannot run."""
    ptype = getattr(prog, "type", None)
    if ptype is not None and ptype not in allowed:
        have = ptype.kernel_name if hasattr(ptype, "kernel_name") else str(ptype)
        want = " or ".join(t.kernel_name for t in allowed)
        raise UsageError(f"program {getattr(prog, 'name', '')!r} is a {have} program; {hook} needs a {want} program")
    return _prog_fd(prog)


def prog_name(prog: ProgramArg | str) -> str:
    if isinstance(prog, str):
        return prog
    return str(getattr(prog, "name", "") or "program")


def dup_prog_fd(prog: ProgramArg) -> FD:
    """An fd of our own on ``prog``, so that detaching later works even when the caller has
    closed the program (netlink attachments hold no fd of their own)."""
    fd = getattr(prog, "fd", None)
    if isinstance(fd, FD):
        return fd.dup()
    import fcntl

    raw = _prog_fd(prog)
    try:
        return FD(fcntl.fcntl(raw, fcntl.F_DUPFD_CLOEXEC, 1))
    except OSError as exc:
        raise KernelError("dup program fd", exc.errno or errno.EBADF) from None


def prog_id_of(fd: FD | int) -> int:
    return int(_bpf.obj_info(fd, "struct bpf_prog_info").id)


def explained(exc: KernelError, hint: str) -> KernelError:
    """``exc`` again (same class, op and errno) with ``hint`` (what the errno means here) put
    before the kernel's own detail."""
    detail = f"{hint}; {exc.detail}" if exc.detail and hint else (hint or exc.detail)
    new = kernel_error(exc.op, exc.errno, detail)
    return new


def attached_at(target_fd: int, at: AttachType, prog: ProgramArg) -> bool:
    """Whether ``prog`` is among the programs BPF_PROG_QUERY lists at hook ``at`` of
    ``target_fd`` (a cgroup, a network namespace); False when the query fails."""
    try:
        return prog_id_of(_prog_fd(prog)) in _bpf.prog_query_flags(target_fd, int(at))[0]
    except BPFKitError:
        return False


def attach_type_name(at: AttachType | int, names: Mapping[AttachType, str]) -> str:
    """``names[at]``, or "attach type N" for one the table does not name."""
    return names[at] if isinstance(at, AttachType) and at in names else f"attach type {int(at)}"


def info_attach_type(part: Any) -> AttachType | int:
    """The attach type a member of bpf_link_info's union reports (``raw.cgroup``,
    ``raw.netns``, ``raw.sockmap``, ...): typed when bpfkit knows it, else the number."""
    typed: AttachType | int = _enum(AttachType, int(part.attach_type))
    return typed


class HookInfo:
    """What the ``LinkInfo`` details of a link at a named hook of a target share (netns,
    sockmap): the hook's ``attach_type`` (a field of the dataclass) and ``hook``, its name in
    the kind's table ``_hook_names``."""

    attach_type: AttachType | int
    _hook_names: ClassVar[Mapping[AttachType, str]] = {}

    @property
    def hook(self) -> str:
        return attach_type_name(self.attach_type, self._hook_names)
