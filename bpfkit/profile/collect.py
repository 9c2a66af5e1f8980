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
values are summed): samples, or a time; or a struct whose ``delta`` is the count (libbpf-tools'
offcputime: microseconds off CPU, which the profile's unit then says). Fields are found by name
in the decoded key, in the spellings of bcc's and libbpf-tools' profile and offcputime
(bpfkit.profile.keys: ``kern_stack_id``, ``name``, ``tgid``, bcc's ``kernel_ip``; the task name
may be in the value), so the order and extra fields are free; either stack id may be absent. A
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
from .keys import COMM_FIELDS, DELTA, KERNEL_FIELDS, KERNEL_IP, OFF_CPU_UNIT, PID_FIELDS, USER_FIELDS, first
from .model import KERNEL_SUFFIX, Profile

__all__ = ["from_maps", "stack_key_fields", "LOST_STACK"]

LOST_STACK = "[lost stack]"


def _fields(record: Any) -> dict[str, Any] | None:
    fields = record.to_dict() if hasattr(record, "to_dict") else record
    return fields if isinstance(fields, dict) else None


def _key_parts(key: Any, value: Any = None) -> tuple[int, int | None, int | None, str, int]:
    """(pid, user stack id, kernel stack id, comm, kernel ip or 0) of a decoded key (and the
    value, which may carry the task name)."""
    fields = _fields(key)
    if fields is None:
        raise UsageError(f"the counts map's key {key!r} is not a struct typed by BTF: give the map BTF "
                         "(__type(key, struct key_t)) with user_stack_id and kernel_stack_id (or kern_stack_id) "
                         "fields, and pid (or tgid) and comm (or name)")
    user, kernel = first(USER_FIELDS, fields), first(KERNEL_FIELDS, fields)
    if user is None and kernel is None:
        raise UsageError(f"the counts map's key has neither {' nor '.join(USER_FIELDS + KERNEL_FIELDS)} "
                         f"(fields: {', '.join(fields)})")
    pid = first(PID_FIELDS, fields)
    named = fields if first(COMM_FIELDS, fields) else _fields(value[0] if isinstance(value, list) and value
                                                               else value) or {}
    comm = first(COMM_FIELDS, named)
    return (0 if pid is None else int(fields[pid]), None if user is None else int(fields[user]),
            None if kernel is None else int(fields[kernel]), "" if comm is None else str(named[comm]),
            int(fields.get(KERNEL_IP) or 0))


def stack_key_fields(key: Any, value: Any = None) -> tuple[int, int | None, int | None, str]:
    """(pid, user stack id or None, kernel stack id or None, comm) of a decoded key; the comm
    from ``value`` when the key has none (libbpf-tools' offcputime keeps it in val_t)."""
    return _key_parts(key, value)[:4]


def _value(v: Any) -> int:
    """The count in a value: a number, a struct's ``delta``, per-CPU values summed."""
    if isinstance(v, list):
        return sum(_value(x) for x in v)
    if isinstance(v, (bytes, bytearray)):
        return int.from_bytes(bytes(v)[:8], "little")
    fields = _fields(v)
    if fields is not None:
        if DELTA not in fields:
            raise UsageError(f"the counts map's value is a struct without a {DELTA} field (fields: {', '.join(fields)}): "
                             "give it a number (__u64), or the count in a field named delta")
        return int(fields[DELTA])
    return int(v)


def _is_delta(v: Any) -> bool:
    fields = _fields(v[0] if isinstance(v, list) and v else v)
    return fields is not None and DELTA in fields


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
        tgid, uid, kid, comm, kernel_ip = _key_parts(key, value)
        if _is_delta(value) and (prof.sample_type, prof.unit) == ("samples", "count"):
            prof.sample_type, prof.unit = OFF_CPU_UNIT  # a time, not samples: pprof and the SVG say so
        count = _value(value)
        # 0: an entry made and not added to yet (offcputime's val_t until its task runs again)
        if (pid is not None and tgid != pid) or not count:
            continue
        stack = [comm or str(tgid)]
        ustack = ips(uid) if user else []
        kstack = ips(kid) if kernel else []
        if kernel and kernel_ip and kid is not None and kid >= 0 and kstack[:1] != [kernel_ip]:
            # bcc's profile.py puts the sampled ip first ("fix kernel stack") for kernels whose
            # perf-event stacks leave it out; where the stack starts there (6.x) it is not repeated.
            kstack = [kernel_ip, *kstack]
        if ustack:
            stack += _frames(user_frames(tgid, ustack), False)
        if kstack:
            stack += _frames(sym.kernel_stack(kstack), True)
        if not ustack and not kstack:
            stack.append(LOST_STACK)
        prof.add(stack, count)
    return prof
