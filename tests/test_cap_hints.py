# SPDX-License-Identifier: Apache-2.0
"""EPERM hints name what is really missing (issue #19 item 9): the capability sets are read from
/proc/self/status, and a refusal that is no capability says so. Capabilities are dropped for
real in child processes with setpriv(1) (util-linux): out of the bounding and inheritable sets,
so a root child execs without them."""

from __future__ import annotations

import os
import resource
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from bpfkit._kernel import caps
from conftest import console_script

pytestmark = [pytest.mark.root,
              pytest.mark.skipif(shutil.which("setpriv") is None, reason="needs setpriv(1) from util-linux")]

REPO = Path(__file__).resolve().parent.parent
BPFKIT = console_script()
# Each load below is refused before it pins; the directory is still this run's own.
PIN = f"/sys/fs/bpf/bpfkit_caps_test_{os.getpid()}"


def _without(*names: str) -> list[str]:
    drop = ",".join(f"-{n}" for n in names)
    return ["setpriv", f"--inh-caps={drop}", f"--bounding-set={drop}"]


def _run(cmd: list[str]) -> subprocess.CompletedProcess[str]:
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=60, cwd=REPO)
    assert "Traceback" not in out.stderr, out.stderr
    return out


def test_root_without_cap_bpf(bpf_obj, tmp_path) -> None:
    if caps.sysctl("unprivileged_bpf_disabled") == "0":
        pytest.skip("kernel.unprivileged_bpf_disabled is 0: an array map needs no CAP_BPF here")
    out = _run(_without("bpf", "sys_admin") + [BPFKIT, "load", str(bpf_obj("minimal")), PIN])
    assert out.returncode != 0
    assert ("BPF_MAP_CREATE: EPERM (Operation not permitted): map 'hits'; needs CAP_BPF, which this process "
            "lacks (it runs as root, with a reduced capability set); kernel.unprivileged_bpf_disabled is "
            f"{caps.sysctl('unprivileged_bpf_disabled')} (bpf() without CAP_BPF is refused)") in out.stderr, out.stderr
    assert "(or root)" not in out.stderr


def test_root_without_cap_perfmon_loading_a_tracepoint_program(bpf_obj) -> None:
    out = _run(_without("perfmon", "sys_admin") + [BPFKIT, "attach", str(bpf_obj("minimal"))])
    assert out.returncode != 0
    assert ("load 'count_getppid' rejected with an empty verifier log (the kernel refused before verification); "
            "needs CAP_PERFMON, which this process lacks (it runs as root, with a reduced capability set); "
            f"kernel.perf_event_paranoid is {caps.sysctl('perf_event_paranoid')}") in out.stderr, out.stderr


def test_every_capability_held_is_not_blamed(bpf_obj) -> None:
    """This machine refuses fentry programs with EPERM although root holds CAP_BPF and
    CAP_PERFMON (all but CAP_SYS_RESOURCE): the hint must not ask for a capability."""
    from bpfkit import features

    if features.probe("tracing_programs").supported:
        pytest.skip("fentry programs load on this kernel: no refusal to explain")
    if not (caps.holds("CAP_BPF") and caps.holds("CAP_PERFMON")):
        pytest.skip("needs CAP_BPF and CAP_PERFMON held")
    out = _run([BPFKIT, "load", str(bpf_obj("tracing_fentry")), PIN])
    assert out.returncode != 0
    assert "not a missing capability (this process holds CAP_BPF and CAP_PERFMON); refused by kernel lockdown" in out.stderr, out.stderr
    assert "needs CAP_" not in out.stderr


@pytest.mark.skipif(shutil.which("unshare") is None, reason="needs unshare(1)")
def test_lockdown_mode_is_named_when_securityfs_is_readable(bpf_obj) -> None:
    from bpfkit import features

    if features.probe("tracing_programs").supported:
        pytest.skip("fentry programs load on this kernel: no refusal to explain")
    # A private mount namespace: securityfs shows the lockdown mode without touching the host's mounts.
    script = (f"mountpoint -q /sys/kernel/security || mount -t securityfs none /sys/kernel/security; "
              f"cat /sys/kernel/security/lockdown; {BPFKIT} load {bpf_obj('tracing_fentry')} {PIN}")
    out = _run(["unshare", "--mount", "sh", "-c", script])
    mode = next((w.strip("[]") for w in out.stdout.split() if w.startswith("[")), None)
    if mode is None:
        pytest.skip(f"no lockdown file in securityfs: {out.stdout!r}")
    if mode == "none":
        assert "kernel lockdown" not in out.stderr
    else:
        assert f"refused by kernel lockdown (mode '{mode}', which refuses" in out.stderr, out.stderr


