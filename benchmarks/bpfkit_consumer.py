# SPDX-License-Identifier: Apache-2.0
"""bpfkit's consumer for the event-consumption benchmark (benchmarks/bench_events.py).

    python benchmarks/bpfkit_consumer.py ringbuf|perf [--batch | --decoded] [--busy]

Follows the benchmark's consumer protocol: open the pinned map ``$BENCH_MAP`` (a RINGBUF or
PERF_EVENT_ARRAY loaded by the harness), print ``ready``, wait for a line on stdin when
``$BENCH_HOLD`` is set, consume until SIGINT/SIGTERM, drain what is left and print
``received=N lost=M cpu_s=X wall_s=Y gaps=G ooo=O lost_cb=L``.

Records are the 32-byte ``{u64 seq; u64 ts; u32 pid; u32 cpu; u64 arg}``; ``lost`` counts
gaps in the per-CPU ``seq``. Modes:

* default: one callback per record with a zero-copy memoryview, decoded in the callback
  (``struct.unpack_from``), the way bcc's consumers are written;
* ``--decoded``: one callback per record with the fields already decoded by the reader;
* ``--batch``: every available record in one call as a numpy structured array, checked with
  vectorized operations (refused, exit 2, when numpy cannot be imported: the reader's
  list-of-tuples fallback would be measured instead);
* ``--busy``: spin on ``consume()`` instead of sleeping in ``poll()`` (for producers that
  use BPF_RB_NO_WAKEUP).

Environment: BENCH_MAP, BENCH_PERF_PAGES (64), BENCH_PERF_WAKEUP (1), BENCH_PERF_WATERMARK
(bytes; 0: wake by count), BENCH_HOLD.
"""

from __future__ import annotations

import argparse
import os
import resource
import signal
import struct
import sys
import time
from typing import Any

FORMAT = "<QQIIQ"
NAMES = ["seq", "ts", "pid", "cpu", "arg"]
MAX_CPUS = 4096


def cpu_seconds() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


