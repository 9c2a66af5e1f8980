# SPDX-License-Identifier: Apache-2.0
"""cgroup programs on a cgroup v2 directory the tests make, with a child process inside it.

bpf/link_cgroup.bpf.c counts what the child does (slots below) and changes it: connect4 sends a
connect to FROM_PORT to TO_PORT (where the test listens), sysctl denies reads, dev denies the
char device 1:3 (/dev/null), getsockopt makes SO_PRIORITY read 42. After each test the cgroup
holds no program (BPF_PROG_QUERY of every hook) and no fd of this process points at it.
"""

from __future__ import annotations

import errno
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest

import bpfkit
from bpfkit import link
from bpfkit.errors import KernelError, NotSupportedError, UsageError

from .cgroup_support import Cgroup, bpffs_dir, count

# This run's own block of four ports, from its pid: a second copy of the suite binds its own.
_PORTS = 10000 + os.getpid() % 10000 * 4
FROM_PORT, TO_PORT, OTHER_PORT = _PORTS, _PORTS + 1, _PORTS + 2
SLOT_CONNECT, SLOT_REWRITTEN, SLOT_EGRESS, SLOT_SYSCTL, SLOT_DEV, SLOT_SOCKOPT, SLOT_CREATE, SLOT_SOCKOPS, \
    SLOT_BIND, SLOT_OTHER = range(10)
PRIORITY = 42
MODES = ["link", "prog_attach"]


def _fds_on(path: str) -> list[str]:
    found = []
    for name in os.listdir("/proc/self/fd"):
        try:
            if os.readlink(f"/proc/self/fd/{name}") == path:
                found.append(name)
        except OSError:
            pass
    return found


@pytest.fixture
def cg() -> Iterator[Cgroup]:
    c = Cgroup("cg")
    try:
        yield c
        assert link.cgroup_programs(c.path) == [], "programs left on the cgroup"
        assert not _fds_on(c.path), "an fd on the cgroup directory leaked"
    finally:
        c.close()
    assert not os.path.exists(c.path)


@pytest.fixture
def tmp_bpffs() -> Iterator[str]:
    path = bpffs_dir("cgroup")
    try:
        yield path
        assert not os.listdir(path), "pins left behind"
    finally:
        for name in os.listdir(path):
            os.unlink(os.path.join(path, name))
        os.rmdir(path)


@pytest.fixture
def coll(bpf_obj) -> Iterator[bpfkit.Collection]:
    spec = bpfkit.load_spec(bpf_obj("link_cgroup"))
    spec.variables["from_port"].value = FROM_PORT
    spec.variables["to_port"].value = TO_PORT
    spec.variables["dev_major"].value = 1
    spec.variables["dev_minor"].value = 3
    spec.variables["sockopt_value"].value = PRIORITY
    with bpfkit.Collection(spec) as c:
        yield c




@pytest.fixture
def listener() -> Iterator[socket.socket]:
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("127.0.0.1", TO_PORT))
    s.listen(16)
    yield s
    s.close()


def expected_class(mode: str) -> type:
    return link.CgroupLink if mode == "link" else link.CgroupProgAttachment


@pytest.mark.parametrize("mode", MODES)
def test_connect4_counts_and_rewrites(cg: Cgroup, coll, listener, mode: str) -> None:
    child = cg.child()
    prog = coll.programs["cg_connect4"]
    with link.attach_cgroup(cg.path, prog, mode=mode) as lk:
        assert isinstance(lk, expected_class(mode)) and isinstance(lk, link.Link)
        assert child(f"connect({FROM_PORT})") == TO_PORT  # rewritten to where the test listens
        assert child(f"connect({TO_PORT})") == TO_PORT
        assert child(f"connect({OTHER_PORT})") == "ECONNREFUSED"  # not rewritten
        assert (count(coll, SLOT_CONNECT), count(coll, SLOT_REWRITTEN)) == (3, 1)
        # A connect from this process (outside the cgroup) is not seen.
        with socket.create_connection(("127.0.0.1", TO_PORT)):
            pass
        assert count(coll, SLOT_CONNECT) == 3
        q = link.cgroup_query(cg.path, "connect4")
        assert q.prog_ids == [prog.id] and q.programs[0].flags == "multi"
    assert child(f"connect({FROM_PORT})") == "ECONNREFUSED"  # detached on close
    assert count(coll, SLOT_CONNECT) == 3


