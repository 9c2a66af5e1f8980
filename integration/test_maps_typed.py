# SPDX-License-Identifier: Apache-2.0
"""Typed maps on the running kernel (issue #21): bpf/maps_typed.bpf.c loaded, its maps written
from Python and from the program (a getpgid() tracepoint), read back typed through the
object's BTF, and through the kernel's copy of it for maps opened by id or pin."""

from __future__ import annotations

import os
import shutil
import struct
import uuid
from collections.abc import Iterator

import pytest

from bpfkit import Collection, load_spec
from bpfkit._kernel.consts import BPF_NOEXIST, MapType
from bpfkit._kernel.cpus import num_possible_cpus
from bpfkit.btf.values import Record
from bpfkit.errors import BTFValueError, BusyError, NotSupportedError, UsageError
from bpfkit.maps import Map, MapSpec
from conftest import bpf_object

NCPU = num_possible_cpus()


@pytest.fixture
def coll() -> Iterator[Collection]:
    spec = load_spec(bpf_object("maps_typed"))
    spec.variables["target_pid"].set(os.getpid())
    with Collection(spec) as c:
        yield c


def trigger(coll: Collection, times: int = 1) -> None:
    link = pytest.importorskip("bpfkit.link")
    with link.tracepoint("syscalls", "sys_enter_getpgid", coll.programs["on_getpgid"]):
        for _ in range(times):
            os.getpgid(0)


def test_values_written_by_the_program_read_typed(coll: Collection) -> None:
    trigger(coll, 3)
    h = coll.maps["typed_hash"]
    (key, value), = h.items()
    assert isinstance(key, Record) and key.pid == os.getpid() and isinstance(key.comm, str) and key.comm
    assert value.count == 3 and value.delta == -1 and value.color.name == "MT_GREEN"  # knob defaults
    assert value.sign.name == "MT_NEG" and value.comm == "tag"
    assert getattr(value, "in") == {"port": 8080, "proto": 6}
    assert value.addr.v4 == 0x0100007F and value.addr.v6[:4] == [0x7F, 0, 0, 1]
    assert value.fl == {"a": 5, "b": 17, "c": -3, "d": 1000000, "e": 7} and value.fl.e.name == "MT_BLUE"
    assert value.hops[2] == {"port": 53, "proto": 0} and value.slots == [0, 0, 0, 42]
    assert value.on is True and value.anon_u == 0xABCD and value.y == 9 and value.mac == [0, 0, 0, 0, 0, 1]
    assert h[key] == value and h[{"pid": key.pid, "comm": key.comm}] == value
    assert key in h and {"pid": 1, "comm": "nobody"} not in h
    # Per-CPU values: a list with one value per possible CPU.
    per_cpu = coll.maps["typed_pcpu_hash"][os.getpid()]
    assert len(per_cpu) == NCPU and sum(1 for v in per_cpu if v.proto == 17) == 1
    assert coll.maps["typed_array"][0] == 3 and coll.maps["typed_array"][-1] == 0
    assert sum(coll.maps["typed_pcpu_array"][0]) == 3
    q = coll.maps["typed_queue"]
    assert [q.pop(), q.pop(), q.pop()] == [{"port": os.getpid() & 0xFFFF, "proto": 17}] * 3
    assert q.pop(default=None) is None
    with pytest.raises(KeyError):
        q.pop()


def test_python_writes_typed_values_the_program_keeps(coll: Collection) -> None:
    h = coll.maps["typed_hash"]
    key = Record(pid=os.getpid(), comm=_comm())
    h[key] = {"count": 40, "comm": "mine", "hops": [{"port": 1}]}
    trigger(coll)
    got = h[key]
    assert got.count == 41 and got.hops[0].port == 1 and got.comm == "tag"  # the program rewrote comm
    with pytest.raises(BusyError):
        h.update(key, {"count": 1}, BPF_NOEXIST)
    with pytest.raises(BTFValueError, match=r"map 'typed_hash': value.fl.c: expected int:4 \(an integer in \[-8, 7\]\), got 9"):
        h[key] = {"fl": {"c": 9}}
    with pytest.raises(BTFValueError, match="key.comm: expected char"):
        h[{"pid": 1, "comm": "x" * 40}] = {}
    assert h.pop(key).count == 41 and key not in h and h.pop(key, "gone") == "gone"


def _comm() -> str:
    with open("/proc/self/comm") as f:
        return f.read().strip()[:15]


