"""What a reader must find in a table written by write_tables.ts: rows normalized to the JSON form
the writer printed, the rows of each version, the files and times the log records, and filters
whose answers are computed here from the written rows."""

import json
import math
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

# The scenarios of write_tables.ts. The shipped day's tables are read from the S3 server.
SCENARIOS = ["appends", "checkpoint", "optimize", "vacuum", "autocompact", "sealed", "shipped"]
# Those whose tables are local folders, for the tests that look at the files and the log on disk
# (a shipped table's files are its local copy's, byte for byte, which verification checked).
LOCAL_SCENARIOS = [s for s in SCENARIOS if s != "shipped"]
EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
# Timestamps a Python datetime holds (years 1-9999), in microseconds.
DATETIME_MIN_US = -62135596800000000
DATETIME_MAX_US = 253402300799999999


# --- rows -----------------------------------------------------------------------------------------


def norm_value(v, t: pa.DataType):
    if v is None:
        return None
    if pa.types.is_int64(t):
        return str(v)
    if pa.types.is_floating(t):
        if math.isnan(v):
            return "NaN"
        if math.isinf(v):
            return "Infinity" if v > 0 else "-Infinity"
        return v
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return [norm_value(x, t.value_type) for x in v]
    return v


def normalize(table: pa.Table) -> list:
    """Rows sorted by project_id; timestamps (which must be microseconds in UTC) as decimal
    microseconds, int64 as decimal strings, special doubles as strings."""
    cols = {}
    for name in table.column_names:
        col = table.column(name)
        if pa.types.is_timestamp(col.type):
            assert col.type.unit == "us" and col.type.tz in ("UTC", "+00:00", "Etc/UTC"), (name, col.type)
            col = pc.cast(col, pa.int64())
            cols[name] = [None if x is None else str(x) for x in col.to_pylist()]
        else:
            cols[name] = [norm_value(x, col.type) for x in col.to_pylist()]
    rows = [dict(zip(cols, values)) for values in zip(*cols.values())]
    return sorted(rows, key=lambda r: r["project_id"])


def expected_rows(report, version: int | None = None) -> list:
    """The rows of the table at `version` (default: the latest), sorted like normalize()."""
    rows = report["rows"] if version is None else report["rows"][: rows_at(report, version)]
    return sorted(rows, key=lambda r: r["project_id"])


def rows_at(report, version: int) -> int:
    """How many rows version `version` holds: those of the last append at or before it."""
    n = 0
    for step in report["steps"]:
        if step["version"] <= version:
            n = max(n, step["rows"])
    return n


# --- the log ----------------------------------------------------------------------------------------


def table_dir(report) -> Path:
    """The table's folder on disk: for a shipped table, the local copy it was uploaded from."""
    return Path(report.get("localCopy") or report["dir"])


def log_dir(report) -> Path:
    return table_dir(report) / "_delta_log"


def commit_versions(report) -> list[int]:
    return sorted(int(p.name.split(".")[0]) for p in log_dir(report).glob("*.json"))


def commit_actions(report, version: int) -> list[dict]:
    text = (log_dir(report) / f"{version:020d}.json").read_text()
    return [json.loads(line) for line in text.splitlines() if line]


def commit_time_ms(report, version: int) -> int:
    info = next(a["commitInfo"] for a in commit_actions(report, version) if "commitInfo" in a)
    return info["timestamp"]


def readable_versions(report) -> list[int]:
    """The versions whose files are all still on disk (VACUUM deleted those of the older ones)."""
    on_disk = {p.name for p in table_dir(report).glob("*.parquet")}
    live: set[str] = set()
    readable = []
    for v in commit_versions(report):
        for a in commit_actions(report, v):
            if "add" in a:
                live.add(a["add"]["path"])
            elif "remove" in a:
                live.discard(a["remove"]["path"])
        if live <= on_disk:
            readable.append(v)
    return readable


