# SPDX-License-Identifier: Apache-2.0
"""ebpf_exporter's tracing configs as OpenTelemetry spans (bpfkit.metrics.ebpf_exporter.tracing).

Kernel: bpf/eex_tracing.bpf.c makes one trace of this process's getpgid() calls (a session span,
a child span per call, ids made in BPF, records in two ring buffers), read with a config written
here in ebpf_exporter's format (labels decoded by bpfkit.metrics.ebpf_exporter.decoders) and sent
over OTLP/HTTP to a receiver run here (the requests decoded with opentelemetry-proto, as
integration/test_metrics_otlp.py's receiver does for logs).
The spans must be exactly what the program logged in its `submitted` map: ids, parent, start and
duration. With nothing listening, every span is counted as dropped and said so. Without a
kernel: how labels become a span, and the endpoint rules."""

from __future__ import annotations

import os
import socket
import struct
import threading
import time
import types
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("opentelemetry.sdk", reason="needs opentelemetry-sdk (the otlp extra)")
pytest.importorskip("opentelemetry.proto", reason="needs opentelemetry-proto")

from opentelemetry.proto.collector.trace.v1 import trace_service_pb2
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from bpfkit.errors import UsageError
from bpfkit.metrics.ebpf_exporter.config import Label, Span, load_exporter_config, parse_exporter_config
from bpfkit.metrics.ebpf_exporter.decoders import DecodeError, DecoderSet
from bpfkit.metrics.ebpf_exporter.tracing import SpanExport, SpanFields, SpanSink, endpoint_from_env, span_fields, start_tracing

SESSION_BEGIN, SESSION_END, BAD_SPAN = 0x7FFFFFF0, 0x7FFFFFF1, 0x7FFFFFF2  # bpf/eex_tracing.bpf.c
ARGS = [3, 1000, 70000, 4000000, 123456]

_BASE = """\
        - name: trace_id
          size: 16
          decoders:
            - name: hex
        - name: parent_span_id
          size: 8
          decoders:
            - name: hex
        - name: span_id
          size: 8
          decoders:
            - name: hex
        - name: span_monotonic_timestamp_ns
          size: 8
          decoders:
            - name: uint
        - name: span_duration_ns
          size: 8
          decoders:
            - name: uint
"""
_SESSION_ATTRIBUTES = """\
        - name: comm
          size: 16
          decoders:
            - name: string
        - name: calls
          size: 4
          padding: 4
          decoders:
            - name: uint
"""
CONFIG = f"""\
tracing:
  spans:
    - name: session
      ringbuf: session_spans
      service: eex-test-app
      labels:
{_BASE}{_SESSION_ATTRIBUTES}\
    - name: call
      ringbuf: call_spans
      service: eex-test-kernel
      labels:
{_BASE}\
        - name: span_name
          size: 16
          decoders:
            - name: string
        - name: arg
          size: 8
          decoders:
            - name: uint
        - name: seq
          size: 4
          padding: 4
          decoders:
            - name: uint
"""


# ----------------------------------------------------------------------------- without a kernel
def _label(name: str, size: int = 8) -> Label:
    return Label(name, size, 0, ())


def _span(*names: str) -> Span:
    return Span("conf_name", "ring", "svc", tuple(_label(n) for n in names))


def test_labels_make_the_span() -> None:
    span = _span("trace_id", "parent_span_id", "span_id", "span_monotonic_timestamp_ns", "span_duration_ns", "span_name", "disk")
    got = span_fields(["00" * 15 + "2a", "00" * 7 + "07", "ab" * 8, "123", "456", "write", "vda"], span)
    assert got == SpanFields("write", 42, 7, int("ab" * 8, 16), 123, 456, {"disk": "vda"})
    # extract.go: a zero span or parent id (its nilSpanID) is "not given", the config's name stays
    got = span_fields(["00" * 15 + "01", "0" * 16, "0" * 16, "5", "0"],
                      _span("trace_id", "parent_span_id", "span_id", "span_monotonic_timestamp_ns", "span_duration_ns"))
    assert (got.name, got.parent_id, got.span_id, got.start_ns, got.attributes) == ("conf_name", 0, 0, 5, {})
    assert span_fields([], _span()) == SpanFields("conf_name")


