# SPDX-License-Identifier: Apache-2.0
"""Ring walking without a kernel: perf rings and BPF ring buffers laid out in plain memory
exactly as the kernel lays them out, filled by small writers that follow the kernel's rules
(record headers, padding, wrap-around, BUSY/DISCARD bits, PERF_RECORD_LOST)."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bpfkit.events import _common
from bpfkit.events.perf import PerfRing
from bpfkit.events.records import HAVE_NUMPY, RecordFormat
from bpfkit.events.ringbuf import BUSY, DISCARD, _Ring
from bpfkit.errors import ParseError

REC = struct.Struct("<QQIIQ")
FMT = RecordFormat("<QQIIQ", ["seq", "ts", "pid", "cpu", "arg"])


def payload(seq: int, size: int = 32) -> bytes:
    body = REC.pack(seq, seq * 3, size, 1, ~seq & (2**64 - 1))
    return (body + bytes(range(size)))[:size] if size >= 32 else body[:size]


# ------------------------------------------------------------------------- BPF ring buffer
class FakeRingbuf:
    """A RINGBUF as user space sees it: the data area twice in a row (the double mapping)."""

    def __init__(self, size: int = 4096, start: int = 0) -> None:
        self.size = size
        self.cons = bytearray(8)
        self.prod = bytearray(8)
        self.mem = bytearray(2 * size)
        self.cq = memoryview(self.cons).cast("Q")
        self.pq = memoryview(self.prod).cast("Q")
        self.cq[0] = self.pq[0] = start
        self.ring = _Ring.from_memory("fake", self.cq, self.pq, memoryview(self.mem))

    def _put(self, pos: int, data: bytes) -> None:
        for i, b in enumerate(data):
            at = (pos + i) % self.size
            self.mem[at] = b
            self.mem[at + self.size] = b

    def free(self) -> int:
        return self.size - (self.pq[0] - self.cq[0])

    def reserve(self, length: int) -> int | None:
        total = (length + 8 + 7) & ~7
        if total > self.free():
            return None
        pos = self.pq[0]
        self._put(pos, struct.pack("<II", length | BUSY, 0))
        self.pq[0] = pos + total
        return pos

    def commit(self, pos: int, data: bytes, discard: bool = False) -> None:
        self._put(pos + 8, data)
        self._put(pos, struct.pack("<I", len(data) | (DISCARD if discard else 0)))

    def output(self, data: bytes, discard: bool = False) -> bool:
        pos = self.reserve(len(data))
        if pos is None:
            return False
        self.commit(pos, data, discard)
        return True


def drain(fake: FakeRingbuf, limit: int = -1) -> list[bytes]:
    out: list[bytes] = []
    fake.ring.consume(lambda v: out.append(bytes(v)), limit)
    return out


def test_ringbuf_fixed_records_all_delivered_in_order():
    fake = FakeRingbuf(1 << 16)
    sent = [payload(i) for i in range(1000)]
    for p in sent:
        assert fake.output(p)
    assert drain(fake) == sent
    assert fake.cq[0] == fake.pq[0]
    assert drain(fake) == []


def test_ringbuf_wraps_without_copies():
    fake = FakeRingbuf(4096, start=4096 - 16)  # the second record straddles the end
    sent = [payload(i) for i in range(50)]
    for p in sent:
        assert fake.output(p)
    assert drain(fake) == sent


def test_ringbuf_busy_record_stops_the_walk():
    fake = FakeRingbuf(1 << 14)
    for i in range(20):
        fake.output(payload(i))
    busy = fake.reserve(32)
    for i in range(21, 40):
        fake.output(payload(i))
    got = drain(fake)
    assert got == [payload(i) for i in range(20)]
    assert fake.cq[0] == busy  # stopped in front of the busy record, later ones wait
    fake.commit(busy, payload(20))
    assert drain(fake) == [payload(i) for i in range(20, 40)]


def test_ringbuf_discarded_records_are_skipped():
    fake = FakeRingbuf(1 << 14)
    for i in range(100):
        fake.output(payload(i), discard=(i % 7 == 3))
    assert drain(fake) == [payload(i) for i in range(100) if i % 7 != 3]


def test_ringbuf_limit_and_resume():
    fake = FakeRingbuf(1 << 16)
    for i in range(500):
        fake.output(payload(i))
    first = drain(fake, limit=123)
    assert first == [payload(i) for i in range(123)]
    assert drain(fake) == [payload(i) for i in range(123, 500)]


# 3,000 records: the run windows (8, 32, ..., 2048) cross the 1,024-record chunks in which
# views are cut (deliver_views); the failing record and those before it stay consumed.
@pytest.mark.parametrize(("count", "fail_at", "size"), [(300, 150, 1 << 16), (3000, 2000, 1 << 17)])
def test_ringbuf_callback_error_consumes_that_record(count, fail_at, size):
    fake = FakeRingbuf(size)
    for i in range(count):
        assert fake.output(payload(i))
    seen: list[int] = []

    def cb(view):
        seq = struct.unpack_from("<Q", view)[0]
        seen.append(seq)
        if seq == fail_at:
            raise KeyError("stop")

    with pytest.raises(KeyError):
        fake.ring.consume(cb, -1)
    assert seen == list(range(fail_at + 1))
    assert drain(fake) == [payload(i) for i in range(fail_at + 1, count)]


def test_ringbuf_decoded_and_batches():
    fake = FakeRingbuf(1 << 16)
    for i in range(700):
        fake.output(payload(i), discard=(i == 400))
    rows: list[tuple] = []
    assert fake.ring.consume_decoded(lambda *f: rows.append(f), FMT, 300) == 300
    batches: list = []
    n = fake.ring.consume_batch(lambda b: batches.append(b.copy() if hasattr(b, "copy") else list(b)), FMT, -1, HAVE_NUMPY)
    assert n == 399
    seqs = [r[0] for r in rows] + [int(s) for b in batches for s in (b["seq"] if hasattr(b, "dtype") else [t[0] for t in b])]
    assert seqs == [i for i in range(700) if i != 400]


def test_ringbuf_short_record_for_format_is_an_error():
    fake = FakeRingbuf(4096)
    fake.output(b"12345678")
    fake.output(payload(1))
    with pytest.raises(ParseError, match="shorter than the 32-byte format"):
        fake.ring.consume_decoded(lambda *f: None, FMT, -1)
    rows: list = []
    fake.ring.consume_decoded(lambda *f: rows.append(f), FMT, -1)
    assert rows and rows[0][0] == 1


def test_ringbuf_iterate_consumes_on_advance():
    fake = FakeRingbuf(4096)
    for i in range(10):
        fake.output(payload(i))
    it = fake.ring.iterate()
    first = next(it)
    assert bytes(first) == payload(0)
    assert fake.cq[0] == 0  # still being looked at
    next(it)
    assert fake.cq[0] == 40
    it.close()  # leaving the loop consumes the record in hand
    assert fake.cq[0] == 80


@settings(max_examples=60, deadline=None)
@given(
    sizes=st.lists(st.integers(1, 120), min_size=1, max_size=200),
    start=st.integers(0, 4095),
    limits=st.lists(st.integers(1, 50), min_size=1, max_size=5),
    discards=st.sets(st.integers(0, 199)),
)
def test_ringbuf_random_streams(sizes, start, limits, discards):
    fake = FakeRingbuf(4096, start=start & ~7)
    sent: list[bytes] = []
    got: list[bytes] = []
    li = 0
    for i, size in enumerate(sizes):
        data = bytes((i + j) & 0xFF for j in range(size))
        if not fake.output(data, discard=i in discards):
            got += drain(fake, limits[li % len(limits)])
            li += 1
            while not fake.output(data, discard=i in discards):
                got += drain(fake)
        if i not in discards:
            sent.append(data)
    got += drain(fake)
    assert got == sent


def test_run_checker_without_numpy(monkeypatch):
    fake = FakeRingbuf(1 << 16)
    for i in range(600):
        fake.output(payload(i, 32 if i != 377 else 40))
    checker = _common.RunChecker(fake.ring.data)
    monkeypatch.setattr(_common, "NUMPY_FROM", 1)
    with_numpy = (checker.count(0, 300, 40, 32), checker.count(40 * 300, 100, 40, 32))
    monkeypatch.setattr(_common, "USE_NUMPY", False)
    assert checker.count(0, 300, 40, 32) == 300
    assert checker.count(40 * 300, 100, 40, 32) == 77
    assert with_numpy == (300, 77)
    assert drain(fake) == [payload(i, 32 if i != 377 else 40) for i in range(600)]


# ------------------------------------------------------------------------------ perf ring
class FakePerf:
    """A perf ring: control page (data_head/data_tail) and 2^n data pages, written the way
    perf_output_begin does (8-byte aligned records that may wrap, LOST when full)."""

    def __init__(self, size: int = 4096, start: int = 0, cpu: int = 3) -> None:
        self.size = size
        self.ctl_mem = bytearray(4096)
        self.ctl = memoryview(self.ctl_mem).cast("Q")
        self.mem = bytearray(size)
        self.ctl[128] = self.ctl[129] = start  # data_head, data_tail
        self.lost_pending = 0
        self.ring = PerfRing.from_memory(self.ctl, memoryview(self.mem), cpu)

    def _put(self, pos: int, data: bytes) -> None:
        for i, b in enumerate(data):
            self.mem[(pos + i) % self.size] = b

    def _write(self, rec: bytes) -> bool:
        head, tail = self.ctl[128], self.ctl[129]
        if len(rec) > self.size - (head - tail):
            return False
        self._put(head, rec)
        self.ctl[128] = head + len(rec)
        return True

    def sample(self, data: bytes) -> bool:
        raw = ((len(data) + 4 + 7) & ~7) - 4
        rec = struct.pack("<IHHI", 9, 1, 8 + 4 + raw, raw) + data + bytes(raw - len(data))
        if self.lost_pending:
            lost = struct.pack("<IHHQQ", 2, 0, 24, 0, self.lost_pending)
            if not self._write(lost):
                self.lost_pending += 1
                return False
            self.lost_pending = 0
        if not self._write(rec):
            self.lost_pending += 1
            return False
        return True


def perf_drain(fake: FakePerf, limit: int = -1) -> tuple[list[bytes], int]:
    out: list[bytes] = []
    lost = [0]

    def on_lost(cpu, n):
        assert cpu == fake.ring.cpu
        lost[0] += n

    fake.ring.consume(lambda cpu, v: out.append(bytes(v)), on_lost, limit)
    return out, lost[0]


def padded(data: bytes) -> bytes:
    raw = ((len(data) + 4 + 7) & ~7) - 4
    return data + bytes(raw - len(data))


@pytest.mark.parametrize("start", [0, 8, 40, 4096 - 48, 4096 - 8, 4096 - 24])
def test_perf_fixed_samples_wrap_at_any_offset(start):
    fake = FakePerf(4096, start=start)
    sent = [payload(i) for i in range(80)]
    for p in sent:
        assert fake.sample(p)
    got, lost = perf_drain(fake)
    assert got == [padded(p) for p in sent] and lost == 0
    assert fake.ctl[129] == fake.ctl[128]


def test_perf_callback_error_deep_in_a_long_run():
    fake = FakePerf(1 << 18, start=(1 << 18) - 4000)  # 3,000 records that also wrap
    for i in range(3000):
        assert fake.sample(payload(i))
    seen: list[int] = []

    def cb(cpu, view):
        assert cpu == 3
        seq = struct.unpack_from("<Q", view)[0]
        seen.append(seq)
        if seq == 2000:
            raise KeyError("stop")

    with pytest.raises(KeyError):
        fake.ring.consume(cb, lambda c, n: None, -1)
    assert seen == list(range(2001))
    got, lost = perf_drain(fake)
    assert got == [padded(payload(i)) for i in range(2001, 3000)] and lost == 0


def test_perf_lost_records_are_reported():
    fake = FakePerf(4096)
    sent = []
    dropped = 0
    for i in range(200):
        if fake.sample(payload(i)):
            sent.append(i)
        else:
            dropped += 1
    got, lost = perf_drain(fake)
    assert [struct.unpack_from("<Q", g)[0] for g in got] == sent
    for i in range(200, 230):  # room again: the LOST record goes in first
        assert fake.sample(payload(i))
    got2, lost2 = perf_drain(fake)
    assert lost + lost2 == dropped and dropped > 0
    assert [struct.unpack_from("<Q", g)[0] for g in got2] == list(range(200, 230))
    assert fake.ring.lost == dropped


def test_perf_decoded_and_batch_across_the_wrap():
    fake = FakePerf(4096, start=4096 - 104)
    for i in range(60):
        fake.sample(payload(i))
    rows: list = []
    fake.ring.consume_decoded(lambda *f: rows.append(f[0]), lambda c, n: None, FMT, 20)
    batches: list = []
    arrays = HAVE_NUMPY
    fake.ring.consume_batch(lambda b: batches.append(b.copy() if arrays else list(b)), lambda c, n: None, FMT, -1, arrays)
    seqs = rows + [int(r["seq"]) if arrays else r[0] for b in batches for r in b]
    assert seqs == list(range(60))


def test_perf_records_iterator_yields_whole_records():
    fake = FakePerf(4096, start=4096 - 24)
    for i in range(5):
        fake.sample(payload(i))
    recs = [(t, bytes(r)) for t, r in fake.ring.records()]
    assert [t for t, _ in recs] == [9] * 5
    assert all(len(r) == 48 for _, r in recs)
    assert fake.ctl[129] == fake.ctl[128]


@settings(max_examples=60, deadline=None)
@given(
    sizes=st.lists(st.integers(1, 200), min_size=1, max_size=150),
    start=st.integers(0, 511),
    limit=st.integers(1, 40),
)
def test_perf_random_streams(sizes, start, limit):
    fake = FakePerf(4096, start=start * 8)
    sent: list[bytes] = []
    got: list[bytes] = []
    dropped = lost = 0
    for i, size in enumerate(sizes):
        data = bytes((i * 7 + j) & 0xFF for j in range(size))
        if fake.sample(data):
            sent.append(padded(data))
        else:
            dropped += 1
        if i % 17 == 16:
            g, n = perf_drain(fake, limit)
            got += g
            lost += n
    g, n = perf_drain(fake)
    got += g
    lost += n
    assert got == sent
    assert lost + fake.lost_pending == dropped


def test_perf_read_backward_newest_records():
    # A write_backward ring: head counts down from 0; records laid out newest first.
    size = 4096
    ctl_mem = bytearray(4096)
    ctl = memoryview(ctl_mem).cast("Q")
    mem = bytearray(size)
    head = 0
    for i in range(200):  # 48-byte records: 85 fit, older ones get overwritten
        rec = struct.pack("<IHHI", 9, 1, 48, 36) + padded(payload(i))
        head -= 48
        for j, b in enumerate(rec):
            mem[(head + j) % size] = b
    ctl[128] = head & (2**64 - 1)
    ring = PerfRing.from_memory(ctl, memoryview(mem), 0, overwrite=True)
    recs = ring.read_backward()
    seqs = [struct.unpack_from("<Q", r, 12)[0] for r in recs]
    assert seqs == list(range(200 - len(seqs), 200))
    assert len(seqs) == size // 48


def test_perf_read_backward_not_full_yet():
    ctl = memoryview(bytearray(4096)).cast("Q")
    mem = bytearray(4096)
    head = 0
    for i in range(5):
        rec = struct.pack("<IHHI", 9, 1, 48, 36) + padded(payload(i))
        head -= 48
        mem[head % 4096 : head % 4096 + 48] = rec
    ctl[128] = head & (2**64 - 1)
    ring = PerfRing.from_memory(ctl, memoryview(mem), 0, overwrite=True)
    assert [struct.unpack_from("<Q", r, 12)[0] for r in ring.read_backward()] == [0, 1, 2, 3, 4]


# ------------------------------------------------------------------ CPU sets of a PerfBuffer
class _FakeMap:
    type = None
    name = "pb"
    closed = False

    def __init__(self, entries: int) -> None:
        from bpfkit._kernel.consts import MapType

        self.type = MapType.PERF_EVENT_ARRAY
        self.max_entries = entries
        self.slots: dict[int, int] = {}

    def update(self, key, value):
        self.slots[key] = value

    def delete(self, key):
        return self.slots.pop(key, None) is not None


class _FakeFD:
    def __init__(self, n):
        self.raw = n

    def close(self):
        pass

    def __int__(self):
        return self.raw


def test_perf_buffer_rings_follow_online_cpus(monkeypatch):
    """Offline CPUs cannot be made on demand in a test, so the CPU list and the event/ring
    constructors are replaced: what is checked is which CPUs get a ring and a map slot."""
    import bpfkit.events.perf as P

    opened = []

    def fake_open(cpu, wakeup_events, watermark, backward):
        opened.append(cpu)
        return _FakeFD(100 + cpu)

    class FakeRing:
        def __init__(self, fd, cpu, pages, overwrite):
            self.fd, self.cpu = fd, cpu

        def close(self):
            pass

    class FakePoller:
        closed = False

        def register(self, fd, events):
            pass

        def close(self):
            self.closed = True

    monkeypatch.setattr(P, "online_cpus", lambda: [0, 2, 3, 8, 9])  # sparse: 1, 4-7 offline
    monkeypatch.setattr(P._ring, "open_bpf_output", fake_open)
    monkeypatch.setattr(P._ring, "Poller", FakePoller)
    monkeypatch.setattr(P, "PerfRing", FakeRing)
    m = _FakeMap(10)
    pb = P.PerfBuffer(m, lambda c, d: None)
    assert pb.cpus == [0, 2, 3, 8, 9] and opened == [0, 2, 3, 8, 9]
    assert m.slots == {0: 100, 2: 102, 3: 103, 8: 108, 9: 109}  # indexed by CPU number
    pb.close()
    assert m.slots == {}

    opened.clear()
    m = _FakeMap(4)  # a map sized for fewer CPUs than are online
    with pytest.warns(RuntimeWarning, match="CPU 8 has no slot"):
        pb = P.PerfBuffer(m, lambda c, d: None, cpus=[1, 3, 8])
    assert pb.cpus == [3] and sorted(pb.skipped_cpus) == [1, 8]
    pb.close()


def test_batches_without_numpy_are_tuples():
    fake = FakeRingbuf(1 << 16)
    for i in range(50):
        fake.output(payload(i))
    got: list = []
    assert fake.ring.consume_batch(got.extend, FMT, -1, False) == 50
    assert [t[0] for t in got] == list(range(50)) and all(isinstance(t, tuple) for t in got)
    pf = FakePerf(4096, start=4096 - 40)
    for i in range(30):
        pf.sample(payload(i))
    got = []
    pf.ring.consume_batch(got.extend, lambda c, n: None, FMT, -1, False)
    assert [t[0] for t in got] == list(range(30))
