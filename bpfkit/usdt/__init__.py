# SPDX-License-Identifier: Apache-2.0
"""USDT (user statically defined tracing) probes: read them from a binary, attach to them.

    from bpfkit import usdt

    for probe in usdt.read_probes("/usr/bin/python3"):       # pure parsing
        print(probe.full_name, probe.args)
    lk = usdt.attach_usdt(prog, "/usr/bin/python3", "python", "function__entry", pid=1234)
    ...
    lk.close()

See docs/usdt.md.
"""

from __future__ import annotations

import importlib
from typing import Any

from .args import ArgKind, USDTArg, parse_arg, parse_args
from .notes import StapsdtNote, USDTProbe, find_probes, parse_notes, parse_probes, read_probes

__all__ = ["ArgKind", "USDTArg", "parse_arg", "parse_args", "StapsdtNote", "USDTProbe", "find_probes",
           "parse_notes", "parse_probes", "read_probes", "attach_usdt", "USDTLink"]


def __getattr__(name: str) -> Any:
    # Attaching is a link kind (bpfkit.link.usdt); parsing alone stays light.
    if name in ("attach_usdt", "USDTLink"):
        value = getattr(importlib.import_module("bpfkit.link.usdt"), name)
        globals()[name] = value  # resolved once; tools that read the module's dict see it too
        return value
    raise AttributeError(f"module 'bpfkit.usdt' has no attribute {name!r}")
