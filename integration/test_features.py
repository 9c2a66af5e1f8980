# SPDX-License-Identifier: Apache-2.0
"""Every feature probe checked against the real thing.

For each feature the probe calls supported, a test uses it for real (loads that program type,
creates that map type, attaches a perf link to a tracepoint and sees it fire, opens a uprobe
through the PMU on /bin/true and sees it fire, ...). For each feature it calls unsupported, the
same real attempt must fail the way the probe's reason says. ``bpfkit features`` must tell the
truth about this host (ENVIRONMENT.md): no kprobes, fentry refused, uprobes and links work.
"""

from __future__ import annotations

import contextlib
import errno
import json
import mmap
import os
import shutil
import struct
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Iterator

import pytest
from elftools.elf.elffile import ELFFile

from bpfkit import asm, features
from bpfkit._kernel import bpf as kbpf
from bpfkit._kernel import perf, pmu, tracefs
from bpfkit.features import probes
from bpfkit._kernel.abi import ffi
from bpfkit._kernel.consts import AttachType, FuncId, LinkType, MapType, PerfSwId, PerfType, ProgType
from bpfkit._kernel.fd import FD
from bpfkit.errors import KernelError, NotSupportedError, VerifierError, errno_name
from bpfkit.maps import Map, MapSpec
from bpfkit.program import Program, ProgramSpec

REPO = Path(__file__).resolve().parent.parent
ON_HOST = not os.environ.get("BPFKIT_VM_KERNEL")
TRUE = shutil.which("true") or "/bin/true"


# ------------------------------------------------------------------------------ helpers
def need(name: str) -> features.FeatureResult:
    """The probe's answer; tests branch on it (supported: use it, else: see it fail)."""
    return features.probe(name)


def counter() -> Map:
    return Map(MapSpec(name="counts", type=MapType.ARRAY, key_size=4, value_size=8, max_entries=1, value_format="<Q"))


def count_prog(prog_type: ProgType, counts: Map, **kw: Any) -> Program:
    return Program(ProgramSpec(name="count", type=prog_type, instructions=asm.count_in_array(counts.fd.raw), **kw))


def file_offset(path: str, vaddr: int) -> int:
    """File offset of virtual address ``vaddr`` in ELF ``path`` (through its PT_LOAD segments)."""
    with open(path, "rb") as f:
        elf = ELFFile(f)
        for seg in elf.iter_segments():
            if seg["p_type"] == "PT_LOAD" and seg["p_vaddr"] <= vaddr < seg["p_vaddr"] + seg["p_filesz"]:
                return vaddr - seg["p_vaddr"] + seg["p_offset"]
    raise AssertionError(f"{vaddr:#x} is in no PT_LOAD segment of {path}")


def entry_offset(path: str) -> int:
    with open(path, "rb") as f:
        entry = ELFFile(f).header["e_entry"]
    return file_offset(path, entry)


def symbol_offset(path: str, name: str) -> int:
    with open(path, "rb") as f:
        elf = ELFFile(f)
        sym = elf.get_section_by_name(".symtab").get_symbol_by_name(name)[0]
        value = sym["st_value"]
    return file_offset(path, value)


def uprobe_event(path: str, offset: int, ref_ctr_offset: int = 0) -> FD:
    """A uprobe perf event through the uprobe PMU (all tasks, CPU 0)."""
    attr = perf.new_attr()
    attr.type = pmu.pmu_type("uprobe")
    if ref_ctr_offset:
        word, first, _ = pmu.pmu_format("uprobe", "ref_ctr_offset")
        assert word == "config"
        attr.config = ref_ctr_offset << first
    cpath = ffi.new("char[]", path.encode())
    attr.config1 = kbpf.addr(cpath)
    attr.config2 = offset
    return perf.perf_event_open(attr, -1, 0, what=f"uprobe {path}:{offset:#x}")


def tracepoint_event(group: str, name: str) -> FD:
    attr = perf.new_attr()
    attr.type = PerfType.TRACEPOINT
    attr.config = tracefs.event_id(group, name)
    attr.sample_period = 1
    attr.wakeup_events = 1
    return perf.perf_event_open(attr, -1, 0, what=f"tracepoint {group}/{name}")


def wait_for(fn, timeout: float = 2.0) -> Any:
    end = time.monotonic() + timeout
    while True:
        value = fn()
        if value or time.monotonic() > end:
            return value
        time.sleep(0.01)


@contextlib.contextmanager
def attached(prog: Program, event: FD) -> Iterator[None]:
    """Run ``prog`` on perf event ``event``: a perf link where the kernel has them (5.15),
    else PERF_EVENT_IOC_SET_BPF + ENABLE (undone when the event's fd closes)."""
    if features.probe("perf_link").supported:
        with kbpf.link_create(prog.fd, event.raw, int(AttachType.PERF_EVENT)):
            yield
    else:
        perf.set_bpf(event, prog.fd)
        perf.enable(event)
        yield


def syscall_symbol(name: str) -> str:
    arch = {"x86_64": "__x64_sys_", "aarch64": "__arm64_sys_"}.get(os.uname().machine, "sys_")
    return arch + name