@pytest.mark.parametrize("mode", MODES)
def test_egress_packets_counted(cg: Cgroup, coll, mode: str) -> None:
    child = cg.child()
    with link.attach_cgroup(cg.path, coll.programs["cg_egress"], mode=mode):
        assert child("udp(4813, 7)") == 7
        assert count(coll, SLOT_EGRESS) == 7
    child("udp(4813, 3)")
    assert count(coll, SLOT_EGRESS) == 7


def test_sysctl_read_denied(cg: Cgroup, coll) -> None:
    child = cg.child()
    assert child("read('/proc/sys/kernel/ostype')") == "Linux\n"
    with link.attach_cgroup(cg.path, coll.programs["cg_sysctl"]) as lk:
        assert lk.info().detail.hook == "sysctl"
        assert child("read('/proc/sys/kernel/ostype')") == "EPERM"
        assert count(coll, SLOT_SYSCTL) == 1
        with open("/proc/sys/kernel/ostype") as f:  # this process is outside the cgroup
            assert f.read() == "Linux\n"
    assert child("read('/proc/sys/kernel/ostype')") == "Linux\n"
    assert count(coll, SLOT_SYSCTL) == 1


def test_device_open_denied(cg: Cgroup, coll) -> None:
    child = cg.child()
    assert child("read('/dev/zero')") == "\0" * 256
    with link.attach_cgroup(cg.path, coll.programs["cg_dev"], "device"):
        assert child("read('/dev/null')") == "open:EPERM"
        assert child("read('/dev/zero')") == "\0" * 256  # 1:5 is allowed
        assert count(coll, SLOT_DEV) == 1
    assert child("read('/dev/null')") == ""


def test_getsockopt_altered(cg: Cgroup, coll) -> None:
    child = cg.child()
    assert child("priority()") == 0
    with link.attach_cgroup(cg.path, coll.programs["cg_getsockopt"]):
        assert child("priority()") == PRIORITY
        assert count(coll, SLOT_SOCKOPT) == 1
    assert child("priority()") == 0


def test_link_info_pin_update_detach(cg: Cgroup, coll, listener, tmp_bpffs: str) -> None:
    child = cg.child()
    a, b = coll.programs["cg_connect4"], coll.programs["cg_connect4_other"]
    lk = link.attach_cgroup(cg.path, a)
    assert isinstance(lk, link.CgroupLink)
    info = lk.info()
    assert info.type == bpfkit.LinkType.CGROUP and info.program_id == a.id
    assert info.detail.cgroup_id == os.stat(cg.path).st_ino
    assert info.detail.attach_type == link.CGROUP_HOOKS["connect4"][0] and info.detail.path() == cg.path
    pin = os.path.join(tmp_bpffs, "cg_link")
    lk.pin(pin)
    lk.close()  # the pin keeps it attached
    assert child(f"connect({FROM_PORT})") == TO_PORT
    with link.load_pinned_link(pin) as again:
        assert isinstance(again, link.CgroupLink)
        again.update(b)  # atomically: now only slot 9 counts
        assert link.cgroup_query(cg.path, "connect4").prog_ids == [b.id]
        assert child(f"connect({FROM_PORT})") == "ECONNREFUSED" and count(coll, SLOT_OTHER) == 1
        again.unpin()
        again.detach()
        assert link.cgroup_query(cg.path, "connect4").prog_ids == []
    assert not os.path.exists(pin)


