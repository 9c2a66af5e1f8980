# SPDX-License-Identifier: Apache-2.0
"""What the CLI folds of issue #36 keep: a command's DESCRIPTION is one prose paragraph that
--help and the man page print alike, and `attach --events` and `attach --otlp` refuse a map
the object lacks through one check (bpfkit.cli.cmd_attach._events_maps)."""

from __future__ import annotations

import argparse
from types import SimpleNamespace

import pytest

from bpfkit.cli import cmd_attach
from bpfkit.cli import main as cli
from bpfkit.cli.manpage import _text
from bpfkit.errors import UsageError


@pytest.mark.parametrize("name", [name for name, _ in cli.COMMANDS])
def test_description_is_one_paragraph(name: str) -> None:
    # argparse folds all white space in a description; the man writer starts a paragraph at a
    # blank line: a blank line would make --help and bpfkit-NAME(1) differ.
    text = cli.command_module(name).DESCRIPTION
    assert "\n\n" not in text.strip(), name
    folded = " ".join(text.split())
    assert argparse.HelpFormatter(name, width=10_000)._fill_text(text, 10_000, "") == folded
    assert _text(text) == _text(folded)


def test_events_maps_one_check() -> None:
    events, other = object(), object()
    coll = SimpleNamespace(maps={"events": events, "other": other})
    assert cmd_attach._events_maps(coll, ["other", "events"]) == [other, events]
    with pytest.raises(UsageError, match=r"--events nosuch: no map 'nosuch' in the object \(it has: events, other\)"):
        cmd_attach._events_maps(coll, ["events", "nosuch"])
