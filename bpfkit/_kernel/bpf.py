# SPDX-License-Identifier: Apache-2.0
"""The bpf(2) system call and thin typed wrappers around its commands.

Only this module (and its siblings in bpfkit._kernel) call the kernel. Wrappers take and return
Python values and FD owners; failures become :mod:`bpfkit.errors` exceptions naming the command.
"""

from __future__ import annotations

import errno
import os
import struct
from collections.abc import Iterator, Sequence

from ..errors import VerifierError, kernel_error
from .abi import ffi, libc
from .consts import BPF_F_QUERY_EFFECTIVE, AttachType, Cmd, syscall_number
from .fd import FD

TYPE_CHECKING = False  # typing costs ~2 ms to import: its names are for the type checker only
if TYPE_CHECKING:
    from typing import Any

_NR_BPF = syscall_number("bpf")
ATTR_SIZE = ffi.sizeof("union bpf_attr")


def new_attr() -> Any:
    """A zeroed ``union bpf_attr`` (the kernel rejects non-zero bytes past the fields it knows)."""
    return ffi.new("union bpf_attr *")


def set_attr_u32(attr: Any, offset: int, value: int) -> None:
    """Write a u32 into ``attr`` at byte ``offset``: fields newer than the ABI bpfkit compiles
    (6.12's union bpf_attr) are set by offset (the kernel's layout, from its BTF)."""
    struct.pack_into("<I", ffi.buffer(attr), offset, value)


def bpf(cmd: Cmd, attr: Any, size: int = ATTR_SIZE, detail: str = "") -> int:
    """Call bpf(cmd, attr, size); return its non-negative result or raise a KernelError.

    EINTR is retried (PROG_LOAD and BTF_LOAD can be interrupted by signals); EAGAIN from
    PROG_LOAD is retried a few times as libbpf does (the verifier may ask to be called again).
    """
    retries = 5
    while True:
        ret = libc.syscall(_NR_BPF, ffi.cast("int", int(cmd)), attr, ffi.cast("unsigned int", size))
        if ret >= 0:
            return int(ret)
        err = ffi.errno
        if err == errno.EINTR or (err == errno.EAGAIN and cmd == Cmd.PROG_LOAD and retries > 0):
            retries -= 1
            continue
        path = detail if cmd in (Cmd.OBJ_PIN, Cmd.OBJ_GET) else None
        raise kernel_error(f"BPF_{cmd.name}", err, detail, path)


def bpf_fd(cmd: Cmd, attr: Any, size: int = ATTR_SIZE, detail: str = "") -> FD:
    """bpf() for the commands that return a new file descriptor."""
    return FD(bpf(cmd, attr, size, detail))


def bpf_found(cmd: Cmd, attr: Any) -> bool:
    """``bpf(cmd, attr)``, False where the kernel answers ENOENT: no such element, no next key
    or id, the last (partial) batch."""
    try:
        bpf(cmd, attr)
    except Exception as exc:
        if getattr(exc, "errno", None) == errno.ENOENT:
            return False
        raise
    return True


def addr(cdata: Any) -> int:
    """The address of a cffi buffer as the u64 bpf_attr expects (0 for None)."""
    if cdata is None:
        return 0
    return int(ffi.cast("uintptr_t", cdata))


# ----------------------------------------------------------------------------- objects
def obj_pin(fd: FD | int, path: str) -> None:
    attr = new_attr()
    cpath = ffi.new("char[]", os.fsencode(path))
    attr.pathname = addr(cpath)
    attr.bpf_fd = int(fd)
    bpf(Cmd.OBJ_PIN, attr, detail=path)


def obj_get(path: str, flags: int = 0) -> FD:
    attr = new_attr()
    cpath = ffi.new("char[]", os.fsencode(path))
    attr.pathname = addr(cpath)
    attr.file_flags = flags
    return bpf_fd(Cmd.OBJ_GET, attr, detail=path)


def obj_info(fd: FD | int, ctype: str) -> Any:
    """BPF_OBJ_GET_INFO_BY_FD into a fresh ``ctype`` (e.g. ``struct bpf_prog_info``)."""
    info = ffi.new(ctype + " *")
    return obj_info_into(fd, info, ffi.sizeof(ctype))


def obj_info_into(fd: FD | int, info: Any, size: int) -> Any:
    """BPF_OBJ_GET_INFO_BY_FD into ``info`` (pre-filled with buffer pointers when wanted)."""
    attr = new_attr()
    attr.info.bpf_fd = int(fd)
    attr.info.info_len = size
    attr.info.info = addr(info)
    bpf(Cmd.OBJ_GET_INFO_BY_FD, attr)
    return info


def prog_map_ids(fd: FD | int) -> list[int]:
    """The ids of the maps a loaded program uses (bpf_prog_info.map_ids, asked for twice:
    once for the count, once with a buffer that large)."""
    info = obj_info(fd, "struct bpf_prog_info")
    count = int(info.nr_map_ids)
    if not count:
        return []
    ids = ffi.new("uint32_t[]", count)
    info = ffi.new("struct bpf_prog_info *")
    info.nr_map_ids = count
    info.map_ids = addr(ids)
    obj_info_into(fd, info, ffi.sizeof("struct bpf_prog_info"))
    return [int(ids[i]) for i in range(min(count, int(info.nr_map_ids)))]


