"""Shared fixtures: tables written by otelake's Delta engine (through a Node helper script)."""

import json
import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
NODE = os.environ.get("OTELAKE_NODE", "node")


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


@pytest.fixture(scope="session")
def written(tmp_path_factory):
    """Scenario name -> list of table reports (dir, version, files, rows, ...)."""
    out = tmp_path_factory.mktemp("otelake-delta")
    return json.loads(run_node("conformance/write_tables.ts", str(out)))
