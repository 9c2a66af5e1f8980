# SPDX-License-Identifier: Apache-2.0
"""The man pages (bpfkit.cli.manpage): man/*.1 are what the parser generates now (a page left
stale by a changed option fails here), each renders with groff's man macros without a warning
and names every sub-command and option of its command, and the wheel installs them under
share/man/man1."""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from bpfkit.cli import manpage
from bpfkit.cli.main import COMMANDS, build_parser, main

REPO = Path(__file__).resolve().parent.parent
MAN = REPO / "man"
REGENERATE = "regenerate them: bpfkit man --directory man"


def _command(name: str) -> str | None:
    return None if name == "bpfkit" else name[len("bpfkit-"):]


@pytest.mark.parametrize("name", manpage.page_names())
def test_the_page_matches_the_parser(name: str) -> None:
    path = MAN / f"{name}.1"
    assert path.exists(), f"{path} is missing: {REGENERATE}"
    assert path.read_text() == manpage.render(build_parser(), _command(name)), f"{path} is stale: {REGENERATE}"


def test_no_page_without_a_command() -> None:
    assert sorted(p.stem for p in MAN.glob("*.1")) == sorted(manpage.page_names())


def _render(page: str) -> str:
    """groff's man macros to UTF-8 text: no warning allowed (-ww), no bold or underlining, the
    minus and hyphen glyphs made plain, whitespace made single spaces (a paragraph may wrap anywhere)."""
    groff = shutil.which("groff")
    if groff is None:
        pytest.skip("groff is not installed (scripts/setup.sh installs groff-base)")
    # -P-cbou: plain text from grotty (groff 1.23, Debian 13's, writes SGR escapes by default).
    done = subprocess.run([groff, "-man", "-Tutf8", "-ww", "-P-cbou"], input=page, capture_output=True, text=True,
                          check=True, env={"PATH": "/usr/bin:/bin", "LC_ALL": "C.UTF-8"})
    assert done.stderr == ""
    assert "\x1b[" not in done.stdout and "\x08" not in done.stdout
    text = done.stdout.replace("\u2212", "-").replace("\u2010", "-")
    return " ".join(text.split())


def _visible(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    return [a for a in parser._actions if a.help != argparse.SUPPRESS]


def _expected_words(parser: argparse.ArgumentParser, path: str) -> list[str]:
    """Every option string and positional of a command, and its nested sub-commands' (by path)."""
    manpage._load(parser)
    words: list[str] = []
    for action in _visible(parser):
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                words.append(f"{path} {name}")
                words += _expected_words(sub, f"{path} {name}")
        elif action.option_strings:
            words += action.option_strings
        else:
            words.append(str(action.metavar or action.dest))
    return words


def test_the_top_page_names_every_command() -> None:
    text = _render((MAN / "bpfkit.1").read_text())
    assert text.startswith("BPFKIT(1)")
    for name, help_text in COMMANDS:
        assert f"{name} {help_text}" in text
        assert f"bpfkit-{name}(1)" in text
    for option in ("-v, --verbose", "--version", "-h, --help"):
        assert option in text
    assert "EXIT STATUS 0 success 1 the operation failed" in text
    assert "4 permission denied" in text and "130 interrupted" in text


@pytest.mark.parametrize("command", [name for name, _ in COMMANDS])
def test_a_command_page_names_its_options_and_sub_commands(command: str) -> None:
    text = _render((MAN / f"bpfkit-{command}.1").read_text())
    assert text.startswith(f"BPFKIT-{command.upper()}(1)")
    sub = manpage._subcommands(build_parser())[command]
    missing = [w for w in _expected_words(sub, f"bpfkit {command}") if w not in text]
    assert missing == []
    assert f"SYNOPSIS bpfkit {command} " in text


def test_the_nested_sub_commands_have_sections() -> None:
    text = _render((MAN / "bpfkit-link.1").read_text())
    for name in ("list", "show", "pin", "detach"):
        assert f"bpfkit link {name} [-h]" in text  # in the synopsis
    assert re.search(r"COMMANDS bpfkit link list \S", text)


def test_bpfkit_man_prints_a_page(capsys: pytest.CaptureFixture[str]) -> None:
    """Not on a terminal (pytest's capture), `bpfkit man COMMAND` prints the roff."""
    assert main(["man", "attach"]) == 0
    assert capsys.readouterr().out == (MAN / "bpfkit-attach.1").read_text()
    assert main(["man"]) == 0
    assert capsys.readouterr().out == (MAN / "bpfkit.1").read_text()


def test_bpfkit_man_rejects_an_unknown_command() -> None:
    done = subprocess.run([sys.executable, "-m", "bpfkit.cli", "man", "nosuch"], capture_output=True, text=True,
                          cwd=REPO, check=False)
    assert done.returncode == 2
    assert "argument COMMAND: invalid choice: 'nosuch'" in done.stderr


def test_bpfkit_man_writes_every_page(tmp_path: Path) -> None:
    assert main(["man", "--directory", str(tmp_path)]) == 0
    for name in manpage.page_names():
        assert (tmp_path / f"{name}.1").read_text() == (MAN / f"{name}.1").read_text()


def test_the_wheel_installs_the_pages_under_share_man() -> None:
    """pyproject.toml's data-files take every page into <prefix>/share/man/man1 (seen: `pip install`
    of the built wheel put them in <venv>/share/man/man1, where `man bpfkit-attach` found them)."""
    config = tomllib.loads((REPO / "pyproject.toml").read_text())
    patterns = config["tool"]["setuptools"]["data-files"]["share/man/man1"]
    shipped = {p.name for pattern in patterns for p in REPO.glob(pattern)}
    assert shipped == {f"{name}.1" for name in manpage.page_names()}