# -------------------------------------------------------------------------- the probes
def test_probe_all_is_fast_leaves_nothing_and_caches() -> None:
    features.clear_cache()
    # This process's probe events only (p<pid>_<n>): other BPF users, or a second copy of the
    # suite, may add and remove their own meanwhile.
    mine = f"p{os.getpid()}_"

    def own_events() -> list[str]:
        return [line for k in ("uprobe", "kprobe") if os.path.exists(os.path.join(tracefs.tracefs_root(), f"{k}_events"))
                for line in tracefs.read_file(f"{k}_events").splitlines() if f"bpfkit_probe/{mine}" in line]

    assert own_events() == []
    t0 = time.perf_counter()
    results = features.probe_all()
    elapsed = time.perf_counter() - t0
    limit = 1.0 if ON_HOST else 30.0  # a VM under TCG emulation is tens of times slower
    assert elapsed < limit, f"probing every feature took {elapsed:.3f}s"
    assert set(results) == set(features.names()) and len(results) > 80
    for r in results.values():
        assert r.reason, f"{r.name} has no reason"
    assert own_events() == [], "a probe left a tracefs probe event behind"
    group = os.path.join(tracefs.tracefs_root(), "events", "bpfkit_probe")
    assert not [e for e in (os.listdir(group) if os.path.isdir(group) else []) if e.startswith(mine)]
    t0 = time.perf_counter()
    assert features.probe_all() == results
    # cached: ~1 ms; 0.1 s leaves room for a loaded machine (another copy of the suite beside it)
    assert time.perf_counter() - t0 < 0.1, "cached answers should be instant"


def test_require_raises_with_min_version() -> None:
    unsupported = [r for r in features.probe_all().values() if not r.supported]
    if not unsupported:
        pytest.skip("this kernel supports every feature")
    r = unsupported[0]
    with pytest.raises(NotSupportedError) as info:
        features.require(r.name)
    assert info.value.min_version == r.min_version
    assert r.reason in str(info.value)
    assert features.require("bpf_syscall").supported


@pytest.mark.skipif(not ON_HOST, reason="the host's kernel facts (ENVIRONMENT.md) do not hold in a VM")
def test_cli_tells_the_truth_about_this_host() -> None:
    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.run([sys.executable, "-m", "bpfkit.cli", "features", "--json"],
                          capture_output=True, text=True, env=env, cwd=REPO, timeout=60)
    assert proc.returncode == 0, proc.stderr
    table = json.loads(proc.stdout)
    assert set(table) == set(features.names()) | set(probes.ITERATORS)  # iterator targets last
    assert all(set(v) == {"supported", "reason"} for v in table.values())
    for name in ("kprobe_pmu", "kprobe_events", "kprobe_multi", "tracing_programs"):
        assert table[name]["supported"] is False, (name, table[name])
    for name in ("uprobe_pmu", "uprobe_events", "perf_link", "uprobe_multi", "bpf_link", "ringbuf",
                 "raw_tracepoint_link", "bpf_cookie", "uprobe_ref_ctr_pmu", "btf", "mmapable_maps"):
        assert table[name]["supported"] is True, (name, table[name])
    assert "EOPNOTSUPP" in table["kprobe_multi"]["reason"]
    assert "EPERM" in table["tracing_programs"]["reason"]
    # The human table: grouped, one line per feature.
    proc = subprocess.run([sys.executable, "-m", "bpfkit.cli", "features"],
                          capture_output=True, text=True, env=env, cwd=REPO, timeout=60)
    assert proc.returncode == 0
    for group in features.groups():
        assert f"\n{group}:\n" in "\n" + proc.stdout
    assert any(line.split()[:2] == ["kprobe_pmu", "no"] for line in proc.stdout.splitlines())


# ---------------------------------------------------------------- syscall-level features
def test_bpf_syscall() -> None:
    assert need("bpf_syscall").supported
    with counter() as m:
        m.update(0, 41)
        assert m.lookup(0) == 41


def test_mmapable_maps() -> None:
    r = need("mmapable_maps")
    if not r.supported:
        with pytest.raises(KernelError):
            Map(MapSpec(name="mm", type=MapType.ARRAY, key_size=4, value_size=8, max_entries=4, flags=1 << 10))
        return
    with Map(MapSpec(name="mm", type=MapType.ARRAY, key_size=4, value_size=8, max_entries=4,
                     flags=1 << 10, value_format="<Q")) as m:
        with mmap.mmap(m.fd.raw, mmap.PAGESIZE, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE) as mem:
            m.update(2, 0xABCD)
            assert struct.unpack_from("<Q", mem, 16)[0] == 0xABCD
            struct.pack_into("<Q", mem, 8, 77)
            assert m.lookup(1) == 77


def _ringbuf_records(fd: FD, size: int) -> list[bytes]:
    page = mmap.PAGESIZE
    with mmap.mmap(fd.raw, page, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE, offset=0) as cons, \
            mmap.mmap(fd.raw, page + 2 * size, mmap.MAP_SHARED, mmap.PROT_READ, offset=page) as prod:
        consumer = struct.unpack_from("<Q", cons, 0)[0]
        producer = struct.unpack_from("<Q", prod, 0)[0]
        out = []
        while consumer < producer:
            at = page + (consumer & (size - 1))
            length, _ = struct.unpack_from("<II", prod, at)
            assert not length & (1 << 31), "record still busy"
            length &= ~(3 << 30)
            out.append(bytes(prod[at + 8 : at + 8 + length]))
            consumer += (8 + length + 7) & ~7
        struct.pack_into("<Q", cons, 0, consumer)
    return out