def sample(versions: list[int], report) -> list[int]:
    """A few versions to travel to: the first two, the middle, both sides of the checkpoint, the
    last two."""
    if len(versions) <= 6:
        return versions
    picked = set(versions[:2] + versions[len(versions) // 2 : len(versions) // 2 + 1] + versions[-2:])
    cp = report["checkpointVersion"]
    if cp is not None:
        picked |= {v for v in versions if cp - 1 <= v <= cp + 1}
    return sorted(picked)


# --- filters ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Filter:
    """`column op value`: value as Python sees it (timestamps as microseconds since the epoch)."""

    column: str
    kind: str  # string, long, integer, double, timestamp
    op: str  # '=', '<', '>='
    value: object

    def __str__(self) -> str:
        return f"{self.column} {self.op} {self.value!r}"

    def holds(self, v) -> bool:
        if v is None:
            return False
        if self.kind in ("long", "timestamp"):
            v = int(v)
        elif self.kind == "double":
            if isinstance(v, str):  # NaN, Infinity, -Infinity
                v = float(v.replace("Infinity", "inf"))
            if math.isnan(v):
                return False
        if self.op == "=":
            return v == self.value
        if self.op == "<":
            return v < self.value
        return v >= self.value


def as_datetime(us: int) -> datetime:
    return EPOCH + timedelta(microseconds=us)


KINDS = ("string", "long", "integer", "double", "timestamp")


def metadata(report) -> dict:
    """The table's metaData action: from the first commit holding one, or from the checkpoint when
    the commits before it were removed (a shipped day)."""
    for v in commit_versions(report):
        for a in commit_actions(report, v):
            if "metaData" in a:
                return a["metaData"]
    checkpoint = log_dir(report) / f"{report['checkpointVersion']:020d}.checkpoint.parquet"
    return next(m for m in pq.read_table(checkpoint, columns=["metaData"]).column("metaData").to_pylist() if m)


def column_kinds(report) -> dict[str, str]:
    """Scalar columns of the table with a kind filters understand, from the log's schema."""
    fields = json.loads(metadata(report)["schemaString"])["fields"]
    return {f["name"]: f["type"] for f in fields if isinstance(f["type"], str) and f["type"] in KINDS}


def filters(report) -> list[Filter]:
    """Filters whose answers depend on each file's statistics: for the key, the event time and
    the first long, integer and double column, a value found in the middle of the rows (so that
    files before and after it hold others), compared by '=', '<' and '>='. Long values beyond
    2^53, timestamps with microseconds below the millisecond of the stats, strings longer than the
    32 code points the stats keep."""
    rows = report["rows"]
    kinds = column_kinds(report)
    chosen = {"project_id": "string", "event_ts": "timestamp"}
    for kind in ("long", "integer", "double"):
        name = next((n for n, k in kinds.items() if k == kind), None)
        if name is not None:
            chosen[name] = kind
    out: list[Filter] = []
    for name, kind in chosen.items():
        value = pivot(rows, name, kind)
        if value is None:
            continue
        ops = ("=", "<") if kind == "double" else ("=", "<", ">=")  # NaN orders differently per engine
        out += [Filter(name, kind, op, value) for op in ops]
    # A key prefix: a range over strings longer than their stats.
    out.append(Filter("project_id", "string", "<", rows[len(rows) // 2]["project_id"][:12]))
    # int64 beyond 2^53: the value written, and its neighbour a float64 would confuse it with.
    long_col = next((n for n, k in chosen.items() if k == "long"), None)
    if long_col is not None:
        out += [Filter(long_col, "long", "=", 2**53 + 1), Filter(long_col, "long", "=", 2**53)]
    return out


def pivot(rows, name: str, kind: str):
    """The first usable value of `name` from the middle of the rows on."""
    n = len(rows)
    for r in rows[n // 2 :] + rows[: n // 2]:
        v = r[name]
        if v is None:
            continue
        if kind == "long":
            v = int(v)
            if abs(v) < 2**63 - 1:
                return v
        elif kind == "timestamp":
            v = int(v)
            if DATETIME_MIN_US <= v <= DATETIME_MAX_US:
                return v
        elif kind == "double":
            # Neither NaN nor ±0: engines differ on NaN's order and on whether -0.0 = 0.0 (Daft: no).
            if not isinstance(v, str) and v != 0:
                return float(v)
        else:
            return v
    return None


def expected_ids(report, f: Filter) -> list[str]:
    return sorted(r["project_id"] for r in report["rows"] if f.holds(r[f.column]))
