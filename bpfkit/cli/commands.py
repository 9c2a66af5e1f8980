# SPDX-License-Identifier: Apache-2.0
"""The ``bpfkit`` command's table of contents: its sub-commands, in the order ``bpfkit --help``
lists them, and its exit codes (docs/cli.md). A leaf: the parser (bpfkit.cli.main) and the
commands that describe it (``man``, ``completion``, the man page writer) read it from here,
so none of them imports the others.
"""

# Every sub-command with its one-line help (its module has the longer DESCRIPTION): the
# top-level parser needs no sub-command module, and a sub-command's module
# (bpfkit.cli.cmd_<name>) is imported when its parser is first used, so `bpfkit load ...`
# imports one of the sixteen.
COMMANDS: tuple[tuple[str, str], ...] = (
    ("attach", "load an object, attach its programs, and stay attached until Ctrl-C/SIGTERM"),
    ("inspect", "list the programs, maps and variables of a BPF object file (--core: its CO-RE relocations)"),
    ("load", "load an object's programs and pin them and its maps in bpffs"),
    ("features", "probe the running kernel's BPF features"),
    ("prog", "list or show the system's BPF programs"),
    ("link", "list, show, pin or detach the system's BPF links"),
    ("cgroup", "show the programs attached to a cgroup, or to every cgroup of a tree"),
    ("map", "list, show or dump the system's BPF maps"),
    ("gc", "remove tracefs probes left by bpfkit processes that died"),
    ("events", "print the records of a pinned ring buffer or perf event array"),
    ("user-event", "list, register, emit and delete user_events (trace events defined from user space)"),
    ("usdt", "list the USDT probes of a binary"),
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
