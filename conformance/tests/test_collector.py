"""A real OpenTelemetry Collector in front of otelake, as in a production pipeline.

The Collector is built with the Collector Builder from the Go module proxy
(conformance/collector/builder-config.yaml: otlp receiver, batch processor, otlp_http exporter;
versions pinned) and cached under conformance/.collector/ (ignored by git) together with
telemetrygen, which drives it. One Collector fans every item out to one otlp_http exporter per
encoding (proto, json) and compression (each the exporter offers), each with its own project id;
after the run, the Delta tables are read with deltalake and polars: every item landed exactly once
for every exporter, the rows agree across all of them, and a sample has the ids, attributes and
types telemetrygen sent. Then once against a tiny queue, so that otelake answers 503 and the
Collector retries: still exactly once.
"""

import hashlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import time
from collections import Counter
from contextlib import contextmanager
from pathlib import Path

import deltalake
import polars as pl
import pytest

from conftest import ROOT, free_port, get_json, otelake_process

BUILDER = "go.opentelemetry.io/collector/cmd/builder@v0.165.0"
TELEMETRYGEN = "github.com/open-telemetry/opentelemetry-collector-contrib/cmd/telemetrygen@v0.161.0"
BUILDER_CONFIG = ROOT / "conformance" / "collector" / "builder-config.yaml"
CACHE = ROOT / "conformance" / ".collector"

ENCODINGS = ["proto", "json"]
# Every `compression` of the otlp_http exporter; in this version `snappy` is one raw block and
# `x-snappy-framed` the framing format.
COMPRESSIONS = ["none", "gzip", "zstd", "deflate", "zlib", "snappy", "x-snappy-framed", "lz4"]
SCENARIOS = [(e, c) for e in ENCODINGS for c in COMPRESSIONS]

TRACE_ID = "5b8efff798038103d269b633813fc60c"
SPAN_ID = "eee19b7ec3c1b174"
SERVICE = "collector-conformance"


def project(encoding: str, compression: str) -> str:
    return f"col-{encoding}-{compression}"


# --- the Collector and telemetrygen, built once and cached -----------------------------------


def go_version() -> str:
    if shutil.which("go") is None:
        raise AssertionError("the Collector tests need Go on PATH (go install, the Collector Builder)")
    return subprocess.run(["go", "env", "GOVERSION"], capture_output=True, text=True, check=True).stdout.strip()


def check_run(proc: subprocess.Popen, what: str, log: Path) -> None:
    if proc.wait() != 0:
        raise AssertionError(f"{what} failed ({proc.returncode}):\n{log.read_text()[-4000:]}")


def build_tools() -> tuple[Path, Path]:
    """The Collector and telemetrygen binaries: from the cache, else built (a few minutes)."""
    config = BUILDER_CONFIG.read_text()
    key = hashlib.sha256("\n".join([config, BUILDER, TELEMETRYGEN, go_version()]).encode()).hexdigest()[:16]
    out = CACHE / key
    collector, telemetrygen = out / "otelcol-otelake", out / "telemetrygen"
    if collector.exists() and telemetrygen.exists():
        return collector, telemetrygen

    work = CACHE / f"{key}.tmp-{os.getpid()}"
    shutil.rmtree(work, ignore_errors=True)
    (work / "bin").mkdir(parents=True)
    started = time.time()
    env = {**os.environ, "GOBIN": str(work / "bin")}
    # telemetrygen builds while the Builder is installed and builds the Collector.
    with (work / "telemetrygen.log").open("w") as tg_log, (work / "builder.log").open("w") as b_log:
        tg = subprocess.Popen(["go", "install", TELEMETRYGEN], env=env, cwd=work, stdout=tg_log, stderr=tg_log)
        builder = subprocess.Popen(["go", "install", BUILDER], env=env, cwd=work, stdout=b_log, stderr=b_log)
        check_run(builder, f"go install {BUILDER}", work / "builder.log")
        (work / "builder-config.yaml").write_text(config)
        # The Builder makes an empty temporary folder before it reads output_path and never removes
        # it: TMPDIR puts it in `work`, removed below, instead of one more in /tmp per build.
        (work / "tmp").mkdir()
        build = subprocess.Popen([str(work / "bin" / "builder"), "--config", "builder-config.yaml"],
                                 cwd=work, env={**env, "TMPDIR": str(work / "tmp")}, stdout=b_log, stderr=b_log)
        check_run(build, "the Collector Builder", work / "builder.log")
        check_run(tg, f"go install {TELEMETRYGEN}", work / "telemetrygen.log")
    built = work / "result"
    built.mkdir()
    shutil.move(str(work / "build" / "otelcol-otelake"), built / "otelcol-otelake")
    shutil.move(str(work / "bin" / "telemetrygen"), built / "telemetrygen")
    (built / "build.json").write_text(json.dumps({"seconds": round(time.time() - started, 1)}))
    if not out.exists():
        built.rename(out)
    shutil.rmtree(work, ignore_errors=True)
    return collector, telemetrygen


