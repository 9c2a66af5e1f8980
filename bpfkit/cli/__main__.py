"""``python -m bpfkit.cli``: as the console script, a Ctrl-C while the command's modules import
exits 130 quietly (see bpfkit/__init__.py; here argv[0] is this file's path)."""

import _signal

from .. import _interrupted_early

if _signal.getsignal(_signal.SIGINT) is _signal.default_int_handler:
    _signal.signal(_signal.SIGINT, _interrupted_early)

from .main import main  # noqa: E402 - after the handler

raise SystemExit(main())