def test_ringbuf_receives_a_record() -> None:
    r = need("ringbuf")
    if not r.supported:
        pytest.fail(f"ringbuf unsupported here? {r.reason}")
    size = mmap.PAGESIZE
    with Map(MapSpec(name="rb", type=MapType.RINGBUF, max_entries=size)) as rb:
        insns = b"".join([
            asm.ld_imm64(asm.R1, 0x1122334455667788),
            asm.stx(asm.DW, asm.R10, asm.R1, -8),
            asm.ld_map_fd(asm.R1, rb.fd.raw),
            asm.mov64_reg(asm.R2, asm.R10),
            asm.alu64_imm(asm.ADD, asm.R2, -8),
            asm.mov64_imm(asm.R3, 8),
            asm.mov64_imm(asm.R4, 0),
            asm.call(FuncId.ringbuf_output),
            asm.return_imm(0),
        ])
        with Program(ProgramSpec(name="rb_out", type=ProgType.SOCKET_FILTER, instructions=insns)) as prog:
            prog.test_run(b"\0" * 64)
        assert _ringbuf_records(rb.fd, size) == [struct.pack("<Q", 0x1122334455667788)]


def test_perf_event_array_receives_a_sample() -> None:
    assert need("perf_event_array").supported
    ncpu = os.cpu_count() or 1
    page = mmap.PAGESIZE
    events, rings = [], []
    with Map(MapSpec(name="pea", type=MapType.PERF_EVENT_ARRAY, key_size=4, value_size=4, max_entries=ncpu)) as pea:
        try:
            for cpu in range(ncpu):
                attr = perf.new_attr()
                attr.type = PerfType.SOFTWARE
                attr.config = PerfSwId.BPF_OUTPUT
                attr.sample_type = 1 << 10  # PERF_SAMPLE_RAW
                attr.sample_period = 1
                attr.wakeup_events = 1
                fd = perf.perf_event_open(attr, -1, cpu, what=f"bpf-output cpu{cpu}")
                events.append(fd)
                rings.append(mmap.mmap(fd.raw, 2 * page, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE))
                pea.update(cpu, struct.pack("<I", fd.raw))
            insns = b"".join([
                asm.mov64_reg(asm.R6, asm.R1),
                asm.ld_imm64(asm.R1, 0xFEEDFACECAFEBEEF),
                asm.stx(asm.DW, asm.R10, asm.R1, -8),
                asm.mov64_reg(asm.R1, asm.R6),
                asm.ld_map_fd(asm.R2, pea.fd.raw),
                asm.ld_imm64(asm.R3, 0xFFFFFFFF),  # BPF_F_CURRENT_CPU
                asm.mov64_reg(asm.R4, asm.R10),
                asm.alu64_imm(asm.ADD, asm.R4, -8),
                asm.mov64_imm(asm.R5, 8),
                asm.call(FuncId.perf_event_output),
                asm.return_imm(0),
            ])
            with Program(ProgramSpec(name="pea_out", type=ProgType.TRACEPOINT, instructions=insns)) as prog, \
                    tracepoint_event("syscalls", "sys_enter_getppid") as ev, attached(prog, ev):
                os.getppid()

                def samples() -> list[bytes]:
                    found = []
                    for ring in rings:
                        head = struct.unpack_from("<Q", ring, 1024)[0]
                        tail, pos = struct.unpack_from("<Q", ring, 1032)[0], 0
                        pos = tail
                        while pos < head:
                            at = page + pos % page
                            rtype, _misc, size = struct.unpack_from("<IHH", ring, at)
                            if rtype == 9:  # PERF_RECORD_SAMPLE: u32 size, raw bytes
                                raw_size = struct.unpack_from("<I", ring, at + 8)[0]
                                found.append(bytes(ring[at + 12 : at + 12 + min(raw_size, 8)]))
                            pos += size
                    return found

                got = wait_for(samples)
            assert struct.pack("<Q", 0xFEEDFACECAFEBEEF) in got
        finally:
            for ring in rings:
                ring.close()
            for fd in events:
                fd.close()


def test_bpf_cookie_reaches_the_program() -> None:
    r = need("bpf_cookie")
    if not r.supported:
        with pytest.raises(VerifierError, match="func"):
            Program(ProgramSpec(name="cookie", type=ProgType.TRACEPOINT,
                                instructions=asm.call(FuncId.get_attach_cookie) + asm.return_imm(0)))
        return
    with counter() as m:
        insns = b"".join([
            asm.call(FuncId.get_attach_cookie),  # r1 is still ctx
            asm.stx(asm.DW, asm.R10, asm.R0, -8),
            asm.st_imm(asm.W, asm.R10, -12, 0),
            asm.ld_map_fd(asm.R1, m.fd.raw),
            asm.mov64_reg(asm.R2, asm.R10),
            asm.alu64_imm(asm.ADD, asm.R2, -12),
            asm.mov64_reg(asm.R3, asm.R10),
            asm.alu64_imm(asm.ADD, asm.R3, -8),
            asm.mov64_imm(asm.R4, 0),
            asm.call(FuncId.map_update_elem),
            asm.return_imm(0),
        ])
        with Program(ProgramSpec(name="cookie", type=ProgType.TRACEPOINT, instructions=insns)) as prog, \
                tracepoint_event("syscalls", "sys_enter_getppid") as ev, \
                kbpf.link_create_perf_event(prog.fd, ev, cookie=0xC00C1E5):
            os.getppid()
            assert wait_for(lambda: m.lookup(0) == 0xC00C1E5)