@pytest.fixture(scope="session")
def tools():
    return build_tools()


def wait_port(port: int, proc: subprocess.Popen, log: Path, timeout: float = 60) -> None:
    deadline = time.time() + timeout
    while True:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        if proc.poll() is not None or time.time() > deadline:
            raise AssertionError(f"the Collector did not start:\n{log.read_text()[-4000:]}")
        time.sleep(0.1)


@contextmanager
def collector(binary: Path, workdir: Path, exporters: dict, batch: dict | None = None):
    """A Collector: otlp (gRPC) receiver -> batch -> every exporter. Yields its receiver port and log."""
    port = free_port()
    names = list(exporters)
    pipeline = {"receivers": ["otlp"], "processors": ["batch"], "exporters": names}
    config = {
        "receivers": {"otlp": {"protocols": {"grpc": {"endpoint": f"127.0.0.1:{port}"}}}},
        "processors": {"batch": batch or {}},
        "exporters": exporters,
        "service": {
            # No metrics endpoint of its own (a fixed port), logs to stderr.
            "telemetry": {"metrics": {"level": "none"}, "logs": {"level": "info"}},
            "pipelines": {"traces": pipeline, "logs": pipeline, "metrics": pipeline},
        },
    }
    config_file = workdir / "collector.json"  # JSON is YAML
    config_file.write_text(json.dumps(config, indent=1))
    log = workdir / "collector.log"
    with log.open("w") as out:
        proc = subprocess.Popen([str(binary), f"--config={config_file}"], stdout=out, stderr=out)
    try:
        wait_port(port, proc, log)
        yield port, log
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()


def exporter(url: str, encoding: str, compression: str, project_id: str) -> dict:
    return {
        "endpoint": url,
        "encoding": encoding,
        "compression": compression,
        "headers": {"x-project-id": project_id},
        "retry_on_failure": {"enabled": True, "initial_interval": "200ms", "max_interval": "2s",
                             "max_elapsed_time": "300s"},
    }


