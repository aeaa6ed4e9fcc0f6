"""Every engine users query with (tests/engines.py: delta-rs, Polars, DuckDB, Daft, Spark) reads
every table of every scenario, a shipped day from the S3 server included, and finds every cell the
writer wrote (and what Polars reads): at the latest version, at earlier versions, through filters
whose answers depend on each file's statistics, and from the latest checkpoint alone with the JSON
commits before it deleted."""

import json
import shutil
from functools import cache
from pathlib import Path

import polars as pl
import pyarrow.parquet as pq
import pytest
from engines import ENGINES, S3
from expected import (
    SCENARIOS,
    Filter,
    commit_actions,
    commit_versions,
    expected_ids,
    expected_rows,
    filters,
    normalize,
    readable_versions,
    sample,
)


@cache
def polars_rows(path: str, s3: S3) -> list:
    """The reference: Polars' eager reader."""
    return normalize(pl.read_delta(path, storage_options=s3.options_for(path)).to_arrow())


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_reads_every_cell(engine, written, scenario, s3_server):
    for report in written[scenario]:
        got = normalize(engine.read(report["dir"]))
        assert len(got) == report["rowCount"] == len(report["rows"]), report["table"]
        assert got == expected_rows(report), report["table"]
        assert got == polars_rows(report["dir"], s3_server), report["table"]


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_time_travel_by_version(engine, written, scenario):
    for report in written[scenario]:
        versions = sample(readable_versions(report), report)
        assert versions, report["table"]
        for v in versions:
            assert normalize(engine.read(report["dir"], v)) == expected_rows(report, v), (report["table"], v)


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_filters_answer_by_file_statistics(engine, written, scenario):
    for report in written[scenario]:
        for f in filters(report):
            assert engine.keys(report["dir"], f) == expected_ids(report, f), (report["table"], str(f))


def without_commits_before_checkpoint(report, dest: Path, *, its_own: bool) -> Path:
    """A copy of the table with the JSON commits before its latest checkpoint deleted, and with
    `its_own` the checkpoint's own commit as well."""
    copy = dest / report["table"]
    shutil.copytree(report["dir"], copy)
    log = copy / "_delta_log"
    cp = json.loads((log / "_last_checkpoint").read_text())["version"]
    assert cp == report["checkpointVersion"]
    assert (log / f"{cp:020d}.checkpoint.parquet").exists()
    last = cp if its_own else cp - 1
    for f in log.glob("*.json"):
        if int(f.name.split(".")[0]) <= last:
            f.unlink()
    assert sorted(int(f.name.split(".")[0]) for f in log.glob("*.json")) == list(
        range(last + 1, report["version"] + 1)
    )
    return copy


@pytest.mark.parametrize("scenario", ["checkpoint", "vacuum", "sealed"])
def test_reads_latest_checkpoint_alone(engine, written, scenario, tmp_path):
    for report in written[scenario]:
        for its_own in [False] if engine.needs_checkpoint_commit else [False, True]:
            copy = without_commits_before_checkpoint(
                report, tmp_path / f"{engine.name}-{its_own}", its_own=its_own
            )
            assert normalize(engine.read(str(copy))) == expected_rows(report), (report["table"], its_own)


def lying_copy(report, dest: Path) -> tuple[Path, str]:
    """A copy of a table whose first data file's stats say its keys lie beyond every key; returns
    the copy and the smallest key that file really holds."""
    copy = dest / report["table"]
    shutil.copytree(report["dir"], copy)
    for v in commit_versions(report):
        actions = commit_actions(report, v)
        add = next((a["add"] for a in actions if "add" in a), None)
        if add is None:
            continue
        key = min(pq.read_table(copy / add["path"], columns=["project_id"]).column("project_id").to_pylist())
        stats = json.loads(add["stats"])
        stats["minValues"]["project_id"] = stats["maxValues"]["project_id"] = "\U0010ffff"
        add["stats"] = json.dumps(stats)
        (copy / "_delta_log" / f"{v:020d}.json").write_text("".join(json.dumps(a) + "\n" for a in actions))
        return copy, key
    raise AssertionError("no add in the log")


@pytest.mark.parametrize("engine", [n for n, e in ENGINES.items() if e.skips_files_by_stats], indirect=True)
def test_engine_skips_files_by_delta_stats(engine, written, tmp_path):
    """The filters above do depend on the stats: given stats that lie, the engine misses a row."""
    report = written["appends"][0]  # several files, no checkpoint
    copy, key = lying_copy(report, tmp_path)
    f = Filter("project_id", "string", "=", key)
    assert engine.keys(report["dir"], f) == [key]
    assert engine.keys(str(copy), f) == []