def test_tracefs_refusal_is_file_permission_not_perfmon() -> None:
    """A non-root user holding CAP_PERFMON and CAP_BPF still cannot write uprobe_events (0640 root)."""
    code = ("from bpfkit._kernel import tracefs\n"
            "try:\n    tracefs.add_probe_event('uprobe', 'p:bpfkit_caps_test/e /bin/true:0x0')\n"
            "except Exception as exc:\n    print(exc)\n")
    out = _run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--inh-caps=+perfmon,+bpf",
                "--ambient-caps=+perfmon,+bpf", sys.executable, "-c", code])
    assert ("open uprobe_events: EACCES (Permission denied): tracefs control files are root's (mode 0640): "
            "writing them takes uid 0 or CAP_DAC_OVERRIDE, not CAP_PERFMON") in out.stdout, out.stdout + out.stderr


def test_pin_outside_bpffs_is_not_a_capability(tmp_path) -> None:
    from bpfkit._kernel.consts import MapType
    from bpfkit.errors import KernelPermissionError
    from bpfkit.maps import Map, MapSpec

    with Map(MapSpec("caps_pin", MapType.ARRAY, 4, 4, 1)) as m:
        with pytest.raises(KernelPermissionError) as info:
            m.pin(str(tmp_path / "x"))
    assert info.value.capability == ""
    assert f"{tmp_path}/x is not on a bpf filesystem (BPF_OBJ_PIN/OBJ_GET work only under a bpffs mount); not a capability" in str(info.value)


def test_memlock_before_5_11_names_cap_sys_resource(monkeypatch: pytest.MonkeyPatch) -> None:
    """Kernels before 5.11 charge maps to RLIMIT_MEMLOCK; this 6.18 host cannot be made to, so the
    kernel release and the limit are mocked (the capability set is this process's real one)."""
    if caps.holds("CAP_SYS_RESOURCE"):
        pytest.skip("this process holds CAP_SYS_RESOURCE")
    monkeypatch.setattr(caps, "_kernel_release", lambda: (5, 10))
    monkeypatch.setattr(resource, "getrlimit", lambda _: (65536, 65536))
    missing, hint = caps.explain("BPF_MAP_CREATE", 1)
    assert missing == "CAP_SYS_RESOURCE"
    assert hint == ("RLIMIT_MEMLOCK is 65536 bytes (kernels before 5.11 charge BPF memory to it) and raising "
                    "it needs CAP_SYS_RESOURCE, which this process lacks")


@pytest.mark.skipif(shutil.which("prlimit") is None, reason="needs prlimit(1) from util-linux")
def test_memlock_without_cap_sys_resource_on_a_kernel_that_charges_it(bpf_obj) -> None:
    """Real on kernels before 5.11 (the 5.10 VM): root without CAP_SYS_RESOURCE under a one-page
    RLIMIT_MEMLOCK cannot raise it, and BPF_MAP_CREATE gives EPERM for the memory."""
    if caps._kernel_release() >= (5, 11):
        pytest.skip("kernel 5.11+ charges BPF memory to memory cgroups, not RLIMIT_MEMLOCK")
    out = _run(_without("sys_resource") + ["prlimit", "--memlock=4096", BPFKIT, "load", str(bpf_obj("minimal")),
                                             PIN])
    assert out.returncode != 0
    assert ("RLIMIT_MEMLOCK is 4096 bytes (kernels before 5.11 charge BPF memory to it) and raising it needs "
            "CAP_SYS_RESOURCE, which this process lacks") in out.stderr, out.stderr
    assert "needs CAP_BPF" not in out.stderr
