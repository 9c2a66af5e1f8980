# SPDX-License-Identifier: Apache-2.0
"""Text formats of a profile: folded stacks and speedscope JSON; writing any format by the
output file's name."""

from __future__ import annotations

import json
import sys
from typing import TextIO

from .._files import write_atomic
from .._visible import visible
from ..errors import UsageError
from .model import Profile

__all__ = ["to_folded", "folded_frame", "from_folded", "to_speedscope", "write_profile", "format_for", "FORMATS", "save"]

# Output file suffix -> format (longest first: ".speedscope.json" before ".json").
FORMATS = {".speedscope.json": "speedscope", ".folded": "folded", ".txt": "folded", ".pprof": "pprof",
           ".pb.gz": "pprof", ".svg": "svg"}


def folded_frame(name: str) -> str:
    """A frame's name as one field of a folded line: flamegraph.pl and inferno read a line up
    to ``\\n`` and split its stack at ``;``, so a ';' is written as ':' and a newline or any
    other control character as a visible escape (``\\x0a``; bpfkit._visible): a symbol named
    ``f\\nFAKE;INJECTED 99999999`` stays one frame of one line."""
    return visible(name).replace(";", ":")


def to_folded(profile: Profile) -> str:
    """One line per stack, ``root;...;leaf VALUE``, the input of flamegraph.pl and inferno
    (each name through :func:`folded_frame`)."""
    shown = {n: folded_frame(n) for n in set[str]().union(*profile.stacks)}  # once per distinct name
    lines = [";".join(map(shown.__getitem__, stack)) + f" {value}"
             for stack, value in sorted(profile.stacks.items()) if value]
    return "\n".join(lines) + ("\n" if lines else "")


def from_folded(text: str) -> Profile:
    prof = Profile()
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        stack, _, value = line.rstrip().rpartition(" ")
        try:
            prof.add(stack.split(";") if stack else [], int(value))
        except ValueError:
            raise UsageError(f"folded stacks, line {number}: {line[:80]!r} does not end in a count") from None
    return prof


def to_speedscope(profile: Profile) -> str:
    """speedscope's file format (https://www.speedscope.app/file-format-schema.json): one
    "sampled" profile, stacks as indices into the shared frame list, root first. json.dumps
    escapes every control character; names go through bpfkit._visible as in the other formats
    (a lone surrogate would be a \\udcxx escape strict JSON readers refuse)."""
    frames: dict[str, int] = {}
    samples, weights = [], []
    for stack, value in sorted(profile.stacks.items()):
        samples.append([frames.setdefault(n, len(frames)) for n in stack])
        weights.append(value)
    unit = {"nanoseconds": "nanoseconds", "microseconds": "microseconds", "milliseconds": "milliseconds"}.get(
        profile.unit, "none")
    doc = {
        "$schema": "https://www.speedscope.app/file-format-schema.json",
        "exporter": "bpfkit",
        "name": visible(profile.name),
        "activeProfileIndex": 0,
        "shared": {"frames": [{"name": visible(n)} for n in frames]},
        "profiles": [{"type": "sampled", "name": visible(profile.name), "unit": unit, "startValue": 0,
                      "endValue": sum(weights), "samples": samples, "weights": weights}],
    }
    return json.dumps(doc, separators=(",", ":"))


def format_for(path: str) -> str:
    for suffix, fmt in FORMATS.items():
        if path.endswith(suffix):
            return fmt
    raise UsageError(f"--output {path}: unknown format; name the file *.svg (flame graph), *.pprof or *.pb.gz "
                     "(pprof), *.folded (folded stacks) or *.speedscope.json (speedscope)")


def write_profile(profile: Profile, path: str, fmt: str | None = None, *, title: str | None = None) -> str:
    """Write ``profile`` to ``path`` in ``fmt`` (default: by the file's suffix); returns the
    format written, through bpfkit._files.write_atomic (a new file renamed onto ``path``: a
    reader never sees half, and no symlink planted at ``path`` or beside it is followed)."""
    fmt = fmt or format_for(path)
    data: bytes
    if fmt == "folded":
        data = to_folded(profile).encode()
    elif fmt == "speedscope":
        data = to_speedscope(profile).encode()
    elif fmt == "pprof":
        from .pprof import to_pprof

        data = to_pprof(profile)
    elif fmt == "svg":
        from .flamegraph import to_svg

        data = to_svg(profile, title=title or profile.name).encode()
    else:
        raise UsageError(f"unknown profile format {fmt!r} (folded, speedscope, pprof, svg)")
    write_atomic(path, data, "profile")
    return fmt


def save(profile: Profile, output: str, *, top: int = 5, title: str | None = None,
         stream: TextIO | None = None) -> None:
    """What the example tools do at the end: write ``profile`` to ``output`` ('-': folded
    stacks on stdout), then say so on ``stream`` (stderr) with the ``top`` leaf functions."""
    out = stream or sys.stderr
    if output == "-":
        sys.stdout.write(to_folded(profile))
    else:
        fmt = write_profile(profile, output, title=title)
        print(f"wrote {output} ({fmt}): total {profile.total} {profile.unit if profile.unit != 'count' else 'samples'}, "
              f"{len(profile.stacks)} stacks", file=out)
    for name, value in profile.top(top):
        print(f"{value:10d} {100 * value / max(profile.total, 1):5.1f}% {visible(name)}", file=out)
