# SPDX-License-Identifier: Apache-2.0
"""``python -m bpfkit.cli``: as the console script, SIGINT and SIGTERM while the command's
modules import end it quietly (exit 128+N; bpfkit.cli.start_command)."""

# The C module: `import signal` first runs Python code a Ctrl-C could interrupt.
import _signal  # type: ignore[import-not-found]  # typeshed has no stub for this C module

from . import start_command

if _signal.getsignal(_signal.SIGINT) is _signal.default_int_handler:
    start_command()

from .main import main

raise SystemExit(main())
