# SPDX-License-Identifier: Apache-2.0
"""File-descriptor ownership: every kernel object bpfkit makes is held by exactly one FD."""

from __future__ import annotations

import os
import warnings
import weakref

from .._closing import ClosesOnExit
from ..errors import KernelError, NotFoundError, UsageError
from .bpffs import pin_object

__all__ = ["FD", "PinnableObject"]

TYPE_CHECKING = False  # typing's TypeVar with a bound compiles the bound's text: start-up time
if TYPE_CHECKING:
    from typing import ClassVar, TypeVar

    _P = TypeVar("_P", bound="PinnableObject")


def _close_leaked(raw: int) -> None:
    # Runs from the finalizer: the owner was garbage-collected without close().
    warnings.warn(f"bpfkit: fd {raw} was not closed explicitly", ResourceWarning, stacklevel=1)
    try:
        os.close(raw)
    except OSError:
        pass


class FD(ClosesOnExit):
    """Owns one file descriptor and closes it exactly once.

    Close explicitly with :meth:`close`, as a context manager, or (as a safety net) when the
    object is garbage-collected. fd 0 is never handed out: a kernel object that received fd 0
    (because a program closed stdin) is moved to a higher number first, since 0 means
    "no fd" in many bpf_attr fields.
    """

    __slots__ = ("_raw", "_finalizer", "__weakref__")

    def __init__(self, raw: int) -> None:
        if raw < 0:
            raise UsageError(f"invalid file descriptor {raw}")
        if raw == 0:
            import fcntl  # here and in dup() only: a shared library, ~0.15 ms of the command's start-up

            try:
                moved = fcntl.fcntl(0, fcntl.F_DUPFD_CLOEXEC, 1)
            finally:
                os.close(0)
            raw = moved
        self._raw = raw
        self._finalizer = weakref.finalize(self, _close_leaked, raw)

    @property
    def raw(self) -> int:
        """The descriptor number; raises if already closed."""
        if self._raw < 0:
            raise UsageError("use of a closed file descriptor")
        return self._raw

    @property
    def closed(self) -> bool:
        return self._raw < 0

    def fileno(self) -> int:
        return self.raw

    def close(self) -> None:
        """Close the descriptor; calling it again does nothing."""
        if self._raw < 0:
            return
        raw, self._raw = self._raw, -1
        self._finalizer.detach()
        os.close(raw)

    def dup(self) -> FD:
        """A new owner of a duplicate (close-on-exec) descriptor for the same kernel object."""
        import fcntl

        try:
            return FD(fcntl.fcntl(self.raw, fcntl.F_DUPFD_CLOEXEC, 1))
        except OSError as exc:
            raise KernelError("dup fd", exc.errno or 0) from None

    def release(self) -> int:
        """Give up ownership: the caller must close the returned number."""
        raw = self.raw
        self._raw = -1
        self._finalizer.detach()
        return raw


    def __int__(self) -> int:
        return self.raw

    def __repr__(self) -> str:
        return f"FD({self._raw})" if self._raw >= 0 else "FD(closed)"


class PinnableObject(ClosesOnExit):
    """Pin, unpin and close for a kernel object held through ``self.fd`` and named ``self.name``
    (Map, Program): a pin in bpffs keeps the object alive after this process closes its fd."""

    KIND: ClassVar[str] = "object"  # what errors call it: "map", "program"
    fd: FD
    name: str
    pinned_path: str | None

    @classmethod
    def _open_pinned(cls, path: str, flags: int = 0) -> FD:
        """A new fd for the object pinned at ``path`` (BPF_OBJ_GET); NotFoundError if none."""
        import errno

        from .bpf import obj_get  # bpf imports this module

        try:
            return obj_get(path, flags)
        except KernelError as exc:
            if exc.errno == errno.ENOENT:
                raise NotFoundError(f"no pinned object at {path}") from None
            raise exc.wrap(f"open pinned {cls.KIND} {path}")

    def pin(self, path: str) -> None:
        """Pin in bpffs at ``path`` so the object outlives this process (missing directories
        under bpffs are made, as libbpf does)."""
        pin_object(self.fd, path, f"{self.KIND} {self.name!r}")
        self.pinned_path = path

    def unpin(self) -> None:
        """Remove the pin made by :meth:`pin` or found by ``load_pinned`` (gone already: fine)."""
        if self.pinned_path is None:
            return
        try:
            os.unlink(self.pinned_path)
        except FileNotFoundError:
            pass
        self.pinned_path = None

    def close(self) -> None:
        """Release this process's reference (a pinned object stays in the kernel)."""
        self.fd.close()

    @property
    def closed(self) -> bool:
        return self.fd.closed

