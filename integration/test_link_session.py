# SPDX-License-Identifier: Apache-2.0
"""Sessions against the real kernel: one program on entry and return of each target, through a
uprobe_multi link made with BPF_TRACE_UPROBE_SESSION (6.13; this host's 6.18 has it) or a
kprobe_multi link made with BPF_TRACE_KPROBE_SESSION (6.10 and CONFIG_FPROBE: the 6.12 and 7.2
VMs, not this host).

bpf/session_probes.bpf.c counts entry and return runs per attach cookie, writes a value into
the session cookie on entry and checks on return that it reads the same value; its entry run
returns 1 (suppressing the return run) for attach cookie 2. The uprobe target is
test_link_multi's small C program, driven over stdin.
"""

from __future__ import annotations

import os
import struct
import subprocess
import sys
from pathlib import Path
from typing import Any, Iterator

import pytest

import bpfkit
from bpfkit import features, link
from bpfkit.errors import BPFKitError, NotSupportedError, UsageError

from .test_link_multi import TARGET_C, Target, build_c
from .test_link import REPO

MAGIC = 0xC0FFEE << 32
KEEP, SKIP, AUTO = 1, 2, 3  # attach cookies; the program suppresses return runs of SKIP


def need(feature: str, what: str) -> None:
    result = features.probe(feature)
    if not result:
        pytest.skip(f"{what} need Linux {result.min_version}+ ({feature}): {result.reason}")


