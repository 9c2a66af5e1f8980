# SPDX-License-Identifier: Apache-2.0
"""Executable: one binary and every probe kind placed in user-space code, as methods (cilium/ebpf's
``link.OpenExecutable``): single uprobes and uretprobes (bpfkit.link.uprobe, whose UprobeTarget
resolves the binary and its symbols), uprobe_multi links (bpfkit.link.multi) and USDT probes
(bpfkit.link.usdt). Those modules build on UprobeTarget, not on this class, so the façade sits
above them and none imports back.

    exe = Executable("libc")
    exe.uprobe("malloc", prog, pid=1234)
    exe.uprobe_multi("str*", prog)
"""

from __future__ import annotations

from typing import Any

from .._protocols import ProgramArg
from .uprobe import UprobeTarget

__all__ = ["Executable"]


class Executable(UprobeTarget):
    """A binary to place uprobes in: a path (``/usr/bin/bash``), a program on $PATH (``bash``)
    or a library name (``libc``, ``libc.so.6``).

    >>> exe = Executable("libc")
    >>> lk = exe.uprobe("malloc", prog, pid=1234)
    """

    def uprobe_multi(self, symbols: Any, prog: ProgramArg, **kw: Any) -> Any:
        """One program at many functions of this binary (a list, a name or a glob pattern),
        through one uprobe_multi link (6.6) or one uprobe per target: see
        :func:`bpfkit.link.multi.uprobe_multi`."""
        from .multi import uprobe_multi

        return uprobe_multi(self, symbols, prog, **kw)

    def uretprobe_multi(self, symbols: Any, prog: ProgramArg, **kw: Any) -> Any:
        """:meth:`uprobe_multi` for return probes."""
        from .multi import uprobe_multi

        return uprobe_multi(self, symbols, prog, retprobe=True, **kw)

    def usdt(self, provider: str | None, name: str, prog: ProgramArg, **kw: Any) -> Any:
        """Attach ``prog`` to USDT probe ``provider:name`` of this binary (every site, with
        its semaphore): ``bpfkit.usdt.attach_usdt(prog, self.path, provider, name, **kw)``."""
        from .usdt import attach_usdt

        return attach_usdt(prog, self.path, provider, name, **kw)
