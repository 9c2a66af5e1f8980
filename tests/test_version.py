# SPDX-License-Identifier: Apache-2.0
"""One version: bpfkit/_version.py, which the installed metadata (pyproject.toml's dynamic
version), ``bpfkit.__version__`` and ``bpfkit --version`` all report."""

from __future__ import annotations

import importlib.metadata
import re
import subprocess
import sys
from pathlib import Path

import bpfkit


def test_version_agrees_everywhere() -> None:
    metadata = importlib.metadata.version("bpfkit")
    assert re.fullmatch(r"\d+\.\d+\.\d+", metadata), metadata
    assert bpfkit.__version__ == metadata
    # The console script beside this interpreter (the installed entry point), else the module.
    script = Path(sys.executable).with_name("bpfkit")
    cmd = [str(script)] if script.exists() else [sys.executable, "-m", "bpfkit.cli"]
    proc = subprocess.run([*cmd, "--version"], check=False, capture_output=True, text=True, timeout=60)
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, f"bpfkit {metadata}\n", "")


def test_version_imports_no_sub_command() -> None:
    """--version answers from the top-level parser: no sub-command module, no kernel layer."""
    code = ("import sys\nfrom bpfkit.cli.main import main\ntry:\n    main(['--version'])\nexcept SystemExit:\n    pass\n"
            "print(sorted(m for m in sys.modules if m.startswith(('bpfkit.cli.cmd_', 'bpfkit._kernel'))))")
    proc = subprocess.run([sys.executable, "-c", code], check=False, capture_output=True, text=True, timeout=60)
    assert proc.stdout.splitlines()[-1] == "[]", proc.stdout + proc.stderr
