# SPDX-License-Identifier: Apache-2.0
"""``python -m bpfkit ...``: the ``bpfkit`` command (bpfkit.cli.main), for an interpreter
whose scripts directory is not on PATH."""

if __name__ == "__main__":
    from bpfkit.cli.main import main

    raise SystemExit(main())
