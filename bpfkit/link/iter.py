# SPDX-License-Identifier: Apache-2.0
"""BPF iterators: programs that walk kernel objects and print into a seq_file.

An iterator program (``SEC("iter/task")``, BPF_PROG_TYPE_TRACING with BPF_TRACE_ITER, 5.8) is
loaded against ``bpf_iter_<target>`` in vmlinux BTF and runs once per object (task, map
element, ...), writing text or bytes with bpf_seq_printf()/bpf_seq_write(). Attaching makes a
bpf_link (BPF_LINK_CREATE, de4e05cac46d), parametrised for some targets: the map of
``bpf_map_elem`` (5.9), one task/process of ``task*`` (6.1), a cgroup walk (6.1). Each
BPF_ITER_CREATE on the link gives a fresh readable fd: reading it runs the program over the
objects. A link pinned in bpffs is itself a readable file (``cat /sys/fs/bpf/tasks``).

    with bpfkit.Collection.from_file("iters.bpf.o") as coll, link.iterate(coll.programs["dump_task"]) as it:
        text = it.read_all().decode()
"""

from __future__ import annotations

import dataclasses
import enum
import errno
import io
from typing import Any, BinaryIO

from .._kernel import bpf as _bpf
from .._kernel.consts import AttachType, LinkType, ProgType
from .._kernel.fd import FD
from .._protocols import ProgramArg
from ..errors import BPFKitError, KernelError, NotSupportedError, UsageError
from .base import Link, RawLink, _prog_fd
from .kind import AttachOptions, LinkKind, Section, SectionTarget

__all__ = ["IterLink", "IterInfo", "CgroupIterOrder", "iterate"]


class CgroupIterOrder(enum.IntEnum):
    """enum bpf_cgroup_iter_order: how a cgroup iterator walks from its start cgroup."""

    UNSPEC = 0
    SELF_ONLY = 1
    DESCENDANTS_PRE = 2
    DESCENDANTS_POST = 3
    ANCESTORS_UP = 4


@dataclasses.dataclass(frozen=True)
class IterInfo:
    """A BPF_LINK_TYPE_ITER link's details: the target (``task``, ``bpf_map_elem``; 5.10) and
    its parameters where it has some (map_id of map iterators; tid/pid of task iterators, 6.1;
    cgroup_id/order of cgroup iterators)."""

    target: str
    map_id: int = 0
    tid: int = 0
    pid: int = 0
    cgroup_id: int = 0
    order: int = 0


_MAP_TARGETS = ("bpf_map_elem", "bpf_sk_storage_map", "sockmap")
_TASK_TARGETS = ("task", "task_file", "task_vma")


def _decode_iter(raw: Any, name: str = "") -> IterInfo:
    it = raw.iter
    if name in _MAP_TARGETS:
        return IterInfo(name, map_id=int(it.map.map_id))
    if name in _TASK_TARGETS:
        return IterInfo(name, tid=int(it.task.tid), pid=int(it.task.pid))
    if name == "cgroup":
        return IterInfo(name, cgroup_id=int(it.cgroup.cgroup_id), order=int(it.cgroup.order))
    return IterInfo(name)


class IterLink(RawLink):
    """An iterator's bpf_link: :meth:`open` starts one pass over the objects as a file,
    :meth:`read_all` reads a whole pass; ``info().detail`` is IterInfo (target name: 5.10)."""

    kind = "iter"

    def open(self) -> BinaryIO:
        """A new pass of the iterator (BPF_ITER_CREATE) as a binary file; reading it runs the
        program. Close it (``with``) when done: it holds a reference on the link."""
        self._check_open("open")
        try:
            fd = _bpf.iter_create(self.fd)
        except BPFKitError as exc:
            raise exc.wrap("create an iterator from the iter link")
        return io.FileIO(fd.release(), "rb", closefd=True)

    def read_all(self) -> bytes:
        """Everything one pass of the iterator prints."""
        with self.open() as f:
            chunks: list[bytes] = []
            while True:
                try:
                    chunk = f.read(1 << 16)
                except OSError as exc:
                    # The program's output for one object must fit the seq_file buffer (E2BIG);
                    # EAGAIN: a pass restarted too often (the objects changed under it).
                    raise KernelError("read from the bpf iterator", exc.errno or errno.EIO) from None
                if not chunk:
                    return b"".join(chunks)
                chunks.append(chunk)





