# SPDX-License-Identifier: Apache-2.0
"""SIGINT/SIGTERM as a stop request that the main thread waits for, without a lost wakeup.

A Python-level signal handler runs only when the main thread next executes bytecode. A signal
that arrives after the main thread has checked for a stop but before it blocks in a system
call (select, a lock's futex wait) is taken by CPython's C handler, which only sets a flag,
and the call is not interrupted: the wait then lasts until its timeout, which is how `bpfkit
attach` once ignored Ctrl-C for good (seen in emulated VMs, where that window is wide; a
signal handled by another thread has the same effect). So the C handler itself must wake
the wait: ``signal.set_wakeup_fd`` makes it write the signal's number to a non-blocking pipe,
and ``wait()`` selects on that pipe and reads the numbers from it. The Python handler (which
must exist, or SIGINT raises KeyboardInterrupt) only records the number as well.
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
    signal received (0 before any). The previous handlers and wakeup fd are back after the
    block. Main thread only (as for ``signal.signal``).
    """

    SIGNALS = (signal.SIGINT, signal.SIGTERM)

    def __init__(self) -> None:
        self.signum = 0
        self._read_fd = self._write_fd = -1
        self._previous: dict[int, Any] = {}
        self._previous_wakeup_fd = -1

    def _record(self, signum: int) -> None:
        if not self.signum and signum in self.SIGNALS:
            self.signum = signum

    def _handler(self, signum: int, frame: Any) -> None:
        self._record(signum)

    def _drain(self) -> None:
        """Read what the C handler wrote: one byte per signal, its number."""
        while True:
            try:
                data = os.read(self._read_fd, 256)
            except (BlockingIOError, InterruptedError):
                return
            if not data:
                return
            for signum in data:
                self._record(signum)

    def __enter__(self) -> StopSignals:
        self._read_fd, self._write_fd = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        self._previous_wakeup_fd = signal.set_wakeup_fd(self._write_fd, warn_on_full_buffer=False)
        for sig in self.SIGNALS:
            self._previous[sig] = signal.signal(sig, self._handler)
        return self

    def __exit__(self, *exc: object) -> None:
        for sig, previous in self._previous.items():
            signal.signal(sig, previous)
        self._previous.clear()
        signal.set_wakeup_fd(self._previous_wakeup_fd)
        for fd in (self._read_fd, self._write_fd):
            if fd >= 0:
                os.close(fd)
        self._read_fd = self._write_fd = -1

    def is_set(self) -> bool:
        if not self.signum:
            self._drain()
        return self.signum != 0

    def wait(self, timeout: float | None = None) -> bool:
        """Block until a stop signal has arrived or ``timeout`` seconds pass; True if stopped."""
        if not self.is_set():
            select.select([self._read_fd], [], [], timeout)
        return self.is_set()
