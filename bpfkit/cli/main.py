# SPDX-License-Identifier: Apache-2.0
"""Entry point of the ``bpfkit`` command: argument parsing, dispatch and exit codes.

Each sub-command lives in its own module ``bpfkit.cli.cmd_<name>`` exposing ``DESCRIPTION``,
``add_arguments(parser)`` and ``run(args) -> int`` (its one-line help is in COMMANDS). Modules are imported only to build the
parser, and they import the library lazily inside ``run``, so ``bpfkit --help`` stays fast.

Sub-commands and exit codes: bpfkit.cli's COMMANDS and EXIT_CODES (docs/cli.md). The
``man`` and ``completion`` commands get the parser from the namespace (``args._build_parser``,
set with each command's ``run``), not by importing this module back.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from types import ModuleType

from .._version import __version__
from . import COMMANDS, EXIT_FAILED, EXIT_INTERRUPTED, EXIT_OK, EXIT_PERMISSION, EXIT_UNSUPPORTED, EXIT_USAGE, argparse_without_gettext

argparse_without_gettext()  # before argparse (the command's start-up; no catalog: the same answers)
import argparse  # noqa: E402

TYPE_CHECKING = False  # not typing's: importing typing costs a few ms at start-up, for annotations only
if TYPE_CHECKING:
    from typing import Any


def command_module(name: str) -> ModuleType:
    """bpfkit.cli.cmd_<name> of a sub-command (plain imports, which readers and tools can follow)."""
    if name == "attach":
        from . import cmd_attach

        return cmd_attach
    if name == "inspect":
        from . import cmd_inspect

        return cmd_inspect
    if name == "load":
        from . import cmd_load

        return cmd_load
    if name == "features":
        from . import cmd_features

        return cmd_features
    if name == "prog":
        from . import cmd_prog

        return cmd_prog
    if name == "link":
        from . import cmd_link

        return cmd_link
    if name == "cgroup":
        from . import cmd_cgroup

        return cmd_cgroup
    if name == "map":
        from . import cmd_map

        return cmd_map
    if name == "gc":
        from . import cmd_gc

        return cmd_gc
    if name == "events":
        from . import cmd_events

        return cmd_events
    if name == "user-event":
        from . import cmd_user_event

        return cmd_user_event
    if name == "usdt":
        from . import cmd_usdt

        return cmd_usdt
    if name == "exporter":
        from . import cmd_exporter

        return cmd_exporter
    if name == "struct-ops":
        from . import cmd_struct_ops

        return cmd_struct_ops
    if name == "list":
        from . import cmd_list

        return cmd_list
    if name == "gen":
        from . import cmd_gen

        return cmd_gen
    if name == "completion":
        from . import cmd_completion

        return cmd_completion
    if name == "man":
        from . import cmd_man

        return cmd_man
    raise KeyError(name)


def terminal_columns() -> int:
    """shutil.get_terminal_size().columns, without importing shutil (which imports zlib, bz2 and
    lzma: ~1.5 ms of every command's start-up, for argparse's help width): $COLUMNS if positive,
    else the terminal on stdout's width, else 80."""
    try:
        columns = int(os.environ["COLUMNS"])
    except (KeyError, ValueError):
        columns = 0
    if columns > 0:
        return columns
    try:
        size = os.get_terminal_size(sys.__stdout__.fileno())  # type: ignore[union-attr]  # None: AttributeError, as shutil
    except (AttributeError, ValueError, OSError):
        return 80
    return size.columns or 80


class HelpFormatter(argparse.HelpFormatter):
    """argparse's formatter with the width shutil would give it (see terminal_columns). Parsing
    makes one too: intermixed parsing captures the usage line for its error messages."""

    def __init__(self, prog: str, indent_increment: int = 2, max_help_position: int = 24,
                 width: int | None = None) -> None:
        super().__init__(prog, indent_increment, max_help_position,
                         terminal_columns() - 2 if width is None else width)