def test_log_true_size_reports_the_needed_size() -> None:
    r = need("log_true_size")
    bad = asm.exit_()  # r0 never set: rejected with a log
    # Before 6.4 (the verifier log rework) a log buffer under 128 bytes is EINVAL by itself,
    # so there the log is made longer than 128 bytes: 40 instructions, each logged at level 2.
    small_size, level, insns = (16, 1, bad) if r.supported else (128, 2, asm.mov64_imm(1, 0) * 40 + bad)
    try:
        kbpf.prog_load(int(ProgType.SOCKET_FILTER), insns, log_level=level, log_size=small_size)
    except kbpf._LoadLogError as exc:
        small = exc
    else:
        pytest.fail("the verifier accepted a program without r0")
    assert small.errno == errno.ENOSPC
    if not r.supported:
        assert small.true_size == 0
        return
    assert small.true_size > 16
    with pytest.raises(VerifierError) as info:
        kbpf.prog_load_with_log("bad", prog_type=int(ProgType.SOCKET_FILTER), insns=bad)
    assert len(info.value.log) + 1 == small.true_size
    assert "R0 !read_ok" in info.value.log


def test_tracing_programs() -> None:
    r = need("tracing_programs")
    target, btf_id = probes._vmlinux_func_id(probes.FENTRY_TARGETS)
    spec = ProgramSpec(name="fentry", type=ProgType.TRACING, instructions=asm.return_imm(0),
                       attach_type=AttachType.TRACE_FENTRY, attach_btf_id=btf_id)
    if r.supported:
        with Program(spec) as prog, kbpf.raw_tracepoint_open(None, prog.fd) as link:
            assert kbpf.obj_kind(link) == "link"
        return
    with pytest.raises(VerifierError) as info:
        Program(spec)
    assert errno_name(info.value.errno) in r.reason, (info.value, r.reason)
    if ON_HOST:
        assert info.value.errno == errno.EPERM and not info.value.log.strip()


# ------------------------------------------------------------------------------- links
def test_perf_link_on_a_tracepoint_fires_and_detaches() -> None:
    r = need("perf_link")
    with counter() as m, count_prog(ProgType.TRACEPOINT, m) as prog, \
            tracepoint_event("syscalls", "sys_enter_getppid") as ev:
        if not r.supported:
            with pytest.raises(KernelError) as info:
                kbpf.link_create(prog.fd, ev.raw, int(AttachType.PERF_EVENT))
            assert info.value.errno == errno.EINVAL
            return
        with kbpf.link_create(prog.fd, ev.raw, int(AttachType.PERF_EVENT)) as link:
            info, _ = kbpf.link_info(link)
            assert info.type == LinkType.PERF_EVENT
            for _ in range(5):
                os.getppid()
            assert wait_for(lambda: m.lookup(0) >= 5)
        seen = m.lookup(0)
        for _ in range(5):
            os.getppid()
        time.sleep(0.05)
        assert m.lookup(0) - seen < 5, "the program kept running after the link was closed"


def test_bpf_link_ids_are_listed() -> None:
    assert need("bpf_link").supported
    with counter() as m, count_prog(ProgType.RAW_TRACEPOINT, m) as prog, \
            kbpf.raw_tracepoint_open("sys_enter", prog.fd) as link:
        info, name = kbpf.link_info(link)
        assert info.type == LinkType.RAW_TRACEPOINT and name == "sys_enter"
        assert info.id in set(kbpf.iter_ids("link"))
        with kbpf.fd_by_id("link", info.id) as again:
            assert kbpf.link_info(again)[0].id == info.id


def test_raw_tracepoint_link_fires() -> None:
    r = need("raw_tracepoint_link")
    with counter() as m, count_prog(ProgType.RAW_TRACEPOINT, m) as prog:
        with kbpf.raw_tracepoint_open("sys_enter", prog.fd) as link:
            assert (kbpf.obj_kind(link) == "link") == r.supported
            os.getppid()
            assert wait_for(lambda: m.lookup(0) > 0)


def test_uprobe_multi_link_fires_on_bin_true() -> None:
    r = need("uprobe_multi")
    path = os.path.realpath(TRUE)
    offsets = ffi.new("uint64_t[1]", [entry_offset(path)])
    cpath = ffi.new("char[]", path.encode())

    def fill(attr: Any) -> None:
        attr.link_create.uprobe_multi.path = kbpf.addr(cpath)
        attr.link_create.uprobe_multi.offsets = kbpf.addr(offsets)
        attr.link_create.uprobe_multi.cnt = 1

    with counter() as m, count_prog(ProgType.KPROBE, m, attach_type=AttachType.TRACE_UPROBE_MULTI) as prog:
        if not r.supported:
            with pytest.raises(KernelError):
                kbpf.link_create(prog.fd, 0, int(AttachType.TRACE_UPROBE_MULTI), fill=fill)
            return
        with kbpf.link_create(prog.fd, 0, int(AttachType.TRACE_UPROBE_MULTI), fill=fill) as link:
            assert kbpf.link_info(link)[0].type == LinkType.UPROBE_MULTI
            subprocess.run([path], check=True)
            subprocess.run([path], check=True)
            assert wait_for(lambda: m.lookup(0) >= 2)


