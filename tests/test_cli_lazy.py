# SPDX-License-Identifier: Apache-2.0
"""The command line imports only the sub-command it runs (bpfkit.cli.main.COMMANDS): the
static table says what each module's HELP says, `bpfkit --help` imports no sub-command
module, and a sub-command's parser is complete (arguments, description, defaults) when used."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from bpfkit.cli import main as cli

REPO = Path(__file__).resolve().parent.parent


def test_the_table_matches_the_modules() -> None:
    for name, text in cli.COMMANDS:
        module = cli.command_module(name)
        assert module.HELP == text, name
    listed = {p.stem[4:].replace("_", "-") for p in (REPO / "bpfkit/cli").glob("cmd_*.py")}
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


def test_an_interrupt_wrapped_by_python_counts_as_one() -> None:
    """Ctrl-C inside a lazy import can reach the command wrapped: Python turns an exception from
    a dataclass field's __set_name__ into RuntimeError (seen on a clean clone's CI run)."""
    from bpfkit.cli.main import _interrupted

    wrapped = RuntimeError("Error calling __set_name__ on 'Field' instance 'func_info' in 'ProgramSpec'")
    wrapped.__cause__ = KeyboardInterrupt()
    assert _interrupted(wrapped)
    assert _interrupted(KeyboardInterrupt())
    assert not _interrupted(RuntimeError("a real bug"))
