# SPDX-License-Identifier: Apache-2.0
"""``bpfkit struct_ops list|show|unregister`` and ``bpfkit attach --pin`` of struct_ops maps, on
the running kernel: bpf/struct_ops_tcp_ca.bpf.c's congestion controls registered (a
``.struct_ops.link`` one through a bpf_link, a ``.struct_ops`` one by map update), used by a
loopback TCP connection, found by the map ids this test made, unregistered from the command
line. Congestion-control names are system-wide (a second registration of one is EEXIST), so a
copy of the suite running beside waits on a lock file for its turn."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import subprocess
import time
import uuid
from collections.abc import Iterator

import pytest

from bpfkit.errors import BPFKitError, NotFoundError
from conftest import congestion_control_names, console_script, start_attached

BPFKIT = console_script()
AVAILABLE = "/proc/sys/net/ipv4/tcp_available_congestion_control"
LINKED, LEGACY = "bpfkit_reno", "bpfkit_reno2"  # the tables' .name members


pytestmark = pytest.mark.root  # every test registers a congestion control


def bpfkit(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([BPFKIT, *args], capture_output=True, text=True, timeout=120, check=False)


def available() -> list[str]:
    with open(AVAILABLE) as f:
        return f.read().split()


def map_id(path: str) -> int:
    from bpfkit.maps import Map

    with Map.load_pinned(path) as m:
        return m.id


@pytest.fixture
def names_free() -> Iterator[None]:
    """This kernel's tcp_congestion_ops, and the congestion-control names to this test alone
    (they are the system's: one registration at a time across copies of the suite)."""
    try:
        from bpfkit.struct_ops import find_kernel_struct_ops

        find_kernel_struct_ops("tcp_congestion_ops")
    except NotFoundError as exc:
        pytest.skip(str(exc))
    with congestion_control_names():
        yield


def wait_gone(*names: str) -> None:
    for _ in range(250):  # a link's last reference may be dropped from a workqueue
        if not set(names) & set(available()):
            return
        time.sleep(0.02)


@pytest.fixture
def pinned(bpf_obj, names_free) -> Iterator[tuple[str, str]]:
    """(the pin directory, attach's stdout) with both congestion controls registered by
    ``bpfkit attach --pin``; whatever the test leaves registered is unregistered after."""
    pin_dir = f"/sys/fs/bpf/bpfkit-test-structops-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    try:
        proc = bpfkit("attach", str(bpf_obj("struct_ops_tcp_ca")), "--pin", pin_dir)
        assert proc.returncode == 0, proc.stderr
        yield pin_dir, proc.stdout
    finally:
        from bpfkit.maps import Map
        from bpfkit.struct_ops import unregister_map

        legacy = os.path.join(pin_dir, "bpfkit_reno_legacy")
        if os.path.exists(legacy):
            with Map.load_pinned(legacy) as m, contextlib.suppress(BPFKitError):
                unregister_map(m)  # a map-only registration outlives its pin
        shutil.rmtree(pin_dir, ignore_errors=True)  # the link's pin: its link is released
        wait_gone(LINKED, LEGACY)


def rows() -> dict[int, dict[str, object]]:
    proc = bpfkit("struct-ops", "list", "--json")
    assert proc.returncode == 0, proc.stderr
    return {row["id"]: row for row in map(json.loads, proc.stdout.splitlines())}


def test_attach_names_struct_ops_maps(bpf_obj, names_free):
    proc, lines = start_attached([BPFKIT, "attach", str(bpf_obj("struct_ops_tcp_ca"))])
    try:
        text = "".join(lines)
        assert "registered struct_ops map bpfkit_reno (tcp_congestion_ops)\n" in text, text
        assert "registered struct_ops map bpfkit_reno_legacy (tcp_congestion_ops)\n" in text, text
        assert lines[-1] == "registered; Ctrl-C or SIGTERM to detach\n" and "program(s)" not in text, text
        assert LINKED in available() and LEGACY in available()
    finally:
        proc.terminate()
        out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 0 and out.endswith("detached\n"), out
    wait_gone(LINKED, LEGACY)
    assert LINKED not in available() and LEGACY not in available()


def test_attach_pin_says_how_to_unregister(pinned):
    pin_dir, out = pinned
    legacy = os.path.join(pin_dir, "bpfkit_reno_legacy")
    assert "registered struct_ops map bpfkit_reno (tcp_congestion_ops)\n" in out
    assert (f"registered struct_ops map bpfkit_reno_legacy (tcp_congestion_ops): no link, removing its pin leaves "
            f"it registered; `bpfkit struct-ops unregister {legacy}` unregisters it") in out
    assert f"1 link(s) pinned under {pin_dir}; remove their pins to detach" in out
    assert "program(s)" not in out
    assert LINKED in available() and LEGACY in available()


def test_list_show_and_a_loopback_connection(pinned):
    pin_dir, _ = pinned
    linked_id, legacy_id = map_id(os.path.join(pin_dir, "bpfkit_reno")), map_id(os.path.join(pin_dir, "bpfkit_reno_legacy"))
    listed = rows()
    assert listed[legacy_id] == {"id": legacy_id, "name": "bpfkit_reno_leg", "type": "tcp_congestion_ops",
                                 "ops_name": LEGACY, "state": "inuse", "registered": True, "link_id": None,
                                 "pinned": None}
    linked = listed[linked_id]
    assert (linked["ops_name"], linked["state"], linked["registered"]) == (LINKED, "ready", True)
    link_pin = os.path.join(pin_dir, "bpfkit_reno_link")
    show = bpfkit("struct-ops", "show", link_pin, "--json")
    assert show.returncode == 0, show.stderr
    assert json.loads(show.stdout) == dict(linked, pinned=link_pin)
    from bpfkit.link import load_pinned_link

    with load_pinned_link(link_pin) as lk:
        assert linked["link_id"] == lk.info().id and lk.info().detail.map_id == linked_id
    text = bpfkit("struct-ops", "show", str(legacy_id))
    assert text.returncode == 0 and f"id:         {legacy_id}\n" in text.stdout and "link_id:    -\n" in text.stdout

    # A loopback connection with the map-only one: the kernel (and `ss -tin`) name it.
    with socket.create_server(("127.0.0.1", 0)) as server:
        client = socket.socket()
        with client:
            client.setsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, LEGACY.encode())
            client.connect(server.getsockname())
            conn, _ = server.accept()
            with conn:
                client.sendall(b"x" * 65536)
                conn.recv(65536)
                assert client.getsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, 16).rstrip(b"\0") == LEGACY.encode()
                port = client.getsockname()[1]
                if shutil.which("ss"):
                    ss = subprocess.run(["ss", "-tin", f"sport = :{port}"], check=True, capture_output=True, text=True, timeout=30)
                    assert f" {LEGACY} " in ss.stdout, ss.stdout


