# SPDX-License-Identifier: Apache-2.0
"""Feature probes: small, conclusive experiments asking the running kernel what it can do.

Each probe does the least that proves the point, in the style of libbpf's ``probe_*`` and
cilium/ebpf's ``internal/feature``, and closes everything it made before returning:

* **EBADF vs EINVAL.** A command given deliberately invalid file descriptors fails with EBADF
  only after the kernel has accepted the rest of the request (it went looking for the fd), and
  with EINVAL when it does not understand the request at all. BPF_LINK_CREATE with attach type
  BPF_PERF_EVENT and target fd -1 is EBADF on 5.15+ and EINVAL before; a uprobe_multi link on
  path "/" is EBADF (not a regular file) on 6.6+.
* **Minimal objects.** A program type is probed by loading ``r0 = 0; exit`` of that type; a map
  type by creating the smallest valid map; a BTF kind by loading a hand-made blob using it.
  Unknown types and kinds are EINVAL (or E2BIG when the attr has bytes the kernel lacks).
* **sysfs/tracefs facts.** The kprobe/uprobe PMUs are files under
  /sys/bus/event_source/devices; tracefs's kprobe_events/uprobe_events are tried with a test
  definition that is removed at once.

A probe returns ``(supported, reason)``; the reason names the errno and what it means.
:mod:`bpfkit.features` caches the answers per process.
"""

from __future__ import annotations

import _thread  # threading.Lock() is a _thread lock; importing threading costs ~0.7 ms of start-up
import contextlib
import errno
import itertools
import os
import re
import struct
import sys
from collections.abc import Callable, Iterator

from .. import asm
from .._kernel import bpf as _bpf
from .._kernel import sysfs_btf as _sysfs_btf
from .._kernel.consts import BPF_F_SLEEPABLE, AttachType, Cmd, FuncId, MapFlag, MapType, ProgType
from .._kernel.fd import FD
from .._record import FrozenRecord
from ..btf.types import Kind, Member, Struct
from ..errors import BPFKitError, KernelError, NotFoundError, NotSupportedError, VerifierError, errno_name
from ._btf_kinds import BTF_BLOBS as BTF_BLOBS
from ._btf_kinds import ENOTSUPP as ENOTSUPP
from ._btf_kinds import KINDS as _BTF_KINDS
from ._btf_kinds import TRANSIENT_ERRNOS as TRANSIENT_ERRNOS
from ._btf_kinds import BTFBuilder as BTFBuilder
from ._btf_kinds import Inconclusive as Inconclusive
from ._btf_kinds import Outcome as Outcome
from ._btf_kinds import _btf_probe as _btf_probe
from ._btf_kinds import _failure as _failure
from ._btf_kinds import describe_errno as describe_errno
from ._btf_kinds import inconclusive as inconclusive
from ._btf_kinds import is_definite as is_definite

TYPE_CHECKING = False  # typing costs ~1.6 ms of start-up where nothing else imports it
if TYPE_CHECKING:
    from typing import Any

    from ..btf.spec import BTF
    from ..btf.types import Type


class Probe(FrozenRecord):
    """One feature: its name, table group, the first release that has it, and how to ask."""

    __slots__ = ("name", "group", "min_version", "what", "how", "run")
    name: str
    group: str
    min_version: str
    what: str
    how: str
    run: Callable[[], Outcome]

    def __init__(self, name: str, group: str, min_version: str, what: str, how: str, run: Callable[[], Outcome]) -> None:
        self._set_fields(name, group, min_version, what, how, run)


REGISTRY: dict[str, Probe] = {}
GROUPS = ("syscall", "links", "probes", "btf", "kfuncs", "program types", "map types")


def _register(name: str, group: str, min_version: str, what: str, how: str) -> Callable[[Callable[[], Outcome]], Callable[[], Outcome]]:
    def deco(fn: Callable[[], Outcome]) -> Callable[[], Outcome]:
        REGISTRY[name] = Probe(name, group, min_version, what, how, fn)
        return fn

    return deco


def kernel_version_code() -> int:
    """LINUX_VERSION_CODE of the running kernel from uname (kprobe programs before 5.0 must
    pass it in kern_version; 6c4fc209fcf9 dropped the check)."""
    release = os.uname().release
    parts = []
    for piece in release.split(".")[:3]:
        digits = "".join(itertools.takewhile(str.isdigit, piece))
        parts.append(int(digits or 0))
    while len(parts) < 3:
        parts.append(0)
    return (parts[0] << 16) | (parts[1] << 8) | min(parts[2], 255)


RET0 = asm.return_imm(0)


def _load(prog_type: ProgType, insns: bytes = RET0, **kwargs: Any) -> FD:
    """Load a program quietly (no log): the fast path for probes."""
    if prog_type == ProgType.KPROBE:
        kwargs.setdefault("kern_version", kernel_version_code())
    return _bpf.prog_load(int(prog_type), insns, name="bpfkit_probe", **kwargs)


def _load_logged(prog_type: ProgType, insns: bytes = RET0, **kwargs: Any) -> FD:
    """Load with a verifier log: failures raise VerifierError carrying it."""
    if prog_type == ProgType.KPROBE:
        kwargs.setdefault("kern_version", kernel_version_code())
    return _bpf.prog_load_with_log("bpfkit_probe", prog_type=int(prog_type), insns=insns, **kwargs)


@contextlib.contextmanager
def _closing() -> Iterator[contextlib.ExitStack]:
    with contextlib.ExitStack() as stack:
        yield stack


def _keep(stack: contextlib.ExitStack, fd: FD) -> FD:
    stack.callback(fd.close)
    return fd


# What an attach that failed with an errno (or any of a tuple of them) says about the feature;
# "{errno}" in the reason becomes the errno's name and meaning.
Answers = dict[int | tuple[int, ...], Outcome]


def _answer(answers: Answers, exc: KernelError) -> Outcome:
    for errnos, (supported, reason) in answers.items():
        if exc.errno == errnos or (isinstance(errnos, tuple) and exc.errno in errnos):
            return supported, reason.replace("{errno}", describe_errno(exc.errno))
    return _failure(exc)


def _try(action: Callable[[], object], answers: Answers, made: Outcome) -> Outcome:
    """``made`` when ``action()`` succeeds; when the kernel refuses, ``answers`` for its errno,
    _failure for anything else."""
    try:
        action()
    except KernelError as exc:
        return _answer(answers, exc)
    return made


def _link_probe(attach: Callable[[FD], FD], answers: Answers, made: Outcome,
                attach_type: AttachType | None = None,
                prog_types: tuple[ProgType, ...] = (ProgType.KPROBE,)) -> Outcome:
    """Load ``r0 = 0; exit`` (of the first of ``prog_types`` the kernel takes, expecting
    ``attach_type``), then try ``attach(prog)``; a link it makes is closed at once. ``made``
    when the attach succeeds, ``answers`` for its errno, _failure for anything else."""
    kwargs: dict[str, Any] = {} if attach_type is None else {"expected_attach_type": int(attach_type)}
    with _closing() as stack:
        for i, prog_type in enumerate(prog_types):
            try:
                prog = _keep(stack, _load(prog_type, **kwargs))
                break
            except KernelError as exc:
                if i == len(prog_types) - 1:
                    return _failure(exc)
        return _try(lambda: attach(prog).close(), answers, made)


# ------------------------------------------------------------------------- BTF blobs
# (the BTF-kind probes and their blobs are in _btf_kinds.py: loading an object asks them)
def local_storage_btf() -> bytes:
    """int [1]; struct bpf_spin_lock { int val; } [2]; struct val { int cnt; struct
    bpf_spin_lock l; } [3]: what sk/inode/task/cgrp storage maps need as key/value types."""
    b = BTFBuilder()
    i = b.int_()
    lock = b.add(Struct(0, "bpf_spin_lock", 4, [Member("val", i, 0)]))
    b.add(Struct(0, "val", 8, [Member("cnt", i, 0), Member("l", lock, 32)]))
    return b.encode()


for _name, (_ver, _kind, _what) in _BTF_KINDS.items():
    REGISTRY[_name] = Probe(_name, "btf", _ver, _what, f"BPF_BTF_LOAD of a hand-made blob with {_kind}",
                            _btf_probe(_name, _kind))


# ---------------------------------------------------------------------------- syscall
@_register("bpf_syscall", "syscall", "3.18", "the bpf(2) system call, usable by this process",
           "BPF_MAP_CREATE of a one-element array")
def probe_bpf_syscall() -> Outcome:
    return _try(lambda: _bpf.map_create(int(MapType.ARRAY), 4, 4, 1).close(),
                {errno.ENOSYS: (False, "bpf() is ENOSYS: the kernel was built without CONFIG_BPF_SYSCALL")},
                (True, "BPF_MAP_CREATE of an array map succeeded"))


@_register("mmapable_maps", "syscall", "5.5", "BPF_F_MMAPABLE array maps (mmap a map's values)",
           "BPF_MAP_CREATE of an array with BPF_F_MMAPABLE, then mmap it")
