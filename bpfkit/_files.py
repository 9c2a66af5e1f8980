# SPDX-License-Identifier: Apache-2.0
"""Reading the files bpfkit is pointed at (objects, binaries for uprobes and USDT, BTF files,
kernel configs): regular files only, of a bounded size, never blocking.

A FIFO given as an object would block ``open()`` until a writer came (and ``read()`` until it
left); /dev/zero would be read until memory ran out. So every such path is opened with
O_NONBLOCK (which makes opening a FIFO return at once and does nothing for a regular file),
judged with fstat on that fd (no race with a rename between a stat and the open), refused unless
S_ISREG, and read to at most a limit that fits real files of its kind. Files in procfs and
sysfs report st_size 0 or a page size, so the limit is enforced on what is read, not on st_size.

Every file bpfkit writes (profiles, generated skeletons, man pages) goes through
:func:`write_atomic`: a new file of a random name made with O_CREAT|O_EXCL|O_NOFOLLOW in the
target's directory (tempfile.mkstemp), then renamed onto the target. A fixed or predictable
temporary name (``F.tmp``, ``F.tmp<pid>``) opened with a plain ``open()`` follows a symlink
another user planted there, and root then overwrites the symlink's target; O_EXCL refuses any
existing name, and a rename replaces a name without following it.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterator

from .errors import KernelError, NotFoundError, UsageError

__all__ = ["read_regular", "write_atomic", "check_output", "OBJECT_LIMIT", "BINARY_LIMIT", "BTF_LIMIT", "CONFIG_LIMIT",
           "open_regular", "iter_lines"]

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


def _umask() -> int:
    """The process's umask, read without changing it (os.umask sets it to read it, which would
    race with threads creating files): /proc/self/status's Umask line (Linux 4.7+)."""
    try:
        with open("/proc/self/status", "rb") as f:
            for line in f:
                if line.startswith(b"Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def check_output(path: str | os.PathLike[str], what: str = "output") -> None:
    """Refuse, before any work, an output :func:`write_atomic` would refuse at the end: a
    target the rename would wrongly replace (a directory, a device, a FIFO or a socket:
    ``-o /dev/null``, or a symbolic link to one: ``-o /dev/stdout``) or a directory that does
    not exist. A symlink to a regular file, or a dangling one, is fine: the rename replaces it
    and its target is never written."""
    shown = os.fsdecode(path)
    through = ""
    try:
        st = os.lstat(shown)
        if stat.S_ISLNK(st.st_mode):
            through = " (through a symbolic link)"
            st = os.stat(shown)
    except OSError:
        directory = os.path.dirname(os.path.abspath(shown))
        if not os.path.isdir(directory):
            raise NotFoundError(f"write {what} {shown}: no such directory {directory}") from None
        return  # no such file, or a dangling link: the rename creates the name
    if not stat.S_ISREG(st.st_mode):
        kind = _KINDS.get(stat.S_IFMT(st.st_mode), "not a regular file")
        raise UsageError(f"{what} {shown} is {kind}{through}: bpfkit writes a new file and renames it onto "
                         "that name, which would replace it; give the path of a regular file")


def write_atomic(path: str | os.PathLike[str], data: bytes | str, what: str = "output") -> None:
    """Write ``data`` (str: as UTF-8) to ``path`` so that no one sees half of it and no symlink
    is followed: a new file of a random name in the same directory (mkstemp: O_CREAT|O_EXCL|
    O_NOFOLLOW, so a name planted in advance is refused, never opened), written, fsync'd (a
    crash leaves the old file or the new one, never an empty one), given mode 0666 & ~umask
    (what ``open(path, "w")`` or a shell redirection would create), then renamed onto ``path``.
    A symlink at ``path`` is replaced, not followed. The temporary file is removed on any
    error, KeyboardInterrupt included. ``what`` names the file in errors ("profile", ...)."""
    import tempfile  # here: tempfile imports shutil and random, which reading objects never needs

    shown = os.fsdecode(path)
    if isinstance(data, str):
        data = data.encode("utf-8", "surrogateescape")  # a path's undecodable bytes, as they were
    check_output(shown, what)
    directory, name = os.path.split(os.path.abspath(shown))
    try:
        # The prefix is cut so the name stays under NAME_MAX (255 bytes) whatever the target's is.
        fd, tmp = tempfile.mkstemp(prefix=f".{name[:40]}.", suffix=".tmp", dir=directory)
    except OSError as exc:
        if exc.errno == errno.ENOENT and not os.path.isdir(directory):
            raise NotFoundError(f"write {what} {shown}: no such directory {directory}") from None
        raise KernelError(f"write {what}", exc.errno or errno.EIO, f"a new file in {directory}") from None
    try:
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            os.fchmod(fd, 0o666 & ~_umask())
            os.fsync(fd)
        finally:
            os.close(fd)
        os.rename(tmp, shown)
    except BaseException as exc:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        if isinstance(exc, OSError):
            raise KernelError(f"write {what}", exc.errno or errno.EIO, shown) from None
        raise


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