def test_mapping_api_on_a_hash(coll: Collection) -> None:
    lru = coll.maps["typed_lru"]
    for i in range(5):
        lru[i] = "MT_BLUE" if i % 2 else i % 3
    assert len(lru) == 5 and sorted(lru) == [0, 1, 2, 3, 4] and sorted(lru.keys()) == [0, 1, 2, 3, 4]
    assert dict(lru.items()) == {0: 0, 1: 7, 2: 2, 3: 7, 4: 1} and lru[1].name == "MT_BLUE"
    assert sorted(lru.values()) == [0, 1, 2, 7, 7]
    assert dict(lru.lookup_batch(batch_size=2)) == dict(lru._items_by_key())
    assert 3 in lru and 99 not in lru and lru.get(99) is None and lru.get(99, "d") == "d"
    del lru[3]
    assert 3 not in lru and not lru.delete(3)
    with pytest.raises(KeyError):
        del lru[3]
    lru.clear()
    assert len(lru) == 0 and list(lru.items()) == []


def test_arrays_behave_as_sequences(coll: Collection) -> None:
    a = coll.maps["typed_array"]
    a[0], a[-1] = 5, 7
    assert len(a) == 8 and a[7] == 7 and a[-8] == 5 and a[1:3] == [0, 0] and a[::4] == [5, 0]
    assert list(a) == list(range(8)) and list(a.values()) == [5, 0, 0, 0, 0, 0, 0, 7]
    assert 7 in a and -8 in a and 8 not in a
    with pytest.raises(IndexError):
        a[8]
    with pytest.raises(UsageError, match=r"map 'typed_array' \(array\): delete is not possible"):
        del a[0]
    a.clear()  # zeroes, as bcc does: every index of an array exists
    assert list(a.values()) == [0] * 8
    p = coll.maps["typed_pcpu_array"]
    p[1] = list(range(NCPU))
    assert p[1] == list(range(NCPU)) and dict(p.items())[1] == list(range(NCPU))
    with pytest.raises(UsageError, match="per-CPU: give a list of"):
        p[1] = 5


def test_queues_and_stacks(coll: Collection) -> None:
    s = coll.maps["typed_stack"]
    for v in (1, 2, 3):
        s.push(v)
    assert s.lookup(None) == 3 and s.pop() == 3
    with pytest.raises(UsageError, match="pop\\(\\) takes no key"):
        s.pop(1)
    with pytest.raises(UsageError, match="has no keys"):
        1 in s  # noqa: B015
    with pytest.raises(UsageError, match="len\\(\\) is unknown"):
        len(s)
    s.clear()
    assert s.pop(default=None) is None


def test_maps_opened_by_id_and_pin_are_typed_through_kernel_btf(coll: Collection) -> None:
    from bpfkit._kernel.bpffs import ensure_bpffs

    trigger(coll)
    h = coll.maps["typed_hash"]
    with Map.from_id(h.id) as again:
        assert again.spec.btf is None and again.btf is not None  # the kernel's copy, fetched
        # Kernels before 6.0 have no signed enums: the loader sanitised enum mt_sign to an
        # unsigned one, and the kernel's copy decodes MT_NEG as 2**32-1 (the object's as -1).
        strip = [(k, {f: x for f, x in v.to_dict().items() if f != "sign"}) for k, v in h.items()]
        assert [(k, {f: x for f, x in v.to_dict().items() if f != "sign"}) for k, v in again.items()] == strip
        (k, v), = again.items()
        assert v.comm == "tag" and v.color.name == "MT_GREEN"
    ensure_bpffs("/sys/fs/bpf")
    path = f"/sys/fs/bpf/bpfkit-typed-{uuid.uuid4().hex[:8]}"
    try:
        coll.maps["typed_lru"].pin(path)
        coll.maps["typed_lru"][5] = "MT_BLUE"
        with Map.load_pinned(path) as pinned:
            assert pinned[5].name == "MT_BLUE"
        coll.maps["typed_lru"].unpin()
    finally:
        if os.path.exists(path):
            os.unlink(path)
    with Map.from_id(coll.maps[".bss"].id) as bss:  # data sections stay bytes
        assert bss[0] == struct.pack("=Q", 1)


def test_maps_without_btf_stay_bytes_and_formats_still_work() -> None:
    with Map(MapSpec("t_raw", MapType.HASH, 4, 8, 4)) as m:
        m[1] = 2
        assert m[1] == struct.pack("<Q", 2) and 1 in m and 2 not in m and len(m) == 1  # `in` was False
        assert m.pop(1) == struct.pack("<Q", 2) and len(m) == 0
    with Map(MapSpec("t_fmt", MapType.HASH, 8, 12, 4, key_format="<II", value_format="<IQ")) as m:
        m[(1, 2)] = (3, 4)
        assert dict(m.items()) == {(1, 2): (3, 4)} and (1, 2) in m