def _fd_of(obj: Any, what: str) -> int:
    if isinstance(obj, int):
        return obj
    fd = getattr(obj, "fd", obj)
    if isinstance(fd, FD):
        if fd.closed:
            raise UsageError(f"{what} is closed")
        return fd.raw
    if hasattr(obj, "fileno"):
        return int(obj.fileno())
    raise UsageError(f"not a {what}: {obj!r}")


def _target_of(prog: ProgramArg) -> str:
    target = getattr(prog, "attach_to", "") or getattr(getattr(prog, "spec", None), "attach_to", "")
    return target


def iterate(
    prog: ProgramArg,
    *,
    map: Any = None,
    tid: int = 0,
    pid: int = 0,
    pid_fd: int = 0,
    cgroup: Any = None,
    cgroup_id: int = 0,
    order: CgroupIterOrder | int = CgroupIterOrder.UNSPEC,
) -> IterLink:
    """Attach an iterator program (``iter/TARGET``) and return its link.

    ``map`` (a Map or fd) is the map a ``bpf_map_elem``/``bpf_sk_storage_map``/``sockmap``
    iterator walks (5.9). ``tid``, ``pid`` or ``pid_fd`` restrict a ``task``/``task_file``/
    ``task_vma`` iterator to one thread or process (6.1). ``cgroup`` (an fd or open directory
    file) or ``cgroup_id`` and ``order`` choose a ``cgroup`` iterator's walk (6.1).
    """
    ptype = getattr(prog, "type", None)
    target = _target_of(prog)
    what = f"iterator program {getattr(prog, 'name', '')!r}" + (f" ({target})" if target else "")
    if (ptype is not None and ptype != ProgType.TRACING) or getattr(prog, "attach_type", AttachType.TRACE_ITER) not in (
        AttachType.TRACE_ITER, None
    ):
        raise UsageError(f"attach {what}: not an iterator program (section iter/TARGET)")
    if target in _MAP_TARGETS and map is None:
        raise UsageError(f"attach {what}: a {target} iterator walks one map; pass map=")
    if map is not None and target and target not in _MAP_TARGETS:
        raise UsageError(f"attach {what}: map= is for {', '.join(_MAP_TARGETS)} iterators, not {target}")
    if (tid or pid or pid_fd) and target and target not in _TASK_TARGETS:
        raise UsageError(f"attach {what}: tid/pid/pid_fd are for {', '.join(_TASK_TARGETS)} iterators")
    if sum(bool(x) for x in (tid, pid, pid_fd)) > 1:
        raise UsageError(f"attach {what}: give one of tid, pid, pid_fd")
    cgroup_fd = _fd_of(cgroup, "cgroup") if cgroup is not None else 0
    info = _bpf.pack_iter_link_info(
        map_fd=_fd_of(map, "map") if map is not None else 0,
        tid=tid, pid=pid, pid_fd=pid_fd, cgroup_fd=cgroup_fd, cgroup_id=cgroup_id, order=int(order),
    )
    try:
        fd = _bpf.link_create_iter(_prog_fd(prog), info)
    except KernelError as exc:
        if exc.errno == errno.EINVAL and (tid or pid or pid_fd or cgroup_fd or cgroup_id or order):
            raise NotSupportedError(f"parameters of {what}", "BPF_LINK_CREATE refused the task/cgroup "
                                    "iterator parameters (EINVAL)", "6.1") from None
        if exc.errno == errno.EINVAL and map is not None:
            raise exc.wrap(f"attach {what}: the kernel refused the map (wrong map type or value size for "
                           "this program, or no map iterators: 5.9)") from None
        raise exc.wrap(f"attach {what}")
    except BPFKitError as exc:
        raise exc.wrap(f"attach {what}")
    return IterLink(fd)


# ----------------------------------------------------------------------- the kind's record
def _attach_section(prog: ProgramArg, target: SectionTarget, o: AttachOptions) -> Link:
    """``iter/TARGET`` and ``iter.s/TARGET`` without parameters (a map iterator needs its map:
    attach it with :func:`bpfkit.link.iterate`); ``pid`` narrows task iterators."""
    if o.pid and target.target in _TASK_TARGETS:
        return iterate(prog, pid=o.pid)
    return iterate(prog)


KIND = LinkKind(
    "iter",
    sections=(Section("iter", "iter", _attach_section), Section("iter.s", "iter", _attach_section)),
    link_classes={LinkType.ITER: IterLink},
    named_info_decoders={LinkType.ITER: _decode_iter},
    features=("bpf_link",),
)
