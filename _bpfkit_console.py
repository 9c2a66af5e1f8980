# SPDX-License-Identifier: Apache-2.0
"""The ``bpfkit`` console script's entry point (pyproject.toml's [project.scripts]).

A module of its own, outside the bpfkit package, so that importing bpfkit never depends on how
the program is called: the pip-generated script imports this first, and SIGINT/SIGTERM end the
process quietly from here on, before any of bpfkit is imported, until bpfkit.cli.main.main()
installs the command's own handlers (bpfkit.cli.start_command). Through the C module _signal,
always loaded, because importing ``signal`` runs Python code a Ctrl-C could interrupt.
"""

import _signal  # type: ignore[import-not-found]  # typeshed has no stub for this C module (the Python one is `signal`)
import os as _os


def _exit_at_once(signum: int, frame: object) -> None:
    _os._exit(128 + signum)


_signal.signal(_signal.SIGINT, _exit_at_once)
_signal.signal(_signal.SIGTERM, _exit_at_once)

from bpfkit.cli.main import main  # noqa: E402  (after the handlers: that is the point)

__all__ = ["main"]