@pytest.fixture(scope="module")
def target_bin(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_c(tmp_path_factory, "session_target", TARGET_C)


@pytest.fixture
def target(target_bin: Path) -> Iterator[Target]:
    t = Target(target_bin)
    yield t
    t.close()


UPROBE_PROGRAMS = ("up_session", "up_session_auto")


def load(bpf_obj: Any, tgid: int, programs: tuple[str, ...] = UPROBE_PROGRAMS) -> Any:
    """The session object with only ``programs`` loaded: a kernel with kprobe sessions but not
    uprobe sessions (6.10-6.12) rejects a uprobe.session program's kfunc calls ("calling kernel
    function bpf_session_cookie is not allowed": the attach type is unknown to it)."""
    spec = bpfkit.load_spec(str(bpf_obj("session_probes")))
    spec.variables["target_tgid"].value = tgid
    return bpfkit.Collection(spec, programs=programs)


def stats(m: Any, key: int) -> dict[str, int]:
    raw = m[key]
    if not isinstance(raw, (bytes, bytearray, memoryview)):
        raw = m.encode_value(raw) if hasattr(m, "encode_value") else bytes(raw)
    entries, returns, ok, bad, last = struct.unpack("<5Q", bytes(raw)[:40])
    return dict(entries=entries, returns=returns, cookie_ok=ok, cookie_bad=bad, last_cookie=last)


def expect(entries: int, returns: int) -> dict[str, int]:
    """What the program records after ``entries`` sequential calls, ``returns`` of them seen
    returning: every return run read the cookie its own entry run wrote."""
    return dict(entries=entries, returns=returns, cookie_ok=returns, cookie_bad=0,
                last_cookie=MAGIC | entries if returns else 0)


# ------------------------------------------------------------------------ uprobe sessions
def test_uprobe_session_entry_return_cookie_and_suppression(bpf_obj: Any, target: Target) -> None:
    need("uprobe_session", "uprobe sessions")
    with load(bpf_obj, target.pid) as coll:
        prog = coll.programs["up_session"]
        with link.uprobe_session(target.path, ["multi_alpha", "multi_beta"], prog,
                                 cookies={"multi_alpha": KEEP, "multi_beta": SKIP}) as lk:
            assert type(lk).__name__ == "UprobeMultiLink" and lk.targets == ("multi_alpha", "multi_beta")
            info = lk.info()
            assert info.type_name == "uprobe_multi" and info.detail.count == 2 and not info.detail.retprobe
            target.run("call multi_alpha 3", "call multi_beta 4", "call multi_gamma 5")
            assert stats(coll.maps["stats"], KEEP) == expect(3, 3)  # entry and return, cookie carried
            assert stats(coll.maps["stats"], SKIP) == expect(4, 0)  # entry returned 1: no return run
        target.run("call multi_alpha 2")  # detached
        assert stats(coll.maps["stats"], KEEP)["entries"] == 3


def test_uprobe_session_pattern_and_pid_filter(bpf_obj: Any, target: Target) -> None:
    need("uprobe_session", "uprobe sessions")
    with load(bpf_obj, 0) as coll:
        with link.uprobe_session(target.path, "multi_a*", coll.programs["up_session"], cookies=[KEEP],
                                 pid=target.pid) as lk:
            assert lk.targets == ("multi_alpha",)
            target.run("fork multi_alpha 5", "call multi_alpha 2")  # the child is filtered out by the link
            assert stats(coll.maps["stats"], KEEP) == expect(2, 2)


def test_uprobe_session_section_auto_attach(bpf_obj: Any) -> None:
    need("uprobe_session", "uprobe sessions")
    with load(bpf_obj, os.getpid()) as coll:
        prog = coll.programs["up_session_auto"]
        assert link.skip_reason(prog.section) is None
        with link.auto_attach("up_session_auto", prog) as lk:  # SEC("uprobe.session/libc.so.6:getppid")
            assert type(lk).__name__ == "UprobeMultiLink"
            for _ in range(3):
                os.getppid()
            got = stats(coll.maps["stats"], AUTO)
        assert got["entries"] >= 3 and got["returns"] == got["entries"] and got["cookie_bad"] == 0


def test_uprobe_session_refuses_perf_mode_and_needs_the_session_program(bpf_obj: Any, target: Target) -> None:
    need("uprobe_session", "uprobe sessions")
    with load(bpf_obj, target.pid) as coll:
        with pytest.raises(UsageError, match="has no perf-event"):
            link.attach_probe(f"uprobe.session:{target.path}:multi_alpha", coll.programs["up_session"], mode="ioctl")
        # A plain uprobe.multi program is reloaded for the session, like multi links do.
        spec = bpfkit.load_spec(str(bpf_obj("multi_probes")))
        with bpfkit.Collection(spec) as other:
            with link.uprobe_session(target.path, "multi_alpha", other.programs["up_multi"]) as lk:
                assert lk.info().program_id != other.programs["up_multi"].id


def test_uprobe_session_cli_spec(bpf_obj: Any, target: Target) -> None:
    need("uprobe_session", "uprobe sessions")
    from bpfkit._kernel.bpffs import bpffs_mount_of
    from bpfkit.maps import Map

    try:
        bpffs_mount_of("/sys/fs/bpf")
    except Exception:
        pytest.skip("no bpffs at /sys/fs/bpf")
    obj = str(bpf_obj("session_probes"))
    pin_dir = f"/sys/fs/bpf/bpfkit_session_test_{os.getpid()}"
    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    try:
        proc = subprocess.run([sys.executable, "-m", "bpfkit.cli", "attach", obj,
                               f"uprobe.session:{target.path}:multi_*", "-p", "up_session", "--cookie", "2",
                               "--pin", pin_dir], capture_output=True, text=True, env=env, timeout=120)
        assert proc.returncode == 0, proc.stderr
        assert "uprobe_session" in proc.stdout + proc.stderr
        with link.load_pinned_link(f"{pin_dir}/up_session") as lk:
            assert lk.info().type_name == "uprobe_multi" and lk.info().detail.count == 3
        with Map.load_pinned(f"{pin_dir}/stats") as m:
            target.run("call multi_beta 2", "call multi_gamma 1", "call other_delta 4")
            assert stats(m, SKIP) == expect(3, 0)  # --cookie 2: every entry suppresses its return
    finally:
        if os.path.isdir(pin_dir):
            for name in os.listdir(pin_dir):
                os.unlink(os.path.join(pin_dir, name))
            os.rmdir(pin_dir)


# ------------------------------------------------------------------------ kprobe sessions
SYSCALLS = ("__x64_sys_getpgid", "__x64_sys_getsid")
KPROBE_PROGRAMS = ("kp_session",)


def test_kprobe_session_entry_return_cookie_and_suppression(bpf_obj: Any) -> None:
    need("kprobe_session", "kprobe sessions")
    missing = [s for s in SYSCALLS if s not in set(link.multi.kernel_functions())]
    if missing:
        pytest.skip(f"kernel functions {missing} cannot be probed here")
    with load(bpf_obj, os.getpid(), KPROBE_PROGRAMS) as coll:
        with link.kprobe_session(list(SYSCALLS), coll.programs["kp_session"], cookies=[KEEP, SKIP]) as lk:
            assert type(lk).__name__ == "KprobeMultiLink" and lk.info().type_name == "kprobe_multi"
            for _ in range(3):
                os.getpgid(0)
            for _ in range(4):
                os.getsid(0)
            assert stats(coll.maps["stats"], KEEP) == expect(3, 3)
            assert stats(coll.maps["stats"], SKIP) == expect(4, 0)


def test_kprobe_session_spec(bpf_obj: Any) -> None:
    need("kprobe_session", "kprobe sessions")
    with load(bpf_obj, os.getpid(), KPROBE_PROGRAMS) as coll:
        with link.attach_probe("kprobe.session:__x64_sys_getpgi*", coll.programs["kp_session"], cookie=KEEP) as lk:
            assert lk.targets == ("__x64_sys_getpgid",)
            os.getpgid(0)
            os.getpgid(0)
            assert stats(coll.maps["stats"], KEEP) == expect(2, 2)


def test_kprobe_session_refused_where_the_kernel_lacks_it(bpf_obj: Any) -> None:
    result = features.probe("kprobe_session")
    if result:
        pytest.skip("this kernel has kprobe sessions")
    try:
        coll = load(bpf_obj, os.getpid(), KPROBE_PROGRAMS)
    except BPFKitError as exc:  # older kernels refuse the session program itself at load
        text = str(exc)
    else:
        with coll, pytest.raises(NotSupportedError) as info:
            link.kprobe_session("__x64_sys_getpgid", coll.programs["kp_session"])
        text = str(info.value)
    assert "kprobe sessions" in text and "6.10" in text, text
