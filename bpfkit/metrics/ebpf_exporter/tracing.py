# SPDX-License-Identifier: Apache-2.0
"""ebpf_exporter's ``tracing:`` configs: ring buffer records as OpenTelemetry spans over OTLP/HTTP.

Each of a config's ``tracing: spans:`` names a BPF_MAP_TYPE_RINGBUF; every record the program
submits there is one span. The record's bytes split into the span's labels as a metric key's do
(each label ``size`` bytes through its decoder chain, then ``padding`` skipped; bytes past the
labels are ignored, as ebpf_exporter's tracing/extract.go ignores them). These label names are
the span itself (extract.go's extractSpan):

    trace_id                     hex of 16 bytes: the trace. All zero: refused (a decode error,
                                 as otel-go's TraceIDFromHex refuses it). No such label: random
    parent_span_id               hex of 8 bytes: the parent span, in the same trace; zero: a root
    span_id                      hex of 8 bytes: the span's id; zero or no such label: random
    span_monotonic_timestamp_ns  uint: the start on CLOCK_MONOTONIC (bpf_ktime_get_ns()), made
                                 wall-clock time as ktime.go does (now + ts - monotonic now);
                                 no such label: now
    span_duration_ns             uint: end - start (no such label: 0)
    span_name                    the span's name (else the config's span ``name``)

Every other label is a string attribute, and ``ebpf_exporter.config`` names the config. Spans
of one ``service`` share one TracerProvider whose Resource is ``service.name`` alone (as
provider.go's); a span config without a service is ``$OTEL_SERVICE_NAME``'s, else
``ebpf_exporter``'s (cmd/ebpf_exporter/main.go). Kind INTERNAL, status unset, always sampled.

:class:`SpanExport` is a process's one pipeline (ebpf_exporter's one batch processor): a
worker thread sends batches with the SDK's OTLP/HTTP exporter and counts, per config, the spans
exported and those dropped, with why (connection refused, HTTP 404, queue full). Closing it
says how many spans never left, instead of nothing. :class:`SpanSink` reads one config's ring
buffers into it and counts the records that could not be decoded::

    export = SpanExport.to("http://127.0.0.1:4318")       # base URL: /v1/traces is added
    sink = SpanSink(coll.maps, config, export)            # one per config; configs share the export
    sink.run(stop_event)                                  # or sink.poll(timeout) in your loop
    sink.close()
    problem = export.close()      # None, or "3 spans could not be exported to URL: connection refused"

A sink given an endpoint URL instead makes an export of its own and closes it with itself;
``sink.summary`` then holds what closing the export returned. :class:`Tracing` (made by
:func:`start_tracing` for ``bpfkit exporter``) runs every config's sink on a thread of its own,
as ebpf_exporter runs a goroutine per span config, and closes them all.
"""

from __future__ import annotations

import collections
import logging
import os
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from opentelemetry import trace as trace_api
from opentelemetry.context import Context
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace import Span as SdkSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.id_generator import IdGenerator, RandomIdGenerator
from opentelemetry.sdk.trace.sampling import ALWAYS_ON

from ..._closing import ClosesOnExit
from ..._protocols import MapLike
from ...errors import BPFKitError, UsageError
from ...events.ringbuf import RingBuffer
from ..otlp import signal_endpoint
from .config import ExporterConfig, Span
from .decoders import DecodeError, DecoderSet, SkipLabelSet

__all__ = ["SpanExport", "SpanSink", "Tracing", "start_tracing", "SpanFields", "span_fields", "traces_endpoint", "endpoint_from_env",
           "span_exporter", "wall_minus_monotonic", "CONFIG_ATTRIBUTE"]

CONFIG_ATTRIBUTE = "ebpf_exporter.config"  # extract.go's handleDecodedLabels adds it to every span
DEFAULT_SERVICE = "ebpf_exporter"          # main.go: OTEL_SERVICE_NAME when unset
_NIL_SPAN_ID = "0" * 16                    # extract.go's nilSpanID: a span id left to be generated
_HEX_DIGITS = frozenset("0123456789abcdef")
_U64 = 1 << 64


def _stderr(message: str) -> None:
    sys.stderr.write(f"bpfkit: {message}\n")
    sys.stderr.flush()


