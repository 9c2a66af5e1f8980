"""The ``bpfkit`` command. Uses only bpfkit's public API; heavy imports stay inside commands.

Run as the command, a Ctrl-C before the command proper has started (while modules import,
while arguments parse) exits 130 quietly instead of printing a KeyboardInterrupt traceback
from inside an import: the console script gets the handler from bpfkit/__init__.py (the first
bpfkit code it runs), ``python -m bpfkit.cli`` from here.
"""

import os as _os
import signal as _signal
import sys as _sys

from .. import _interrupted_early

if (_sys.argv and _sys.argv[0].endswith(_os.path.join("bpfkit", "cli", "__main__.py"))
        and _signal.getsignal(_signal.SIGINT) is _signal.default_int_handler):
    _signal.signal(_signal.SIGINT, _interrupted_early)
