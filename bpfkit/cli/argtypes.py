# SPDX-License-Identifier: Apache-2.0
"""argparse ``type=`` functions that check ranges, so a number the kernel cannot take is a usage
error naming the range (exit 2) rather than an OverflowError deep in cffi."""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable

U32_MAX = (1 << 32) - 1
U64_MAX = (1 << 64) - 1
PID_MAX = (1 << 31) - 1  # pid_t is an int


def _integer(text: str, base: int = 0) -> int:
    try:
        return int(text, base)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None


def ranged(low: int, high: int, what: str, base: int = 0) -> Callable[[str], int]:
    """An int in low..high (0x.. and 0o.. allowed with base 0)."""
    def parse(text: str) -> int:
        value = _integer(text, base)
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"{text} is out of range: {what} must be in {low}..{high}")
        return value

    parse.__name__ = what  # argparse names the type in its messages
    return parse


u64 = ranged(0, U64_MAX, "a u64")
pid = ranged(1, PID_MAX, "a pid", base=10)
count = ranged(0, U32_MAX, "a count", base=10)


def seconds(text: str) -> float:
    """A finite, non-negative number of seconds."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not math.isfinite(value) or value < 0 or value > 10 ** 9:
        raise argparse.ArgumentTypeError(f"{text} is out of range: seconds must be in 0..1000000000")
    return value


def object_id(kind: str) -> Callable[[str], int]:
    """A kernel object id (prog/map/link/btf ids are u32, 0 is never used)."""
    return ranged(1, U32_MAX, f"a {kind} id", base=10)


def id_or_path(kind: str) -> Callable[[str], int | str]:
    """ID|PATH: digits are an id (checked as :func:`object_id`), anything else a path."""
    as_id = object_id(kind)

    def parse(text: str) -> int | str:
        return as_id(text) if text.isdigit() else text

    parse.__name__ = f"{kind} id or path"
    return parse
