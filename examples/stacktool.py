# SPDX-License-Identifier: Apache-2.0
"""What examples/profile and examples/offcputime share: their common options, loading their
object with the target process set, and sampling for a while (Ctrl-C stops early)."""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))  # run from a checkout without installing

import bpfkit  # noqa: E402
from bpfkit.profile import Profile, format_for, from_maps, save  # noqa: E402
from bpfkit.symbols import Symbolizer  # noqa: E402
from bpfkit.symbols.elf import DEFAULT_DEBUG_ROOT  # noqa: E402


def parser(description: str, name: str, default_output: str) -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("--pid", "-p", type=int, default=0, help="only this process (default: all)")
    ap.add_argument("--duration", "-d", type=float, default=10.0, help="seconds to run (Ctrl-C stops early)")
    ap.add_argument("--output", "-o", default=default_output,
                    help="FILE.svg, FILE.pprof, FILE.folded or FILE.speedscope.json; '-' prints folded stacks")
    ap.add_argument("--debug-root", default=DEFAULT_DEBUG_ROOT, help="separate debug files (by build id)")
    ap.add_argument("--object", default=str(REPO / "bpf" / ".output" / "examples" / f"{name}.bpf.o"),
                    help=f"the compiled {name}.bpf.o (make -C bpf)")
    ap.add_argument("--top", type=int, default=5, help="print the N leaf functions with the most")
    return ap


def run(args: argparse.Namespace, attach: Callable[[Any], AbstractContextManager[Any]], what: str,
        variables: dict[str, Any] | None = None) -> Profile:
    """Load ``args.object`` (``target_tgid`` and ``variables`` set), attach with ``attach(coll)``
    for ``args.duration`` s, and read the counts into a profile, symbolized while the
    processes run."""
    if args.output != "-":
        format_for(args.output)  # refuse an unknown suffix before starting
    spec = bpfkit.load_spec(args.object)
    spec.variables["target_tgid"].value = args.pid
    for name, value in (variables or {}).items():
        spec.variables[name].value = value
    target = f"pid {args.pid}" if args.pid else "every process"
    with bpfkit.Collection(spec) as coll:
        start = time.monotonic()
        with attach(coll):
            print(f"{what} {target} for {args.duration:g} s", file=sys.stderr)
            try:
                time.sleep(args.duration)
            except KeyboardInterrupt:
                pass
        prof = from_maps(coll.maps["counts"], coll.maps["stacks"], symbolizer=Symbolizer(debug_root=args.debug_root))
    prof.duration_ns = int((time.monotonic() - start) * 1e9)
    prof.name = f"{Path(args.object).name.removesuffix('.bpf.o')} {target}"
    return prof


def finish(prof: Profile, args: argparse.Namespace) -> int:
    save(prof, args.output, top=args.top, title=prof.name)
    return 0
