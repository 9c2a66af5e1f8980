# SPDX-License-Identifier: Apache-2.0
"""``python -m bpfkit ...``: the ``bpfkit`` command (bpfkit.cli.main), for an interpreter
whose scripts directory is not on PATH."""

if __name__ == "__main__":
    from bpfkit.cli import start_command

    # What the console script's main() does first, done here before main's module imports:
    # the same signal handling from here on (so main() runs as the command: its
    # KeyboardInterrupt unwinding, its start-up and exit shortcuts), argparse without gettext,
    # the collector's threshold.
    start_command()
    from bpfkit.cli.main import main

    raise SystemExit(main())