_NEXT_ID = {
    "prog": (Cmd.PROG_GET_NEXT_ID, Cmd.PROG_GET_FD_BY_ID),
    "map": (Cmd.MAP_GET_NEXT_ID, Cmd.MAP_GET_FD_BY_ID),
    "link": (Cmd.LINK_GET_NEXT_ID, Cmd.LINK_GET_FD_BY_ID),
    "btf": (Cmd.BTF_GET_NEXT_ID, Cmd.BTF_GET_FD_BY_ID),
}


def iter_ids(kind: str) -> Iterator[int]:
    """The ids of every ``kind`` object (prog, map, link, btf) in the system, ascending."""
    next_cmd, _ = _NEXT_ID[kind]
    current = 0
    while True:
        attr = new_attr()
        attr.start_id = current
        if not bpf_found(next_cmd, attr):
            return
        current = attr.next_id
        yield current


def fd_by_id(kind: str, obj_id: int) -> FD:
    """A new fd for the ``kind`` object with ``obj_id`` (ENOENT if it went away)."""
    _, by_id = _NEXT_ID[kind]
    attr = new_attr()
    attr.start_id = obj_id
    return bpf_fd(by_id, attr, detail=f"{kind} id {obj_id}")


# -------------------------------------------------------------------------------- maps
def map_create(
    map_type: int,
    key_size: int,
    value_size: int,
    max_entries: int,
    flags: int = 0,
    name: str = "",
    inner_map_fd: int = 0,
    numa_node: int = 0,
    btf_fd: int = 0,
    btf_key_type_id: int = 0,
    btf_value_type_id: int = 0,
    map_extra: int = 0,
    ifindex: int = 0,
    btf_vmlinux_value_type_id: int = 0,
    value_type_btf_obj_fd: int = 0,
) -> FD:
    attr = new_attr()
    attr.map_type = map_type
    attr.key_size = key_size
    attr.value_size = value_size
    attr.max_entries = max_entries
    attr.map_flags = flags
    attr.inner_map_fd = inner_map_fd
    attr.numa_node = numa_node
    attr.map_name = name.encode()[:15]
    attr.map_ifindex = ifindex
    attr.btf_fd = btf_fd
    attr.btf_key_type_id = btf_key_type_id
    attr.btf_value_type_id = btf_value_type_id
    attr.btf_vmlinux_value_type_id = btf_vmlinux_value_type_id
    if value_type_btf_obj_fd:
        # 6.9 (9e926acda0c2): a struct_ops value type in a module's BTF; with BPF_F_VTYPE_BTF_OBJ_FD.
        attr.value_type_btf_obj_fd = value_type_btf_obj_fd
    attr.map_extra = map_extra
    return bpf_fd(Cmd.MAP_CREATE, attr, detail=f"map {name!r}" if name else "")


def btf_by_id(btf_id: int) -> bytes:
    """The raw BTF blob of a loaded BTF object (BPF_BTF_GET_FD_BY_ID, then btf_blob). Module and
    vmlinux BTF come back split (types only, ids continuing vmlinux's)."""
    with fd_by_id("btf", btf_id) as fd:
        return btf_blob(fd)


def _elem_attr(map_fd: FD | int, key: Any, value: Any = None, flags: int = 0) -> Any:
    attr = new_attr()
    attr.map_fd = int(map_fd)
    attr.key = addr(key)
    attr.value = addr(value)
    attr.flags = flags
    return attr


def map_lookup(map_fd: FD | int, key: Any, value: Any, flags: int = 0) -> bool:
    """Fill ``value`` for ``key``; False if the key is absent."""
    return bpf_found(Cmd.MAP_LOOKUP_ELEM, _elem_attr(map_fd, key, value, flags))


def map_update(map_fd: FD | int, key: Any, value: Any, flags: int = 0) -> None:
    bpf(Cmd.MAP_UPDATE_ELEM, _elem_attr(map_fd, key, value, flags))


def map_delete(map_fd: FD | int, key: Any) -> bool:
    """Delete ``key``; False if it was absent."""
    return bpf_found(Cmd.MAP_DELETE_ELEM, _elem_attr(map_fd, key))


def map_lookup_and_delete(map_fd: FD | int, key: Any, value: Any, flags: int = 0) -> bool:
    """Pop ``key`` (or the head of a queue/stack when key is None) into ``value``."""
    return bpf_found(Cmd.MAP_LOOKUP_AND_DELETE_ELEM, _elem_attr(map_fd, key, value, flags))


def map_next_key(map_fd: FD | int, key: Any, next_key: Any) -> bool:
    """Write the key after ``key`` (the first key when ``key`` is None); False at the end."""
    attr = new_attr()
    attr.map_fd = int(map_fd)
    attr.key = addr(key)
    attr.next_key = addr(next_key)
    return bpf_found(Cmd.MAP_GET_NEXT_KEY, attr)


def map_freeze(map_fd: FD | int) -> None:
    attr = new_attr()
    attr.map_fd = int(map_fd)
    bpf(Cmd.MAP_FREEZE, attr)


