# SPDX-License-Identifier: Apache-2.0
"""The ``bpfkit`` command: its sub-commands (COMMANDS) and exit codes (EXIT_CODES, docs/cli.md),
and what every command's process shares (quiet signals, argparse without gettext). Uses only
bpfkit's public API; heavy imports stay inside commands."""

import os as _os
import sys as _sys
import types as _types

TYPE_CHECKING = False
if TYPE_CHECKING:
    import signal as _signal
else:
    try:  # the C module signal.py wraps: the same functions and numbers, without making
        import _signal  # signal.py's Signals/Handlers/Sigmasks enums (~0.4 ms of every start-up)
    except ImportError:  # pragma: no cover - an interpreter without it: the public module
        import signal as _signal


# ------------------------------------------------------------ the command's table of contents
# Here, not in a module of its own: the package is imported anyway (one module less to find and
# load on every start), and the parser (cli.main) and the commands that describe it (man,
# completion, cli.manpage) read it without importing one another.
# Every sub-command with its one-line help (its module has the longer DESCRIPTION): the
# top-level parser needs no sub-command module, and a sub-command's module
# (bpfkit.cli.cmd_<name>) is imported when its parser is first used, so `bpfkit load ...`
# imports one of the seventeen.
COMMANDS: tuple[tuple[str, str], ...] = (
    ("attach", "load an object, attach its programs, and stay attached until Ctrl-C/SIGTERM"),
    ("inspect", "list the programs, maps and variables of a BPF object file (--core: its CO-RE relocations)"),
    ("load", "load an object's programs and pin them and its maps in bpffs"),
    ("features", "probe the running kernel's BPF features"),
    ("prog", "list or show the system's BPF programs"),
    ("link", "list, show, pin or detach the system's BPF links"),
    ("cgroup", "show the programs attached to a cgroup, or to every cgroup of a tree"),
    ("map", "list, show or dump the system's BPF maps"),
    ("struct-ops", "list, show or unregister the system's struct_ops maps (TCP congestion controls, sched_ext)"),
    ("gc", "remove tracefs probes left by bpfkit processes that died"),
    ("events", "print the records of a pinned ring buffer or perf event array"),
    ("user-event", "list, register, emit and delete user_events (trace events defined from user space)"),
    ("usdt", "list the USDT probes of a binary"),
    ("exporter", "serve ebpf_exporter configs (NAME.yaml beside NAME.bpf.o) with ebpf_exporter's flags and metric names"),
    ("list", "list probes (tracepoints, kprobes, raw tracepoints, fentry, uprobes, USDT) like bpftrace -l"),
    ("gen", "generate code from an object: a typed Python skeleton"),
    ("completion", "print a bash or zsh completion script for bpfkit"),
    ("man", "show the man page of bpfkit or of one of its commands (generated from the parser)"),
)

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_UNSUPPORTED, EXIT_PERMISSION, EXIT_INTERRUPTED = 0, 1, 2, 3, 4, 130

# The exit codes with what each means: bpfkit(1)'s EXIT STATUS (bpfkit.cli.manpage) and docs/cli.md.
EXIT_CODES: tuple[tuple[int, str], ...] = (
    (EXIT_OK, "success"),
    (EXIT_FAILED, "the operation failed (kernel refused, verifier rejected, ...)"),
    (EXIT_USAGE, "bad input or usage (malformed object, bad probe spec, bad arguments)"),
    (EXIT_UNSUPPORTED, "this kernel lacks a feature the operation needs"),
    (EXIT_PERMISSION, "permission denied (a capability is missing)"),
    (EXIT_INTERRUPTED, "interrupted (Ctrl-C) before finishing"),
)


class _State:
    running = False  # True only while a command's body runs (bpfkit.cli.main sets it)
    pending = 0  # a signal that arrived during an import, delivered once the import is done


def _in_import(frame: object) -> bool:
    """Whether ``frame`` runs inside Python's import machinery (a module being imported, or
    importlib's own bookkeeping): a KeyboardInterrupt raised there comes out wrapped (a
    dataclass field's __set_name__ -> RuntimeError) or is printed and dropped ("Exception
    ignored in" a module lock's callback)."""
    f = frame if isinstance(frame, _types.FrameType) else None
    while f is not None:
        if f.f_code.co_filename.startswith("<frozen importlib"):
            return True
        f = f.f_back
    return False


def _exit_quietly(signum: int, frame: object) -> None:
    """SIGINT/SIGTERM. While a command runs: KeyboardInterrupt, so its finally blocks detach
    and unpin what it made; if the command is importing a module lazily at that moment, the
    interrupt waits until the import is done (SIGALRM retries every 5 ms). Before (imports,
    argument parsing) and after (nothing of it exists in the kernel then): end at once with the
    shell's 128+N status, without a traceback. One handler for the whole run, so no moment falls
    between two handlers."""
    if signum == _signal.SIGALRM:
        signum, _State.pending = _State.pending, 0
        if not signum:
            return
    if _State.running:
        if _in_import(frame):
            _State.pending = signum
            _signal.setitimer(_signal.ITIMER_REAL, 0.005)
            return
        raise KeyboardInterrupt
    try:
        if _sys.stdout is not None:  # None: descriptor 1 was closed when Python started
            _sys.stdout.flush()  # what the command printed: os._exit flushes nothing
    except (OSError, ValueError, RuntimeError):  # a closed pipe or stream: nothing to save;
        pass  # RuntimeError: the signal came while stdout was flushing (a write interrupted)
    _os._exit(128 + signum)


