"""The ``bpfkit`` command. Uses only bpfkit's public API; heavy imports stay inside commands.

Run as the command, a Ctrl-C before the command proper has started (while modules import,
while arguments parse) exits 130 quietly instead of printing a KeyboardInterrupt traceback
from inside an import: the console script gets the handler from bpfkit/__init__.py (the first
bpfkit code it runs), ``python -m bpfkit.cli`` from bpfkit/cli/__main__.py; bpfkit.cli.main
puts the default handler back when the command proper starts.
"""