def map_batch(
    cmd: Cmd,
    map_fd: FD | int,
    keys: Any,
    values: Any,
    count: int,
    in_batch: Any = None,
    out_batch: Any = None,
    elem_flags: int = 0,
) -> tuple[int, bool]:
    """One MAP_*_BATCH call; returns (elements processed, reached the end)."""
    attr = new_attr()
    attr.batch.map_fd = int(map_fd)
    attr.batch.keys = addr(keys)
    attr.batch.values = addr(values)
    attr.batch.count = count
    attr.batch.in_batch = addr(in_batch)
    attr.batch.out_batch = addr(out_batch)
    attr.batch.elem_flags = elem_flags
    # The lookup batches return ENOENT with the last partial batch in count.
    at_end = not bpf_found(cmd, attr)
    return int(attr.batch.count), at_end


# ---------------------------------------------------------------------------- programs
def prog_load(
    prog_type: int,
    insns: bytes,
    license: str = "GPL",
    name: str = "",
    expected_attach_type: int = 0,
    kern_version: int = 0,
    prog_flags: int = 0,
    prog_btf_fd: int = 0,
    func_info: bytes = b"",
    func_info_rec_size: int = 0,
    line_info: bytes = b"",
    line_info_rec_size: int = 0,
    attach_btf_id: int = 0,
    attach_btf_obj_fd: int = 0,
    attach_prog_fd: int = 0,
    ifindex: int = 0,
    fd_array: Sequence[int] = (),
    log_level: int = 0,
    log_size: int = 0,
    log_sink: list[str] | None = None,
) -> FD:
    """BPF_PROG_LOAD. Without a log it loads quietly; on a verifier rejection the caller
    retries with :func:`prog_load_with_log`, so the fast path never pays for a log buffer."""
    attr = new_attr()
    cinsns = ffi.from_buffer(insns)
    clicense = ffi.new("char[]", license.encode())
    attr.prog_type = prog_type
    attr.insn_cnt = len(insns) // 8
    attr.insns = addr(cinsns)
    attr.license = addr(clicense)
    attr.kern_version = kern_version
    attr.prog_flags = prog_flags
    attr.prog_name = name.encode()[:15]
    attr.prog_ifindex = ifindex
    attr.expected_attach_type = expected_attach_type
    attr.prog_btf_fd = prog_btf_fd
    keep = [cinsns, clicense]
    if func_info:
        cfunc = ffi.from_buffer(func_info)
        keep.append(cfunc)
        attr.func_info_rec_size = func_info_rec_size
        attr.func_info = addr(cfunc)
        attr.func_info_cnt = len(func_info) // func_info_rec_size
    if line_info:
        cline = ffi.from_buffer(line_info)
        keep.append(cline)
        attr.line_info_rec_size = line_info_rec_size
        attr.line_info = addr(cline)
        attr.line_info_cnt = len(line_info) // line_info_rec_size
    attr.attach_btf_id = attach_btf_id
    if attach_prog_fd:
        attr.attach_prog_fd = attach_prog_fd
    elif attach_btf_obj_fd:
        attr.attach_btf_obj_fd = attach_btf_obj_fd
    if fd_array:
        cfds = ffi.new("int[]", list(fd_array))
        keep.append(cfds)
        attr.fd_array = addr(cfds)
    log = None
    if log_level:
        log = ffi.new("char[]", log_size)
        attr.log_level = log_level
        attr.log_size = log_size
        attr.log_buf = addr(log)
    try:
        fd = bpf_fd(Cmd.PROG_LOAD, attr, detail=f"program {name!r}" if name else "")
        if log is not None and log_sink is not None:
            log_sink.append(ffi.string(log).decode(errors="replace"))
        return fd
    except Exception as exc:
        err = getattr(exc, "errno", 0)
        if log is not None:
            text = ffi.string(log).decode(errors="replace")
            true_size = int(attr.log_true_size)
            raise _LoadLogError(err, text, true_size) from None
        raise


class _LoadLogError(Exception):
    """Internal: a logged load failed; carries the log so the caller can grow or report it."""

    def __init__(self, err: int, log: str, true_size: int) -> None:
        super().__init__(err)
        self.errno = err
        self.log = log
        self.true_size = true_size


LOG_START_SIZE = 64 * 1024
LOG_MAX_SIZE = (1 << 30) - 1  # the kernel caps log_size at UINT_MAX >> 2 (1 GiB)


def prog_load_with_log(name: str, log_level: int = 1, whole: bool = False, **kwargs: Any) -> FD:
    """Load with a verifier log, growing the buffer on ENOSPC; rejection raises VerifierError.

    A modest buffer first; on ENOSPC the kernel (6.4+) reports the size it needed in
    log_true_size, older kernels are grown 8x at a time, up to the kernel's 1 GiB cap.
    """
    size = LOG_START_SIZE
    while True:
        try:
            return prog_load(name=name, log_level=log_level, log_size=size, **kwargs)
        except _LoadLogError as exc:
            if exc.errno == errno.ENOSPC and size < LOG_MAX_SIZE:
                size = min(LOG_MAX_SIZE, max(exc.true_size + 1, size * 8))
                continue
            truncated = exc.errno == errno.ENOSPC
            raise VerifierError("BPF_PROG_LOAD", exc.errno, name, exc.log, truncated) from None


