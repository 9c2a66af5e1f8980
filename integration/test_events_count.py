# SPDX-License-Identifier: Apache-2.0
"""Stopping after exactly N records (`bpfkit events --count N`, `poll(limit=N)`), even when
one wakeup delivers a batch: the records past N stay in the ring for the next reader
(bpf/events_seq.bpf.c producing hundreds of records per BPF_PROG_TEST_RUN)."""

from __future__ import annotations

import io
import json
import os
import shutil
import struct
import subprocess

import pytest

from bpfkit.events import PerfBuffer, RingBuffer

from .test_events_ringbuf import PACKET, run, seq  # noqa: F401 (seq: the fixture)
from .test_link_cli import ENV, SUBPROCESS_TIMEOUT, bpfkit_cmd


def _seqs(records: list[bytes]) -> list[int]:
    return [struct.unpack_from("<Q", r)[0] for r in records]


def test_ringbuf_poll_limit(seq) -> None:  # noqa: F811
    coll = seq("rb_seq")
    got: list[bytes] = []
    with RingBuffer(coll.maps["rb"], lambda rec: got.append(bytes(rec))) as rb:
        run(coll.programs["rb_seq"], 400)
        assert rb.poll(timeout=1, limit=2) == 2
        assert rb.poll(timeout=0, limit=0) == 0
        assert rb.consume() == 398  # the rest stayed in the ring, in order
    assert _seqs(got) == list(range(400))


def test_perf_poll_limit(seq) -> None:  # noqa: F811
    coll = seq("pb_seq")
    got: list[bytes] = []
    with PerfBuffer(coll.maps["pb"], lambda cpu, rec: got.append(bytes(rec)), pages=64) as pb:
        run(coll.programs["pb_seq"], 400)
        assert pb.poll(timeout=1, limit=2) == 2
        assert pb.consume() == 398
    assert _seqs(got) == list(range(400))


def test_event_stream_count_on_a_perf_batch(seq, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: F811
    from bpfkit.cli.cmd_events import EventStream
    from bpfkit.cli.stop_signals import StopSignals

    out = io.StringIO()
    monkeypatch.setattr("sys.stdout", out)
    coll = seq("pb_seq")
    stream = EventStream([(coll.maps["pb"], None)], json_lines=True, count=2)
    try:
        run(coll.programs["pb_seq"], 396)  # one batch, on one CPU's ring
        with StopSignals() as stop:
            stream.run(stop, duration=5)
    finally:
        stream.close()
    lines = out.getvalue().splitlines()
    assert len(lines) == 2
    assert _seqs([bytes.fromhex(json.loads(line)["hex"]) for line in lines]) == [0, 1]


def test_cli_events_count_stops_after_n(seq) -> None:  # noqa: F811
    coll = seq("rb_seq")
    pin_dir = f"/sys/fs/bpf/bpfkit-test-events-count-{os.getpid()}"
    os.mkdir(pin_dir)
    try:
        coll.maps["rb"].pin(f"{pin_dir}/rb")
        run(coll.programs["rb_seq"], 396)  # 396 records waiting before the reader starts
        proc = subprocess.run(bpfkit_cmd("events", f"{pin_dir}/rb", "--count", "2", "--json"),
                              capture_output=True, text=True, env=ENV, timeout=SUBPROCESS_TIMEOUT)
        assert proc.returncode == 0, proc.stderr
        records = [json.loads(line) for line in proc.stdout.splitlines()]
        assert _seqs([bytes.fromhex(r["hex"]) for r in records]) == [0, 1]
        got: list[bytes] = []
        with RingBuffer(coll.maps["rb"], lambda rec: got.append(bytes(rec))) as rb:
            assert rb.consume() == 394  # not read, not lost
        assert _seqs(got) == list(range(2, 396))
    finally:
        shutil.rmtree(pin_dir, ignore_errors=True)
