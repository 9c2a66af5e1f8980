# SPDX-License-Identifier: Apache-2.0
"""Pinning in bpffs: pin paths checked before anything is created, BPF_OBJ_PIN with the missing
directories made (pin_object), and PinnableObject, the pin, unpin and open-pinned that Map and
Program share (a pin keeps a kernel object alive after every fd is closed; BPF_OBJ_GET opens it
again from another process).

Names that end up in a pin path (a map pinned by name, a program or link pinned by
``bpfkit load``/``attach --pin``) come from the object file, which bpfkit does not trust:
clang writes any symbol name (``__asm__("../x")``). So a pin name must be one path component
(no ``/``, not ``.`` or ``..``, not empty), and the resolved path must stay in its directory
(a symlink already in bpffs must not lead elsewhere).

A pin directory must be on a bpf filesystem before bpfkit creates any part of it: the nearest
existing ancestor is checked with statfs(2) (f_type == BPF_FS_MAGIC, include/uapi/linux/magic.h).
"""

from __future__ import annotations

import errno
import os

from .._closing import ClosesOnExit
from ..errors import KernelError, NotFoundError, UsageError, kernel_error

TYPE_CHECKING = False  # typing costs ~2 ms to import: its names are for the type checker only
if TYPE_CHECKING:
    from typing import ClassVar

    from .fd import FD

__all__ = ["BPF_FS_MAGIC", "fs_magic", "nearest_existing", "is_bpffs", "check_pin_dir", "check_pin_name",
           "pin_path", "make_dirs", "remove_dirs", "pin_object", "ensure_bpffs", "bpffs_mount_of", "PinnableObject"]

BPF_FS_MAGIC = 0xCAFE4A11  # include/uapi/linux/magic.h
BPFFS_DEFAULT = "/sys/fs/bpf"

def fs_magic(path: str) -> int:
    """statfs(2)'s f_type for ``path``. f_type is the first member of struct statfs
    (__fsword_t, a long, on the 64-bit ABIs; 120 bytes in all, a 256-byte buffer is ample)."""
    from .abi import ffi, libc  # cffi, not ctypes: the kernel layer loads it anyway (ctypes: ~2 ms more)

    buf = ffi.new("long[32]")
    if libc.statfs(os.fsencode(path), buf) != 0:
        raise kernel_error("statfs", ffi.errno, path)
    return int(buf[0]) & 0xFFFFFFFF


def nearest_existing(path: str) -> str:
    """``path`` (made absolute, symlinks resolved) or its nearest ancestor that exists."""
    current = os.path.realpath(path)
    while not os.path.lexists(current):
        parent = os.path.dirname(current)
        if parent == current:
            break
        current = parent
    return current


def is_bpffs(path: str) -> bool:
    """True when ``path`` (or, when missing, its nearest existing ancestor) is on bpffs."""
    try:
        return fs_magic(nearest_existing(path)) == BPF_FS_MAGIC
    except Exception:  # statfs failed (EACCES on an ancestor, ...): not usable as bpffs
        return False


def check_pin_dir(path: str | os.PathLike[str], what: str = "pin directory") -> str:
    """The resolved absolute form of pin directory ``path`` after checking, before anything
    is created, that it lies on bpffs. ``..`` and symlinks are resolved first, so
    ``/sys/fs/bpf/../../tmp/x`` is judged as /sys/tmp/x. When the path is under /sys/fs/bpf
    and nothing is mounted there, bpffs is mounted (as systemd does at boot)."""
    given = os.fspath(path)
    if not given:
        raise UsageError(f"{what}: empty path")
    if "\0" in given:
        raise UsageError(f"{what} {given!r}: contains a NUL byte")
    real = os.path.realpath(given)
    if is_bpffs(real):
        return real
    shown = given if real == given else f"{given} (resolved: {real})"
    if real == BPFFS_DEFAULT or real.startswith(BPFFS_DEFAULT + "/"):
        # /sys/fs/bpf exists but is plain sysfs: mount bpffs there, then judge again.
        from .abi import ffi, libc

        if libc.mount(b"bpf", BPFFS_DEFAULT.encode(), b"bpf", 0, ffi.NULL) != 0:
            raise kernel_error("mount bpffs", ffi.errno, f"at {BPFFS_DEFAULT} (for {what} {shown})")
        if is_bpffs(real):
            return real
    raise UsageError(f"{what} {shown} is not on a bpf filesystem ({nearest_existing(real)} is not bpffs); "
                     "pins live in bpffs (mount -t bpf bpf DIR); nothing was created")


