# SPDX-License-Identifier: Apache-2.0
"""Reading the files bpfkit is pointed at (objects, binaries for uprobes and USDT, BTF files,
kernel configs): regular files only, of a bounded size, never blocking.

A FIFO given as an object would block ``open()`` until a writer came (and ``read()`` until it
left); /dev/zero would be read until memory ran out. So every such path is opened with
O_NONBLOCK (which makes opening a FIFO return at once and does nothing for a regular file),
judged with fstat on that fd (no race with a rename between a stat and the open), refused unless
S_ISREG, and read to at most a limit that fits real files of its kind. Files in procfs and
sysfs report st_size 0 or a page size, so the limit is enforced on what is read, not on st_size.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterator

from .errors import KernelError, NotFoundError, UsageError

__all__ = ["read_regular", "OBJECT_LIMIT", "BINARY_LIMIT", "BTF_LIMIT", "CONFIG_LIMIT", "open_regular", "iter_lines"]

MiB = 1 << 20
# A BPF object with full debug info is a few MiB (the largest selftests objects are ~10 MiB).
OBJECT_LIMIT = 256 * MiB
# Binaries probed with uprobes/USDT: libc is 2 MiB, Chrome ~250 MiB, debug builds of big C++
# programs reach 1-2 GiB.
BINARY_LIMIT = 4096 * MiB
# A raw BTF blob is ~5 MiB; an ELF vmlinux holding .BTF (with DWARF) may be ~1 GiB.
BTF_LIMIT = 2048 * MiB
# A kernel .config is ~300 KiB (also the bound once a config.gz is decompressed).
CONFIG_LIMIT = 64 * MiB

_KINDS = {
    stat.S_IFDIR: "a directory",
    stat.S_IFIFO: "a FIFO",
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
    stat.S_IFSOCK: "a socket",
    stat.S_IFLNK: "a symbolic link",
}


def _human(n: int) -> str:
    return f"{n // MiB} MiB" if n >= MiB and n % MiB == 0 else f"{n} bytes"


def read_regular(path: str | os.PathLike[str], what: str, limit: int) -> bytes:
    """The bytes of the regular file ``path`` (``what`` names it in errors: "object",
    "binary", ...), refusing anything else and anything over ``limit`` bytes."""
    shown = os.fsdecode(path)
    fd, st = open_regular(path, what, limit)
    try:
        chunks = []
        total = 0
        while True:
            try:
                chunk = os.read(fd, min(max(st.st_size - total, 1 << 16), limit + 1 - total, 16 * MiB))
            except OSError as exc:
                raise KernelError(f"read {what}", exc.errno or errno.EIO, shown) from None
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
            if total > limit:
                raise UsageError(f"{what} {shown} is over bpfkit's size limit for it ({_human(limit)})")
        return b"".join(chunks)
    except MemoryError:
        raise KernelError(f"read {what}", errno.ENOMEM, shown) from None
    finally:
        os.close(fd)


# ---------------------------------------------------------------- open_regular, iter_lines
# Also for files other users control that bpfkit reads while it runs (the symbolizer's perf
# maps and mapped binaries): an fd to read from in bounded pieces, or lines streamed.

def open_regular(path: str | os.PathLike[str], what: str, limit: int) -> tuple[int, os.stat_result]:
    """A read-only fd of the regular file ``path`` and its fstat, for reading in bounded pieces
    (the caller closes the fd); anything else is refused, and so is a st_size over ``limit``."""
    shown = os.fsdecode(path)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | getattr(os, "O_NOCTTY", 0))
    except FileNotFoundError:
        raise NotFoundError(f"{what} {shown}: no such file") from None
    except ValueError:  # an embedded NUL byte
        raise UsageError(f"{what} {shown!r}: not a valid path (NUL byte)") from None
    except OSError as exc:
        raise KernelError(f"open {what}", exc.errno or errno.EIO, shown) from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            kind = _KINDS.get(stat.S_IFMT(st.st_mode), "not a regular file")
            raise UsageError(f"{what} {shown} is {kind}, not a regular file")
        if st.st_size > limit:
            raise UsageError(f"{what} {shown} is {st.st_size} bytes, over bpfkit's size limit for it "
                             f"({_human(limit)})")
    except BaseException:
        os.close(fd)
        raise
    return fd, st


def iter_lines(path: str | os.PathLike[str], what: str, limit: int, chunk: int = 1 << 16) -> Iterator[bytes]:
    """The lines of the regular file ``path`` (without their newline), read ``chunk`` bytes at a
    time: at most ``limit`` bytes are read (a file growing past it while read is refused too),
    and no more than one line and one chunk are held."""
    shown = os.fsdecode(path)
    fd, _ = open_regular(path, what, limit)
    try:
        total = 0
        pending: list[bytes] = []  # the pieces of a line that has not ended yet
        while True:
            try:
                data = os.read(fd, chunk)
            except OSError as exc:
                raise KernelError(f"read {what}", exc.errno or errno.EIO, shown) from None
            if not data:
                break
            total += len(data)
            if total > limit:
                raise UsageError(f"{what} {shown} is over bpfkit's size limit for it ({_human(limit)})")
            lines = data.split(b"\n")
            if len(lines) == 1:
                pending.append(data)
                continue
            if pending:
                pending.append(lines[0])
                lines[0] = b"".join(pending)
                pending.clear()
            last = lines.pop()
            if last:
                pending.append(last)
            yield from lines
        if pending:
            yield b"".join(pending)
    except MemoryError:
        raise KernelError(f"read {what}", errno.ENOMEM, shown) from None
    finally:
        os.close(fd)