def probe_mmapable_maps() -> Outcome:
    import mmap

    try:
        with (_bpf.map_create(int(MapType.ARRAY), 4, 8, 1, flags=int(MapFlag.MMAPABLE)) as fd,
              mmap.mmap(fd.raw, mmap.PAGESIZE, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)):
            pass
    except KernelError as exc:
        if exc.errno == errno.EINVAL:
            return False, f"BPF_MAP_CREATE with BPF_F_MMAPABLE gave {describe_errno(exc.errno)}: flag unknown"
        return _failure(exc)
    except OSError as exc:
        if exc.errno in TRANSIENT_ERRNOS:
            return inconclusive(f"the map was created but mmap failed: {describe_errno(exc.errno or 0)}")
        return False, f"the map was created but mmap failed: {describe_errno(exc.errno or 0)}"
    return True, "created and mmapped an array map with BPF_F_MMAPABLE"


@_register("ringbuf", "syscall", "5.8", "BPF ring buffer maps (BPF_MAP_TYPE_RINGBUF)",
           "BPF_MAP_CREATE of a one-page ring buffer")
def probe_ringbuf() -> Outcome:
    return _map_type_outcome(MapType.RINGBUF)


@_register("perf_event_array", "syscall", "4.3", "perf event array maps (bpf_perf_event_output)",
           "BPF_MAP_CREATE of a BPF_MAP_TYPE_PERF_EVENT_ARRAY")
def probe_perf_event_array() -> Outcome:
    return _map_type_outcome(MapType.PERF_EVENT_ARRAY)


@_register("bpf_cookie", "syscall", "5.15", "bpf_get_attach_cookie(): a u64 set at attach time",
           "load a kprobe program calling helper bpf_get_attach_cookie (174)")
def probe_bpf_cookie() -> Outcome:
    insns = asm.call(FuncId.get_attach_cookie) + RET0
    for prog_type in (ProgType.KPROBE, ProgType.TRACEPOINT):
        try:
            _load_logged(prog_type, insns).close()
        except VerifierError as exc:
            if exc.errno == errno.EINVAL and ("unknown func" in exc.log or "invalid func" in exc.log):
                return False, f"the verifier does not know helper 174: {exc.tail(1).strip()}"
            if exc.errno == errno.EINVAL and prog_type == ProgType.KPROBE and not exc.log:
                continue  # no kprobe program type here: ask with a tracepoint program
            return _failure(exc)
        except KernelError as exc:
            return _failure(exc)
        return True, f"a {prog_type.kernel_name} program calling bpf_get_attach_cookie loaded"
    return False, "neither kprobe nor tracepoint programs load here"


@_register("callbacks", "syscall", "5.13", "callbacks: a sub-program's address in a register (BPF_PSEUDO_FUNC), for bpf_loop() and friends",
           "load 'r1 = &callback; r0 = 0; exit' without BTF and read the verifier's complaint")
def probe_callbacks() -> Outcome:
    # 5.13 (69c087ba6225, bpf_for_each_map_elem) taught the verifier ld_imm64 with
    # src_reg BPF_PSEUDO_FUNC. Without func_info a kernel that knows it complains
    # "missing btf func_info"; an older one stops earlier at "unrecognized bpf_ld_imm64 insn".
    insns = asm.ld_imm64(1, 3, src=asm.PSEUDO_FUNC) + RET0 + RET0
    try:
        _load_logged(ProgType.SOCKET_FILTER, insns).close()
    except VerifierError as exc:
        if "missing btf func_info" in exc.log:
            return True, "the verifier asked for BTF func_info for the callback: it knows BPF_PSEUDO_FUNC"
        if "unrecognized bpf_ld_imm64" in exc.log:
            return False, "the verifier does not know BPF_PSEUDO_FUNC ('unrecognized bpf_ld_imm64 insn')"
        return _failure(exc)
    except KernelError as exc:
        return _failure(exc)
    return True, "a program taking a callback's address loaded"


@_register("log_true_size", "syscall", "6.4", "log_true_size: the kernel reports the verifier log size it needed",
           "load a program the verifier rejects, with a log, and read back log_true_size")
def probe_log_true_size() -> Outcome:
    try:
        # ``exit`` without setting r0: the verifier rejects it with "R0 !read_ok" and a log.
        _bpf.prog_load(int(ProgType.SOCKET_FILTER), asm.exit_(), log_level=1, log_size=4096).close()
    except _bpf._LoadLogError as exc:
        if exc.true_size > 0:
            return True, f"the rejected load reported log_true_size={exc.true_size}"
        if exc.errno in TRANSIENT_ERRNOS:
            return inconclusive(f"the load failed with {describe_errno(exc.errno)} before verification")
        return False, f"the rejected load ({describe_errno(exc.errno)}) left log_true_size at 0"
    except KernelError as exc:
        return _failure(exc)
    return False, "the verifier accepted a program without r0 set; cannot tell"


def _vmlinux_func_ids(names: tuple[str, ...], until: str = "") -> dict[str, int]:
    """{name: BTF id} of those of ``names`` that are a BTF_KIND_FUNC in vmlinux BTF (the scan
    stops early once ``until`` is found).

    A minimal scan of /sys/kernel/btf/vmlinux (only the record sizes are decoded), so the
    probe does not need the full BTF parser.
    """
    data = _sysfs_btf.vmlinux_btf()
    _, _, _, hdr_len, type_off, type_len, str_off, str_len = struct.unpack_from("<HBBIIIII", data)
    strs = data[hdr_len + str_off : hdr_len + str_off + str_len]
    wanted = {}
    for name in names:
        at = strs.find(b"\0" + name.encode() + b"\0")
        if at >= 0:
            wanted[at + 1] = name
    extra = {Kind.INT: 4, Kind.ARRAY: 12, Kind.VAR: 4, Kind.DECL_TAG: 4}
    per = {Kind.STRUCT: 12, Kind.UNION: 12, Kind.ENUM: 8, Kind.FUNC_PROTO: 8, Kind.DATASEC: 12, Kind.ENUM64: 12}
    pos, end, tid = hdr_len + type_off, hdr_len + type_off + type_len, 1
    found: dict[str, int] = {}
    unpack = struct.unpack_from
    func = int(Kind.FUNC)
    while pos < end and wanted:
        name_off, info = unpack("<II", data, pos)
        kind = (info >> 24) & 0x1F
        if kind == func and name_off in wanted:
            found[wanted.pop(name_off)] = tid
            if until in found:
                break
        pos += 12 + extra.get(kind, 0) + per.get(kind, 0) * (info & 0xFFFF)
        tid += 1
    return found


def _vmlinux_func_id(names: tuple[str, ...]) -> tuple[str, int]:
    """(name, BTF id) of the first of ``names`` that is a BTF_KIND_FUNC in vmlinux BTF."""
    found = _vmlinux_func_ids(names, until=names[0])
    for name in names:
        if name in found:
            return name, found[name]
    raise NotFoundError(f"none of {', '.join(names)} is a function in vmlinux BTF")


def _refused_before_verification(exc: VerifierError, what: str, refused: str) -> Outcome | None:
    """The outcome of a load of ``what`` that the kernel refused before verifying it (EPERM
    with an empty verifier log: no privilege, or a policy refusing ``refused``) or that failed
    for a passing reason; None for a verifier rejection the caller reads."""
    if exc.errno == errno.EPERM and not exc.log.strip():
        return False, (f"BPF_PROG_LOAD of {what}: {describe_errno(exc.errno)} with an empty verifier log: "
                       f"the kernel refuses {refused} before verification")
    if exc.errno in TRANSIENT_ERRNOS:
        return _failure(exc)
    return None


# bpf_fentry_test1 exists for exactly this (net/bpf/test_run.c); the others are fallbacks.
FENTRY_TARGETS = ("bpf_fentry_test1", "do_nanosleep", "vfs_read")


@_register("tracing_programs", "syscall", "5.5", "fentry/fexit programs (BPF trampolines, BPF_PROG_TYPE_TRACING)",
           "load an fentry program on a function found in vmlinux BTF")
def probe_tracing_programs() -> Outcome:
    # First the cheap question libbpf asks: does the type exist at all? (attach_btf_id 1 is
    # never a function, so a kernel that knows fentry says so in the log with EINVAL.)
    kind: dict[str, Any] = dict(expected_attach_type=int(AttachType.TRACE_FENTRY))
    try:
        _load_logged(ProgType.TRACING, attach_btf_id=1, **kind).close()
    except VerifierError as exc:
        refused = _refused_before_verification(exc, "an fentry program", "BPF trampolines")
        if refused is not None:
            return refused
        if exc.errno != errno.EINVAL or "is not a function" not in exc.log:
            return False, f"BPF_PROG_LOAD of a tracing program: {describe_errno(exc.errno)}: {exc.tail(1).strip()}"
    except KernelError as exc:
        return _failure(exc)
    try:
        target, btf_id = _vmlinux_func_id(FENTRY_TARGETS)
    except (OSError, BPFKitError) as exc:
        return False, f"no vmlinux BTF function to attach to: {exc}"
    try:
        _load_logged(ProgType.TRACING, attach_btf_id=btf_id, **kind).close()
    except VerifierError as exc:
        if exc.errno in TRANSIENT_ERRNOS:
            return _failure(exc)
        why = exc.tail(1).strip() or "empty verifier log: refused before verification"
        return False, f"fentry program on {target} rejected: {describe_errno(exc.errno)}: {why}"
    except KernelError as exc:
        return _failure(exc)
    return True, f"loaded an fentry program on {target} (BTF id {btf_id})"


