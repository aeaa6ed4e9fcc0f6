"""What the Delta log and files say, checked with delta-rs (`deltalake`), pyarrow and Polars: the
version, the live files, commit times, the schema and Parquet types, checkpoints, OPTIMIZE and
VACUUM commits, and the per-file statistics. (Every engine reading every cell: test_engines.py.)"""

import json
import math
import os
import shutil
from datetime import datetime, timedelta
from pathlib import Path

import polars as pl
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from conftest import run_node
from deltalake import DeltaTable, QueryBuilder
from expected import (
    EPOCH,
    LOCAL_SCENARIOS,
    commit_time_ms,
    commit_versions,
    expected_rows,
    log_dir,
    normalize,
)

STRING_STATS_PREFIX = 32


# --- the engine's own view -------------------------------------------------------------------------


@pytest.mark.parametrize("scenario", LOCAL_SCENARIOS)
def test_deltalake_sees_the_version_and_files(written, scenario):
    for report in written[scenario]:
        dt = DeltaTable(report["dir"])
        assert dt.version() == report["version"]
        assert sorted(os.path.basename(u) for u in dt.file_uris()) == sorted(report["files"])


@pytest.mark.parametrize("scenario", LOCAL_SCENARIOS)
def test_commit_times_strictly_increase(written, scenario):
    """Each commit records a later time than the one before, and its file carries the same time
    (readers without in-commit timestamps take it from there); delta-rs' history agrees."""
    for report in written[scenario]:
        versions = commit_versions(report)
        times = [commit_time_ms(report, v) for v in versions]
        assert all(a < b for a, b in zip(times, times[1:])), (report["table"], times)
        mtimes = [int((log_dir(report) / f"{v:020d}.json").stat().st_mtime_ns // 1_000_000) for v in versions]
        assert mtimes == times, report["table"]
        history = sorted((h["version"], h["timestamp"]) for h in DeltaTable(report["dir"]).history())
        assert history == list(zip(versions, times)), report["table"]


def test_schema_as_declared(written):
    report = written["appends"][1]  # metrics_hist: lists, doubles, longs, timestamps
    schema = DeltaTable(report["dir"]).schema()
    fields = {f.name: f for f in schema.fields}
    assert fields["project_id"].nullable is False
    assert fields["event_ts"].nullable is False
    assert fields["service_name"].nullable is True
    arrow = pa.schema(schema.to_arrow())
    assert arrow.field("event_ts").type == pa.timestamp("us", tz="UTC")
    assert arrow.field("time_unix_nano").type == pa.int64()
    assert arrow.field("scale").type == pa.int32()
    bucket = arrow.field("bucket_counts").type
    assert (pa.types.is_list(bucket) or pa.types.is_large_list(bucket)) and bucket.value_type == pa.int64()
    protocol = DeltaTable(report["dir"]).protocol()
    assert (protocol.min_reader_version, protocol.min_writer_version) == (1, 2)


def test_data_file_types(written):
    """Parquet physical/logical types the Delta protocol requires."""
    report = written["appends"][1]
    schema = pq.ParquetFile(Path(report["dir"]) / report["files"][0]).schema
    by_name = {schema.column(i).path: schema.column(i) for i in range(len(schema))}
    ts = by_name["event_ts"]
    assert ts.physical_type == "INT64"
    assert ts.logical_type.to_json() and json.loads(ts.logical_type.to_json()) == {
        "Type": "Timestamp",
        "isAdjustedToUTC": True,
        "timeUnit": "microseconds",
        "is_from_converted_type": False,
        "force_set_converted_type": False,
    }
    assert by_name["project_id"].logical_type.type == "STRING"
    assert by_name["count"].physical_type == "INT64"
    list_leaf = [p for p in by_name if p.startswith("bucket_counts.")]
    assert list_leaf == ["bucket_counts.list.element"], list_leaf
    assert Path(report["files"][0]).name.endswith(".zstd.parquet")
    meta = pq.ParquetFile(Path(report["dir"]) / report["files"][0]).metadata
    assert meta.row_group(0).column(0).compression == "ZSTD"


# --- checkpoints ------------------------------------------------------------------------------------


def test_checkpoint_file_layout(written):
    report = written["checkpoint"][0]
    log = Path(report["dir"]) / "_delta_log"
    cp = report["checkpointVersion"]
    table = pq.read_table(log / f"{cp:020d}.checkpoint.parquet")
    schema = table.schema
    for col in ("protocol", "metaData", "add", "remove", "txn"):
        assert col in schema.names
    assert "commitInfo" not in schema.names
    add = schema.field("add").type
    assert pa.types.is_map(add.field("partitionValues").type)
    assert pa.types.is_map(schema.field("metaData").type.field("configuration").type)
    rows = table.to_pylist()
    assert sum(1 for r in rows if r["protocol"]) == 1
    assert sum(1 for r in rows if r["metaData"]) == 1
    # One action per row.
    for r in rows:
        assert sum(1 for k in ("protocol", "metaData", "add", "remove", "txn") if r[k]) == 1
    # Intermediate automatic checkpoints (interval 3) exist too and are readable.
    assert (log / f"{3:020d}.checkpoint.parquet").exists()
    pq.read_table(log / f"{3:020d}.checkpoint.parquet")


# --- optimize / vacuum ------------------------------------------------------------------------------


def test_optimize_commit(written):
    report = written["optimize"][1]  # 4 appends then OPTIMIZE
    dt = DeltaTable(report["dir"])
    history = dt.history()
    assert history[0]["operation"] == "OPTIMIZE"
    assert len(report["files"]) == 1
    log = Path(report["dir"]) / "_delta_log" / f"{report['version']:020d}.json"
    actions = [json.loads(line) for line in log.read_text().splitlines()]
    removes = [a["remove"] for a in actions if "remove" in a]
    adds = [a["add"] for a in actions if "add" in a]
    assert len(removes) == 4 and len(adds) == 1
    assert all(r["dataChange"] is False and r["extendedFileMetadata"] is True for r in removes)
    assert all(isinstance(r["deletionTimestamp"], int) and r["size"] > 0 for r in removes)
    assert adds[0]["dataChange"] is False


def test_vacuum_leaves_only_live_files(written):
    for report in written["vacuum"] + written["sealed"]:
        on_disk = sorted(p.name for p in Path(report["dir"]).glob("*.parquet"))
        assert on_disk == sorted(report["files"])


def test_autocompact_bounds_files(written):
    report = written["autocompact"][0]
    # 40 appends, compaction of every 4 small files in a tier: far fewer live files than appends.
    assert len(report["files"]) < 12
    assert report["version"] > 40


def test_autocompact_copied_row_groups(written):
    """Files joined by copying row groups (new offsets, any page indexes moved) read like any
    other: their footers and pages, through pyarrow and through DataFusion's pruning."""
    for report in written["autocompact"][1:]:
        files = [Path(report["dir"]) / f for f in report["files"]]
        groups = [pq.ParquetFile(f).metadata.num_row_groups for f in files]
        # Inputs had at most 3 row groups each; a copied join of 4 or more files has more.
        assert max(groups) >= 4, groups
        rows = expected_rows(report)
        for f in files:
            meta = pq.ParquetFile(f).metadata
            for g in range(meta.num_row_groups):
                for c in range(meta.num_columns):
                    col = meta.row_group(g).column(c)
                    # The engine's writer writes no page indexes (src/delta/parquet-writer.ts);
                    # files polars wrote have them. Chunks with a NaN have no bounds, and no
                    # ColumnIndex (src/delta/column-index.ts).
                    if col.has_column_index:
                        assert col.has_offset_index
                        has_values = col.statistics.null_count < col.num_values
                        assert col.statistics.has_min_max or not has_values
        # A selective query, pruned with the row group statistics and page indexes of the files.
        key = rows[len(rows) // 2]["project_id"]
        dt = DeltaTable(report["dir"])
        got = (
            QueryBuilder()
            .register("t", dt)
            .execute(f"SELECT project_id, event_ts FROM t WHERE project_id = '{key}'")
            .read_all()
        )
        assert got.column("project_id").to_pylist() == [key]
        count = QueryBuilder().register("t", dt).execute("SELECT count(*) AS n FROM t").read_all()
        assert count.column("n").to_pylist() == [len(rows)]


# --- stats ------------------------------------------------------------------------------------------


def string_bounds_ok(stat_min, stat_max, true_min, true_max):
    def cps(s):
        return len(s)  # Python strings are sequences of code points

    if cps(true_min) <= STRING_STATS_PREFIX:
        assert stat_min == true_min
    else:
        assert stat_min is not None and true_min.startswith(stat_min) and cps(stat_min) == STRING_STATS_PREFIX
    if cps(true_max) <= STRING_STATS_PREFIX:
        assert stat_max == true_max
    elif stat_max is not None:
        assert stat_max > true_max and cps(stat_max) <= STRING_STATS_PREFIX


def floor_ms(us: int) -> datetime:
    return EPOCH + timedelta(milliseconds=us // 1000)


@pytest.mark.parametrize("scenario", LOCAL_SCENARIOS)
def test_stats_match_file_contents(written, scenario):
    for report in written[scenario]:
        dt = DeltaTable(report["dir"])
        actions = pa.table(dt.get_add_actions(flatten=True)).to_pylist()
        assert len(actions) == len(report["files"])
        for action in actions:
            data = pq.read_table(Path(report["dir"]) / action["path"])
            assert action["num_records"] == data.num_rows
            assert action["size_bytes"] == (Path(report["dir"]) / action["path"]).stat().st_size
            for name in data.column_names:
                col = data.column(name)
                assert action[f"null_count.{name}"] == col.null_count, name
                t = col.type
                src = pc.cast(col, pa.int64()) if pa.types.is_timestamp(t) else col
                values = [v for v in src.to_pylist() if v is not None]
                if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_boolean(t):
                    assert action.get(f"min.{name}") is None and action.get(f"max.{name}") is None
                    continue
                smin, smax = action.get(f"min.{name}"), action.get(f"max.{name}")
                if not values:
                    assert smin is None and smax is None, name
                    continue
                if pa.types.is_timestamp(t):
                    lo, hi = min(values), max(values)
                    in_range = -62135596800000000 <= lo and hi <= 253402300799999999
                    if in_range:
                        assert smin == floor_ms(lo) and smax == floor_ms(hi), name
                    else:
                        assert smin is None and smax is None, name
                elif pa.types.is_floating(t):
                    if any(math.isnan(v) for v in values):
                        assert smin is None and smax is None, name
                        continue
                    lo, hi = min(values), max(values)
                    assert smin == (None if math.isinf(lo) else lo), name
                    assert smax == (None if math.isinf(hi) else hi), name
                elif pa.types.is_string(t) or pa.types.is_large_string(t):
                    string_bounds_ok(smin, smax, min(values), max(values))
                else:
                    assert (smin, smax) == (min(values), max(values)), name


# --- the other direction: the engine reads what delta-rs wrote ----------------------------------


def test_engine_reads_delta_rs_maintenance(written, tmp_path):
    """delta-rs compacts and checkpoints one of our tables; the engine opens it and agrees."""
    report = written["appends"][0]
    copy = tmp_path / "logs"
    shutil.copytree(report["dir"], copy)
    dt = DeltaTable(str(copy))
    dt.optimize.compact()
    dt.create_checkpoint()
    dt = DeltaTable(str(copy))
    out = json.loads(run_node("conformance/read_table.ts", str(copy)))
    assert out["version"] == dt.version()
    assert sorted(out["files"]) == sorted(os.path.basename(u) for u in dt.file_uris())
    assert out["rowCount"] == len(report["rows"])
    assert normalize(pl.read_delta(str(copy)).to_arrow()) == expected_rows(report)
