# SPDX-License-Identifier: Apache-2.0
"""Record: a slotted class with the __repr__ and __eq__ that ``@dataclasses.dataclass(slots=True)``
would write, for the internal records on the start-up path. A dataclass generates and compiles
its methods when its module is imported (0.5-1 ms a class: a dozen of them were a fifth of
``bpfkit load``'s start-up); these are written once. Subclasses list their fields in
``__slots__`` (in the order their __init__ takes them) and write their own __init__."""

from __future__ import annotations

__all__ = ["Record", "FrozenRecord"]


class Record:
    __slots__: tuple[str, ...] = ()

    def _values(self) -> tuple[object, ...]:
        return tuple(getattr(self, name) for name in self.__slots__)

    def __repr__(self) -> str:
        fields = ", ".join(f"{name}={getattr(self, name)!r}" for name in self.__slots__)
        return f"{type(self).__qualname__}({fields})"

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        return self._values() == other._values()

    __hash__ = None  # type: ignore[assignment]  # mutable and compared by value, as a dataclass


class FrozenRecord(Record):
    """A Record whose fields cannot change after __init__ (which sets them with
    ``object.__setattr__``), hashed by value, like ``frozen=True``."""

    __slots__: tuple[str, ...] = ()

    def _set_fields(self, *values: object) -> None:
        """For __init__: each field of __slots__ to its value, in order."""
        for name, value in zip(self.__slots__, values, strict=True):
            object.__setattr__(self, name, value)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"cannot assign to field {name!r}")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"cannot delete field {name!r}")

    def __hash__(self) -> int:  # type: ignore[override]  # Record's is None: unhashable
        return hash(self._values())

    def __setstate__(self, state: tuple[object, dict[str, object]]) -> None:
        """copy, deepcopy and pickle (as of a frozen dataclass): object.__reduce_ex__ gives the
        slots as ``(None, {name: value})``, set here past the frozen __setattr__."""
        for name, value in state[1].items():
            object.__setattr__(self, name, value)