def telemetrygen(binary: Path, port: int, signal_args: list) -> None:
    common = [
        "--otlp-endpoint", f"127.0.0.1:{port}", "--otlp-insecure", "--rate", "0",
        "--service", SERVICE,
        "--otlp-attributes", 'deployment.environment="conformance"',
        "--telemetry-attributes", 'conformance.text="otelake"',
        "--telemetry-attributes", "conformance.number=42",
        "--telemetry-attributes", "conformance.flag=true",
    ]
    proc = subprocess.run([str(binary), *signal_args, *common], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, f"telemetrygen {signal_args}:\n{proc.stderr[-4000:]}"


# What one run of telemetrygen sends, and how many rows each table gets from it.
class Load:
    def __init__(self, traces: int, child_spans: int, logs: int, points: int):
        self.traces, self.child_spans, self.logs, self.points = traces, child_spans, logs, points
        self.spans = traces * (1 + child_spans)
        # One link per span to an earlier span of the run: the first span has none to link to.
        self.links = self.spans - 1
        # Gauge, cumulative Sum, delta Sum; Histogram, ExponentialHistogram.
        self.metric_points = 3 * points
        self.metric_hist = 2 * points

    def rows(self) -> dict:
        return {"spans": self.spans, "span_events": 0, "span_links": self.links, "logs": self.logs,
                "metrics_points": self.metric_points, "metrics_hist": self.metric_hist}

    def send(self, binary: Path, port: int) -> None:
        telemetrygen(binary, port, ["traces", "--traces", str(self.traces),
                                    "--child-spans", str(self.child_spans), "--span-links", "1"])
        telemetrygen(binary, port, ["logs", "--logs", str(self.logs), "--body", "collector says hi",
                                    "--severity-number", "13", "--severity-text", "Warn",
                                    "--trace-id", TRACE_ID, "--span-id", SPAN_ID])
        metrics = [("Gauge", "gauge", []), ("Sum", "sum.cumulative", ["--aggregation-temporality", "cumulative"]),
                   ("Sum", "sum.delta", ["--aggregation-temporality", "delta"]),
                   ("Histogram", "histogram", []), ("ExponentialHistogram", "exponential_histogram", [])]
        for metric_type, name, extra in metrics:
            telemetrygen(binary, port, ["metrics", "--metrics", str(self.points), "--metric-type", metric_type,
                                        "--otlp-metric-name", f"gen.{name}", "--trace-id", TRACE_ID,
                                        "--span-id", SPAN_ID, *extra])


def deliver(server, collector_log: Path, expected_rows: int, timeout: float = 180) -> None:
    """Waits until otelake has written `expected_rows`; fails early when the Collector drops data
    or otelake exits."""
    deadline = time.time() + timeout
    while True:
        if server.proc.poll() is not None:
            raise AssertionError(f"otelake exited ({server.proc.returncode}):\n{server.output()[-4000:]}")
        health = get_json(f"{server.url}/healthz")
        if health["aggregator"]["rows_written"] >= expected_rows:
            return
        log = collector_log.read_text()
        if "Dropping data" in log:
            raise AssertionError(f"the Collector dropped data:\n{log[-4000:]}")
        if time.time() > deadline:
            stats = {k: health[k] for k in ("producer", "aggregator")}
            raise AssertionError(f"{health['aggregator']['rows_written']} of {expected_rows} rows written after "
                                 f"{timeout} s; otelake: {json.dumps(stats)}\nCollector:\n{log[-3000:]}")
        time.sleep(0.2)


def read_tables(server) -> dict:
    """Every table of the instance, all day folders, through deltalake (counts) and polars (rows)."""
    tables = {}
    for table in ["spans", "span_events", "span_links", "logs", "metrics_points", "metrics_hist"]:
        dirs = server.table_dirs(table)
        arrow = [deltalake.DeltaTable(str(d)).to_pyarrow_table() for d in dirs]
        frames = [pl.read_delta(str(d)) for d in dirs]
        tables[table] = {
            "deltalake": Counter(p for t in arrow for p in t.column("project_id").to_pylist()),
            "polars": pl.concat(frames, how="vertical") if frames else None,
        }
    return tables


# --- one Collector, every encoding and compression -------------------------------------------

FANOUT = Load(traces=20, child_spans=2, logs=50, points=10)


@pytest.fixture(scope="module")
def fanout(tools, tmp_path_factory):
    collector_bin, telemetrygen_bin = tools
    data = tmp_path_factory.mktemp("otelake-collector")
    with otelake_process(data, "collector") as server:
        exporters = {f"otlp_http/{e}-{c}": exporter(server.url, e, c, project(e, c)) for e, c in SCENARIOS}
        with collector(collector_bin, data, exporters) as (port, log):
            FANOUT.send(telemetrygen_bin, port)
            deliver(server, log, sum(FANOUT.rows().values()) * len(SCENARIOS))
        # The Collector has stopped (its queues drained): a late retry would show as a duplicate.
        server.stop()
        return read_tables(server)


@pytest.mark.parametrize("encoding,compression", SCENARIOS)
def test_every_item_lands_exactly_once(fanout, encoding, compression):
    p = project(encoding, compression)
    for table, expected in FANOUT.rows().items():
        assert fanout[table]["deltalake"][p] == expected, (table, p)
        frame = fanout[table]["polars"]
        got = 0 if frame is None else frame.filter(pl.col("project_id") == p).height
        assert got == expected, (table, p)
    spans = fanout["spans"]["polars"].filter(pl.col("project_id") == p)
    assert spans["span_id"].n_unique() == FANOUT.spans
    assert spans["trace_id"].n_unique() == FANOUT.traces
    links = fanout["span_links"]["polars"].filter(pl.col("project_id") == p)
    assert links["span_id"].n_unique() == FANOUT.links
    points = fanout["metrics_points"]["polars"].filter(pl.col("project_id") == p)
    hist = fanout["metrics_hist"]["polars"].filter(pl.col("project_id") == p)
    per_metric = Counter(points["metric_name"].to_list() + hist["metric_name"].to_list())
    assert per_metric == {f"gen.{n}": FANOUT.points for n in
                          ["gauge", "sum.cumulative", "sum.delta", "histogram", "exponential_histogram"]}


# Columns that differ by design from one exporter to the next: telemetrygen's log records carry no
# observed time, and otelake stamps such a row with its arrival time (docs/data-model.md).
ARRIVAL_COLUMNS = {"logs": ["observed_time_unix_nano"]}


def comparable(frame: pl.DataFrame, table: str) -> list:
    """The rows without the project id, as sorted JSON: equal sets of rows compare equal."""
    rows = frame.drop("project_id", *ARRIVAL_COLUMNS.get(table, [])).to_dicts()
    return sorted(json.dumps(r, sort_keys=True, default=str) for r in rows)


def test_rows_agree_across_encodings_and_compressions(fanout):
    for table in ["spans", "span_links", "logs", "metrics_points", "metrics_hist"]:
        frame = fanout[table]["polars"]
        reference = comparable(frame.filter(pl.col("project_id") == project("proto", "none")), table)
        assert len(reference) == FANOUT.rows()[table]
        for e, c in SCENARIOS:
            assert comparable(frame.filter(pl.col("project_id") == project(e, c)), table) == reference, (table, e, c)


def attrs(value):
    return json.loads(value) if value is not None else None


SENT_ATTRIBUTES = {"conformance.text": "otelake", "conformance.number": 42, "conformance.flag": True}


def test_ids_attributes_and_types_of_a_sample(fanout):
    p = project("json", "snappy")
    rows = {t: fanout[t]["polars"].filter(pl.col("project_id") == p) for t in fanout if fanout[t]["polars"] is not None}

    spans = rows["spans"]
    assert spans.schema["start_time_unix_nano"] == pl.Int64
    assert spans.schema["kind"] == pl.Int32
    by_id = {s["span_id"]: s for s in spans.to_dicts()}
    for s in by_id.values():
        assert re.fullmatch(r"[0-9a-f]{32}", s["trace_id"]) and re.fullmatch(r"[0-9a-f]{16}", s["span_id"])
        assert s["service_name"] == SERVICE
        assert attrs(s["resource_attributes"])["deployment.environment"] == "conformance"
        assert attrs(s["resource_attributes"])["service.name"] == SERVICE
        a = attrs(s["attributes"])
        assert {k: a[k] for k in SENT_ATTRIBUTES} == SENT_ATTRIBUTES
        assert a["network.peer.address"]
        assert s["scope_name"] == "telemetrygen"
        if s["parent_span_id"] is None:
            assert s["name"] == "lets-go" and s["kind"] == 3  # client
        else:
            parent = by_id[s["parent_span_id"]]
            assert parent["trace_id"] == s["trace_id"] and parent["name"] == "lets-go"
            assert re.fullmatch(r"okey-dokey-[01]", s["name"]) and s["kind"] == 2  # server
            assert s["duration_ns"] == s["end_time_unix_nano"] - s["start_time_unix_nano"] == 123_000
    assert sum(s["links_count"] for s in by_id.values()) == FANOUT.links

    for link in rows["span_links"].to_dicts():
        assert link["span_id"] in by_id and link["linked_span_id"] in by_id
        assert by_id[link["linked_span_id"]]["trace_id"] == link["linked_trace_id"]
        assert by_id[link["span_id"]]["name"] == link["span_name"]
        assert attrs(link["attributes"]) == {"link.type": "random", "link.index": 0}

    logs = rows["logs"]
    assert logs.schema["severity_number"] == pl.Int32
    for log in logs.to_dicts():
        assert (log["trace_id"], log["span_id"]) == (TRACE_ID, SPAN_ID)
        assert (log["body"], log["severity_number"], log["severity_text"]) == ("collector says hi", 13, "Warn")
        a = attrs(log["attributes"])
        assert a["app"] == "server" and {k: a[k] for k in SENT_ATTRIBUTES} == SENT_ATTRIBUTES
        assert log["service_name"] == SERVICE

    points = rows["metrics_points"]
    assert points.schema["value_int"] == pl.Int64
    for point in points.to_dicts():
        kind = {"gen.gauge": ("gauge", None, None), "gen.sum.cumulative": ("sum", 2, True),
                "gen.sum.delta": ("sum", 1, True)}[point["metric_name"]]
        assert (point["metric_type"], point["aggregation_temporality"], point["is_monotonic"]) == kind
        assert point["value_int"] is not None and point["value_double"] is None
        assert {k: attrs(point["attributes"])[k] for k in SENT_ATTRIBUTES} == SENT_ATTRIBUTES
        exemplars = attrs(point["exemplars"])
        assert exemplars and all(x["trace_id"] == TRACE_ID and x["span_id"] == SPAN_ID for x in exemplars)

    hist = rows["metrics_hist"]
    assert hist.schema["bucket_counts"] == pl.List(pl.Int64)
    for h in hist.to_dicts():
        if h["metric_name"] == "gen.histogram":
            assert h["metric_type"] == "histogram"
            assert sum(h["bucket_counts"]) == h["count"] and len(h["explicit_bounds"]) == len(h["bucket_counts"]) - 1
        else:
            assert (h["metric_name"], h["metric_type"]) == ("gen.exponential_histogram", "exponential_histogram")
            assert h["scale"] is not None and h["positive_bucket_counts"] is not None
        assert h["count"] > 0 and h["sum"] is not None


# --- 503 from a tiny queue, and the Collector's retries -----------------------------------------

RETRIED = Load(traces=100, child_spans=2, logs=1000, points=40)
# A queue of 128 rows, written in batches of 16 with at most 32 rows taken from the queue until
# they are written: ten Collector consumers sending up to 50 items (100 rows with their links)
# each find it full and get 503 with Retry-After. Without the hold limit (65,536 rows by default)
# the aggregator empties the queue as fast as requests fill it, and whether one ever found it full
# depended on timing.
TINY_QUEUE = {
    "producer_config": {"max_queue_size": 128, "block_timeout_s": 0.01},
    "aggregator_config": {"max_batch_rows": 16, "min_batch_rows": 16, "max_age_s": 0.05, "max_pending_rows": 32},
}


def test_a_full_queue_answers_503_and_the_retries_land_exactly_once(tools, tmp_path):
    collector_bin, telemetrygen_bin = tools
    p = project("proto", "gzip")
    with otelake_process(tmp_path, "tiny", TINY_QUEUE) as server:
        exporters = {"otlp_http/tiny": exporter(server.url, "proto", "gzip", p)}
        batch = {"send_batch_size": 50, "send_batch_max_size": 50, "timeout": "50ms"}
        with collector(collector_bin, tmp_path, exporters, batch) as (port, log):
            RETRIED.send(telemetrygen_bin, port)
            deliver(server, log, sum(RETRIED.rows().values()))
            collector_log = log.read_text()
        output = server.stop()
        tables = read_tables(server)

    refusals = [json.loads(line)["refusal"] for line in output.splitlines()
                if line.startswith("{") and '"refusal"' in line]
    assert any(r["status"] == 503 for r in refusals), "the queue never filled: no 503 to retry"
    assert "Will retry" in collector_log or "retry" in collector_log.lower()
    for table, expected in RETRIED.rows().items():
        assert tables[table]["deltalake"][p] == expected, (table, tables[table]["deltalake"][p], expected)
    spans = tables["spans"]["polars"]
    assert spans["span_id"].n_unique() == spans.height == RETRIED.spans
