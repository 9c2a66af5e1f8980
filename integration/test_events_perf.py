# SPDX-License-Identifier: Apache-2.0
"""Perf event arrays against the kernel: per-CPU rings fed by bpf_perf_event_output from
bpf/events_seq.bpf.c (BPF_PROG_TEST_RUN on a pinned CPU, or a getppid tracepoint on every
CPU), LOST records, wrap-around, wakeups, overwrite mode, pause/resume, CPU subsets."""

from __future__ import annotations

import asyncio
import os
import threading
import warnings

import pytest

from bpfkit.errors import UsageError
from bpfkit.events import LostRecordsWarning, PerfBuffer
from bpfkit.events.records import HAVE_NUMPY

from .test_events_support import Driver, SeqChecker, attached_getppid, load_seq, pin_to, stats_of

PACKET = bytes(64)
FMT = "<QQIIQ"
CPU = 0


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


def run(prog, n: int, cpu: int = CPU) -> None:
    """test_run on ``cpu``: every record lands in that CPU's ring."""
    keep = pin_to(cpu)
    try:
        prog.test_run(PACKET, repeat=n)
    finally:
        os.sched_setaffinity(0, keep)


class Collector:
    def __init__(self, sizes: bool = False) -> None:
        self.chk = SeqChecker(sizes=sizes)
        self.lost = 0
        self.cpus: set[int] = set()

    def sample(self, cpu: int, data: memoryview) -> None:
        self.cpus.add(cpu)
        self.chk.add(data)

    def on_lost(self, cpu: int, count: int) -> None:
        self.lost += count


def test_known_sequence(seq):
    coll = seq("pb_seq")
    c = Collector()
    with PerfBuffer(coll.maps["pb"], c.sample, c.on_lost) as pb:
        assert pb.cpus == sorted(os.sched_getaffinity(0)) or pb.cpus
        run(coll.programs["pb_seq"], 1000)
        got = 0
        while got < 1000:
            n = pb.poll(timeout=1)
            assert n, "no wakeup"
            got += n
    assert (c.chk.received, c.chk.gaps, c.lost, c.chk.problems) == (1000, 0, 0, [])
    assert c.cpus == {CPU}
    # the kernel pads a 32-byte output to a 36-byte raw sample (8-byte aligned record)


def test_raw_payload_is_padded_to_alignment(seq):
    coll = seq("pb_seq")
    sizes = []
    with PerfBuffer(coll.maps["pb"], lambda cpu, d: sizes.append(len(d))) as pb:
        run(coll.programs["pb_seq"], 3)
        pb.consume()
    assert sizes == [36, 36, 36]


def test_burst_overflow_lost_counts_match_failed_outputs(seq):
    """One page per CPU holds 85 records: a burst of 1000 overflows; the kernel's LOST
    counts add up to the failed outputs the program counted, and the sequence shows the same
    gaps, with nothing duplicated, torn or out of order."""
    coll = seq("pb_seq")
    c = Collector()
    prog = coll.programs["pb_seq"]
    with PerfBuffer(coll.maps["pb"], c.sample, c.on_lost, pages=1) as pb:
        run(prog, 1000)
        assert pb.consume() == 4096 // 48
        stop = threading.Event()

        def reader():
            while not stop.is_set():
                pb.poll(0.001)

        t = threading.Thread(target=reader)
        t.start()
        try:
            for _ in range(40):
                run(prog, 250)
        finally:
            stop.set()
            t.join()
        pb.consume()
        run(prog, 1)  # a LOST record still pending is written ahead of this sample
        pb.consume()
    produced, drops, _ = stats_of(coll)
    assert produced == 11001 and drops > 0
    assert c.chk.problems == []
    assert c.lost == drops == pb.lost == pb.lost_per_cpu[CPU]
    assert c.chk.received + drops == produced
    assert c.chk.gaps == drops and c.chk.expect[CPU] == produced


def test_variable_sizes_wrap_everywhere(seq):
    coll = seq("pb_seq_sizes")
    c = Collector(sizes=True)
    with PerfBuffer(coll.maps["pb"], c.sample, c.on_lost, pages=1) as pb:
        for _ in range(300):
            run(coll.programs["pb_seq_sizes"], 29)
            pb.consume()
    assert c.chk.problems == [] and c.chk.received == 300 * 29 and c.lost == 0


def test_lost_without_callback_warns_and_counts(seq):
    coll = seq("pb_seq")
    got = []
    with PerfBuffer(coll.maps["pb"], lambda cpu, d: got.append(cpu), pages=1) as pb:
        run(coll.programs["pb_seq"], 200)
        pb.consume()
        run(coll.programs["pb_seq"], 1)
        with pytest.warns(LostRecordsWarning, match="records lost"):
            pb.consume()
        assert pb.lost == stats_of(coll)[1] > 0


def test_tracepoint_producer_on_every_cpu(seq):
    cpus = sorted(os.sched_getaffinity(0))
    drv = Driver(3000, cpus)
    try:
        coll = seq("tp_pb", target_tgid=drv.pid)
        c = Collector()
        with PerfBuffer(coll.maps["pb"], c.sample, c.on_lost, pages=256) as pb, attached_getppid(coll.programs["tp_pb"]):
            stop = threading.Event()

            def reader():
                while not stop.is_set():
                    pb.poll(0.01)

            t = threading.Thread(target=reader)
            t.start()
            try:
                drv.run()
            finally:
                stop.set()
                t.join()
            pb.consume()
    finally:
        drv.kill()
    produced, drops, _ = stats_of(coll)
    assert c.chk.problems == [] and c.lost == drops
    assert c.chk.received + drops == produced == 3000 * len(cpus)
    assert c.cpus == set(cpus)  # each CPU's records come from that CPU's ring


