# SPDX-License-Identifier: Apache-2.0
"""Bounded random access to one ELF image: a regular file read with pread, or bytes in memory
(a BPF object given as bytes, a decompressed MiniDebugInfo ELF).

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

from .._files import BINARY_LIMIT, open_regular, read_regular
from ..errors import KernelError, NotFoundError, ParseError

__all__ = ["Image", "open_binary"]


class Image:
    """``read(offset, size, what)``: ``size`` bytes at ``offset``, refused (ParseError) when
    they run past the end. Opened with :meth:`open` (a regular file, bpfkit's checks: no FIFO,
    no device, at most ``limit`` bytes) or made with :meth:`of_bytes`; ``close()`` when done."""

    def __init__(self, path: str, size: int, fd: int = -1, data: memoryview | None = None,
                 st: os.stat_result | None = None) -> None:
        self.path, self.size, self.stat = path, size, st
        self._fd, self._data = fd, data

    @classmethod
    def open(cls, path: str, what: str, limit: int) -> Image:
        fd, st = open_regular(path, what, limit)
        if st.st_size == 0:
            # Files in procfs and sysfs report st_size 0: what one holds is read whole (to
            # ``limit``, as bpfkit._files.read_regular reads it), and an error reading it is
            # the file's (EIO for /proc/PID/mem). An empty file stays empty.
            try:
                held = os.pread(fd, 1, 0)
            except OSError as exc:
                raise KernelError(f"read {what}", exc.errno or errno.EIO, path) from None
            finally:
                os.close(fd)
            return cls.of_bytes(read_regular(path, what, limit) if held else b"", path, st)
        return cls(path, st.st_size, fd=fd, st=st)

    @classmethod
    def of_bytes(cls, data: bytes | bytearray | memoryview, path: str = "", st: os.stat_result | None = None) -> Image:
        view = memoryview(data).cast("B")
        return cls(path, len(view), data=view, st=st)

    @property
    def memory(self) -> memoryview | None:
        """All of the image when it is bytes in memory (pieces of it are free), else None (a
        file: pieces are read)."""
        return self._data

    def bad(self, why: str) -> ParseError:
        """A ParseError about this image: ``why``, after its path when it has one."""
        return ParseError(f"{self.path}: {why}" if self.path else why)

    def check(self, offset: int, size: int, what: str) -> None:
        """Refuse ``size`` bytes at ``offset`` unless the image holds them."""
        if offset < 0 or size < 0 or offset + size > self.size:
            raise self.bad(f"truncated ELF: {what} ({size} bytes at offset {offset}) run past the end "
                           f"({self.size} bytes)")

    def read(self, offset: int, size: int, what: str) -> bytes | memoryview:
        self.check(offset, size, what)
        return self._read(offset, size, what)

    def read_upto(self, offset: int, size: int, what: str) -> bytes | memoryview:
        """Up to ``size`` bytes at ``offset``: fewer at the end of the image, none past it."""
        if not 0 <= offset < self.size:
            return b""
        return self._read(offset, min(size, self.size - offset), what)

    def _read(self, offset: int, size: int, what: str) -> bytes | memoryview:
        if self._data is not None:
            return self._data[offset:offset + size]
        try:
            raw = os.pread(self._fd, size, offset)
        except OSError as exc:
            raise KernelError("read binary", exc.errno or errno.EIO, self.path) from None
        if len(raw) != size:  # pread returns at most 0x7ffff000 bytes; else the file shrank
            raise self.bad(f"{what} ({size} bytes at offset {offset}): read {len(raw)} bytes "
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


def open_binary(path: str) -> Image:
    """The executable or shared object at ``path`` as an :class:`Image`: a regular file of at
    most BINARY_LIMIT bytes (bpfkit._files), with bpfkit errors for a missing one, a directory,
    a FIFO, a device, ..."""
    try:
        return Image.open(path, "binary", BINARY_LIMIT)
    except NotFoundError:
        raise NotFoundError(f"binary {path} does not exist") from None