def prog_test_run(
    prog_fd: FD | int,
    data_in: bytes = b"",
    data_out_size: int = 0,
    ctx_in: bytes = b"",
    ctx_out_size: int = 0,
    repeat: int = 1,
    flags: int = 0,
    cpu: int = 0,
) -> tuple[int, bytes, bytes, int]:
    """BPF_PROG_TEST_RUN: returns (retval, data_out, ctx_out, duration ns)."""
    attr = new_attr()
    test = attr.test
    test.prog_fd = int(prog_fd)
    data = _TestBuffers(test, "data", data_in, data_out_size)
    ctx = _TestBuffers(test, "ctx", ctx_in, ctx_out_size)
    test.repeat = repeat
    test.flags = flags
    test.cpu = cpu
    bpf(Cmd.PROG_TEST_RUN, attr)
    return int(test.retval), data.output(), ctx.output(), int(test.duration)


class _TestBuffers:
    """BPF_PROG_TEST_RUN's ``{what}_in`` pointed at ``given`` and ``{what}_out`` at a new buffer
    of ``out_size`` bytes (none where empty or 0), both kept alive while the call runs."""

    __slots__ = ("test", "what", "given", "out")

    def __init__(self, test: Any, what: str, given: bytes, out_size: int) -> None:
        self.test, self.what, self.given, self.out = test, what, None, None
        if given:
            self.given = ffi.from_buffer(given)
            setattr(test, f"{what}_in", addr(self.given))
            setattr(test, f"{what}_size_in", len(given))
        if out_size:
            self.out = ffi.new("char[]", out_size)
            setattr(test, f"{what}_out", addr(self.out))
            setattr(test, f"{what}_size_out", out_size)

    def output(self) -> bytes:
        """What the program left in the out buffer (the size the kernel reports)."""
        if self.out is None:
            return b""
        return ffi.buffer(self.out, getattr(self.test, f"{self.what}_size_out"))[:]  # type: ignore[no-any-return]


# ---------------------------------------------------------------------------------- BTF
def btf_load(blob: bytes, log_level: int = 0) -> FD:
    """BPF_BTF_LOAD; a rejection with a log raises VerifierError carrying the BTF log."""
    attr = new_attr()
    cblob = ffi.from_buffer(blob)
    attr.btf = addr(cblob)
    attr.btf_size = len(blob)
    if not log_level:
        try:
            return bpf_fd(Cmd.BTF_LOAD, attr)
        except Exception:
            log_level = 1
    size = LOG_START_SIZE
    while True:
        log = ffi.new("char[]", size)
        attr.btf_log_buf = addr(log)
        attr.btf_log_size = size
        attr.btf_log_level = log_level
        try:
            return bpf_fd(Cmd.BTF_LOAD, attr)
        except Exception as exc:
            err = getattr(exc, "errno", 0)
            if err == errno.ENOSPC and size < LOG_MAX_SIZE:
                size = min(LOG_MAX_SIZE, max(int(attr.btf_log_true_size) + 1, size * 8))
                continue
            text = ffi.string(log).decode(errors="replace")
            raise VerifierError("BPF_BTF_LOAD", err, "BTF", text, err == errno.ENOSPC) from None


# -------------------------------------------------------------------------------- links
def link_create(
    prog_fd: FD | int,
    target_fd: int,
    attach_type: int,
    flags: int = 0,
    fill: Any = None,
    detail: str = "",
) -> FD:
    """BPF_LINK_CREATE. ``fill(attr)`` sets the attach-type-specific union members."""
    attr = new_attr()
    attr.link_create.prog_fd = int(prog_fd)
    attr.link_create.target_fd = target_fd
    attr.link_create.attach_type = attach_type
    attr.link_create.flags = flags
    keep = fill(attr) if fill is not None else None
    fd = bpf_fd(Cmd.LINK_CREATE, attr, detail=detail)
    del keep
    return fd


def link_update(link_fd: FD | int, new_prog_fd: FD | int, old_prog_fd: int = 0, flags: int = 0) -> None:
    attr = new_attr()
    attr.link_update.link_fd = int(link_fd)
    attr.link_update.new_prog_fd = int(new_prog_fd)
    attr.link_update.old_prog_fd = old_prog_fd
    attr.link_update.flags = flags
    bpf(Cmd.LINK_UPDATE, attr)


def link_detach(link_fd: FD | int) -> None:
    attr = new_attr()
    attr.link_detach.link_fd = int(link_fd)
    bpf(Cmd.LINK_DETACH, attr)


def link_create_perf_event(prog_fd: FD | int, perf_fd: FD | int, cookie: int = 0, detail: str = "") -> FD:
    """BPF_LINK_CREATE with attach_type BPF_PERF_EVENT (5.15, b89fbfbb854c): a bpf_link owning
    the attachment of a program to a perf event, with a bpf_cookie (bpf_get_attach_cookie)."""
    attr = new_attr()
    attr.link_create.prog_fd = int(prog_fd)
    attr.link_create.target_fd = int(perf_fd)
    attr.link_create.attach_type = int(AttachType.PERF_EVENT)
    attr.link_create.perf_event.bpf_cookie = cookie
    return bpf_fd(Cmd.LINK_CREATE, attr, detail=detail)


