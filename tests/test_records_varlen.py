# SPDX-License-Identifier: Apache-2.0
"""Records shorter than their struct (bpfkit.btf.records; issue #38, item 2).

bpf/records_execsnoop.bpf.c sends libbpf-tools execsnoop's ``struct event`` (7,720 bytes) only up
to the bytes ``char args[]`` uses, the arguments NUL-separated, through a perf event array and a
ring buffer. The test execs a known argv and checks every field: through the library
(``record=``, ``char_arrays``), through ``skel.decode``, and through ``bpfkit attach --events
--char-arrays --json``.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from typing import Any

import pytest

import bpfkit
from bpfkit.btf.dwarf import find_struct
from bpfkit.btf.records import RecordDecoder, split_strings
from bpfkit.errors import UsageError
from bpfkit.events import PerfBuffer, RecordFormat, RingBuffer
from conftest import console_script, start_attached

TRUE = "/bin/true"
ARGV = [TRUE, "records-varlen", "", "a b"]
ARGS = b"".join(a.encode() + b"\0" for a in ARGV)  # what args[] holds: 31 bytes
BASE = 40  # offsetof(struct event, args)


def _exec_known() -> int:
    proc = subprocess.run(ARGV, check=True)
    return proc.returncode


def test_partial_decode_offline(bpf_obj: Any) -> None:
    """The rules, on bytes laid out as the program sends them."""
    import struct

    spec = bpfkit.load_spec(bpf_obj("records_execsnoop"))
    btf, t = find_struct(spec.btf, "event")
    assert t.size == 7720
    raw = struct.pack("<iiiiiI16s", 10, 11, 12, 0, 4, len(ARGS), b"true") + ARGS
    rec = RecordDecoder(btf, t, char_arrays={"args": "strings"}).decode(raw)
    assert rec == {"pid": 10, "ppid": 11, "uid": 12, "retval": 0, "args_count": 4, "args_size": len(ARGS),
                   "comm": "true", "args": ["/bin/true", "records-varlen", "", "a b"]}
    assert RecordDecoder(btf, t).decode(raw).args == "/bin/true"  # text: up to the first NUL
    assert RecordDecoder(btf, t, char_arrays="bytes").decode(raw).args == ARGS
    cut = RecordDecoder(btf, t).decode(raw[:22])  # ends inside args_size
    assert (cut.args_count, cut.args_size, cut.comm, cut.args) == (4, None, None, None)
    fmt = RecordFormat.from_btf(spec.btf, "event")
    assert fmt.fields(raw, {"args": "strings"})["args"] == ARGV
    assert fmt.fields(raw[:22]) == {"pid": 10, "ppid": 11, "uid": 12, "retval": 0, "args_count": 4,
                                    "args_size": None, "comm": None, "args": None}
    assert split_strings(b"") == [] and split_strings(b"a\0\0b") == ["a", "", "b"]
    with pytest.raises(UsageError, match="char array mode 'argv' for 'args'"):
        RecordDecoder(btf, t, char_arrays={"args": "argv"})


@pytest.mark.root  # loads the object
def test_variable_length_records_through_both_rings(bpf_obj: Any) -> None:
    spec = bpfkit.load_spec(bpf_obj("records_execsnoop"))
    spec.variables["target_tgid"].value = os.getpid()
    perf: list[tuple[int, Any]] = []
    ring: list[Any] = []
    sizes: list[int] = []
    with bpfkit.Collection(spec) as coll, coll.attach_all(), \
            PerfBuffer(coll.maps["events"], lambda cpu, e: perf.append((cpu, e)), record="event",
                       char_arrays={"args": "strings"}) as pb, \
            RingBuffer(coll.maps["rb"], lambda v: sizes.append(len(v))) as sizes_rb:
        _exec_known()
        deadline = time.monotonic() + 10
        while (not perf or not sizes) and time.monotonic() < deadline:
            pb.poll(0.1)
            sizes_rb.poll(0.1)
    assert sizes == [BASE + len(ARGS)]  # the record is cut: 71 of 7,720 bytes
    assert len(perf) == 1
    e = perf[0][1]
    assert e.args == ARGV and e.args_count == 4 and e.args_size == len(ARGS)
    assert e.ppid == os.getpid() and e.uid == os.getuid() and e.retval == 0 and e.comm == "true" and e.pid > 0
    # The ring buffer's copy, through a RingBuffer given the decoder itself, and skel.decode.
    spec.variables["target_tgid"].value = os.getpid()
    raws: list[bytes] = []
    with bpfkit.Collection(spec) as coll, coll.attach_all(), RingBuffer(coll.maps["rb"], lambda v: raws.append(bytes(v))) as rb:
        _exec_known()
        deadline = time.monotonic() + 10
        while not raws and time.monotonic() < deadline:
            rb.poll(0.1)
    skel = bpfkit.open(bpf_obj("records_execsnoop"))
    rec = skel.decode(skel.RECORDS["event"], raws[0])
    assert rec.args == TRUE and rec.args_size == len(ARGS) and rec.comm == "true"


@pytest.mark.root  # loads the object
def test_attach_events_json_variable_length(bpf_obj: Any) -> None:
    cmd = [console_script(), "attach", str(bpf_obj("records_execsnoop")), "--set", f"target_tgid={os.getpid()}",
           "--events", "events:event", "--events", "rb", "--char-arrays", "args=strings", "--json"]
    proc, seen = start_attached(cmd)
    try:
        time.sleep(0.2)
        _exec_known()
        time.sleep(0.5)
    finally:
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=30)
    records = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    assert {r["map"] for r in records} == {"events", "rb"}, "".join(seen) + out
    for r in records:
        f = r["fields"]
        assert f["args"] == ARGV and f["comm"] == "true" and f["args_count"] == 4 and f["ppid"] == os.getpid()
    rb = [r for r in records if r["map"] == "rb"]
    assert [r["size"] for r in rb] == [BASE + len(ARGS)]


@pytest.mark.root  # loads the object
def test_events_command_pinned_ring_variable_length(bpf_obj: Any) -> None:
    """``bpfkit events PINNED --btf OBJ --char-arrays strings``: the same decoding for a pinned ring."""
    spec = bpfkit.load_spec(bpf_obj("records_execsnoop"))
    spec.variables["target_tgid"].value = os.getpid()
    pin = f"/sys/fs/bpf/bpfkit-test-records-varlen-{os.getpid()}"
    with bpfkit.Collection(spec) as coll, coll.attach_all():
        coll.maps["rb"].pin(pin)
        try:
            proc = subprocess.Popen([console_script(), "events", pin, "--btf", str(bpf_obj("records_execsnoop")),
                                     "--char-arrays", "strings", "--json", "--count", "2", "--duration", "20"],
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            time.sleep(1.0)  # the reader is set up (a record sent before is read too: the ring keeps it)
            # Two records: the exec of the bpfkit command itself (a child of this process), then ours.
            _exec_known()
            out, err = proc.communicate(timeout=30)
        finally:
            os.unlink(pin)
    assert proc.returncode == 0, err
    first, record = (json.loads(line) for line in out.splitlines())
    assert first["fields"]["args"][1:3] == ["events", pin]  # the command line of bpfkit itself
    assert record["size"] == BASE + len(ARGS)
    assert record["fields"]["args"] == ARGV and record["fields"]["comm"] == ["true"]  # every char array: strings
