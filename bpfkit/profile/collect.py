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
              profile: Profile | None = None, kernel: bool = True, user: bool = True) -> Profile:
    """Read ``counts`` (stack key -> value) and ``stacks`` (the stack-trace map) into a
    :class:`Profile` (a new one, or added to ``profile``). ``pid``: only that process.
    Processes must still be running for their user stacks to be named (their mappings are read
    from /proc/PID/maps; see Symbolizer.process_maps)."""
    sym = symbolizer or default_symbolizer()
    prof = profile if profile is not None else Profile()
    cache: dict[int, list[int]] = {}

    def ips(stack_id: int | None) -> list[int]:
        if stack_id is None or stack_id < 0:
            return []
        if stack_id not in cache:
            raw = stacks.lookup(stack_id)
            cache[stack_id] = ([] if raw is None else raw if isinstance(raw, list) else decode_stack(raw))
        return cache[stack_id]

    for key, value in counts.items():
        tgid, uid, kid, comm = stack_key_fields(key)
        if pid is not None and tgid != pid:
            continue
        stack = [comm or str(tgid)]
        ustack = ips(uid) if user else []
        kstack = ips(kid) if kernel else []
        if ustack:
            stack += _frames(sym.user_stack(tgid, ustack), False)
        if kstack:
            stack += _frames(sym.kernel_stack(kstack), True)
        if not ustack and not kstack:
            stack.append(LOST_STACK)
        prof.add(stack, _value(value))
    return prof
