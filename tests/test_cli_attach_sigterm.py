# SPDX-License-Identifier: Apache-2.0
"""SIGTERM while ``bpfkit attach`` is still importing what it needs. Seen in CI (run 1 of
test_cli_signals' random moments, SIGTERM 77 ms into `attach`): attach's own SIGTERM handler
raised KeyboardInterrupt inside a lazy import, while CollectionSpec's dataclass fields were being
created; Python 3.11 wraps what __set_name__ raises in RuntimeError, which came out as a
traceback. The signal's moment cannot be chosen from outside, so these tests call the command in
this process and raise where the signal landed."""

from __future__ import annotations

import signal
import warnings
from collections.abc import Iterator
from typing import Any

import pytest

from bpfkit import cli
from bpfkit.cli import cmd_attach
from bpfkit.cli.main import EXIT_INTERRUPTED, build_parser, main
from bpfkit.errors import UsageError


@pytest.fixture
def handlers(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The signal handlers and the warnings hook the command sets, put back afterwards."""
    monkeypatch.setattr(warnings, "showwarning", warnings.showwarning)
    for signum in (signal.SIGINT, signal.SIGTERM):
        monkeypatch.setattr(cli, f"_saved_{signum}", signal.getsignal(signum), raising=False)
    yield
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, getattr(cli, f"_saved_{signum}"))


@pytest.mark.parametrize("console_script", [True, False])
def test_attach_keeps_the_console_scripts_sigterm_handler(handlers: Any, monkeypatch: pytest.MonkeyPatch,
                                                          console_script: bool) -> None:
    """As the console script, attach keeps bpfkit.cli's one handler (which holds a signal back
    during an import); a library caller's main() gets a plain KeyboardInterrupt."""
    if console_script:
        signal.signal(signal.SIGINT, cli._exit_quietly)  # what start_command does
    before = signal.getsignal(signal.SIGTERM)
    seen = []

    def check(args: Any) -> None:
        seen.append(signal.getsignal(signal.SIGTERM))
        raise UsageError("stop here")

    monkeypatch.setattr(cmd_attach, "_check_stacks_args", check)
    args = build_parser(["attach", "x.bpf.o"]).parse_args(["attach", "x.bpf.o"])
    with pytest.raises(UsageError):  # run() itself: main() would end this process as the console script
        cmd_attach.run(args)
    assert (seen[0] is cli._exit_quietly) is console_script
    assert signal.getsignal(signal.SIGTERM) is before  # put back when attach ends


def test_an_interrupt_inside_a_class_creation_is_an_interrupt(handlers: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    class Field:
        def __set_name__(self, owner: type, name: str) -> None:
            raise KeyboardInterrupt  # where the signal landed

    def creates_a_class(args: Any) -> None:
        type("Spec", (), {"programs": Field()})

    monkeypatch.setattr(cmd_attach, "_check_stacks_args", creates_a_class)
    assert main(["attach", "x.bpf.o"]) == EXIT_INTERRUPTED
