# SPDX-License-Identifier: Apache-2.0
"""Integration tests run against the real kernel: every test here needs root.

An autouse fixture checks that no test leaks a bpf or perf file descriptor: it counts this
process's fds that point at bpf objects (anon_inode:bpf-map, bpf-prog, bpf_link, btf ...) or
perf events before and after each test.
"""

from __future__ import annotations

import gc
import os

import pytest


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = os.path.dirname(__file__)
    for item in items:
        if str(item.fspath).startswith(here):
            item.add_marker(pytest.mark.root)


def kernel_object_fds() -> dict[int, str]:
    """This process's fds that refer to bpf objects or perf events: {fd: link target}."""
    found = {}
    for name in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{name}")
        except OSError:
            continue
        if target.startswith("anon_inode:") and ("bpf" in target or "btf" in target or "perf_event" in target):
            found[int(name)] = target
    return found


@pytest.fixture(autouse=True)
def no_leaked_fds():
    before = kernel_object_fds()
    yield
    gc.collect()
    leaked = {fd: t for fd, t in kernel_object_fds().items() if before.get(fd) != t}
    assert not leaked, f"test leaked kernel object fds: {leaked}"


@pytest.fixture(scope="session", autouse=True)
def kernel_facts_in_junit(record_testsuite_property) -> None:
    """The kernel and its perf-event attach path as junit properties: scripts/summarize.py
    prints them next to each kernel's counts (before 5.15 every attach is SET_BPF)."""
    record_testsuite_property("kernel", os.uname().release)
    if os.geteuid() != 0:
        return
    from bpfkit import features

    try:
        has_link = features.probe("perf_link")
    except Exception as exc:  # noqa: BLE001 - a fact for the report, not a test
        record_testsuite_property("perf_event_attach", f"unknown ({exc})")
        return
    record_testsuite_property("perf_event_attach", "bpf_link (BPF_LINK_TYPE_PERF_EVENT)" if has_link
                              else "PERF_EVENT_IOC_SET_BPF (no perf_link: the fallback is the path)")
