# SPDX-License-Identifier: Apache-2.0
"""Anchors: where a program goes in the ordered list of a multi-program hook (bpf_mprog).

tcx hooks (6.6, e420bed02507), netkit devices (6.7) and cgroup hooks attached with links
(6.16) hold an ordered list of programs, the kernel's bpf_mprog (kernel/bpf/mprog.c): a new
program goes at the tail unless BPF_F_BEFORE/BPF_F_AFTER place it relative to a program or a
link (by fd, or by id with BPF_F_ID; a link with BPF_F_LINK), or at the head or tail when no
relative is named. Every change bumps the hook's revision, and ``expected_revision`` makes an
attach fail with ESTALE when the list changed since the caller looked. The three kinds share
the layout of ``link_create.tcx`` (relative_fd or relative_id, then expected_revision).
:class:`MprogQuery` is what the cgroup and netkit queries of such a hook share.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from .._kernel.consts import BPF_F_AFTER, BPF_F_BEFORE, BPF_F_ID, BPF_F_LINK
from .._kernel.fd import FD
from ..errors import UsageError
from ._prog_arg import prog_name
from .base import RawLink, _prog_fd

__all__ = ["Anchor", "mprog_link_args", "MprogQuery"]


@dataclasses.dataclass(frozen=True)
class Anchor:
    """Where a tcx program goes in its hook's list.

    ``Anchor.head()``/``Anchor.tail()``; ``Anchor.before(x)``/``Anchor.after(x)`` with ``x`` a
    Link or a Program attached there, or by kernel id: ``Anchor.before(prog_id=N)``,
    ``Anchor.after(link_id=N)``.
    """

    position: str  # "before" or "after"
    target: Any = None  # a link or program object
    prog_id: int = 0
    link_id: int = 0

    @classmethod
    def head(cls) -> Anchor:
        return cls("before")

    @classmethod
    def tail(cls) -> Anchor:
        return cls("after")

    @classmethod
    def before(cls, target: Any = None, *, prog_id: int = 0, link_id: int = 0) -> Anchor:
        return cls._relative("before", target, prog_id, link_id)

    @classmethod
    def after(cls, target: Any = None, *, prog_id: int = 0, link_id: int = 0) -> Anchor:
        return cls._relative("after", target, prog_id, link_id)

    @classmethod
    def _relative(cls, position: str, target: Any, prog_id: int, link_id: int) -> Anchor:
        if sum(1 for x in (target is not None, bool(prog_id), bool(link_id)) if x) != 1:
            raise UsageError(f"Anchor.{position}() takes one of: a link or program, prog_id=, link_id=")
        return cls(position, target, prog_id, link_id)

    def resolve(self) -> tuple[int, int]:
        """(BPF_F_* flags, relative fd or id) for BPF_LINK_CREATE."""
        flags = BPF_F_BEFORE if self.position == "before" else BPF_F_AFTER
        if self.prog_id:
            return flags | BPF_F_ID, self.prog_id
        if self.link_id:
            return flags | BPF_F_ID | BPF_F_LINK, self.link_id
        if self.target is None:
            return flags, 0  # head or tail
        if _is_link(self.target):
            fd = self.target.fd
            if isinstance(fd, FD) and fd.closed:
                raise UsageError(f"anchor {self}: the link is closed")
            return flags | BPF_F_LINK, int(fd)
        return flags, _prog_fd(self.target)

    def __str__(self) -> str:
        if self.prog_id:
            return f"{self.position} program id {self.prog_id}"
        if self.link_id:
            return f"{self.position} link id {self.link_id}"
        if self.target is None:
            return "head" if self.position == "before" else "tail"
        what = "link" if _is_link(self.target) else f"program {prog_name(self.target)!r}"
        return f"{self.position} {what}"


def _is_link(obj: Any) -> bool:
    return isinstance(obj, RawLink)


def mprog_link_args(anchor: Anchor | None, expected_revision: int) -> tuple[int, Callable[[Any], None]]:
    """BPF_LINK_CREATE flags and the union filler placing a program on a multi-program hook:
    link_create.tcx, whose layout netkit's and cgroup's (6.16) members share (relative_fd or
    relative_id, then expected_revision)."""
    flags, relative = anchor.resolve() if anchor is not None else (0, 0)

    def fill(attr: Any) -> None:
        attr.link_create.tcx.relative_fd = relative
        attr.link_create.tcx.expected_revision = expected_revision

    return flags, fill


class _Attached(Protocol):
    @property
    def prog_id(self) -> int: ...


class MprogQuery:
    """What the query of a multi-program hook holds besides where the hook is (a dataclass's
    fields, in the subclass): its ``programs`` in run order and its ``revision``."""

    programs: Sequence[_Attached]
    revision: int

    @property
    def prog_ids(self) -> list[int]:
        return [p.prog_id for p in self.programs]
