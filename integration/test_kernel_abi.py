# SPDX-License-Identifier: Apache-2.0
"""The kernel ABI layer against the real kernel: perf_event_open's size versioning, every perf
ioctl the kernel lets a software, tracepoint or breakpoint event take, and the bpf() wrappers
(map operations and batches, freeze, pinning, id iteration, stats, test runs)."""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import struct
import tempfile
import time
from typing import Any, Iterator

import pytest

from bpfkit import asm
from bpfkit._kernel import bpf as kbpf
from bpfkit._kernel import perf, tracefs
from bpfkit.features import probes
from bpfkit._kernel.abi import ffi
from bpfkit._kernel.consts import (
    BPF_NOEXIST,
    Cmd,
    MapType,
    PerfAttrFlag,
    PerfIoctl,
    PerfSwId,
    PerfType,
    ProgType,
)
from bpfkit._kernel.fd import FD
from bpfkit.errors import BusyError, KernelError, KernelPermissionError, NotSupportedError
from bpfkit.maps import Map, MapSpec
from bpfkit.program import Program, ProgramSpec

PERF_FORMAT_ID = 1 << 2
PERF_SAMPLE_RAW = 1 << 10


# ------------------------------------------------------------------------ perf helpers
def sw_event(config: int = PerfSwId.TASK_CLOCK, disabled: bool = True, sample_period: int = 0,
             read_format: int = 0, group_fd: int = -1, cpu: int = -1, pid: int = 0) -> FD:
    attr = perf.new_attr()
    attr.type = PerfType.SOFTWARE
    attr.config = config
    attr.flags = int(PerfAttrFlag.DISABLED) if disabled else 0
    attr.sample_period = sample_period
    attr.read_format = read_format
    return perf.perf_event_open(attr, pid, cpu, group_fd, what=f"software event {config}")


def count(fd: FD) -> int:
    return struct.unpack("<Q", os.read(fd.raw, 8))[0]


def spin(seconds: float = 0.005) -> None:
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def tracepoint_event(group: str = "syscalls", name: str = "sys_enter_getppid") -> FD:
    attr = perf.new_attr()
    attr.type = PerfType.TRACEPOINT
    attr.config = tracefs.event_id(group, name)
    attr.sample_period = 1
    attr.sample_type = PERF_SAMPLE_RAW
    return perf.perf_event_open(attr, -1, 0, what=f"tracepoint {group}/{name}")


# ---------------------------------------------------------------- perf_event_open sizes
@pytest.mark.parametrize(
    "field, value, size",
    [
        (None, 0, 64),  # PERF_ATTR_SIZE_VER0
        ("config2", 1, 72),  # VER1
        ("branch_sample_type", 0, 64),  # zero fields do not count
        ("clockid", 1, 96),  # VER3
        ("sample_max_stack", 1, 112),  # VER5
        ("aux_sample_size", 0, 64),
        ("sig_data", 5, 128),  # VER7
    ],
)
def test_needed_attr_size_is_the_smallest_version_holding_every_field(field: str | None, value: int, size: int) -> None:
    if field == "sig_data":
        need_sigtrap()
    attr = perf.new_attr()
    attr.type = PerfType.SOFTWARE
    attr.config = PerfSwId.DUMMY
    attr.flags = int(PerfAttrFlag.DISABLED)
    if field:
        setattr(attr, field, value)
    assert perf.needed_attr_size(attr) == size
    if field == "clockid":
        attr.flags |= int(PerfAttrFlag.USE_CLOCKID)  # CLOCK_MONOTONIC is 1
    if field == "sig_data":
        attr.flags |= int(PerfAttrFlag.SIGTRAP | PerfAttrFlag.REMOVE_ON_EXEC)
    # The real kernel takes the attr at that size, and perf_event_open sends exactly it.
    with perf.perf_event_open(attr, 0, -1, what="sized dummy event"):
        assert attr.size == size


