# SPDX-License-Identifier: Apache-2.0
"""struct_ops on real kernel types: a BPF TCP congestion control (struct tcp_congestion_ops,
bpf/struct_ops_tcp_ca.bpf.c) registered, selected with setsockopt(TCP_CONGESTION) on a
loopback connection and seen in use through its callback counters; and a sched_ext scheduler
(struct sched_ext_ops, bpf/struct_ops_scx.bpf.c) where the kernel has CONFIG_SCHED_CLASS_EXT
(the 7.2 VM: integration/vm.py --kernel 7.2).

The host (6.18) registers BPF congestion controls; the VM kernels (6.1: map-only registration,
no struct_ops links) run the same tests.
"""

from __future__ import annotations

import errno
import os
import socket
import struct
import subprocess
import sys
import threading
import time
from typing import Any

import pytest

import bpfkit
from conftest import congestion_control_names
from bpfkit import link
from bpfkit._kernel.consts import LinkType, MapFlag
from bpfkit.errors import KernelError, NotFoundError, NotSupportedError, UsageError

PIN_ROOT = "/sys/fs/bpf"
AVAILABLE = "/proc/sys/net/ipv4/tcp_available_congestion_control"
CALL_INIT, CALL_CONG_AVOID, CALL_SSTHRESH, CALL_UNDO_CWND, CALL_RELEASE, CALL_STATE, CALL_INIT_V2 = range(7)
SCX_STATE = "/sys/kernel/sched_ext/state"


@pytest.fixture(scope="module", autouse=True)
def _congestion_control_names() -> Any:
    """The module's objects register TCP congestion controls named bpfkit_reno and bpfkit_reno2,
    names the kernel keeps machine-wide: the copies of the suite take turns (conftest)."""
    with congestion_control_names():
        yield


def _kernel_at_least(major: int, minor: int) -> bool:
    release = os.uname().release.split("-")[0].split(".")
    return (int(release[0]), int(release[1])) >= (major, minor)


def _available() -> list[str]:
    with open(AVAILABLE) as f:
        return f.read().split()


def _calls(spec: Any, coll: Any) -> list[int]:
    v = spec.variables["calls"]
    raw = coll.maps[v.section][0]
    return list(struct.unpack_from(f"<{v.size // 8}Q", raw, v.offset))


KFUNC_CALLS_SKIP = ("the congestion control object calls the kernel's tcp_reno_* kfuncs from struct_ops "
                    "programs: kfunc calls need Linux 5.13 (older verifiers refuse the object)")


def _load_cc(bpf_obj: Any, v2: bool = False) -> tuple[Any, Any]:
    if not _kernel_at_least(5, 13):
        pytest.skip(KFUNC_CALLS_SKIP)
    spec = bpfkit.load_spec(bpf_obj("struct_ops_tcp_ca"))
    if v2:
        spec.maps["bpfkit_reno_v2"].struct_ops.autocreate = True
    try:
        return spec, bpfkit.Collection(spec)
    except NotFoundError as exc:
        if "bpf_struct_ops_tcp_congestion_ops" in str(exc):
            pytest.skip(f"no BPF congestion controls here: {exc}")
        raise


def _transfer(cc: str, size: int = 2 << 20) -> str:
    """One loopback TCP connection using congestion control ``cc``, ``size`` bytes sent; the
    sender's TCP_CONGESTION as the kernel reports it."""
    srv = socket.socket()
    cl = socket.socket()
    try:
        srv.bind(("127.0.0.1", 0))
        srv.listen(1)
        cl.setsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, cc.encode())
        cl.connect(srv.getsockname())
        conn, _ = srv.accept()
        got = [0]

        def drain() -> None:
            while got[0] < size:
                data = conn.recv(1 << 16)
                if not data:
                    break
                got[0] += len(data)

        with conn:
            reader = threading.Thread(target=drain)
            reader.start()
            cl.sendall(b"x" * size)
            reader.join(60)
            assert got[0] == size
            used = cl.getsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, 16).rstrip(b"\0").decode()
    finally:
        cl.close()
        srv.close()
    return used


def test_tcp_congestion_control_link(bpf_obj: Any) -> None:
    spec, coll = _load_cc(bpf_obj)
    with coll:
        m = coll.maps["bpfkit_reno"]
        assert "bpfkit_reno" not in _available()  # loaded, not registered
        lk = link.struct_ops(m)
        try:
            assert "bpfkit_reno" in _available()
            if int(m.flags) & int(MapFlag.LINK):
                assert isinstance(lk, link.StructOpsLink)
                info = lk.info()
                assert info.type == LinkType.STRUCT_OPS
                assert info.detail.map_id == int(m.info().id)
            else:  # before 6.4: map-only registration
                assert not _kernel_at_least(6, 4)
                assert isinstance(lk, link.StructOpsMapLink)
            assert _transfer("bpfkit_reno") == "bpfkit_reno"
            calls = _calls(spec, coll)
            assert calls[CALL_INIT] >= 1, calls
            assert calls[CALL_CONG_AVOID] > 0, calls
            assert calls[CALL_RELEASE] >= 1, calls  # the socket closed
        finally:
            lk.close()
        assert "bpfkit_reno" not in _available()
        with pytest.raises(OSError) as info:
            _transfer("bpfkit_reno")
        assert info.value.errno == errno.ENOENT


