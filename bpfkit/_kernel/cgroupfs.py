# SPDX-License-Identifier: Apache-2.0
"""cgroup v2 directories: where the cgroup2 filesystem is mounted, opening a cgroup, ids.

cgroup BPF programs attach to a cgroup v2 directory, named by an fd opened on it (O_RDONLY |
O_DIRECTORY). Its cgroup id (bpf_link_info.cgroup.cgroup_id, bpf_get_current_cgroup_id()) is
the kernfs node id, which is the directory's inode number on 64-bit kernels. Machines with a
hybrid hierarchy mount cgroup2 at /sys/fs/cgroup/unified (v1 controllers at /sys/fs/cgroup/*),
so the mount is read from /proc/self/mountinfo, never assumed.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Iterator

from ..errors import KernelError, NotFoundError, UsageError
from .bpffs import fs_magic
from .fd import FD
from .mountinfo import mountinfo

__all__ = ["cgroup2_mounts", "cgroup2_root", "open_cgroup", "cgroup_id", "cgroup_path", "cgroup_paths", "walk"]

CGROUP2_SUPER_MAGIC = 0x63677270


def cgroup2_mounts() -> list[str]:
    """Mount points of the cgroup2 filesystem, as /proc/self/mountinfo lists them."""
    return [point for point, fstype in mountinfo() if fstype == "cgroup2"]


def cgroup2_root() -> str:
    """The first cgroup2 mount point; NotFoundError when cgroup v2 is not mounted."""
    mounts = cgroup2_mounts()
    if not mounts:
        raise NotFoundError("no cgroup2 filesystem in /proc/self/mountinfo "
                            "(mount one: mount -t cgroup2 none /sys/fs/cgroup/unified)")
    return mounts[0]


def _is_cgroup2(path: str) -> bool:
    try:
        return fs_magic(path) == CGROUP2_SUPER_MAGIC
    except KernelError:
        return True  # cannot tell: let the kernel judge (EBADF at attach)


def open_cgroup(path: str) -> FD:
    """An fd on the cgroup v2 directory ``path`` (what BPF_PROG_ATTACH and BPF_LINK_CREATE
    take as target_fd). UsageError for a directory outside cgroup2 (a v1 hierarchy, /tmp)."""
    try:
        raw = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except FileNotFoundError:
        raise NotFoundError(f"no cgroup {path} (the directory does not exist)") from None
    except NotADirectoryError:
        raise UsageError(f"{path} is not a cgroup directory") from None
    except OSError as exc:
        raise KernelError(f"open cgroup {path}", exc.errno or errno.EIO) from None
    fd = FD(raw)
    if not _is_cgroup2(path):
        fd.close()
        where = ", ".join(cgroup2_mounts()) or "nowhere: cgroup2 is not mounted"
        raise UsageError(f"{path} is not in a cgroup v2 hierarchy (cgroup2 is mounted at {where})")
    return fd


def cgroup_id(path_or_fd: str | FD | int) -> int:
    """The cgroup id of a cgroup v2 directory (its inode number)."""
    if isinstance(path_or_fd, str):
        return os.stat(path_or_fd).st_ino
    return os.fstat(int(path_or_fd)).st_ino


def walk(root: str) -> Iterator[str]:
    """``root`` and every cgroup below it, parents before children; unreadable ones skipped."""
    yield root
    try:
        entries = sorted(os.scandir(root), key=lambda e: e.name)
    except OSError:
        return
    for entry in entries:
        try:
            if entry.is_dir(follow_symlinks=False):
                yield from walk(entry.path)
        except OSError:
            continue


def cgroup_paths() -> dict[int, str]:
    """cgroup id -> path of every cgroup under the cgroup2 mounts (one walk, for listings)."""
    found: dict[int, str] = {}
    for mount in cgroup2_mounts():
        for path in walk(mount):
            try:
                found.setdefault(os.stat(path).st_ino, path)
            except OSError:
                continue
    return found


def cgroup_path(cgid: int) -> str | None:
    """The path of the cgroup with id ``cgid`` under a cgroup2 mount, or None (a cgroup removed
    since, or one outside this process's cgroup namespace)."""
    for mount in cgroup2_mounts():
        for path in walk(mount):
            try:
                if os.stat(path).st_ino == cgid:
                    return path
            except OSError:
                continue
    return None