def test_unregister_by_pin_and_by_id(pinned):
    pin_dir, _ = pinned
    legacy_pin = os.path.join(pin_dir, "bpfkit_reno_legacy")
    linked_id, legacy_id = map_id(os.path.join(pin_dir, "bpfkit_reno")), map_id(legacy_pin)
    proc = bpfkit("struct-ops", "unregister", legacy_pin)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == f"unregistered struct_ops map {legacy_id} (bpfkit_reno_leg, tcp_congestion_ops)\n"
    assert LEGACY not in available() and LINKED in available()
    assert rows()[legacy_id]["registered"] is False
    again = bpfkit("struct-ops", "unregister", legacy_pin)
    assert again.returncode == 1 and "it was unregistered already" in again.stderr

    proc = bpfkit("struct-ops", "unregister", str(linked_id))  # a BPF_F_LINK map: its link is detached
    assert proc.returncode == 0, proc.stderr
    assert "detached its link" in proc.stdout
    assert LINKED not in available()
    row = rows()[linked_id]
    assert (row["registered"], row["link_id"]) == (False, None)
    link_pin = os.path.join(pin_dir, "bpfkit_reno_link")
    detached = bpfkit("struct-ops", "show", link_pin)
    assert detached.returncode == 1 and f"{link_pin} is a detached struct_ops link" in detached.stderr
    again = bpfkit("struct-ops", "unregister", str(linked_id))
    assert again.returncode == 1 and "it is not registered (no struct_ops link holds it)" in again.stderr


