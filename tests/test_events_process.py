# SPDX-License-Identifier: Apache-2.0
"""The process tracker's bookkeeping, fed synthetic sideband records (no kernel): ordering by
timestamp, fork/exec/mmap/exit semantics, snapshots replacing earlier knowledge, /proc parsing
and ELF symbolization."""

from __future__ import annotations

import os
import sys

from bpfkit.events.process import Mapping, Process, ProcessTracker, Symbolizer, parse_maps, snapshot_records
from bpfkit.events.records import MISC_COMM_EXEC, STATUS_ONLY, Comm, Exit, Fork, Mmap2, SampleId


def sid(t: int, pid: int = 0) -> SampleId:
    return SampleId(pid=pid, tid=pid, time=t, cpu=0)


def fork(t, pid, ppid, tid=None, status=False):
    return Fork(STATUS_ONLY if status else 0, 0, sid(t, pid), pid, ppid, tid or pid, ppid, t)


def comm(t, pid, name, exec_=False, status=False, tid=None):
    misc = (MISC_COMM_EXEC if exec_ else 0) | (STATUS_ONLY if status else 0)
    return Comm(misc, 0, sid(t, pid), pid, tid or pid, name)


def mmap(t, pid, addr, length, path, pgoff=0, status=False):
    return Mmap2(STATUS_ONLY if status else 0, 0, sid(t, pid), pid, pid, addr, length, pgoff, path,
                 8, 1, 1234, 0, b"", 5, 2)


def exit_(t, pid, tid=None):
    return Exit(0, 0, sid(t, pid), pid, pid, tid or pid, pid, t)


def test_fork_exec_mmap_exit_in_time_order_whatever_the_arrival_order():
    seen = []
    tr = ProcessTracker.offline(on_record=seen.append)
    recs = [
        fork(10, 100, 1, status=True), comm(10, 100, "sh", status=True),
        mmap(10, 100, 0x1000, 0x1000, "/bin/sh", status=True),
        fork(20, 200, 100),                                   # child copies sh's maps
        comm(30, 200, "python3", exec_=True),                 # exec: empty address space
        mmap(31, 200, 0x5000, 0x2000, "/usr/bin/python3"),    # first mapping names the exe
        mmap(32, 200, 0x9000, 0x1000, "/lib/libc.so.6"),
        mmap(40, 200, 0x20000, 0x3000, "/tmp/libmarker.so", pgoff=0x1000),  # dlopen
        exit_(50, 200),
    ]
    tr.feed(reversed(recs))  # any arrival order: applied by timestamp
    assert [r.time for r in seen] == sorted(r.time for r in seen)
    child = tr.process(200)
    assert child.ppid == 100 and child.comm == "python3" and child.exe == "/usr/bin/python3"
    assert [m.path for m in child.maps] == ["/usr/bin/python3", "/lib/libc.so.6", "/tmp/libmarker.so"]
    assert child.exited == 50 and not child.alive
    assert [w for _, w, _ in child.log] == ["fork", "exec", "mmap", "mmap", "mmap", "exit"]
    m = child.find(0x20010)
    assert m.path == "/tmp/libmarker.so" and m.file_offset(0x20010) == 0x1010
    assert tr.process(100).maps[0].path == "/bin/sh" and tr.process(100).from_snapshot


def test_threads_share_and_exit_separately():
    tr = ProcessTracker.offline()
    tr.feed([fork(1, 10, 1), fork(2, 10, 10, tid=11), comm(3, 10, "worker", tid=11), exit_(4, 10, tid=11)])
    p = tr.process(10)
    assert p.threads == {10} and p.alive and p.comm == ""  # a thread's name is not the process's


