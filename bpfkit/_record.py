# SPDX-License-Identifier: Apache-2.0
"""SlottedRecord: a slotted class with the __repr__ and __eq__ that
``@dataclasses.dataclass(slots=True)`` would write, for the internal records on the start-up path. A dataclass generates and compiles
its methods when its module is imported (0.5-1 ms a class: a dozen of them were a fifth of
``bpfkit load``'s start-up); these are written once. Subclasses list their fields in
``__slots__`` (in the order their __init__ takes them) and write their own __init__.

The public dataclasses on that path stay dataclasses (``dataclasses.fields``, ``replace``,
``asdict``), with methods written once here instead of generated and compiled at import
(~0.1-0.25 ms a method, a class): ``@record_dataclass`` classes (MapSpec, ProgramSpec, ...)
get all three, DataRepr and DataRecord subclasses (btf.core's, made per CO-RE relocation,
where a generated __init__'s speed counts) their __repr__ and __eq__.

Each behaves as the method @dataclass would write; tests/test_record.py compares them."""

from __future__ import annotations

import _thread

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = ["SlottedRecord", "FrozenRecord", "DataRepr", "DataRecord", "record_dataclass"]


class SlottedRecord:
    """Fields in ``__slots__``; repr and ``==`` by them, in order (unhashable, as a dataclass)."""

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


class FrozenRecord(SlottedRecord):
    """A SlottedRecord whose fields cannot change after __init__ (which sets them with
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

    def __hash__(self) -> int:  # type: ignore[override]  # SlottedRecord's is None: unhashable
        return hash(self._values())

    def __setstate__(self, state: tuple[object, dict[str, object]]) -> None:
        """copy, deepcopy and pickle (as of a frozen dataclass): object.__reduce_ex__ gives the
        slots as ``(None, {name: value})``, set here past the frozen __setattr__."""
        for name, value in state[1].items():
            object.__setattr__(self, name, value)


# ------------------------------------------------------------------- dataclasses' methods
_REPRS_RUNNING: set[tuple[int, int]] = set()  # (object, thread) whose __repr__ is running


def _data_repr(self: object) -> str:
    """A dataclass's __repr__: its fields that have ``repr=True``, and ``...`` for an object
    inside its own repr (reprlib.recursive_repr, as the generated one)."""
    import dataclasses  # already imported: the class is a dataclass

    key = (id(self), _thread.get_ident())
    if key in _REPRS_RUNNING:
        return "..."
    _REPRS_RUNNING.add(key)
    try:
        fields = ", ".join(f"{f.name}={getattr(self, f.name)!r}" for f in dataclasses.fields(self)  # type: ignore[arg-type]
                           if f.repr)
    finally:
        _REPRS_RUNNING.discard(key)
    return f"{type(self).__qualname__}({fields})"


def _compared(obj: object) -> tuple[object, ...]:
    import dataclasses

    return tuple(getattr(obj, f.name) for f in dataclasses.fields(obj) if f.compare)  # type: ignore[arg-type]


def _data_eq(self: object, other: object) -> bool:
    """A dataclass's __eq__: of the same class, with equal fields that have ``compare=True``."""
    if other.__class__ is not self.__class__:
        return NotImplemented  # type: ignore[no-any-return]  # (mypy allows it only in a method named __eq__)
    return _compared(self) == _compared(other)


class _Factory:
    """What a field with a default_factory shows as its default in the __init__ signature."""

    def __repr__(self) -> str:
        return "<factory>"


_FACTORY = _Factory()
_REQUIRED = object()
# Per class: its __init__ fields' names, and each one's default (_REQUIRED; _FACTORY: call
# the factory) with the factories by name.
_INIT_PLANS: dict[type, tuple[tuple[str, ...], tuple[object, ...], dict[str, Callable[[], object]]]] = {}


