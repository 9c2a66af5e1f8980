# SPDX-License-Identifier: Apache-2.0
"""The ``bpfkit`` command. Uses only bpfkit's public API; heavy imports stay inside commands."""

import os as _os
import sys as _sys
import types as _types

TYPE_CHECKING = False
if TYPE_CHECKING:
    import signal as _signal
else:
    try:  # the C module signal.py wraps: the same functions and numbers, without making
        import _signal  # signal.py's Signals/Handlers/Sigmasks enums (~0.4 ms of every start-up)
    except ImportError:  # pragma: no cover - an interpreter without it: the public module
        import signal as _signal


class _State:
    running = False  # True only while a command's body runs (bpfkit.cli.main sets it)
    pending = 0  # a signal that arrived during an import, delivered once the import is done


def _in_import(frame: object) -> bool:
    """Whether ``frame`` runs inside Python's import machinery (a module being imported, or
    importlib's own bookkeeping): a KeyboardInterrupt raised there comes out wrapped (a
    dataclass field's __set_name__ -> RuntimeError) or is printed and dropped ("Exception
    ignored in" a module lock's callback)."""
    f = frame if isinstance(frame, _types.FrameType) else None
    while f is not None:
        if f.f_code.co_filename.startswith("<frozen importlib"):
            return True
        f = f.f_back
    return False


def _exit_quietly(signum: int, frame: object) -> None:
    """SIGINT/SIGTERM. While a command runs: KeyboardInterrupt, so its finally blocks detach
    and unpin what it made; if the command is importing a module lazily at that moment, the
    interrupt waits until the import is done (SIGALRM retries every 5 ms). Before (imports,
    argument parsing) and after (nothing of it exists in the kernel then): end at once with the
    shell's 128+N status, without a traceback. One handler for the whole run, so no moment falls
    between two handlers."""
    if signum == _signal.SIGALRM:
        signum, _State.pending = _State.pending, 0
        if not signum:
            return
    if _State.running:
        if _in_import(frame):
            _State.pending = signum
            _signal.setitimer(_signal.ITIMER_REAL, 0.005)
            return
        raise KeyboardInterrupt
    try:
        _sys.stdout.flush()  # what the command printed: os._exit flushes nothing
    except (OSError, ValueError):  # a closed pipe or stream: nothing to save
        pass
    _os._exit(128 + signum)


def command_running(running: bool) -> None:
    _State.running = running
    if not running and _State.pending:  # deferred during an import the command ended after
        _signal.setitimer(_signal.ITIMER_REAL, 0)
        signum, _State.pending = _State.pending, 0
        _exit_quietly(signum, None)


def quiet_signals() -> None:
    """SIGINT and SIGTERM end the process quietly (see bpfkit.cli.main.main for the command's
    own handling in between)."""
    for signum in (_signal.SIGINT, _signal.SIGTERM, _signal.SIGALRM):  # SIGALRM: a deferred one (above)
        _signal.signal(signum, _exit_quietly)


def signals_are_quiet() -> bool:
    return _signal.getsignal(_signal.SIGINT) is _exit_quietly


# As the console script (``bpfkit``), from the first import on (bpfkit/__init__.py calls
# quiet_signals first thing): Python's own SIGINT handler would raise KeyboardInterrupt inside
# whatever import is running and print a traceback.
