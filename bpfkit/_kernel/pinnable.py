# SPDX-License-Identifier: Apache-2.0
"""Kernel objects that can be pinned: the pin, unpin and close that Map and Program share.

A pin is a name in bpffs for a kernel object (BPF_OBJ_PIN); it keeps the object alive after
every fd is closed, and BPF_OBJ_GET opens it again from another process. The pin path's
checks (bpffs, directories made as libbpf makes them) are bpfkit._kernel.bpffs's; the fd is
bpfkit._kernel.fd's.
"""

from __future__ import annotations

import errno
import os

from .._closing import ClosesOnExit
from ..errors import KernelError, NotFoundError
from .bpf import obj_get
from .bpffs import pin_object
from .fd import FD

__all__ = ["PinnableObject"]

TYPE_CHECKING = False  # typing costs ~2 ms to import: its names are for the type checker only
if TYPE_CHECKING:
    from typing import ClassVar


class PinnableObject(ClosesOnExit):
    """Pin, unpin and close for a kernel object held through ``self.fd`` and named ``self.name``
    (Map, Program): a pin in bpffs keeps the object alive after this process closes its fd."""

    KIND: ClassVar[str] = "object"  # what errors call it: "map", "program"
    fd: FD
    name: str
    pinned_path: str | None

    @classmethod
    def _open_pinned(cls, path: str, flags: int = 0) -> FD:
        """A new fd for the object pinned at ``path`` (BPF_OBJ_GET); NotFoundError if none."""
        try:
            return obj_get(path, flags)
        except KernelError as exc:
            if exc.errno == errno.ENOENT:
                raise NotFoundError(f"no pinned object at {path}") from None
            raise exc.wrap(f"open pinned {cls.KIND} {path}")

    def pin(self, path: str) -> None:
        """Pin in bpffs at ``path`` so the object outlives this process (missing directories
        under bpffs are made, as libbpf does)."""
        pin_object(self.fd, path, f"{self.KIND} {self.name!r}")
        self.pinned_path = path

    def unpin(self) -> None:
        """Remove the pin made by :meth:`pin` or found by ``load_pinned`` (gone already: fine)."""
        if self.pinned_path is None:
            return
        try:
            os.unlink(self.pinned_path)
        except FileNotFoundError:
            pass
        self.pinned_path = None

    def close(self) -> None:
        """Release this process's reference (a pinned object stays in the kernel)."""
        self.fd.close()

    @property
    def closed(self) -> bool:
        return self.fd.closed

