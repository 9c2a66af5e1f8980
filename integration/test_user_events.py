# SPDX-License-Identifier: Apache-2.0
"""user_events on a kernel that has them: the VM kernel built by
integration/build_user_events_kernel.sh (Debian's 6.12 source with CONFIG_USER_EVENTS=y).

    integration/build_user_events_kernel.sh        # once; cached under ~/.cache/bpfkit/kernels
    python integration/vm.py --kernel user-events -- integration/test_user_events.py

Elsewhere every test skips: no Debian kernel (nor the host's) has CONFIG_USER_EVENTS.

The issue's "done when", in order, is test_bpf_link_enables_and_payloads_reach_bpf plus the
delete tests: this process registers an event (``enabled`` false), a BPF link on its trace
event turns ``enabled`` true, the payloads it emits reach BPF (exact values through a ring
buffer), closing the link turns ``enabled`` false, deleting removes the event.

How payloads reach BPF: user_events does not run BPF tracepoint programs (its BPF hook went in
5.18; user_event_perf() calls perf_trace_buf_submit() -> perf_tp_event() with no
trace_call_bpf()), which test_tracepoint_program_is_not_run pins down. The record it builds
(trace_entry + payload) is the third argument of perf_tp_event(), so a kprobe there
(bpf/user_events_tap.bpf.c) reads it. perf_tp_event() runs only on CPUs where a perf event of
the trace event is active: the tracepoint link opens its perf event on CPU 0 (all tasks), so
the emitting thread is pinned to CPU 0 while it emits.
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import os
import struct
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest

import bpfkit
from bpfkit import link
from bpfkit import user_events as ue
from bpfkit._kernel import tracefs as _tracefs
from bpfkit.errors import BusyError, KernelError, NotFoundError
from bpfkit.events import RingBuffer

REPO = Path(__file__).resolve().parent.parent

pytestmark = [
    pytest.mark.vm("user-events"),
    # Checked before the vm marker (skipif runs first), so off the VM the reason is this one.
    pytest.mark.skipif(not ue.available(), reason="CONFIG_USER_EVENTS absent"),
]

_names = itertools.count()
RECORD = struct.Struct("<II256s")  # struct ue_record in bpf/user_events_tap.bpf.c


def new_name() -> str:
    return f"bpfkit_t{os.getpid()}_{next(_names)}"


def wait_for(cond: Callable[[], bool], timeout: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


def event_dir(system: str, name: str) -> str:
    return os.path.join(_tracefs.tracefs_root(), "events", system, name)


@pytest.fixture(autouse=True)
def no_leftover_events() -> Iterator[None]:
    """Delete (after the test) every event this process made, persistent ones included."""
    yield
    for info in ue.list_events():
        if info.name.startswith(f"bpfkit_t{os.getpid()}_"):
            ue.delete(info.name, timeout=5.0, missing_ok=True)


@contextlib.contextmanager
def on_cpu0() -> Iterator[None]:
    before = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {0})
    try:
        yield
    finally:
        os.sched_setaffinity(0, before)


class Tap:
    """bpf/user_events_tap.bpf.o for one event: the tracepoint program and the perf_tp_event
    kprobe that copies this process's records of the event into a ring buffer."""

    def __init__(self, bpf_obj: Callable[[str], Path], event: ue.UserEvent) -> None:
        spec = bpfkit.load_spec(bpf_obj("user_events_tap"))
        spec.variables["target_type"].value = event.id
        spec.variables["target_tgid"].value = os.getpid()
        self.event = event
        self.coll = bpfkit.Collection(spec)
        self.kprobe: Any = None
        self.rb: RingBuffer | None = None
        try:
            self.kprobe = link.kprobe("perf_tp_event", self.coll.programs["ue_tap"])
            self.rb = RingBuffer(self.coll.maps["events"])
        except BaseException:
            self.close()
            raise

    def hits(self, slot: int) -> int:
        value = self.coll.maps["hits"].lookup(slot)
        return value if isinstance(value, int) else int.from_bytes(bytes(value), "little")

    def records(self) -> list[tuple[int, int, bytes]]:
        """(payload size, tgid, payload) of every record in the ring."""
        got: list[tuple[int, int, bytes]] = []
        assert self.rb is not None

        def take(rec: memoryview) -> None:
            size, tgid, payload = RECORD.unpack_from(rec)
            got.append((size, tgid, payload[:size]))

        self.rb.consume(take)
        return got

    def close(self) -> None:
        for thing in (self.rb, self.kprobe, self.coll):
            if thing is not None:
                thing.close()


