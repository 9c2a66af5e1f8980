# SPDX-License-Identifier: Apache-2.0
"""File-descriptor ownership: every kernel object bpfkit makes is held by exactly one FD (pinning
it in bpffs: bpfkit._kernel.pinnable)."""

from __future__ import annotations

import os
import warnings
import weakref

from .._closing import ClosesOnExit
from ..errors import KernelError, UsageError

__all__ = ["FD"]


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
