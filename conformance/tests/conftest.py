"""Shared fixtures: tables written by otelake's Delta engine (through a Node helper script), and
the engines that read them (tests/engines.py), each opened once per session."""

import json
import os
import signal
import socket
import subprocess
import time
import urllib.request
from contextlib import contextmanager
from pathlib import Path

import pytest
from engines import ENGINES

ROOT = Path(__file__).resolve().parents[2]
NODE = os.environ.get("OTELAKE_NODE", "node")
# Engine name -> its version, for the summary at the end of the run.
ENGINE_VERSIONS: dict[str, str] = {}


def run_node(script: str, *args: str, timeout: int = 600) -> str:
    """Runs a Node script of the repository and returns its stdout (fails the test on error)."""
    proc = subprocess.run(
        [NODE, str(ROOT / script), *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    if proc.returncode != 0:
        raise AssertionError(f"{script} failed ({proc.returncode}):\n{proc.stderr[-4000:]}")
    return proc.stdout


def get_json(url: str):
    with urllib.request.urlopen(url, timeout=10) as res:
        return json.loads(res.read())


@contextmanager
def otelake_server(data: Path, instance: str):
    """An otelake server on a free loopback port, started as a user would start it (the CLI), and
    stopped gracefully at the end; yields its base URL."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen(
        [NODE, str(ROOT / "bin/otelake.js"), "start", "--foreground",
         "-D", str(data), "-I", instance, "-H", "127.0.0.1", "-P", str(port)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.time() + 60
        while True:
            try:
                get_json(f"{url}/healthz")
                break
            except OSError:
                if proc.poll() is not None or time.time() > deadline:
                    proc.kill()
                    raise AssertionError(f"server did not start:\n{proc.stdout.read()}")
                time.sleep(0.1)
        yield url
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 0, proc.stdout.read()
    finally:
        if proc.poll() is None:
            proc.kill()


def wait_written(url: str, rows: int, timeout: float = 30) -> None:
    """Waits until the server has written `rows` rows to its tables."""
    deadline = time.time() + timeout
    while True:
        written = get_json(f"{url}/healthz")["aggregator"]["rows_written"]
        if written >= rows:
            return
        assert time.time() < deadline, f"only {written} of {rows} rows written"
        time.sleep(0.05)


@pytest.fixture(scope="session")
def written(tmp_path_factory):
    """Scenario name -> list of table reports (dir, version, files, rows, steps, ...)."""
    out = tmp_path_factory.mktemp("otelake-delta")
    return json.loads(run_node("conformance/write_tables.ts", str(out)))


@pytest.fixture(scope="session")
def engines():
    """Engine name -> the engine, opened on first use and closed at the end of the session."""
    opened = {}

    def get(name: str):
        if name not in opened:
            opened[name] = ENGINES[name]()
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
