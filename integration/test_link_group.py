# SPDX-License-Identifier: Apache-2.0
"""Many links on the host: hundreds of libc uprobes attached with attach_many, triggered,
closed concurrently, and nothing left behind (fds: the autouse fixture; tracefs entries and
bpffs pins: checked here).

bpf/group_uprobe.bpf.c counts hits of this process per bpf_cookie; each target gets its index
as cookie, and a few of the targets are libc functions Python never calls by itself (a64l,
l64a, abs), called here through ctypes an exact number of times.
"""

from __future__ import annotations

import ctypes
import os
import sys
import time
from pathlib import Path
from typing import Any, Iterator

import pytest

import bpfkit
from bpfkit import features, link
from bpfkit._kernel import tracefs as _tracefs
from bpfkit.errors import KernelError, NotFoundError
from bpfkit.link.group import close_links

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "benchmarks"))
from bench_attach import probe_targets  # noqa: E402

MANY = 200
TRIGGERS = ("a64l", "l64a", "abs")


@pytest.fixture(scope="module")
def names() -> list[str]:
    chosen = probe_targets(link.Executable("libc"), MANY)
    for t in TRIGGERS:
        if t not in chosen:
            chosen[-1 - TRIGGERS.index(t)] = t
    return chosen


@pytest.fixture
def coll(bpf_obj: Any) -> Iterator[Any]:
    cookies = features.probe("bpf_cookie")
    if not cookies:  # the program counts hits per bpf_get_attach_cookie()
        pytest.skip(f"group_uprobe calls bpf_get_attach_cookie (Linux {cookies.min_version}): {cookies.reason}")
    spec = bpfkit.load_spec(str(bpf_obj("group_uprobe")))
    spec.variables["target_tgid"].value = os.getpid()
    with bpfkit.Collection(spec) as c:
        yield c


def hits(coll: Any, cookie: int) -> int:
    value = coll.maps["by_cookie"].lookup(cookie)
    if value is None:
        return 0
    return value if isinstance(value, int) else int.from_bytes(bytes(value), "little")


def call_triggers(n: int) -> None:
    libc = ctypes.CDLL("libc.so.6")
    libc.a64l.argtypes, libc.l64a.argtypes, libc.abs.argtypes = [ctypes.c_char_p], [ctypes.c_long], [ctypes.c_int]
    libc.l64a.restype = ctypes.c_char_p
    for _ in range(n):
        libc.a64l(b"./")
        libc.l64a(42)
        libc.abs(-3)


def our_probes() -> list[Any]:
    if not _tracefs.has_probe_events("uprobe"):
        return []
    return [e for e in _tracefs.list_probe_events("uprobe") if link.tracefs_probes.parse_group(e.group) == os.getpid()]


def test_attach_many_trigger_and_close_concurrently(coll: Any, names: list[str]) -> None:
    exe = link.Executable("libc")
    prog = coll.programs["group_uprobe"]
    seen: list[tuple[int, int]] = []
    index = {n: i for i, n in enumerate(names)}
    group = link.attach_many(names, lambda s: exe.uprobe(s, prog, cookie=1000 + index[s]),
                             progress=lambda done, total: seen.append((done, total)))
    try:
        assert len(group) == MANY and seen == [(i, MANY) for i in range(1, MANY + 1)]
        assert all(isinstance(lk, link.PerfEventLink) for lk in group)
        infos = group.info()
        if infos[0].detail.detail is not None:  # perf_event link info has the uprobe since 6.6
            assert [i.detail.detail.cookie for i in infos[:3]] == [1000, 1001, 1002]
        assert len({i.id for i in infos}) == MANY
        call_triggers(5)
        for t in TRIGGERS:
            assert hits(coll, 1000 + index[t]) == 5, t
    finally:
        start = time.monotonic()
        group.close()
        elapsed = time.monotonic() - start
    assert group.closed and all(lk.closed for lk in group)
    print(f"closed {MANY} uprobe links concurrently in {elapsed:.2f} s")
    call_triggers(2)
    assert all(hits(coll, 1000 + index[t]) == 5 for t in TRIGGERS)  # detached: no more hits
    assert our_probes() == []