@pytest.fixture
def tap_for(bpf_obj: Callable[[str], Path]) -> Iterator[Callable[[ue.UserEvent], Tap]]:
    taps: list[Tap] = []

    def make(event: ue.UserEvent) -> Tap:
        taps.append(Tap(bpf_obj, event))
        return taps[-1]

    yield make
    for t in taps:
        t.close()


# ----------------------------------------------------------------------------- the issue
def test_bpf_link_enables_and_payloads_reach_bpf(tap_for: Callable[[ue.UserEvent], Tap]) -> None:
    name = new_name()
    with ue.UserEvent(f"{name} u32 seq; s64 delta; char[16] tag; __rel_loc char[] msg") as ev:
        assert not ev.enabled, "nothing traces a new event"
        assert os.path.isdir(event_dir("user_events", name))
        assert ev.emit(1, 2, "x", "y") is False, "emit skips a disabled event"
        tap = tap_for(ev)

        lk = ev.attach(tap.coll.programs["ue_tracepoint"])
        try:
            assert wait_for(lambda: ev.enabled), "a BPF link on the trace event enables it"
            st = ev.status()
            assert st is not None and "perf" in st.users
            sent = [(i, -i * 1000, f"tag{i}", "m" * i) for i in range(1, 9)]
            with on_cpu0():
                for values in sent:
                    assert ev.emit(*values) is True
            got = tap.records()
        finally:
            lk.close()
        assert wait_for(lambda: not ev.enabled), "closing the link disables the event"

    assert [tgid for _, tgid, _ in got] == [os.getpid()] * len(sent)
    assert [ev.format.unpack(payload) for _, _, payload in got] == [
        {"seq": s, "delta": d, "tag": t, "msg": m} for s, d, t, m in sent
    ]
    # Exact bytes, too: the kernel recorded the payload as written.
    assert [payload for _, _, payload in got] == [ev.format.pack(*v) for v in sent]
    assert tap.hits(1) == len(sent)
    # Deleted by the kernel once the last reference went (6.5+ auto-delete, a work item).
    assert wait_for(lambda: not os.path.isdir(event_dir("user_events", name)))


def test_tracepoint_program_is_not_run(tap_for: Callable[[ue.UserEvent], Tap]) -> None:
    """Kernel fact this design rests on: a tracepoint program attached to a user event is never
    called (user_events lost its BPF hook in 5.18). If this fails, the kernel learned to call
    it: attach() then works directly and docs/user_events.md should say so."""
    with ue.UserEvent(f"{new_name()} u32 a") as ev:
        tap = tap_for(ev)
        with ev.attach(tap.coll.programs["ue_tracepoint"]):
            assert wait_for(lambda: ev.enabled)
            with on_cpu0():
                for i in range(5):
                    ev.emit(i)
            assert len(tap.records()) == 5
        assert tap.hits(0) == 0


def test_attach_for_one_process_follows_it_on_every_cpu(tap_for: Callable[[ue.UserEvent], Tap]) -> None:
    """attach(pid=...) opens the perf event for this process on any CPU: perf_tp_event() then
    runs wherever the process emits, so no pinning is needed."""
    with ue.UserEvent(f"{new_name()} u32 cpu; u32 i") as ev:
        tap = tap_for(ev)
        with ev.attach(tap.coll.programs["ue_tracepoint"], pid=os.getpid()):
            assert wait_for(lambda: ev.enabled)
            before = os.sched_getaffinity(0)
            sent = []
            try:
                for i, cpu in enumerate(sorted(before) * 3):
                    os.sched_setaffinity(0, {cpu})
                    assert ev.emit(cpu, i)
                    sent.append({"cpu": cpu, "i": i})
            finally:
                os.sched_setaffinity(0, before)
            assert [ev.format.unpack(p) for _, _, p in tap.records()] == sent
        assert wait_for(lambda: not ev.enabled)


def test_delete_persistent_event() -> None:
    name = new_name()
    ev = ue.UserEvent(f"{name} u64 v", persist=True)
    ev.close()
    # A persistent event outlives its registration ...
    time.sleep(0.2)
    assert os.path.isdir(event_dir("user_events", name))
    assert any(i.name == name for i in ue.list_events())
    # ... until deleted.
    assert ue.delete(name) is True
    assert not os.path.isdir(event_dir("user_events", name))
    assert all(i.name != name for i in ue.list_events())
    with pytest.raises(NotFoundError, match="no user event"):
        ue.delete(name)
    assert ue.delete(name, missing_ok=True) is False


