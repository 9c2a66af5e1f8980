# SPDX-License-Identifier: Apache-2.0
"""ebpf_exporter's post-attach hook: ``SEC("uprobe//proc/self/exe:post_attach_mark")``.

ebpf_exporter's binary has an empty C function ``post_attach_mark()`` (exporter/init_ebpf.go)
that it calls once when every config is attached, so a program on it runs once to give its
metric a first value (examples/bpf-jit.bpf.c reads a kernel variable there). bpfkit's process
is the Python interpreter, which has no such function: the program goes on libc's
``getpgrp()`` instead, for this process only (a uprobe with its pid), and :func:`mark` calls
that once. Nothing else in the process calls getpgrp() (it is POSIX's job-control query).
"""

from __future__ import annotations

import ctypes
import os
import re

from ...errors import UsageError
from ...link.base import Link
from ...program import Program

__all__ = ["is_post_attach", "attach", "mark", "SECTION"]

SECTION = "uprobe//proc/self/exe:post_attach_mark"
_SELF_EXE = re.compile(r"u(?:ret)?probe(?:\.s)?//proc/self/exe:")
_STANDIN = ("libc", "getpgrp")


def is_post_attach(section: str) -> bool:
    """Whether ``section`` names the interpreter's own code, as ebpf_exporter's hook does; any
    other function of /proc/self/exe is refused (it would be the Python interpreter's)."""
    if section == SECTION:
        return True
    if _SELF_EXE.match(section):
        raise UsageError(f"section {section!r}: /proc/self/exe is the Python interpreter under bpfkit; of "
                         "ebpf_exporter's own functions only uprobe//proc/self/exe:post_attach_mark is provided")
    return False


def attach(prog: Program) -> Link:
    """``prog`` on the stand-in for ``post_attach_mark``, firing in this process only."""
    from ...link.uprobe import UprobeTarget

    binary, symbol = _STANDIN
    return UprobeTarget(binary).uprobe(symbol, prog, pid=os.getpid())


def mark() -> None:
    """What ebpf_exporter's post_attach_mark() call does: run the programs on it, once."""
    ctypes.CDLL(None).getpgrp()