# -------------------------------------------------------------------- iterator targets
# The targets of SEC("iter/TARGET") programs (each registered with bpf_iter_reg_target and
# declared in BTF as the function bpf_iter_<target>) and the release that added each.
ITER_TARGET_VERSIONS = {
    "task": "5.8", "task_file": "5.8", "bpf_map": "5.8", "netlink": "5.8", "ipv6_route": "5.8",
    "bpf_map_elem": "5.9", "bpf_sk_storage_map": "5.9", "bpf_prog": "5.9", "tcp": "5.9", "udp": "5.9",
    "sockmap": "5.10", "task_vma": "5.12", "unix": "5.17", "bpf_link": "5.19", "ksym": "6.0", "cgroup": "6.1",
    "kmem_cache": "6.13", "dmabuf": "6.16",
}
ITER_GROUP = "iterator targets"
# Not in REGISTRY (features.names(), the recorded kernel matrix): features.probe("iter_task")
# finds them through find(); `bpfkit features` lists them after the others.
ITERATORS: dict[str, Probe] = {}
# the vmlinux BTF the ids are from and {bpf_iter_<target>: BTF id}: one scan for every target
_iter_ids: tuple[object, dict[str, int]] = (None, {})


def _iter_target_id(target: str) -> int:
    """The vmlinux BTF id of bpf_iter_<target>, 0 if there is none (OSError or BPFKitError
    without vmlinux BTF). Every target's id comes from one scan, kept while the blob is."""
    global _iter_ids
    with _vmlinux_lock:
        data = _sysfs_btf.vmlinux_btf()
        if _iter_ids[0] is not data:
            _iter_ids = (data, _vmlinux_func_ids(tuple(f"bpf_iter_{t}" for t in ITER_TARGET_VERSIONS)))
        return _iter_ids[1].get(f"bpf_iter_{target}", 0)


def _iter_probe(target: str) -> Callable[[], Outcome]:
    what = f"a minimal iter/{target} program"

    def run() -> Outcome:
        try:
            btf_id = _iter_target_id(target)
        except (OSError, BPFKitError) as exc:
            return False, f"no vmlinux BTF to find bpf_iter_{target} in: {exc}"
        if not btf_id:
            return False, (f"vmlinux BTF has no function bpf_iter_{target}: no {target} iterator in this kernel "
                           f"(Linux {ITER_TARGET_VERSIONS[target]}+, and built with what it walks)")
        try:
            _load_logged(ProgType.TRACING, attach_btf_id=btf_id, expected_attach_type=int(AttachType.TRACE_ITER)).close()
        except VerifierError as exc:
            # Seen on a 6.18 host that loads iter/task: iter/bpf_map_elem refused before verification.
            refused = _refused_before_verification(exc, what, "it")
            if refused is not None:
                return refused
            return False, f"{what} was rejected: {describe_errno(exc.errno)}: {exc.tail(1).strip() or 'empty verifier log'}"
        except KernelError as exc:
            return _failure(exc)
        return True, f"{what} loaded (attach_btf_id {btf_id}: bpf_iter_{target})"

    return run


for _target, _ver in ITER_TARGET_VERSIONS.items():
    ITERATORS[f"iter_{_target}"] = Probe(
        f"iter_{_target}", ITER_GROUP, _ver, f"iterator programs of target {_target} (SEC(\"iter/{_target}\"))",
        f"BPF_PROG_LOAD of 'r0 = 0; exit' as iter/{_target} (attach_btf_id of bpf_iter_{_target})",
        _iter_probe(_target))


def find(name: str) -> Probe | None:
    """The probe called ``name``: a REGISTRY feature or an iterator target (``iter_task``)."""
    return REGISTRY.get(name) or ITERATORS.get(name)


# ------------------------------------------------------------------------------ links
@_register("bpf_link", "links", "5.7", "bpf_link: attachments owned by a file descriptor",
           "BPF_LINK_CREATE (cgroup inet ingress) with invalid fds: EBADF = known, EINVAL = not")
def probe_bpf_link() -> Outcome:
    # 5.7: af6eea57437a (cgroup bpf_link) and 70ed506c3bbc (raw_tp/tracing links).
    return _try(lambda: _bpf.link_create(0xFFFFFFFF, 0xFFFFFFFF, int(AttachType.CGROUP_INET_INGRESS)).close(),
                {errno.EBADF: (True, "BPF_LINK_CREATE with invalid fds gave EBADF: the command exists"),
                 errno.EINVAL: (False, "BPF_LINK_CREATE gave EINVAL: the kernel has no such command")},
                (False, "BPF_LINK_CREATE accepted invalid fds; cannot tell"))


@_register("perf_link", "links", "5.15", "BPF_LINK_TYPE_PERF_EVENT: programs on perf events through bpf_link",
           "BPF_LINK_CREATE attach_type BPF_PERF_EVENT on perf fd -1: EBADF = known, EINVAL = not")
def probe_perf_link() -> Outcome:
    # 5.15: b89fbfbb854c ("bpf: Implement minimal BPF perf link").
    return _link_probe(
        lambda prog: _bpf.link_create(prog, 0xFFFFFFFF, int(AttachType.PERF_EVENT)),
        {errno.EBADF: (True, "BPF_LINK_CREATE(BPF_PERF_EVENT) on an invalid perf fd gave EBADF: the kernel looked for the perf event"),
         errno.EINVAL: (False, "BPF_LINK_CREATE(BPF_PERF_EVENT) gave EINVAL: no perf event links (SET_BPF ioctl only)")},
        (False, "BPF_LINK_CREATE accepted perf fd -1; cannot tell"),
        prog_types=(ProgType.KPROBE, ProgType.TRACEPOINT))


def _raw_tp_open(prog: FD) -> tuple[FD, str]:
    for name in RAW_TP_TARGETS:
        try:
            return _bpf.raw_tracepoint_open(name, prog), name
        except KernelError as exc:
            if exc.errno != errno.ENOENT:
                raise
    raise NotFoundError(f"none of the raw tracepoints {', '.join(RAW_TP_TARGETS)} exists")


# Tracepoints that fire rarely; the probe's program returns 0 and is detached at once.
RAW_TP_TARGETS = ("bpf_test_finish", "task_rename", "sched_process_exec")


@_register("raw_tracepoint_link", "links", "5.7", "BPF_RAW_TRACEPOINT_OPEN returns a bpf_link",
           "attach a raw_tracepoint program and check the fd is an anon_inode:bpf_link")
def probe_raw_tracepoint_link() -> Outcome:
    with _closing() as stack:
        try:
            prog = _keep(stack, _load(ProgType.RAW_TRACEPOINT))
            fd, name = _raw_tp_open(prog)
        except (KernelError, NotFoundError) as exc:
            return _failure(exc)
        with fd:
            kind = _bpf.obj_kind(fd) if hasattr(_bpf, "obj_kind") else ""
            target = os.readlink(f"/proc/self/fd/{fd.raw}")
        if kind == "link" or target == "anon_inode:bpf_link":
            return True, f"BPF_RAW_TRACEPOINT_OPEN on {name} returned a bpf_link"
        return False, f"BPF_RAW_TRACEPOINT_OPEN on {name} returned {target}, not a bpf_link (before 5.7)"


@_register("kprobe_multi", "links", "5.18", "kprobe_multi links: one program on many kernel functions (fprobe)",
           "BPF_LINK_CREATE(BPF_TRACE_KPROBE_MULTI) on vprintk; EOPNOTSUPP = no CONFIG_FPROBE")
def probe_kprobe_multi() -> Outcome:
    # 5.18: 0dcac2725406 ("bpf: Add multi kprobe link"); without CONFIG_FPROBE the link
    # stub returns EOPNOTSUPP.
    no_kprobes = "" if os.path.exists("/sys/bus/event_source/devices/kprobe") else " (and CONFIG_KPROBES)"
    return _kprobe_multi_probe(AttachType.TRACE_KPROBE_MULTI, "kprobe_multi", "kprobe_multi", "kprobe_multi links",
                               "kprobe_multi", "lacks CONFIG_FPROBE" + no_kprobes)


