# SPDX-License-Identifier: Apache-2.0
"""LinkGroup, attach_many and close_links without a kernel.

The links here are stand-ins: a failing close() and a close that blocks until others run
are faults a real kernel does not produce on demand (integration/test_link_group.py does
the real thing with uprobes).
"""

from __future__ import annotations

import threading

import pytest

from bpfkit.errors import BPFKitError, KernelError, NotFoundError, UsageError
from bpfkit.link import Link, LinkGroup, attach_many, close_links
from bpfkit.link.base import LinkInfo


class FakeLink:
    def __init__(self, name: str, fail_close: bool = False) -> None:
        self.name = name
        self.closed = False
        self.pinned_path: str | None = None
        self.fail_close = fail_close
        self.closes = 0
        self.threads: set[str] = set()

    def close(self) -> None:
        self.closes += 1
        self.threads.add(threading.current_thread().name)
        if self.fail_close:
            raise KernelError(f"close {self.name}", 5)
        self.closed = True

    def pin(self, path: str) -> None:
        if self.name == "unpinnable":
            raise UsageError("cannot pin")
        self.pinned_path = path

    def unpin(self) -> None:
        self.pinned_path = None

    def update(self, prog: object) -> None:
        self.prog = prog

    def detach(self) -> None:
        self.detached = True

    def info(self) -> LinkInfo:
        return LinkInfo(1, int(self.name[1:]) if self.name[1:].isdigit() else 0, 0)

    def __enter__(self) -> "FakeLink":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def test_group_is_an_ordered_set_and_a_link() -> None:
    a, b = FakeLink("l1"), FakeLink("l2")
    group = LinkGroup([a, b, a])
    assert len(group) == 2 and list(group) == [a, b] and group[1] is b and a in group
    assert group.add(b) is b and len(group) == 2
    assert isinstance(group, Link)
    assert [i.id for i in group.info()] == [1, 2] and group.info(1).id == 2
    group.update("prog")
    group.detach()
    assert a.prog == "prog" and b.detached
    with group:
        assert not group.closed
    assert group.closed and a.closes == 1 and b.closes == 1
    group.close()  # idempotent: closed members are not closed again
    assert a.closes == 1
    assert LinkGroup().closed


def test_close_is_concurrent() -> None:
    # Each close waits until four closes are in progress at once: only concurrent closing
    # gets past the barrier.
    barrier = threading.Barrier(4, timeout=10)

    class Waiting(FakeLink):
        def close(self) -> None:
            barrier.wait()
            super().close()

    links = [Waiting(f"l{i}") for i in range(4)]
    LinkGroup(links).close(workers=4)
    assert all(lk.closed for lk in links)
    assert len(set().union(*(lk.threads for lk in links))) == 4


def test_errors_are_collected_and_the_first_raised_after_all_tried() -> None:
    links = [FakeLink("l0"), FakeLink("l1", fail_close=True), FakeLink("l2"), FakeLink("l3", fail_close=True)]
    with pytest.raises(KernelError) as info:
        close_links(links, workers=3)
    assert "close l1" in str(info.value)
    assert {str(e).split(":")[0] for e in info.value.errors} == {"close l1", "close l3"}
    assert links[0].closed and links[2].closed and all(lk.closes == 1 for lk in links)
    with pytest.raises(KernelError):
        close_links(links, workers=1)  # sequential: same contract
    assert close_links([], workers=4) == []
    with pytest.raises(UsageError):
        close_links(links, workers=0)


def test_attach_many_progress_and_result() -> None:
    seen = []
    group = attach_many(["a", "b", "c"], FakeLink, progress=lambda done, total: seen.append((done, total)))
    assert seen == [(1, 3), (2, 3), (3, 3)]
    assert [lk.name for lk in group] == ["a", "b", "c"]
    assert attach_many(iter(["x"]), FakeLink)[0].name == "x"  # any iterable


def test_attach_many_failure_closes_what_it_made_and_names_the_target() -> None:
    made: list[FakeLink] = []

    def attach_one(target: str) -> FakeLink:
        if target == "bad":
            raise NotFoundError("symbol 'bad' not found")
        made.append(FakeLink(target))
        return made[-1]

    with pytest.raises(NotFoundError) as info:
        attach_many(["a", "b", "bad", "c"], attach_one)
    assert "'bad' (3 of 4)" in str(info.value) and "not found" in str(info.value)
    assert [lk.name for lk in made] == ["a", "b"] and all(lk.closed for lk in made)

    class Boom(Exception):
        pass

    def interrupted(target: str) -> FakeLink:
        if target == "stop":
            raise Boom()
        return attach_one(target)

    made.clear()
    with pytest.raises(Boom):
        attach_many(["a", "stop"], interrupted)
    assert made[0].closed


def test_attach_many_failure_and_close_failure() -> None:
    def attach_one(target: str) -> FakeLink:
        if target == "bad":
            raise NotFoundError("nope")
        return FakeLink(target, fail_close=True)

    with pytest.raises(NotFoundError) as info:
        attach_many(["a", "bad"], attach_one)
    assert any("also failed to close" in note for note in info.value.__notes__)


def test_pin_is_all_or_nothing(tmp_path, monkeypatch) -> None:
    # Fake links pin nothing in the kernel, so a plain tmp directory stands in for bpffs (a mock:
    # the group checks that the directory is on bpffs before making it).
    from bpfkit._kernel import bpffs

    monkeypatch.setattr(bpffs, "is_bpffs", lambda path: True)
    a, b = FakeLink("l1"), FakeLink("l2")
    group = LinkGroup([a, b])
    where = tmp_path / "grp"
    group.pin(str(where))
    assert group.pinned_path == str(where) and a.pinned_path == f"{where}/0" and b.pinned_path == f"{where}/1"
    group.unpin()
    assert group.pinned_path is None and a.pinned_path is None and not where.exists()
    bad = LinkGroup([a, FakeLink("unpinnable")])
    with pytest.raises(BPFKitError, match="pin link group"):
        bad.pin(str(where))
    assert a.pinned_path is None and not where.exists() and bad.pinned_path is None