def _init_plan(cls: type) -> tuple[tuple[str, ...], tuple[object, ...], dict[str, Callable[[], object]]]:
    import dataclasses

    fields = [f for f in dataclasses.fields(cls) if f.init]
    factories = {f.name: f.default_factory for f in fields if f.default_factory is not dataclasses.MISSING}
    plan = (tuple(f.name for f in fields),
            tuple(_FACTORY if f.name in factories else _REQUIRED if f.default is dataclasses.MISSING else f.default
                  for f in fields),
            factories)
    _INIT_PLANS[cls] = plan
    return plan


def _data_init(self: object, *args: object, **kwargs: object) -> None:
    """A dataclass's __init__: fields by position or name, defaults, default factories, and
    the TypeError a Python function gives for a missing, repeated or unknown argument."""
    cls = type(self)
    names, defaults, factories = _INIT_PLANS.get(cls) or _init_plan(cls)
    if len(args) > len(names):
        required = sum(d is _REQUIRED for d in defaults)
        takes = f"from {required + 1} to {len(names) + 1}" if required < len(names) else str(len(names) + 1)
        raise TypeError(f"{cls.__qualname__}.__init__() takes {takes} positional arguments but {len(args) + 1} were given")
    for name, value in zip(names, args):
        setattr(self, name, value)
    missing = []
    for name, default in zip(names[len(args):], defaults[len(args):]):
        if name in kwargs:
            setattr(self, name, kwargs.pop(name))
        elif default is _FACTORY:
            setattr(self, name, factories[name]())
        elif default is _REQUIRED:
            missing.append(name)
        else:
            setattr(self, name, default)
    for name in kwargs:
        if name in names:
            raise TypeError(f"{cls.__qualname__}.__init__() got multiple values for argument {name!r}")
        raise TypeError(f"{cls.__qualname__}.__init__() got an unexpected keyword argument {name!r}")
    if missing:
        quoted = [repr(name) for name in missing]
        listed = quoted[0] if len(quoted) == 1 else ", ".join(quoted[:-1]) + (" and " if len(quoted) == 2 else ", and ") + quoted[-1]
        plural = "s" if len(missing) > 1 else ""
        raise TypeError(f"{cls.__qualname__}.__init__() missing {len(missing)} required positional argument{plural}: {listed}")


class _InitSignature:
    """``inspect.signature(cls)`` of a record_dataclass: its fields, as the generated __init__
    would declare them (its own __init__ takes ``*args, **kwargs``); made on first use."""

    def __get__(self, obj: object, owner: type) -> object:
        if obj is not None:
            raise AttributeError("__signature__")
        import dataclasses
        import inspect

        names, defaults, _ = _INIT_PLANS.get(owner) or _init_plan(owner)
        types = {f.name: f.type for f in dataclasses.fields(owner)}
        return inspect.Signature([
            inspect.Parameter(name, inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=types[name],
                              default=inspect.Parameter.empty if default is _REQUIRED else default)
            for name, default in zip(names, defaults)], return_annotation=None)


if TYPE_CHECKING:
    from dataclasses import dataclass as record_dataclass  # to the type checker, a dataclass
else:
    def record_dataclass(cls=None, /, *, eq=True):
        """``@dataclasses.dataclass`` (or ``(eq=False)``) with the __init__, __repr__ and
        __eq__ written above, not generated."""

        def make(cls):
            import dataclasses

            cls = dataclasses.dataclass(init=False, repr=False, eq=False)(cls)
            cls.__init__ = _data_init
            cls.__repr__ = _data_repr
            cls.__signature__ = _InitSignature()
            if eq:
                cls.__eq__ = _data_eq
                cls.__hash__ = None
            return cls

        return make if cls is None else make(cls)


class DataRepr:
    """A dataclass declared ``repr=False`` gets the __repr__ @dataclass would write."""

    __slots__ = ()
    __repr__ = _data_repr


class DataRecord(DataRepr):
    """A dataclass declared ``repr=False, eq=False`` gets the __repr__ and __eq__ (and
    ``__hash__ = None``) @dataclass would write."""

    __slots__ = ()
    __eq__ = _data_eq
    __hash__ = None  # type: ignore[assignment]  # mutable and compared by value, as a dataclass