def _kprobe_multi_probe(attach_type: AttachType, name: str, type_name: str, kind: str, known: str,
                        lacks: str) -> Outcome:
    """A kprobe_multi link of ``attach_type`` on vprintk: made, or ESRCH (the kernel knows the
    link but not vprintk), EINVAL (unknown), EOPNOTSUPP (no CONFIG_FPROBE: the link's stub)."""
    return _link_probe(
        lambda prog: _bpf.link_create_kprobe_multi(prog, syms=["vprintk"], attach_type=attach_type),
        {(errno.EOPNOTSUPP, ENOTSUPP): (False, f"BPF_LINK_CREATE({name}) gave {{errno}}: the kernel {lacks}"),
         errno.EINVAL: (False, f"BPF_LINK_CREATE({type_name}) gave EINVAL: the kernel has no {kind}"),
         errno.ESRCH: (True, f"BPF_LINK_CREATE({name}) gave ESRCH: it knows {known} but not vprintk")},
        (True, f"attached (and detached) a {name} link on vprintk"),
        attach_type)


@_register("uprobe_multi", "links", "6.6", "uprobe_multi links: one program on many offsets of a binary",
           "BPF_LINK_CREATE(BPF_TRACE_UPROBE_MULTI) on path '/': EBADF = known, EINVAL = not")
def probe_uprobe_multi() -> Outcome:
    # 6.6: 89ae89f53d20 ("bpf: Add multi uprobe link")
    return _uprobe_multi_probe(AttachType.TRACE_UPROBE_MULTI, "uprobe_multi", "uprobe_multi", "uprobe_multi links")


def _uprobe_multi_probe(attach_type: AttachType, name: str, type_name: str, kind: str) -> Outcome:
    """A uprobe_multi link of ``attach_type`` on path '/': a path that is not a regular file
    is EBADF once the kernel has parsed the request; EINVAL/E2BIG when it does not know it."""
    return _link_probe(
        lambda prog: _bpf.link_create_uprobe_multi(prog, "/", [0], attach_type=attach_type),
        {errno.EBADF: (True, f"BPF_LINK_CREATE({name}) on '/' gave EBADF: the kernel parsed the request"),
         (errno.EINVAL, errno.E2BIG): (False, f"BPF_LINK_CREATE({type_name}) gave {{errno}}: no {kind}"),
         (errno.EOPNOTSUPP, ENOTSUPP): (False, f"BPF_LINK_CREATE({name}) gave {{errno}}: no CONFIG_UPROBES")},
        (False, f"BPF_LINK_CREATE({name}) accepted '/'; cannot tell"),
        attach_type)


@_register("kprobe_session", "links", "6.10",
           "kprobe sessions: one program on entry and return of kernel functions (BPF_TRACE_KPROBE_SESSION)",
           "BPF_LINK_CREATE(BPF_TRACE_KPROBE_SESSION) on vprintk; EINVAL = unknown, EOPNOTSUPP = no CONFIG_FPROBE")
def probe_kprobe_session() -> Outcome:
    # 6.10 (libbpf's UAPI sync of May 2024): link_create() sends BPF_TRACE_KPROBE_SESSION to
    # the kprobe_multi attach; an older kernel's KPROBE case matches no attach type: EINVAL.
    return _kprobe_multi_probe(AttachType.TRACE_KPROBE_SESSION, "kprobe session", "BPF_TRACE_KPROBE_SESSION",
                               "kprobe sessions", "sessions", "knows sessions but lacks CONFIG_FPROBE")


@_register("uprobe_session", "links", "6.13",
           "uprobe sessions: one program on entry and return of user functions (BPF_TRACE_UPROBE_SESSION)",
           "BPF_LINK_CREATE(BPF_TRACE_UPROBE_SESSION) on path '/': EBADF = known, EINVAL = not")
def probe_uprobe_session() -> Outcome:
    # 6.13 (libbpf's UAPI sync of Nov 2024): the uprobe_multi attach, reached only for a known
    # attach type, fails on a path that is not a regular file with EBADF.
    return _uprobe_multi_probe(AttachType.TRACE_UPROBE_SESSION, "uprobe session", "BPF_TRACE_UPROBE_SESSION",
                               "uprobe sessions")


def _cmd_probe(cmd: Cmd, what: str, fds_at: tuple[int, ...]) -> Outcome:
    """A command given invalid fds: EBADF = known (it went looking for the fd), EINVAL = not."""
    attr = _bpf.new_attr()
    for offset in fds_at:
        _bpf.set_attr_u32(attr, offset, 0xFFFFFFFF)
    return _try(lambda: _bpf.bpf(cmd, attr),
                {errno.EBADF: (True, f"{cmd.c_name} with invalid fds gave EBADF: the kernel knows {what}"),
                 errno.EINVAL: (False, f"{cmd.c_name} gave EINVAL: the kernel has no such command")},
                (False, f"{cmd.c_name} accepted invalid fds; cannot tell"))


@_register("prog_stream_read", "syscall", "6.17", "BPF streams: read a program's stdout/stderr stream (BPF_PROG_STREAM_READ_BY_FD)",
           "BPF_PROG_STREAM_READ_BY_FD with prog fd -1: EBADF = known, EINVAL = not")
def probe_prog_stream_read() -> Outcome:
    # prog_stream_read: stream_buf u64, stream_buf_len u32, stream_id u32, prog_fd u32 (offset 16).
    return _cmd_probe(Cmd.PROG_STREAM_READ_BY_FD, "BPF streams", (16,))


@_register("prog_assoc_struct_ops", "syscall", "7.0", "BPF_PROG_ASSOC_STRUCT_OPS: associate a program with a struct_ops map",
           "BPF_PROG_ASSOC_STRUCT_OPS with map and prog fd -1: EBADF = known, EINVAL = not")
def probe_prog_assoc_struct_ops() -> Outcome:
    # prog_assoc_struct_ops: map_fd u32 (offset 0), prog_fd u32 (4), flags u32.
    return _cmd_probe(Cmd.PROG_ASSOC_STRUCT_OPS, "struct_ops association", (0, 4))


@_register("ringbuf_overwrite", "syscall", "6.19", "ring buffers that overwrite their oldest records when full (BPF_F_RB_OVERWRITE)",
           "BPF_MAP_CREATE of a one-page ring buffer with BPF_F_RB_OVERWRITE")
def probe_ringbuf_overwrite() -> Outcome:
    import mmap

    return _try(lambda: _bpf.map_create(int(MapType.RINGBUF), 0, 0, mmap.PAGESIZE, flags=int(MapFlag.RB_OVERWRITE)).close(),
                {errno.EINVAL: (False, "BPF_MAP_CREATE(ringbuf, BPF_F_RB_OVERWRITE) gave EINVAL: flag unknown")},
                (True, "created a ring buffer with BPF_F_RB_OVERWRITE"))


BPF_F_CPU = 8  # map lookup/update flag (7.0): the CPU is in the flags' upper 32 bits


@_register("percpu_cpu_flag", "syscall", "7.0", "BPF_F_CPU / BPF_F_ALL_CPUS: per-CPU map elements of one CPU or all CPUs at once",
           "BPF_MAP_LOOKUP_ELEM of a per-CPU array with BPF_F_CPU (CPU 0): EINVAL = flag unknown")
def probe_percpu_cpu_flag() -> Outcome:
    from .._kernel import map_elems
    from .._kernel.cpus import possible_cpus

    def lookup() -> None:
        with _bpf.map_create(int(MapType.PERCPU_ARRAY), 4, 8, 1) as fd:
            map_elems.lookup(fd, bytes(4), 8 * max(len(possible_cpus()), 1), BPF_F_CPU)  # key 0

    return _try(lookup, {errno.EINVAL: (False, "BPF_MAP_LOOKUP_ELEM with BPF_F_CPU gave EINVAL: flag unknown")},
                (True, "looked up CPU 0's element of a per-CPU array with BPF_F_CPU"))


@_register("uprobe_multi_path_fd", "links", "7.2", "uprobe_multi links naming the binary by an open fd (BPF_F_UPROBE_MULTI_PATH_FD)",
           "BPF_LINK_CREATE(uprobe_multi) with BPF_F_UPROBE_MULTI_PATH_FD and path_fd -1: EBADF = known, EINVAL = not")
def probe_uprobe_multi_path_fd() -> Outcome:
    offsets = _bpf.U64Array([0])

    def fill(attr: Any) -> Any:
        attr.link_create.uprobe_multi.offsets = offsets.address
        attr.link_create.uprobe_multi.cnt = len(offsets)
        attr.link_create.uprobe_multi.flags = 2  # BPF_F_UPROBE_MULTI_PATH_FD
        # link_create.uprobe_multi.path_fd: after path, offsets, ref_ctr_offsets, cookies,
        # cnt, flags and pid, i.e. 16 + 44 bytes into the attr.
        _bpf.set_attr_u32(attr, 60, 0xFFFFFFFF)
        return offsets

    return _link_probe(
        lambda prog: _bpf.link_create(prog, 0, int(AttachType.TRACE_UPROBE_MULTI), fill=fill),
        {errno.EBADF: (True, "uprobe_multi with BPF_F_UPROBE_MULTI_PATH_FD and path_fd -1 gave EBADF: the flag is known"),
         (errno.EINVAL, errno.E2BIG): (False, "uprobe_multi with BPF_F_UPROBE_MULTI_PATH_FD gave {errno}: flag unknown")},
        (False, "uprobe_multi accepted path_fd -1; cannot tell"),
        AttachType.TRACE_UPROBE_MULTI)