class Stats:
    """Per-CPU sequence accounting shared by the handlers: st = [received, gaps, ooo, t_first]."""

    def __init__(self) -> None:
        self.expect = [0] * MAX_CPUS
        self.st = [0, 0, 0, 0]
        self.lost_cb = 0

    # The handlers below repeat the same sequence check on purpose: each runs once per record
    # in the measured loop, and a shared helper would add a Python call per record (more than
    # the check itself costs), so the figures would measure the benchmark, not the reader.
    def record_handler(self) -> Any:
        expect, st, mono = self.expect, self.st, time.monotonic_ns
        unpack = struct.Struct("<Q12xI").unpack_from

        def handle(rec: memoryview) -> None:
            seq, cpu = unpack(rec)
            want = expect[cpu]
            if st[0] == 0:
                st[3] = mono()
            st[0] += 1
            if seq == want:
                expect[cpu] = want + 1
            elif seq > want:
                st[1] += seq - want
                expect[cpu] = seq + 1
            else:
                st[2] += 1

        return handle

    def perf_record_handler(self) -> Any:
        expect, st, mono = self.expect, self.st, time.monotonic_ns
        unpack = struct.Struct("<Q12xI").unpack_from

        def handle(ring_cpu: int, rec: memoryview) -> None:
            seq, cpu = unpack(rec)
            want = expect[cpu]
            if st[0] == 0:
                st[3] = mono()
            st[0] += 1
            if seq == want:
                expect[cpu] = want + 1
            elif seq > want:
                st[1] += seq - want
                expect[cpu] = seq + 1
            else:
                st[2] += 1

        return handle

    def decoded_handler(self) -> Any:
        expect, st, mono = self.expect, self.st, time.monotonic_ns

        def handle(seq: int, ts: int, pid: int, cpu: int, arg: int) -> None:
            want = expect[cpu]
            if st[0] == 0:
                st[3] = mono()
            st[0] += 1
            if seq == want:
                expect[cpu] = want + 1
            elif seq > want:
                st[1] += seq - want
                expect[cpu] = seq + 1
            else:
                st[2] += 1

        return handle

    def batch_handler(self) -> Any:
        expect, st, mono = self.expect, self.st, time.monotonic_ns
        import numpy as np  # main() checked it is importable: the batch rows measure numpy arrays

        def check(seq: Any, cpu: int) -> None:
            want = expect[cpu]
            first = int(seq[0])
            if len(seq) > 1:
                d = np.diff(seq.astype(np.int64))
                if int(d.min()) == 1 and int(d.max()) == 1 and first >= want:
                    st[1] += first - want
                    expect[cpu] = int(seq[-1]) + 1
                    return
                # general case: walk the (rare) irregular batch
            for s in seq.tolist():
                want = expect[cpu]
                if s == want:
                    expect[cpu] = want + 1
                elif s > want:
                    st[1] += s - want
                    expect[cpu] = s + 1
                else:
                    st[2] += 1

        def handle(arr: Any) -> None:
            if st[0] == 0:
                st[3] = mono()
            n = len(arr)
            st[0] += n
            if n < 32:  # numpy's fixed costs exceed a Python loop on a few records
                for seq, cpu in zip(arr["seq"].tolist(), arr["cpu"].tolist()):
                    want = expect[cpu]
                    if seq == want:
                        expect[cpu] = want + 1
                    elif seq > want:
                        st[1] += seq - want
                        expect[cpu] = seq + 1
                    else:
                        st[2] += 1
                return
            cpus = arr["cpu"]
            c0 = int(cpus[0])
            if (cpus == c0).all():
                check(arr["seq"], c0)
                return
            for c in np.unique(cpus).tolist():
                check(arr["seq"][cpus == c], c)

        return handle


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="benchmarks/bpfkit_consumer.py", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("kind", choices=["ringbuf", "perf"])
    mode = ap.add_mutually_exclusive_group()
    mode.add_argument("--batch", action="store_true", help="drain in batches (numpy arrays)")
    mode.add_argument("--decoded", action="store_true", help="per record, fields decoded by the reader")
    ap.add_argument("--busy", action="store_true", help="spin on consume() instead of poll()")
    ap.add_argument("--timeout", type=float, default=0.1, help="poll timeout, seconds")
    a = ap.parse_args(argv)

    from bpfkit.events.perf import PerfBuffer
    from bpfkit.events.records import RecordFormat, numpy_module
    from bpfkit.events.ringbuf import RingBuffer
    from bpfkit.maps import Map

    path = os.environ.get("BENCH_MAP")
    if not path:
        print("BENCH_MAP (path of the pinned map) is not set", file=sys.stderr)
        return 2
    if a.batch and numpy_module() is None:
        print(f"--batch measures numpy arrays, but numpy cannot be imported by {sys.executable} "
              "(pip install 'bpfkit[numpy]')", file=sys.stderr)
        return 2
    fmt = RecordFormat(FORMAT, NAMES)
    stats = Stats()
    if a.batch:
        handler = stats.batch_handler()
    elif a.decoded:
        handler = stats.decoded_handler()
    elif a.kind == "ringbuf":
        handler = stats.record_handler()
    else:
        handler = stats.perf_record_handler()

    def on_lost(cpu: int, count: int) -> None:
        stats.lost_cb += count

    bmap = Map.load_pinned(path)
    if a.kind == "ringbuf":
        reader: Any = RingBuffer(bmap)
    else:
        reader = PerfBuffer(
            bmap, lost_callback=on_lost,
            pages=int(os.environ.get("BENCH_PERF_PAGES", "64")),
            wakeup_events=int(os.environ.get("BENCH_PERF_WAKEUP", "1")),
            wakeup_watermark=int(os.environ.get("BENCH_PERF_WATERMARK", "0")),
        )
    if a.batch:
        def step(wait: bool) -> int:
            if wait and not a.busy:
                reader.wait(a.timeout)  # woken or not: take what is there
            return reader.consume_batch(handler, fmt, arrays=True)
    else:
        format_ = fmt if a.decoded else None

        def step(wait: bool) -> int:
            if wait and not a.busy:
                return reader.poll(a.timeout, handler, format=format_)
            return reader.consume(handler, format=format_)

    stop = [False]

    def on_signal(signum: int, frame: Any) -> None:
        stop[0] = True

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    c0 = cpu_seconds()
    print("ready", flush=True)
    if os.environ.get("BENCH_HOLD"):
        sys.stdin.readline()
    st = stats.st
    t_last = 0
    seen = 0
    mono = time.monotonic_ns
    while not stop[0]:
        step(True)
        if st[0] != seen:
            seen = st[0]
            t_last = mono()
    step(False)  # the producer is done: drain the rest
    if st[0] != seen:
        t_last = mono()
    c1 = cpu_seconds()
    reader.close()
    bmap.close()
    wall = (t_last - st[3]) * 1e-9 if st[0] else 0.0
    print("received=%d lost=%d cpu_s=%.6f wall_s=%.6f gaps=%d ooo=%d lost_cb=%d"
          % (st[0], st[1], c1 - c0, wall, st[1], st[2], stats.lost_cb), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