# ---------------------------------------------------------------------------- records -> fields
@dataclass(frozen=True)
class SpanFields:
    """One record's span, before it is made: ids are ints (0: not given), ``start_ns`` is
    CLOCK_MONOTONIC (None: now)."""

    name: str
    trace_id: int = 0
    parent_id: int = 0
    span_id: int = 0
    start_ns: int | None = None
    duration_ns: int = 0
    attributes: dict[str, str] = field(default_factory=dict)


def _hex_id(value: str, nbytes: int, label: str) -> int:
    """A trace or span id as otel-go's TraceIDFromHex/SpanIDFromHex read the hex decoder's text:
    exactly 2 x ``nbytes`` lowercase hex digits, not all zero."""
    if len(value) != 2 * nbytes or not _HEX_DIGITS.issuperset(value):
        raise DecodeError(f"label {label}: {value!r} is not {2 * nbytes} lowercase hex digits "
                          f"(decode it with hex from a {nbytes}-byte label)")
    number = int(value, 16)
    if not number:
        raise DecodeError(f"label {label}: the id is all zero")
    return number


def _u64(value: str, label: str) -> int:
    """A decimal uint64, as strconv.ParseUint(value, 10, 64) reads it."""
    if not value.isascii() or not value.isdigit() or int(value) >= _U64:
        raise DecodeError(f"label {label}: {value!r} is not an unsigned 64-bit integer (decode it with uint)")
    return int(value)


def span_fields(values: Sequence[str], span: Span) -> SpanFields:
    """The span a record's decoded label ``values`` describe (extract.go's extractSpan): its ids,
    start, duration and name from the labels so named, the rest as attributes. DecodeError
    at the first label that does not parse."""
    name = span.name or span.ringbuf
    trace_id = parent_id = span_id = duration = 0
    start: int | None = None
    attributes: dict[str, str] = {}
    for label, value in zip(span.labels, values, strict=True):
        key = label.name
        if key == "trace_id":
            trace_id = _hex_id(value, 16, key)
        elif key == "parent_span_id":
            parent_id = 0 if value == _NIL_SPAN_ID else _hex_id(value, 8, key)
        elif key == "span_id":
            span_id = 0 if value == _NIL_SPAN_ID else _hex_id(value, 8, key)
        elif key == "span_monotonic_timestamp_ns":
            start = _u64(value, key)
        elif key == "span_duration_ns":
            duration = _u64(value, key)
        elif key == "span_name":
            name = value
        else:
            attributes[key] = value
    return SpanFields(name, trace_id, parent_id, span_id, start, duration, attributes)


# ---------------------------------------------------------------------------------- endpoints
def traces_endpoint(endpoint: str, what: str = "--otlp") -> str:
    """Where spans go: a base URL (``http://collector:4318``) gets ``/v1/traces``; a URL with a
    path is used as given (as ``--otlp`` takes it for log records)."""
    return signal_endpoint(endpoint, "traces", what)


def endpoint_from_env(environ: Mapping[str, str] | None = None) -> str | None:
    """The traces URL OpenTelemetry's environment variables give, as ebpf_exporter's autoexport
    reads them (its only way to configure tracing): ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` as
    it is, else ``OTEL_EXPORTER_OTLP_ENDPOINT`` + ``/v1/traces``, else
    ``http://localhost:4318/v1/traces``; None for ``OTEL_TRACES_EXPORTER=none``. UsageError for
    what bpfkit cannot send (another exporter, the grpc or http/json protocol)."""
    env = os.environ if environ is None else environ
    kind = env.get("OTEL_TRACES_EXPORTER", "otlp").strip().lower() or "otlp"
    if kind == "none":
        return None
    if kind != "otlp":
        raise UsageError(f"OTEL_TRACES_EXPORTER={kind}: bpfkit sends spans over OTLP only (otlp, or none for no spans)")
    for var in ("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"):
        protocol = env.get(var, "").strip().lower()
        if protocol and protocol != "http/protobuf":
            raise UsageError(f"{var}={protocol}: bpfkit sends OTLP over HTTP with protobuf only: set it to "
                             "http/protobuf and point the endpoint at the collector's OTLP/HTTP port (4318)")
        if protocol:
            break
    signal = env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "").strip()
    if signal:
        traces_endpoint(signal, "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")  # an http(s) URL, else UsageError
        return signal  # the specification: a signal's own variable is used as it is
    base = env.get("OTEL_EXPORTER_OTLP_ENDPOINT", "").strip() or "http://localhost:4318"
    # ... and the all-signals one gets the signal's path appended, whatever path it has.
    return traces_endpoint(base.rstrip("/") + "/v1/traces", "OTEL_EXPORTER_OTLP_ENDPOINT")


