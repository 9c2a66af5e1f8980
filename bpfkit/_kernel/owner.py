# SPDX-License-Identifier: Apache-2.0
"""Process identity that survives PID reuse and PID namespaces (for tracefs probe ownership).

A bare PID names a process badly: the number is reused after the process dies, and inside a PID
namespace (a container) the process sees its own numbering while tracefs is shared by the whole
machine. An owner is therefore recorded as

* its PID in the **initial** PID namespace: ``getpid()`` there; else what the kernel itself
  reports: ``bpf_get_current_pid_tgid()`` always answers in the initial namespace (its tgid is
  ``task->tgid``), read by running a three-instruction raw_tracepoint program with
  BPF_PROG_TEST_RUN (5.10+, which runs it in the calling task); else the first ``NSpid`` entry
  of /proc/self/status when /proc is the initial namespace's procfs;
* its start time, field 22 of /proc/PID/stat (clock ticks after boot), which differs between two
  processes that had the same PID. Inside a non-initial time namespace (5.6+) /proc shows that
  field shifted by the namespace's boot-time offset, so it is then recorded as 0 (unknown) and
  the owner is judged by PID alone.

Whether an owner still runs can only be told where /proc numbers processes as the initial PID
namespace does; elsewhere (a container with its own /proc) the answer is "cannot tell".
"""

from __future__ import annotations

import os

# include/linux/proc_ns.h: the initial namespaces' fixed inode numbers.
PROC_PID_INIT_INO = 0xEFFFFFFC
PROC_TIME_INIT_INO = 0xEFFFFFFA

_global_pid: tuple[int, int | None] | None = None  # (os.getpid() it was found for, answer)


def _ns_inode(path: str) -> int | None:
    try:
        return os.stat(path).st_ino
    except OSError:
        return None


def in_initial_pid_ns() -> bool:
    return _ns_inode("/proc/self/ns/pid") == PROC_PID_INIT_INO


def proc_numbers_globally() -> bool:
    """Whether /proc is the initial PID namespace's procfs, so PIDs recorded in that numbering
    can be looked up in it. A process of the initial namespace is only visible in such a procfs;
    elsewhere the outermost NSpid entry (the PID in the procfs's namespace) is compared with the
    kernel's own answer (or /proc/1's namespace read, where ptrace rules allow it)."""
    if in_initial_pid_ns():
        return True
    ino = _ns_inode("/proc/1/ns/pid")
    if ino is not None:
        return ino == PROC_PID_INIT_INO
    outer = _nspid_outermost()
    return outer is not None and outer == global_pid()


def start_time(pid: int | str = "self") -> int | None:
    """Field 22 (starttime) of /proc/PID/stat, or None when there is no such process."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return None
    # comm (field 2) may hold spaces and parentheses: the fields after it follow the last ')'.
    fields = stat[stat.rfind(b")") + 2:].split()
    return int(fields[22 - 3])


def own_start_time() -> int:
    """This process's start time, or 0 when a time namespace shifts what /proc shows."""
    if _ns_inode("/proc/self/ns/time") not in (None, PROC_TIME_INIT_INO):
        return 0
    return start_time("self") or 0


def _nspid_outermost() -> int | None:
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("NSpid:"):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return None


def _bpf_tgid() -> int | None:
    """This process's tgid as the kernel numbers it in the initial PID namespace."""
    from .. import asm
    from ..errors import BPFKitError
    from . import bpf as _bpf
    from .consts import FuncId, ProgType

    # r0 = bpf_get_current_pid_tgid() >> 32; exit
    insns = asm.call(int(FuncId.get_current_pid_tgid)) + asm.alu64_imm(0x70, 0, 32) + asm.exit_()
    try:
        with _bpf.prog_load(int(ProgType.RAW_TRACEPOINT), insns, name="bpfkit_owner", license="GPL") as fd:
            # raw_tp test runs refuse repeat/data (bpf_prog_test_run_raw_tp): ctx only.
            ret, _, _, _ = _bpf.prog_test_run(fd, ctx_in=bytes(8), repeat=0)
    except (BPFKitError, OSError):
        return None
    return ret or None


def global_pid() -> int | None:
    """This process's PID in the initial PID namespace, or None if it cannot be found out."""
    global _global_pid
    me = os.getpid()
    if _global_pid is not None and _global_pid[0] == me:  # recomputed after fork
        return _global_pid[1]
    if in_initial_pid_ns():
        answer: int | None = me
    else:
        answer = _bpf_tgid()
        if answer is None and _ns_inode("/proc/1/ns/pid") == PROC_PID_INIT_INO:
            answer = _nspid_outermost()
    _global_pid = (me, answer)
    return answer


def owner_alive(pid: int, start: int | None) -> bool | None:
    """Whether the process (initial-namespace ``pid``, started at ``start``; None or 0 for
    unknown) still runs; None when this process cannot tell (its /proc numbers otherwise)."""
    if pid <= 0 or not proc_numbers_globally():
        return None
    now = start_time(pid)
    if now is None:
        return False
    return not start or now == start