def test_event_delete_method_and_busy_while_traced(tap_for: Callable[[ue.UserEvent], Tap]) -> None:
    name = new_name()
    ev = ue.UserEvent(f"{name} u32 a", persist=True)
    tap = tap_for(ev)
    lk = ev.attach(tap.coll.programs["ue_tracepoint"])
    try:
        ev.close()
        with pytest.raises(BusyError, match=r"enabled by .*perf.*EBUSY"):
            ue.delete(name, timeout=0.2)
        assert os.path.isdir(event_dir("user_events", name))
    finally:
        lk.close()
    ev.delete(timeout=5.0)  # retries EBUSY while the kernel drops the perf reference
    assert not os.path.isdir(event_dir("user_events", name))


def test_delete_refused_while_registered_elsewhere() -> None:
    name = new_name()
    with ue.UserEvent(f"{name} u32 a") as ev:
        with pytest.raises(BusyError):
            ue.delete(name, timeout=0.05)
        assert not ev.closed


def test_unregister_clears_the_bit_while_still_traced(tap_for: Callable[[ue.UserEvent], Tap]) -> None:
    with ue.UserEvent(f"{new_name()} u32 a") as ev:
        tap = tap_for(ev)
        with ev.attach(tap.coll.programs["ue_tracepoint"]):
            assert wait_for(lambda: ev.enabled)
            ev.unregister()
            assert not ev.enabled and not ev.registered
            # The write index still works: the file keeps its reference until close.
            with on_cpu0():
                assert ev.emit_raw(ev.format.pack(7), force=True)
            assert [ev.format.unpack(p) for _, _, p in tap.records()] == [{"a": 7}]


def test_ftrace_enable_sets_the_bit() -> None:
    with ue.UserEvent(f"{new_name()} u32 a") as ev:
        enable = f"events/{ev.tracepoint}/enable"
        _tracefs.append_line(enable, "1")
        try:
            assert wait_for(lambda: ev.enabled)
            assert "ftrace" in ev.status().users  # type: ignore[union-attr]
        finally:
            _tracefs.append_line(enable, "0")
        assert wait_for(lambda: not ev.enabled)


def test_typed_emit_from_dataclass_and_signature(tap_for: Callable[[ue.UserEvent], Tap]) -> None:
    @dataclasses.dataclass
    class Request:
        status: ue.U16
        method: ue.Char(8)  # type: ignore[valid-type]
        path: str
        body: bytes = b""

    def cache_miss(key: str, size: ue.U32, tier: ue.U8 = 2) -> None: ...

    name = new_name()
    with ue.UserEvent(Request, name=name) as req, ue.UserEvent(cache_miss, name=name + "_c") as miss:
        assert req.format.command == f"{name} u16 status; char[8] method; __rel_loc char[] path; __rel_loc u8[] body"
        t_req, t_miss = tap_for(req), tap_for(miss)
        with req.attach(t_req.coll.programs["ue_tracepoint"]), miss.attach(t_miss.coll.programs["ue_tracepoint"]):
            assert wait_for(lambda: req.enabled and miss.enabled)
            with on_cpu0():
                req.emit(Request(404, "GET", "/missing", b"\x00\x01"))
                req.emit(200, "POST", path="/x")
                miss.emit("k1", 4096)
                miss.emit(key="k2", size=1, tier=3)
        assert [req.format.unpack(p) for _, _, p in t_req.records()] == [
            {"status": 404, "method": "GET", "path": "/missing", "body": b"\x00\x01"},
            {"status": 200, "method": "POST", "path": "/x", "body": b""},
        ]
        assert [miss.format.unpack(p) for _, _, p in t_miss.records()] == [
            {"key": "k1", "size": 4096, "tier": 2}, {"key": "k2", "size": 1, "tier": 3},
        ]


def test_shared_file_and_write_indexes(tap_for: Callable[[ue.UserEvent], Tap]) -> None:
    name = new_name()
    with ue.UserEventsFile() as f:
        a = f.register(f"{name}_a u32 v")
        b = f.register(f"{name}_b u64 v")
        assert {a.write_index, b.write_index} == {0, 1}
        with pytest.raises(Exception, match="shared UserEventsFile"):
            a.delete()
        tap = tap_for(b)
        with b.attach(tap.coll.programs["ue_tracepoint"]):
            assert wait_for(lambda: b.enabled) and not a.enabled
            with on_cpu0():
                assert not a.emit(1)
                assert b.emit(1 << 40)
            assert [b.format.unpack(p) for _, _, p in tap.records()] == [{"v": 1 << 40}]
    assert a.closed and b.closed


