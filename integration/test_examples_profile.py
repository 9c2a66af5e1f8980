# SPDX-License-Identifier: Apache-2.0
"""examples/profile and examples/offcputime on the C workload of integration/stack_workload.py: 2 s at 99 Hz on every
CPU, limited to the workload's pid. At least 90% of its samples must end (in user space) in
spin with c, b, a, main below it in order, for the copy with symbols and for the stripped
copy whose debug file is found by build id (--debug-root). And kernel frames: a workload
calling getppid(2) in a loop shows the syscall's kernel function in the kernel part.
examples/offcputime on the workload sleeping 10 ms at a time inside spin: at least 90% of
its time off CPU under main;a;b;c;spin, the kernel part through schedule."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from bpfkit.profile import KERNEL_SUFFIX, from_folded
from integration.stack_workload import CHAIN, Workload, build

REPO = Path(__file__).resolve().parent.parent
PROFILE = REPO / "examples" / "profile" / "profile.py"
OFFCPUTIME = REPO / "examples" / "offcputime" / "offcputime.py"


@pytest.fixture(scope="module")
def workload(tmp_path_factory: pytest.TempPathFactory) -> Workload:
    return build(tmp_path_factory.mktemp("profile"))


def profile(bpf_obj: Any, binary: Path, mode: str, out: Path, *extra: str, tool: Path = PROFILE) -> str:
    bpf_obj("stacks")  # builds bpf/ (examples included) once
    proc = subprocess.Popen([str(binary), mode, "30"])
    try:
        run = subprocess.run([sys.executable, str(tool), "--pid", str(proc.pid), "--duration", "2",
                              "--output", str(out), *extra], capture_output=True, text=True, timeout=120, check=False,
                             env=dict(os.environ, PYTHONPATH=str(REPO)))
    finally:
        proc.kill()
        proc.wait()
    assert run.returncode == 0, run.stderr
    return run.stderr


@pytest.mark.parametrize("copy", ["workload", "stripped"])
def test_profile_chain(bpf_obj: Any, workload: Workload, tmp_path: Path, copy: str) -> None:
    out = tmp_path / "p.folded"
    profile(bpf_obj, getattr(workload, copy), "spin", out, "--debug-root", str(workload.debug_root))
    prof = from_folded(out.read_text())
    total = prof.total
    good = 0
    for stack, n in prof.stacks.items():
        assert stack[0] == copy  # comm
        user = [f for f in stack if not f.endswith(KERNEL_SUFFIX)]
        if user[-5:] == CHAIN[::-1]:
            good += n
    assert total >= 20, f"only {total} samples in 2 s"
    assert good >= 0.9 * total, prof.stacks.most_common(5)


def test_profile_kernel_frames(bpf_obj: Any, workload: Workload, tmp_path: Path) -> None:
    out = tmp_path / "k.folded"
    profile(bpf_obj, workload.workload, "getppid", out)
    prof = from_folded(out.read_text())
    kernel = [f for stack in prof.stacks for f in stack if f.endswith(KERNEL_SUFFIX)]
    if not kernel:
        pytest.skip("no kernel frames in any sample: this kernel gave no kernel stacks to the perf_event program")
    hits = sum(n for stack, n in prof.stacks.items()
               if any("getppid" in f and f.endswith(KERNEL_SUFFIX) for f in stack))
    assert hits, prof.stacks.most_common(5)
    # The kernel part sits above the user part: comm; ...; getppid (libc); entry_SYSCALL_64_[k]; ...
    # (main is often missing: libc's getppid stub keeps no frame pointer, so the frame-pointer
    # unwinder goes from it straight to main's caller, as with perf record -g.)
    stack = next(s for s in prof.stacks if any("getppid" in f and f.endswith(KERNEL_SUFFIX) for f in s))
    first_k = next(i for i, f in enumerate(stack) if f.endswith(KERNEL_SUFFIX))
    assert any("getppid" in f for f in stack[:first_k]), stack
    assert all(f.endswith(KERNEL_SUFFIX) for f in stack[first_k:]), stack
    # The syscall's own function (__x64_sys_getppid, __arm64_sys_getppid, __do_sys_getppid;
    # sys_getppid before 4.17's wrappers) is named, below the syscall entry.
    names = [f.removesuffix(KERNEL_SUFFIX) for f in stack[first_k:]]
    print("kernel part:", ";".join(names))
    assert any(n.endswith("sys_getppid") for n in names), names


def test_profile_outputs(bpf_obj: Any, workload: Workload, tmp_path: Path) -> None:
    """The other formats from the same run shape: pprof read back, speedscope, SVG."""
    pytest.importorskip("google.protobuf", reason="pprof output needs the protobuf package")
    from bpfkit.profile.pprof import from_pprof

    out = tmp_path / "p.pprof"
    err = profile(bpf_obj, workload.workload, "spin", out)
    assert "spin" in err.splitlines()[-5:][0] or "spin" in err
    prof = from_pprof(out.read_bytes())
    assert prof.top(1)[0][0] == "spin" and prof.period == 1_000_000_000 // 99


def test_offcputime(bpf_obj: Any, workload: Workload, tmp_path: Path) -> None:
    import platform

    if platform.machine() != "x86_64":
        pytest.skip("the workload calls nanosleep(2) from spin with x86-64 inline assembly")
    out = tmp_path / "off.folded"
    err = profile(bpf_obj, workload.workload, "sleep", out, tool=OFFCPUTIME)
    assert "microseconds" in err
    prof = from_folded(out.read_text())
    total = prof.total
    good = sum(n for stack, n in prof.stacks.items()
               if [f for f in stack if not f.endswith(KERNEL_SUFFIX)][-5:] == CHAIN[::-1])
    assert total >= 1_000_000, f"only {total} us off CPU in 2 s of 10 ms sleeps"  # ~2 s
    assert good >= 0.9 * total, prof.stacks.most_common(3)
    kernel = [f for stack in prof.stacks for f in stack if f.endswith(KERNEL_SUFFIX)]
    if kernel:  # the sleeping part: nanosleep's path into the scheduler
        assert any(f.startswith("schedule") or f.startswith("__schedule") for f in kernel), kernel[:10]
