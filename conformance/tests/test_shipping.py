"""Shipping to a real S3-compatible server that checks request signatures (conftest.s3_server:
moto's server with authentication enforced). The real CLI (`otelake ship`) seals, uploads,
verifies and cleans a day; a wrong secret is refused with a clear error; Python `deltalake` and
`polars` then read the shipped tables straight from the bucket and agree with the counts recorded
before cleaning. (Every engine reading every cell of a shipped day: the `shipped` scenario of
test_engines.py.)"""

import json
import subprocess

import deltalake
import polars as pl
import pytest

from conftest import BUCKET, NODE, ROOT, run_node

PREFIX = "suite"
INSTANCE = "shipped"
ROWS = 2500


def otelake(args, env):
    return subprocess.run([NODE, str(ROOT / "bin/otelake.js"), *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=600)


@pytest.fixture(scope="module")
def shipped(s3_server, tmp_path_factory):
    """A day written, then shipped by `otelake ship` (after a refused attempt with a wrong secret)."""
    data = tmp_path_factory.mktemp("otelake-shipping")
    written = json.loads(run_node("conformance/ship_day.ts", str(data), INSTANCE, str(ROWS)))
    day = written["day"]
    wrong = "wrong-" + s3_server.secret[6:]
    refused = otelake(["ship", "-D", str(data), "-I", INSTANCE, "--day", day],
                      s3_server.otelake_env(PREFIX, secret=wrong))  # fmt: skip
    ok = otelake(["ship", "-D", str(data), "-I", INSTANCE, "--day", day], s3_server.otelake_env(PREFIX))
    lines = [json.loads(l) for l in (data / INSTANCE / "index" / "days.jsonl").read_text().splitlines()]
    return {"data": data, "day": day, "written": written["counts"], "refused": refused, "ok": ok,
            "lines": [l for l in lines if l["day"] == day], "wrong": wrong}


def test_a_wrong_secret_is_refused_clearly(shipped):
    r = shipped["refused"]
    assert r.returncode == 1, r.stdout + r.stderr
    assert "refused the credentials (SignatureDoesNotMatch" in r.stdout, r.stdout + r.stderr
    assert shipped["wrong"] not in r.stdout + r.stderr
    failed = [l for l in shipped["lines"] if l["phase"] == "failed"]
    assert failed and failed[0]["step"] == "upload"


def test_the_day_is_shipped_verified_and_cleaned(shipped):
    r = shipped["ok"]
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"day {shipped['day']}: shipped" in r.stdout
    phases = [l["phase"] if l["phase"] != "failed" else "failed:" + l["step"] for l in shipped["lines"]]
    assert phases == ["open", "sealed", "failed:upload", "uploaded", "verified", "cleaned"]
    assert not (shipped["data"] / INSTANCE / "staging" / "days" / shipped["day"]).exists()


TABLES = ["spans", "span_events", "span_links", "logs", "metrics_points", "metrics_hist"]


def test_independent_readers_read_the_shipped_tables_from_the_bucket(s3_server, shipped):
    sealed = next(l for l in shipped["lines"] if l["phase"] == "sealed")["tables"]
    assert sealed["logs"]["rows"] == shipped["written"]["logs"] == ROWS
    assert sealed["spans"]["rows"] == shipped["written"]["spans"]
    opts = s3_server.object_store_options()
    for table in TABLES:
        uri = f"s3://{BUCKET}/{PREFIX}/{INSTANCE}/days/{shipped['day']}/otel/{table}"
        dt = deltalake.DeltaTable(uri, storage_options=opts)
        assert dt.version() == sealed[table]["version"], table
        assert dt.to_pyarrow_table().num_rows == sealed[table]["rows"], table
        df = pl.read_delta(uri, storage_options=opts)
        assert df.height == sealed[table]["rows"], table
    logs = pl.read_delta(f"s3://{BUCKET}/{PREFIX}/{INSTANCE}/days/{shipped['day']}/otel/logs",
                         storage_options=opts)
    assert logs.filter(pl.col("severity_number") >= 17).height == ROWS // 4
    assert logs["body"].str.contains("é").sum() == ROWS * 4 // 5


def test_otelake_reads_the_shipped_day_back_from_s3(s3_server, shipped):
    r = otelake(["view", "-D", str(shipped["data"]), "-I", INSTANCE, "-t", "logs", "-S", "s3",
                 "-n", "3", "-s", "body"], s3_server.otelake_env(PREFIX))
    assert r.returncode == 0, r.stderr
    assert f"message {ROWS - 1}" in r.stdout
