# SPDX-License-Identifier: Apache-2.0
"""Fault injection: the Nth kernel call of a load, an attach or a pin fails, for every N along
the path, and nothing is left behind: no fd, no bpf_link, no pin, no tracefs probe, no
directory.

This is a MOCK, on purpose and only for the fault: a real kernel cannot be made to fail one
chosen bpf()/perf_event_open()/ioctl()/tracefs write of a sequence (ENOMEM under memory
pressure, EINTR from a signal, EAGAIN...). The fault is injected at bpfkit's syscall wrapper
layer (bpfkit._kernel: ``bpf.bpf``, ``perf.perf_event_open``, ``perf._ioctl``,
``tracefs.add_probe_event``); every other call, before and after it, goes to the real kernel,
and the leftovers are looked for in the real kernel and filesystems.
"""

from __future__ import annotations

import errno
import gc
import os
import shutil
import uuid
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest

import bpfkit
from bpfkit import link
from bpfkit._kernel import bpf as _bpf
from bpfkit._kernel.bpffs import ensure_bpffs
from bpfkit._kernel import perf as _perf
from bpfkit._kernel import tracefs as _tracefs
from bpfkit.errors import BPFKitError, kernel_error

from .uprobe_support import uprobe_program

pytestmark = pytest.mark.root

FAULT = errno.ENOMEM


class Injected(Exception):
    pass