def test_tcp_congestion_control_map_only(bpf_obj: Any) -> None:
    """A .struct_ops (no BPF_F_LINK) map: registered by the map update, unregistered by
    deleting its element; its data member (flags) was copied from the object."""
    spec, coll = _load_cc(bpf_obj)
    with coll:
        m = coll.maps["bpfkit_reno_legacy"]
        assert not int(m.flags) & int(MapFlag.LINK)
        with link.struct_ops(m) as lk:
            assert isinstance(lk, link.StructOpsMapLink)
            assert "bpfkit_reno2" in _available()
            with open("/proc/sys/net/ipv4/tcp_allowed_congestion_control") as f:
                assert "bpfkit_reno2" in f.read().split()  # TCP_CONG_NON_RESTRICTED from .flags
            before = _calls(spec, coll)[CALL_INIT]
            assert _transfer("bpfkit_reno2") == "bpfkit_reno2"
            assert _calls(spec, coll)[CALL_INIT] > before
            with pytest.raises(NotSupportedError):
                lk.update(m)
        assert "bpfkit_reno2" not in _available()
        with pytest.raises(KernelError, match="a struct_ops map's value is set once"):
            link.struct_ops(m)
    _, coll = _load_cc(bpf_obj)
    with coll:
        link.struct_ops(coll.maps["bpfkit_reno_legacy"])  # left registered: closing the collection unregisters it
        assert "bpfkit_reno2" in _available()
    assert "bpfkit_reno2" not in _available()


def test_struct_ops_link_update_pin_detach(bpf_obj: Any) -> None:
    if not _kernel_at_least(6, 4):
        pytest.skip("struct_ops links (BPF_LINK_TYPE_STRUCT_OPS, update) need Linux 6.4")
    spec, coll = _load_cc(bpf_obj, v2=True)
    path = os.path.join(PIN_ROOT, f"bpfkit_test_struct_ops_{os.getpid()}")
    with coll:
        lk = link.struct_ops(coll.maps["bpfkit_reno"])
        try:
            lk.pin(path)
            lk.close()  # the pin keeps it registered
            assert "bpfkit_reno" in _available()
            lk = link.load_pinned_link(path)
            assert isinstance(lk, link.StructOpsLink)
            prog = next(iter(coll.programs.values()))
            with pytest.raises(UsageError, match="is not a map: a struct_ops link swaps struct_ops maps"):
                lk.update(prog)  # the Link protocol's form: a program
            lk.update(coll.maps["bpfkit_reno_v2"])  # same name, other callbacks
            assert lk.info().detail.map_id == int(coll.maps["bpfkit_reno_v2"].info().id)
            _transfer("bpfkit_reno")
            calls = _calls(spec, coll)
            assert calls[CALL_INIT_V2] >= 1, calls
            lk.unpin()
            if _kernel_at_least(6, 10):
                lk.detach()  # 73287fe22872: struct_ops links detach
                assert "bpfkit_reno" not in _available()
        finally:
            lk.close()
            if os.path.lexists(path):
                os.unlink(path)
        assert "bpfkit_reno" not in _available()


def test_attach_all_registers_struct_ops(bpf_obj: Any) -> None:
    spec, coll = _load_cc(bpf_obj)
    with coll:
        with coll.attach_all() as links:
            assert set(links) == {"bpfkit_reno", "bpfkit_reno_legacy"}
            assert "bpfkit_reno_v2" not in coll.maps  # "?" section: not created
            assert {"bpfkit_reno", "bpfkit_reno2"} <= set(_available())
            assert "reno_init" in links.skipped  # callbacks run through their maps
        assert not {"bpfkit_reno", "bpfkit_reno2"} & set(_available())


def test_missing_kernel_type_is_named(bpf_obj: Any) -> None:
    spec = bpfkit.load_spec(bpf_obj("struct_ops_tcp_ca"))
    spec.maps["bpfkit_reno"].struct_ops.type_name = "bpfkit_no_such_ops"
    with pytest.raises(NotFoundError, match=r"struct bpf_struct_ops_bpfkit_no_such_ops is not in the kernel's BTF: "):
        bpfkit.Collection(spec)