def test_kprobe_multi() -> None:
    r = need("kprobe_multi")
    sym = ffi.new("char[]", syscall_symbol("getppid").encode())
    syms = ffi.new("uint64_t[1]", [kbpf.addr(sym)])

    def fill(attr: Any) -> None:
        attr.link_create.kprobe_multi.cnt = 1
        attr.link_create.kprobe_multi.syms = kbpf.addr(syms)

    with counter() as m, count_prog(ProgType.KPROBE, m, attach_type=AttachType.TRACE_KPROBE_MULTI) as prog:
        if r.supported:
            with kbpf.link_create(prog.fd, 0, int(AttachType.TRACE_KPROBE_MULTI), fill=fill):
                os.getppid()
                assert wait_for(lambda: m.lookup(0) > 0)
            return
        with pytest.raises(KernelError) as info:
            kbpf.link_create(prog.fd, 0, int(AttachType.TRACE_KPROBE_MULTI), fill=fill)
        assert errno_name(info.value.errno) in r.reason
        if ON_HOST:
            assert info.value.errno == errno.EOPNOTSUPP


# ------------------------------------------------------------------------------ probes
def test_uprobe_pmu_fires_on_bin_true() -> None:
    r = need("uprobe_pmu")
    path = os.path.realpath(TRUE)
    if not r.supported:
        with pytest.raises(NotSupportedError):
            uprobe_event(path, entry_offset(path))
        return
    with counter() as m, count_prog(ProgType.KPROBE, m) as prog, uprobe_event(path, entry_offset(path)) as ev:
        with attached(prog, ev):
            subprocess.run([path], check=True)
            assert wait_for(lambda: m.lookup(0) >= 1)


SEMAPHORE_PROGRAM = r"""
#include <stdio.h>
unsigned short bpfkit_semaphore __attribute__((section(".probes"), used)) = 0;
__attribute__((noinline)) void bpfkit_probed(void) { __asm__ volatile("" ::: "memory"); }
int main(void) { bpfkit_probed(); printf("%u\n", (unsigned)bpfkit_semaphore); return 0; }
"""


def test_uprobe_ref_ctr_increments_the_semaphore(tmp_path: Path) -> None:
    r = need("uprobe_ref_ctr_pmu")
    if shutil.which("gcc") is None:
        pytest.skip("needs gcc to build a binary with a USDT-style semaphore")
    src, exe = tmp_path / "sema.c", tmp_path / "sema"
    src.write_text(SEMAPHORE_PROGRAM)
    subprocess.run(["gcc", "-O1", "-o", str(exe), str(src)], check=True)
    assert subprocess.run([str(exe)], capture_output=True, text=True).stdout.strip() == "0"
    func, sema = symbol_offset(str(exe), "bpfkit_probed"), symbol_offset(str(exe), "bpfkit_semaphore")
    if not r.supported:
        with pytest.raises(NotSupportedError):
            uprobe_event(str(exe), func, ref_ctr_offset=sema)
        return
    with counter() as m, count_prog(ProgType.KPROBE, m) as prog, \
            uprobe_event(str(exe), func, ref_ctr_offset=sema) as ev, attached(prog, ev):
        out = subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout.strip()
        assert out == "1", "the kernel did not increment the semaphore at ref_ctr_offset"
        assert wait_for(lambda: m.lookup(0) >= 1)


def _tracefs_event(kind: str, definition: str) -> Iterator[tuple[str, str]]:
    group, event = "bpfkit_test", f"e{os.getpid()}"
    tracefs.append_line(f"{kind}_events", f"p:{group}/{event} {definition}\n")
    try:
        yield group, event
    finally:
        tracefs.append_line(f"{kind}_events", f"-:{group}/{event}\n")


def test_uprobe_events_fire_on_bin_true() -> None:
    r = need("uprobe_events")
    path = os.path.realpath(TRUE)
    definition = f"{path}:{entry_offset(path):#x}"
    if not r.supported:
        with pytest.raises(OSError):
            tracefs.append_line("uprobe_events", f"p:bpfkit_test/e{os.getpid()} {definition}\n")
        return
    gen = _tracefs_event("uprobe", definition)
    group, event = next(gen)
    try:
        with counter() as m, count_prog(ProgType.KPROBE, m) as prog, tracepoint_event(group, event) as ev, attached(prog, ev):
            subprocess.run([path], check=True)
            assert wait_for(lambda: m.lookup(0) >= 1)
    finally:
        next(gen, None)
    assert f"{group}/{event}" not in tracefs.read_file("uprobe_events")


def test_kprobe_pmu() -> None:
    r = need("kprobe_pmu")
    if not r.supported:
        with pytest.raises(NotSupportedError) as info:
            pmu.pmu_type("kprobe")
        assert info.value.reason == r.reason
        assert not os.path.exists("/sys/bus/event_source/devices/kprobe")
        return
    attr = perf.new_attr()
    attr.type = pmu.pmu_type("kprobe")
    sym = ffi.new("char[]", syscall_symbol("getppid").encode())
    attr.config1 = kbpf.addr(sym)
    with counter() as m, count_prog(ProgType.KPROBE, m) as prog, \
            perf.perf_event_open(attr, -1, 0, what="kprobe getppid") as ev, attached(prog, ev):
        os.getppid()
        assert wait_for(lambda: m.lookup(0) > 0)


def test_kprobe_events() -> None:
    r = need("kprobe_events")
    definition = syscall_symbol("getppid")
    if not r.supported:
        with pytest.raises(OSError) as info:
            tracefs.append_line("kprobe_events", f"p:bpfkit_test/e{os.getpid()} {definition}\n")
        if ON_HOST:
            assert info.value.errno == errno.ENOENT and "does not exist" in r.reason
        return
    gen = _tracefs_event("kprobe", definition)
    group, event = next(gen)
    try:
        with counter() as m, count_prog(ProgType.KPROBE, m) as prog, tracepoint_event(group, event) as ev, attached(prog, ev):
            os.getppid()
            assert wait_for(lambda: m.lookup(0) > 0)
    finally:
        next(gen, None)


