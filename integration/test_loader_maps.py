# SPDX-License-Identifier: Apache-2.0
"""Map objects (bpfkit.maps.Map) on the running kernel: element operations, iteration, per-CPU
values, struct formats, freezing, pinning and re-opening."""

from __future__ import annotations

import errno
import os
import shutil
import struct
import uuid

import pytest

from bpfkit._kernel.consts import BPF_EXIST, BPF_NOEXIST, MapType
from bpfkit._kernel.cpus import num_possible_cpus
from bpfkit.errors import BusyError, KernelError, NotFoundError, UsageError
from bpfkit.maps import Map, MapSpec


def test_hash_operations():
    with Map(MapSpec("t_hash", MapType.HASH, 4, 8, 16)) as m:
        assert m.lookup(1) is None and m.next_key() is None
        m.update(1, 10)
        m.update(2, 20, BPF_NOEXIST)
        with pytest.raises(BusyError):
            m.update(2, 21, BPF_NOEXIST)
        with pytest.raises(KernelError) as err:
            m.update(3, 30, BPF_EXIST)
        assert err.value.errno == errno.ENOENT
        assert m[1] == struct.pack("<Q", 10)
        assert sorted(m.keys()) == [struct.pack("<I", 1), struct.pack("<I", 2)]
        first = m.next_key()
        assert m.next_key(first) in (struct.pack("<I", 1), struct.pack("<I", 2))
        assert dict(m.items()) == dict(m.lookup_batch(batch_size=1))
        assert m.delete(1) and not m.delete(1)
        with pytest.raises(KeyError):
            del m[1]
        with pytest.raises(KeyError):
            m[99]
        with pytest.raises(UsageError, match="key is 2 bytes"):
            m.update(b"xx", 1)
        assert m.update_batch([(5, 50), (6, 60)]) == 2
        assert len(list(m.keys())) == 3
        info = m.info()
        assert (info.type, info.key_size, info.value_size, info.max_entries) == (MapType.HASH, 4, 8, 16)
        assert Map.from_id(m.id).close() is None


def test_struct_formats():
    spec = MapSpec("t_fmt", MapType.HASH, 8, 12, 4, key_format="<II", value_format="<IQ")
    with Map(spec) as m:
        m.update((1, 2), (3, 4))
        assert m.lookup((1, 2)) == (3, 4)
        assert list(m.items()) == [((1, 2), (3, 4))]


def test_per_cpu_values_are_lists():
    ncpu = num_possible_cpus()
    with Map(MapSpec("t_pcpu", MapType.PERCPU_ARRAY, 4, 4, 2, value_format="<I")) as m:
        m.update(0, list(range(ncpu)))
        assert m.lookup(0) == list(range(ncpu))
        assert m.lookup(1) == [0] * ncpu
        with pytest.raises(UsageError, match="per-CPU"):
            m.update(0, 5)


def test_queue_pop_and_freeze():
    with Map(MapSpec("t_queue", MapType.QUEUE, 0, 4, 4)) as q:
        q.update(None, struct.pack("<I", 7))
        q.update(None, struct.pack("<I", 8))
        assert q.lookup_and_delete() == struct.pack("<I", 7)
        assert q.lookup_and_delete() == struct.pack("<I", 8)
        assert q.lookup_and_delete() is None
    with Map(MapSpec("t_frozen", MapType.ARRAY, 4, 4, 1)) as a:
        a.update(0, 1)
        a.freeze()
        with pytest.raises(KernelError) as err:
            a.update(0, 2)
        assert err.value.errno == errno.EPERM
        assert a[0] == struct.pack("<I", 1)


def test_pin_and_load_pinned():
    from bpfkit._kernel.bpffs import ensure_bpffs

    ensure_bpffs("/sys/fs/bpf")
    path = f"/sys/fs/bpf/bpfkit-map-{uuid.uuid4().hex[:8]}"
    try:
        with Map(MapSpec("t_pin", MapType.ARRAY, 4, 8, 2)) as m:
            m.update(1, 99)
            m.pin(path)
        with Map.load_pinned(path) as again:
            assert again.name == "t_pin" and again[1] == struct.pack("<Q", 99)
            again.unpin()
        assert not os.path.exists(path)
        with pytest.raises(NotFoundError):
            Map.load_pinned(path)
    finally:
        if os.path.exists(path):
            os.unlink(path)
