# SPDX-License-Identifier: Apache-2.0
"""Stack traces as the kernel hands them out, decoded.

* ``BPF_MAP_TYPE_STACK_TRACE`` values (``bpf_get_stackid``): ``value_size / 8`` u64 instruction
  pointers, innermost first. A lookup copies the trace's ``nr`` entries and zero-fills the rest
  (kernel/bpf/stackmap.c, bpf_stackmap_copy), so trailing zeros are dropped.
* The same map created with ``BPF_F_STACK_BUILD_ID``: ``value_size / 32`` ``struct
  bpf_stack_build_id`` entries (``s32 status; u8 build_id[20]; union { u64 offset; u64 ip; }``,
  include/uapi/linux/bpf.h). ``status`` says which member is valid: BPF_STACK_BUILD_ID_VALID (1)
  a build id and the file offset in it, BPF_STACK_BUILD_ID_IP (2) only the raw ip (the build id
  could not be read, for example in NMI context or for a file without one),
  BPF_STACK_BUILD_ID_EMPTY (0) no frame: the end of the trace.
* Stacks copied with ``bpf_get_stack`` into a ring-buffer record (or any buffer): the same u64
  array (or the same build-id entries with ``BPF_F_USER_BUILD_ID``); the helper returns the
  number of bytes it wrote, which the program usually sends along.
"""

from __future__ import annotations

import struct
from typing import NamedTuple

from ..errors import ParseError

__all__ = ["BuildIdFrame", "decode_stack", "decode_build_id_stack", "BUILD_ID_ENTRY_SIZE",
           "BUILD_ID_EMPTY", "BUILD_ID_VALID", "BUILD_ID_IP"]

BUILD_ID_ENTRY_SIZE = 32  # sizeof(struct bpf_stack_build_id)
BUILD_ID_EMPTY, BUILD_ID_VALID, BUILD_ID_IP = 0, 1, 2  # enum bpf_stack_build_id_status
_BUILD_ID_ENTRY = struct.Struct("<i20sQ")  # status, build_id[20], offset or ip (at 24: already 8-aligned)


class BuildIdFrame(NamedTuple):
    """One frame of a build-id stack: ``(build id in hex, file offset)`` for a VALID entry;
    ``(None, ip)`` for an entry the kernel could only give the instruction pointer of."""

    build_id: str | None
    offset: int


def decode_stack(raw: bytes | bytearray | memoryview, size: int | None = None) -> list[int]:
    """The instruction pointers of a stack: ``raw`` holds u64s (a stack-trace map value, or
    what bpf_get_stack wrote; ``size``: the bytes it reported writing, default all of ``raw``),
    innermost first, trailing zeros dropped."""
    view = memoryview(raw).cast("B")
    n = len(view) if size is None else min(max(size, 0), len(view))
    n -= n % 8
    ips = list(struct.unpack_from(f"<{n // 8}Q", view, 0))
    while ips and not ips[-1]:
        ips.pop()
    return ips


def decode_build_id_stack(raw: bytes | bytearray | memoryview, size: int | None = None) -> list[BuildIdFrame]:
    """A ``BPF_F_STACK_BUILD_ID`` stack (or bpf_get_stack with BPF_F_USER_BUILD_ID): one
    :class:`BuildIdFrame` per entry up to the first EMPTY one."""
    view = memoryview(raw).cast("B")
    n = len(view) if size is None else min(max(size, 0), len(view))
    if n % BUILD_ID_ENTRY_SIZE:
        raise ParseError(f"build-id stack of {n} bytes is not a whole number of "
                         f"{BUILD_ID_ENTRY_SIZE}-byte struct bpf_stack_build_id entries")
    out: list[BuildIdFrame] = []
    for status, build_id, offset in _BUILD_ID_ENTRY.iter_unpack(view[:n]):
        if status == BUILD_ID_VALID:
            out.append(BuildIdFrame(build_id.hex(), offset))
        elif status == BUILD_ID_IP:
            out.append(BuildIdFrame(None, offset))
        else:  # BPF_STACK_BUILD_ID_EMPTY: the trace ended
            break
    return out
