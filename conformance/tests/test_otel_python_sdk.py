"""The OpenTelemetry Python SDK's OTLP/HTTP (protobuf) exporters, configured only through the
standard OTEL_EXPORTER_OTLP_* environment variables, send traces, logs and metrics to an otelake
server started with the real CLI (`otelake start --foreground`); everything they sent is read back
through the server's /api endpoints."""

import json
import os
import time

import pytest
from opentelemetry._logs import LogRecord, SeverityNumber
from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter
from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import BatchLogRecordProcessor
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import (
    HistogramDataPoint,
    NumberDataPoint,
    PeriodicExportingMetricReader,
)
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.metrics import Observation
from opentelemetry.trace import Link, SpanKind, Status, StatusCode, set_span_in_context

from conftest import get_json, otelake_server, wait_written


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """An otelake server on a free loopback port, started as a user would start it."""
    with otelake_server(tmp_path_factory.mktemp("otelake-python-sdk"), "pysdk") as url:
        yield url


def read(url: str, path: str, project: str) -> list:
    return get_json(f"{url}/api/{path}?project_id={project}&limit=10000")["rows"]


class Recorded:
    """What each exporter was handed, and how each export ended."""

    def __init__(self):
        self.spans, self.logs, self.metrics, self.results = [], [], [], []


def recording(exporter_cls, sink: list, rec: Recorded):
    class Recording(exporter_cls):
        def export(self, batch, *args, **kwargs):
            sink.append(batch)
            result = super().export(batch, *args, **kwargs)
            rec.results.append((exporter_cls.__name__, result))
            return result

    return Recording()


def send_everything(tag: str) -> Recorded:
    rec = Recorded()
    resource = Resource.create({"service.name": f"py-{tag}", "deployment.environment": "conformance"})

    tracer_provider = TracerProvider(resource=resource)
    tracer_provider.add_span_processor(BatchSpanProcessor(recording(OTLPSpanExporter, rec.spans, rec)))
    tracer = tracer_provider.get_tracer("otelake.conformance", "4.5.6")
    with tracer.start_as_current_span(
        f"GET /items/{tag}",
        kind=SpanKind.SERVER,
        attributes={"http.request.method": "GET", "http.response.status_code": 200, "ratio": 0.5,
                    "cached": True, "tags": ["a", "b"]},
    ) as root:
        root.add_event("cache.miss", {"cache.key": f"k-{tag}", "attempt": 2})
        for i in range(3):
            with tracer.start_as_current_span(f"db.query {i}", kind=SpanKind.CLIENT,
                                              attributes={"db.rows": i * 10}) as child:
                if i == 2:
                    child.set_status(Status(StatusCode.ERROR, "deadlock"))
        linked = root.get_span_context()
    follower = tracer.start_span("follower", links=[Link(linked, {"why": "batch"})])
    follower.end()

    logger_provider = LoggerProvider(resource=resource)
    logger_provider.add_log_record_processor(BatchLogRecordProcessor(recording(OTLPLogExporter, rec.logs, rec)))
    otel_logger = logger_provider.get_logger("otelake.conformance", "4.5.6")
    levels = [(SeverityNumber.INFO, "INFO"), (SeverityNumber.WARN, "WARN"), (SeverityNumber.ERROR, "ERROR")]
    now = time.time_ns()
    with tracer.start_as_current_span("with-logs") as span:
        for i in range(6):
            number, text = levels[i % 3]
            otel_logger.emit(LogRecord(
                timestamp=now + i * 1000,
                observed_timestamp=now + i * 1000 + 7,
                severity_number=number,
                severity_text=text,
                body=f"item {i} of {tag}",
                attributes={"item.id": i, "item.price": 1.25 * i, "item.new": i % 2 == 0},
                context=set_span_in_context(span),
            ))
    otel_logger.emit(LogRecord(
        timestamp=now + 10_000,
        severity_number=SeverityNumber.DEBUG,
        body={"structured": True, "n": 3, "list": ["x", "y"]},
        event_name="conformance.event",
    ))

    reader = PeriodicExportingMetricReader(recording(OTLPMetricExporter, rec.metrics, rec),
                                           export_interval_millis=600_000)
    meter_provider = MeterProvider(resource=resource, metric_readers=[reader])
    meter = meter_provider.get_meter("otelake.conformance", "4.5.6")
    counter = meter.create_counter("items.sold", unit="{item}", description="items sold")
    counter.add(3, {"shop": "north"})
    counter.add(4, {"shop": "south"})
    updown = meter.create_up_down_counter("queue.depth")
    updown.add(10)
    updown.add(-4)
    histogram = meter.create_histogram("checkout.duration", unit="ms")
    for v in (4, 15, 70, 300, 2000):
        histogram.record(v, {"shop": "north"})
    meter.create_observable_gauge("temperature", callbacks=[lambda options: [Observation(21.5, {"room": "a"})]])

    tracer_provider.shutdown()
    logger_provider.shutdown()
    meter_provider.shutdown()
    return rec


def attrs(row, column="attributes"):
    return json.loads(row[column]) if row[column] is not None else None