class U64Array:
    """u64 values in memory of their own, for a bpf_attr field that takes an array's address
    (uprobe_multi's offsets, kprobe_multi's addrs, cookies): ``address`` stays valid for as long
    as this object lives, so keep it until the command returns."""

    __slots__ = ("_values", "address")

    def __init__(self, values: Sequence[int]) -> None:
        self._values = ffi.new("uint64_t[]", list(values))
        self.address = addr(self._values)

    def __len__(self) -> int:
        return len(self._values)


def _u64_array(values: Sequence[int] | None) -> Any:
    return ffi.new("uint64_t[]", list(values)) if values else None


def link_create_kprobe_multi(
    prog_fd: FD | int,
    *,
    syms: Sequence[str] | None = None,
    addrs: Sequence[int] | None = None,
    cookies: Sequence[int] | None = None,
    flags: int = 0,
    detail: str = "",
    attach_type: AttachType = AttachType.TRACE_KPROBE_MULTI,
) -> FD:
    """BPF_LINK_CREATE with attach_type BPF_TRACE_KPROBE_MULTI (5.18, 0dcac2725406): one
    bpf_link (fprobe) on many kernel functions, given by name or address. The kernel sorts the
    symbols itself, carrying the cookies along (bpf_kprobe_multi_link_attach, sort_r), and
    fails the whole attach with ESRCH when one symbol is unknown. ``attach_type``
    BPF_TRACE_KPROBE_SESSION (6.10) makes the same link a session: entry and return."""
    count = len(syms) if syms else len(addrs or ())
    names = [ffi.new("char[]", s.encode()) for s in syms or ()]
    sym_arr = ffi.new("uint64_t[]", [addr(n) for n in names]) if names else None
    addr_arr = _u64_array(addrs)
    cookie_arr = _u64_array(cookies)
    attr = new_attr()
    attr.link_create.prog_fd = int(prog_fd)
    attr.link_create.attach_type = int(attach_type)
    attr.link_create.kprobe_multi.flags = flags
    attr.link_create.kprobe_multi.cnt = count
    attr.link_create.kprobe_multi.syms = addr(sym_arr) if sym_arr is not None else 0
    attr.link_create.kprobe_multi.addrs = addr(addr_arr) if addr_arr is not None else 0
    attr.link_create.kprobe_multi.cookies = addr(cookie_arr) if cookie_arr is not None else 0
    fd = bpf_fd(Cmd.LINK_CREATE, attr, detail=detail)
    del names, sym_arr, addr_arr, cookie_arr
    return fd


def link_create_uprobe_multi(
    prog_fd: FD | int,
    path: str,
    offsets: Sequence[int],
    *,
    ref_ctr_offsets: Sequence[int] | None = None,
    cookies: Sequence[int] | None = None,
    flags: int = 0,
    pid: int = 0,
    detail: str = "",
    attach_type: AttachType = AttachType.TRACE_UPROBE_MULTI,
) -> FD:
    """BPF_LINK_CREATE with attach_type BPF_TRACE_UPROBE_MULTI (6.6, 89ae89f53d20): one bpf_link
    holding a uprobe at each file offset of ``path``, each with its own cookie and USDT
    semaphore offset, firing only in process ``pid`` when it is not 0. ``attach_type``
    BPF_TRACE_UPROBE_SESSION (6.13) makes it a session: entry and return."""
    cpath = ffi.new("char[]", os.fsencode(path))
    off_arr = _u64_array(offsets)
    ref_arr = _u64_array(ref_ctr_offsets)
    cookie_arr = _u64_array(cookies)
    attr = new_attr()
    attr.link_create.prog_fd = int(prog_fd)
    attr.link_create.attach_type = int(attach_type)
    attr.link_create.uprobe_multi.path = addr(cpath)
    attr.link_create.uprobe_multi.offsets = addr(off_arr) if off_arr is not None else 0
    attr.link_create.uprobe_multi.ref_ctr_offsets = addr(ref_arr) if ref_arr is not None else 0
    attr.link_create.uprobe_multi.cookies = addr(cookie_arr) if cookie_arr is not None else 0
    attr.link_create.uprobe_multi.cnt = len(offsets)
    attr.link_create.uprobe_multi.flags = flags
    attr.link_create.uprobe_multi.pid = pid
    fd = bpf_fd(Cmd.LINK_CREATE, attr, detail=detail)
    del cpath, off_arr, ref_arr, cookie_arr
    return fd


