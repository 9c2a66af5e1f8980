# SPDX-License-Identifier: Apache-2.0
"""BPF ring buffers against the kernel: sequence-numbered records from real programs
(bpf/events_seq.bpf.c run with BPF_PROG_TEST_RUN or on a tracepoint), overflow, discard,
several rings in one poll, the iterator, batches, asyncio, and USER_RINGBUF."""

from __future__ import annotations

import asyncio
import os
import threading
import time

import pytest

from bpfkit.errors import UsageError
from bpfkit.events import RingBuffer, UserRingBuffer
from bpfkit.events.records import HAVE_NUMPY
from bpfkit.events.ringbuf import RingBufferFullError

from .test_events_support import Driver, SeqChecker, attached_getppid, load_seq, pin_to, stats_of

PACKET = bytes(64)
FMT = "<QQIIQ"


@pytest.fixture
def seq(bpf_obj):
    colls = []

    def make(*programs, **kw):
        coll = load_seq(bpf_obj("events_seq"), list(programs), **kw)
        colls.append(coll)
        return coll

    yield make
    for c in colls:
        c.close()


def run(prog, n: int, cpu: int = 0) -> None:
    """test_run on ``cpu``: sequence numbers are per CPU, so pin to keep them continuous."""
    keep = pin_to(cpu)
    try:
        prog.test_run(PACKET, repeat=n)
    finally:
        os.sched_setaffinity(0, keep)


def test_known_sequence(seq):
    coll = seq("rb_seq")
    chk = SeqChecker()
    with RingBuffer(coll.maps["rb"], chk.add) as rb:
        run(coll.programs["rb_seq"], 1000)
        assert rb.consume() == 1000
        run(coll.programs["rb_seq"], 500)
        assert rb.poll(timeout=1) == 500
        assert rb.poll(timeout=0.01) == 0
    assert (chk.received, chk.gaps, chk.problems) == (1500, 0, [])
    assert stats_of(coll)[:2] == (1500, 0)


def test_burst_overflows_a_small_ring(seq):
    """A one-page ring holds 102 records: a burst of 1000 drops the rest. Every failed
    output the program counted shows as a gap, nothing is duplicated, torn or reordered."""
    coll = seq("rb_seq", rb_size=4096)
    chk = SeqChecker()
    with RingBuffer(coll.maps["rb"], chk.add) as rb:
        keep = pin_to(0)
        try:
            run(coll.programs["rb_seq"], 1000)
        finally:
            os.sched_setaffinity(0, keep)
        assert rb.consume() == 4096 // 40
        # Now with a reader draining concurrently: some outputs fail, some succeed.
        stop = threading.Event()

        def reader():
            while not stop.is_set():
                rb.poll(0.001)

        t = threading.Thread(target=reader)
        t.start()
        keep = pin_to(0)  # this thread only: every record comes from CPU 0's counter
        try:
            for _ in range(50):
                run(coll.programs["rb_seq"], 200)
        finally:
            os.sched_setaffinity(0, keep)
            stop.set()
            t.join()
        rb.consume()
    produced, drops, _ = stats_of(coll)
    assert produced == 11000
    assert chk.problems == []
    assert chk.received + drops == produced
    # gaps are the drops before the last record received; the rest came after it
    assert chk.gaps + (produced - chk.expect[0]) == drops


def test_variable_sizes_wrap_everywhere(seq):
    coll = seq("rb_seq_sizes", rb_size=4096)
    chk = SeqChecker(sizes=True)
    with RingBuffer(coll.maps["rb"], chk.add) as rb:
        for _ in range(300):
            run(coll.programs["rb_seq_sizes"], 37)
            rb.consume()
    assert chk.problems == [] and chk.received == 300 * 37 and chk.gaps == 0


def test_discarded_records_never_arrive(seq):
    coll = seq("rb_reserve", discard_every=5)
    chk = SeqChecker()
    with RingBuffer(coll.maps["rb"], chk.add) as rb:
        run(coll.programs["rb_reserve"], 1000)
        rb.consume()
    produced, drops, discards = stats_of(coll)
    assert (produced, drops, discards) == (1000, 0, 200)
    assert chk.received == 800 and chk.problems == []
    assert chk.gaps == discards - 1  # the last discarded seq (999) comes after the last one read


def test_several_rings_one_poll(seq):
    coll = seq("rb_seq", "rb2_seq")
    a, b = SeqChecker(), SeqChecker()
    with RingBuffer(coll.maps["rb"], a.add) as rb:
        rb.add(coll.maps["rb2"], b.add)
        run(coll.programs["rb_seq"], 10)
        run(coll.programs["rb2_seq"], 20)
        got = 0
        deadline = time.monotonic() + 5
        while got < 30 and time.monotonic() < deadline:
            got += rb.poll(timeout=1)
    # both programs share the per-CPU counter: sequences interleave but stay increasing
    assert (a.received, b.received) == (10, 20) and a.problems == b.problems == []


def test_iterator_stops_after_idle_timeout(seq):
    coll = seq("rb_seq")
    with RingBuffer(coll.maps["rb"]) as rb:
        run(coll.programs["rb_seq"], 100)
        t0 = time.monotonic()
        seqs = [int.from_bytes(rec[:8], "little") for rec in rb.read(timeout=0.2)]
        elapsed = time.monotonic() - t0
    assert seqs == list(range(100))
    assert 0.15 < elapsed < 2


def test_iterator_break_consumes_the_record_in_hand(seq):
    coll = seq("rb_seq")
    with RingBuffer(coll.maps["rb"]) as rb:
        run(coll.programs["rb_seq"], 10)
        for rec in rb.read(timeout=0):
            if int.from_bytes(rec[:8], "little") == 4:
                break
        rest = [int.from_bytes(r[:8], "little") for r in rb.read(timeout=0)]
    assert rest == list(range(5, 10))