def need_sigtrap() -> None:
    if probes.kernel_version_code() < (5 << 16 | 13 << 8):
        pytest.skip("perf_event_attr.sig_data (PERF_ATTR_SIZE_VER7, 128 bytes) needs Linux 5.13")


def test_full_size_attr_is_accepted() -> None:
    need_sigtrap()
    attr = perf.new_attr()
    attr.type = PerfType.SOFTWARE
    attr.config = PerfSwId.DUMMY
    attr.flags = int(PerfAttrFlag.DISABLED)
    attr.config3 = 0
    attr.sig_data = 1
    attr.flags |= int(PerfAttrFlag.SIGTRAP | PerfAttrFlag.REMOVE_ON_EXEC)
    assert perf.needed_attr_size(attr) == 128
    with perf.perf_event_open(attr, 0, -1):
        pass


def test_e2big_is_reported_as_not_supported(monkeypatch: pytest.MonkeyPatch) -> None:
    """MOCKED: this 6.18 kernel knows every field bpfkit sets, so no valid attr makes it answer
    E2BIG. The fake syscall below does what kernel/events/core.c:perf_copy_attr does on an older
    kernel: write the size it knows into attr.size and fail with E2BIG."""

    class OldKernel:
        def syscall(self, nr: int, attr: Any, *args: Any) -> int:
            attr.size = 112  # PERF_ATTR_SIZE_VER5: a 4.1 .. 4.16 kernel
            ffi.errno = errno.E2BIG
            return -1

    monkeypatch.setattr(perf, "libc", OldKernel())
    attr = perf.new_attr()
    attr.type = PerfType.SOFTWARE
    attr.config = PerfSwId.DUMMY
    attr.sig_data = 1  # needs the 128-byte VER7 attr (5.13)
    with pytest.raises(NotSupportedError) as info:
        perf.perf_event_open(attr, 0, -1, what="dummy event")
    exc = info.value
    assert exc.min_version == "5.13"
    assert "128 bytes" in str(exc) and "112-byte" in str(exc) and "E2BIG" in str(exc)
    assert "dummy event" in str(exc)


def test_perf_event_open_errors_name_the_event() -> None:
    attr = perf.new_attr()
    attr.type = PerfType.TRACEPOINT
    attr.config = 0xFFFFFFF0  # no such trace event id
    with pytest.raises(KernelError, match="perf_event_open: .*tracepoint nowhere"):
        perf.perf_event_open(attr, -1, 0, what="tracepoint nowhere")


# ------------------------------------------------------------------------------ ioctls
def test_enable_disable_reset() -> None:
    with sw_event() as fd:
        spin()
        assert count(fd) == 0, "a disabled event counted"
        perf.enable(fd)
        spin()
        perf.disable(fd)
        first = count(fd)
        assert first > 0
        spin()
        assert count(fd) == first, "a disabled event kept counting"
        perf.perf_ioctl(fd, PerfIoctl.RESET)
        assert count(fd) == 0


def test_group_flag_applies_to_the_whole_group() -> None:
    with sw_event() as leader, sw_event(group_fd=leader.raw) as member:
        # The member was opened disabled too; ENABLE with PERF_IOC_FLAG_GROUP on the leader
        # enables both.
        perf.perf_ioctl(leader, PerfIoctl.ENABLE, group=True)
        spin()
        perf.perf_ioctl(leader, PerfIoctl.DISABLE, group=True)
        assert count(leader) > 0 and count(member) > 0
        perf.perf_ioctl(leader, PerfIoctl.RESET, group=True)
        assert count(leader) == 0 and count(member) == 0
        with pytest.raises(KernelError, match="group flag"):
            perf.perf_ioctl(leader, PerfIoctl.SET_BPF, 0, group=True)


def test_id_matches_read_format_id() -> None:
    with sw_event(read_format=PERF_FORMAT_ID) as fd:
        value, event_id = struct.unpack("<QQ", os.read(fd.raw, 16))
        assert perf.event_id(fd) == event_id > 0


