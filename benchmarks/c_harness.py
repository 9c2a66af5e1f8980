# SPDX-License-Identifier: Apache-2.0
"""Build the benchmarks' small C harnesses (benchmarks/c/*.c) against libbpf, in the run that
uses them, so every libbpf reference is measured on the same machine at the same time.

libbpf: bookworm-backports' libbpf-dev (>= 1.3), fetched by benchmarks/c/fetch_libbpf.sh into
~/.cache/bpfkit/libbpf-backports/root without touching the system, or $BPFKIT_LIBBPF_DIR; the
harness is linked statically and cached by content under ~/.cache/bpfkit/bench.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "bpfkit"
FETCH = REPO / "benchmarks/c/fetch_libbpf.sh"


def libbpf_dir() -> Path | None:
    given = os.environ.get("BPFKIT_LIBBPF_DIR")
    if given:
        return Path(given)
    try:
        out = subprocess.run(["sh", str(FETCH)], check=True, capture_output=True, text=True).stdout
    except subprocess.CalledProcessError as exc:
        print(f"cannot fetch libbpf >= 1.3: {exc.stderr.strip()[-500:]}", file=sys.stderr)
        return None
    return Path(out.strip().splitlines()[-1])


def build(source: Path, root: Path) -> Path:
    """``source`` (benchmarks/c/NAME.c) linked statically against root's libbpf."""
    lib = next(root.glob("usr/lib/*/libbpf.a"), None) or next(root.glob("**/libbpf.a"))
    inc = lib.parents[2] / "include" if (lib.parents[2] / "include/bpf").is_dir() else root / "usr/include"
    common = source.with_name("bench_common.h")  # what the harnesses share (#include)
    content = source.read_bytes() + (common.read_bytes() if common.exists() else b"")
    key = hashlib.sha256(content + str(lib).encode() + str(lib.stat().st_mtime).encode()).hexdigest()[:12]
    out = CACHE / "bench" / f"{source.stem}-{key}"
    if not out.exists():
        out.parent.mkdir(parents=True, exist_ok=True)
        cc = shutil.which("cc") or shutil.which("gcc") or "clang-19"
        subprocess.run([cc, "-O2", "-Wall", f"-I{inc}", str(source), str(lib), "-lelf", "-lz", "-o", str(out) + ".tmp"],
                       check=True)
        os.replace(str(out) + ".tmp", out)
    return out


def harness(name: str) -> Path | None:
    """benchmarks/c/NAME.c built against libbpf, or None (said on stderr) when libbpf is missing."""
    root = libbpf_dir()
    return build(REPO / "benchmarks/c" / f"{name}.c", root) if root else None
