"""Shipping to a real S3-compatible server that checks request signatures: moto's server, started
by the suite on loopback with authentication enforced (INITIAL_NO_AUTH_ACTION_COUNT: the setup's
own requests are the only unauthenticated ones; from then on every request must be signed with an
IAM access key moto knows). The real CLI (`otelake ship`) seals, uploads, verifies and cleans a
day; a wrong secret is refused with a clear error; Python `deltalake` and `polars` then read the
shipped tables straight from the bucket and agree with the counts recorded before cleaning."""

import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import boto3
import deltalake
import polars as pl
import pytest

from conftest import NODE, ROOT, run_node

BUCKET = "otelake-conformance"
PREFIX = "suite"
INSTANCE = "shipped"
ROWS = 2500
# create_user, create_access_key, put_user_policy, create_bucket: then authentication starts.
SETUP_ACTIONS = 4


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def s3(tmp_path_factory):
    """moto's server on a free loopback port with authentication on; yields its settings."""
    port = free_port()
    endpoint = f"http://127.0.0.1:{port}"
    moto = Path(sys.executable).parent / "moto_server"
    proc = subprocess.Popen(
        [str(moto), "-H", "127.0.0.1", "-p", str(port)],
        env={**os.environ, "INITIAL_NO_AUTH_ACTION_COUNT": str(SETUP_ACTIONS)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        for _ in range(200):
            try:
                urllib.request.urlopen(f"{endpoint}/moto-api/", timeout=1)
                break
            except Exception:
                time.sleep(0.1)
        else:
            raise AssertionError("moto_server did not start")
        setup = dict(endpoint_url=endpoint, region_name="us-east-1",
                     aws_access_key_id="setup", aws_secret_access_key="setup")
        iam = boto3.client("iam", **setup)
        iam.create_user(UserName="otelake")
        key = iam.create_access_key(UserName="otelake")["AccessKey"]
        iam.put_user_policy(
            UserName="otelake",
            PolicyName="s3",
            PolicyDocument=json.dumps({"Version": "2012-10-17", "Statement": [
                {"Effect": "Allow", "Action": "s3:*", "Resource": "*"}]}),
        )
        boto3.client("s3", **setup).create_bucket(Bucket=BUCKET)
        yield {
            "endpoint": endpoint,
            "key": key["AccessKeyId"],
            "secret": key["SecretAccessKey"],
        }
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def env_of(s3, secret=None):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("S3_", "CLOUD_"))}
    env.update({
        "S3_BUCKET": BUCKET,
        "S3_ACCESS_KEY_ID": s3["key"],
        "S3_SECRET_ACCESS_KEY": secret or s3["secret"],
        "S3_REGION": "us-east-1",
        "S3_URL": s3["endpoint"],
        "S3_PREFIX": PREFIX,
    })
    return env


def otelake(args, env):
    return subprocess.run([NODE, str(ROOT / "bin/otelake.js"), *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=600)


@pytest.fixture(scope="module")
def shipped(s3, tmp_path_factory):
    """A day written, then shipped by `otelake ship` (after a refused attempt with a wrong secret)."""
    data = tmp_path_factory.mktemp("otelake-shipping")
    written = json.loads(run_node("conformance/ship_day.ts", str(data), INSTANCE, str(ROWS)))
    day = written["day"]
    wrong = "wrong-" + s3["secret"][6:]
    refused = otelake(["ship", "-D", str(data), "-I", INSTANCE, "--day", day], env_of(s3, wrong))
    ok = otelake(["ship", "-D", str(data), "-I", INSTANCE, "--day", day], env_of(s3))
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


def storage_options(s3):
    return {
        "AWS_ENDPOINT_URL": s3["endpoint"],
        "AWS_ACCESS_KEY_ID": s3["key"],
        "AWS_SECRET_ACCESS_KEY": s3["secret"],
        "AWS_REGION": "us-east-1",
        "AWS_ALLOW_HTTP": "true",
    }


TABLES = ["spans", "span_events", "span_links", "logs", "metrics_points", "metrics_hist"]


def test_independent_readers_read_the_shipped_tables_from_the_bucket(s3, shipped):
    sealed = next(l for l in shipped["lines"] if l["phase"] == "sealed")["tables"]
    assert sealed["logs"]["rows"] == shipped["written"]["logs"] == ROWS
    assert sealed["spans"]["rows"] == shipped["written"]["spans"]
    opts = storage_options(s3)
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


def test_otelake_reads_the_shipped_day_back_from_s3(s3, shipped):
    r = otelake(["view", "-D", str(shipped["data"]), "-I", INSTANCE, "-t", "logs", "-S", "s3",
                 "-n", "3", "-s", "body"], env_of(s3))
    assert r.returncode == 0, r.stderr
    assert f"message {ROWS - 1}" in r.stdout
