# SPDX-License-Identifier: Apache-2.0
"""bpfkit.symbols on real files and processes: a C workload with a known call chain built here
(integration/stack_workload.py), in four copies (symbols; stripped with a debug file by build
id; stripped with MiniDebugInfo; stripped bare), resolved in a live process through
/proc/PID/maps; /proc/kallsyms; perf maps; stack decoding. The expected addresses are computed
with pyelftools, independently of bpfkit's ELF reader."""

from __future__ import annotations

import os
import struct
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from bpfkit.errors import KernelPermissionError
from bpfkit.symbols import Frame, KernelSymbols, Symbolizer, decode_build_id_stack, decode_stack
from integration.stack_workload import Workload, build


@pytest.fixture(scope="module")
def workload(tmp_path_factory: pytest.TempPathFactory) -> Workload:
    return build(tmp_path_factory.mktemp("stacks"))


def _running(path: Path) -> Iterator[subprocess.Popen[bytes]]:
    """``path spin 60`` running, its executable segment mapped. Popen can return before that:
    a vfork parent resumes when execve() swaps in the new mm, before the ELF's segments are
    mapped into it; Python 3.13's posix_spawn() path returns fast enough to read that window's
    /proc/PID/maps (seen in 154 of 200 starts; never with 3.11's own vfork path)."""
    proc = subprocess.Popen([str(path), "spin", "60"])
    deadline = time.monotonic() + 10
    while not any(line.endswith(str(path)) and " r-x" in line
                  for line in Path(f"/proc/{proc.pid}/maps").read_text().splitlines()):
        assert time.monotonic() < deadline, f"{path} was not mapped in process {proc.pid} after 10 s"
        time.sleep(0.001)
    try:
        yield proc
    finally:
        proc.kill()
        proc.wait()


def _runtime_address(unstripped: Path, running_path: Path, pid: int, name: str, delta: int) -> int:
    """Where ``name`` + delta is in process ``pid`` (which runs a copy of ``unstripped`` at
    ``running_path``), by pyelftools and /proc/PID/maps."""
    from elftools.elf.elffile import ELFFile

    with open(unstripped, "rb") as f:
        elf = ELFFile(f)
        sym = elf.get_section_by_name(".symtab").get_symbol_by_name(name)[0]
        vaddr = sym["st_value"] + delta
        seg = next(s for s in elf.iter_segments() if s["p_type"] == "PT_LOAD"
                   and s["p_vaddr"] <= vaddr < s["p_vaddr"] + s["p_memsz"])
        offset = vaddr - seg["p_vaddr"] + seg["p_offset"]
    for line in Path(f"/proc/{pid}/maps").read_text().splitlines():
        parts = line.split()
        if len(parts) >= 6 and parts[5] == str(running_path) and "x" in parts[1]:
            lo, hi = (int(x, 16) for x in parts[0].split("-"))
            pgoff = int(parts[2], 16)
            if pgoff <= offset < pgoff + hi - lo:
                return lo + offset - pgoff
    raise AssertionError(f"no executable mapping of {running_path} holds file offset {offset:#x}")


@pytest.mark.parametrize("copy,found", [("workload", ".symtab"), ("stripped", "debug"), ("mini", ".gnu_debugdata"),
                                        ("bare", None)])
def test_user_frames_by_copy(workload: Workload, copy: str, found: str | None) -> None:
    path = getattr(workload, copy)
    # The copies share one build id: only "stripped" gets to see the debug directory.
    sym = Symbolizer(debug_root=str(workload.debug_root if copy == "stripped" else workload.dir / "nodebug"))
    for proc in _running(path):
        for name in ("spin", "c", "b", "a", "main"):
            addr = _runtime_address(workload.workload, path, proc.pid, name, 4)
            frame = sym.user_frame(proc.pid, addr)
            if found is None:
                assert frame == Frame(addr, None, frame.offset, str(path)), frame
                assert frame.label == f"[{copy}]"
            else:
                assert frame == Frame(addr, name, 4, str(path)), frame
        fs = sym.file(str(path))
        assert fs is not None and fs.build_id == workload.build_id
        if found == "debug":
            assert fs.sources[-1] == str(workload.debug_root / ".build-id" / workload.build_id[:2]
                                         / f"{workload.build_id[2:]}.debug")
        elif found is not None:
            assert found in fs.sources


