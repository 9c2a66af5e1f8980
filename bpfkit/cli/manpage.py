# SPDX-License-Identifier: Apache-2.0
"""Man pages (roff, man(7) macros) generated from bpfkit's argparse parser: ``bpfkit(1)`` and
one ``bpfkit-COMMAND(1)`` per sub-command, whose nested sub-commands (``prog show``, ``link
pin``) are sections of their command's page.

The pages are built from the parser's actions, not from argparse's help formatter, whose
output changes between Python versions (3.13 writes ``-p, --program NAME`` where 3.11 wrote
``-p NAME, --program NAME``) and with the terminal's width: the same parser gives the same
pages everywhere. The repository keeps them in man/ (installed with the wheel under
share/man/man1); ``bpfkit man --directory man`` writes them again, and tests/test_manpage.py
fails when they no longer match the parser.
"""

from __future__ import annotations

import argparse
import re

from . import COMMANDS, EXIT_CODES

SECTION = "1"


def page_names() -> list[str]:
    """Every page's name: bpfkit, then bpfkit-COMMAND in `bpfkit --help`'s order."""
    return ["bpfkit"] + [f"bpfkit-{name}" for name, _ in COMMANDS]


def render(parser: argparse.ArgumentParser, command: str | None = None) -> str:
    """The page of ``bpfkit`` (command None) or of ``bpfkit COMMAND``, from bpfkit's parser."""
    if command is None:
        return _top_page(parser)
    sub = _subcommands(parser).get(command)
    if sub is None:
        raise KeyError(command)
    return _command_page(sub, command, dict(COMMANDS)[command])


# ------------------------------------------------------------------- roff


def _text(text: str) -> str:
    """Plain text as roff: backslashes and hyphen-minus escaped (options stay searchable and
    copyable), no line starting with a control character, paragraphs kept."""
    text = text.replace("\\", "\\e").replace("-", "\\-")
    paragraphs = [" ".join(p.split()) for p in re.split(r"\n\s*\n", text.strip())]
    return "\n.PP\n".join(_line_safe(p) for p in paragraphs if p)


def _line_safe(line: str) -> str:
    return "\\&" + line if line[:1] in (".", "'") else line


def _quoted(text: str) -> str:
    """A macro argument: inside double quotes, where a quote is written twice."""
    return '"' + text.replace("\\", "\\e").replace("-", "\\-").replace('"', '""') + '"'


def _header(name: str, summary: str) -> str:
    # .nh: no hyphenation (a hyphen added inside an option or a page name misleads).
    return (f".TH {name.upper()} {SECTION} \"\" bpfkit \"bpfkit manual\"\n.nh\n"
            f".SH NAME\n{_text(name)} \\- {_text(summary)}\n")


# ------------------------------------------------------------------- the parser's actions


def _load(parser: argparse.ArgumentParser) -> None:
    load = getattr(parser, "_load", None)  # a sub-command's arguments come with its module
    if load is not None:
        load()


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    _load(parser)
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def _subcommand_help(parser: argparse.ArgumentParser) -> list[tuple[str, str]]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return [(choice.dest, _help(parser, choice)) for choice in action._choices_actions]
    return []


