# SPDX-License-Identifier: Apache-2.0
"""Profiles from BPF maps: the counts-by-stack convention of ``bpfkit attach --stacks``.

The program counts into a hash map whose key is a struct holding a process id, the stack ids
``bpf_get_stackid`` returned, and the task's name, as bcc's ``profile`` keys its counts::

    struct stack_key {
        __u32 pid;              /* tgid; or "tgid" */
        __s32 user_stack_id;    /* bpf_get_stackid(ctx, &stacks, BPF_F_USER_STACK) */
        __s32 kernel_stack_id;  /* bpf_get_stackid(ctx, &stacks, 0) */
        char comm[16];          /* bpf_get_current_comm; or "name" */
    };

and a ``BPF_MAP_TYPE_STACK_TRACE`` map the ids index. The value is a number (u64; per-CPU
values are summed): samples, or a time. Fields are found by name through the key's BTF, so
the order and extra fields are free; either stack id may be absent from the struct. A
negative id is the helper's error (-EFAULT: no user stack, as for kernel threads; -EEXIST: a
hash bucket collision without BPF_F_REUSE_STACKID; -ENOMEM): that part of the stack is left
out, and a stack with neither part is counted under ``[lost stack]``.

Stacks are laid out as flame graphs want them: ``comm;user frames root first;kernel frames
root first`` with kernel frames suffixed ``_[k]``.
"""

from __future__ import annotations

from typing import Any

from ..errors import UsageError
from ..symbols import Frame, Symbolizer, default_symbolizer
from ..symbols.stacks import decode_stack
from .model import KERNEL_SUFFIX, Profile

__all__ = ["from_maps", "stack_key_fields", "LOST_STACK"]

LOST_STACK = "[lost stack]"
_PID = ("pid", "tgid")
_COMM = ("comm", "name", "task")


def stack_key_fields(key: Any) -> tuple[int, int | None, int | None, str]:
    """(pid, user stack id or None, kernel stack id or None, comm) of a decoded key."""
    fields = key.to_dict() if hasattr(key, "to_dict") else None
    if not isinstance(fields, dict):
        raise UsageError(f"the counts map's key {key!r} is not a struct typed by BTF: give the map BTF "
                         "(__type(key, struct stack_key)) with pid, user_stack_id, kernel_stack_id and comm fields")
    pid = next((int(fields[n]) for n in _PID if n in fields), 0)
    user = fields.get("user_stack_id")
    kernel = fields.get("kernel_stack_id")
    comm = next((str(fields[n]) for n in _COMM if n in fields), "")
    if user is None and kernel is None:
        raise UsageError(f"the counts map's key has neither user_stack_id nor kernel_stack_id "
                         f"(fields: {', '.join(fields)})")
    return pid, None if user is None else int(user), None if kernel is None else int(kernel), comm


def _value(v: Any) -> int:
    if isinstance(v, list):
        return sum(_value(x) for x in v)
    if isinstance(v, (bytes, bytearray)):
        return int.from_bytes(bytes(v)[:8], "little")
    return int(v)


def _frames(frames: list[Frame], kernel: bool) -> list[str]:
    names = [f.label for f in reversed(frames)]
    return [n + KERNEL_SUFFIX for n in names] if kernel else names


def from_maps(counts: Any, stacks: Any, *, symbolizer: Symbolizer | None = None, pid: int | None = None,
              profile: Profile | None = None, kernel: bool = True, user: bool = True,
              tracker: Any = None) -> Profile:
    """Read ``counts`` (stack key -> value) and ``stacks`` (the stack-trace map) into a
    :class:`Profile` (a new one, or added to ``profile``). ``pid``: only that process.

    User stacks are named through each process's mappings: read from /proc/PID/maps (so the
    process must still run; see Symbolizer.process_maps), or, given ``tracker`` (a
    bpfkit.events.ProcessTracker opened before the sampling), from the mappings its sideband
    records kept, which outlive the process."""
    sym = symbolizer or default_symbolizer()

    def user_frames(tgid: int, addrs: list[int]) -> list[Frame]:
        proc = tracker.process(tgid) if tracker is not None else None
        if proc is None:
            return sym.user_stack(tgid, addrs)
        out = []
        for a in addrs:
            m = proc.find(a)
            out.append(sym.mapping_frame(m, a, tgid if proc.alive else None) if m is not None else Frame(a, None))
        return out

    prof = profile if profile is not None else Profile()
    cache: dict[int, list[int]] = {}

    def ips(stack_id: int | None) -> list[int]:
        if stack_id is None or stack_id < 0:
            return []
        if stack_id not in cache:
            raw = stacks.lookup(stack_id)
            cache[stack_id] = ([] if raw is None else raw if isinstance(raw, list) else decode_stack(raw))
        return cache[stack_id]

    if tracker is not None:
        tracker.sync()  # apply the records up to now
    for key, value in counts.items():
        tgid, uid, kid, comm = stack_key_fields(key)
        if pid is not None and tgid != pid:
            continue
        stack = [comm or str(tgid)]
        ustack = ips(uid) if user else []
        kstack = ips(kid) if kernel else []
        if ustack:
            stack += _frames(user_frames(tgid, ustack), False)
        if kstack:
            stack += _frames(sym.kernel_stack(kstack), True)
        if not ustack and not kstack:
            stack.append(LOST_STACK)
        prof.add(stack, _value(value))
    return prof