def test_items_fall_back_per_key_without_batch_ops() -> None:
    # A prog array has no batch lookup (the kernel answers ENOTSUPP): items() reads per key.
    with Map(MapSpec("t_progs", MapType.PROG_ARRAY, 4, 4, 2)) as m:
        with pytest.raises(NotSupportedError, match="batch lookup in prog_array map 't_progs' is not supported"):
            list(m.lookup_batch())
        assert list(m.items()) == [] and len(m) == 2
        m.clear()


def test_refusals_name_the_map_and_why() -> None:
    with Map(MapSpec("t_ring", MapType.RINGBUF, 0, 0, 4096)) as r:
        with pytest.raises(UsageError, match=r"map 't_ring' \(ringbuf\): clear is not possible"):
            r.clear()
        with pytest.raises(UsageError, match="items cannot be listed"):
            list(r.items())


def test_clear_a_large_hash_and_batch_read(coll: Collection) -> None:
    h = coll.maps["typed_pcpu_hash"]
    zero = [{"port": 0, "proto": 0}] * NCPU
    h.update_batch([(i, [{"port": i, "proto": 1}] * NCPU) for i in range(64)])
    got = dict(h.items())
    assert len(got) == 64 and got[10][0] == {"port": 10, "proto": 1} and got[10] != zero
    h.clear()
    assert len(h) == 0


@pytest.fixture(autouse=True)
def _no_pins_left() -> Iterator[None]:
    yield
    leftovers = [p for p in os.listdir("/sys/fs/bpf") if p.startswith("bpfkit-typed-")] if os.path.isdir("/sys/fs/bpf") else []
    for p in leftovers:
        shutil.rmtree(os.path.join("/sys/fs/bpf", p), ignore_errors=True)
    assert not leftovers


# ------------------------------------------------------------------ bpfkit attach/load --set
def _pinned_attach(pin_dir: str, *sets: str) -> None:
    import subprocess
    import sys
    from pathlib import Path

    repo = Path(__file__).resolve().parent.parent
    argv = [sys.executable, "-m", "bpfkit.cli", "attach", str(bpf_object("maps_typed")), "--pin", pin_dir]
    for item in sets:
        argv += ["--set", item]
    proc = subprocess.run(argv, capture_output=True, text=True, cwd=repo, env={**os.environ, "PYTHONPATH": str(repo)},
                          timeout=120)
    assert proc.returncode == 0, proc.stderr


@pytest.fixture
def pin_dir() -> Iterator[str]:
    from bpfkit._kernel.bpffs import ensure_bpffs

    ensure_bpffs("/sys/fs/bpf")
    path = f"/sys/fs/bpf/bpfkit-typed-{uuid.uuid4().hex[:8]}"
    yield path
    shutil.rmtree(path, ignore_errors=True)  # the link pins go too: the program detaches


def test_attach_set_knobs_change_what_the_program_does(pin_dir: str) -> None:
    from bpfkit import features

    if not features.probe("perf_link"):
        pytest.skip("attach --pin pins the tracepoint's bpf_link: perf_link (Linux 5.15) is missing")
    # The knobs select this process, a colour and a tag; the program obeys them.
    _pinned_attach(pin_dir, f"target_pid={os.getpid()}", "color=MT_BLUE", "tag=knobs", "delta=-9", "step=5")
    for _ in range(2):
        os.getpgid(0)
    with Map.load_pinned(f"{pin_dir}/typed_hash") as h, Map.load_pinned(f"{pin_dir}/bss") as bss:
        (key, value), = h.items()
        assert key.pid == os.getpid() and value.count == 2
        assert value.color.name == "MT_BLUE" and value.comm == "knobs" and value.delta == -9
        assert bss[0] == struct.pack("=Q", 10)  # hits grew by step=5 per call
    shutil.rmtree(pin_dir)
    # enabled=false: the program returns before touching any map.
    _pinned_attach(pin_dir, f"target_pid={os.getpid()}", "enabled=false")
    os.getpgid(0)
    with Map.load_pinned(f"{pin_dir}/typed_hash") as h:
        assert list(h.items()) == []


def test_attach_set_errors_load_nothing(pin_dir: str) -> None:
    import subprocess
    import sys
    from pathlib import Path

    repo = Path(__file__).resolve().parent.parent
    proc = subprocess.run([sys.executable, "-m", "bpfkit.cli", "attach", str(bpf_object("maps_typed")), "--pin", pin_dir,
                           "--set", "target_pid=-2147483649"], capture_output=True, text=True, cwd=repo,
                          env={**os.environ, "PYTHONPATH": str(repo)}, timeout=120)
    assert proc.returncode != 0 and not os.path.exists(pin_dir)
    assert ("--set 'target_pid=-2147483649': target_pid: expected const volatile __u32 (an integer in "
            "[-2147483648, 4294967295]; a negative one as two's complement), got -2147483649 (out of range)") in proc.stderr
