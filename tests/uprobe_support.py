# SPDX-License-Identifier: Apache-2.0
"""What the uprobe fault and ioctl-group tests share: a program that loads on every kernel (their
`sleeper` fixture, a process for the probes' pid filter, is in conftest.py)."""

from __future__ import annotations

from typing import Any

import bpfkit


def uprobe_program() -> Any:
    """A minimal kprobe-type program (r0 = 0; exit), made by hand: it loads on every kernel
    (the objects under bpf/ with a uprobe section call bpf_get_attach_cookie, 5.15+; 5.10 is
    where the SET_BPF fallback is exercised for real)."""
    from bpfkit import asm
    from bpfkit.program import Program, ProgramSpec

    return Program(ProgramSpec("fault_uprobe", bpfkit.ProgType.KPROBE, asm.return_imm(0)))

