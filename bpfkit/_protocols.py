# SPDX-License-Identifier: Apache-2.0
"""What the attach functions and event readers need of a program or a map, as protocols.

The layers above the kernel objects (``bpfkit.link``, ``bpfkit.events``, ``bpfkit.usdt``,
``bpfkit.struct_ops``) take a :class:`ProgramLike` or a :class:`MapLike`, not
``bpfkit.Program``/``bpfkit.Map``: a loaded :class:`bpfkit.Program` is one, and so is
anything else carrying an open fd, the kernel type and a name (a program opened by id, a
test double). Attribute access only; nothing here imports the kernel objects.

Attach functions also take a bare program fd (:class:`~bpfkit._kernel.fd.FD` or ``int``), as
they always did: :data:`ProgramArg` is that union.
"""

from __future__ import annotations

from typing import Any, Protocol, TypeAlias

# Imported at run time (not only for type checkers): pdoc and typing.get_type_hints evaluate
# the annotations that name ProgramArg.
from ._kernel.consts import MapType, ProgType
from ._kernel.fd import FD

__all__ = ["MapLike", "ProgramArg", "ProgramLike", "UpdatableMapLike"]


class ProgramLike(Protocol):
    """A loaded BPF program: an open fd, its BPF_PROG_TYPE_* and its name (for messages)."""

    @property
    def fd(self) -> FD: ...
    @property
    def type(self) -> ProgType: ...
    @property
    def name(self) -> str: ...


class MapLike(Protocol):
    """A BPF map: an open fd, its BPF_MAP_TYPE_*, its name and the sizes the kernel gave it."""

    @property
    def fd(self) -> FD: ...
    @property
    def type(self) -> MapType: ...
    @property
    def name(self) -> str: ...
    @property
    def key_size(self) -> int: ...
    @property
    def value_size(self) -> int: ...
    @property
    def max_entries(self) -> int: ...


class UpdatableMapLike(MapLike, Protocol):
    """A map the caller writes to (a perf event array's per-CPU slots): ``bpfkit.Map``."""

    @property
    def closed(self) -> bool: ...
    def update(self, key: Any, value: Any, flags: int = ...) -> None: ...
    def delete(self, key: Any) -> bool: ...


# What attach functions accept as "the program": a program object, or its fd.
ProgramArg: TypeAlias = ProgramLike | FD | int