def span_exporter(endpoint: str, timeout: float = 2.0) -> SpanExporter:
    """The SDK's OTLP/HTTP (protobuf) span exporter for ``endpoint`` (see :func:`traces_endpoint`).
    ``timeout`` bounds one export, retries included (the SDK retries a refused connection
    after about 1 s, then gives up when the next wait would pass the deadline)."""
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    return OTLPSpanExporter(endpoint=traces_endpoint(endpoint), timeout=timeout)


# ------------------------------------------------------------------------ why an export failed
def _reason(exc: BaseException) -> str:
    """A short why for an exception from an HTTP client: the OSError at the bottom of its chain
    (requests wraps urllib3, which wraps the socket's error) as strerror says it ("connection
    refused"), else the exception's first line."""
    seen: set[int] = set()
    todo: list[object] = [exc]
    while todo:
        item = todo.pop(0)
        if not isinstance(item, BaseException) or id(item) in seen:
            continue
        seen.add(id(item))
        if isinstance(item, OSError) and isinstance(item.errno, int) and item.errno > 0:
            return os.strerror(item.errno).lower()
        if isinstance(item, TimeoutError):
            return "timed out"
        todo.extend([*item.args, getattr(item, "reason", None), item.__cause__, item.__context__])
    text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return text[:200]


