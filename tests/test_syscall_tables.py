# SPDX-License-Identifier: Apache-2.0
"""bpfkit/metrics/syscall_tables.py (made by scripts/gen_syscalls.py from the kernel's syscall
tables) against the running kernel: every syscall this kernel has is named.

Which ``__x64_sys_NAME`` (``__arm64_sys_NAME``) symbols are syscalls of this machine's 64-bit
table: those with a ``syscalls:sys_enter_NAME`` tracepoint. The kernel registers that event
only for a SYSCALL_DEFINE found in its sys_call_table (kernel/trace/trace_syscalls.c,
init_syscall_trace: "metadata not mapped, disabling ftrace event"), so the 16-bit-uid, time32
and ia32 stubs that kallsyms also lists are left out.
"""

from __future__ import annotations

import os
import platform
import subprocess
import sys
from pathlib import Path

import pytest

from bpfkit._kernel import kallsyms, tracefs
from bpfkit.errors import BPFKitError
from bpfkit.metrics.syscall_tables import ARM64, KERNEL, X86_64, syscall_name

REPO = Path(__file__).resolve().parent.parent

# Entry points named otherwise than their syscall, from the tables' entry point column
# (syscall_64.tbl: "4 common stat sys_newstat"; scripts/syscall.tbl for arm64).
ENTRY_ALIASES = {
    "x86_64": {"newstat": "stat", "newfstat": "fstat", "newlstat": "lstat", "sendfile64": "sendfile",
               "newuname": "uname", "umount": "umount2"},
    "aarch64": {"umount": "umount2", "sendfile64": "sendfile", "newfstat": "fstat", "newuname": "uname",
                "fadvise64_64": "fadvise64"},
}
STUB_PREFIX = {"x86_64": "__x64_sys_", "aarch64": "__arm64_sys_"}


def _running_syscalls(machine: str) -> set[str]:
    """The SYSCALL_DEFINE names of this kernel's 64-bit syscall table (kallsyms stubs that
    have a syscall tracepoint)."""
    try:
        names = kallsyms.function_names(types=("t", "T"))
    except OSError as exc:
        pytest.skip(f"/proc/kallsyms is not readable: {exc}")
    prefix = STUB_PREFIX[machine]
    stubs = {n[len(prefix):] for n in names if n.startswith(prefix)}
    if not stubs:
        pytest.skip(f"/proc/kallsyms lists no {prefix}* symbol (names hidden, or a kernel without syscall wrappers)")
    try:
        events = os.listdir(os.path.join(tracefs.tracefs_root(), "events", "syscalls"))
    except (OSError, BPFKitError) as exc:
        pytest.skip(f"no syscall tracepoints to tell 64-bit syscalls from other stubs (CONFIG_FTRACE_SYSCALLS): {exc}")
    traced = {e[len("sys_enter_"):] for e in events if e.startswith("sys_enter_")}
    return stubs & traced


@pytest.mark.skipif(platform.machine() not in STUB_PREFIX, reason=f"no syscall table for {platform.machine()}")
def test_every_syscall_of_the_running_kernel_has_a_number() -> None:
    machine = platform.machine()
    running = _running_syscalls(machine)
    assert len(running) > 250, sorted(running)  # the test sees the kernel's table at all
    table = set((X86_64 if machine == "x86_64" else ARM64).values())
    aliases = ENTRY_ALIASES[machine]
    missing = sorted(n for n in running if aliases.get(n, n) not in table)
    assert not missing, f"syscalls of {os.uname().release} not in Linux {KERNEL}'s table: {missing}"


def test_anchors() -> None:
    assert syscall_name(0, "x86_64") == "read"
    assert syscall_name(39, "x86_64") == "getpid"
    assert syscall_name(110, "x86_64") == "getppid"
    assert syscall_name(451, "x86_64") == "cachestat"
    assert syscall_name(454, "x86_64") == "futex_wake"
    assert syscall_name(462, "x86_64") == "mseal"
    assert syscall_name(469, "x86_64") == "file_setattr"
    # arm64's generic table: its own numbers, the arm64 ABIs in, 32-bit-only ones out
    assert syscall_name(63, "aarch64") == "read"
    assert syscall_name(172, "aarch64") == "getpid"
    assert syscall_name(79, "aarch64") == "newfstatat"   # ABI 64 (32: fstatat64)
    assert syscall_name(222, "aarch64") == "mmap"        # ABI 64 (32: mmap2)
    assert syscall_name(38, "aarch64") == "renameat"     # ABI renameat
    assert syscall_name(163, "aarch64") == "getrlimit"   # ABI rlimit
    assert syscall_name(447, "aarch64") == "memfd_secret"
    assert syscall_name(462, "aarch64") == syscall_name(462, "arm64") == "mseal"
    # x32's numbers and holes are not syscalls of x86_64; unknown machines have no table
    assert syscall_name(512, "x86_64") is None
    assert syscall_name(400, "x86_64") is None
    assert syscall_name(0, "riscv64") is None
    assert syscall_name(0) == {"x86_64": "read", "aarch64": "io_setup"}.get(platform.machine())


def test_the_generator_reproduces_the_module(tmp_path: Path) -> None:
    """scripts/gen_syscalls.py turns tables into this module: from tables cut out of the
    module itself (a tree with the same numbers), it writes the same text, so the module is
    what the generator makes and not edited by hand."""
    tree = tmp_path / "linux"
    (tree / "arch/x86/entry/syscalls").mkdir(parents=True)
    (tree / "scripts").mkdir()
    major, minor, sub = KERNEL.split(".")[:3]
    (tree / "Makefile").write_text(f"# SPDX-License-Identifier: GPL-2.0\nVERSION = {major}\nPATCHLEVEL = {minor}\n"
                                   f"SUBLEVEL = {sub}\nEXTRAVERSION =\n")
    x86 = ["# comment", "", *(f"{nr}\tcommon\t{name}\t\tsys_{name}" for nr, name in X86_64.items()),
           "512\tx32\trt_sigaction\t\tcompat_sys_rt_sigaction"]
    arm = [*(f"{nr}\tcommon\t{name}\t\tsys_{name}" for nr, name in ARM64.items()),
           "79\tstat64\tfstatat64\tsys_fstatat64", "244\tarc\tcacheflush\tsys_cacheflush"]
    (tree / "arch/x86/entry/syscalls/syscall_64.tbl").write_text("\n".join(x86) + "\n")
    (tree / "scripts/syscall.tbl").write_text("\n".join(arm) + "\n")
    out = tmp_path / "syscall_tables.py"
    subprocess.run([sys.executable, str(REPO / "scripts/gen_syscalls.py"), str(tree / "arch/x86/entry/syscalls/syscall_64.tbl"),
                    str(tree / "scripts/syscall.tbl"), "--out", str(out)], check=True, capture_output=True, text=True)
    assert out.read_text() == (REPO / "bpfkit/metrics/syscall_tables.py").read_text()


def test_the_generator_refuses_a_number_given_twice(tmp_path: Path) -> None:
    tbl = tmp_path / "syscall_64.tbl"
    tbl.write_text("0\tcommon\tread\tsys_read\n0\t64\tnotread\tsys_notread\n")
    run = subprocess.run([sys.executable, str(REPO / "scripts/gen_syscalls.py"), str(tbl), str(tbl), "--kernel", "1.0",
                          "--out", str(tmp_path / "out.py")], check=False, capture_output=True, text=True)
    assert run.returncode != 0
    assert "0 is read and notread" in run.stderr
