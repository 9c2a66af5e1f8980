"""SIGINT/SIGTERM as a stop request that the main thread waits for, without locks.

A Python signal handler runs in the main thread between two bytecodes, possibly while that
thread holds a lock: ``threading.Event.wait()`` holds its Condition's (non-reentrant) lock
for a few bytecodes on the way in and out, so a handler calling ``Event.set()`` there
deadlocks the process for good. The handler here only stores the signal number and writes
one byte to a non-blocking pipe; ``wait()`` selects on the pipe (PEP 475: select(2) resumes
after the handler and then sees the byte), so a signal that comes before the wait is not
lost either.
"""

from __future__ import annotations

import os
import select
import signal
from typing import Any

__all__ = ["StopSignals"]


class StopSignals:
    """``with StopSignals() as stop:`` records SIGINT/SIGTERM until the block ends.

    ``stop.is_set()`` polls, ``stop.wait(timeout)`` blocks; ``stop.signum`` is the first
    signal received (0 before any). The previous handlers are back after the block.
    """

    SIGNALS = (signal.SIGINT, signal.SIGTERM)

    def __init__(self) -> None:
        self.signum = 0
        self._read_fd = self._write_fd = -1
        self._previous: dict[int, Any] = {}

    def _handler(self, signum: int, frame: Any) -> None:
        if not self.signum:
            self.signum = signum
        try:
            os.write(self._write_fd, b"\0")
        except OSError:  # pipe full (a byte is already there) or closed: nothing to wake
            pass

    def __enter__(self) -> "StopSignals":
        self._read_fd, self._write_fd = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        for sig in self.SIGNALS:
            self._previous[sig] = signal.signal(sig, self._handler)
        return self

    def __exit__(self, *exc: object) -> None:
        for sig, previous in self._previous.items():
            signal.signal(sig, previous)
        self._previous.clear()
        for fd in (self._read_fd, self._write_fd):
            if fd >= 0:
                os.close(fd)
        self._read_fd = self._write_fd = -1

    def is_set(self) -> bool:
        return self.signum != 0

    def wait(self, timeout: float | None = None) -> bool:
        """Block until a stop signal has arrived or ``timeout`` seconds pass; True if stopped."""
        if not self.signum:
            select.select([self._read_fd], [], [], timeout)
        return self.is_set()
