# SPDX-License-Identifier: Apache-2.0
"""USDT on the host kernel: integration/usdt/usdt_target.c (built with gcc and sys/sdt.h)
traced by bpf/usdt_args.bpf.c (libbpf's usdt.bpf.h: BPF_USDT, bpf_usdt_arg_cnt,
bpf_usdt_cookie) through bpfkit.usdt.

The target fires its probes on command (stdin) and reports its semaphore, so every test
checks exact argument values per firing, exact counts, and that the semaphore is raised
only while a probe is attached.
"""

from __future__ import annotations

import os
import struct
import subprocess
import time

import pytest

import bpfkit
from bpfkit import link, usdt
from bpfkit._kernel import tracefs as _tracefs
from bpfkit.errors import NotFoundError, NotSupportedError, ParseError
from bpfkit.events import RingBuffer
from bpfkit.link.usdt import _SPEC_IDS
from integration.usdt.build import build_usdt_target, missing_tools

# struct usdt_event in bpf/usdt_args.bpf.c
EVENT = struct.Struct("<IIiiq6q")
TICK, TWICE = 1, 2


@pytest.fixture(scope="module")
def target(tmp_path_factory):
    why = missing_tools()
    if why:
        pytest.skip(why)
    return str(build_usdt_target(tmp_path_factory.mktemp("usdt")))


class Target:
    """A running usdt_target, driven line by line."""

    def __init__(self, path: str) -> None:
        self.proc = subprocess.Popen([path], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1)
        self.pid = self.proc.pid

    def cmd(self, line: str) -> str:
        assert self.proc.stdin and self.proc.stdout
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()
        return self.proc.stdout.readline().strip()

    def sema(self) -> int:
        return int(self.cmd("sema").split()[1])

    def fire(self, n: int) -> int:
        """Fire bpfkit:tick n times; returns how many firings saw the semaphore raised."""
        out = self.cmd(f"fire {n}").split()
        assert out[:2] == ["fired", str(n)], out
        return int(out[3])

    def close(self) -> None:
        if self.proc.poll() is None:
            assert self.proc.stdin
            self.proc.stdin.close()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.proc.stdout:
            self.proc.stdout.close()


@pytest.fixture
def proc(target):
    t = Target(target)
    yield t
    t.close()


@pytest.fixture
def coll(bpf_obj):
    with bpfkit.Collection.from_file(bpf_obj("usdt_args")) as c:
        yield c


def read_events(coll, want: int, timeout: float = 2.0) -> list[tuple]:
    got: list[tuple] = []
    with RingBuffer(coll.maps["usdt_events"], lambda rec: got.append(EVENT.unpack(bytes(rec)))) as rb:
        deadline = time.monotonic() + timeout
        while len(got) < want and time.monotonic() < deadline:
            rb.poll(0.1)
        rb.consume()
    return got


def tick_args(i: int) -> tuple:
    """What usdt_target.c's tick(i) passes: i, 5, 1000+i, -(i+1), i*10^12, (signed char)-i."""
    c = -i if i < 128 else ((-i + 128) % 256) - 128
    return (i, 5, 1000 + i, -(i + 1), i * 10**12, c)


def bpfkit_uprobe_events() -> list:
    if not _tracefs.has_probe_events("uprobe"):
        return []
    # This process's probes only: tracefs is shared with every other process on the machine
    # (another test run, a container with --pid=host) and their probes are not ours to judge.
    from bpfkit.link.tracefs_probes import parse_group

    return [e for e in _tracefs.list_probe_events("uprobe") if parse_group(e.group) == os.getpid()]


# ------------------------------------------------------------------------------ tests
def test_args_cookie_and_semaphore(target, proc, coll):
    assert proc.sema() == 0
    assert proc.fire(2) == 0
    lk = usdt.attach_usdt(coll.programs["on_tick"], target, "bpfkit", "tick", cookie=0x7777)
    try:
        assert isinstance(lk, link.LinkGroup) and len(lk) == 1
        assert lk.probes[0].full_name == "bpfkit:tick" and len(lk.probes[0].args) == 6
        assert proc.sema() == 1  # the kernel raised it in the running process
        assert proc.fire(5) == 5  # ... so the target's ENABLED() guard saw it each time
        events = read_events(coll, 5)
        assert [e[0] for e in events] == [TICK] * 5
        assert {e[1] for e in events} == {proc.pid}
        assert [e[2] for e in events] == [6] * 5  # bpf_usdt_arg_cnt()
        assert [e[4] for e in events] == [0x7777] * 5  # bpf_usdt_cookie()
        assert [e[5:] for e in events] == [tick_args(i) for i in range(5)]
        # A process started while attached finds its semaphore raised from the start.
        late = Target(target)
        try:
            assert late.sema() == 1
        finally:
            late.close()
    finally:
        lk.close()
    assert lk.closed
    assert proc.sema() == 0
    assert proc.fire(3) == 0
    assert read_events(coll, 1, timeout=0.3) == []
    assert _SPEC_IDS.in_use(coll.maps["__bpf_usdt_specs"].id) == set()