class _Reasons(logging.Handler):
    """Keeps why the SDK's OTLP exporter last failed, from what it logs on the export's worker
    thread (``thread``; export() returns only FAILURE): an exception in the record's arguments,
    else an HTTP status code, else the first message. Having a handler, its logger no longer
    falls back to printing every retry on stderr: :class:`SpanExport` says what happened
    itself, once per run of failures."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.last: str | None = None
        self.thread: int | None = None

    def emit(self, record: logging.LogRecord) -> None:
        if record.thread != self.thread:  # another export's worker, in the same process
            return
        args = record.args if isinstance(record.args, tuple) else ()
        for arg in args:
            if isinstance(arg, BaseException):
                self.last = _reason(arg)
                return
        codes = [a for a in args if isinstance(a, int) and not isinstance(a, bool) and 100 <= a < 600]
        if codes:
            said = [a for a in args[args.index(codes[0]) + 1:] if isinstance(a, str) and a]
            self.last = f"HTTP {codes[0]}" + (f" {said[0]}" if said else "")
        elif self.last is None:
            self.last = record.getMessage()[:200]


class _ProgramIds(IdGenerator):
    """The ids the program chose. The Python SDK's IdGenerator takes no context (otel-go's
    NewSpanID gets one, where ebpf_exporter's id_generator.go finds the program's span id), so
    :meth:`SpanExport.record` hands them over through :meth:`given` on the thread that starts
    the span; a zero id (none given) is random, as the SDK's own generator makes it. The Tracer
    asks for a trace id only for a root span (no valid parent context), and for a span id
    always: exactly once each per start_span."""

    def __init__(self) -> None:
        self._given = threading.local()
        self._random = RandomIdGenerator()

    def given(self, trace_id: int, span_id: int) -> None:
        self._given.trace_id, self._given.span_id = trace_id, span_id

    def generate_trace_id(self) -> int:
        given: int = getattr(self._given, "trace_id", 0)
        self._given.trace_id = 0
        return given or self._random.generate_trace_id()

    def generate_span_id(self) -> int:
        given: int = getattr(self._given, "span_id", 0)
        self._given.span_id = 0
        return given or self._random.generate_span_id()


# ---------------------------------------------------------------------------------- the export
class SpanExport(SpanProcessor):
    """Spans batched and sent by a worker thread, every one counted: exported, or dropped with
    why, per config (their ``ebpf_exporter.config`` attribute).

    Batching is done here rather than by the SDK's BatchSpanProcessor because that one drops
    spans (a full queue, a shutdown that times out) without telling its caller how many. Here a
    span leaves the queue only into ``exported`` or ``dropped``. ``say`` hears of a run of
    failed exports once when it starts and once when exports succeed again.
    """

    def __init__(self, exporter: SpanExporter, *, endpoint: str = "", batch_size: int = 512, queue_size: int = 8192,
                 interval: float = 1.0, close_timeout: float = 3.0,
                 say: Callable[[str], None] | None = _stderr) -> None:
        self.exporter = exporter
        self.endpoint = endpoint or type(exporter).__name__
        self.batch_size = batch_size
        self.queue_size = queue_size
        self.interval = interval
        self.close_timeout = close_timeout
        self.say = say
        self._ids = _ProgramIds()
        self._tracers: dict[str, trace_api.Tracer] = {}
        self._queue: collections.deque[ReadableSpan] = collections.deque()
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._exported: collections.Counter[str] = collections.Counter()
        self._dropped: collections.Counter[str] = collections.Counter()
        self._why: collections.Counter[str] = collections.Counter()
        self._in_flight: list[ReadableSpan] = []
        self._stopping = False
        self._closed = False
        self._failing = False
        self._dropped_in_run = 0
        self._reasons = _Reasons()
        self._logger = logging.getLogger(type(exporter).__module__)
        self._logger.addHandler(self._reasons)
        self._thread = threading.Thread(target=self._work, name="bpfkit-span-export", daemon=True)
        self._thread.start()

    @classmethod
    def to(cls, endpoint: str, *, timeout: float = 2.0, close_timeout: float = 3.0,
           say: Callable[[str], None] | None = _stderr) -> SpanExport:
        """An export to the OTLP/HTTP ``endpoint`` (:func:`traces_endpoint`), each export
        bounded by ``timeout`` seconds, closing bounded by ``close_timeout``."""
        url = traces_endpoint(endpoint)
        return cls(span_exporter(url, timeout), endpoint=url, close_timeout=close_timeout, say=say)

    # ---------------------------------------------------------------------------- making spans
    def _tracer(self, service: str) -> trace_api.Tracer:
        """``service``'s tracer, kept: get_tracer() costs as much as making a span."""
        tracer = self._tracers.get(service)
        if tracer is None:
            with self._lock:  # sinks on several threads: one provider per service all the same
                tracer = self._tracers.get(service)
                if tracer is None:
                    provider = TracerProvider(sampler=ALWAYS_ON, resource=Resource({"service.name": service}),
                                              id_generator=self._ids, shutdown_on_exit=False)
                    provider.add_span_processor(self)
                    tracer = self._tracers[service] = provider.get_tracer(__name__)
        return tracer

    def record(self, fields: SpanFields, service: str, config: str, clock: int | None = None) -> None:
        """Make the span ``fields`` describe, with the program's ids, as ``service``'s, from the
        config named ``config``; it is queued by :meth:`on_end`. ``clock`` is wall-clock time
        minus CLOCK_MONOTONIC in ns (:func:`wall_minus_monotonic`; None: read now)."""
        if fields.start_ns is None:
            start = time.time_ns()
        else:
            start = max(0, fields.start_ns + (wall_minus_monotonic() if clock is None else clock))
        context: Context | None = None
        if fields.trace_id:
            parent = trace_api.SpanContext(fields.trace_id, fields.parent_id, is_remote=True,
                                           trace_flags=trace_api.TraceFlags(trace_api.TraceFlags.SAMPLED))
            context = trace_api.set_span_in_context(trace_api.NonRecordingSpan(parent))
        self._ids.given(fields.trace_id, fields.span_id)
        try:
            span = self._tracer(service).start_span(fields.name, context, attributes={**fields.attributes, CONFIG_ATTRIBUTE: config},
                                                    start_time=start)
        finally:
            self._ids.given(0, 0)
        if not span.is_recording():  # OTEL_SDK_DISABLED=true: the SDK makes no spans at all
            with self._lock:
                self._count_dropped([config], "the OpenTelemetry SDK is disabled (OTEL_SDK_DISABLED)")
            return
        span.end(end_time=start + fields.duration_ns)

    # --------------------------------------------------------------- SpanProcessor: the queue
    def on_start(self, span: SdkSpan, parent_context: Context | None = None) -> None:
        pass

    def on_end(self, span: ReadableSpan) -> None:
        wake = False
        with self._lock:
            if self._closed:
                self._count_dropped([_config_of(span)], "made after the export was closed")
            elif len(self._queue) >= self.queue_size:
                self._count_dropped([_config_of(span)], f"queue full ({self.queue_size} spans waiting to be sent)")
            else:
                self._queue.append(span)
                wake = len(self._queue) >= self.batch_size
        if wake:
            self._wake.set()

    def shutdown(self) -> None:
        self.close()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        """Send what is queued now; True once nothing is queued or being sent."""
        deadline = time.monotonic() + timeout_millis / 1000
        self._wake.set()
        while time.monotonic() < deadline:
            with self._lock:
                if not self._queue and not self._in_flight:
                    return True
            self._wake.set()
            time.sleep(0.01)
        return False

    # ---------------------------------------------------------------------------- the worker
    def _work(self) -> None:
        self._reasons.thread = threading.get_ident()
        while True:
            self._wake.wait(self.interval)
            self._wake.clear()
            while True:
                with self._lock:
                    n = min(len(self._queue), self.batch_size)
                    batch = [self._queue.popleft() for _ in range(n)]
                    self._in_flight = batch
                if not batch:
                    break
                self._send(batch)
            if self._stopping:
                return

    def _send(self, batch: list[ReadableSpan]) -> None:
        self._reasons.last = None
        why = ""
        try:
            ok = self.exporter.export(batch) is SpanExportResult.SUCCESS
        except Exception as exc:
            ok, why = False, _reason(exc)
        why = why or self._reasons.last or "the exporter reported a failure"
        said = ""
        with self._lock:
            if self._in_flight is not batch:  # close() gave up on this batch and counted it
                return
            self._in_flight = []
            configs = [_config_of(span) for span in batch]
            if ok:
                self._exported.update(configs)
                if self._failing:
                    said = f"spans are exported to {self.endpoint} again ({self._dropped_in_run} dropped meanwhile)"
                self._failing = False
            else:
                self._count_dropped(configs, why)
                if not self._failing:
                    said = f"spans could not be exported to {self.endpoint}: {why}; counting them as dropped until an export succeeds"
                    self._failing, self._dropped_in_run = True, len(batch)
                else:
                    self._dropped_in_run += len(batch)
                if self._stopping:  # closing: a collector that just failed would fail the rest too
                    self._count_dropped([_config_of(s) for s in self._queue], why)
                    self._queue.clear()
        if said and self.say is not None:
            self.say(said)

    def _count_dropped(self, configs: list[str], why: str) -> None:
        """Count spans of ``configs`` (one entry each) as dropped for ``why``; holding the lock."""
        self._dropped.update(configs)
        self._why[why] += len(configs)

    # ---------------------------------------------------------------------------- the counts
    @property
    def exported(self) -> int:
        return sum(self._exported.values())

    @property
    def dropped(self) -> int:
        return sum(self._dropped.values())

    @property
    def pending(self) -> int:
        """Spans queued or being sent."""
        with self._lock:
            return len(self._queue) + len(self._in_flight)

    def exported_of(self, config: str) -> int:
        return self._exported[config]

    def dropped_of(self, config: str) -> int:
        return self._dropped[config]

    def dropped_by_reason(self) -> dict[str, int]:
        with self._lock:
            return dict(self._why)

    def summary(self) -> str | None:
        """None when no span was dropped, else "N spans could not be exported to URL: why"."""
        with self._lock:
            why = [(n, reason) for reason, n in self._why.items() if n]
        if not why:
            return None
        total = sum(n for n, _ in why)
        whys = why[0][1] if len(why) == 1 else ", ".join(f"{reason} ({n})" for n, reason in why)
        return f"{total} span{'s' if total != 1 else ''} could not be exported to {self.endpoint}: {whys}"

    def close(self, timeout: float | None = None) -> str | None:
        """Send what is queued (for at most ``timeout`` s, default ``close_timeout``; after one
        failed export the rest is dropped without trying), stop the worker and the exporter.
        Returns :meth:`summary`: what could not be exported, if anything."""
        if self._closed:
            return self.summary()
        self._stopping = True
        self._wake.set()
        self._thread.join(self.close_timeout if timeout is None else timeout)
        self.exporter.shutdown()  # interrupts the SDK's wait between retries
        self._thread.join(1.0)
        with self._lock:
            self._closed = True
            left = [*self._in_flight, *self._queue]
            if left:
                self._count_dropped([_config_of(s) for s in left], "still queued when the export was closed")
            self._in_flight = []
            self._queue.clear()
        self._logger.removeHandler(self._reasons)
        return self.summary()