@pytest.mark.parametrize(("label", "value", "why"), [
    ("trace_id", "0" * 32, "all zero"),                   # otel-go's TraceIDFromHex refuses it
    ("trace_id", "AB" * 16, "not 32 lowercase hex digits"),
    ("trace_id", "ab" * 8, "not 32 lowercase hex digits"),  # a hex of 8 bytes where 16 are needed
    ("span_id", "ab" * 4, "not 16 lowercase hex digits"),
    ("parent_span_id", "zz" * 8, "not 16 lowercase hex digits"),
    ("span_duration_ns", "-1", "not an unsigned 64-bit integer"),
    ("span_monotonic_timestamp_ns", str(1 << 64), "not an unsigned 64-bit integer"),
])
def test_labels_that_do_not_parse(label: str, value: str, why: str) -> None:
    with pytest.raises(DecodeError, match=f"label {label}: .*{why}"):
        span_fields([value], _span(label))


def test_endpoints_from_the_environment() -> None:
    assert endpoint_from_env({}) == "http://localhost:4318/v1/traces"  # autoexport's default
    assert endpoint_from_env({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318/"}) == "http://c:4318/v1/traces"
    assert endpoint_from_env({"OTEL_EXPORTER_OTLP_ENDPOINT": "https://c/otlp"}) == "https://c/otlp/v1/traces"
    assert endpoint_from_env({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://a:1",
                              "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://b:2/t"}) == "http://b:2/t"
    assert endpoint_from_env({"OTEL_TRACES_EXPORTER": "none"}) is None
    with pytest.raises(UsageError, match="OTEL_EXPORTER_OTLP_PROTOCOL=grpc: bpfkit sends OTLP over HTTP with protobuf only"):
        endpoint_from_env({"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"})
    with pytest.raises(UsageError, match="OTEL_TRACES_EXPORTER=zipkin: bpfkit sends spans over OTLP only"):
        endpoint_from_env({"OTEL_TRACES_EXPORTER": "zipkin"})
    with pytest.raises(UsageError, match="OTEL_EXPORTER_OTLP_ENDPOINT 'c:4318/v1/traces': not an http"):
        endpoint_from_env({"OTEL_EXPORTER_OTLP_ENDPOINT": "c:4318"})


def test_a_full_queue_drops_and_counts() -> None:
    """The SDK's in-memory exporter behind a queue of 2 that is not sent before close: 3 of 5
    spans are dropped, counted for their config, and said at close."""
    memory = InMemorySpanExporter()
    export = SpanExport(memory, endpoint="memory", queue_size=2, interval=60, say=None)
    try:
        for i in range(5):
            export.record(SpanFields(f"s{i}", trace_id=1, span_id=i + 1, start_ns=1000, duration_ns=5), "svc", "cfg")
        assert export.pending == 2 and export.dropped_of("cfg") == 3
    finally:
        said = export.close()
    assert said == "3 spans could not be exported to memory: queue full (2 spans waiting to be sent)"
    assert export.exported_of("cfg") == 2 and [s.name for s in memory.get_finished_spans()] == ["s0", "s1"]
    assert [s.context.span_id for s in memory.get_finished_spans()] == [1, 2]


class _Quiet(BaseHTTPRequestHandler):
    def answer(self, status: int) -> None:
        self.send_response(status)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: Any) -> None:
        pass


def test_an_http_error_is_said_with_its_status() -> None:
    """A server that answers 404 (a wrong path): the spans are dropped, and why is its status
    (what the SDK logs, which then no longer reaches stderr)."""

    class NotFound(_Quiet):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers["Content-Length"]))
            self.answer(404)

    server = ThreadingHTTPServer(("127.0.0.1", 0), NotFound)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    said: list[str] = []
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/wrong"
        export = SpanExport.to(url, say=said.append)
        for i in range(2):
            export.record(SpanFields("s", trace_id=1, span_id=i + 1), "svc", "cfg")
        summary = export.close()
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
    assert summary == f"2 spans could not be exported to {url}: HTTP 404 Not Found"
    assert said == [f"spans could not be exported to {url}: HTTP 404 Not Found; counting them as dropped until an "
                    "export succeeds"]
    assert (export.exported, export.dropped, export.dropped_of("cfg")) == (0, 2, 2)