def test_two_sites_of_one_probe(target, proc, coll):
    with usdt.attach_usdt(coll.programs["on_twice"], target, None, "twice") as lk:
        assert len(lk) == 2
        assert [p.address for p in lk.probes] == sorted({p.address for p in lk.probes})
        assert len(set(lk.spec_ids)) == 2  # two argument layouts ($1 and $2): two specs
        assert proc.cmd("twice 3") == "twice 3"
        events = read_events(coll, 6)
    assert sorted((e[5], e[6]) for e in events) == sorted((site, i) for site in (1, 2) for i in range(3))
    assert {e[2] for e in events} == {2}
    assert proc.sema() == 0  # bpfkit:twice has no semaphore; tick's was never touched


def test_pid_filter(target, proc, coll):
    other = Target(target)
    try:
        with usdt.attach_usdt(coll.programs["on_tick"], target, "bpfkit", "tick", pid=proc.pid):
            # The uprobe (and with it the semaphore) is installed in that process only.
            assert proc.sema() == 1
            assert other.sema() == 0
            assert other.fire(4) == 0
            assert proc.fire(3) == 3
            events = read_events(coll, 3)
            time.sleep(0.05)
            events += read_events(coll, 1, timeout=0.2)
        assert {e[1] for e in events} == {proc.pid}
        assert len(events) == 3
        assert proc.sema() == 0
    finally:
        other.close()


def test_auto_attach_section_and_probe_spec(target, proc, coll):
    # SEC("usdt/BINARY:PROVIDER:NAME"), libbpf's form, through attach_section / attach_all.
    with link.attach_section(coll.programs["on_twice"], f"usdt/{target}:bpfkit:twice", pid=proc.pid) as lk:
        assert len(lk) == 2
        proc.cmd("twice 1")
        assert len(read_events(coll, 2)) == 2
    # bpftrace's probe spec usdt:BINARY:[PROVIDER:]NAME.
    lk = link.attach_probe(f"usdt:{target}:bpfkit:tick", coll.programs["on_tick"], cookie=9)
    try:
        assert proc.sema() == 1
        proc.fire(2)
        events = read_events(coll, 2)
        assert [(e[4], e[5:]) for e in events] == [(9, tick_args(0)), (9, tick_args(1))]
    finally:
        lk.close()
    assert proc.sema() == 0
    with link.attach_probe(f"usdt:{target}:twice", coll.programs["on_twice"]) as lk:
        assert len(lk) == 2


def test_attach_all_with_usdt_section(target, proc, bpf_obj):
    spec = bpfkit.load_spec(bpf_obj("usdt_args"))
    spec.programs["on_tick"].section = f"usdt/{target}:bpfkit:tick"
    with bpfkit.Collection(spec) as coll:
        with link.attach_all(coll, programs=["on_tick"]) as links:
            assert list(links) == ["on_tick"] and len(links["on_tick"]) == 1
            assert proc.sema() == 1
            proc.fire(1)
            assert [e[5:] for e in read_events(coll, 1)] == [tick_args(0)]
        assert proc.sema() == 0


def test_program_without_spec_map(target, proc, coll):
    """A program that does not use usdt.bpf.h: plain uprobes, the semaphore still counted."""
    with usdt.attach_usdt(coll.programs["usdt_count"], target, "bpfkit", "tick") as lk:
        assert lk.spec_ids == []
        assert proc.sema() == 1
        proc.fire(7)
        proc.cmd("twice 2")
    assert coll.maps["usdt_hits"][0] == 7
    assert proc.sema() == 0


def test_two_attachments_share_the_spec_map(target, proc, coll):
    a = usdt.attach_usdt(coll.programs["on_tick"], target, "bpfkit", "tick", cookie=1)
    b = usdt.attach_usdt(coll.programs["on_twice"], target, "bpfkit", "twice", cookie=2)
    try:
        assert not set(a.spec_ids) & set(b.spec_ids)
        assert proc.sema() == 1
        proc.fire(1)
        proc.cmd("twice 1")
        events = read_events(coll, 3)
        assert sorted((e[0], e[4]) for e in events) == [(TICK, 1), (TWICE, 2), (TWICE, 2)]
    finally:
        a.close()
        b.close()
    assert _SPEC_IDS.in_use(coll.maps["__bpf_usdt_specs"].id) == set()


