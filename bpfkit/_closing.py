# SPDX-License-Identifier: Apache-2.0
"""One ``with`` protocol for everything bpfkit hands out that owns something (fds, links, rings,
servers): ``with obj:`` returns ``obj`` and closes it when the block ends, however it ends."""

from __future__ import annotations

TYPE_CHECKING = False  # typing costs ~2 ms to import: its names are for the type checker only
if TYPE_CHECKING:
    from typing import Self


class ClosesOnExit:
    """Mixin: ``__enter__`` gives the object itself, ``__exit__`` calls its ``close()``."""

    __slots__ = ()  # slotted classes (FD) stay slotted

    def close(self) -> None:
        raise NotImplementedError  # every subclass defines it

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
