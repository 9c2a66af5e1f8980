# SPDX-License-Identifier: Apache-2.0
"""Closing many ioctl-mode (PERF_EVENT_IOC_SET_BPF) perf events concurrently (issue #19 item 11):
real uprobes, real closes; the close of each perf event fd is observed (not changed) to see
which thread ran it. benchmarks/bench_attach.py --ioctl-only gives the figures."""

from __future__ import annotations

import threading

import pytest

from bpfkit import link
from bpfkit._kernel import tracefs as _tracefs
from bpfkit._kernel.fd import FD
from bpfkit.link.perf_event import PerfEventIoctlLink

from .uprobe_support import uprobe_program

pytestmark = [pytest.mark.root, pytest.mark.feature("uprobe_pmu")]

NAMES = ["getpid", "getppid", "getuid", "geteuid", "getgid", "getegid"]




def test_ioctl_perf_events_close_in_the_pool(bpf_obj, sleeper: int, monkeypatch: pytest.MonkeyPatch) -> None:
    from bpfkit import features

    tracefs_too = features.probe("uprobe_events").supported
    closed_by: dict[int, str] = {}
    real_close = FD.close

    def observed_close(self: FD) -> None:
        if not self.closed:
            closed_by[self.raw] = threading.current_thread().name
        real_close(self)

    with uprobe_program() as prog:
        exe = link.Executable("libc")
        group = link.attach_many(NAMES, lambda s: exe.uprobe(s, prog, pid=sleeper, mode="ioctl"))
        if tracefs_too:
            group.add(exe.uprobe("getpgrp", prog, pid=sleeper, mode="ioctl", tracefs=True))
        members = list(group)
        assert all(isinstance(lk, PerfEventIoctlLink) for lk in members)
        fds = {lk.fd.raw for lk in members}
        groups = {lk.perf_event.probe.group for lk in members if lk.perf_event.probe is not None}
        monkeypatch.setattr(FD, "close", observed_close)
        group.close()
        monkeypatch.setattr(FD, "close", real_close)
    assert all(lk.closed for lk in members)
    assert {closed_by[fd] for fd in fds} <= {n for n in closed_by.values() if n.startswith("bpfkit-close")}
    assert len({closed_by[fd] for fd in fds}) > 1, "all perf events were closed by one thread"
    left = {ev.group for ev in _tracefs.list_probe_events("uprobe")} & groups
    assert not left, f"tracefs probes left: {left}"