# ---------------------------------------------------------------------------------- the receiver
class _Receiver(_Quiet):
    spans: list[dict[str, Any]]
    requests: list[tuple[str, list[str]]]  # (path, the service of each ResourceSpans)

    def do_POST(self) -> None:
        request = trace_service_pb2.ExportTraceServiceRequest()
        request.ParseFromString(self.rfile.read(int(self.headers["Content-Length"])))
        services = []
        for rs in request.resource_spans:
            resource = {kv.key: kv.value.string_value for kv in rs.resource.attributes}
            services.append(resource["service.name"])
            for ss in rs.scope_spans:
                for sp in ss.spans:
                    type(self).spans.append({
                        "resource": resource, "scope": ss.scope.name, "name": sp.name, "kind": sp.kind,
                        "trace_id": sp.trace_id.hex(), "span_id": sp.span_id.hex(), "parent": sp.parent_span_id.hex(),
                        "start": sp.start_time_unix_nano, "end": sp.end_time_unix_nano,
                        "attributes": {kv.key: kv.value.string_value for kv in sp.attributes}})
        type(self).requests.append((self.path, services))
        self.answer(200)  # an empty body: ExportTraceServiceResponse with nothing rejected


@pytest.fixture
def receiver() -> Iterator[tuple[str, type[_Receiver]]]:
    handler = type("Handler", (_Receiver,), {"spans": [], "requests": []})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", handler
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


# ------------------------------------------------------------------------------------ the kernel
def _open_fds() -> set[str]:
    """This process's fds and what they are (bpf objects, epoll sets, sockets, mappings' files)."""
    out = set()
    for name in os.listdir("/proc/self/fd"):
        try:
            out.add(f"{name}:{os.readlink(f'/proc/self/fd/{name}')}")
        except OSError:
            pass
    return out


def _ours(threads: Any) -> set[str]:
    return {t.name for t in threads if t.name.startswith("bpfkit-")}


def _call(n: int) -> None:
    try:
        os.getpgid(n)
    except OSError:
        pass


@pytest.fixture
def traced(bpf_obj: Any, tmp_path: Path) -> Iterator[tuple[Any, Any, Any]]:
    """(spec, collection, config): bpf/eex_tracing.bpf.c loaded for this process, attached,
    with the config above read from a file as ebpf_exporter's would be."""
    import bpfkit

    path = tmp_path / "eex_tracing.yaml"
    path.write_text(CONFIG)
    config = load_exporter_config(str(path))
    spec = bpfkit.load_spec(bpf_obj("eex_tracing"))
    spec.variables["target_tgid"].value = os.getpid()
    with bpfkit.Collection(spec) as coll, coll.attach_all():
        yield spec, coll, config


def _submitted(spec: Any, coll: Any) -> list[Any]:
    """What the program logged of each span it submitted, in order."""
    var = spec.variables["nsubmitted"]
    raw = coll.maps[var.section][0]
    count = int.from_bytes(raw[var.offset:var.offset + var.size], "little")
    return [coll.maps["submitted"][i] for i in range(count)]


def _hex(*words: int) -> str:
    return b"".join(struct.pack("<Q", w) for w in words).hex()  # the hex decoder: the bytes in memory order


def _drain(sink: SpanSink, want: int) -> None:
    deadline = time.monotonic() + 10
    while sink.spans + sink.decode_errors < want and time.monotonic() < deadline:
        sink.poll(0.1)


