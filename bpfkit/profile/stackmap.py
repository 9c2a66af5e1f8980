# SPDX-License-Identifier: Apache-2.0
"""Stack-trace maps an object leaves unsized, given the sizes their tools would give them.

libbpf-tools' profile.bpf.c and offcputime.bpf.c declare ``stackmap`` with no value_size and
no max_entries: profile.c and offcputime.c set them before loading
(``bpf_map__set_value_size(obj->maps.stackmap, env.perf_max_stack_depth * sizeof(unsigned
long))``, ``bpf_map__set_max_entries(obj->maps.stackmap, env.stack_storage_size)``). The
kernel refuses a stack-trace map whose value holds more addresses than
``kernel.perf_event_max_stack`` (kernel/bpf/stackmap.c, stack_map_alloc), so the deepest it
accepts is what a 0 value_size becomes: that sysctl x 8 bytes (x 32, one struct
bpf_stack_build_id per frame, with BPF_F_STACK_BUILD_ID). A 0 max_entries becomes
:data:`DEFAULT_MAX_ENTRIES`, bcc's tools/profile.py and offcputime.py --stack-storage-size
default; a 0 key_size becomes 4 (a u32 stack id, the only size the kernel takes).
"""

from __future__ import annotations

from ..spec.consts import MapFlag, MapType
from ..spec.maps import MapSpec

__all__ = ["size_stack_map", "max_stack_depth", "DEFAULT_MAX_ENTRIES", "PERF_MAX_STACK_DEPTH"]

DEFAULT_MAX_ENTRIES = 16384
PERF_MAX_STACK_DEPTH = 127  # include/uapi/linux/perf_event.h: the sysctl's default
_SYSCTL = "/proc/sys/kernel/perf_event_max_stack"
_BUILD_ID_FRAME = 32  # sizeof(struct bpf_stack_build_id)


def max_stack_depth(path: str = _SYSCTL) -> int:
    """kernel.perf_event_max_stack, or its default (127) where it cannot be read."""
    try:
        with open(path, encoding="ascii") as f:
            depth = int(f.read().strip())
    except (OSError, ValueError):
        return PERF_MAX_STACK_DEPTH
    return depth if depth > 0 else PERF_MAX_STACK_DEPTH


def size_stack_map(mspec: MapSpec, keep: frozenset[str] = frozenset()) -> list[str]:
    """Set ``mspec``'s sizes that are 0 (but those named in ``keep``: set by the caller later)
    and return each one set, as ``value_size = 1016 (kernel.perf_event_max_stack 127 x 8)``."""
    if mspec.type != MapType.STACK_TRACE:
        return []
    frame = _BUILD_ID_FRAME if mspec.flags & MapFlag.STACK_BUILD_ID else 8
    wanted = {"key_size": (4, "a u32 stack id"),
              "value_size": (max_stack_depth() * frame, f"kernel.perf_event_max_stack {max_stack_depth()} x {frame}"),
              "max_entries": (DEFAULT_MAX_ENTRIES, "bcc's --stack-storage-size default")}
    done = []
    for field, (value, why) in wanted.items():
        if getattr(mspec, field) == 0 and field not in keep:
            setattr(mspec, field, value)
            done.append(f"{field} = {value} ({why})")
    return done
