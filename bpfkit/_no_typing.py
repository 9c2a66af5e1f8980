# SPDX-License-Identifier: Apache-2.0
"""typing's run-time helpers without typing (~2 ms to import, on every command's start-up):
the modules on the start-up path import their typing names for the type checker only, and
these at run time, where typing's own do nothing either."""

from __future__ import annotations

__all__ = ["cast", "overload"]


def cast(_type: object, value: object) -> object:
    """typing.cast at run time: the value, unchanged."""
    return value


def overload(func: object) -> object:
    """typing.overload at run time: each variant is replaced by the implementation after it."""
    return func