def ensure_bpffs(path: str) -> None:
    """Make sure ``path`` lies on a bpf filesystem: mount one at /sys/fs/bpf when that is
    where ``path`` is and nothing is mounted there (as systemd does at boot); see check_pin_dir."""
    check_pin_dir(path)


def bpffs_mount_of(path: str) -> str:
    """The mount point of the bpf filesystem holding ``path`` (its nearest existing parent),
    or '' when ``path`` is not on bpffs (pinning there fails with EPERM)."""
    from .mountinfo import mountinfo  # here only: pinning does not read mountinfo

    real = os.path.realpath(path)
    best = ("", "")
    for point, fstype in mountinfo():
        if (real == point or real.startswith(point.rstrip("/") + "/")) and len(point) >= len(best[0]):
            best = (point, fstype)
    return best[0] if best[1] == "bpf" else ""


def check_pin_name(name: str, what: str) -> None:
    """Refuse a name from the object that is not a single path component."""
    why = ""
    if not name:
        why = "it is empty"
    elif "/" in name:
        why = "it contains '/', so its pin would leave the pin directory"
    elif name in (".", ".."):
        why = f"{name!r} names a directory, not a pin"
    elif "\0" in name:
        why = "it contains a NUL byte"
    if why:
        raise UsageError(f"{what} {name!r} cannot be pinned: {why}; rename it in the object")


def pin_path(directory: str, name: str, what: str, pin_name: str | None = None) -> str:
    """``directory/pin_name`` (``pin_name`` defaults to ``name``, the object's name it is
    derived from) after checking that both are one path component and that the resolved path
    (following a symlink already there) stays directly under the resolved ``directory``."""
    check_pin_name(name, what)
    if pin_name is None:
        pin_name = name
    elif pin_name != name:
        check_pin_name(pin_name, f"{what} {name!r}: pin name")
    path = os.path.join(directory, pin_name)
    real_dir = os.path.realpath(directory)
    real = os.path.realpath(path)
    if os.path.dirname(real) != real_dir:
        raise UsageError(f"{what} {name!r}: its pin path {path} resolves to {real}, outside {real_dir}")
    return path


def make_dirs(path: str, made: list[str]) -> None:
    """mkdir -p ``path``, appending every directory created to ``made`` (outermost first),
    so a caller can undo them. Call :func:`check_pin_dir` first."""
    missing = []
    current = path
    while not os.path.isdir(current):
        missing.append(current)
        parent = os.path.dirname(current)
        if parent == current:
            break
        current = parent
    for p in reversed(missing):
        try:
            os.mkdir(p)
        except FileExistsError:
            if not os.path.isdir(p):
                raise
            continue
        made.append(p)


def remove_dirs(made: list[str]) -> None:
    """Undo :func:`make_dirs` (innermost first); a directory no longer empty stays."""
    for p in reversed(made):
        try:
            os.rmdir(p)
        except OSError:
            pass
    made.clear()


def pin_object(fd: object, path: str, what: str) -> None:
    """BPF_OBJ_PIN ``fd`` at ``path``, making missing parent directories first (as libbpf's
    make_parent_dir), once the nearest existing one is checked to be bpffs. Errors name
    ``what`` ("map 'events'", "perf_event link") and the path; directories made for a pin that
    then fails are removed again."""
    from ..errors import BPFKitError
    from .bpf import obj_pin

    parent = os.path.dirname(os.path.abspath(path))
    made: list[str] = []
    try:
        if not os.path.isdir(parent):
            check_pin_dir(parent, f"directory of the pin of {what}")
            try:
                make_dirs(parent, made)
            except OSError as exc:
                raise kernel_error(f"pin {what} at {path}: create {exc.filename or parent}",
                                   exc.errno or 0) from None
        obj_pin(fd, path)  # type: ignore[arg-type]
    except BPFKitError as exc:
        remove_dirs(made)
        if getattr(exc, "errno", 0) == errno.EPERM and not is_bpffs(parent):
            exc.wrap(f"{parent} is not on a bpf filesystem (mount -t bpf bpf /sys/fs/bpf)")
        raise exc.wrap(f"pin {what} at {path}")


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
        from .bpf import obj_get  # lazily, as pin_object: bpfkit._kernel.cgroupfs imports this module

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