def test_period_and_refresh_on_a_sampling_event() -> None:
    with sw_event(config=PerfSwId.CPU_CLOCK, sample_period=1_000_000) as fd:
        perf.set_period(fd, 2_000_000)
        with pytest.raises(KernelError) as info:
            perf.set_period(fd, 0)  # the kernel refuses a zero period
        assert info.value.errno == errno.EINVAL
        # REFRESH: enable for N more overflows (only sampling, non-inherited events).
        assert perf.perf_ioctl(fd, PerfIoctl.REFRESH, 1) == 0
    with sw_event() as counting, pytest.raises(KernelError) as info:
        perf.perf_ioctl(counting, PerfIoctl.REFRESH, 1)  # not a sampling event
    assert info.value.errno == errno.EINVAL


def test_set_output_and_pause_output() -> None:
    import mmap

    page = mmap.PAGESIZE
    with sw_event(config=PerfSwId.DUMMY, cpu=0, pid=-1) as first, sw_event(config=PerfSwId.DUMMY, cpu=0, pid=-1) as second:
        ring = mmap.mmap(first.raw, 2 * page, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        try:
            perf.set_output(second, first.raw)  # second now writes into first's ring
            perf.set_output(second, -1)  # and stops
            perf.pause_output(first, True)
            perf.pause_output(first, False)
        finally:
            ring.close()
        with pytest.raises(KernelError) as info:
            perf.set_output(second, 0x7FFF)  # not an fd
        assert info.value.errno == errno.EBADF


def test_set_filter_on_a_tracepoint() -> None:
    with tracepoint_event() as fd:
        with pytest.raises(KernelError) as info:
            perf.set_filter(fd, "no_such_field == 1")
        assert info.value.errno == errno.EINVAL
    with tracepoint_event() as fd:
        perf.set_filter(fd, "common_pid == 1")
        with pytest.raises(BusyError) as busy:  # one filter per perf event
            perf.set_filter(fd, "common_pid == 2")
        assert busy.value.errno == errno.EEXIST


def test_set_bpf_and_query_bpf() -> None:
    counts = Map(MapSpec(name="c", type=MapType.ARRAY, key_size=4, value_size=8, max_entries=1, value_format="<Q"))
    with counts, Program(ProgramSpec(name="tp", type=ProgType.TRACEPOINT,
                                     instructions=asm.count_in_array(counts.fd.raw))) as prog, tracepoint_event() as fd:
        perf.set_bpf(fd, prog.fd)
        perf.enable(fd)
        os.getppid()
        # QUERY_BPF lists every program on the trace event system-wide (other processes may
        # have attached theirs to the same tracepoint), so look for ours among them.
        assert prog.id in perf.query_bpf(fd)
        deadline = time.monotonic() + 2
        while counts.lookup(0) == 0 and time.monotonic() < deadline:
            os.getppid()
            time.sleep(0.01)
        assert counts.lookup(0) > 0
        with pytest.raises(BusyError) as info:  # ENVIRONMENT.md: a second SET_BPF is EEXIST
            perf.set_bpf(fd, prog.fd)
        assert info.value.errno == errno.EEXIST


def test_modify_attributes() -> None:
    # Only breakpoint events can be modified; a software event is refused (EINVAL on 6.18,
    # EOPNOTSUPP on older kernels), while a request number the kernel does not know is ENOTTY.
    with sw_event() as fd:
        attr = perf.new_attr()
        attr.type = PerfType.SOFTWARE
        attr.config = PerfSwId.TASK_CLOCK
        with pytest.raises(KernelError) as info:
            perf.modify_attributes(fd, attr)
        assert info.value.errno in (errno.EINVAL, errno.EOPNOTSUPP)
        with pytest.raises(KernelError) as info:
            perf._ioctl(fd, int(PerfIoctl.MODIFY_ATTRIBUTES) + 0x40, attr)
        assert info.value.errno == errno.ENOTTY
    watched = ffi.new("uint64_t[2]")
    attr = perf.new_attr()
    attr.type = PerfType.BREAKPOINT
    attr.bp_type = 2  # HW_BREAKPOINT_W
    attr.bp_addr = kbpf.addr(watched)
    attr.bp_len = 8  # HW_BREAKPOINT_LEN_8
    attr.sample_period = 1
    attr.flags = int(PerfAttrFlag.DISABLED)
    try:
        bp = perf.perf_event_open(attr, 0, -1, what="write breakpoint")
    except KernelError as exc:
        pytest.skip(f"no hardware breakpoints here ({exc}); EOPNOTSUPP path checked")
    with bp:
        attr.bp_addr = kbpf.addr(watched) + 8
        perf.modify_attributes(bp, attr)
        perf.enable(bp)
        watched[0] = 4  # the old address: no longer watched
        before = count(bp)
        watched[1] = 5  # the new one
        perf.disable(bp)
        assert before == 0 and count(bp) >= 1


# ------------------------------------------------------------------------ bpf wrappers
def test_map_element_operations() -> None:
    with Map(MapSpec(name="h", type=MapType.HASH, key_size=4, value_size=8, max_entries=8,
                     key_format="<I", value_format="<Q")) as m:
        m.update(1, 10)
        m.update(2, 20, BPF_NOEXIST)
        with pytest.raises(BusyError):
            m.update(2, 21, BPF_NOEXIST)
        assert m.lookup(1) == 10 and m.lookup(3) is None
        assert sorted(m.keys()) == [1, 2]
        assert m.next_key(None) in (1, 2)
        if probes.kernel_version_code() >= (5 << 16 | 14 << 8):
            assert m.lookup_and_delete(1) == 10 and m.lookup(1) is None
        else:  # hash maps got BPF_MAP_LOOKUP_AND_DELETE_ELEM in 5.14
            with pytest.raises(NotSupportedError, match=r"lookup-and-delete in hash map 'h'.*ENOTSUPP.*5\.14"):
                m.lookup_and_delete(1)
            assert m.delete(1)
        assert m.delete(2) and not m.delete(2)
        assert list(m.keys()) == []


def test_map_batch_operations() -> None:
    with Map(MapSpec(name="b", type=MapType.HASH, key_size=4, value_size=8, max_entries=64,
                     key_format="<I", value_format="<Q")) as m:
        pairs = [(i, i * i) for i in range(40)]
        assert m.update_batch(pairs) == 40
        assert sorted(m.lookup_batch(batch_size=7)) == pairs
        # LOOKUP_AND_DELETE_BATCH pops everything; DELETE_BATCH removes given keys.
        keys = ffi.new("uint32_t[64]")
        values = ffi.new("uint64_t[64]")
        out = ffi.new("uint32_t *")
        # A hash map batches whole buckets, so up to ``count`` elements come back.
        n, done = kbpf.map_batch(Cmd.MAP_LOOKUP_AND_DELETE_BATCH, m.fd, keys, values, 10, None, out)
        assert 0 < n <= 10 and not done
        popped = {keys[i]: values[i] for i in range(n)}
        assert all(v == k * k for k, v in popped.items())
        remaining = sorted(m.keys())
        assert len(remaining) == 40 - n and not set(remaining) & set(popped)
        ckeys = ffi.new("uint32_t[]", remaining)
        n, _ = kbpf.map_batch(Cmd.MAP_DELETE_BATCH, m.fd, ckeys, None, len(remaining))
        assert n == len(remaining) and list(m.keys()) == []


def test_freeze_makes_the_map_read_only_for_user_space() -> None:
    with Map(MapSpec(name="f", type=MapType.ARRAY, key_size=4, value_size=4, max_entries=1)) as m:
        m.update(0, 7)
        m.freeze()
        with pytest.raises(KernelPermissionError):
            m.update(0, 8)
        assert m.lookup(0) == struct.pack("<I", 7)


@contextlib.contextmanager
def bpffs_dir() -> Iterator[str]:
    """A fresh directory in bpffs (mounted here if it is not), removed with all pins in it."""
    mounted_here = False
    if not os.path.ismount("/sys/fs/bpf"):
        tracefs._mount("bpf", "/sys/fs/bpf", "bpf")
        mounted_here = True
    path = tempfile.mkdtemp(prefix="bpfkit-test-", dir="/sys/fs/bpf")
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)
        if mounted_here:
            os.system("umount /sys/fs/bpf")


