# SPDX-License-Identifier: Apache-2.0
"""Did-you-mean hints for symbols a probe spec names but the kernel or binary lacks.

``symbol do_sys_open not found in /proc/kallsyms (did you mean do_sys_openat2?)``: the close
matches come from :mod:`difflib` against /proc/kallsyms (text symbols) or the binary's ELF
function symbols.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable

__all__ = ["close_matches", "kernel_functions", "kernel_symbol_hint", "binary_symbol_hint"]


def close_matches(name: str, candidates: Iterable[str], n: int = 3) -> list[str]:
    pool = set(candidates)
    # difflib is quadratic-ish per candidate: pre-filter a huge pool (kallsyms ~ 200k names)
    # to names sharing a 4-character piece with ``name`` before ranking.
    if len(pool) > 5000 and len(name) >= 4:
        pieces = {name[i:i + 4] for i in range(len(name) - 3)}
        pool = {c for c in pool if any(p in c for p in pieces)}
    return difflib.get_close_matches(name, pool, n=n, cutoff=0.6)


def kernel_functions(path: str | None = None) -> set[str]:
    """Text symbols (t/T) of the running kernel (``path``: a file of kallsyms' format), module
    suffixes dropped; none when it cannot be read."""
    from .._kernel import kallsyms  # here: only a failed attach reads the kernel's symbols

    try:
        return kallsyms.function_names(path or kallsyms.KALLSYMS)
    except OSError:
        return set()


def _did_you_mean(matches: list[str]) -> str:
    return f" (did you mean {' or '.join(matches)}?)" if matches else ""


def kernel_symbol_hint(symbol: str) -> str:
    """``symbol X not found in /proc/kallsyms (did you mean Y?)``."""
    name = symbol.split(":")[-1]
    return f"symbol {name} not found in /proc/kallsyms{_did_you_mean(close_matches(name, kernel_functions()))}"


def binary_symbol_hint(symbol: str, binary: str, names: Iterable[str]) -> str:
    """``symbol X not found in BINARY (did you mean Y?)``."""
    return f"symbol {symbol} not found in {binary}{_did_you_mean(close_matches(symbol, names))}"
