# SPDX-License-Identifier: Apache-2.0
"""Ring buffer records as OpenTelemetry log records (bpfkit.metrics.otlp): bpf/metrics_demo.bpf.c
sends a struct event for each getppid()/getpgid(N) of this process. Unit: the SDK's in-memory
exporter gets one log record per event with one attribute per field. End to end: ``bpfkit attach
--otlp`` exports over OTLP/HTTP to a minimal receiver written here (the request decoded with the
opentelemetry-proto package), which must see every event with its fields."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from conftest import start_attached

pytest.importorskip("opentelemetry.sdk", reason="needs opentelemetry-sdk (the otlp extra)")
pytest.importorskip("opentelemetry.proto", reason="needs opentelemetry-proto")

from opentelemetry.proto.collector.logs.v1 import logs_service_pb2  # noqa: E402
from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter  # noqa: E402

import bpfkit  # noqa: E402
from bpfkit.events import RingBuffer  # noqa: E402
from bpfkit.metrics.otlp import OtlpEvents, event_codec, logs_endpoint  # noqa: E402

ARGS = [5, 77, 70000]


def _calls() -> list[tuple[str, int]]:
    """Make the events; the (kind, arg) each produces, in order."""
    made = []
    os.getppid()
    made.append(("CALL_GETPPID", 0))
    for n in ARGS:
        try:
            os.getpgid(n)
        except OSError:
            pass
        made.append(("CALL_GETPGID", n))
    return made


@pytest.fixture
def demo(bpf_obj: Any) -> Iterator[Any]:
    spec = bpfkit.load_spec(bpf_obj("metrics_demo"))
    spec.variables["target_tgid"].value = os.getpid()
    with bpfkit.Collection(spec) as coll:
        yield spec, coll


def test_in_memory_exporter(demo: Any) -> None:
    spec, coll = demo
    exporter = InMemoryLogRecordExporter()
    otlp = OtlpEvents(exporter, object_name="metrics_demo", batch=False)
    sink = otlp.sink("events", event_codec(spec.btf, "event"))
    with coll.attach_all(), RingBuffer(coll.maps["events"], sink) as rb:
        made = _calls()
        rb.consume()
    otlp.close()
    logs = exporter.get_finished_logs()
    assert len(logs) == len(made) == sink.count
    comm = open("/proc/self/comm").read().strip()
    for data, (kind, arg) in zip(logs, made):
        record = data.log_record
        attrs = dict(record.attributes or {})
        assert attrs == {"bpf.map": "events", "tgid": os.getpid(), "tid": threading.get_native_id(), "kind": kind,
                         "arg": arg, "comm": comm}
        assert record.event_name == "event" and str(record.body).startswith(f"events: tgid={os.getpid()} ")
        assert data.resource.attributes["service.name"] == "bpfkit"
        assert data.resource.attributes["bpfkit.object"] == "metrics_demo"


def test_endpoint_forms() -> None:
    from bpfkit.errors import UsageError

    assert logs_endpoint("http://127.0.0.1:4318") == "http://127.0.0.1:4318/v1/logs"
    assert logs_endpoint("http://127.0.0.1:4318/") == "http://127.0.0.1:4318/v1/logs"
    assert logs_endpoint("https://otel.example/custom/logs") == "https://otel.example/custom/logs"
    with pytest.raises(UsageError, match=r"--otlp '127.0.0.1:4318': not an http:// or https:// URL"):
        logs_endpoint("127.0.0.1:4318")


def test_event_type_errors(demo: Any) -> None:
    from bpfkit.errors import NotFoundError

    spec, _ = demo
    with pytest.raises(NotFoundError, match=r"--event-type 'nope': BTF has no struct named 'nope', nor has its DWARF \(.debug_info\) \(BTF's structs: .*event"):
        event_codec(spec.btf, "nope")


class _Receiver(BaseHTTPRequestHandler):
    got: list[dict[str, Any]]
    paths: list[str]

    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        body = self.rfile.read(int(self.headers["Content-Length"]))
        request = logs_service_pb2.ExportLogsServiceRequest()
        request.ParseFromString(body)
        for rl in request.resource_logs:
            for sl in rl.scope_logs:
                for lr in sl.log_records:
                    attrs = {}
                    for kv in lr.attributes:
                        which = kv.value.WhichOneof("value")
                        attrs[kv.key] = getattr(kv.value, which)
                    type(self).got.append(attrs)
        type(self).paths.append(self.path)
        answer = logs_service_pb2.ExportLogsServiceResponse().SerializeToString()
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)

    def log_message(self, format: str, *args: Any) -> None:
        pass


def test_attach_otlp_to_a_receiver(bpf_obj: Any) -> None:
    handler = type("Handler", (_Receiver,), {"got": [], "paths": []})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    proc = None
    try:
        proc, seen = start_attached(
            [sys.executable, "-m", "bpfkit.cli", "attach", str(bpf_obj("metrics_demo")), "--set", f"target_tgid={os.getpid()}",
             "--otlp", f"http://127.0.0.1:{server.server_address[1]}"])
        assert any("sending records of events (struct event) as OpenTelemetry logs" in s for s in seen), "".join(seen)
        made = []
        for _ in range(20):
            made.extend(_calls())
        deadline = time.monotonic() + 20
        while len(handler.got) < len(made) and time.monotonic() < deadline:
            time.sleep(0.2)  # the SDK batches: a request a second
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=30)
        assert proc.returncode == 0, "".join(seen) + out
    finally:
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.communicate()
        server.shutdown()
        server.server_close()
    assert set(handler.paths) == {"/v1/logs"}
    comm = open("/proc/self/comm").read().strip()
    me, tid = os.getpid(), threading.get_native_id()
    want = [{"bpf.map": "events", "tgid": me, "tid": tid, "kind": kind, "arg": arg, "comm": comm} for kind, arg in made]
    assert sorted(handler.got, key=repr) == sorted(want, key=repr)  # every event once, with every field
