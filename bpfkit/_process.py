# SPDX-License-Identifier: Apache-2.0
"""Which kind of process this is: the ``bpfkit`` command, or a program using the library.

The command says so itself, first thing (bpfkit.cli.start_command: the console script's
``main()``, ``python -m bpfkit``); nothing is inferred from the program's name. bpfkit.link
reads it: the command imports link kinds on first use, to start fast; a program importing the
library gets every kind at ``import bpfkit.link``, as it always did (it may drop privileges
later and then be unable to read a module it had not imported yet).
"""

COMMAND = False  # True once bpfkit.cli.start_command has run in this process
