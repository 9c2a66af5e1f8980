# SPDX-License-Identifier: Apache-2.0
"""The command line imports only the sub-command it runs (bpfkit.cli.main.COMMANDS): the
static table holds each command's one-line help (its module only the DESCRIPTION), `bpfkit --help` imports no sub-command
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
        assert module.DESCRIPTION and not hasattr(module, "HELP"), name  # the one-line help: COMMANDS' only
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
    monkeypatch.setattr(cli._signal, "setitimer", lambda which, seconds: timers.append(seconds))
    monkeypatch.setattr(cli._State, "running", True)
    (tmp_path / "bpfkit_probe_defer.py").write_text(
        "import signal, sys\nfrom bpfkit import cli\ncli._exit_quietly(signal.SIGINT, sys._getframe())\n")
    import bpfkit_probe_defer  # type: ignore[import-not-found]  # noqa: F401  (no KeyboardInterrupt: deferred)

    assert cli._State.pending == signal.SIGINT and timers == [0.005]
    with pytest.raises(KeyboardInterrupt):  # the retry, outside any import: delivered
        cli._exit_quietly(signal.SIGALRM, sys._getframe())
    assert cli._State.pending == 0
    cli._exit_quietly(signal.SIGALRM, sys._getframe())  # nothing pending: nothing happens


def _parse_outcome(parser: object, argv: list[str], capsys: object) -> tuple[object, str, str]:
    try:
        result: object = vars(parser.parse_args(argv))  # type: ignore[attr-defined]
    except SystemExit as exc:
        result = ("exit", exc.code)
    out = capsys.readouterr()  # type: ignore[attr-defined]
    return result, out.out, out.err


def test_a_parser_for_the_named_command_parses_as_the_whole_one(capsys) -> None:
    """build_parser(argv) makes only the sub-command argv names; results, usage errors and
    help are those of the parser with every sub-command."""
    cases = [["load", "x.o", "/sys/fs/bpf/d", "--set", "a=1"], ["load"], ["-v", "load", "x.o", "d"],
             ["features", "--json"], ["load", "--bogus"], ["bogus"], ["loa", "x"], ["--verb", "load", "x", "y"],
             ["-v"], [], ["--", "load"], ["load", "-h"], ["prog", "show", "1"], ["map", "nothing"]]
    for argv in cases:
        assert cli._named_command(argv) in (None, *(n for n, _ in cli.COMMANDS))
        whole = _parse_outcome(cli.build_parser(), argv, capsys)
        assert _parse_outcome(cli.build_parser(argv), argv, capsys) == whole, argv
    assert cli._named_command(["-v", "load"]) == "load" and cli._named_command(["bogus"]) is None


def test_python_m_bpfkit_is_the_command() -> None:
    version = subprocess.run([sys.executable, "-m", "bpfkit", "--version"], capture_output=True, text=True, check=False,
                             cwd=REPO)
    from bpfkit import __version__

    assert (version.returncode, version.stdout) == (0, f"bpfkit {__version__}\n")
    usage = subprocess.run([sys.executable, "-m", "bpfkit", "load"], capture_output=True, text=True, cwd=REPO,
                           check=False)
    assert usage.returncode == 2
    assert usage.stderr.startswith("usage: bpfkit load [-h]")
    assert "error: the following arguments are required: OBJ, PIN_DIR" in usage.stderr


def test_help_width_is_shutils_without_importing_it() -> None:
    """bpfkit.cli.main.terminal_columns: shutil.get_terminal_size().columns (argparse's width)
    for $COLUMNS set, unset or bad, and stdout a terminal of some width or not a terminal."""
    import fcntl
    import os
    import pty
    import struct
    import termios

    code = ("import sys; from bpfkit.cli.main import terminal_columns; had = 'shutil' in sys.modules; "
            "import shutil; print(terminal_columns(), shutil.get_terminal_size().columns, had)")
    for columns in (None, "57", "0", "-3", "x"):
        env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
        if columns is not None:
            env["COLUMNS"] = columns
        piped = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, env=env,
                               check=True).stdout.split()
        leader, follower = pty.openpty()
        fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 30, 123, 0, 0))
        try:
            subprocess.run([sys.executable, "-c", code], stdout=follower, cwd=REPO, env=env, check=True)
            on_tty = os.read(leader, 1000).decode().split()
        finally:
            os.close(leader)
            os.close(follower)
        for ours, theirs, had in (piped, on_tty):
            assert ours == theirs and had == "False", (columns, piped, on_tty)
        assert on_tty[0] == (columns if columns == "57" else "123")