def test_obj_pin_and_get() -> None:
    with bpffs_dir() as d, Map(MapSpec(name="p", type=MapType.ARRAY, key_size=4, value_size=4, max_entries=1)) as m, \
            Program(ProgramSpec(name="p", type=ProgType.SOCKET_FILTER, instructions=asm.return_imm(0))) as prog:
        m.update(0, 99)
        kbpf.obj_pin(m.fd, f"{d}/map")
        kbpf.obj_pin(prog.fd, f"{d}/prog")
        with pytest.raises(BusyError):
            kbpf.obj_pin(m.fd, f"{d}/map")
        with Map.load_pinned(f"{d}/map") as again:
            assert again.id == m.id and again.lookup(0) == struct.pack("<I", 99)
        with Map.load_pinned(f"{d}/map", readonly=True) as ro, pytest.raises(KernelPermissionError):
            ro.update(0, 1)
        with kbpf.obj_get(f"{d}/prog") as fd:
            assert kbpf.obj_info(fd, "struct bpf_prog_info").id == prog.id
        with pytest.raises(KernelError) as info:
            kbpf.obj_get(f"{d}/nothing")
        assert info.value.errno == errno.ENOENT
    assert not os.path.exists(d)


def test_next_id_iteration_and_fd_by_id() -> None:
    with Map(MapSpec(name="ids", type=MapType.ARRAY, key_size=4, value_size=4, max_entries=1)) as m, \
            Program(ProgramSpec(name="ids", type=ProgType.SOCKET_FILTER, instructions=asm.return_imm(0))) as prog:
        map_ids = list(kbpf.iter_ids("map"))
        assert map_ids == sorted(map_ids) and m.id in map_ids
        assert prog.id in set(kbpf.iter_ids("prog"))
        with kbpf.fd_by_id("map", m.id) as fd:
            assert kbpf.obj_info(fd, "struct bpf_map_info").id == m.id
        with Map.from_id(m.id) as again:
            assert again.type == MapType.ARRAY and again.name == "ids"
        with pytest.raises(KernelError) as info:
            kbpf.fd_by_id("prog", 0x7FFFFFF0)
        assert info.value.errno == errno.ENOENT


