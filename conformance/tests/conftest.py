"""Shared fixtures: an S3-compatible server that checks signatures, tables written by otelake's
Delta engine (through a Node helper script; a shipped day on that server), and the engines that
read them (tests/engines.py), each opened once per session."""

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from contextlib import contextmanager
from pathlib import Path

import boto3
import pytest
from engines import ENGINES, S3

ROOT = Path(__file__).resolve().parents[2]
NODE = os.environ.get("OTELAKE_NODE", "node")
# Engine name -> its version, for the summary at the end of the run.
ENGINE_VERSIONS: dict[str, str] = {}


def run_node(script: str, *args: str, timeout: int = 600, env: dict[str, str] | None = None) -> str:
    """Runs a Node script of the repository and returns its stdout (fails the test on error)."""
    proc = subprocess.run(
        [NODE, str(ROOT / script), *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
    )
    if proc.returncode != 0:
        raise AssertionError(f"{script} failed ({proc.returncode}):\n{proc.stderr[-4000:]}")
    return proc.stdout


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def get_json(url: str):
    with urllib.request.urlopen(url, timeout=10) as res:
        return json.loads(res.read())


class Server:
    """A running `otelake start --foreground` process, its output in a file (so that a chatty
    server never blocks on a full pipe)."""

    def __init__(self, url: str, data: Path, instance: str, proc: subprocess.Popen, log: Path):
        self.url, self.data, self.instance, self.proc, self.log = url, data, instance, proc, log

    def output(self) -> str:
        return self.log.read_text()

    def table_dirs(self, table: str) -> list:
        """The Delta table of `table` in every UTC day folder of the instance."""
        days = self.data / self.instance / "staging" / "days"
        return sorted(p for p in days.glob(f"*/otel/{table}") if (p / "_delta_log").is_dir())

    def stop(self) -> str:
        """SIGTERM (every accepted row is written first), then the server's whole output."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=60)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
        assert self.proc.returncode == 0, self.output()[-4000:]
        return self.output()


@contextmanager
def otelake_process(data: Path, instance: str, options: dict | None = None):
    """An otelake server on a free loopback port, started as a user would start it (the CLI);
    yields the Server. `options` (partial) are saved as the instance's options first."""
    if options is not None:
        config = data / instance / "configs" / "options.json"
        config.parent.mkdir(parents=True, exist_ok=True)
        config.write_text(json.dumps(options))
    port = free_port()
    log = data / f"{instance}.server.log"
    with log.open("w") as out:
        proc = subprocess.Popen(
            [NODE, str(ROOT / "bin/otelake.js"), "start", "--foreground",
             "-D", str(data), "-I", instance, "-H", "127.0.0.1", "-P", str(port)],
            cwd=ROOT,
            stdout=out,
            stderr=subprocess.STDOUT,
        )  # fmt: skip
    server = Server(f"http://127.0.0.1:{port}", data, instance, proc, log)
    try:
        deadline = time.time() + 60
        while True:
            try:
                get_json(f"{server.url}/healthz")
                break
            except OSError:
                if proc.poll() is not None or time.time() > deadline:
                    raise AssertionError(f"server did not start:\n{server.output()}")
                time.sleep(0.1)
        yield server
    finally:
        if proc.poll() is None:
            proc.kill()


@contextmanager
def otelake_server(data: Path, instance: str):
    """An otelake server started with the CLI and stopped gracefully at the end; yields its URL."""
    with otelake_process(data, instance) as server:
        yield server.url
        server.stop()


def wait_written(url: str, rows: int, timeout: float = 30) -> None:
    """Waits until the server has written `rows` rows to its tables."""
    deadline = time.time() + timeout
    while True:
        written = get_json(f"{url}/healthz")["aggregator"]["rows_written"]
        if written >= rows:
            return
        assert time.time() < deadline, f"only {written} of {rows} rows written"
        time.sleep(0.05)


BUCKET = "otelake-conformance"
# create_user, create_access_key, put_user_policy, create_bucket: then authentication starts.
SETUP_ACTIONS = 4


@pytest.fixture(scope="session")
def s3_server():
    """moto's S3 server on a free loopback port with authentication enforced
    (INITIAL_NO_AUTH_ACTION_COUNT: the setup's own requests are the only unauthenticated ones;
    from then on every request must be signed with an IAM access key moto knows); yields an S3."""
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
                     aws_access_key_id="setup", aws_secret_access_key="setup")  # fmt: skip
        iam = boto3.client("iam", **setup)
        iam.create_user(UserName="otelake")
        key = iam.create_access_key(UserName="otelake")["AccessKey"]
        iam.put_user_policy(
            UserName="otelake",
            PolicyName="s3",
            PolicyDocument=json.dumps({"Version": "2012-10-17", "Statement": [
                {"Effect": "Allow", "Action": "s3:*", "Resource": "*"}]}),
        )  # fmt: skip
        boto3.client("s3", **setup).create_bucket(Bucket=BUCKET)
        yield S3(endpoint=endpoint, key=key["AccessKeyId"], secret=key["SecretAccessKey"], bucket=BUCKET)
    finally:
        proc.terminate()
        proc.wait(timeout=10)


@pytest.fixture(scope="session")
def written(tmp_path_factory, s3_server):
    """Scenario name -> list of table reports (dir, version, files, rows, steps, ...); the shipped
    day's tables are on the S3 server (under the prefix `engines`)."""
    out = tmp_path_factory.mktemp("otelake-delta")
    return json.loads(run_node("conformance/write_tables.ts", str(out), env=s3_server.otelake_env("engines")))


@pytest.fixture(scope="session")
def engines(s3_server):
    """Engine name -> the engine, opened on first use and closed at the end of the session."""
    opened = {}

    def get(name: str):
        if name not in opened:
            opened[name] = ENGINES[name](s3_server)
            ENGINE_VERSIONS[name] = opened[name].version()
        return opened[name]

    yield get
    for e in opened.values():
        e.close()


@pytest.fixture(scope="session", params=list(ENGINES))
def engine(request, engines):
    return engines(request.param)


@pytest.fixture(scope="session")
def spark(engines):
    return engines("spark")


def pytest_terminal_summary(terminalreporter):
    if ENGINE_VERSIONS:
        terminalreporter.write_line("engines: " + "; ".join(f"{n}: {v}" for n, v in ENGINE_VERSIONS.items()))