class IntermixedParser(argparse.ArgumentParser):
    """A sub-command parser that takes options anywhere among the positionals
    (``attach OBJ -p NAME SPEC`` as well as ``attach -p NAME OBJ SPEC``), through argparse's
    intermixed parsing. A parser with its own sub-commands (``prog show``, ``link pin``) parses
    as usual and its sub-commands intermix (argparse cannot intermix around a sub-command)."""

    _plain = False  # set while parse_known_intermixed_args calls back into parse_known_args
    _command: str | None = None  # a sub-command whose module has not added its arguments yet

    def _load(self) -> None:
        """Import this sub-command's module and let it add its arguments (once)."""
        if self._command is None:
            return
        module, self._command = command_module(self._command), None
        self.description = module.DESCRIPTION
        module.add_arguments(self)
        _verbose_everywhere(self)
        self.set_defaults(_run=module.run, _offline=bool(getattr(module, "OFFLINE", False)),
                          _build_parser=build_parser)

    def format_usage(self) -> str:
        self._load()
        return super().format_usage()

    def format_help(self) -> str:
        self._load()
        return super().format_help()

    def parse_known_args(  # type: ignore[override]  # typeshed overloads on the namespace type; one signature here
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        self._load()
        if (self._plain or any(a.nargs in (argparse.PARSER, argparse.REMAINDER) for a in self._actions)
                or (args is not None and not any(word.startswith("-") for word in args))):
            # No option among the words (``load OBJ DIR``): nothing to intermix, and a plain
            # parse skips the usage line intermixed parsing formats up front for its error
            # messages (~0.4 ms: four regular expressions compiled on every start).
            return super().parse_known_args(args, namespace)
        self._plain = True
        try:
            return self.parse_known_intermixed_args(args, namespace)
        finally:
            self._plain = False


def _verbose_everywhere(parser: argparse.ArgumentParser) -> None:
    """-v/--verbose in nested sub-commands too (``bpfkit prog show ID -v``)."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for nested in action.choices.values():
                if not any("-v" in a.option_strings for a in nested._actions):
                    nested.add_argument("-v", "--verbose", action="store_true", default=argparse.SUPPRESS,
                                        help="print full details of errors")
                _verbose_everywhere(nested)


def _named_command(argv: Sequence[str]) -> str | None:
    """The sub-command ``argv`` names, when its first word after the top-level -v/--verbose is
    exactly one of COMMANDS; else None (help, --version, a typo, an option argparse abbreviates):
    those need every sub-command's parser, for the list or the "invalid choice" message."""
    names = {name for name, _ in COMMANDS}
    for word in argv:
        if word in ("-v", "--verbose"):
            continue
        return word if word in names else None
    return None


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The ``bpfkit`` parser. Given the command line, only the sub-command it names gets a
    parser: argparse translates every help string of a parser through gettext as it is made
    (a .mo file lookup each), about 0.3 ms per sub-command; the parse and its errors are the same."""
    only = _named_command(argv) if argv is not None else None
    parser = argparse.ArgumentParser(
        prog="bpfkit",
        description="Load eBPF objects, attach them and read what they send.",
        formatter_class=HelpFormatter,
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="print full details of errors")
    parser.add_argument("--version", action="version", version=f"bpfkit {__version__}")
    # prog: what argparse would otherwise work out by formatting the usage line (the parser has
    # no positionals), which compiles five regular expressions on every start (~0.5 ms).
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=IntermixedParser, prog=parser.prog)
    for name, text in COMMANDS:
        if only is not None and name != only:
            continue
        cmd = sub.add_parser(name, help=text, formatter_class=HelpFormatter)
        cmd.add_argument("-v", "--verbose", action="store_true", default=argparse.SUPPRESS,
                         help="print full details of errors")
        cmd._command = name  # the rest when the parser is used (IntermixedParser._load)
    return parser


def exit_code_for(exc: BaseException) -> int:
    from ..errors import KernelPermissionError, NotSupportedError, ParseError, UsageError

    if isinstance(exc, NotSupportedError):
        return EXIT_UNSUPPORTED
    if isinstance(exc, KernelPermissionError):
        return EXIT_PERMISSION
    if isinstance(exc, (ParseError, UsageError)):
        return EXIT_USAGE
    return EXIT_FAILED


def report(exc: BaseException, verbose: bool) -> None:
    """Print an error in one or two lines; --verbose adds the log and the cause chain. Names
    in the text (an object's section, a symbol) may hold ESC or a newline: every line goes out
    through bpfkit._visible, so they print as ``\\x1b``, never as a terminal escape."""
    from .._visible import visible
    from ..errors import VerifierError, reason_last

    text = str(exc)
    if isinstance(exc, VerifierError) and verbose:
        # The whole log, its statistics before the verifier's last message: the last line
        # printed is the reason.
        text = f"{text}\n--- verifier log ---\n{reason_last(exc.log)}"
    # Continuation lines (a probe spec's caret line, a log tail) line up under the message.
    prefix = "bpfkit: error: "
    print(prefix + visible(text, keep="\n\t").replace("\n", "\n" + " " * len(prefix)), file=sys.stderr)
    if verbose:
        cause = exc.__cause__ or exc.__context__
        while cause is not None:
            print(f"  caused by: {type(cause).__name__}: {visible(str(cause), keep=chr(10))}", file=sys.stderr)
            cause = cause.__cause__ or cause.__context__
        if isinstance(exc, VerifierError) and exc.reason:
            # The causes came after the log: end with the reason again, on one line.
            print(f"{prefix}{exc.name!r} rejected: {exc.reason}", file=sys.stderr)


def _report_os_error(exc: OSError, verbose: bool) -> None:
    """An OSError that reached the command line (a path bpfkit was given or derived from what
    it was given): one line naming the path, never a traceback."""
    import errno as _errno

    from ..errors import errno_name

    name = errno_name(exc.errno) if exc.errno else type(exc).__name__
    reason = exc.strerror or str(exc)
    if exc.errno == _errno.ENAMETOOLONG:
        reason += ": a file name is at most 255 bytes, a path 4095"
    paths = []
    for path in (exc.filename, exc.filename2):
        if path is not None:
            text = os.fsdecode(path) if isinstance(path, bytes) else str(path)
            if len(text) > 200:  # a 10,000-character argument makes a useless message
                text = f"{text[:120]}...{text[-40:]} ({len(text)} characters)"
            paths.append(text)
    where = " -> ".join(paths) or "(no path)"
    from .._visible import visible

    print(f"bpfkit: error: {visible(where)}: {name} ({reason})", file=sys.stderr)
    if verbose:
        import traceback

        traceback.print_exception(exc, file=sys.stderr)


def _one_line_warning(message: Warning | str, category: type[Warning], filename: str, lineno: int,
                      file: Any = None, line: str | None = None) -> None:
    """warnings.showwarning for the command line: ``bpfkit: warning: TEXT`` on one line (no
    source file, line number or code line; a message's continuation lines, such as a verifier log
    tail, are left to --verbose)."""
    text = str(message).strip()
    if text.startswith("bpfkit: "):
        text = text[len("bpfkit: "):]
    first = text.split("\n")[0] if text else category.__name__
    from .._visible import visible

    try:
        print(f"bpfkit: warning: {visible(first)}", file=file or sys.stderr)
    except (OSError, ValueError):
        pass


def setup_warnings(offline: bool, verbose: bool) -> None:
    """Offline commands (inspect, usdt: no kernel objects made) print no warnings from bpfkit;
    the others print each on one line (in full with --verbose)."""
    import warnings

    if offline and not verbose:
        warnings.filterwarnings("ignore", module=r"bpfkit(\.|$)")
        warnings.filterwarnings("ignore", message=r"bpfkit: ")
    elif not verbose:
        warnings.showwarning = _one_line_warning


def main(argv: Sequence[str] | None = None) -> int:
    """The ``bpfkit`` command. Without ``argv`` it is the console script (it reads sys.argv and
    ends the process); with it, a library caller's run (its handlers and exit are its own)."""
    from . import command_running, signals_are_quiet, start_command

    if argv is None:
        start_command()
    command_line = signals_are_quiet()
    try:
        code = _main(argv, command_line)
    except KeyboardInterrupt:
        code = EXIT_INTERRUPTED
    finally:
        while True:
            try:
                command_running(False)
                break
            except KeyboardInterrupt:  # the signal came as the command ended, before the
                code = EXIT_INTERRUPTED  # handler could know: it ends as interrupted (130)
    if command_line:
        _end_process(code)
    return code


def _end_process(code: int) -> None:
    """The command is done: end its process without the interpreter's finalization, which
    walks every object left in full collections and then frees them one by one (~5 ms of
    `bpfkit load`'s ~40: gc.freeze() alone saved 3-4, skipping the rest another 1.3). Nothing
    bpfkit must undo is skipped: it runs from the command's finally blocks, and from atexit
    (weakref.finalize: an unclosed FD, a tracefs probe, a user_events registration), which runs
    here as at any exit; the kernel closes the process's fds. Left to the interpreter, as
    before, when a thread it would wait for is still running or the standard streams cannot be
    flushed (it reports that as it always does). The command only (signals_are_quiet: the
    console script, python -m bpfkit); a library caller's process is its own."""
    import gc  # built in: no import cost

    gc.freeze()  # the collections that do run from here (atexit callbacks) skip what is left
    threading = sys.modules.get("threading")
    if threading is not None and any(t.is_alive() and not t.daemon and t is not threading.main_thread()
                                     for t in threading.enumerate()):
        return
    import atexit

    atexit._run_exitfuncs()
    try:
        for stream in (sys.stdout, sys.stderr):
            if stream is not None:  # None: the descriptor was closed when Python started
                stream.flush()
    except (OSError, ValueError):
        return
    os._exit(code)


class _InspectOnUse(ModuleType):
    """What ``dataclasses`` gets for ``import inspect`` in the bpfkit command: the real module,
    imported on first use (see _dataclasses_without_inspect)."""

    def __getattr__(self, name: str) -> object:
        import inspect  # the real module: the stand-in left sys.modules when dataclasses was imported

        return getattr(inspect, name)


def _dataclasses_without_inspect() -> None:
    """Import ``dataclasses`` without ``inspect`` (~6 ms of the bpfkit command's start-up:
    ast, dis, tokenize, linecache...). dataclasses uses it for one thing, the __doc__ of a
    dataclass declared without a docstring (inspect.signature), so it gets a stand-in that
    imports inspect then. Only dataclasses sees the stand-in: it is in sys.modules for the
    length of that import, so any other ``import inspect`` gets the real module. The console
    script only (a library caller's process is left as it is). Python 3.13's dataclasses reads
    every class's annotations through inspect.get_annotations: there, inspect is imported anyway."""
    if sys.version_info < (3, 13):
        from . import StandIn

        with StandIn(_InspectOnUse("inspect")):
            import dataclasses  # noqa: F401


def _main(argv: Sequence[str] | None, command_line: bool) -> int:
    if argv is None:
        argv = sys.argv[1:]
    parser = build_parser(argv)
    args = parser.parse_args(argv)  # a signal here still ends the process quietly
    if not getattr(args, "_run", None):
        parser.print_help()
        return EXIT_USAGE
    from ..errors import BPFKitError

    setup_warnings(args._offline, args.verbose)
    if command_line:
        # While the command runs, SIGINT and SIGTERM unwind it (KeyboardInterrupt, so every
        # finally block closes what it made; `attach` installs its own wait); before (imports,
        # argument parsing, whose intermixed mode cannot be interrupted cleanly) and after,
        # they end the process quietly (bpfkit.cli._exit_quietly).
        from . import command_running

        _dataclasses_without_inspect()
        command_running(True)
    try:
        return int(args._run(args) or 0)
    except BPFKitError as exc:
        report(exc, args.verbose)
        return exit_code_for(exc)
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    except RuntimeError as exc:
        # Python 3.11 wraps what a descriptor's __set_name__ raises in RuntimeError: a signal
        # that lands while a lazily imported module creates a class (a dataclass's fields) is
        # still an interrupt (seen: SIGTERM 77 ms into `attach`, in CollectionSpec's creation).
        if isinstance(exc.__cause__, KeyboardInterrupt):
            return EXIT_INTERRUPTED
        raise
    except BrokenPipeError:
        return EXIT_OK
    except OSError as exc:
        _report_os_error(exc, args.verbose)
        return EXIT_FAILED
    except MemoryError:
        print("bpfkit: error: out of memory (ENOMEM)", file=sys.stderr)
        return EXIT_FAILED


if __name__ == "__main__":
    raise SystemExit(main())