def _visible(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    return [a for a in parser._actions
            if a.help != argparse.SUPPRESS and not isinstance(a, argparse._SubParsersAction)]


def _help(parser: argparse.ArgumentParser, action: argparse.Action) -> str:
    if not action.help:
        return ""
    return parser._get_formatter()._expand_help(action)  # %(default)s, %(prog)s, %%


def _metavar(action: argparse.Action) -> str:
    if isinstance(action.metavar, str):
        return action.metavar
    if action.choices is not None:
        return "{" + ",".join(str(c) for c in action.choices) + "}"
    return action.dest.upper() if action.option_strings else action.dest


def _args(action: argparse.Action) -> str:
    """What follows an option (or stands for a positional), italic, as argparse's usage writes it."""
    if isinstance(action.metavar, tuple):
        names = [str(m) for m in action.metavar]
    else:
        names = [_metavar(action)] * (action.nargs if isinstance(action.nargs, int) else 1)
    words = [f"\\fI{_text(n)}\\fR" for n in names]
    one = words[0] if words else ""
    if action.nargs == 0:
        return ""
    if action.nargs == argparse.OPTIONAL:
        return f"[{one}]"
    if action.nargs == argparse.ZERO_OR_MORE:
        return f"[{one} ...]"
    if action.nargs == argparse.ONE_OR_MORE:
        return f"{one} [{one} ...]"
    if action.nargs == argparse.REMAINDER:
        return "..."
    return " ".join(words)


def _invocation(action: argparse.Action) -> str:
    """``-p NAME, --program NAME`` (bold options, italic values); a positional's value."""
    if not action.option_strings:
        return _args(action)
    args = _args(action)
    return ", ".join(f"\\fB{_text(o)}\\fR" + (f" {args}" if args else "") for o in action.option_strings)


def _synopsis(parser: argparse.ArgumentParser, path: str) -> str:
    words = [f"\\fB{_text(path)}\\fR"]
    # Options first, then positionals, as argparse's usage line orders them.
    for action in sorted(_visible(parser), key=lambda a: not a.option_strings):
        if action.option_strings:
            args = _args(action)
            # "\\ " (unpaddable space): an option and its value stay on one line.
            option = f"\\fB{_text(action.option_strings[0])}\\fR" + (f"\\ {args}" if args else "")
            words.append(option if action.required else f"[{option}]")
        else:
            words.append(_args(action))
    if _subcommands(parser):
        words.append("\\fICOMMAND\\fR ...")
    return ".ad l\n" + " ".join(words) + "\n.ad\n"


def _options(parser: argparse.ArgumentParser) -> str:
    return "".join(f".TP\n{_invocation(a)}\n{_text(_help(parser, a)) or '.'}\n" for a in _visible(parser))


# ------------------------------------------------------------------- the pages


def _top_page(parser: argparse.ArgumentParser) -> str:
    commands = _subcommand_help(parser)
    out = [_header("bpfkit", parser.description or "")]
    out.append(".SH SYNOPSIS\n" + _synopsis(parser, "bpfkit"))
    out.append(f".SH DESCRIPTION\n{_text(parser.description or '')}\n"
               ".PP\nEach command has its own page: \\fBbpfkit\\-\\fICOMMAND\\fR(1).\n")
    out.append(".SH OPTIONS\n" + _options(parser))
    out.append(".SH COMMANDS\n" + "".join(
        f".TP\n\\fB{_text(name)}\\fR\n{_text(text)}; see \\fBbpfkit\\-{_text(name)}\\fR(1).\n"
        for name, text in commands))
    out.append(".SH EXIT STATUS\n" + _exit_status())
    out.append(".SH SEE ALSO\n" + ",\n".join(f".BR bpfkit\\-{_text(n)} (1)" for n, _ in commands) + "\n")
    return "".join(out)


def _command_page(parser: argparse.ArgumentParser, command: str, summary: str) -> str:
    path = f"bpfkit {command}"
    out = [_header(f"bpfkit-{command}", summary)]
    nested = _subcommands(parser)
    out.append(".SH SYNOPSIS\n" + _synopsis(parser, path))
    for name, sub in nested.items():
        out.append(".PP\n" + _synopsis(sub, f"{path} {name}"))
    out.append(f".SH DESCRIPTION\n{_text(parser.description or summary)}\n")
    if parser.epilog:
        out.append(f".PP\n{_text(parser.epilog)}\n")
    out.append(".SH OPTIONS\n" + _options(parser))
    if nested:
        out.append(".SH COMMANDS\n")
        helps = dict(_subcommand_help(parser))
        for name, sub in nested.items():
            out.append(f".SS {_quoted(f'{path} {name}')}\n{_text(sub.description or helps.get(name, ''))}\n")
            out.append(_options(sub))
    out.append(".SH EXIT STATUS\nSee \\fBbpfkit\\fR(1).\n.SH SEE ALSO\n.BR bpfkit (1)\n")
    return "".join(out)


def _exit_status() -> str:
    """The exit codes of bpfkit.cli.EXIT_CODES (one source for the page and the command)."""
    return "".join(f".TP\n.B {code}\n{_text(text)}\n" for code, text in EXIT_CODES)


def write_pages(parser: argparse.ArgumentParser, directory: str) -> list[str]:
    """Every page written into directory as NAME.1 (bpfkit._files.write_atomic: no symlink
    planted in the directory is followed); the paths written."""
    import os

    from .._files import write_atomic

    os.makedirs(directory, exist_ok=True)
    written = []
    for name in page_names():
        command = None if name == "bpfkit" else name[len("bpfkit-"):]
        path = os.path.join(directory, f"{name}.{SECTION}")
        write_atomic(path, render(parser, command), "man page")
        written.append(path)
    return written