def test_same_name_other_format() -> None:
    name = new_name()
    with ue.UserEvent(f"{name} u32 a"):
        with pytest.raises(BusyError, match="another format"):
            ue.UserEvent(f"{name} u64 a")
        # The same format joins the event (and gets its own write index on its own file).
        with ue.UserEvent(f"{name} u32 a") as again:
            assert again.tracepoint == f"user_events/{name}"


def test_multi_format_events() -> None:
    name = new_name()
    with ue.UserEvent(f"{name} u32 a", multi_format=True) as one, ue.UserEvent(f"{name} u64 a; u8 b", multi_format=True) as two:
        assert one.system == two.system == "user_events_multi"
        assert one.tracepoint_name != two.tracepoint_name
        for ev in (one, two):
            assert ev.tracepoint_name.startswith(name + ".")
            assert os.path.isdir(event_dir("user_events_multi", ev.tracepoint_name))
        assert one.id != two.id
        listed = {i.tracepoint: i.format for i in ue.list_events() if i.name == name}
        assert listed == {one.tracepoint_name: one.format, two.tracepoint_name: two.format}


def test_multi_format_attach(tap_for: Callable[[ue.UserEvent], Tap]) -> None:
    with ue.UserEvent(f"{new_name()} u32 a", multi_format=True) as ev:
        tap = tap_for(ev)
        with ev.attach(tap.coll.programs["ue_tracepoint"]):
            assert wait_for(lambda: ev.enabled)
            with on_cpu0():
                assert ev.emit(0xABCD)
            assert [ev.format.unpack(p) for _, _, p in tap.records()] == [{"a": 0xABCD}]
        assert wait_for(lambda: not ev.enabled)


def test_kernel_validates_payloads(tap_for: Callable[[ue.UserEvent], Tap]) -> None:
    with ue.UserEvent(f"{new_name()} u32 a; __rel_loc char[] s") as ev:
        # Shorter than the fixed fields: EINVAL, enabled or not (checked first).
        with pytest.raises(KernelError, match="EINVAL"):
            ev.emit_raw(b"\x01", force=True)
        # Not enabled: the kernel drops it (EBADF), which emit_raw reports as not written.
        assert ev.emit_raw(ev.format.pack(1, "x"), force=True) is False
        tap = tap_for(ev)
        with ev.attach(tap.coll.programs["ue_tracepoint"]):
            assert wait_for(lambda: ev.enabled)
            bad_loc = struct.pack("<II", 1, (200 << 16) | 0)  # 200 bytes past the end
            no_nul = struct.pack("<II", 1, (2 << 16) | 0) + b"ab"  # string without its NUL
            with on_cpu0():
                for raw in (bad_loc, no_nul):
                    with pytest.raises(KernelError, match="EFAULT"):
                        ev.emit_raw(raw)
            assert tap.records() == []


def test_persist_and_multi_format_together() -> None:
    # Both flags exist on 6.12 (6.5 and 6.10): registering with both works.
    with ue.UserEvent(f"{new_name()} u32 a", persist=True, multi_format=True) as ev:
        assert ev.flags == ue.RegFlag.PERSIST | ue.RegFlag.MULTI_FORMAT
        assert ev.system == "user_events_multi"


def test_cli_register_list_emit_delete() -> None:
    name = new_name()

    def cli(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "bpfkit.cli", "user-event", *args],
                              capture_output=True, text=True, cwd=REPO, timeout=120)

    reg = cli("register", name, "u32 status; __rel_loc char[] path")
    assert reg.returncode == 0, reg.stderr
    assert f"registered user_events/{name}" in reg.stdout
    listed = cli("list")
    assert f"user_events/{name}" in listed.stdout and "u32 status; __rel_loc char[] path" in listed.stdout
    enable = f"events/user_events/{name}/enable"
    _tracefs.append_line(enable, "1")
    try:
        emitted = cli("emit", name, "status=200", "path=/x", "--count", "3")
        assert emitted.returncode == 0, emitted.stderr
        assert "emitted 3 x" in emitted.stdout
        assert cli("list").stdout.count("[ftrace]") >= 1
    finally:
        _tracefs.append_line(enable, "0")
    skipped = cli("emit", name, "1", "/y")
    assert skipped.returncode == 0 and "not emitted" in skipped.stdout
    dele = cli("delete", name, "--timeout", "5")
    assert dele.returncode == 0, dele.stderr
    assert not os.path.isdir(event_dir("user_events", name))
    gone = cli("delete", name)
    assert gone.returncode == 1 and "no user event" in gone.stderr
