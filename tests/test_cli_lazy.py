# SPDX-License-Identifier: Apache-2.0
"""The command line imports only the sub-command it runs (bpfkit.cli.main.COMMANDS): the
static table says what each module's HELP says, `bpfkit --help` imports no sub-command
module, and a sub-command's parser is complete (arguments, description, defaults) when used."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from bpfkit.cli import main as cli
from conftest import source_path

REPO = Path(__file__).resolve().parent.parent


def test_the_table_matches_the_modules() -> None:
    for name, text in cli.COMMANDS:
        module = cli.command_module(name)
        assert module.HELP == text, name
    listed = {p.stem[4:].replace("_", "-") for p in source_path("bpfkit/cli").glob("cmd_*.py")}
    assert listed == {name for name, _ in cli.COMMANDS}


def _modules_after(code: str) -> list[str]:
    probe = f"import sys; {code}; print(sorted(m for m in sys.modules if m.startswith('bpfkit.cli.cmd_')))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=REPO, check=True)
    return eval(out.stdout.strip())  # a printed list of strings


def test_help_imports_no_command_module() -> None:
    assert _modules_after("from bpfkit.cli.main import build_parser; build_parser().format_help()") == []


def test_a_command_imports_only_its_module() -> None:
    code = "from bpfkit.cli.main import build_parser; build_parser().parse_args(['inspect', 'x.o'])"
    assert _modules_after(code) == ["bpfkit.cli.cmd_inspect"]


def test_a_used_parser_is_complete() -> None:
    args = cli.build_parser().parse_args(["load", "x.o", "/sys/fs/bpf/x"])
    assert args._run is cli.command_module("load").run and args._offline is False
    assert cli.build_parser().parse_args(["usdt", "list", "/bin/true"])._offline is True



def test_an_interrupt_waits_for_the_import_it_lands_in(tmp_path, monkeypatch) -> None:
    """Ctrl-C during a command's lazy import is held back until the import is done (raised
    inside importlib it comes out wrapped in RuntimeError, or printed as "Exception ignored"):
    seen on clean-clone CI runs of integration/test_hostile_input.py."""
    import signal
    import sys

    import pytest

    from bpfkit import cli

    (tmp_path / "bpfkit_probe_import.py").write_text(
        "import sys\nfrom bpfkit import cli\nINSIDE = cli._in_import(sys._getframe())\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    import bpfkit_probe_import  # type: ignore[import-not-found]

    assert bpfkit_probe_import.INSIDE
    assert not cli._in_import(sys._getframe())
    timers: list[float] = []
    monkeypatch.setattr(signal, "setitimer", lambda which, seconds: timers.append(seconds))
    monkeypatch.setattr(cli._State, "running", True)
    (tmp_path / "bpfkit_probe_defer.py").write_text(
        "import signal, sys\nfrom bpfkit import cli\ncli._exit_quietly(signal.SIGINT, sys._getframe())\n")
    import bpfkit_probe_defer  # type: ignore[import-not-found]  # noqa: F401  (no KeyboardInterrupt: deferred)

    assert cli._State.pending == signal.SIGINT and timers == [0.005]
    with pytest.raises(KeyboardInterrupt):  # the retry, outside any import: delivered
        cli._exit_quietly(signal.SIGALRM, sys._getframe())
    assert cli._State.pending == 0
    cli._exit_quietly(signal.SIGALRM, sys._getframe())  # nothing pending: nothing happens