# --------------------------------------------------------------------------------- BTF
def _btf_bytes(fd: FD) -> bytes:
    info = kbpf.obj_info(fd, "struct bpf_btf_info")
    size = int(info.btf_size)
    buf = ffi.new("char[]", size)
    info = ffi.new("struct bpf_btf_info *")
    info.btf = kbpf.addr(buf)
    info.btf_size = size
    kbpf.obj_info_into(fd, info, ffi.sizeof("struct bpf_btf_info"))
    return ffi.buffer(buf, size)[:]


@pytest.mark.parametrize("name", sorted(probes.BTF_BLOBS))
def test_btf_blob_loads_and_reads_back(name: str) -> None:
    r = need(name)
    blob = probes.BTF_BLOBS[name]()
    if not r.supported:
        with pytest.raises(KernelError):
            kbpf.btf_load(blob)
        return
    with kbpf.btf_load(blob) as fd:
        assert _btf_bytes(fd) == blob
        btf_id = int(kbpf.obj_info(fd, "struct bpf_btf_info").id)
        assert btf_id in set(kbpf.iter_ids("btf"))


def test_btf_value_types_on_a_map() -> None:
    """sk_storage-style BTF (int, struct with a spin lock) used as a map's key/value types."""
    assert need("btf").supported
    with kbpf.btf_load(probes.local_storage_btf()) as btf:
        spec = MapSpec(name="btfmap", type=MapType.HASH, key_size=4, value_size=8, max_entries=4,
                       btf_key_type_id=1, btf_value_type_id=3)
        with Map(spec, btf_fd=btf.raw) as m:
            info = m.info()
            assert info.btf_key_type_id == 1 and info.btf_value_type_id == 3
            m.update(1, b"\1\0\0\0\0\0\0\0")
            assert m.lookup(1)[:4] == b"\1\0\0\0"


# ------------------------------------------------------------------ program / map types
PROG_TYPES = [pt for pt in ProgType if pt != ProgType.UNSPEC]


@pytest.mark.parametrize("prog_type", PROG_TYPES, ids=lambda pt: pt.kernel_name)
def test_program_type(prog_type: ProgType) -> None:
    r = need(f"prog_type_{prog_type.kernel_name}")
    kwargs = probes.prog_load_kwargs(prog_type)
    with Program(ProgramSpec(name="target", type=ProgType.SOCKET_FILTER, instructions=asm.return_imm(0))) as target:
        spec = ProgramSpec(
            name="pt", type=prog_type, instructions=asm.return_imm(0),
            attach_type=AttachType(kwargs["expected_attach_type"]) if "expected_attach_type" in kwargs else None,
            flags=kwargs.get("prog_flags", 0), attach_btf_id=kwargs.get("attach_btf_id", 0),
            attach_prog_fd=target.fd.raw if prog_type == ProgType.EXT else 0,
        )
        if r.supported and (prog_type in probes.BTF_TARGET_MESSAGES or prog_type == ProgType.STRUCT_OPS):
            # Loadable only against a real BTF target (a kernel function, a struct_ops
            # member): the real attempt without one fails the way the probe read as "known".
            with pytest.raises(KernelError) as info:
                Program(spec)
            assert info.value.errno in (errno.EINVAL, probes.ENOTSUPP)
            if prog_type in probes.BTF_TARGET_MESSAGES:
                assert any(m in info.value.log for m in probes.BTF_TARGET_MESSAGES[prog_type])
            return
        if not r.supported:
            with pytest.raises(KernelError) as info:
                Program(spec)
            assert errno_name(info.value.errno) in r.reason, (str(info.value), r.reason)
            return
        with Program(spec) as prog:
            assert prog.info().type == prog_type
            if prog_type in (ProgType.SOCKET_FILTER, ProgType.SCHED_CLS, ProgType.XDP):
                retval, _ = prog.test_run(b"\0" * 64)
                assert retval == 0


MAP_TYPES = [mt for mt in MapType if mt != MapType.UNSPEC]
_SIMPLE_KV = {MapType.HASH, MapType.ARRAY, MapType.LRU_HASH, MapType.LPM_TRIE, MapType.RHASH}