def link_info_multi(fd: FD | int, first: Any) -> dict[str, Any]:
    """The arrays of a kprobe_multi (info since 6.6, 7ac8d0d2616e; cookies since 6.9) or
    uprobe_multi link (info since 6.9), asked for with buffers sized from ``first`` (the info
    :func:`link_info` returned): {"addrs"|"offsets", "ref_ctr_offsets", "cookies": [int],
    "path": str}. Kernels that do not fill a field leave it zeroed."""
    size = ffi.sizeof("struct bpf_link_info")
    info = ffi.new("struct bpf_link_info *")
    out: dict[str, Any] = {}
    if first.type == _LINK_KPROBE_MULTI:
        n = int(first.kprobe_multi.count)
        if not n:
            return {"addrs": [], "cookies": []}
        addrs, cookies = ffi.new("uint64_t[]", n), ffi.new("uint64_t[]", n)
        info.kprobe_multi.addrs = addr(addrs)
        info.kprobe_multi.cookies = addr(cookies)
        info.kprobe_multi.count = n
        obj_info_into(fd, info, size)
        out = {"addrs": list(addrs), "cookies": list(cookies)}
    elif first.type == _LINK_UPROBE_MULTI:
        n = int(first.uprobe_multi.count)
        if not n:
            # Before 6.9 nothing is filled, and the fields past the kernel's shorter
            # bpf_link_info must stay zero (E2BIG otherwise).
            return {}
        plen = max(int(first.uprobe_multi.path_size), 1)
        path = ffi.new("char[]", plen)
        offsets, refs, cookies = (ffi.new("uint64_t[]", n) for _ in range(3))
        info.uprobe_multi.path = addr(path)
        info.uprobe_multi.path_size = plen
        info.uprobe_multi.offsets = addr(offsets)
        info.uprobe_multi.ref_ctr_offsets = addr(refs)
        info.uprobe_multi.cookies = addr(cookies)
        info.uprobe_multi.count = n
        obj_info_into(fd, info, size)
        out = {"path": ffi.string(path).decode(errors="replace"), "offsets": list(offsets)[:n],
               "ref_ctr_offsets": list(refs)[:n], "cookies": list(cookies)[:n]}
    return out


# bpf_link_info.type values whose info carries a name the caller must give a buffer for:
# BPF_LINK_TYPE_RAW_TRACEPOINT (tp_name) and BPF_LINK_TYPE_PERF_EVENT of kprobe/uprobe/
# tracepoint kind (func_name/file_name/tp_name, 6.6, 1b715e1b0ec5).
_LINK_RAW_TRACEPOINT, _LINK_PERF_EVENT = 1, 7
_LINK_ITER = 4  # iter.target_name (5.10, 6b0a249a301e)
_LINK_KPROBE_MULTI, _LINK_UPROBE_MULTI = 8, 12
_PERF_EVENT_NAMED = (1, 2, 3, 4, 5)  # BPF_PERF_EVENT_{UPROBE,URETPROBE,KPROBE,KRETPROBE,TRACEPOINT}
# Where each kind keeps its name: (union member, pointer field, length field). For perf events,
# kprobe.func_name, uprobe.file_name and tracepoint.tp_name share offsets, as do name_len.
_LINK_NAME_FIELDS = {
    _LINK_RAW_TRACEPOINT: ("raw_tracepoint", "tp_name", "tp_name_len"),
    _LINK_ITER: ("iter", "target_name", "target_name_len"),
    _LINK_PERF_EVENT: ("perf_event.kprobe", "func_name", "name_len"),
}


def _member(info: Any, path: str) -> Any:
    for part in path.split("."):
        info = getattr(info, part)
    return info


def link_info(fd: FD | int) -> tuple[Any, str]:
    """BPF_OBJ_GET_INFO_BY_FD on a link: (struct bpf_link_info, its name string or '').

    Asks twice when the link kind reports a name: once for the type and the name's length,
    once with a buffer of that length.
    """
    size = ffi.sizeof("struct bpf_link_info")
    info = obj_info(fd, "struct bpf_link_info")
    if info.type == _LINK_PERF_EVENT and info.perf_event.type not in _PERF_EVENT_NAMED:
        return info, ""
    where = _LINK_NAME_FIELDS.get(info.type)
    if where is None:
        return info, ""
    member, pointer, length = where
    need = int(getattr(_member(info, member), length))
    if not need:
        return info, ""
    buf = ffi.new("char[]", need + 1)
    info = ffi.new("struct bpf_link_info *")
    setattr(_member(info, member), pointer, addr(buf))
    setattr(_member(info, member), length, need + 1)
    obj_info_into(fd, info, size)
    return info, ffi.string(buf).decode(errors="replace")


# A link made by BPF_LINK_CREATE is "bpf_link", one opened by BPF_OBJ_GET or by id "bpf-link".
_ANON_INODE_KINDS = {"bpf-prog": "prog", "bpf-map": "map", "bpf_link": "link", "bpf-link": "link", "btf": "btf"}


def obj_kind(fd: FD | int) -> str:
    """What a bpf fd refers to: ``prog``, ``map``, ``link``, ``btf`` (from its anon inode name,
    ``anon_inode:bpf_link``), or '' for anything else."""
    try:
        target = os.readlink(f"/proc/self/fd/{int(fd)}")
    except OSError:
        return ""
    name = target.removeprefix("anon_inode:")
    return _ANON_INODE_KINDS.get(name, "")