def test_debug_file_of_another_build_is_ignored(workload: Workload, tmp_path: Path) -> None:
    """A debug file at the build id's path whose own build id differs (stale) is not used."""
    bid = workload.build_id
    (tmp_path / ".build-id" / bid[:2]).mkdir(parents=True)
    other = tmp_path / "other"
    other.write_text("int main(void) { return 0; }\n")
    subprocess.run(["gcc", "-g", "-xc", "-o", str(tmp_path / "other.bin"), str(other)], check=True)
    os.link(tmp_path / "other.bin", tmp_path / ".build-id" / bid[:2] / f"{bid[2:]}.debug")
    fs = Symbolizer(debug_root=str(tmp_path)).file(str(workload.stripped))
    assert fs is not None and fs.sources == [".dynsym"]


def test_file_cache_keyed_by_stat(workload: Workload, tmp_path: Path) -> None:
    copy = tmp_path / "w"
    copy.write_bytes(workload.workload.read_bytes())
    sym = Symbolizer()
    first = sym.file(str(copy))
    assert first is not None and sym.file(str(copy)) is first
    os.symlink(copy, tmp_path / "link")
    assert sym.file(str(tmp_path / "link")) is first  # the same inode by another path: read once
    st = copy.stat()
    os.utime(copy, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))
    assert sym.file(str(copy)) is not first  # rebuilt (mtime changed): read again
    assert sym.file(str(tmp_path / "missing")) is None


def test_perf_map(tmp_path: Path) -> None:
    """/tmp/perf-PID.map (here in a temp dir) resolves addresses no file mapping holds."""
    proc = subprocess.Popen(["sleep", "30"])
    try:
        (tmp_path / f"perf-{proc.pid}.map").write_text(
            "7f0000001000 40 py::spin:/tmp/x.py\n7f0000000000 100 jitted function with spaces\nbad line\n")
        sym = Symbolizer(perf_map_dir=str(tmp_path))
        assert sym.user_frame(proc.pid, 0x7F0000001010) == Frame(0x7F0000001010, "py::spin:/tmp/x.py", 0x10,
                                                                 "[perf-map]")
        assert sym.user_frame(proc.pid, 0x7F00000000FF).name == "jitted function with spaces"
        assert sym.user_frame(proc.pid, 0x7F0000001040).name is None  # past the entry's size
    finally:
        proc.kill()
        proc.wait()


@pytest.mark.root  # /proc/kallsyms reads every address as 0 without CAP_SYSLOG (kptr_restrict)
def test_kallsyms() -> None:
    ksyms = KernelSymbols.load()
    assert len(ksyms) > 10_000
    for name in ("__x64_sys_getppid", "__arm64_sys_getppid", "sys_getppid"):
        addr = ksyms.address(name)
        if addr is not None:
            break
    else:
        pytest.skip("no getppid syscall symbol in /proc/kallsyms")
    found = ksyms.lookup(addr + 3)
    # One of the names at that address (aliases: __ia32_sys_getppid, __x64_sys_getppid; a
    # global one over the local __do_sys_getppid).
    assert found is not None and found.offset == 3 and found.module == "" and "getppid" in found.name
    assert ksyms.address(found.name) == addr and not found.name.startswith("__do_sys")
    sym = Symbolizer()
    assert sym.kernel_frame(addr) == Frame(addr, found.name, 0, "[kernel]")
    assert ksyms.lookup(0) is None
    mods = [m for m in ksyms.modules if m and m != "bpf"]
    if mods:  # a module's symbol carries its name
        at = next(ksyms.address_at(i) for i in range(len(ksyms)) if ksyms.entry(i)[1] == mods[0])
        assert ksyms.lookup(at).module == mods[0]  # type: ignore[union-attr]
        assert sym.kernel_frame(at).module == f"[{mods[0]}]"


def test_kallsyms_hidden_by_kptr_restrict() -> None:
    """An all-zero table is what kptr_restrict gives a reader without CAP_SYSLOG. Synthesized:
    this test runs as root on a shared host, where setting kernel.kptr_restrict=2 (which hides
    addresses from root too) would break the other sessions' kallsyms reads meanwhile."""
    text = b"0000000000000000 T _stext\n0000000000000000 t foo\t[ext4]\n0000000000000000 D data\n"
    with pytest.raises(KernelPermissionError) as info:
        KernelSymbols(text)
    msg = str(info.value)
    assert msg.startswith("read /proc/kallsyms: EPERM (Operation not permitted): every address reads as 0 "
                          "(kernel.kptr_restrict="), msg
    assert "needs CAP_SYSLOG" not in msg and "kernel symbols need CAP_SYSLOG" in msg
    assert info.value.capability == "CAP_SYSLOG"


