# SPDX-License-Identifier: Apache-2.0
"""The ``bpfkit`` command. Uses only bpfkit's public API; heavy imports stay inside commands."""

import os as _os
import signal as _signal


class _State:
    running = False  # True only while a command's body runs (bpfkit.cli.main sets it)


def _exit_quietly(signum: int, frame: object) -> None:
    """SIGINT/SIGTERM. While a command runs: KeyboardInterrupt, so its finally blocks detach
    and unpin what it made. Before (imports, argument parsing) and after (nothing of it exists in
    the kernel then): end at once with the shell's 128+N status, without a traceback. One
    handler for the whole run, so no moment falls between two handlers."""
    if _State.running:
        raise KeyboardInterrupt
    _os._exit(128 + signum)


def command_running(running: bool) -> None:
    _State.running = running


def quiet_signals() -> None:
    """SIGINT and SIGTERM end the process quietly (see bpfkit.cli.main.main for the command's
    own handling in between)."""
    for signum in (_signal.SIGINT, _signal.SIGTERM):
        _signal.signal(signum, _exit_quietly)


def signals_are_quiet() -> bool:
    return _signal.getsignal(_signal.SIGINT) is _exit_quietly


# As the console script (``bpfkit``), from the first import on (bpfkit/__init__.py calls
# quiet_signals first thing): Python's own SIGINT handler would raise KeyboardInterrupt inside
# whatever import is running and print a traceback.