def test_removing_the_link_pin_unregisters(pinned):
    pin_dir, _ = pinned
    assert LINKED in available()
    os.unlink(os.path.join(pin_dir, "bpfkit_reno_link"))
    wait_gone(LINKED)  # the last reference to the link goes: released
    assert LINKED not in available()
    assert LEGACY in available()  # the map-only one stays registered without a link (hence the message)


def test_errors(pinned):
    pin_dir, _ = pinned
    bss_id = map_id(os.path.join(pin_dir, "bss"))
    proc = bpfkit("struct-ops", "show", str(bss_id))
    assert proc.returncode == 2 and f"map {bss_id} ('struct_o.bss') is not a struct_ops map" in proc.stderr
    proc = bpfkit("struct-ops", "unregister", str(bss_id))
    assert proc.returncode == 2 and "is not a struct_ops map" in proc.stderr
    missing = os.path.join(pin_dir, "no_such_pin")
    proc = bpfkit("struct-ops", "unregister", missing)
    assert proc.returncode == 1 and f"no pinned object at {missing}" in proc.stderr
    proc = bpfkit("struct-ops", "show", "no_such_struct_ops_name")
    assert proc.returncode == 1 and "no struct_ops map named 'no_such_struct_ops_name'" in proc.stderr
    proc = bpfkit("struct-ops", "show", "0")
    assert proc.returncode == 2 and "map id" in proc.stderr
    assert LINKED in available() and LEGACY in available()  # nothing unregistered by the errors


def test_agrees_with_bpftool(pinned):
    """What `bpftool struct_ops show id N` prints of the maps made here (bpftool 7.x: id, the
    map's name, the kernel struct)."""
    bpftool = shutil.which("bpftool")
    if bpftool is None:
        pytest.skip("needs bpftool")
    pin_dir, _ = pinned
    listed = rows()
    for pin in ("bpfkit_reno", "bpfkit_reno_legacy"):
        mid = map_id(os.path.join(pin_dir, pin))
        theirs = subprocess.run([bpftool, "-j", "struct_ops", "show", "id", str(mid)], check=True,
                                capture_output=True, text=True, timeout=60)
        assert json.loads(theirs.stdout) == {"id": mid, "name": listed[mid]["name"],
                                              "kernel_struct_ops": listed[mid]["type"]}


def test_an_ambiguous_name(bpf_obj, names_free):
    """Two objects loaded (their struct_ops maps made, not registered: the kernel's value is
    zero, no table name yet): the map name is refused with both ids; the ids themselves work."""
    import bpfkit as api

    with api.Collection.from_file(str(bpf_obj("struct_ops_tcp_ca"))) as one, \
            api.Collection.from_file(str(bpf_obj("struct_ops_tcp_ca"))) as two:
        ids = [one.maps["bpfkit_reno_legacy"].id, two.maps["bpfkit_reno_legacy"].id]
        proc = bpfkit("struct-ops", "show", "bpfkit_reno_leg")  # the map's name (the kernel's 15 characters)
        assert proc.returncode == 2 and "struct_ops name 'bpfkit_reno_leg' is ambiguous: map ids " in proc.stderr
        assert all(str(i) in proc.stderr for i in ids), proc.stderr
        proc = bpfkit("struct-ops", "show", str(ids[1]), "--json")
        row = json.loads(proc.stdout)
        assert (row["id"], row["state"], row["registered"], row["ops_name"]) == (ids[1], "init", False, None)
        proc = bpfkit("struct-ops", "unregister", str(ids[0]))
        assert proc.returncode == 1 and "it is not registered" in proc.stderr, proc.stderr
