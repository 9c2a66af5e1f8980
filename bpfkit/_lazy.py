# SPDX-License-Identifier: Apache-2.0
"""Lazy re-exports (PEP 562 module ``__getattr__``) for the packages whose front door must stay
cheap to import: bpfkit, bpfkit.spec, bpfkit.events. Imports nothing of bpfkit."""

from __future__ import annotations

import importlib

# typing costs ~10 ms to import (bpfkit/__init__ avoids it too); mypy treats TYPE_CHECKING as true.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Collection, Mapping
    from typing import Any

__all__ = ["lazy_getattr"]

# Whether this process is the ``bpfkit`` command, which says so itself first thing
# (bpfkit.cli.start_command: the console script's main(), python -m bpfkit); nothing is inferred
# from the program's name. bpfkit.link reads it: the command imports link kinds on first use, to
# start fast; a program importing the library gets every kind at ``import bpfkit.link``, as it
# always did (it may drop privileges later and then be unable to read a module not yet imported).
IN_COMMAND = False


def lazy_getattr(package: str, table: Mapping[str, str], namespace: dict[str, Any],
                 submodules: Collection[str] = ()) -> Callable[[str], Any]:
    """A module ``__getattr__`` for ``package``: a name in ``table`` comes from the module the
    table names (imported on first use, then kept in ``namespace``, the package's globals()),
    a name in ``submodules`` is the subpackage ``package.name``; anything else is an
    AttributeError as for any module."""

    def __getattr__(name: str) -> Any:
        module = table.get(name)
        if module is None:
            if name in submodules:
                return importlib.import_module(f"{package}.{name}")
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        namespace[name] = value  # resolved once; tools that read the module's dict see it too
        return value

    return __getattr__