def test_enable_stats_counts_runs() -> None:
    counts = Map(MapSpec(name="s", type=MapType.ARRAY, key_size=4, value_size=8, max_entries=1))
    with counts, Program(ProgramSpec(name="s", type=ProgType.RAW_TRACEPOINT,
                                     instructions=asm.count_in_array(counts.fd.raw))) as prog:
        with kbpf.enable_stats(0), kbpf.raw_tracepoint_open("sys_enter", prog.fd):
            for _ in range(3):
                os.getppid()
            info = prog.info()
        assert info.run_cnt >= 3 and info.run_time_ns > 0


def test_prog_test_run() -> None:
    with Program(ProgramSpec(name="sf", type=ProgType.SOCKET_FILTER, instructions=asm.return_imm(7))) as prog:
        retval, _data, _ctx, duration = kbpf.prog_test_run(prog.fd, b"\0" * 64, repeat=10)
        assert retval == 7 and duration >= 0
    xdp_pass = asm.return_imm(2)  # XDP_PASS
    with Program(ProgramSpec(name="xdp", type=ProgType.XDP, instructions=xdp_pass)) as prog:
        packet = bytes(range(64))
        retval, out, _ctx, _ = kbpf.prog_test_run(prog.fd, packet, data_out_size=128)
        assert retval == 2 and out == packet
