# SPDX-License-Identifier: Apache-2.0
"""cgroup v2 ids -> cgroup paths, for the ``cgroup`` label decoders (bpfkit's own format and
ebpf_exporter's).

A cgroup id (bpf_get_current_cgroup_id(), a cgroup_id field) is the cgroup directory's inode
number in the cgroup2 filesystem (kernfs), so ids are found by walking the cgroup2 mounts
(:func:`bpfkit._kernel.cgroupfs.cgroup_paths`). The walk is done on first use and again, at
most once a second, for an id not seen yet (a cgroup made since). An id once seen keeps its
path after its cgroup is removed, as ebpf_exporter's cgroup/walker.go keeps it: a map's
counters outlive the cgroup they count.
"""

from __future__ import annotations

import time

__all__ = ["CgroupPaths"]

REWALK_INTERVAL = 1.0  # seconds between walks for unknown ids


class CgroupPaths:
    """cgroup id -> the cgroup directory's full path (``/sys/fs/cgroup/system.slice``; the
    root cgroup is the mount point itself), as ebpf_exporter's cgroup monitor prints it."""

    def __init__(self) -> None:
        self.paths: dict[int, str] = {}
        self.mounts: list[str] = []
        self.walked: float | None = None

    def path(self, cid: int) -> str | None:
        """The path of cgroup ``cid``, or None for an id no walk has found."""
        found = self.paths.get(cid)
        now = time.monotonic()
        if found is None and (self.walked is None or now - self.walked >= REWALK_INTERVAL):
            from .._kernel.cgroupfs import cgroup2_mounts, cgroup_paths

            self.walked = now
            self.mounts = cgroup2_mounts()
            self.paths.update(cgroup_paths())
            found = self.paths.get(cid)
        return found

    def in_hierarchy(self, path: str) -> str:
        """``path`` as a path in the cgroup hierarchy (``/system.slice``; the root is ``/``),
        as /proc/PID/cgroup shows it: without its mount point."""
        for mount in self.mounts:
            if path == mount:
                return "/"
            if path.startswith(mount.rstrip("/") + "/"):
                return path[len(mount.rstrip("/")):]
        return path