def test_wakeup_every_n_events(seq):
    coll = seq("pb_seq")
    with PerfBuffer(coll.maps["pb"], lambda cpu, d: None, wakeup_events=8) as pb:
        run(coll.programs["pb_seq"], 7)
        assert not pb.wait(0.05)  # 7 samples: no wakeup yet
        run(coll.programs["pb_seq"], 1)
        assert pb.wait(1)
        assert pb.consume() == 8
        run(coll.programs["pb_seq"], 3)  # below the threshold: poll takes them on timeout
        assert pb.poll(0.05) == 3


def test_wakeup_watermark(seq):
    coll = seq("pb_seq")
    with PerfBuffer(coll.maps["pb"], lambda cpu, d: None, wakeup_watermark=48 * 20) as pb:
        run(coll.programs["pb_seq"], 10)
        assert not pb.wait(0.05)
        run(coll.programs["pb_seq"], 15)
        assert pb.wait(1)
        assert pb.consume() == 25


def test_overwrite_mode_keeps_the_newest(seq):
    coll = seq("pb_seq")
    with PerfBuffer(coll.maps["pb"], pages=1, overwrite=True) as pb:
        run(coll.programs["pb_seq"], 500)
        snap = pb.snapshot()
        with pytest.raises(UsageError):
            pb.consume(lambda cpu, d: None)
    seqs = [int.from_bytes(d[:8], "little") for cpu, d in snap if cpu == CPU]
    assert seqs == list(range(500 - len(seqs), 500))
    assert len(seqs) == 4096 // 48
    assert stats_of(coll)[1] == 0  # an overwritable ring never refuses an output


def test_pause_and_resume(seq):
    coll = seq("pb_seq")
    c = Collector()
    with PerfBuffer(coll.maps["pb"], c.sample, c.on_lost) as pb:
        pb.pause()
        run(coll.programs["pb_seq"], 10)
        pb.resume()
        run(coll.programs["pb_seq"], 10)
        pb.consume()
    assert stats_of(coll)[1] == 10 == c.lost
    assert c.chk.received == 10 and c.chk.gaps == 10


def test_cpu_subset_leaves_other_cpus_without_a_ring(seq):
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        pytest.skip("needs two CPUs")
    coll = seq("pb_seq")
    c = Collector()
    with PerfBuffer(coll.maps["pb"], c.sample, c.on_lost, cpus=[cpus[1]]) as pb:
        assert pb.cpus == [cpus[1]]
        run(coll.programs["pb_seq"], 5, cpu=cpus[0])  # no ring there: outputs fail
        run(coll.programs["pb_seq"], 5, cpu=cpus[1])
        pb.consume()
    assert c.chk.received == 5 and stats_of(coll)[1] == 5


def test_iterator_batches_decoded(seq):
    coll = seq("pb_seq")
    with PerfBuffer(coll.maps["pb"]) as pb:
        run(coll.programs["pb_seq"], 100)
        items = [(cpu, int.from_bytes(d[:8], "little")) for cpu, d in pb.read(timeout=0.1)]
        assert items == [(CPU, i) for i in range(100)]
        run(coll.programs["pb_seq"], 500)
        arr = pb.read_batch(FMT)
        seqs = list(arr["f0"]) if HAVE_NUMPY else [r[0] for r in arr]
        assert seqs == list(range(100, 600))
        run(coll.programs["pb_seq"], 50)
        rows = []
        pb.consume(lambda *f: rows.append(f[0]), format=FMT)
        assert rows == list(range(600, 650))
        run(coll.programs["pb_seq"], 3)
        assert [cpu for cpu, _ in pb.read_batch()] == [CPU] * 3


def test_asyncio(seq):
    coll = seq("pb_seq")

    async def main():
        got = []
        with PerfBuffer(coll.maps["pb"]) as pb:
            loop = asyncio.get_running_loop()
            loop.call_later(0.05, run, coll.programs["pb_seq"], 40)
            async for cpu, rec in pb.aread(timeout=0.5):
                got.append(int.from_bytes(rec[:8], "little"))
            loop.call_later(0.05, run, coll.programs["pb_seq"], 3)
            n = await pb.poll_async(timeout=2, callback=lambda cpu, d: got.append(-1))
        return got, n

    got, n = asyncio.run(main())
    assert got[:40] == list(range(40)) and n == 3


def test_close_removes_the_rings_from_the_map(seq):
    coll = seq("pb_seq")
    pb = PerfBuffer(coll.maps["pb"], lambda cpu, d: None)
    pb.close()
    pb.close()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        run(coll.programs["pb_seq"], 4)
    assert stats_of(coll)[1] == 4  # no event in the map any more: every output fails


def test_bad_arguments(seq):
    coll = seq("pb_seq", "rb_seq")
    with pytest.raises(UsageError, match="power of two"):
        PerfBuffer(coll.maps["pb"], pages=3)
    with pytest.raises(UsageError, match="not a perf_event_array"):
        PerfBuffer(coll.maps["rb"])