def test_prog_attach_flags_replace_and_errors(cg: Cgroup, coll) -> None:
    a, b = coll.programs["cg_connect4"], coll.programs["cg_connect4_other"]
    with link.attach_cgroup(cg.path, a, mode="prog_attach") as la:
        with pytest.raises(KernelError) as exc:
            link.attach_cgroup(cg.path, a, mode="prog_attach")
        assert str(exc.value) == (f"attach cgroup program 'cg_connect4' to cgroup {cg.path} connect4 via prog_attach: "
                                  "BPF_PROG_ATTACH: EINVAL (Invalid argument): this program is already attached to "
                                  "this hook of this cgroup")
        with pytest.raises(KernelError) as exc:
            link.attach_cgroup(cg.path, b, mode="prog_attach", flags="override")
        assert exc.value.errno == errno.EPERM and "other flags than 'override'" in str(exc.value)
        la.update(b)  # BPF_F_REPLACE of a by b
        assert link.cgroup_query(cg.path, "connect4").prog_ids == [b.id]
        with link.attach_cgroup(cg.path, a, mode="prog_attach", replace=b) as lb:  # swap back, by hand
            assert link.cgroup_query(cg.path, "connect4").prog_ids == [a.id]
            lb.close()
            la.close()  # b is gone already (replaced): closing is quiet
    with link.attach_cgroup(cg.path, a, mode="prog_attach", flags="override") as lo:
        assert link.cgroup_query(cg.path, "connect4").programs[0].flags == "override"
        lo.update(b)
        assert link.cgroup_query(cg.path, "connect4").prog_ids == [b.id]
        with pytest.raises(NotSupportedError, match="pin of a program attached with BPF_PROG_ATTACH"):
            lo.pin("/sys/fs/bpf/x")


def test_usage_errors(cg: Cgroup, coll) -> None:
    with pytest.raises(UsageError, match="was loaded for the connect4 hook, not bind4"):
        link.attach_cgroup(cg.path, coll.programs["cg_connect4"], "bind4")
    with pytest.raises(UsageError, match="is a cgroup_sysctl program; the cgroup egress hook needs a cgroup_skb"):
        link.attach_cgroup(cg.path, coll.programs["cg_sysctl"], "egress")
    with pytest.raises(UsageError, match="unknown cgroup hook 'connect5'"):
        link.attach_cgroup(cg.path, coll.programs["cg_connect4"], "connect5")
    with pytest.raises(UsageError, match="is not in a cgroup v2 hierarchy"):
        link.attach_cgroup("/tmp", coll.programs["cg_connect4"])
    with pytest.raises(bpfkit.errors.NotFoundError, match="no cgroup /nonexistent"):
        link.attach_cgroup("/nonexistent", coll.programs["cg_connect4"])
    with pytest.raises(UsageError, match="flags= and replace= are for mode='prog_attach'"):
        link.attach_cgroup(cg.path, coll.programs["cg_connect4"], mode="link", flags="multi")


def test_ordering_and_revision(cg: Cgroup, coll) -> None:
    if not link.have_cgroup_mprog():
        pytest.skip("cgroup hooks have no program ordering before Linux 6.16 (cgroup mprog)")
    a, b = coll.programs["cg_connect4"], coll.programs["cg_connect4_other"]
    with link.attach_cgroup(cg.path, a) as la:
        rev = link.cgroup_query(cg.path, "connect4").revision
        with pytest.raises(KernelError) as exc:
            link.attach_cgroup(cg.path, b, expected_revision=rev + 3)
        assert exc.value.errno == errno.ESTALE and f"revision is not {rev + 3}" in str(exc.value)
        with link.attach_cgroup(cg.path, b, anchor=link.Anchor.before(la), expected_revision=rev):
            assert link.cgroup_query(cg.path, "connect4").prog_ids == [b.id, a.id]
        with link.attach_cgroup(cg.path, b, anchor=link.Anchor.after(link_id=la.id)):
            assert link.cgroup_query(cg.path, "connect4").prog_ids == [a.id, b.id]
        with pytest.raises(KernelError, match=r"EINVAL .*: the anchor \(after program 'cg_connect4'\) must name a link"):
            link.attach_cgroup(cg.path, b, anchor=link.Anchor.after(a))