def wall_minus_monotonic() -> int:
    """ns to add to a CLOCK_MONOTONIC time (bpf_ktime_get_ns()) to make it wall-clock time, as
    ktime.go's ktimeToTime does (time.Now() + ts - ktime())."""
    return time.time_ns() - time.monotonic_ns()


def _config_of(span: ReadableSpan) -> str:
    value = (span.attributes or {}).get(CONFIG_ATTRIBUTE, "")
    return value if isinstance(value, str) else ""


# ------------------------------------------------------------------------------------ the sink
class SpanSink(ClosesOnExit):
    """One config's ``tracing: spans:``: their ring buffers read (one epoll set), each record
    decoded into a span sent by ``export`` (a :class:`SpanExport`, shared by configs; or an
    endpoint URL, for an export of this sink's own, closed with it).

    Counters: ``spans`` (made), ``decode_errors`` (records that did not decode: ebpf_exporter's
    ebpf_exporter_decoder_errors_total for the config), ``skipped`` (a decoder dropped the
    record: SkipLabelSet, not an error), and :attr:`exported` / :attr:`dropped` (this config's
    spans, from the export)."""

    def __init__(self, maps: Mapping[str, MapLike], config: ExporterConfig, export: SpanExport | str, *,
                 decoders: DecoderSet | None = None, say: Callable[[str], None] | None = _stderr) -> None:
        self.config = config
        self.say = say
        self.spans = self.decode_errors = self.skipped = 0
        self.last_error: str | None = None
        self.summary: str | None = None  # after close(), with an export of its own: what it dropped
        self._owns_export = isinstance(export, str)
        self.export = SpanExport.to(export, say=say) if isinstance(export, str) else export
        self.decoders = decoders if decoders is not None else DecoderSet()
        self._reader = RingBuffer()
        self._clock: int | None = None  # wall_minus_monotonic(), read once per poll
        self._closed = False
        try:
            self._open(maps)
        except BaseException:
            self.close()
            raise

    def _open(self, maps: Mapping[str, MapLike]) -> None:
        first: dict[str, int] = {}
        for i, span in enumerate(self.config.spans):
            where = f"{self.config.path}:{span.line}: tracing.spans[{i}] ({span.name})"
            if span.ringbuf in first:
                raise UsageError(f"{where}: ring buffer {span.ringbuf!r} is read by tracing.spans[{first[span.ringbuf]}] "
                                 "already (a record would go to one of them at random): one ring buffer per span")
            first[span.ringbuf] = i
            rmap = maps.get(span.ringbuf)
            if rmap is None:
                rings = sorted(n for n, m in maps.items() if m.type.name == "RINGBUF")
                raise UsageError(f"{where}: no map {span.ringbuf!r} in {self.config.object_path} "
                                 f"(its ring buffers: {', '.join(rings) or 'none'})")
            try:
                self._reader.add(rmap, self._on_record(span))
            except BPFKitError as exc:
                raise exc.wrap(where) from None

    def _on_record(self, span: Span) -> Callable[[memoryview], None]:
        size = sum(label.size + label.padding for label in span.labels)
        service = span.service or os.environ.get("OTEL_SERVICE_NAME") or DEFAULT_SERVICE
        labels, name, export, decoders = span.labels, self.config.name, self.export, self.decoders

        def on_record(rec: memoryview) -> None:
            try:
                fields = span_fields(decoders.decode_labels(bytes(rec[:size]), labels), span)
            except SkipLabelSet:
                self.skipped += 1
                return
            except DecodeError as exc:
                self._decode_error(span, exc)
                return
            if self._clock is None:
                self._clock = wall_minus_monotonic()
            self.spans += 1
            export.record(fields, service, name, self._clock)

        return on_record

    def _decode_error(self, span: Span, exc: DecodeError) -> None:
        """Counted; the first one said (ebpf_exporter logs each, which floods a log when a config
        does not fit its program)."""
        self.decode_errors += 1
        self.last_error = f"{self.config.name}: span {span.name} (ring buffer {span.ringbuf}): {exc}"
        if self.decode_errors == 1 and self.say is not None:
            self.say(f"{self.last_error} (counting the records that do not decode)")

    @property
    def exported(self) -> int:
        return self.export.exported_of(self.config.name)

    @property
    def dropped(self) -> int:
        return self.export.dropped_of(self.config.name)

    def poll(self, timeout: float | None = None) -> int:
        """Wait up to ``timeout`` s for records, then make spans of all there are; how many records.
        The clocks' difference is read once per call (at its first record), so the spans of one
        call keep the exact distances the program measured between them (ebpf_exporter reads it
        per span: the same within about a microsecond)."""
        self._clock = None
        return self._reader.poll(timeout)

    def run(self, stop: threading.Event, interval: float = 0.325) -> None:
        """Poll until ``stop`` is set, waking every ``interval`` s to look at it (325 ms, as
        ebpf_exporter's ringBuf.Poll(325))."""
        while not stop.is_set():
            self.poll(interval)

    def close(self) -> None:
        """Stop reading (the maps stay the caller's). With an export of its own, close that too:
        :attr:`summary` then says what it could not export (:meth:`SpanExport.close`)."""
        if self._closed:
            return
        self._closed = True
        self._reader.close()
        if self._owns_export:
            self.summary = self.export.close()