# --------------------------------------------------------------- kernel BTF: names, kfuncs
def _vmlinux() -> BTF:
    from .. import kernel_btf as _kbtf

    return _kbtf.vmlinux()


# The names the probes below look up in vmlinux BTF, with the kinds asked for: ENUM, ENUM64 and
# STRUCT are among the kinds the lazy parse's scan indexes, so those names are searched in that
# index (a sixth of vmlinux's types; 3.3 ms for the group, where a find(name) of any kind built
# the index of all 127k types' names, 7 ms); FUNC is not, so the kfunc names are searched in the
# index of every type's name (11.4 ms for the group, 13 ms one by one). The first probe of a
# group looks up every name of the group in one find_flavors_many; later ones read the answers.
_ENUM_KINDS = (Kind.ENUM, Kind.ENUM64)  # the kinds that have enumerators
_NAMED_QUESTIONS: dict[str, tuple[int, ...]] = {
    "bpf_attach_type": _ENUM_KINDS, "bpf_link_type": _ENUM_KINDS, "cgroup_bpf": (Kind.STRUCT,),
}
# the vmlinux BTF the answers are from (kernel.clear_cache() makes a new one) and the answers
_vmlinux_found: tuple[BTF | None, dict[str, list[Type]]] = (None, {})
_vmlinux_lock = _thread.allocate_lock()


def _vmlinux_types(name: str, group: dict[str, tuple[int, ...]]) -> list[Type]:
    """The vmlinux BTF types called ``name`` of the kinds ``group[name]`` gives it, in id order
    (what ``find(name, kind)`` of each kind gives; OSError or BPFKitError when there is no
    vmlinux BTF). ``group``'s names are looked up together on first use."""
    global _vmlinux_found
    with _vmlinux_lock:
        btf = _vmlinux()
        if _vmlinux_found[0] is not btf:
            _vmlinux_found = (btf, {})
        found = _vmlinux_found[1]
        if name not in found:
            from ..btf.types import Kind

            kinds = {Kind(k) for ks in group.values() for k in ks}
            for text, types in btf.find_flavors_many(group, own_only=False, kinds=kinds).items():
                # find_flavors_many also finds "name___flavor" spellings: only the name itself
                found[text] = [t for t in types if t.name == text and int(t.kind) in group[text]]
        return found[name]


def _btf_enum_probe(enum: str, value: str, what: str) -> Outcome:
    """Whether the kernel's own BTF declares ``value`` in ``enum``: the kernel knows the name
    (an attach or link type that needs a working target to try, e.g. BPF trampolines)."""
    try:
        found = _vmlinux_types(enum, _NAMED_QUESTIONS)
    except (OSError, BPFKitError) as exc:
        return False, f"no vmlinux BTF to read {enum} from: {exc}"
    names = {v.name for t in found for v in getattr(t, "values", ())}
    if not names:
        return False, f"vmlinux BTF has no enum {enum}"
    if value in names:
        return True, f"vmlinux BTF's enum {enum} has {value}: the kernel knows {what}"
    return False, f"vmlinux BTF's enum {enum} lacks {value}"


def _btf_member_probe(struct: str, member: str, what: str) -> Outcome:
    """Whether the kernel's own BTF has ``member`` in ``struct``: a field that came with the
    feature (where no attach can tell without a real target)."""
    try:
        found = _vmlinux_types(struct, _NAMED_QUESTIONS)
    except (OSError, BPFKitError) as exc:
        return False, f"no vmlinux BTF to read struct {struct} from: {exc}"
    if not found:
        return False, f"vmlinux BTF has no struct {struct}"
    if any(m.name == member for t in found for m in getattr(t, "members", ())):
        return True, f"vmlinux BTF's struct {struct} has {member}: the kernel has {what}"
    return False, f"vmlinux BTF's struct {struct} lacks {member}: no {what}"


@_register("fsession", "links", "7.0", "fsession: one fentry/fexit program on entry and return of a kernel function (BPF_TRACE_FSESSION)",
           "vmlinux BTF's enum bpf_attach_type names BPF_TRACE_FSESSION (attaching needs BPF trampolines)")
def probe_fsession() -> Outcome:
    return _btf_enum_probe("bpf_attach_type", "BPF_TRACE_FSESSION", "fsession programs")


@_register("tracing_multi", "links", "7.2", "tracing_multi links: one fentry/fexit/fsession program on many kernel functions",
           "vmlinux BTF's enum bpf_link_type names BPF_LINK_TYPE_TRACING_MULTI (attaching needs BPF trampolines)")
def probe_tracing_multi() -> Outcome:
    return _btf_enum_probe("bpf_link_type", "BPF_LINK_TYPE_TRACING_MULTI", "tracing_multi links")


def _attach_type_link_probe(prog_type: ProgType, attach_type: AttachType, version: str, known: int, known_why: str,
                            target: int = 0xFFFFFFFF, flags: int = 0, fill: Callable[[Any], Any] | None = None,
                            insns: bytes = RET0, what: str = "") -> Outcome:
    """Load ``r0 = 0; exit`` of ``prog_type`` (expecting ``attach_type``), then BPF_LINK_CREATE
    of it at ``target``: ``known`` (the kernel went on to look at the target) = supported,
    EINVAL = not. A kernel that does not know the program type (EINVAL or E2BIG at load) is a
    definite no as well, for these link kinds came with or after their program type."""
    name = what or attach_type.c_name
    try:
        prog = _load(prog_type, insns, expected_attach_type=int(attach_type))
    except KernelError as exc:
        if exc.errno in (errno.EINVAL, errno.E2BIG):
            return False, (f"BPF_PROG_LOAD of a {prog_type.kernel_name} program gave {errno_name(exc.errno)}: "
                           f"no such programs (Linux {version}+)")
        return _failure(exc)
    with prog:
        return _try(lambda: _bpf.link_create(prog, target, int(attach_type), flags, fill).close(),
                    {known: (True, f"BPF_LINK_CREATE({name}) gave {{errno}}: {known_why}"),
                     (errno.EINVAL, errno.E2BIG): (False, f"BPF_LINK_CREATE({name}) gave {{errno}}: needs Linux {version}+")},
                    (False, f"BPF_LINK_CREATE({name}) accepted an invalid target; cannot tell"))


@_register("cgroup_link", "links", "5.7", "cgroup links: cgroup programs through BPF_LINK_TYPE_CGROUP",
           "BPF_LINK_CREATE(BPF_CGROUP_INET_EGRESS) of a cgroup_skb program on fd -1: EBADF = known, EINVAL = not")
def probe_cgroup_link() -> Outcome:
    # 5.7: af6eea57437a ("bpf: Implement bpf_link-based cgroup BPF program attachment").
    return _attach_type_link_probe(ProgType.CGROUP_SKB, AttachType.CGROUP_INET_EGRESS, "5.7", errno.EBADF,
                                   "the kernel looked for the cgroup")


@_register("cgroup_mprog", "links", "6.16", "ordered cgroup programs: BPF_F_BEFORE/AFTER and expected_revision on cgroup hooks",
           "vmlinux BTF: struct cgroup_bpf has the per-hook 'revisions' that ordered attach keeps")
def probe_cgroup_mprog() -> Outcome:
    # 6.16: cgroup hooks joined bpf_mprog's relative placement, and struct cgroup_bpf got
    # revisions[] for expected_revision. Not an attach with BPF_F_AFTER at fd -1: Debian's
    # 6.12 answers that with EBADF (it looks for the cgroup) though it cannot order programs.
    return _btf_member_probe("cgroup_bpf", "revisions", "ordered cgroup attach (revisions per hook)")


@_register("netns_link", "links", "5.8", "network namespace links: flow_dissector programs through BPF_LINK_TYPE_NETNS",
           "BPF_LINK_CREATE(BPF_FLOW_DISSECTOR) on netns fd -1: EBADF = known, EINVAL = not (BPF_PROG_ATTACH only)")
def probe_netns_link() -> Outcome:
    # 5.8: 7f045a49fee0 ("bpf: Add link-based BPF program attachment to network namespace").
    return _attach_type_link_probe(ProgType.FLOW_DISSECTOR, AttachType.FLOW_DISSECTOR, "5.8", errno.EBADF,
                                   "the kernel looked for the network namespace")


@_register("sk_lookup_link", "links", "5.9", "sk_lookup programs (BPF_SK_LOOKUP) on a network namespace through a netns link",
           "BPF_LINK_CREATE(BPF_SK_LOOKUP) on netns fd -1: EBADF = known; loading sk_lookup gives EINVAL before 5.9")
