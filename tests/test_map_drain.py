# SPDX-License-Identifier: Apache-2.0
"""Map.drain: BPF_MAP_LOOKUP_AND_DELETE_BATCH, and libbpf-tools' fallback (keys, then lookup and
delete each), on a hash and a per-CPU hash while a BPF program inserts into them: across the
drains every inserted element comes out exactly once (bpf/tool_drain.bpf.c)."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator

import pytest

import bpfkit
from bpfkit.errors import UsageError
from bpfkit.maps import Map, MapSpec
from bpfkit.spec.consts import MapType
from conftest import bpf_object

pytestmark = pytest.mark.root
WRITES = 20_000


class _Writer(threading.Thread):
    """Calls getppid() WRITES times once told to: each call inserts one sequence number."""

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.go = threading.Event()
        self.drained = threading.Event()  # set by the drainer after each pass
        self.started_tid = threading.Event()
        self.tid = 0

    def run(self) -> None:
        self.tid = threading.get_native_id()
        self.started_tid.set()
        self.go.wait(30)
        for i in range(WRITES):
            os.getppid()
            if i % 64 == 0:
                time.sleep(0)  # let the draining thread have the GIL: its bpf() calls overlap these
            if i % 200 == 199:
                time.sleep(0.002)  # and drain a few times over the run, whatever its pace
            if i % 4000 == 3999:  # and wait for one whole pass now and then: the drains overlap
                self.drained.clear()  # the writes however slow the machine (a TCG VM drained
                self.drained.wait(10)  # nothing before the writer was done)


@pytest.fixture
def running() -> Iterator[tuple[bpfkit.Collection, _Writer]]:
    writer = _Writer()
    writer.start()
    assert writer.started_tid.wait(10)
    spec = bpfkit.load_spec(bpf_object("tool_drain"))
    spec.variables["target_tid"].value = writer.tid
    with bpfkit.Collection(spec) as coll, coll.attach_all():
        yield coll, writer
    writer.go.set()
    writer.join(30)


def _drain_while_writing(coll: bpfkit.Collection, writer: _Writer, batched: bool) -> tuple[list[list[tuple[int, object]]], int]:
    maps = coll.maps["seen"], coll.maps["seen_percpu"]
    if not batched:
        for m in maps:
            m._drain_batched = False  # the path kernels before 5.6 take (refused with EINVAL there)
    drains: list[list[tuple[int, object]]] = [[], []]
    overlapped = 0  # drains that took elements while the writer was mid-way
    counters = coll.maps["counters"]
    writer.go.set()
    while writer.is_alive():
        for i, m in enumerate(maps):
            got = m.drain(batch_size=64)
            overlapped += bool(got) and 0 < counters[0] < WRITES
            drains[i].extend(got)
        writer.drained.set()
    writer.join()
    for i, m in enumerate(maps):
        drains[i].extend(m.drain())
        assert m.drain() == []
        assert list(m.keys()) == []
    return drains, overlapped


@pytest.mark.parametrize("batched", [True, False], ids=["lookup_and_delete_batch", "keys_lookup_delete"])
def test_drains_take_each_insert_once(running: tuple[bpfkit.Collection, _Writer], batched: bool) -> None:
    coll, writer = running
    (plain, percpu), overlapped = _drain_while_writing(coll, writer, batched)
    counters = coll.maps["counters"]
    total, full = counters[0], counters[1]
    assert total == WRITES and full == 0
    assert overlapped >= 2, "the drains did not overlap the writes"
    keys = [k for k, _ in plain]
    assert len(keys) == len(set(keys)) == total  # none twice, none lost
    assert set(keys) == set(range(total))
    assert sum(v for _, v in plain) == total  # type: ignore[misc]
    pkeys = [k for k, _ in percpu]
    assert len(pkeys) == len(set(pkeys)) == total and set(pkeys) == set(range(total))
    ncpus = len(percpu[0][1])  # type: ignore[arg-type]
    assert ncpus >= 1 and all(len(v) == ncpus and sum(v) == 1 for _, v in percpu)  # type: ignore[arg-type]
    assert sum(sum(v) for _, v in percpu) == total  # type: ignore[arg-type]
    assert coll.maps["seen"]._drain_batched is batched  # the batch op was used where asked


def _hash(mtype: MapType = MapType.HASH, entries: int = 8192) -> Map[int, int]:
    return Map(MapSpec(name="tool_drain_t", type=mtype, key_size=4, value_size=8, max_entries=entries,
                       key_format="<I", value_format="<Q"))


def test_drain_small_batches_past_crowded_buckets() -> None:
    """batch_size 1: a bucket with two elements is ENOSPC (kernel/bpf/hashtab.c), and the batch
    doubles; every element still comes out once."""
    with _hash(entries=4096) as m:
        m.update_batch([(i, i * 3) for i in range(4000)])
        got = m.drain(batch_size=1)
        assert sorted(got) == [(i, i * 3) for i in range(4000)]
        assert m.drain() == [] and m.next_key() is None


def test_drain_percpu_values_and_lru() -> None:
    with _hash(MapType.LRU_PERCPU_HASH) as m:
        ncpus = len(m.encode_value([0] * m._ncpus)) // 8
        m[5] = list(range(1, ncpus + 1))
        ((key, values),) = m.drain()
        assert key == 5 and values == list(range(1, ncpus + 1))  # type: ignore[arg-type]
        assert m.drain() == []


def test_drain_refuses_arrays_and_bad_sizes() -> None:
    array = Map(MapSpec(name="tool_drain_a", type=MapType.ARRAY, key_size=4, value_size=8, max_entries=4))
    with array, pytest.raises(UsageError, match="drain"):
        array.drain()
    with _hash() as m, pytest.raises(UsageError, match="batch_size"):
        m.drain(batch_size=0)


def test_a_map_type_without_the_batch_op_falls_back() -> None:
    """An LPM trie has no BPF_MAP_LOOKUP_AND_DELETE_BATCH (kernel/bpf/lpm_trie.c sets no batch
    ops: ENOTSUPP/EINVAL): drain() notices on its first call and goes key by key from then on."""
    spec = MapSpec(name="tool_drain_lpm", type=MapType.LPM_TRIE, key_size=8, value_size=8, max_entries=16,
                   flags=1)  # BPF_F_NO_PREALLOC: an LPM trie must have it
    with Map(spec) as m:
        keys = [(24).to_bytes(4, "little") + bytes([10, 0, i, 0]) for i in range(5)]
        for i, key in enumerate(keys):
            m[key] = (i).to_bytes(8, "little")
        got = m.drain()
        assert m._drain_batched is False
        assert sorted(got) == sorted((k, (i).to_bytes(8, "little")) for i, k in enumerate(keys))
        assert m.drain() == [] and m.next_key() is None
