"""After a server was killed with SIGKILL ten times under load and restarted (replaying its
write-ahead log), delta-rs and Polars read its tables cleanly and find every acknowledged row
exactly once."""

import json
from collections import Counter

import polars as pl
import pytest
from deltalake import DeltaTable

from conftest import run_node


@pytest.fixture(scope="module")
def crashed(tmp_path_factory):
    out = tmp_path_factory.mktemp("otelake-crash")
    return json.loads(run_node("conformance/crash_tables.ts", str(out), "10"))


def test_every_acknowledged_row_once_in_deltalake(crashed):
    assert crashed["ok"] > 50, "the load generator got too few requests acknowledged"
    bodies = Counter()
    for path in crashed["tables"]:
        table = DeltaTable(path)
        bodies.update(table.to_pyarrow_table(columns=["body"]).column("body").to_pylist())
    missing = [b for b in crashed["acknowledged"] if b not in bodies]
    assert missing == [], f"{len(missing)} acknowledged rows missing"
    doubled = [b for b, n in bodies.items() if n > 1]
    assert doubled == [], f"{len(doubled)} rows stored more than once"


def test_every_acknowledged_row_once_in_polars(crashed):
    frames = [pl.read_delta(path, columns=["body"]) for path in crashed["tables"]]
    counts = pl.concat(frames).group_by("body").len()
    assert counts.filter(pl.col("len") > 1).height == 0
    stored = set(counts.get_column("body").to_list())
    assert set(crashed["acknowledged"]) <= stored