# --------------------------------------------------------------------------- every config's spans
class _HasMaps(Protocol):
    @property
    def maps(self) -> Mapping[str, MapLike]: ...


class _Loaded(Protocol):
    """What :func:`start_tracing` needs of ``bpfkit exporter``'s loaded configs: the configs,
    their collections (in the same order) and the decoder set the metrics use."""

    @property
    def configs(self) -> Sequence[ExporterConfig]: ...
    @property
    def collections(self) -> Sequence[_HasMaps]: ...
    @property
    def decoders(self) -> DecoderSet: ...


class Tracing(ClosesOnExit):
    """The spans of every config that has ``tracing:``, each config's ring buffers read by a
    thread of its own (:meth:`SpanSink.run`) into one :class:`SpanExport` (``endpoint``: a URL,
    for an export of its own, or an export to share). :attr:`sinks` hold the per-config counters
    (spans, decode_errors, skipped, exported, dropped). Closing stops the threads (within a poll
    interval), then the export; ``warn`` hears what could not be exported, and :attr:`summary`
    keeps it."""

    def __init__(self, configs: Sequence[tuple[ExporterConfig, Mapping[str, MapLike]]], endpoint: str | SpanExport, *,
                 decoders: DecoderSet | None = None, warn: Callable[[str], None] | None = _stderr) -> None:
        self.warn = warn
        self._owns_export = isinstance(endpoint, str)
        self.export = SpanExport.to(endpoint, say=warn) if isinstance(endpoint, str) else endpoint
        self.sinks: list[SpanSink] = []
        self.summary: str | None = None
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._closed = False
        try:
            for config, maps in configs:
                if config.spans:
                    self.sinks.append(SpanSink(maps, config, self.export, decoders=decoders, say=warn))
        except BaseException:
            self.close()
            raise
        for sink in self.sinks:
            thread = threading.Thread(target=self._run, args=(sink,), name=f"bpfkit-spans-{sink.config.name}", daemon=True)
            thread.start()
            self._threads.append(thread)

    def _run(self, sink: SpanSink) -> None:
        try:
            sink.run(self._stop)
        except Exception as exc:  # a thread's error would otherwise vanish with it
            if self.warn is not None:
                self.warn(f"{sink.config.name}: reading spans stopped: {exc}")

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._stop.set()
        for thread in self._threads:
            thread.join()
        for sink in self.sinks:
            sink.close()
        if self._owns_export:
            self.summary = self.export.close()
            if self.summary and self.warn is not None:
                self.warn(self.summary)


def start_tracing(loaded: _Loaded, endpoint: str, say: Callable[[str], None] | None = None) -> Tracing:
    """``bpfkit exporter``'s spans: every loaded config's ``tracing:`` read and sent to the
    OTLP/HTTP ``endpoint`` with the decoders its metrics use; ``say`` hears where they go."""
    tracing = Tracing([(config, coll.maps) for config, coll in zip(loaded.configs, loaded.collections, strict=True)],
                      endpoint, decoders=loaded.decoders)
    if say is not None:
        names = ", ".join(sink.config.name for sink in tracing.sinks)
        say(f"sending the spans of {names} to {tracing.export.endpoint} (OTLP/HTTP)")
    return tracing