def test_batches(seq):
    coll = seq("rb_seq")
    with RingBuffer(coll.maps["rb"]) as rb:
        run(coll.programs["rb_seq"], 1000)
        arr = rb.read_batch(FMT)
        assert len(arr) == 1000
        seqs = list(arr["f0"]) if HAVE_NUMPY else [r[0] for r in arr]
        assert seqs == list(range(1000))
        run(coll.programs["rb_seq"], 300)
        views = []
        n = rb.consume_batch(lambda b: views.append(int(b["f0"][-1]) if HAVE_NUMPY else b[-1][0]), FMT)
        assert n == 300 and views[-1] == 1299
        run(coll.programs["rb_seq"], 5)
        assert [int.from_bytes(b[:8], "little") for b in rb.read_batch()] == list(range(1300, 1305))


def test_decoded_callback(seq):
    coll = seq("rb_seq")
    rows = []
    with RingBuffer(coll.maps["rb"]) as rb:
        run(coll.programs["rb_seq"], 200)
        assert rb.consume(lambda *f: rows.append(f), format=FMT) == 200
    assert [r[0] for r in rows] == list(range(200))
    assert all(r[4] == ~r[0] & (2**64 - 1) for r in rows)


def test_asyncio(seq):
    coll = seq("rb_seq")

    async def main():
        got = []
        with RingBuffer(coll.maps["rb"]) as rb:
            loop = asyncio.get_running_loop()
            loop.call_later(0.05, run, coll.programs["rb_seq"], 50)
            async for rec in rb.aread(timeout=0.5):
                got.append(int.from_bytes(rec[:8], "little"))
            loop.call_later(0.05, run, coll.programs["rb_seq"], 7)
            n = await rb.poll_async(timeout=2, callback=lambda r: got.append(-1))
        return got, n

    got, n = asyncio.run(main())
    assert got[:50] == list(range(50)) and n == 7 and got[50:] == [-1] * 7


def test_tracepoint_producer_on_both_cpus(seq):
    cpus = sorted(os.sched_getaffinity(0))[:2]
    drv = Driver(2000, cpus)
    try:
        coll = seq("tp_rb", target_tgid=drv.pid, rb_size=1 << 20)
        chk = SeqChecker()
        with RingBuffer(coll.maps["rb"], chk.add) as rb, attached_getppid(coll.programs["tp_rb"]):
            drv.run()
            rb.consume()
    finally:
        drv.kill()
    assert chk.problems == [] and chk.gaps == 0
    assert chk.received == 2000 * len(cpus) == stats_of(coll)[0]
    assert sorted(chk.expect) == cpus and set(chk.expect.values()) == {2000}


def test_wrong_map_type(seq):
    coll = seq("pb_seq")
    with pytest.raises(UsageError, match="not ringbuf"):
        RingBuffer(coll.maps["pb"])


def test_closed_reader_refuses(seq):
    coll = seq("rb_seq")
    rb = RingBuffer(coll.maps["rb"], lambda r: None)
    rb.close()
    rb.close()
    with pytest.raises(UsageError):
        rb.consume()


# --------------------------------------------------------------------------- user ring buffer
@pytest.fixture
def echo(bpf_obj):
    import bpfkit

    coll = bpfkit.Collection(bpfkit.load_spec(bpf_obj("events_user_ringbuf")))
    yield coll
    coll.close()


@pytest.mark.feature("map_type_user_ringbuf")
def test_user_ringbuf_round_trip(echo):
    sent = [bytes([i]) * (8 * (1 + i % 7)) for i in range(40)]
    got = []
    with UserRingBuffer(echo.maps["user_rb"]) as urb, RingBuffer(echo.maps["out"]) as out:
        for data in sent[:20]:
            urb.write(data)
        with urb.reserve(16) as buf:  # filled in place
            buf[:] = b"in-place-record!"
        res = urb.reserve(24)
        res.discard()  # the kernel skips it
        for data in sent[20:]:
            urb.write(data)
        ret, _ = echo.programs["echo"].test_run(PACKET)
        assert ret == 41
        assert urb.free() == urb.size
        for rec in out.read(timeout=0):
            b = bytes(rec)
            n = int.from_bytes(b[:8], "little")
            got.append(b[8 : 8 + n])
    assert got == sent[:20] + [b"in-place-record!"] + sent[20:]


@pytest.mark.feature("map_type_user_ringbuf")
def test_user_ringbuf_full(echo):
    with UserRingBuffer(echo.maps["user_rb"]) as urb:
        n = 0
        with pytest.raises(RingBufferFullError, match="no room"):
            while True:
                urb.write(bytes(56))
                n += 1
        assert n == urb.size // 64
        t0 = time.monotonic()
        with pytest.raises(RingBufferFullError):
            urb.reserve_blocking(56, timeout=0.1)
        assert time.monotonic() - t0 >= 0.09
        echo.programs["echo"].test_run(PACKET)  # drains: room again
        urb.write(bytes(56), timeout=1)


def test_closing_while_a_batch_view_is_kept(seq):
    """A numpy view kept past close() keeps the mapping alive until it goes away; the ring's
    fds are still released (the leak check after the test sees none)."""
    coll = seq("rb_seq")
    kept = []
    rb = RingBuffer(coll.maps["rb"])
    run(coll.programs["rb_seq"], 10)
    rb.consume_batch(kept.append, FMT)
    rb.close()
    if HAVE_NUMPY:
        assert [int(s) for a in kept for s in a["f0"]] == list(range(10))  # still readable
    kept.clear()