@pytest.mark.parametrize("map_type", MAP_TYPES, ids=lambda mt: mt.kernel_name)
def test_map_type(map_type: MapType) -> None:
    r = need(f"map_type_{map_type.kernel_name}")
    if map_type == MapType.STRUCT_OPS:
        # A struct_ops map needs a vmlinux struct_ops value type; the probe's bogus id 1 must be
        # ENOTSUPP where the type exists and EINVAL where it does not.
        with pytest.raises(KernelError) as info:
            probes.create_minimal_map(map_type)
        assert info.value.errno == (probes.ENOTSUPP if r.supported else errno.EINVAL)
        return
    if not r.supported:
        with pytest.raises(KernelError) as info:
            probes.create_minimal_map(map_type)
        assert errno_name(info.value.errno) in r.reason
        return
    args = probes.map_create_args(map_type)
    spec = MapSpec(name="mt", type=map_type, key_size=args["key_size"], value_size=args["value_size"],
                   max_entries=args["max_entries"], flags=args["flags"],
                   btf_key_type_id=args.get("btf_key_type_id", 0), btf_value_type_id=args.get("btf_value_type_id", 0))
    with Map(MapSpec(name="inner", type=MapType.ARRAY, key_size=4, value_size=4, max_entries=1)) as inner, \
            kbpf.btf_load(probes.local_storage_btf()) as btf:
        kw: dict[str, Any] = {}
        if map_type in (MapType.ARRAY_OF_MAPS, MapType.HASH_OF_MAPS):
            kw["inner_map_fd"] = inner.fd.raw
        if args.get("btf_key_type_id"):
            kw["btf_fd"] = btf.raw
        with Map(spec, **kw) as m:
            assert m.info().type == map_type
            if map_type in _SIMPLE_KV:
                key = struct.pack("<II", 32, 0x0A000001) if map_type == MapType.LPM_TRIE else struct.pack("<I", 0)
                value = b"\7" * spec.value_size
                m.update(key, value)
                assert m.lookup(key) == value
            elif map_type in (MapType.QUEUE, MapType.STACK):
                kbpf.map_update(m.fd, ffi.NULL, ffi.from_buffer(b"\1\2\3\4"))
                assert m.lookup_and_delete() == b"\1\2\3\4"
            elif map_type in (MapType.ARRAY_OF_MAPS, MapType.HASH_OF_MAPS):
                m.update(0, struct.pack("<I", inner.fd.raw))
            elif map_type == MapType.PROG_ARRAY:
                with Program(ProgramSpec(name="tail", type=ProgType.SOCKET_FILTER, instructions=asm.return_imm(0))) as p:
                    m.update(0, struct.pack("<I", p.fd.raw))
            elif map_type in (MapType.PERCPU_ARRAY, MapType.PERCPU_HASH, MapType.LRU_PERCPU_HASH):
                from bpfkit._kernel.cpus import num_possible_cpus

                values = [struct.pack("<I", i) for i in range(num_possible_cpus())]
                m.update(0, values)
                assert m.lookup(0) == values
            elif map_type in (MapType.RINGBUF, MapType.USER_RINGBUF, MapType.ARENA):
                # The first page is the consumer position: user space writes it for a ring
                # buffer (it consumes) and only reads it for a user ring buffer (it produces).
                prot = mmap.PROT_READ | (0 if map_type == MapType.USER_RINGBUF else mmap.PROT_WRITE)
                with mmap.mmap(m.fd.raw, mmap.PAGESIZE, mmap.MAP_SHARED, prot):
                    pass


# ------------------------------------------------------------- 6.13 .. 7.2 additions
def test_ringbuf_overwrite() -> None:
    r = need("ringbuf_overwrite")
    try:
        fd = kbpf.map_create(int(MapType.RINGBUF), 0, 0, mmap.PAGESIZE, flags=1 << 19)
    except KernelError as exc:
        assert not r.supported and errno_name(exc.errno) in r.reason
        return
    with fd:
        assert r.supported
        with mmap.mmap(fd.raw, mmap.PAGESIZE, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE):
            pass


def test_percpu_cpu_flag_writes_one_cpu() -> None:
    from bpfkit._kernel.cpus import num_possible_cpus

    r = need("percpu_cpu_flag")
    n = num_possible_cpus()
    with kbpf.map_create(int(MapType.PERCPU_ARRAY), 4, 8, 1) as fd:
        key = ffi.new("uint32_t *", 0)
        one = ffi.new("uint64_t[]", [7] + [0] * (n - 1))
        try:
            kbpf.map_update(fd, key, one, probes.BPF_F_CPU | (0 << 32))  # CPU 0 only: one value
        except KernelError as exc:
            assert not r.supported and exc.errno == errno.EINVAL
            return
        assert r.supported
        values = ffi.new("uint64_t[]", n)
        assert kbpf.map_lookup(fd, key, values)
        assert list(values) == [7] + [0] * (n - 1)


def test_prog_stream_read_of_a_quiet_program() -> None:
    r = need("prog_stream_read")
    prog = kbpf.prog_load(int(ProgType.SOCKET_FILTER), asm.return_imm(0), name="stream_probe")
    with prog:
        buf = ffi.new("char[256]")
        attr = kbpf.new_attr()
        struct.pack_into("<QIII", ffi.buffer(attr), 0, int(ffi.cast("uintptr_t", buf)), 256, 2, prog.raw)  # BPF_STDERR
        try:
            got = kbpf.bpf(kbpf.Cmd.PROG_STREAM_READ_BY_FD, attr)
        except KernelError as exc:
            assert not r.supported and exc.errno == errno.EINVAL
            return
        assert r.supported and got == 0  # nothing written to the program's stderr


def test_uprobe_multi_path_fd_attaches_by_fd() -> None:
    r = need("uprobe_multi_path_fd")
    if not features.probe("uprobe_multi"):
        pytest.skip("no uprobe_multi links")
    target = os.path.realpath(shutil.which("true") or "/bin/true")
    entry = _entry_file_offset(target)
    prog = kbpf.prog_load(int(ProgType.KPROBE), asm.return_imm(0), name="pathfd_probe",
                          expected_attach_type=int(AttachType.TRACE_UPROBE_MULTI))
    with prog, open(target, "rb") as f:
        offsets = ffi.new("uint64_t[1]", [entry])

        def fill(attr: Any) -> Any:
            attr.link_create.uprobe_multi.offsets = kbpf.addr(offsets)
            attr.link_create.uprobe_multi.cnt = 1
            attr.link_create.uprobe_multi.flags = 2  # BPF_F_UPROBE_MULTI_PATH_FD
            struct.pack_into("<I", ffi.buffer(attr), 60, f.fileno())
            return offsets

        try:
            kbpf.link_create(prog, 0, int(AttachType.TRACE_UPROBE_MULTI), fill=fill).close()
        except KernelError as exc:
            assert not r.supported and exc.errno == errno.EINVAL, exc
            return
        assert r.supported


