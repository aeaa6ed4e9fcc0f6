"""An otelake server on a free loopback port, started with the real CLI (`otelake start
--foreground`) as a user would start it, for the tests that send to it."""

import json
import signal
import socket
import subprocess
import time
import urllib.request
from contextlib import contextmanager
from pathlib import Path

from conftest import NODE, ROOT


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def get_json(url: str):
    with urllib.request.urlopen(url, timeout=10) as res:
        return json.loads(res.read())


class Server:
    def __init__(self, url: str, data: Path, instance: str, proc: subprocess.Popen, log: Path):
        self.url = url
        self.data = data
        self.instance = instance
        self.proc = proc
        self.log = log

    def output(self) -> str:
        """What the server printed so far (its log lines)."""
        return self.log.read_text()

    def rows_written(self) -> int:
        return get_json(f"{self.url}/healthz")["aggregator"]["rows_written"]

    def table_dirs(self, table: str) -> list:
        """The Delta table of `table` in every UTC day folder of the instance."""
        days = self.data / self.instance / "staging" / "days"
        return sorted(p for p in days.glob(f"*/otel/{table}") if (p / "_delta_log").is_dir())

    def stop(self) -> str:
        """SIGTERM (flushes every accepted row), then the server's whole output."""
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
def otelake_server(data: Path, instance: str, options: dict | None = None):
    """Yields a running Server; `options` (partial) are saved as the instance's options first."""
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
        )
    server = Server(f"http://127.0.0.1:{port}", data, instance, proc, log)
    deadline = time.time() + 60
    while True:
        try:
            get_json(f"{server.url}/healthz")
            break
        except OSError:
            if proc.poll() is not None or time.time() > deadline:
                proc.kill()
                raise AssertionError(f"server did not start:\n{server.output()}")
            time.sleep(0.1)
    try:
        yield server
    finally:
        if proc.poll() is None:
            server.stop()