def test_decode_stacks() -> None:
    raw = struct.pack("<6Q", 0x401000, 0x402000, 0x403000, 0, 0, 0)
    assert decode_stack(raw) == [0x401000, 0x402000, 0x403000]
    assert decode_stack(raw, size=16) == [0x401000, 0x402000]
    assert decode_stack(b"") == []
    bid = bytes(range(20))
    entries = (struct.pack("<i20sQ", 1, bid, 0x1139) + struct.pack("<i20sQ", 2, bytes(20), 0x7F00DEAD)
               + struct.pack("<i20sQ", 0, bytes(20), 0) + struct.pack("<i20sQ", 1, bid, 5))
    assert decode_build_id_stack(entries) == [(bid.hex(), 0x1139), (None, 0x7F00DEAD)]
    with pytest.raises(Exception, match="not a whole number of 32-byte struct bpf_stack_build_id"):
        decode_build_id_stack(entries[:40])


@pytest.mark.root  # /proc/kallsyms reads every address as 0 without CAP_SYSLOG (kptr_restrict)
def test_kallsyms_lookups_match_a_plain_parse() -> None:
    """KernelSymbols (blocks of addresses converted on first use, non-text lines stepped over)
    against a plain reading of the same text: text symbols only, sorted, at each address a
    global one (T, W) over a local one."""
    import random
    from bisect import bisect_right

    from bpfkit._kernel.kallsyms import _BLOCK

    with open("/proc/kallsyms", "rb") as f:
        text = f.read()
    ksyms = KernelSymbols(text)
    best: dict[int, tuple[bool, str, str]] = {}
    for line in text.decode().splitlines():
        addr_s, kind, rest = line.split(" ", 2)
        if kind not in "tTwW":
            continue
        name, _, mod = rest.partition("\t")
        addr, rank = int(addr_s, 16), (kind in "TW", name, mod.strip("[]"))
        if addr not in best or rank > best[addr]:  # global first; then the last name, as sorted lines have it
            best[addr] = rank
    starts = sorted(best)
    sym = Symbolizer()
    sym._kernel = ksyms  # kernel_frame has its own (inlined) copy of the lookup: checked on the same table
    rng = random.Random(27)
    # Random text addresses, and the lines around block boundaries (where a lookup's block
    # starts mid-group).
    probes = [starts[rng.randrange(len(starts))] + rng.randrange(64) for _ in range(3000)]
    probes += [ksyms.address_at(i) + d for i in range(_BLOCK, len(ksyms), _BLOCK) for d in (-1, 0, 1)]
    for addr in probes:
        i = bisect_right(starts, addr) - 1
        want = None if i < 0 else (best[starts[i]][1], addr - starts[i], best[starts[i]][2])
        got = ksyms.lookup(addr)
        assert (None if got is None else tuple(got)) == want, hex(addr)
        f = sym.kernel_frame(addr)
        assert (f.name, f.offset) == ((want[0], want[1]) if want else (None, addr)), hex(addr)


def test_file_lookups_scan_then_index(workload: Workload) -> None:
    """A file's first lookups scan its functions, later ones bisect a sorted index: the same
    answers for every offset of its executable segment (the workload with symbols, and libc
    with its debug file when one is installed)."""
    import random

    from bpfkit.symbols import elf as symelf

    rng = random.Random(27)
    # The workload has a full .symtab, so most offsets of its code are named. libc without its
    # debug file (Debian's libc6-dbg) has only .dynsym, its exported functions: about a third.
    for path, named_share in ((str(workload.workload), 0.5), ("/usr/lib/x86_64-linux-gnu/libc.so.6", 0.2)):
        if not os.path.exists(path):
            continue
        fs = symelf.FileSymbols.load(path)
        off, size = next((o, s) for o, s, _, x in fs._loads if x)
        offsets = [rng.randrange(off, off + size) for _ in range(2000)]
        for o in offsets[:50]:
            fs.lookup(o)  # the debug file, if any, is read on the first miss
        scanned = []
        for o in offsets:
            fs._starts, fs._scans = None, 0
            scanned.append(fs.lookup(o))
        fs._index()
        assert [fs.lookup(o) for o in offsets] == scanned
        assert sum(1 for s in scanned if s) > len(offsets) * named_share, path