def test_cli_attach_and_inspect(bpf_obj: Any) -> None:
    _, coll = _load_cc(bpf_obj)  # skips where the kernel has no BPF congestion controls
    coll.close()
    obj = str(bpf_obj("struct_ops_tcp_ca"))
    out = subprocess.run([sys.executable, "-m", "bpfkit.cli", "inspect", obj], capture_output=True, text=True, check=True).stdout
    assert "struct_ops (3)" in out and "bpfkit_reno_v2 (not created by default)" in out
    proc = subprocess.Popen([sys.executable, "-m", "bpfkit.cli", "attach", obj], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        lines = []
        while time.monotonic() < deadline:
            line = proc.stdout.readline()  # type: ignore[union-attr]
            if not line:
                break
            lines.append(line)
            if line.startswith("attached bpfkit_reno_legacy"):
                break
        assert any(line.startswith("attached bpfkit_reno: struct_ops map 'bpfkit_reno' (struct tcp_congestion_ops)")
                   for line in lines), lines
        assert {"bpfkit_reno", "bpfkit_reno2"} <= set(_available())
    finally:
        proc.terminate()
        _, err = proc.communicate(timeout=60)
    assert proc.returncode in (0, 130), err  # 130: stopped by a signal, cleanly
    assert "skipped program reno_init" not in err
    assert not {"bpfkit_reno", "bpfkit_reno2"} & set(_available())


def _scx_state() -> str:
    with open(SCX_STATE) as f:
        return f.read().strip()


def _wait_scx(state: str, timeout: float = 60.0) -> str:
    """sched_ext enables and disables asynchronously (a kthread switches every task)."""
    deadline = time.monotonic() + timeout
    now = _scx_state()
    while now != state and time.monotonic() < deadline:
        time.sleep(0.2)
        now = _scx_state()
    return now


def test_sched_ext_fifo_scheduler(bpf_obj: Any) -> None:
    spec = bpfkit.load_spec(bpf_obj("struct_ops_scx"))
    try:
        coll = bpfkit.Collection(spec)
    except NotFoundError as exc:
        assert "struct bpf_struct_ops_sched_ext_ops is not in the kernel's BTF" in str(exc)
        pytest.skip(f"no sched_ext here (CONFIG_SCHED_CLASS_EXT): {exc}")
    with coll:
        assert _scx_state() == "disabled"
        lk = link.struct_ops(coll.maps["bpfkit_fifo"])
        try:
            assert isinstance(lk, link.StructOpsLink)
            assert _wait_scx("enabled") == "enabled"
            with open("/sys/kernel/sched_ext/root/ops") as f:
                assert f.read().strip() == "bpfkit_fifo"
            subprocess.run(["true"], check=True)  # a new task: scheduled by bpfkit_fifo
            time.sleep(0.5)
            v = spec.variables["enqueued"]
            enqueued = int.from_bytes(coll.maps[v.section][0][v.offset : v.offset + 8], "little")
            assert enqueued > 0
        finally:
            lk.close()
        assert _wait_scx("disabled") == "disabled"


def test_cli_attach_pin(bpf_obj: Any, tmp_path: Any) -> None:
    """--pin: the link at DIR/<map>_link, the map-only registration as the pinned map itself."""
    _, coll = _load_cc(bpf_obj)
    coll.close()
    pin_dir = os.path.join(PIN_ROOT, f"bpfkit_test_struct_ops_cli_{os.getpid()}")
    obj = str(bpf_obj("struct_ops_tcp_ca"))
    try:
        proc = subprocess.run([sys.executable, "-m", "bpfkit.cli", "attach", obj, "--pin", pin_dir],
                              capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, proc.stderr
        assert os.path.exists(os.path.join(pin_dir, "bpfkit_reno_legacy"))
        assert {"bpfkit_reno", "bpfkit_reno2"} <= set(_available())  # both outlive the command
        if _kernel_at_least(6, 4):
            assert os.path.exists(os.path.join(pin_dir, "bpfkit_reno_link"))
    finally:
        for name in sorted(os.listdir(pin_dir)) if os.path.isdir(pin_dir) else []:
            path = os.path.join(pin_dir, name)
            if name in ("bpfkit_reno", "bpfkit_reno_legacy"):  # map-only registrations (bpfkit_reno: before 6.4)
                with bpfkit.Map.load_pinned(path) as m:
                    if int(m.flags) & int(MapFlag.LINK) == 0:
                        m.delete(0)  # unregister: removing the pin alone would not
            os.unlink(path)
        if os.path.isdir(pin_dir):
            os.rmdir(pin_dir)
    deadline = time.monotonic() + 30
    while {"bpfkit_reno", "bpfkit_reno2"} & set(_available()) and time.monotonic() < deadline:
        time.sleep(0.1)  # the link goes once bpffs drops its last reference (RCU, then a work queue)
    assert not {"bpfkit_reno", "bpfkit_reno2"} & set(_available())
