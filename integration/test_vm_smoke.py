# SPDX-License-Identifier: Apache-2.0
"""Proves integration/vm.py works: the guest runs the expected kernel with what tests need.

Imports nothing from bpfkit. Skipped outside the VM runner (BPFKIT_VM_KERNEL unset).
"""

import os
import platform
import sys

import pytest

KERNEL = os.environ.get("BPFKIT_VM_KERNEL")
pytestmark = pytest.mark.skipif(not KERNEL, reason="runs only inside integration/vm.py's VM")


def test_runs_expected_kernel():
    assert platform.release() == os.environ["BPFKIT_VM_EXPECT_RELEASE"]
    major_minor = ".".join(platform.release().split(".")[:2])
    assert major_minor == KERNEL


def test_environment_set_by_runner():
    assert os.environ.get("PYTHONDONTWRITEBYTECODE") == "1"
    assert sys.dont_write_bytecode


def test_btf_present():
    assert os.path.exists("/sys/kernel/btf/vmlinux")


def test_tracefs_mounted_with_kprobes():
    # Debian kernels have CONFIG_KPROBES=y (the host kernel does not).
    assert os.path.exists("/sys/kernel/tracing/kprobe_events")
    assert os.path.exists("/sys/bus/event_source/devices/kprobe/type")


def test_bpffs_and_debugfs_mounted():
    mounts = {line.split()[1]: line.split()[2] for line in open("/proc/mounts")}
    assert mounts.get("/sys/fs/bpf") == "bpf"
    assert mounts.get("/sys/kernel/debug") == "debugfs"


def test_root_fs_read_only():
    with pytest.raises(OSError):
        open(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".vm-write-probe"), "w")


def test_skip_reason_reported():
    pytest.skip("deliberate skip: the runner must report this reason")
