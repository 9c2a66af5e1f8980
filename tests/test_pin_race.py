# SPDX-License-Identifier: Apache-2.0
"""Maps pinned by name, made by two loaders at once (issue #19 item 6).

The loser of the race finds the path taken when it pins (BPF_OBJ_PIN: EEXIST) and must reuse the
winner's map, as libbpf's bpf_object__create_maps does, after the same compatibility check
(type, key/value size, max_entries, flags, map_extra).
"""

from __future__ import annotations

import multiprocessing
import os
import shutil
import uuid
from pathlib import Path
from typing import Iterator

import pytest

import bpfkit
from bpfkit.collection import Collection
from bpfkit.errors import UsageError

pytestmark = pytest.mark.root

MAP = "loader_pinned_counter"


@pytest.fixture
def pin_dir() -> Iterator[Path]:
    from bpfkit._kernel.bpffs import ensure_bpffs

    ensure_bpffs("/sys/fs/bpf")
    d = Path("/sys/fs/bpf") / f"bpfkit-test-{uuid.uuid4().hex[:8]}"
    yield d
    shutil.rmtree(d, ignore_errors=True)


def _value(raw: object) -> int:
    return int.from_bytes(raw, "little") if isinstance(raw, (bytes, bytearray)) else int(raw or 0)  # type: ignore[call-overload]


def _count(coll: Collection) -> int:
    return _value(coll.maps[MAP].lookup(0))


def test_pin_taken_between_look_and_pin_reuses_the_winner(bpf_obj, pin_dir, monkeypatch) -> None:
    """Deterministic interleaving with real syscalls: a second loader pins the name after this
    one looked (no pin yet) and before it pins (the kernel answers EEXIST)."""
    spec = bpfkit.load_spec(bpf_obj("loader_pin"))
    original = Collection._open_pin
    winner: list[Collection] = []

    def open_pin_then_lose_race(self: Collection, path: str, kspec):  # type: ignore[no-untyped-def]
        found = original(self, path, kspec)
        if not winner:
            monkeypatch.setattr(Collection, "_open_pin", original)
            winner.append(Collection(spec.copy(), pin_dir=pin_dir))
        return found

    monkeypatch.setattr(Collection, "_open_pin", open_pin_then_lose_race)
    with Collection(spec, pin_dir=pin_dir) as loser:
        with winner[0] as first:
            assert loser.maps[MAP].id == first.maps[MAP].id
            assert loser.maps["private_counter"].id != first.maps["private_counter"].id
            loser.programs["count_runs"].test_run(b"\0" * 64)
            assert _count(first) == 1
    assert os.listdir(pin_dir) == [MAP]


def test_pin_taken_by_an_incompatible_map_is_refused(bpf_obj, pin_dir, monkeypatch) -> None:
    spec = bpfkit.load_spec(bpf_obj("loader_pin"))
    other = bpfkit.load_spec(bpf_obj("loader_pin"))
    other.maps[MAP].max_entries = 2
    original = Collection._open_pin
    winner: list[Collection] = []

    def open_pin_then_lose_race(self: Collection, path: str, kspec):  # type: ignore[no-untyped-def]
        found = original(self, path, kspec)
        if not winner:
            monkeypatch.setattr(Collection, "_open_pin", original)
            winner.append(Collection(other, pin_dir=pin_dir))
        return found

    monkeypatch.setattr(Collection, "_open_pin", open_pin_then_lose_race)
    with pytest.raises(UsageError) as info:
        Collection(spec, pin_dir=pin_dir)
    winner[0].close()
    assert f"the map pinned at {pin_dir}/{MAP} is incompatible: max_entries is 2, the object wants 1" in str(info.value)
    assert os.listdir(pin_dir) == [MAP]  # the winner's pin stays, nothing of the loser's


def _race(obj: str, pin_dir: str, barrier, rounds: int, results) -> None:  # type: ignore[no-untyped-def]
    spec = bpfkit.load_spec(obj)
    ok = 0
    failures: list[str] = []
    for i in range(rounds):
        d = os.path.join(pin_dir, str(i))
        barrier.wait()
        try:
            with Collection(spec, pin_dir=d) as coll:
                coll.programs["count_runs"].test_run(b"\0" * 64)
                ok += 1
        except Exception as exc:  # noqa: BLE001 - counted and reported by the parent
            failures.append(f"round {i}: {type(exc).__name__}: {exc}")
    results.put((ok, failures))


def test_concurrent_loaders_share_one_pinned_map(bpf_obj, pin_dir) -> None:
    """Two processes load the same object into fresh pin directories at the same moment, many
    times: every load succeeds and both count into the one pinned map."""
    rounds = int(os.environ.get("BPFKIT_PIN_RACE_ROUNDS", "1200"))
    ctx = multiprocessing.get_context("fork")
    barrier = ctx.Barrier(2)
    results = ctx.Queue()
    obj = str(bpf_obj("loader_pin"))
    procs = [ctx.Process(target=_race, args=(obj, str(pin_dir), barrier, rounds, results)) for _ in range(2)]
    for p in procs:
        p.start()
    outcome = [results.get(timeout=300) for _ in procs]
    for p in procs:
        p.join(30)
    failures = [f for _, fs in outcome for f in fs]
    assert not failures, failures[:5]
    assert sum(ok for ok, _ in outcome) == 2 * rounds
    for i in range(rounds):
        with bpfkit.maps.Map.load_pinned(str(pin_dir / str(i) / MAP)) as m:
            assert _value(m.lookup(0)) == 2, f"round {i}: the two loads did not share the map"