def raw_tracepoint_open(name: str | None, prog_fd: FD | int, cookie: int = 0) -> FD:
    attr = new_attr()
    cname = ffi.new("char[]", name.encode()) if name else None
    attr.raw_tracepoint.name = addr(cname)
    attr.raw_tracepoint.prog_fd = int(prog_fd)
    attr.raw_tracepoint.cookie = cookie
    return bpf_fd(Cmd.RAW_TRACEPOINT_OPEN, attr, detail=name or "")


def link_create_tracing(prog_fd: FD | int, attach_type: int, cookie: int = 0, target_fd: int = 0,
                        target_btf_id: int = 0, detail: str = "") -> FD:
    """BPF_LINK_CREATE of a tracing/LSM program at the target it was loaded for (5.19,
    2fcc82411e74 added tracing.cookie; before, only freplace and iterators took this path)."""
    attr = new_attr()
    attr.link_create.prog_fd = int(prog_fd)
    attr.link_create.target_fd = target_fd
    attr.link_create.attach_type = attach_type
    attr.link_create.tracing.target_btf_id = target_btf_id
    attr.link_create.tracing.cookie = cookie
    return bpf_fd(Cmd.LINK_CREATE, attr, detail=detail)


def pack_iter_link_info(map_fd: int = 0, tid: int = 0, pid: int = 0, pid_fd: int = 0,
                        cgroup_fd: int = 0, cgroup_id: int = 0, order: int = 0) -> bytes:
    """union bpf_iter_link_info, cut to the member in use: map (map_fd, 5.9), task (tid, pid,
    pid_fd, 6.1) or cgroup (order, cgroup_fd, cgroup_id, 6.1). The kernel copies what it is
    given and requires the rest of its own size to be zero, so shorter is more portable."""
    if cgroup_fd or cgroup_id or order:
        return struct.pack("<IIQ", order, cgroup_fd, cgroup_id)
    if tid or pid or pid_fd:
        return struct.pack("<III", tid, pid, pid_fd)
    if map_fd:
        return struct.pack("<I", map_fd)
    return b""


def link_create_iter(prog_fd: FD | int, iter_info: bytes = b"", detail: str = "") -> FD:
    """BPF_LINK_CREATE(BPF_TRACE_ITER): a bpf_link of an iterator program (5.8, de4e05cac46d),
    parametrised by a union bpf_iter_link_info (5.9)."""
    attr = new_attr()
    attr.link_create.prog_fd = int(prog_fd)
    attr.link_create.attach_type = int(AttachType.TRACE_ITER)
    cinfo = ffi.from_buffer(iter_info) if iter_info else None
    if cinfo is not None:
        attr.link_create.iter_info = addr(cinfo)
        attr.link_create.iter_info_len = len(iter_info)
    fd = bpf_fd(Cmd.LINK_CREATE, attr, detail=detail)
    del cinfo
    return fd


def prog_attach(
    target_fd: int, prog_fd: FD | int, attach_type: int, flags: int = 0, replace_fd: int = 0,
    relative: int = 0, expected_revision: int = 0, detail: str = "",
) -> None:
    """BPF_PROG_ATTACH. ``replace_fd`` with BPF_F_REPLACE (5.6); ``relative`` (an fd or, with
    BPF_F_ID, an id) and ``expected_revision`` for multi-program hooks (6.6: tcx; cgroups 6.16)."""
    attr = new_attr()
    attr.target_fd = target_fd
    attr.attach_bpf_fd = int(prog_fd)
    attr.attach_type = attach_type
    attr.attach_flags = flags
    attr.replace_bpf_fd = replace_fd
    attr.relative_fd = relative
    attr.expected_revision = expected_revision
    bpf(Cmd.PROG_ATTACH, attr, detail=detail)


def prog_detach(target_fd: int, prog_fd: FD | int, attach_type: int, detail: str = "") -> None:
    attr = new_attr()
    attr.target_fd = target_fd
    attr.attach_bpf_fd = int(prog_fd)
    attr.attach_type = attach_type
    bpf(Cmd.PROG_DETACH, attr, detail=detail)


def _prog_query(target: int, attach_type: int, query_flags: int, arrays: tuple[str, ...],
                count: int) -> tuple[Any, dict[str, list[int]]]:
    """BPF_PROG_QUERY with a u32 array of ``count`` for each ``attr.query`` field named in
    ``arrays``; grows them and asks again when the kernel says ENOSPC (and how many it has)."""
    while True:
        attr = new_attr()
        bufs = {name: ffi.new("uint32_t[]", count) for name in arrays}
        attr.query.target_fd = target
        attr.query.attach_type = attach_type
        attr.query.query_flags = query_flags
        for name, buf in bufs.items():
            setattr(attr.query, name, addr(buf))
        attr.query.count = count
        try:
            bpf(Cmd.PROG_QUERY, attr)
        except Exception as exc:
            if getattr(exc, "errno", None) == errno.ENOSPC and attr.query.count > count:
                count = int(attr.query.count)
                continue
            raise
        n = int(attr.query.count)
        return attr, {name: [buf[i] for i in range(n)] for name, buf in bufs.items()}


