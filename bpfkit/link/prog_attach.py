# SPDX-License-Identifier: Apache-2.0
"""BPF_PROG_ATTACH: the attachment style before bpf_links, and still the only one for some hooks.

    link.raw_attach_program(cgroup_fd, prog, AttachType.CGROUP_INET_EGRESS, flags=BPF_F_ALLOW_MULTI)
    link.raw_detach_program(cgroup_fd, prog, AttachType.CGROUP_INET_EGRESS)

BPF_PROG_ATTACH puts a program on a hook named by a target fd (a cgroup directory, a network
namespace, a sockmap) and an attach type; the hook holds it until BPF_PROG_DETACH, whoever
detaches. No object owns the attachment, so nothing detaches it when the process exits.
:class:`ProgAttachment` gives such an attachment the Link protocol: it keeps its own copies of
the target and program fds and detaches on close (pin and info raise NotSupportedError: there
is no kernel object to pin or ask). cilium/ebpf's RawAttachProgram/RawDetachProgram.

``mode`` of the attach functions that have both paths (:class:`ProgAttachMode`): AUTO takes a
bpf_link where the kernel makes one for the hook, PROG_ATTACH forces the legacy path (older
kernels, or to interoperate with tools that detach by program).
"""

from __future__ import annotations

import enum
import errno
from collections.abc import Callable
from typing import Any

from .._kernel import bpf as _bpf
from .._kernel.consts import BPF_F_ALLOW_MULTI, BPF_F_REPLACE, AttachType
from .._kernel.fd import FD
from .._protocols import ProgramArg
from ..errors import BPFKitError, KernelError, NotSupportedError, UsageError
from ._prog_arg import dup_prog_fd, prog_id_of, prog_name
from .base import HeldProgramAttachment, _prog_fd, choice_of, raw_fd

__all__ = ["ProgAttachMode", "ProgAttachment", "raw_attach_program", "raw_detach_program"]


class ProgAttachMode(enum.Enum):
    """How a program goes on a hook that has both a bpf_link and BPF_PROG_ATTACH."""

    AUTO = "auto"  # a link where the kernel has one for the hook, else BPF_PROG_ATTACH
    LINK = "link"  # BPF_LINK_CREATE (NotSupportedError where the kernel lacks it)
    PROG_ATTACH = "prog_attach"  # BPF_PROG_ATTACH: no kernel object owns the attachment

    @classmethod
    def of(cls, value: ProgAttachMode | str) -> ProgAttachMode:
        return choice_of(cls, value, "attach mode", {"legacy": "prog_attach", "attach": "prog_attach"})


def _target_fd(target: Any) -> int:
    return raw_fd(target, lambda: f"attach target {target!r} is closed",
                  lambda: f"not an attach target fd: {target!r}", lowest=0)


def raw_attach_program(target: Any, prog: ProgramArg, attach_type: AttachType | int, *, flags: int = 0,
                       replace: ProgramArg | None = None, relative: int = 0, expected_revision: int = 0) -> None:
    """BPF_PROG_ATTACH of ``prog`` to ``target`` (an fd, or an object with one: a Map, a cgroup
    or netns FD). ``replace`` adds BPF_F_REPLACE with that program (5.6, cgroups with
    BPF_F_ALLOW_MULTI); ``relative``/``expected_revision`` order multi-program hooks."""
    replace_fd = 0
    if replace is not None:
        flags |= BPF_F_REPLACE
        replace_fd = _prog_fd(replace)
    _bpf.prog_attach(_target_fd(target), _prog_fd(prog), int(attach_type), flags, replace_fd, relative,
                     expected_revision)


def raw_detach_program(target: Any, prog: ProgramArg | None, attach_type: AttachType | int) -> None:
    """BPF_PROG_DETACH of ``prog`` (None: whatever single program the hook holds, where the hook
    allows that) from ``target``."""
    _bpf.prog_detach(_target_fd(target), _prog_fd(prog) if prog is not None else 0, int(attach_type))


class ProgAttachment(HeldProgramAttachment):
    """A program on a hook through BPF_PROG_ATTACH, as a Link.

    close() and detach() detach it (BPF_PROG_DETACH with the program, so another program on
    the same hook stays); update() swaps in another program: BPF_F_REPLACE of this one where the
    hook runs several (BPF_F_ALLOW_MULTI), else an attach that replaces the hook's one program.
    pin, unpin and info raise NotSupportedError.
    """

    kind = "prog_attach"

    def __init__(self, target_fd: FD | None, prog: ProgramArg, attach_type: AttachType | int, flags: int,
                 where: str, hook: str) -> None:
        # Our own fd on the cgroup/map (detaching needs it); None where the hook is the calling
        # thread's network namespace (flow_dissector: target_fd must be 0, see netns.py).
        self._target = target_fd
        self._prog_fd: FD | None = dup_prog_fd(prog)
        self.attach_type = attach_type
        self.flags = flags
        self.where = where  # "cgroup /sys/fs/cgroup/unified/app"
        self.hook = hook  # "connect4"
        self.program = prog_name(prog)
        self.prog_id = prog_id_of(self._prog_fd)
        self._attached = True

    @property
    def description(self) -> str:  # type: ignore[override]
        return f"{self.where} {self.hook}"

    def _unsupported(self, what: str) -> NotSupportedError:
        return NotSupportedError(f"{what} of a program attached with BPF_PROG_ATTACH ({self.where} {self.hook})",
                                 "there is no bpf_link; attach with mode='link' for one")

    def _check_open(self, what: str) -> None:
        if self._prog_fd is None:
            raise UsageError(f"{what} of a closed attachment ({self.program} on {self.where} {self.hook})")

    def update(self, prog: ProgramArg, old: ProgramArg | None = None) -> None:
        """Put ``prog`` where this program (or ``old``) is, atomically."""
        self._check_open("update")
        assert self._prog_fd is not None
        if not self._attached:
            raise UsageError(f"update of a detached program ({self.program} on {self.where} {self.hook})")
        replace = old if old is not None else self._prog_fd
        target = self._target if self._target is not None else 0
        try:
            if self.flags & BPF_F_ALLOW_MULTI:
                self._run(raw_attach_program, target, prog, self.attach_type, flags=self.flags, replace=replace)
            else:
                self._run(raw_attach_program, target, prog, self.attach_type, flags=self.flags)
        except BPFKitError as exc:
            raise exc.wrap(f"update {self.program!r} on {self.where} {self.hook} to {prog_name(prog)!r}")
        mine = dup_prog_fd(prog)
        self._prog_fd.close()
        self._prog_fd = mine
        self.prog_id = prog_id_of(mine)
        self.program = prog_name(prog)

    def _run(self, fn: Callable[..., None], *args: Any, **kwargs: Any) -> None:
        """Where attach and detach calls run (netns.py: inside the namespace)."""
        fn(*args, **kwargs)

    def _release(self) -> None:
        if self._target is not None:
            self._target.close()

    def _remove(self) -> None:
        assert self._prog_fd is not None
        try:
            self._run(raw_detach_program, self._target if self._target is not None else 0, self._prog_fd,
                      self.attach_type)
        except KernelError as exc:
            if exc.errno == errno.ENOENT:
                return  # someone detached it already
            raise exc.wrap(f"detach {self.program!r} from {self.where} {self.hook}")

    def __repr__(self) -> str:
        state = "closed" if self.closed else ("attached" if self._attached else "detached")
        return f"{type(self).__name__}({self.program!r} on {self.where} {self.hook}, {state})"
