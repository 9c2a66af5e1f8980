# SPDX-License-Identifier: Apache-2.0
"""Bounded random access to one ELF image: a regular file read with pread, or bytes in memory
(a decompressed MiniDebugInfo ELF).

Every piece is checked against the image's size before anything is allocated, so a header
that claims a 4 GiB table in a 1 MiB file is refused without reading; pieces of bytes in memory
are memoryviews (no copy). Files are read with pread, not mapped: the symbolizer reads files
other users control (the binaries their processes map), and a mapped file truncated by its
owner while it is read raises SIGBUS, which Python cannot catch (the profiler would die, not
the one file's symbols). pread of a truncated file returns short, which is refused here.
"""

from __future__ import annotations

import errno
import os

from .._files import open_regular
from ..errors import KernelError, ParseError

__all__ = ["Image"]


class Image:
    """``read(offset, size, what)``: ``size`` bytes at ``offset``, refused (ParseError) when
    they run past the end. Opened with :meth:`open` (a regular file, bpfkit's checks: no FIFO,
    no device, at most ``limit`` bytes) or made with :meth:`of_bytes`; ``close()`` when done."""

    def __init__(self, path: str, size: int, fd: int = -1, data: bytes | bytearray | None = None,
                 st: os.stat_result | None = None) -> None:
        self.path, self.size, self.stat = path, size, st
        self._fd, self._data = fd, data

    @classmethod
    def open(cls, path: str, what: str, limit: int) -> Image:
        fd, st = open_regular(path, what, limit)
        return cls(path, st.st_size, fd=fd, st=st)

    @classmethod
    def of_bytes(cls, data: bytes | bytearray, path: str) -> Image:
        return cls(path, len(data), data=data)

    def check(self, offset: int, size: int, what: str) -> None:
        """Refuse ``size`` bytes at ``offset`` unless the image holds them."""
        if offset < 0 or size < 0 or offset + size > self.size:
            raise ParseError(f"{self.path}: truncated ELF: {what} ({size} bytes at offset {offset}) run past "
                             f"the end ({self.size} bytes)")

    def read(self, offset: int, size: int, what: str) -> bytes | memoryview:
        self.check(offset, size, what)
        if self._data is not None:
            return memoryview(self._data)[offset:offset + size]
        try:
            raw = os.pread(self._fd, size, offset)
        except OSError as exc:
            raise KernelError("read binary", exc.errno or errno.EIO, self.path) from None
        if len(raw) != size:  # pread returns at most 0x7ffff000 bytes; else the file shrank
            raise ParseError(f"{self.path}: {what} ({size} bytes at offset {offset}): read {len(raw)} bytes "
                             "(the file changed while it was read, or the piece is over 2 GiB)")
        return raw

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
        self._data = None

    def __enter__(self) -> Image:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