def test_tracefs_path_counts_the_semaphore(target, proc, coll):
    """uprobe_events (PATH:OFFSET(REF_CTR_OFFSET)) instead of the PMU: same semaphore, same
    arguments, and the tracefs entries go with the link."""
    with usdt.attach_usdt(coll.programs["on_tick"], target, "bpfkit", "tick", tracefs=True):
        assert len(bpfkit_uprobe_events()) == 1
        assert proc.sema() == 1
        proc.fire(2)
        assert [e[5:] for e in read_events(coll, 2)] == [tick_args(0), tick_args(1)]
    assert bpfkit_uprobe_events() == []
    assert proc.sema() == 0


def test_errors_and_nothing_left(target, coll):
    with pytest.raises(NotFoundError, match=r"no USDT probe bpfkit:nope in .*usdt_target \(it has bpfkit:tick"):
        usdt.attach_usdt(coll.programs["on_tick"], target, "bpfkit", "nope")
    with pytest.raises(NotSupportedError, match="without a target"):
        link.attach_section(coll.programs["on_tick"], "usdt")
    with pytest.raises(ParseError, match="expected usdt/BINARY:PROVIDER:NAME"):
        link.attach_section(coll.programs["on_tick"], f"usdt/{target}:")
    lk = usdt.attach_usdt(coll.programs["on_tick"], target, "bpfkit", "tick")
    with pytest.raises(NotSupportedError, match="pin USDT link"):
        lk.pin("/sys/fs/bpf/bpfkit_usdt_test")
    lk.close()
    lk.close()  # idempotent
    assert _SPEC_IDS.in_use(coll.maps["__bpf_usdt_specs"].id) == set()
    assert bpfkit_uprobe_events() == []


@pytest.fixture(scope="module")
def pie_target(tmp_path_factory):
    why = missing_tools()
    if why:
        pytest.skip(why)
    return str(build_usdt_target(tmp_path_factory.mktemp("usdt_pie"), pie=True))


def test_pie_binary(pie_target, coll):
    """A position-independent build (ET_DYN): same probes, semaphore and arguments."""
    from bpfkit import features

    p = Target(pie_target)
    # Without BPF cookies (before 5.15) a PIE's probe address is only known in one process.
    pid = None if features.probe("bpf_cookie") else p.pid
    try:
        with usdt.attach_usdt(coll.programs["on_tick"], pie_target, "bpfkit", "tick", pid=pid) as lk:
            assert lk.probes[0].shared
            assert p.sema() == 1
            p.fire(2)
            assert [e[5:] for e in read_events(coll, 2)] == [tick_args(0), tick_args(1)]
        assert p.sema() == 0
    finally:
        p.close()


def test_kernel_without_cookies_uses_the_ip_map(target, pie_target, bpf_obj, monkeypatch):
    """Before 5.15 usdt.bpf.h finds the spec by instruction pointer (__bpf_usdt_ip_to_spec_id).
    This kernel has cookies, so the feature probe is made to say no (the one pretence): the
    loader then sets LINUX_HAS_BPF_COOKIE=0 and attach_usdt fills the IP map, for real."""
    from bpfkit import features

    real = features.probe

    def probe(name):
        if name == "bpf_cookie":
            return features.FeatureResult(name, False, "pretending to be a kernel before 5.15", "5.15")
        return real(name)

    monkeypatch.setattr(features, "probe", probe)
    proc, fixed = Target(pie_target), Target(target)
    try:
        with bpfkit.Collection.from_file(bpf_obj("usdt_args")) as coll:
            ipmap = coll.maps["__bpf_usdt_ip_to_spec_id"]
            with pytest.raises(NotSupportedError, match="pass pid="):
                usdt.attach_usdt(coll.programs["on_twice"], pie_target, "bpfkit", "twice")  # PIE: where is it?
            with usdt.attach_usdt(coll.programs["on_twice"], pie_target, "bpfkit", "twice", pid=proc.pid,
                                  cookie=5) as lk:
                entries = dict(ipmap.items())
                assert len(entries) == 2
                assert sorted(entries.values()) == sorted(lk.spec_ids)  # typed through the map's BTF
                proc.cmd("twice 2")
                events = read_events(coll, 4)
            assert sorted((e[4], e[5], e[6]) for e in events) == [(5, 1, 0), (5, 1, 1), (5, 2, 0), (5, 2, 1)]
            assert list(ipmap.keys()) == []
            # A fixed-position executable needs no pid: its link-time address is the IP.
            with usdt.attach_usdt(coll.programs["on_tick"], target, "bpfkit", "tick", cookie=6) as lk:
                assert list(ipmap.keys()) == [lk.probes[0].address]
                assert fixed.sema() == 1
                fixed.fire(2)
                assert [(e[4], e[5:]) for e in read_events(coll, 2)] == [(6, tick_args(0)), (6, tick_args(1))]
            assert list(ipmap.keys()) == []
    finally:
        proc.close()
        fixed.close()