@pytest.mark.root
def test_spans_reach_an_otlp_receiver(traced: Any, receiver: Any) -> None:
    spec, coll, config = traced
    url, got = receiver
    said: list[str] = []
    wall_minus_mono = time.time_ns() - time.monotonic_ns()
    export = SpanExport.to(url, say=said.append)
    with SpanSink(coll.maps, config, export, decoders=DecoderSet(), say=said.append) as sink:
        _call(SESSION_BEGIN)
        for n in ARGS:
            _call(n)
        _call(SESSION_END)
        _call(BAD_SPAN)
        _drain(sink, len(ARGS) + 2)
        assert export.force_flush(10_000)
        assert (sink.spans, sink.decode_errors, sink.skipped) == (len(ARGS) + 1, 1, 0)
        assert (sink.exported, sink.dropped) == (len(ARGS) + 1, 0)
    assert export.close() is None
    assert said == ["eex_tracing: span call (ring buffer call_spans): label trace_id: the id is all zero "
                    "(counting the records that do not decode)"]

    logged = _submitted(spec, coll)
    assert len(logged) == len(ARGS) + 2  # the calls, the session, the bad one
    *calls, session, _bad = logged
    trace_id = _hex(session.trace_id_hi, session.trace_id_lo)
    spans = {s["span_id"]: s for s in got.spans}
    assert len(got.spans) == len(spans) == len(ARGS) + 1
    assert all(path == "/v1/traces" and len(services) == len(set(services)) for path, services in got.requests)

    root = spans[_hex(session.span_id)]
    comm = Path("/proc/self/comm").read_text().strip()[:15]
    assert root["parent"] == "" and root["trace_id"] == trace_id and root["name"] == "session"
    assert root["resource"] == {"service.name": "eex-test-app"}
    assert root["attributes"] == {"comm": comm, "calls": str(len(ARGS)), "ebpf_exporter.config": "eex_tracing"}
    assert root["end"] - root["start"] == session.span_duration_ns
    # the start: the program's CLOCK_MONOTONIC time made wall-clock time, one offset for the poll
    clock = root["start"] - session.span_monotonic_timestamp_ns
    assert abs(clock - wall_minus_mono) < 50_000_000

    for seq, (n, call) in enumerate(zip(ARGS, calls)):
        child = spans[_hex(call.span_id)]
        assert (child["trace_id"], child["parent"], child["name"], child["kind"]) == (trace_id, root["span_id"], "getpgid", 1)
        assert child["resource"] == {"service.name": "eex-test-kernel"}
        assert child["scope"] == "bpfkit.metrics.ebpf_exporter.tracing"
        assert child["attributes"] == {"arg": str(n), "seq": str(seq), "ebpf_exporter.config": "eex_tracing"}
        assert child["start"] == call.span_monotonic_timestamp_ns + clock
        assert child["end"] - child["start"] == call.span_duration_ns > 0
        assert root["start"] < child["start"] < child["end"] < root["end"]


@pytest.mark.root
def test_nothing_listening_counts_every_span_dropped(traced: Any) -> None:
    """Also: the session's labels stop before its comm and calls fields, whose 24 bytes are then
    left undecoded (extract.go decodes the labels' bytes only)."""
    _, coll, _ = traced
    config = parse_exporter_config(CONFIG.replace(_SESSION_ATTRIBUTES, ""), "/x/eex.yaml")
    # A port bound and not listening: connecting is refused, and no one else can take the port.
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{closed.getsockname()[1]}"
        said: list[str] = []
        fds = _open_fds()
        threads = set(threading.enumerate())
        sink = SpanSink(coll.maps, config, url, decoders=DecoderSet(), say=said.append)
        try:
            _call(SESSION_BEGIN)
            for n in ARGS[:3]:
                _call(n)
            _call(SESSION_END)
            _drain(sink, 4)
        finally:
            started = time.monotonic()
            sink.close()
            took = time.monotonic() - started
    assert (sink.spans, sink.exported, sink.dropped) == (4, 0, 4)
    assert sink.summary == f"4 spans could not be exported to {url}/v1/traces: connection refused"
    assert said == [f"spans could not be exported to {url}/v1/traces: connection refused; counting them as dropped "
                    "until an export succeeds"]
    assert took < 5, f"close took {took:.1f} s"
    # nothing left behind: the worker thread, the rings' fds and mappings, the exporter's sockets
    assert _ours(threading.enumerate()) == _ours(threads) == set()
    assert _open_fds() <= fds
    sink.close()  # closing twice is harmless
    assert sink.summary is not None