def probe_sk_lookup_link() -> Outcome:
    # 5.9: e9ddbb7707ff ("bpf: Introduce SK_LOOKUP program type with a dedicated attach point"),
    # which has links only.
    return _attach_type_link_probe(ProgType.SK_LOOKUP, AttachType.SK_LOOKUP, "5.9", errno.EBADF,
                                   "the kernel looked for the network namespace", insns=asm.return_imm(1))


@_register("sockmap_link", "links", "6.10", "sockmap links: sk_msg/sk_skb verdict programs through a bpf_link",
           "BPF_LINK_CREATE(BPF_SK_MSG_VERDICT) on map fd -1: EBADF = known, EINVAL = not (BPF_PROG_ATTACH only)")
def probe_sockmap_link() -> Outcome:
    # 6.10: 699c23f02c65 ("bpf: Add bpf_link support for sk_msg and sk_skb progs").
    return _attach_type_link_probe(ProgType.SK_MSG, AttachType.SK_MSG_VERDICT, "6.10", errno.EBADF,
                                   "the kernel has sockmap links", insns=asm.return_imm(1))


@_register("netfilter_link", "links", "6.4", "netfilter links: netfilter programs as hook functions (BPF_LINK_TYPE_NETFILTER)",
           "BPF_LINK_CREATE(BPF_NETFILTER) for protocol family 0: EAFNOSUPPORT = known; no netfilter programs before 6.4")
def probe_netfilter_link() -> Outcome:
    # 6.4: 84601d6ee68a ("bpf: add bpf_link support for BPF_NETFILTER programs"). The family is
    # checked first (EAFNOSUPPORT); before 6.4 the program type is unknown (EINVAL at load), and
    # without CONFIG_NETFILTER_BPF_LINK the link's stub says EOPNOTSUPP.
    def fill(attr: Any) -> None:
        attr.link_create.netfilter.pf = 0
        attr.link_create.netfilter.hooknum = 0
        attr.link_create.netfilter.priority = 1

    outcome = _attach_type_link_probe(ProgType.NETFILTER, AttachType.NETFILTER, "6.4", errno.EAFNOSUPPORT,
                                      "the kernel checked the family", target=0, fill=fill)
    if not outcome[0] and "EOPNOTSUPP" in outcome[1]:
        return False, outcome[1] + " (CONFIG_NETFILTER_BPF_LINK)"
    return outcome


@_register("netkit_link", "links", "6.7", "netkit links: sched_cls programs on netkit devices (BPF_NETKIT_PRIMARY/PEER)",
           "BPF_LINK_CREATE(BPF_NETKIT_PRIMARY) on lo: ENXIO (not a netkit device) = known, EINVAL = not")
def probe_netkit_link() -> Outcome:
    # 6.7: 35dfaad7188c ("netkit, bpf: Add bpf programmable net device"). netkit_link_attach
    # looks the ifindex up and refuses a device that is not netkit with ENXIO; before 6.7, or
    # without CONFIG_NETKIT (its stub), the attach type is EINVAL. lo is ifindex 1 everywhere.
    return _link_probe(
        lambda prog: _bpf.link_create(prog, 1, int(AttachType.NETKIT_PRIMARY)),
        {errno.ENXIO: (True, "BPF_LINK_CREATE(BPF_NETKIT_PRIMARY) on lo gave ENXIO: the kernel has netkit"),
         errno.EINVAL: (False, "BPF_LINK_CREATE(BPF_NETKIT_PRIMARY) gave EINVAL: no netkit (CONFIG_NETKIT, Linux 6.7+)")},
        (False, "BPF_LINK_CREATE(BPF_NETKIT_PRIMARY) accepted lo; cannot tell"),
        prog_types=(ProgType.SCHED_CLS,))


def _kfunc_probe(*names: str, nargs: int | None = None) -> Outcome:
    """Whether vmlinux BTF has one of ``names`` as a function (kfuncs are BTF functions;
    ``nargs``: and its prototype takes that many arguments)."""
    try:
        btf = _vmlinux()
    except (OSError, BPFKitError) as exc:
        return False, f"no vmlinux BTF: {exc}"
    from ..btf.types import Func

    for name in names:
        for func in _vmlinux_types(name, _KFUNC_QUESTIONS):
            assert isinstance(func, Func)  # _KFUNC_QUESTIONS asks for BTF_KIND_FUNC only
            proto = btf.types[func.type]
            params = len(getattr(proto, "params", ()))
            if nargs is None or params == nargs:
                return True, f"vmlinux BTF has {name} ({params} argument{'s' if params != 1 else ''})"
            return False, f"vmlinux BTF has {name} taking {params} arguments, not {nargs}"
    return False, f"vmlinux BTF has no function {' or '.join(names)}"


# name, first release, what, how, the FUNCs that must all be there (each a tuple of the names
# it has had), and how many parameters their prototypes must take (None: any)
KFUNC_PROBES: tuple[tuple[str, str, str, str, tuple[tuple[str, ...], ...], int | None], ...] = (
    ("kfunc_rcu_read_lock", "6.2", "kfuncs bpf_rcu_read_lock/unlock",
     "look up the FUNC in vmlinux BTF", (("bpf_rcu_read_lock",),), None),
    ("kfunc_session", "6.10", "session kfuncs bpf_session_is_return and bpf_session_cookie",
     "look up both FUNCs in vmlinux BTF", (("bpf_session_cookie",), ("bpf_session_is_return",)), None),
    ("kfunc_session_ctx", "7.0", "session kfuncs take the program's context (bpf_session_cookie(void *ctx); (void) before)",
     "vmlinux BTF: bpf_session_cookie's prototype has one parameter", (("bpf_session_cookie",),), 1),
    ("kfunc_stream_vprintk", "6.17", "BPF streams kfunc bpf_stream_vprintk (bpf_stream_vprintk_impl until 7.x)",
     "look up bpf_stream_vprintk or bpf_stream_vprintk_impl in vmlinux BTF",
     (("bpf_stream_vprintk", "bpf_stream_vprintk_impl"),), None),
    ("kfunc_task_work", "6.18", "task work kfuncs bpf_task_work_schedule_signal/resume (_impl until 7.x)",
     "look up bpf_task_work_schedule_signal or its _impl form in vmlinux BTF",
     (("bpf_task_work_schedule_signal", "bpf_task_work_schedule_signal_impl"),), None),
)


def _kfuncs_probe(funcs: tuple[tuple[str, ...], ...], nargs: int | None) -> Callable[[], Outcome]:
    def run() -> Outcome:
        outcome: Outcome = (False, "no kfunc named")
        for names in funcs:
            outcome = _kfunc_probe(*names, nargs=nargs)
            if not outcome[0]:
                break
        return outcome

    return run


# every kfunc name the probes ask about, as BTF_KIND_FUNC (looked up together: _vmlinux_types)
_KFUNC_QUESTIONS: dict[str, tuple[int, ...]] = {
    name: (Kind.FUNC,) for probe in KFUNC_PROBES for names in probe[4] for name in names}

for _name, _min_version, _what, _how, _funcs, _nargs in KFUNC_PROBES:
    _register(_name, "kfuncs", _min_version, _what, _how)(_kfuncs_probe(_funcs, _nargs))


# ----------------------------------------------------------------------------- probes
def _sysfs_probe(read: Callable[[], str]) -> Outcome:
    """Supported, saying what ``read()`` found; NotSupportedError's reason when it is missing."""
    try:
        return True, read()
    except NotSupportedError as exc:
        return False, exc.reason
    except (BPFKitError, OSError) as exc:
        return _failure(exc)


def _pmu_probe(name: str) -> Outcome:
    from .._kernel import pmu

    def read() -> str:
        ptype = pmu.pmu_type(name)
        pmu.pmu_format(name, "retprobe")
        return f"{pmu.PMU_ROOT}/{name}/type is {ptype}, format/retprobe present"

    return _sysfs_probe(read)


@_register("kprobe_pmu", "probes", "4.17", "kprobes through perf_event_open on the kprobe PMU",
           "read /sys/bus/event_source/devices/kprobe/type and format/retprobe")
def probe_kprobe_pmu() -> Outcome:
    return _pmu_probe("kprobe")


@_register("uprobe_pmu", "probes", "4.17", "uprobes through perf_event_open on the uprobe PMU",
           "read /sys/bus/event_source/devices/uprobe/type and format/retprobe")
def probe_uprobe_pmu() -> Outcome:
    return _pmu_probe("uprobe")


@_register("uprobe_ref_ctr_pmu", "probes", "4.20", "USDT semaphores: ref_ctr_offset in the uprobe PMU",
           "read /sys/bus/event_source/devices/uprobe/format/ref_ctr_offset")
def probe_uprobe_ref_ctr_pmu() -> Outcome:
    from .._kernel import pmu

    def read() -> str:
        word, first, last = pmu.pmu_format("uprobe", "ref_ctr_offset")
        return f"uprobe PMU format/ref_ctr_offset is {word}:{first}-{last}"

    return _sysfs_probe(read)