def test_effective_query_sees_the_parent(cg: Cgroup, coll) -> None:
    sub = os.path.join(cg.path, "sub")
    os.mkdir(sub)
    try:
        with link.attach_cgroup(cg.path, coll.programs["cg_egress"]) as lk:
            assert link.cgroup_query(sub, "egress").prog_ids == []
            q = link.cgroup_query(sub, "egress", effective=True)
            assert q.prog_ids == [coll.programs["cg_egress"].id] and q.effective
            del lk
    finally:
        os.rmdir(sub)


def test_attach_all_to_a_cgroup(cg: Cgroup, coll, listener) -> None:
    child = cg.child()
    skipped = coll.attach_all()  # without a cgroup, cgroup programs are passed over with a note
    assert not skipped.links and "pass cgroup=" in skipped.skipped["cg_connect4"]
    with coll.attach_all(cgroup=cg.path) as links:
        assert set(links) == {"cg_connect4", "cg_connect4_other", "cg_egress", "cg_sysctl", "cg_dev",
                              "cg_getsockopt", "cg_sock_create", "cg_sockops", "cg_bind4"}
        assert child(f"connect({FROM_PORT})") == TO_PORT
        assert child("bind(0)") > 0
        assert child("priority()") == PRIORITY
        assert count(coll, SLOT_CREATE) == 3  # three AF_INET sockets
        assert count(coll, SLOT_BIND) == 1 and count(coll, SLOT_OTHER) == 1
        assert count(coll, SLOT_SOCKOPS) > 0  # TCP callbacks of the connect
        hooks = {p.hook for p in link.cgroup_programs(cg.path)}
        assert hooks == {"connect4", "egress", "sysctl", "device", "getsockopt", "sock_create", "sock_ops", "bind4"}


def _bpfkit(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "bpfkit.cli", *args], capture_output=True, text=True, timeout=60)


def test_cli_attach_pin_and_show(cg: Cgroup, coll, bpf_obj, tmp_bpffs: str) -> None:
    pin_dir = os.path.join(tmp_bpffs, "cg")
    proc = _bpfkit("attach", str(bpf_obj("link_cgroup")), "--cgroup", cg.path, "--pin", pin_dir)
    assert proc.returncode == 0, proc.stderr
    assert f"attached cg_connect4: cgroup {cg.path} connect4 (link)" in proc.stdout
    try:
        show = _bpfkit("cgroup", "show", cg.path, "--json")
        assert show.returncode == 0, show.stderr
        rows = [json.loads(line) for line in show.stdout.splitlines()]
        assert {r["attach_type"] for r in rows} >= {"connect4", "egress", "sysctl", "device"}
        assert all(r["attach_flags"] == "multi" and r["name"] for r in rows)
        text = _bpfkit("cgroup", "show", cg.path).stdout
        assert "cg_connect4" in text and "connect4" in text
        tree = _bpfkit("cgroup", "tree", cg.path)
        assert tree.returncode == 0 and tree.stdout.splitlines()[0].startswith("CgroupPath")
        assert cg.path in tree.stdout
        links = _bpfkit("link", "list")
        assert f"cgroup {cg.path} connect4" in links.stdout
    finally:
        for name in os.listdir(pin_dir):
            os.unlink(os.path.join(pin_dir, name))
        os.rmdir(pin_dir)
    # Removing a link's last pin releases it from a kernel work item (bpf_link_put): soon, not now.
    deadline = time.monotonic() + 5
    while link.cgroup_programs(cg.path) and time.monotonic() < deadline:
        time.sleep(0.05)
