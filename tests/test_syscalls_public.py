# SPDX-License-Identifier: Apache-2.0
"""bpfkit.syscalls: syscall, errno and signal names for tool authors, and tracepoint_exists,
against the running kernel's tracefs and the tables the kernel's own syscall tables made."""

from __future__ import annotations

import errno
import signal

import pytest

from bpfkit import syscalls
from bpfkit.errors import ParseError
from bpfkit.metrics import syscall_tables


def test_syscall_names_both_machines() -> None:
    assert syscalls.syscall_name(257, "x86_64") == "openat"
    assert syscalls.syscall_name(56, "aarch64") == "openat"
    assert syscalls.syscall_name(56, "arm64") == "openat"
    # 451-472 were printed as numbers before (issue 38): named now, as the C tools name them
    assert syscalls.syscall_name(451, "x86_64") == "cachestat"
    assert syscalls.syscall_name(470, "x86_64") == "listns"
    assert syscalls.syscall_name(100000, "x86_64") is None
    assert syscalls.syscall_name(0, "riscv64") is None and syscalls.syscall_table("riscv64") == {}


def test_syscall_tables_are_the_metrics_ones_not_copies() -> None:
    assert syscalls.syscall_table("x86_64") is syscall_tables.X86_64
    assert syscalls.syscall_table("aarch64") is syscall_tables.ARM64


def test_syscall_number_round_trips() -> None:
    for machine in ("x86_64", "aarch64"):
        for nr, name in syscalls.syscall_table(machine).items():
            assert syscalls.syscall_number(name, machine) == nr
    assert syscalls.syscall_number("sys_openat", "x86_64") == 257  # the tracepoints' spelling
    assert syscalls.syscall_number("open", "aarch64") is None  # arm64 has only openat
    assert syscalls.syscall_number("no_such_call", "x86_64") is None


def test_this_machine_by_default() -> None:
    import os

    machine = os.uname().machine
    if machine not in ("x86_64", "aarch64"):
        pytest.skip(f"no syscall table for {machine}")
    assert syscalls.syscall_name(syscalls.syscall_number("getpid") or -1) == "getpid"
    assert syscalls.syscall_number("getpid") == syscalls.syscall_number("getpid", machine)


@pytest.mark.parametrize(("n", "name"), [(2, "ENOENT"), (-2, "ENOENT"), (95, "EOPNOTSUPP"), (35, "EDEADLK"),
                                         (11, "EAGAIN"), (512, "ERESTARTSYS"), (524, "ENOTSUPP"), (531, "ENOGRACE"),
                                         (-512, "ERESTARTSYS")])
def test_errno_names(n: int, name: str) -> None:
    assert syscalls.errno_name(n) == name
    assert syscalls.errno_number(name) == abs(n)


def test_errno_unknown() -> None:
    assert syscalls.errno_name(0) is None
    assert syscalls.errno_name(520) is None  # a hole in include/linux/errno.h
    assert syscalls.errno_name(4095) is None
    assert syscalls.errno_number("ENOSUCH") is None
    assert syscalls.errno_number("ENOTSUP") == errno.ENOTSUP


def test_signal_names() -> None:
    for n, name in syscalls.SIGNALS.items():  # the kernel's numbers are libc's on x86_64 and arm64
        assert signal.Signals(n).name == name or {name, signal.Signals(n).name} <= {"SIGABRT", "SIGIOT"}, n
    assert syscalls.signal_name(9) == "SIGKILL" and syscalls.signal_name(17) == "SIGCHLD"
    assert syscalls.signal_name(0) is None and syscalls.signal_name(65) is None
    low, high = int(signal.SIGRTMIN), int(signal.SIGRTMAX)
    assert syscalls.signal_name(low) == "SIGRTMIN" and syscalls.signal_name(high) == "SIGRTMAX"
    if (low, high) == (34, 64):  # glibc: as bash's kill -l prints them
        assert syscalls.signal_name(35) == "SIGRTMIN+1" and syscalls.signal_name(49) == "SIGRTMIN+15"
        assert syscalls.signal_name(50) == "SIGRTMAX-14" and syscalls.signal_name(63) == "SIGRTMAX-1"
        assert syscalls.signal_name(32) is None and syscalls.signal_name(33) is None


@pytest.mark.root
def test_tracepoint_exists_both_ways() -> None:
    assert syscalls.tracepoint_exists("sched", "sched_switch")
    assert syscalls.tracepoint_exists("syscalls", "sys_enter_openat")
    assert not syscalls.tracepoint_exists("sched", "sched_no_such_event")
    assert not syscalls.tracepoint_exists("no_such_group_bpfkit", "sched_switch")
    assert not syscalls.tracepoint_exists("sched", "enable")  # a file of the group, not an event


def test_tracepoint_exists_refuses_paths() -> None:
    with pytest.raises(ParseError):
        syscalls.tracepoint_exists("..", "x")
    with pytest.raises(ParseError):
        syscalls.tracepoint_exists("sched", "a/../../b")