@_register("hardware_pmu", "probes", "2.6.31", "hardware performance counters (a CPU PMU: cycles, instructions, cache misses)",
           "perf_event_open a PERF_TYPE_HARDWARE cycles counter for this process (user space only) and close it")
def probe_hardware_pmu() -> Outcome:
    from .._kernel import perf as _perf

    # The uapi numbers, not the PerfType/PerfHwId/PerfAttrFlag enums: making the perf enums
    # costs ~2 ms, which this one probe would add to `bpfkit features`.
    attr = _perf.new_attr()
    attr.type = 0  # PERF_TYPE_HARDWARE
    attr.config = 0  # PERF_COUNT_HW_CPU_CYCLES
    attr.flags = 1 | 1 << 5 | 1 << 6  # disabled, exclude_kernel, exclude_hv
    return _try(lambda: _perf.perf_event_open(attr, 0, -1, what="hardware cycles").close(),
                {(errno.ENOENT, errno.EOPNOTSUPP, errno.ENODEV): (
                    False, "perf_event_open(PERF_TYPE_HARDWARE, cycles) gave {errno}: "
                    "no hardware PMU (virtual machine?); software events (cpu-clock, ...) still work")},
                (True, "opened a PERF_TYPE_HARDWARE cycles counter"))


_event_counter = itertools.count()
PROBE_GROUP = "bpfkit_probe"


def _tracefs_probe(kind: str, definition: str) -> Outcome:
    """Write one probe definition to tracefs ``<kind>_events`` and remove it at once."""
    from .._kernel import tracefs

    try:
        root = tracefs.tracefs_root()
    except NotSupportedError as exc:
        return False, f"no tracefs: {exc.reason}"
    control = f"{kind}_events"
    if not os.path.exists(os.path.join(root, control)):
        config = "CONFIG_KPROBE_EVENTS (and CONFIG_KPROBES)" if kind == "kprobe" else "CONFIG_UPROBE_EVENTS"
        return False, f"{root}/{control} does not exist: the kernel lacks {config}"
    event = f"p{os.getpid()}_{next(_event_counter)}"
    try:
        tracefs.append_line(control, f"p:{PROBE_GROUP}/{event} {definition}\n")
    except OSError as exc:
        err = exc.errno or 0
        if err == errno.ENOENT and kind == "kprobe":
            return True, f"{control} parsed a test definition (its symbol was not found)"
        if err in TRANSIENT_ERRNOS:
            return inconclusive(f"writing a test probe to {root}/{control} failed: {describe_errno(err)}")
        return False, f"writing a test probe to {root}/{control} failed: {describe_errno(err)}"
    try:
        tracefs.append_line(control, f"-:{PROBE_GROUP}/{event}\n")
    except OSError as exc:
        return True, (f"created a test probe in {control} but removing {PROBE_GROUP}/{event} failed: "
                      f"{describe_errno(exc.errno or 0)}")
    return True, f"created and removed a test probe through {root}/{control}"


@_register("kprobe_events", "probes", "2.6.37", "kprobes created through tracefs kprobe_events",
           "write a test definition (p:bpfkit_probe/... vfs_read) to kprobe_events and remove it")
def probe_kprobe_events() -> Outcome:
    return _tracefs_probe("kprobe", "vfs_read")


@_register("uprobe_events", "probes", "3.5", "uprobes created through tracefs uprobe_events",
           "write a test definition (this Python binary at offset 0) to uprobe_events and remove it")
def probe_uprobe_events() -> Outcome:
    return _tracefs_probe("uprobe", f"{os.path.realpath(sys.executable)}:0x0")


# ---------------------------------------------------------------------- program types
PROG_TYPE_VERSIONS = {
    ProgType.SOCKET_FILTER: "3.19", ProgType.KPROBE: "4.1", ProgType.SCHED_CLS: "4.1", ProgType.SCHED_ACT: "4.1",
    ProgType.TRACEPOINT: "4.7", ProgType.XDP: "4.8", ProgType.PERF_EVENT: "4.9", ProgType.CGROUP_SKB: "4.10",
    ProgType.CGROUP_SOCK: "4.10", ProgType.LWT_IN: "4.10", ProgType.LWT_OUT: "4.10", ProgType.LWT_XMIT: "4.10",
    ProgType.SOCK_OPS: "4.13", ProgType.SK_SKB: "4.14", ProgType.CGROUP_DEVICE: "4.15", ProgType.SK_MSG: "4.17",
    ProgType.RAW_TRACEPOINT: "4.17", ProgType.CGROUP_SOCK_ADDR: "4.17", ProgType.LWT_SEG6LOCAL: "4.18",
    ProgType.LIRC_MODE2: "4.18", ProgType.SK_REUSEPORT: "4.19", ProgType.FLOW_DISSECTOR: "4.20",
    ProgType.CGROUP_SYSCTL: "5.2", ProgType.RAW_TRACEPOINT_WRITABLE: "5.2", ProgType.CGROUP_SOCKOPT: "5.3",
    ProgType.TRACING: "5.5", ProgType.STRUCT_OPS: "5.6", ProgType.EXT: "5.6", ProgType.LSM: "5.7",
    ProgType.SK_LOOKUP: "5.9", ProgType.SYSCALL: "5.14", ProgType.NETFILTER: "6.4",
}

# Program types the verifier checks for an expected attach type at load.
_EXPECTED_ATTACH = {
    ProgType.CGROUP_SOCK_ADDR: AttachType.CGROUP_INET4_CONNECT,
    ProgType.CGROUP_SOCKOPT: AttachType.CGROUP_GETSOCKOPT,
    ProgType.SK_LOOKUP: AttachType.SK_LOOKUP,
    ProgType.LIRC_MODE2: AttachType.LIRC_MODE2,
    ProgType.NETFILTER: AttachType.NETFILTER,
}
# Types that need a BTF attach target: loaded with attach_btf_id 1 (never valid), the
# rejection message proves the kernel knows the type (libbpf's probe_prog_load does the same).
BTF_TARGET_MESSAGES = {
    ProgType.TRACING: ("is not a function",),
    ProgType.LSM: ("is not a function",),
    ProgType.EXT: ("Cannot replace kernel functions", "can only be attached to another program annotated with BTF"),
}


def prog_load_kwargs(prog_type: ProgType) -> dict[str, Any]:
    """What a minimal program of ``prog_type`` needs beyond its instructions. Types that need
    a BTF target (tracing, LSM, freplace) get attach_btf_id 1, which no kernel accepts, so
    their load fails in a way that tells whether the type is known (EXT also needs an
    ``attach_prog_fd``, which the caller supplies)."""
    kwargs: dict[str, Any] = {}
    if prog_type in _EXPECTED_ATTACH:
        kwargs["expected_attach_type"] = int(_EXPECTED_ATTACH[prog_type])
    if prog_type == ProgType.SYSCALL:
        kwargs["prog_flags"] = BPF_F_SLEEPABLE
    if prog_type in BTF_TARGET_MESSAGES:
        kwargs["attach_btf_id"] = 1
        if prog_type == ProgType.TRACING:
            kwargs["expected_attach_type"] = int(AttachType.TRACE_FENTRY)
        elif prog_type == ProgType.LSM:
            kwargs["expected_attach_type"] = int(AttachType.LSM_MAC)
    return kwargs


def _prog_type_probe(prog_type: ProgType) -> Callable[[], Outcome]:
    c_name = prog_type.c_name

    def run() -> Outcome:
        kwargs = prog_load_kwargs(prog_type)
        with _closing() as stack:
            if prog_type in BTF_TARGET_MESSAGES:
                if prog_type == ProgType.EXT:
                    try:
                        kwargs["attach_prog_fd"] = _keep(stack, _load(ProgType.SOCKET_FILTER)).raw
                    except KernelError as exc:
                        return _failure(exc)
                try:
                    _load_logged(prog_type, **kwargs).close()
                except VerifierError as exc:
                    if exc.errno == errno.EINVAL and any(m in exc.log for m in BTF_TARGET_MESSAGES[prog_type]):
                        return True, f"{c_name} known: the verifier rejected attach_btf_id 1 with '{exc.tail(1).strip()}'"
                    if exc.errno == errno.EPERM and not exc.log.strip():
                        return False, (f"{c_name} load refused with {describe_errno(exc.errno)} and an empty "
                                       "verifier log (the kernel refuses it before verification)")
                    if exc.errno in TRANSIENT_ERRNOS:
                        return _failure(exc)
                    return False, f"{c_name} load gave {describe_errno(exc.errno)}" + (
                        f": {exc.tail(1).strip()}" if exc.log.strip() else "")
                except KernelError as exc:
                    return _failure(exc)
                return True, f"a {c_name} program loaded"
            try:
                _load(prog_type, **kwargs).close()
            except KernelError as exc:
                if prog_type == ProgType.STRUCT_OPS and exc.errno == ENOTSUPP:
                    return True, f"{c_name} known: load without a struct_ops target gave {describe_errno(ENOTSUPP)}"
                if exc.errno in (errno.EINVAL, errno.E2BIG, errno.EOPNOTSUPP):
                    return False, (f"BPF_PROG_LOAD of a minimal {c_name} program gave {describe_errno(exc.errno)}: "
                                   "type unknown or not built in")
                return _failure(exc)
        return True, f"a minimal {c_name} program loaded"

    return run


