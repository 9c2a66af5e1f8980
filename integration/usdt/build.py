# SPDX-License-Identifier: Apache-2.0
"""Build the USDT test binary (usdt_target.c + usdt_twice.c) with gcc and sys/sdt.h."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

HERE = Path(__file__).resolve().parent
SOURCES = [HERE / "usdt_target.c", HERE / "usdt_twice.c"]
SDT_HEADERS = ["/usr/include/sys/sdt.h", "/usr/include/x86_64-linux-gnu/sys/sdt.h"]


def missing_tools() -> str:
    """Why the binary cannot be built here, or ''."""
    if not shutil.which("gcc"):
        return "gcc is not installed"
    if not any(os.path.exists(h) for h in SDT_HEADERS):
        return "sys/sdt.h is missing (apt-get install systemtap-sdt-dev; scripts/setup.sh does)"
    return ""


def build_usdt_target(out_dir: str | os.PathLike[str], pie: bool = False) -> Path:
    """Compile the target into ``out_dir`` and return its path. -O1: its probe arguments then
    are constants, registers and stack slots. Without ``pie`` it is a fixed-position ET_EXEC
    (code at 0x401000, file offset 0x1000: the address -> offset translation is visible, and
    kernels without BPF cookies can find its probes by address in any process); with ``pie``
    an ET_DYN, like Debian's default build."""
    out = Path(out_dir) / ("usdt_target_pie" if pie else "usdt_target")
    flags = ["-fPIE", "-pie"] if pie else ["-fno-pie", "-no-pie"]
    proc = subprocess.run(["gcc", "-O1", "-g", "-Wall", *flags, "-o", str(out), *map(str, SOURCES)],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"building {out} failed:\n{proc.stderr[-3000:]}")
    return out