class FaultInjector:
    """Counts the kernel calls made through bpfkit's wrappers; the ``fail_at``-th raises the
    wrapper's own error for ENOMEM (as the kernel would), once. ``fail_at=0``: only count."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.calls: list[str] = []
        self.fail_at = 0
        self.failed: str | None = None
        self.active = False
        real_bpf, real_open, real_ioctl = _bpf.bpf, _perf.perf_event_open, _perf._ioctl
        real_add = _tracefs.add_probe_event

        def gate(name: str) -> None:
            if not self.active:
                return
            self.calls.append(name)
            if len(self.calls) == self.fail_at:
                self.failed = name
                raise kernel_error(name, FAULT, "injected fault")

        def bpf(cmd: Any, attr: Any, size: int = _bpf.ATTR_SIZE, detail: str = "") -> int:
            gate(f"BPF_{cmd.name}")
            return real_bpf(cmd, attr, size, detail)

        def perf_event_open(*a: Any, **kw: Any) -> Any:
            gate("perf_event_open")
            return real_open(*a, **kw)

        def ioctl(fd: Any, request: int, arg: Any) -> int:
            gate(f"ioctl {request:#x}")
            return real_ioctl(fd, request, arg)

        def add_probe_event(kind: str, line: str) -> None:
            gate(f"write {kind}_events")
            return real_add(kind, line)

        monkeypatch.setattr(_bpf, "bpf", bpf)
        monkeypatch.setattr(_perf, "perf_event_open", perf_event_open)
        monkeypatch.setattr(_perf, "_ioctl", ioctl)
        monkeypatch.setattr(_tracefs, "add_probe_event", add_probe_event)

    def run(self, fail_at: int, fn: Callable[[], Any]) -> Any:
        self.calls, self.fail_at, self.failed, self.active = [], fail_at, None, True
        try:
            return fn()
        finally:
            self.active = False


@pytest.fixture
def faults(monkeypatch: pytest.MonkeyPatch) -> FaultInjector:
    return FaultInjector(monkeypatch)


def _fds() -> set[str]:
    gc.collect()
    return {f"{fd} -> {os.readlink(f'/proc/self/fd/{fd}')}" for fd in os.listdir("/proc/self/fd")
            if os.path.exists(f"/proc/self/fd/{fd}")}


def _our_probes() -> set[str]:
    from bpfkit.link import tracefs_probes as tp

    mine = tp.parse_owner(tp.new_group())
    found = set()
    for kind in _tracefs.PROBE_KINDS:
        try:
            events = _tracefs.list_probe_events(kind)
        except BPFKitError:
            continue
        for ev in events:
            owner = tp.parse_owner(ev.group)
            if owner and mine and owner[0] == mine[0]:
                found.add(f"{ev.group}/{ev.event}")
    return found


def _link_ids_of(prog_ids: set[int]) -> set[int]:
    found = set()
    for lid in _bpf.iter_ids("link"):
        try:
            with _bpf.fd_by_id("link", lid) as fd:
                info, _ = _bpf.link_info(fd)
        except BPFKitError:
            continue
        if int(info.prog_id) in prog_ids:
            found.add(lid)
    return found


@pytest.fixture
def bpffs_dir() -> Iterator[Path]:
    ensure_bpffs("/sys/fs/bpf")
    d = Path("/sys/fs/bpf") / f"bpfkit-faults-{uuid.uuid4().hex[:8]}"
    yield d
    shutil.rmtree(d, ignore_errors=True)


def _sweep(faults: FaultInjector, op: Callable[[], Any], undo: Callable[[Any], None],
           check: Callable[[], None]) -> list[str]:
    """Run ``op`` failing at call 1, 2, ... until a run makes no call fail (then undo it); after
    every run check nothing is left. Returns the call names of the complete path."""
    fds = _fds()
    probes = _our_probes()
    n = 1
    while True:
        try:
            result = faults.run(n, op)
        except BPFKitError as exc:
            assert faults.failed is not None, f"fault {n}: failed without the injected fault: {exc}"
            assert errno.errorcode[FAULT] in str(exc), f"fault {n} at {faults.failed}: the error lost its cause: {exc}"
        else:
            # No error: either no call was left to fail (the path is complete), or the failed
            # call has a fallback (BTF_LOAD is retried with a log, then the load goes on
            # without BTF, as libbpf's does). Either way, undo and check as after a failure.
            undo(result)
            del result
        left_fds = _fds() - fds
        assert not left_fds, f"fault {n} at {faults.failed}: fds left open: {sorted(left_fds)}"
        assert _our_probes() == probes, f"fault {n} at {faults.failed}: tracefs probes left: {_our_probes() - probes}"
        check()
        if faults.failed is None:
            print(f"{n - 1} faults injected along: {', '.join(faults.calls)}")
            return faults.calls
        n += 1
        assert n < 200, "the path never ends"


def test_load_with_pins(bpf_obj, bpffs_dir: Path, faults: FaultInjector) -> None:
    pin_dir = bpffs_dir / "a" / "b"
    spec = bpfkit.load_spec(bpf_obj("loader_pin"))

    def check() -> None:
        assert not bpffs_dir.exists(), f"left: {list(bpffs_dir.rglob('*'))}"

    def undo(coll: Any) -> None:
        coll.close()
        shutil.rmtree(bpffs_dir)

    calls = _sweep(faults, lambda: bpfkit.Collection(spec.copy(), pin_dir=pin_dir), undo, check)
    assert "BPF_OBJ_PIN" in calls and "BPF_PROG_LOAD" in calls, calls


def test_load_reusing_a_pin(bpf_obj, bpffs_dir: Path, faults: FaultInjector) -> None:
    """The pinned map exists: a failed load must leave it (and its directory) as it was."""
    spec = bpfkit.load_spec(bpf_obj("loader_pin"))
    bpfkit.Collection(spec.copy(), pin_dir=bpffs_dir).close()
    before = sorted(os.listdir(bpffs_dir))

    def check() -> None:
        assert sorted(os.listdir(bpffs_dir)) == before

    calls = _sweep(faults, lambda: bpfkit.Collection(spec.copy(), pin_dir=bpffs_dir), lambda c: c.close(), check)
    assert "BPF_OBJ_GET" in calls and "BPF_OBJ_PIN" not in calls, calls




@pytest.mark.parametrize("mode, use_tracefs", [("link", False), ("ioctl", False), ("link", True), ("ioctl", True)])
def test_uprobe_attach(bpf_obj, faults: FaultInjector, sleeper: int, mode: str, use_tracefs: bool) -> None:
    from bpfkit import features

    if use_tracefs and not features.probe("uprobe_events").supported:
        pytest.skip("kernel lacks uprobe_events")
    if not use_tracefs and not features.probe("uprobe_pmu").supported:
        pytest.skip("kernel lacks uprobe_pmu")
    if mode == "link" and not features.probe("perf_link").supported:
        pytest.skip("kernel lacks perf_link")
    with uprobe_program() as prog:
        prog_id = int(_bpf.obj_info(prog.fd, "struct bpf_prog_info").id)
        exe = link.Executable("libc")

        def check() -> None:
            assert not _link_ids_of({prog_id}), "a bpf_link of the program survived"

        calls = _sweep(faults, lambda: exe.uprobe("getpid", prog, pid=sleeper, mode=mode, tracefs=use_tracefs),
                       lambda lk: lk.close(), check)
    assert "perf_event_open" in calls, calls
    assert ("BPF_LINK_CREATE" in calls) == (mode == "link"), calls
    assert any(c.startswith("write uprobe_events") for c in calls) == use_tracefs, calls


def test_attach_all_tracepoints(bpf_obj, faults: FaultInjector) -> None:
    with bpfkit.Collection.from_file(bpf_obj("minimal")) as coll:
        prog_ids = {int(_bpf.obj_info(p.fd, "struct bpf_prog_info").id) for p in coll.programs.values()}

        def check() -> None:
            assert not _link_ids_of(prog_ids)

        calls = _sweep(faults, coll.attach_all, lambda links: links.close(), check)
    assert "perf_event_open" in calls, calls


def test_group_pin(bpf_obj, bpffs_dir: Path, faults: FaultInjector, sleeper: int) -> None:
    from bpfkit import features

    if not features.probe("perf_link").supported:
        pytest.skip("kernel lacks perf_link (pinning needs bpf_links)")
    with uprobe_program() as prog:
        exe = link.Executable("libc")
        group = link.attach_many(["getpid", "getppid", "getuid"], lambda s: exe.uprobe(s, prog, pid=sleeper))
        try:
            def check() -> None:
                assert not bpffs_dir.exists(), f"left: {list(bpffs_dir.rglob('*'))}"

            def undo(_: Any) -> None:
                group.unpin()  # removes the directory it made

            calls = _sweep(faults, lambda: group.pin(str(bpffs_dir)), undo, check)
        finally:
            group.close()
    assert calls.count("BPF_OBJ_PIN") == 3, calls


def test_cli_load_pins_programs_and_maps(bpf_obj, bpffs_dir: Path, faults: FaultInjector,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    """``bpfkit load OBJ DIR`` (in-process): a fault anywhere leaves no pin and no directory."""
    from bpfkit.cli.main import main

    target = bpffs_dir / "pins"

    def op() -> int:
        code = main(["load", str(bpf_obj("loader_pin")), str(target)])
        if code != 0:
            raise kernel_error("bpfkit load", FAULT, capsys.readouterr().err.strip())
        return code

    def check() -> None:
        assert not target.exists(), f"left: {list(target.rglob('*'))}"

    def undo(_: Any) -> None:
        shutil.rmtree(target)
        shutil.rmtree(bpffs_dir, ignore_errors=True)

    calls = _sweep(faults, op, undo, check)
    assert calls.count("BPF_OBJ_PIN") >= 2, calls
    assert "Traceback" not in capsys.readouterr().err