def _entry_file_offset(path: str) -> int:
    with open(path, "rb") as f:
        elf = ELFFile(f)
        entry = elf.header.e_entry
        for seg in elf.iter_segments():
            if seg["p_type"] == "PT_LOAD" and seg["p_vaddr"] <= entry < seg["p_vaddr"] + seg["p_filesz"]:
                return entry - seg["p_vaddr"] + seg["p_offset"]
    raise AssertionError(f"no PT_LOAD holds the entry of {path}")


def test_session_kfunc_prototypes_match_the_probes() -> None:
    """kfunc_session_ctx tells which prototype the kernel has; the session object's weak externs
    resolve the matching flavor (bpf/session_probes.bpf.c loads either way)."""
    session, ctx = features.probe("kfunc_session"), features.probe("kfunc_session_ctx")
    if not session:
        pytest.skip(f"no session kfuncs (Linux {session.min_version}+): {session.reason}")
    assert ("0 arguments" in session.reason) != bool(ctx)


def test_record_answers(record_testsuite_property: Any) -> None:
    """Every probe's answer on this kernel, as a junit property for scripts/record_features.py
    (docs/features-kernels.json, the per-kernel columns of docs/features.md)."""
    from bpfkit._kernel import kinfo

    results = features.probe_all()
    try:
        text, _ = kinfo.read_kconfig()
    except Exception:  # noqa: BLE001 - no config in this VM: scripts/record_features.py reads the package's
        text = ""
    config = probes.recorded_config(text)
    record_testsuite_property("bpfkit_features", json.dumps(
        {"release": os.uname().release, "config": config,
         "answers": {n: {"supported": r.supported, "reason": r.reason} for n, r in results.items()}},
        sort_keys=True))


_BTF_KINDS_FRESH = """
import dataclasses, json, os, sys, uuid
from bpfkit import features
fast = {n: dataclasses.astuple(features.probe(n)) for n in features._btf_kinds.KINDS}
without = "bpfkit.features.probes" not in sys.modules
from bpfkit.features import probes
features.clear_cache()
slow = {n: dataclasses.astuple(features.probe(n)) for n in features._btf_kinds.KINDS}
direct = {n: [n, *probes.run(n), probes.REGISTRY[n].min_version] for n in features._btf_kinds.KINDS}
print(json.dumps([without, fast, slow, direct]))
"""

_LOAD_FRESH = """
import os, sys, uuid
from bpfkit.cli.main import main
pins = "/sys/fs/bpf/bpfkit-btfkinds-" + uuid.uuid4().hex[:8]
os.mkdir(pins)
try:
    rc = main(["load", sys.argv[1], pins])
finally:
    os.system("rm -rf " + pins)
print(rc, "bpfkit.features.probes" in sys.modules, "bpfkit.features" in sys.modules)
"""


def test_btf_kind_probes_answer_the_same_without_the_probes_module() -> None:
    # features.probe runs the BTF-kind probes from features._btf_kinds until something imports
    # features.probes (~1.4 ms: bpfkit load asks only these); the answers must be the same.
    out = subprocess.run([sys.executable, "-c", _BTF_KINDS_FRESH], capture_output=True, text=True, check=True,
                         cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)})
    without, fast, slow, direct = json.loads(out.stdout)
    assert without
    assert fast == slow == direct
    assert fast["btf"][1] is True and fast["btf_func"][2] == "BPF_BTF_LOAD accepted a blob with BTF_KIND_FUNC and BTF_KIND_FUNC_PROTO"
    assert [n for n in features.names() if n in features._btf_kinds.KINDS] == list(features._btf_kinds.KINDS)


def test_bpfkit_load_does_not_import_the_probes_module() -> None:
    obj = REPO / "bpf/.output/minimal.bpf.o"  # its BTF has FUNC and DATASEC: those probes run
    out = subprocess.run([sys.executable, "-c", _LOAD_FRESH, str(obj)], capture_output=True, text=True, check=True,
                         cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert out.stdout.splitlines()[-1] == "0 False True", out.stdout + out.stderr


def test_vmlinux_btf_probes_find_what_find_by_kind_finds() -> None:
    """The BTF probes look their names up in batches (probes._vmlinux_types): the same types,
    in the same order, as vmlinux's find(name, kind) of each kind asked."""
    from bpfkit import kernel_btf as kernel
    from bpfkit.btf.types import Kind

    try:
        vmlinux = kernel.vmlinux()
    except (OSError, NotSupportedError) as exc:
        pytest.skip(f"no vmlinux BTF: {exc}")
    for group in (probes._NAMED_QUESTIONS, probes._KFUNC_QUESTIONS):
        for name, kinds in group.items():
            want = sorted((t for k in kinds for t in vmlinux.find(name, Kind(k))), key=lambda t: t.id)
            assert [t.id for t in probes._vmlinux_types(name, group)] == [t.id for t in want], name