@pytest.mark.parametrize("compression", ["none", "gzip"])
def test_python_sdk_exports_read_back(server, monkeypatch, compression):
    project = f"py-sdk-{compression}"
    before = get_json(f"{server}/healthz")["aggregator"]["rows_written"]
    # Configuration through the environment only, as the SDK documents it.
    for key in list(os.environ):
        if key.startswith("OTEL_"):
            monkeypatch.delenv(key)
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", server)
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_HEADERS", f"x-project-id={project}")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_COMPRESSION", compression)

    rec = send_everything(compression)
    assert rec.results, "nothing exported"
    for name, result in rec.results:
        assert result.name == "SUCCESS", (name, result)

    spans = [s for batch in rec.spans for s in batch]
    logs = [l for batch in rec.logs for l in batch]
    points = [
        (m, p)
        for data in rec.metrics
        for rm in data.resource_metrics
        for sm in rm.scope_metrics
        for m in sm.metrics
        for p in m.data.data_points
    ]
    events = sum(len(s.events) for s in spans)
    links = sum(len(s.links) for s in spans)
    wait_written(server, before + len(spans) + events + links + len(logs) + len(points))

    # --- spans, events, links
    rows = {r["span_id"]: r for r in read(server, "spans", project)}
    assert len(rows) == len(spans) == 6
    for s in spans:
        row = rows[f"{s.context.span_id:016x}"]
        assert row["trace_id"] == f"{s.context.trace_id:032x}"
        assert row["parent_span_id"] == (f"{s.parent.span_id:016x}" if s.parent else None)
        assert row["name"] == s.name
        assert row["kind"] == s.kind.value + 1  # OTLP numbers kinds from 1
        assert row["start_time_unix_nano"] == str(s.start_time)
        assert row["end_time_unix_nano"] == str(s.end_time)
        assert row["duration_ns"] == str(s.end_time - s.start_time)
        assert row["status_code"] == s.status.status_code.value
        assert (row["status_message"] or None) == (s.status.description or None)
        assert attrs(row) == {k: list(v) if isinstance(v, tuple) else v for k, v in s.attributes.items()}
        assert row["service_name"] == "py-" + compression
        assert attrs(row, "resource_attributes")["deployment.environment"] == "conformance"
        assert row["scope_name"] == "otelake.conformance"
        assert row["scope_version"] == "4.5.6"
        assert row["events_count"] == len(s.events)
        assert row["links_count"] == len(s.links)
    [event] = read(server, "span_events", project)
    root = next(s for s in spans if s.events)
    assert event["span_id"] == f"{root.context.span_id:016x}"
    assert event["name"] == "cache.miss"
    assert event["time_unix_nano"] == str(root.events[0].timestamp)
    assert attrs(event) == {"cache.key": f"k-{compression}", "attempt": 2}
    [link] = read(server, "span_links", project)
    assert link["linked_span_id"] == f"{root.context.span_id:016x}"
    assert link["linked_trace_id"] == f"{root.context.trace_id:032x}"
    assert attrs(link) == {"why": "batch"}

    # --- logs
    stored = read(server, "logs", project)
    assert len(stored) == len(logs) == 7
    for readable in logs:
        lr = readable.log_record
        if isinstance(lr.body, str):
            row = next(r for r in stored if r["body"] == lr.body)
        else:
            row = next(r for r in stored if r["event_name"] == "conformance.event")
            assert json.loads(row["body"]) == lr.body
        assert row["time_unix_nano"] == str(lr.timestamp)
        assert row["observed_time_unix_nano"] == str(lr.observed_timestamp)
        assert row["severity_number"] == lr.severity_number.value
        assert row["severity_text"] == lr.severity_text
        assert row["trace_id"] == (f"{lr.trace_id:032x}" if lr.trace_id else None)
        assert row["span_id"] == (f"{lr.span_id:016x}" if lr.span_id else None)
        assert (attrs(row) or {}) == dict(lr.attributes or {})
        assert row["scope_name"] == "otelake.conformance"

    # --- metrics
    number_rows = read(server, "metrics/points", project)
    hist_rows = read(server, "metrics/hist", project)
    assert len(number_rows) + len(hist_rows) == len(points)
    for metric, p in points:
        rows = hist_rows if isinstance(p, HistogramDataPoint) else number_rows
        row = next(
            r for r in rows
            if r["metric_name"] == metric.name and attrs(r) == dict(p.attributes or {})
        )
        assert row["time_unix_nano"] == str(p.time_unix_nano)
        assert (row["unit"] or "") == (metric.unit or "")
        assert (row["description"] or "") == (metric.description or "")
        if isinstance(p, NumberDataPoint):
            value = row["value_int"] if isinstance(p.value, int) else row["value_double"]
            assert value == (str(p.value) if isinstance(p.value, int) else p.value)
            kind = type(metric.data).__name__.lower()
            assert row["metric_type"] == kind
            if kind == "sum":
                assert row["is_monotonic"] == metric.data.is_monotonic
                assert row["aggregation_temporality"] == metric.data.aggregation_temporality.value
        else:
            assert row["metric_type"] == "histogram"
            assert row["count"] == str(p.count)
            assert row["sum"] == p.sum
            assert row["min"] == p.min and row["max"] == p.max
            assert row["explicit_bounds"] == list(p.explicit_bounds)
            assert row["bucket_counts"] == [str(c) for c in p.bucket_counts]
    kinds = {r["metric_type"] for r in number_rows + hist_rows}
    assert kinds == {"sum", "gauge", "histogram"}