@pytest.mark.parametrize("tracefs", [False, True], ids=["pmu", "tracefs"])
def test_failure_half_way_closes_what_was_made(coll: Any, names: list[str], tracefs: bool) -> None:
    exe = link.Executable("libc")
    prog = coll.programs["group_uprobe"]
    made: list[Any] = []

    def attach_one(sym: str) -> Any:
        made.append(exe.uprobe(sym, prog, tracefs=tracefs))
        return made[-1]

    targets = names[:8] + ["bpfkit_no_such_function"] + names[8:12]
    with pytest.raises(NotFoundError) as info:
        link.attach_many(targets, attach_one)
    assert "'bpfkit_no_such_function' (9 of 13)" in str(info.value)
    assert len(made) == 8 and all(lk.closed for lk in made)
    assert our_probes() == []


def test_tracefs_probes_removed_after_concurrent_close(coll: Any, names: list[str]) -> None:
    exe = link.Executable("libc")
    prog = coll.programs["group_uprobe"]
    group = link.attach_many(names[:16], lambda s: exe.uprobe(s, prog, tracefs=True))
    try:
        assert len(our_probes()) == 16
    finally:
        group.close()
    assert our_probes() == []


def test_close_errors_are_collected(coll: Any, names: list[str]) -> None:
    # A close that fails cannot be made to happen with a real link: one stand-in member
    # fails, the real ones around it must all be closed anyway.
    class FailingClose:
        closed = False

        def close(self) -> None:
            raise KernelError("close stand-in", 5)

    exe = link.Executable("libc")
    prog = coll.programs["group_uprobe"]
    real = [exe.uprobe(s, prog) for s in names[:6]]
    group = link.LinkGroup(real[:3] + [FailingClose()] + real[3:])
    with pytest.raises(KernelError, match="close stand-in") as info:
        group.close()
    assert len(info.value.errors) == 1
    assert all(lk.closed for lk in real)


def test_pin_group_and_load_it_back(coll: Any, names: list[str], tmp_path: Path) -> None:
    bpffs = "/sys/fs/bpf"
    if not os.path.ismount(bpffs):
        pytest.skip("bpffs is not mounted at /sys/fs/bpf")
    where = f"{bpffs}/bpfkit_test_group_{os.getpid()}"
    exe = link.Executable("libc")
    prog = coll.programs["group_uprobe"]
    with link.attach_many(names[:4], lambda s: exe.uprobe(s, prog)) as group:
        group.pin(where)
        try:
            assert sorted(os.listdir(where)) == ["0", "1", "2", "3"]
            with link.LinkGroup.load_pinned(where) as again:
                assert [i.id for i in again.info()] == [i.id for i in group.info()]
        finally:
            group.unpin()
    assert not os.path.exists(where)


def test_bpf_links_are_released_before_any_perf_event_is_destroyed(coll: Any, names: list[str]) -> None:
    # The order close_links relies on (see DEFAULT_CLOSE_WORKERS): every bpf_link release in
    # the pool first, then the perf events one at a time in the caller's order. Spies on real
    # links record the order; the kernel does the closing.
    exe = link.Executable("libc")
    group = link.attach_many(names[:6], lambda s: exe.uprobe(s, coll.programs["group_uprobe"]))
    order: list[tuple[str, int]] = []

    class SpyFd:
        def __init__(self, fd: Any, index: int) -> None:
            self._fd, self._index, self._seen = fd, index, False

        def close(self) -> None:  # the link's own close() closes it again: a no-op
            if not self._seen:
                order.append(("bpf_link", self._index))
                self._seen = True
            self._fd.close()

        def __getattr__(self, name: str) -> Any:
            return getattr(self._fd, name)

    for i, lk in enumerate(group):
        lk.fd = SpyFd(lk.fd, i)
        lk.close = (lambda close, i: lambda: (order.append(("perf_event", i)), close())[1])(lk.close, i)
    assert close_links(group, workers=4) == []
    kinds = [kind for kind, _ in order]
    assert kinds == ["bpf_link"] * 6 + ["perf_event"] * 6, order
    assert [i for kind, i in order if kind == "perf_event"] == list(range(6))
    assert all(lk.closed for lk in group)


def test_sequential_and_concurrent_close_agree(coll: Any, names: list[str]) -> None:
    exe = link.Executable("libc")
    prog = coll.programs["group_uprobe"]
    for workers in (1, 8):
        group = link.attach_many(names[:20], lambda s: exe.uprobe(s, prog))
        assert close_links(group, workers=workers) == []
        assert group.closed