def test_snapshot_replaces_what_was_known_before_it():
    tr = ProcessTracker.offline()
    tr.feed([
        fork(5, 300, 1), mmap(6, 300, 0x1000, 0x1000, "/old/lib.so"),
        # /proc read at t=10: the old library is gone; a live mmap at t=12 is newer
        mmap(12, 300, 0x8000, 0x1000, "/live/after.so"),
        fork(10, 300, 1, status=True), comm(10, 300, "app", status=True),
        mmap(10, 300, 0x4000, 0x1000, "/snap/lib.so", status=True),
    ])
    assert [m.path for m in tr.process(300).maps] == ["/snap/lib.so", "/live/after.so"]


def test_new_mapping_replaces_the_overlapped_part():
    p = Process(1)
    p.add_mapping(Mapping(0x1000, 0x5000, 0, "/a"))
    p.add_mapping(Mapping(0x2000, 0x3000, 0x100, "/b"))
    assert [(m.start, m.end, m.pgoff, m.path) for m in p.maps] == [
        (0x1000, 0x2000, 0, "/a"), (0x2000, 0x3000, 0x100, "/b"), (0x3000, 0x5000, 0x2000, "/a")]
    assert p.find(0x2fff).path == "/b" and p.find(0x5000) is None and p.find(0xfff) is None


def test_keep_exited_bounds_memory():
    tr = ProcessTracker.offline(keep_exited=2)
    tr.feed([r for pid in (1, 2, 3) for r in (fork(pid * 10, pid, 0), exit_(pid * 10 + 1, pid))])
    assert sorted(tr.processes) == [2, 3]


def test_parse_maps_keeps_executable_file_mappings():
    text = (
        "55d0c0a00000-55d0c0a28000 r--p 00000000 08:01 1311 /usr/bin/python3.11\n"
        "55d0c0a28000-55d0c0c00000 r-xp 00028000 08:01 1311 /usr/bin/python3.11\n"
        "7f00aa000000-7f00aa021000 rw-p 00000000 00:00 0 \n"
        "7f00ab000000-7f00ab100000 r-xp 00010000 fd:02 77 /tmp/lib x.so (deleted)\n"
        "7ffd1e5fe000-7ffd1e600000 r-xp 00000000 00:00 0 [vdso]\n"
        "7ffd1e5f0000-7ffd1e5f4000 r--p 00000000 00:00 0 [vvar]\n"
    )
    maps = parse_maps(text)
    assert [(m.path, m.pgoff, m.maj, m.min, m.ino) for m in maps] == [
        ("/usr/bin/python3.11", 0x28000, 8, 1, 1311), ("/tmp/lib x.so", 0x10000, 0xFD, 2, 77), ("[vdso]", 0, 0, 0, 0)]


def test_snapshot_of_this_process():
    recs = snapshot_records(os.getpid())
    assert recs and all(r.status_only for r in recs)
    tr = ProcessTracker.offline()
    tr.feed(recs)
    me = tr.process(os.getpid())
    assert me.from_snapshot and me.ppid == os.getppid()
    assert os.path.realpath(me.exe) == os.path.realpath(sys.executable)
    assert any(m.path == "[vdso]" for m in me.maps) or me.maps
    assert snapshot_records(2**22 + 12345) == []  # no such pid


def test_symbolizer_on_a_system_library():
    from elftools.elf.elffile import ELFFile

    import ctypes.util

    path = None
    for line in open("/proc/self/maps"):
        parts = line.split()
        if len(parts) >= 6 and "libc.so" in parts[5]:
            path = parts[5]
            break
    assert path, "libc not mapped?"
    with open(path, "rb") as f:
        elf = ELFFile(f)
        dynsym = elf.get_section_by_name(".dynsym")
        sym = next(s for s in dynsym.iter_symbols() if s.name == "getpid")
        text = next(seg for seg in elf.iter_segments() if seg["p_type"] == "PT_LOAD" and seg["p_flags"] & 1)
        vaddr = sym["st_value"] + 2
        offset = vaddr - text["p_vaddr"] + text["p_offset"]
    name, off = Symbolizer().lookup(path, offset)
    assert off == 2 and name in {"getpid", "__getpid"}
    assert Symbolizer().lookup("/nonexistent/lib.so", 0) is None
    assert ctypes.util is not None
