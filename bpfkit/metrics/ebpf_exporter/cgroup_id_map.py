# SPDX-License-Identifier: Apache-2.0
"""``cgroup_id_map:``, as ebpf_exporter's exporter/cgroup_id_map.go keeps it: a map the program
looks the current cgroup up in, filled by user space with the cgroups whose path matches one of
the config's regexps (Go's regexp syntax and Python's agree on the examples' patterns).

* ``type: hash``: key the cgroup id (u64, bpf_get_current_cgroup_id()), value 1; a cgroup
  removed is deleted from the map;
* ``type: cgrp_storage`` (BPF_MAP_TYPE_CGRP_STORAGE, 6.2): key a descriptor of the cgroup's
  directory (4 bytes), value 1; the kernel drops the entry with the cgroup.

The cgroup2 hierarchy is walked when the filler starts and again every ``interval`` seconds
(ebpf_exporter watches with fanotify; a walk a second costs ~1 ms for 300 cgroups here). The
paths matched are full paths (``/sys/fs/cgroup/system.slice/cron.service``), as ebpf_exporter's
monitor gives them.
"""

from __future__ import annotations

import os
import re
import struct
import sys
import threading

from ...errors import BPFKitError, UsageError
from ...maps import Map
from .config import CgroupIDMap

__all__ = ["CgroupIDMapFiller"]

_ONE = struct.pack("=Q", 1)


class CgroupIDMapFiller:
    """Keeps ``m`` filled as ``spec`` says until :meth:`close`."""

    def __init__(self, spec: CgroupIDMap, m: Map, *, interval: float = 1.0, path: str = "<config>") -> None:
        want_key = 8 if spec.type == "hash" else 4
        if m.key_size != want_key or m.value_size != 8:
            raise UsageError(f"{path}:{spec.line}: cgroup_id_map {spec.name!r}: a {spec.type} map needs a "
                             f"{want_key}-byte key and a u64 value; the object's has {m.key_size} and {m.value_size} bytes")
        self.spec, self.map, self.interval = spec, m, interval
        self.patterns = [re.compile(expr) for expr in spec.regexps]
        self.present: set[int] = set()  # cgroup ids in the map now
        self.errors = 0
        self._said: set[str] = set()
        self._stop = threading.Event()
        self.refresh()  # filled before the programs run
        self._thread = threading.Thread(target=self._run, name=f"bpfkit-cgroup-id-map-{spec.name}", daemon=True)
        self._thread.start()

    def matches(self, path: str) -> bool:
        return any(p.search(path) for p in self.patterns)

    def refresh(self) -> None:
        """One walk: matching cgroups added, removed ones deleted (hash maps)."""
        from ..._kernel.cgroupfs import cgroup_paths

        found = {cid: path for cid, path in cgroup_paths().items() if self.matches(path)}
        for cid in sorted(found.keys() - self.present):
            try:
                self._add(cid, found[cid])
            except (BPFKitError, OSError) as exc:
                self._failed(f"add cgroup {cid}: {exc}")
                continue
            self.present.add(cid)
        for cid in sorted(self.present - found.keys()):
            self.present.discard(cid)
            if self.spec.type == "hash":
                try:
                    self.map.delete(struct.pack("=Q", cid))
                except BPFKitError as exc:
                    self._failed(f"delete cgroup {cid}: {exc}")

    def _add(self, cid: int, path: str) -> None:
        if self.spec.type == "hash":
            self.map.update(struct.pack("=Q", cid), _ONE)
            return
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            self.map.update(struct.pack("=i", fd), _ONE)  # cgrp_storage is keyed by a cgroup fd
        finally:
            os.close(fd)

    def _failed(self, why: str) -> None:
        self.errors += 1
        if why not in self._said and len(self._said) < 100:
            self._said.add(why)
            print(f"bpfkit: note: cgroup_id_map {self.spec.name}: {why}", file=sys.stderr)

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                self.refresh()
            except (BPFKitError, OSError) as exc:
                self._failed(f"walk the cgroup hierarchy: {exc}")

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