def command_running(running: bool) -> None:
    _State.running = running
    if not running and _State.pending:  # deferred during an import the command ended after
        _signal.setitimer(_signal.ITIMER_REAL, 0)
        signum, _State.pending = _State.pending, 0
        _exit_quietly(signum, None)


def quiet_signals() -> None:
    """SIGINT and SIGTERM end the process quietly (see bpfkit.cli.main.main for the command's
    own handling in between)."""
    for signum in (_signal.SIGINT, _signal.SIGTERM, _signal.SIGALRM):  # SIGALRM: a deferred one (above)
        _signal.signal(signum, _exit_quietly)


def signals_are_quiet() -> bool:
    return _signal.getsignal(_signal.SIGINT) is _exit_quietly


# As the command (the console script's main(), python -m bpfkit: start_command calls
# quiet_signals first thing): Python's own SIGINT handler would raise KeyboardInterrupt inside
# whatever import is running and print a traceback.


class _Untranslated(_types.ModuleType):
    """What argparse gets for ``from gettext import gettext as _, ngettext`` in the bpfkit command
    when gettext has no catalog to use (see argparse_without_gettext): gettext's own answers then
    (NullTranslations)."""

    @staticmethod
    def gettext(message: str) -> str:
        return message

    @staticmethod
    def ngettext(singular: str, plural: str, n: int) -> str:
        return singular if n == 1 else plural


def _no_catalog() -> bool:
    """Whether gettext.gettext, in a process that has not imported gettext, can translate
    nothing: it looks only for ``<sys.base_prefix>/share/locale/<lang>/LC_MESSAGES/messages.mo``
    (the default domain and directory), <lang> from $LANGUAGE, $LC_ALL, $LC_MESSAGES or $LANG.
    True when no such file exists under any <lang> (a listing of the directory, then one stat
    per entry; none at all when the directory is missing); False, so the real gettext decides,
    when a language could name a path outside it ("", ".", "..", a "/")."""
    for name in ("LANGUAGE", "LC_ALL", "LC_MESSAGES", "LANG"):
        value = _os.environ.get(name)
        if value and ("/" in value or any(lang == "" or lang.startswith(".") for lang in value.split(":"))):
            return False
    localedir = _os.path.join(_sys.base_prefix, "share", "locale")
    try:
        entries = _os.listdir(localedir)
    except (FileNotFoundError, NotADirectoryError):
        return True
    except OSError:  # unreadable: a catalog may still be found by its path
        return False
    return not any(_os.path.exists(_os.path.join(localedir, entry, "LC_MESSAGES", "messages.mo")) for entry in entries)


def argparse_without_gettext() -> None:
    """Import ``argparse`` without ``gettext`` when gettext could translate none of its messages
    (_no_catalog): ~2 ms of every command's start-up, measured on `bpfkit load` and `--help`
    (gettext and the locale module it imports for locale.normalize, then a catalog search per
    message as the parser is built). argparse gets a stand-in that answers as gettext would
    without a catalog; it is in sys.modules for the length of that import only, so any other
    ``import gettext`` gets the real module. bpfkit.cli.main imports argparse through it (a
    process that imported argparse or gettext already is left as it is)."""
    if "argparse" in _sys.modules or "gettext" in _sys.modules or not _no_catalog():
        return
    with StandIn(_Untranslated("gettext")):
        try:
            import argparse  # noqa: F401
        except ImportError:  # an argparse wanting more of gettext: bpfkit.cli.main imports it with the real one
            pass


class StandIn:
    """For the command's start-up stand-ins (argparse without gettext, dataclasses without
    inspect): while the with-block runs, ``module`` takes the place of the module of its name
    in sys.modules, so the import made in the block gets it; any later import of that name
    gets the real module. Nothing when the real one is imported already."""

    def __init__(self, module: _types.ModuleType) -> None:
        self.module = module
        self.placed = False

    def __enter__(self) -> None:
        if self.module.__name__ not in _sys.modules:
            _sys.modules[self.module.__name__] = self.module
            self.placed = True

    def __exit__(self, *exc: object) -> None:
        if self.placed:
            del _sys.modules[self.module.__name__]


def start_command() -> None:
    """What the bpfkit command's process does first (the console script's main(), called without
    arguments; python -m bpfkit and python -m bpfkit.cli): quiet signals, bpfkit._lazy.IN_COMMAND, argparse without gettext, and a
    collector that runs its young generation every 20,000 allocations instead of 700. Start-up
    makes ~100k objects that all live to the end (modules, functions, classes): collecting them
    every 700 found nothing and cost ~1.2 ms of `bpfkit load`, measured. Cyclic garbage still
    goes, 20,000 objects later at most (a long-running command such as `attach` frees the rest
    by reference count, as ever)."""
    import gc  # built in: no import cost

    from .. import _lazy

    quiet_signals()
    _lazy.IN_COMMAND = True
    argparse_without_gettext()
    _, older, oldest = gc.get_threshold()
    gc.set_threshold(20_000, older, oldest)