@pytest.mark.root
def test_start_tracing_runs_each_config_on_a_thread(traced: Any, receiver: Any) -> None:
    """bpfkit exporter's way in: start_tracing() over its loaded configs (here one, with a config
    without tracing beside it, which gets no sink), spans read by a thread of its own."""
    _, coll, config = traced
    url, got = receiver
    said: list[str] = []
    metrics_only = parse_exporter_config("metrics:\n  counters:\n    - name: x\n      help: x\n", "/x/other.yaml")
    # a regexp decoder that matches nothing drops the record (SkipLabelSet): skipped, not an error
    only_7 = "            - name: uint\n            - name: regexp\n              regexps: ['^7$']\n"
    config = parse_exporter_config(CONFIG.replace("        - name: arg\n          size: 8\n          decoders:\n            - name: uint\n",
                                                  "        - name: arg\n          size: 8\n          decoders:\n" + only_7),
                                   config.path)
    loaded = types.SimpleNamespace(configs=[metrics_only, config], collections=[coll, coll], decoders=DecoderSet())
    threads = set(threading.enumerate())
    tracing = start_tracing(loaded, url, said.append)
    try:
        assert [s.config.name for s in tracing.sinks] == ["eex_tracing"]
        assert said == [f"sending the spans of eex_tracing to {url}/v1/traces (OTLP/HTTP)"]
        _call(SESSION_BEGIN)
        _call(7)
        _call(8)
        _call(SESSION_END)
        deadline = time.monotonic() + 10
        while tracing.sinks[0].spans + tracing.sinks[0].skipped < 3 and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        tracing.close()
    sink = tracing.sinks[0]
    assert (sink.spans, sink.skipped, sink.decode_errors, sink.exported, tracing.summary) == (2, 1, 0, 2, None)
    assert sorted((s["name"], s["attributes"].get("arg")) for s in got.spans) == [("getpgid", "7"), ("session", None)]
    assert _ours(threading.enumerate()) == _ours(threads) == set()  # the sink's and the export's threads ended


@pytest.mark.root
def test_config_errors(traced: Any) -> None:
    coll = traced[1]
    bad = parse_exporter_config(CONFIG.replace("ringbuf: call_spans", "ringbuf: no_such_ring"), "/x/eex.yaml")
    export = SpanExport(InMemorySpanExporter(), say=None)
    try:
        with pytest.raises(UsageError, match=r"/x/eex.yaml:\d+: tracing.spans\[1\] \(call\): no map 'no_such_ring' in "
                                             r"/x/eex.bpf.o \(its ring buffers: call_spans, session_spans\)"):
            SpanSink(coll.maps, bad, export, decoders=DecoderSet())
        bad = parse_exporter_config(CONFIG.replace("ringbuf: call_spans", "ringbuf: submitted"), "/x/eex.yaml")
        with pytest.raises(UsageError, match=r"tracing.spans\[1\] \(call\): .*'submitted' is array, not ringbuf"):
            SpanSink(coll.maps, bad, export, decoders=DecoderSet())
        bad = parse_exporter_config(CONFIG.replace("ringbuf: call_spans", "ringbuf: session_spans"), "/x/eex.yaml")
        with pytest.raises(UsageError, match=r"ring buffer 'session_spans' is read by tracing.spans\[0\] already"):
            SpanSink(coll.maps, bad, export, decoders=DecoderSet())
    finally:
        assert export.close() is None
