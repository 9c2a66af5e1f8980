# SPDX-License-Identifier: Apache-2.0
"""Which map counts stacks, and which fields say what: recognised by the key's shape.

A counts map is a hash map whose BTF key is a struct holding a user or a kernel stack id
(``bpf_get_stackid``'s answers). The field spellings are those of the tools people run:

======================  ==============================================  ==========================
part                    spellings                                       written by
======================  ==============================================  ==========================
process id              ``tgid``, else ``pid``                          offcputime keys both: its
                                                                        ``pid`` is the thread's
user stack id           ``user_stack_id``                               all
kernel stack id         ``kernel_stack_id``, ``kern_stack_id``          bcc; libbpf-tools
task name               ``comm``, ``name``, ``task`` (key or value)     bpfkit, libbpf-tools'
                                                                        offcputime (value); bcc,
                                                                        libbpf-tools' profile
kernel ip               ``kernel_ip``                                   bcc's profile: the
                                                                        sampled ip, the kernel
                                                                        stack's innermost frame
                                                                        unless it starts there
value                   a number, or a struct's ``delta``               libbpf-tools' offcputime:
                                                                        ``struct val_t {delta,
                                                                        comm}``, microseconds
======================  ==============================================  ==========================

Layouts (bcc's sources): libbpf-tools/profile.h ``key_t {__u32 pid; int user_stack_id; int
kern_stack_id; char name[16];}``; libbpf-tools/offcputime.h ``key_t {__u32 pid; __u32 tgid;
int user_stack_id; int kern_stack_id;}`` and ``val_t {__u64 delta; char comm[16];}``;
tools/profile.py ``key_t {u32 pid; u64 kernel_ip; int user_stack_id; int kernel_stack_id;
char name[16];}``; tools/offcputime.py ``key_t {u32 pid; u32 tgid; int user_stack_id; int
kernel_stack_id; char name[16];}``.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from ..btf.spec import BTF
from ..btf.types import Struct, Union
from ..spec.consts import MapType
from ..spec.maps import MapSpec

__all__ = ["CountsShape", "counts_shape", "counts_maps", "key_summary", "HASH_TYPES", "OFF_CPU_UNIT",
           "PID_FIELDS", "USER_FIELDS", "KERNEL_FIELDS", "COMM_FIELDS", "KERNEL_IP", "DELTA"]

PID_FIELDS = ("tgid", "pid")  # tgid first: offcputime's pid is the thread id, its tgid the process
USER_FIELDS = ("user_stack_id",)
KERNEL_FIELDS = ("kernel_stack_id", "kern_stack_id")
COMM_FIELDS = ("comm", "name", "task")
KERNEL_IP = "kernel_ip"
DELTA = "delta"
# libbpf-tools' offcputime.bpf.c adds (now - start) / 1000 to val_t.delta: microseconds off CPU.
OFF_CPU_UNIT = ("off_cpu", "microseconds")
HASH_TYPES = frozenset({MapType.HASH, MapType.PERCPU_HASH, MapType.LRU_HASH, MapType.LRU_PERCPU_HASH})


def first(names: tuple[str, ...], present: Any) -> str | None:
    """The first of ``names`` in ``present`` (a dict or a set of field names)."""
    return next((n for n in names if n in present), None)


@dataclasses.dataclass(frozen=True)
class CountsShape:
    """The fields of a counts map that carry each part (None: absent). ``value_delta``: the
    value is a struct whose ``delta`` is the count (a time); ``value_comm``: its task name."""

    pid: str | None
    user: str | None
    kernel: str | None
    comm: str | None
    kernel_ip: str | None
    value_delta: bool
    value_comm: str | None


def _struct(btf: BTF, type_id: int) -> Struct | None:
    t = btf.resolve(type_id) if type_id else None
    return t if isinstance(t, Struct) and not isinstance(t, Union) else None


def counts_shape(mspec: MapSpec) -> CountsShape | None:
    """The shape of ``mspec`` as a counts map, or None when it is not one (not a hash map, no
    BTF key struct, or no stack id field in it)."""
    if mspec.type not in HASH_TYPES or mspec.btf is None:
        return None
    key = _struct(mspec.btf, mspec.btf_key_type_id)
    if key is None:
        return None
    names = {m.name for m in key.members}
    user, kernel = first(USER_FIELDS, names), first(KERNEL_FIELDS, names)
    if user is None and kernel is None:
        return None
    value = _struct(mspec.btf, mspec.btf_value_type_id)
    vnames = {m.name for m in value.members} if value is not None else set()
    return CountsShape(pid=first(PID_FIELDS, names), user=user, kernel=kernel, comm=first(COMM_FIELDS, names),
                       kernel_ip=KERNEL_IP if KERNEL_IP in names else None, value_delta=DELTA in vnames,
                       value_comm=first(COMM_FIELDS, vnames))


def counts_maps(maps: dict[str, MapSpec]) -> list[str]:
    """The names of the maps keyed like stack counts, in the object's order."""
    return [name for name, m in maps.items() if counts_shape(m) is not None]


def key_summary(mspec: MapSpec) -> str:
    """What ``mspec``'s key is, for a message: ``struct key_t {pid, user_stack_id, ...}``,
    ``u32`` or ``4 bytes without BTF``."""
    if mspec.btf is None or not mspec.btf_key_type_id:
        return f"{mspec.key_size} bytes without BTF"
    t = mspec.btf.resolve(mspec.btf_key_type_id)
    name = mspec.btf.type_name(mspec.btf_key_type_id)
    return f"{name} {{{', '.join(m.name for m in t.members)}}}" if isinstance(t, Struct) else name