def prog_query_flags(target_fd: int, attach_type: int, effective: bool = False,
                     count: int = 64) -> tuple[list[int], list[int], int, int]:
    """BPF_PROG_QUERY of a cgroup or netns hook: (program ids in run order, each one's attach
    flags (5.19, 0 before and for effective queries), the hook's attach_flags, the revision
    (6.16 for cgroups; 0 before)). ``effective`` (BPF_F_QUERY_EFFECTIVE) lists what runs for
    the cgroup, inherited programs included."""
    # The kernel refuses prog_attach_flags with BPF_F_QUERY_EFFECTIVE, and before 5.19
    # (b79c9fc9551b) at all: its CHECK_ATTR wants every byte after prog_cnt zero (EINVAL).
    query_flags = BPF_F_QUERY_EFFECTIVE if effective else 0
    arrays = ("prog_ids",) if effective else ("prog_ids", "prog_attach_flags")
    try:
        attr, got = _prog_query(target_fd, attach_type, query_flags, arrays, count)
    except Exception as exc:
        if getattr(exc, "errno", None) != errno.EINVAL or len(arrays) == 1:
            raise
        attr, got = _prog_query(target_fd, attach_type, query_flags, ("prog_ids",), count)
    ids = got["prog_ids"]
    return ids, got.get("prog_attach_flags", [0] * len(ids)), int(attr.query.attach_flags), int(attr.query.revision)


def prog_query(target_fd: int, attach_type: int, max_progs: int = 64) -> tuple[list[int], int]:
    """BPF_PROG_QUERY: (program ids attached, attach_flags)."""
    attr = new_attr()
    ids = ffi.new("uint32_t[]", max_progs)
    attr.query.target_fd = target_fd
    attr.query.attach_type = attach_type
    attr.query.prog_ids = addr(ids)
    attr.query.prog_cnt = max_progs
    bpf(Cmd.PROG_QUERY, attr)
    return [ids[i] for i in range(attr.query.prog_cnt)], int(attr.query.attach_flags)


def prog_query_mprog(target: int, attach_type: int, count: int = 16) -> tuple[list[int], list[int], int]:
    """BPF_PROG_QUERY of a multi-program hook (tcx, netkit; 6.6): (program ids in run order,
    the link id holding each or 0, the hook's revision). ``target`` is an ifindex in the
    calling thread's network namespace."""
    attr, got = _prog_query(target, attach_type, 0, ("prog_ids", "link_ids"), count)
    return got["prog_ids"], got["link_ids"], int(attr.query.revision)


def enable_stats(stats_type: int = 0) -> FD:
    """BPF_ENABLE_STATS: run-time stats stay on while the returned fd is open."""
    attr = new_attr()
    attr.enable_stats.type = stats_type
    return bpf_fd(Cmd.ENABLE_STATS, attr)


def iter_create(link_fd: FD | int) -> FD:
    attr = new_attr()
    attr.iter_create.link_fd = int(link_fd)
    return bpf_fd(Cmd.ITER_CREATE, attr)


def btf_info(fd: FD | int) -> tuple[int, str, bool]:
    """(id, name, is kernel BTF) of a BTF object: ``vmlinux``, a module's name, or '' for a
    program's BTF. The name fields came in 5.11; older kernels give ('', False)."""
    info = ffi.new("struct bpf_btf_info *")
    name = ffi.new("char[]", 64)
    info.name = addr(name)
    info.name_len = 64
    try:
        obj_info_into(fd, info, ffi.sizeof("struct bpf_btf_info"))
    except Exception as exc:
        if getattr(exc, "errno", None) != errno.E2BIG:
            raise
        info = ffi.new("struct bpf_btf_info *")
        obj_info_into(fd, info, 16)  # btf, btf_size, id: what 5.10 knows
        return int(info.id), "", False
    return int(info.id), ffi.string(name).decode(errors="replace"), bool(info.kernel_btf)


def btf_blob(fd: FD | int) -> bytes:
    """The raw BTF of a loaded BTF object (a program's, or a kernel one), asked for twice:
    once for its size, once with a buffer that large (bpf_btf_info.btf, 4.18)."""
    info = ffi.new("struct bpf_btf_info *")
    obj_info_into(fd, info, 16)  # btf, btf_size, id: the fields every kernel knows
    size = int(info.btf_size)
    buf = ffi.new("char[]", max(size, 1))
    info = ffi.new("struct bpf_btf_info *")
    info.btf = addr(buf)
    info.btf_size = size
    obj_info_into(fd, info, 16)
    return bytes(ffi.buffer(buf, size))


def kernel_btf_fd(module: str) -> FD:
    """A new fd for the kernel BTF object of ``module`` (what kfunc calls and typed __ksym
    variables in modules name through fd_array / the ld_imm64's second half)."""
    for btf_id in iter_ids("btf"):
        try:
            fd = fd_by_id("btf", btf_id)
        except Exception as exc:
            if getattr(exc, "errno", None) == errno.ENOENT:
                continue  # went away meanwhile
            raise
        try:
            _, name, is_kernel = btf_info(fd)
        except BaseException:
            fd.close()
            raise
        if is_kernel and name == module:
            return fd
        fd.close()
    from ..errors import NotFoundError

    raise NotFoundError(f"no kernel BTF object named {module!r} (BPF_BTF_GET_NEXT_ID found none)")