for _pt in ProgType:
    if _pt == ProgType.UNSPEC:
        continue
    REGISTRY[f"prog_type_{_pt.kernel_name}"] = Probe(
        f"prog_type_{_pt.kernel_name}", "program types", PROG_TYPE_VERSIONS.get(_pt, ""),
        f"program type {_pt.c_name}",
        "BPF_PROG_LOAD of 'r0 = 0; exit'" + (" with attach_btf_id 1 (libbpf's trick)" if _pt in BTF_TARGET_MESSAGES else ""),
        _prog_type_probe(_pt),
    )


# -------------------------------------------------------------------------- map types
MAP_TYPE_VERSIONS = {
    MapType.HASH: "3.19", MapType.ARRAY: "3.19", MapType.PROG_ARRAY: "4.2", MapType.PERF_EVENT_ARRAY: "4.3",
    MapType.PERCPU_HASH: "4.6", MapType.PERCPU_ARRAY: "4.6", MapType.STACK_TRACE: "4.6",
    MapType.CGROUP_ARRAY: "4.8", MapType.LRU_HASH: "4.10", MapType.LRU_PERCPU_HASH: "4.10",
    MapType.LPM_TRIE: "4.11", MapType.ARRAY_OF_MAPS: "4.12", MapType.HASH_OF_MAPS: "4.12",
    MapType.DEVMAP: "4.14", MapType.SOCKMAP: "4.14", MapType.CPUMAP: "4.15", MapType.XSKMAP: "4.18",
    MapType.SOCKHASH: "4.18", MapType.CGROUP_STORAGE: "4.19", MapType.REUSEPORT_SOCKARRAY: "4.19",
    MapType.PERCPU_CGROUP_STORAGE: "4.20", MapType.QUEUE: "4.20", MapType.STACK: "4.20",
    MapType.SK_STORAGE: "5.2", MapType.DEVMAP_HASH: "5.4", MapType.STRUCT_OPS: "5.6", MapType.RINGBUF: "5.8",
    MapType.INODE_STORAGE: "5.10", MapType.TASK_STORAGE: "5.11", MapType.BLOOM_FILTER: "5.16",
    MapType.USER_RINGBUF: "6.1", MapType.CGRP_STORAGE: "6.2", MapType.ARENA: "6.9",
    MapType.INSN_ARRAY: "6.19", MapType.RHASH: "7.2",
}
_STORAGE_TYPES = (MapType.SK_STORAGE, MapType.INODE_STORAGE, MapType.TASK_STORAGE, MapType.CGRP_STORAGE)


def map_create_args(map_type: MapType) -> dict[str, Any]:
    """The smallest valid BPF_MAP_CREATE arguments for ``map_type`` (no fds: see
    :func:`create_minimal_map`)."""
    import mmap

    args: dict[str, Any] = dict(key_size=4, value_size=4, max_entries=1, flags=0)
    if map_type == MapType.STACK_TRACE:
        args["value_size"] = 8
    elif map_type == MapType.LPM_TRIE:
        args.update(key_size=8, value_size=8, flags=int(MapFlag.NO_PREALLOC))
    elif map_type in (MapType.CGROUP_STORAGE, MapType.PERCPU_CGROUP_STORAGE):
        args.update(key_size=16, value_size=8, max_entries=0)  # struct bpf_cgroup_storage_key
    elif map_type in (MapType.QUEUE, MapType.STACK) or map_type == MapType.BLOOM_FILTER:
        args["key_size"] = 0
    elif map_type in (MapType.RINGBUF, MapType.USER_RINGBUF):
        args.update(key_size=0, value_size=0, max_entries=mmap.PAGESIZE)
    elif map_type in _STORAGE_TYPES:
        args.update(value_size=8, max_entries=0, flags=int(MapFlag.NO_PREALLOC),
                    btf_key_type_id=1, btf_value_type_id=3)
    elif map_type == MapType.ARENA:
        args.update(key_size=0, value_size=0, max_entries=1, flags=int(MapFlag.MMAPABLE))
    elif map_type == MapType.INSN_ARRAY:
        args["value_size"] = 16  # struct bpf_insn_array_value (orig_off, xlated_off, jitted_off)
    elif map_type == MapType.RHASH:
        args["flags"] = int(MapFlag.NO_PREALLOC)  # required: elements come from bpf_mem_alloc
    elif map_type == MapType.STRUCT_OPS:
        args["btf_vmlinux_value_type_id"] = 1  # never a struct_ops type: ENOTSUPP if known
    return args


def create_minimal_map(map_type: MapType) -> FD:
    """Create the smallest valid map of ``map_type`` (with the inner map or BTF it needs)."""
    args = map_create_args(map_type)
    with contextlib.ExitStack() as stack:
        if map_type in (MapType.ARRAY_OF_MAPS, MapType.HASH_OF_MAPS):
            inner = _keep(stack, _bpf.map_create(int(MapType.ARRAY), 4, 4, 1))
            args["inner_map_fd"] = inner.raw
        if map_type in _STORAGE_TYPES:
            args["btf_fd"] = _keep(stack, _bpf.btf_load(local_storage_btf())).raw
        key, value, entries = args.pop("key_size"), args.pop("value_size"), args.pop("max_entries")
        return _bpf.map_create(int(map_type), key, value, entries, name="bpfkit_probe", **args)


def _map_type_outcome(map_type: MapType) -> Outcome:
    try:
        create_minimal_map(map_type).close()
    except KernelError as exc:
        if map_type == MapType.STRUCT_OPS and exc.errno == ENOTSUPP:
            return True, f"{map_type.c_name} known: BTF value type id 1 gave {describe_errno(ENOTSUPP)}"
        if exc.errno in (errno.EINVAL, errno.E2BIG, errno.EOPNOTSUPP):
            return False, f"BPF_MAP_CREATE of a minimal {map_type.c_name} gave {describe_errno(exc.errno)}: type unknown or not built in"
        return _failure(exc)
    return True, f"created a {map_type.c_name} map"


for _mt in MapType:
    if _mt == MapType.UNSPEC:
        continue
    REGISTRY[f"map_type_{_mt.kernel_name}"] = Probe(
        f"map_type_{_mt.kernel_name}", "map types", MAP_TYPE_VERSIONS.get(_mt, ""),
        f"map type {_mt.c_name}", "BPF_MAP_CREATE of the smallest valid map",
        (lambda mt: lambda: _map_type_outcome(mt))(_mt),
    )


# The kernel config options feature answers depend on (kprobes, FPROBE, LSM, LIRC, netkit, ...):
# recorded with each kernel's answers (scripts/record_features.py) to explain a "no".
CONFIG_RECORDED = re.compile(
    r"^(?:# )?(CONFIG_\w*(?:BPF|KPROBE|FPROBE|UPROBE|XDP|LWTUNNEL|LIRC|CGROUP|LSM|NET_CLS|NET_ACT|SCHED_CLASS_EXT|"
    r"DEBUG_INFO_BTF|STREAM_PARSER|NETFILTER|NETKIT|FTRACE|PERF_EVENTS|USER_EVENTS|FUNCTION_TRACER|SOCK|INET|"
    r"IPV6|HID|RC_CORE)\w*)(?:=(.*)| is not set)$")


def recorded_config(text: str) -> dict[str, str]:
    """{CONFIG_X: value} of the options in CONFIG_RECORDED; "n" for "# CONFIG_X is not set"."""
    found = {}
    for line in text.splitlines():
        m = CONFIG_RECORDED.match(line)
        if m:
            found[m[1]] = m[2] if m[2] is not None else "n"
    return found


def run(name: str) -> Outcome:
    """Run probe ``name`` now (uncached); never raises for kernel answers. An outcome that is
    not the kernel's definite answer is an :class:`Inconclusive` (see :func:`is_definite`)."""
    from .._kernel.rlimit import bump_memlock

    # Before 5.11 programs and maps are charged to RLIMIT_MEMLOCK: without this, probes that
    # run before any Map/Program was made see EPERM (seen on Debian 5.10).
    bump_memlock()
    probe = REGISTRY.get(name) or ITERATORS[name]
    try:
        return probe.run()
    except (BPFKitError, OSError) as exc:
        return _failure(exc)


# Probes that wait in the kernel (tracefs writes take the kernel's event_mutex, which every
# uprobe and kprobe registration on the machine takes too: 121 ms of sleep in one profile on
# a busy machine): features.probe_many runs them in a second thread while the others run. Not
# the vmlinux BTF probes: parsing holds the GIL, measured no faster in a thread.
BACKGROUND = frozenset({"kprobe_events", "uprobe_events"})
