"""What Spark + Delta Lake does beyond reading rows: time travel by timestamp, history, and
aggregates it answers from the log's statistics alone."""

import pytest
from expected import (
    LOCAL_SCENARIOS,
    SCENARIOS,
    column_kinds,
    commit_time_ms,
    commit_versions,
    expected_rows,
    normalize,
    readable_versions,
    sample,
)


@pytest.mark.parametrize("scenario", ["appends", "checkpoint", "optimize", "sealed"])
def test_time_travel_by_timestamp(spark, written, scenario):
    """As of a commit's time Spark reads that commit's version, and still that version one
    millisecond before the next commit's time."""
    for report in written[scenario]:
        last = commit_versions(report)[-1]
        for v in sample(readable_versions(report), report):
            want = expected_rows(report, v)
            at = commit_time_ms(report, v)
            assert normalize(spark.read_at(report["dir"], at)) == want, (report["table"], v)
            if v < last:
                before_next = commit_time_ms(report, v + 1) - 1
                assert normalize(spark.read_at(report["dir"], before_next)) == want, (report["table"], v)


@pytest.mark.parametrize("scenario", LOCAL_SCENARIOS)
def test_history_has_the_commit_times(spark, written, scenario):
    """Spark takes a commit's time from its file and shifts any that is not after the one before;
    here none needs shifting, so its history shows the times the commits recorded. (Not for a
    shipped day: object storage gives a file the time of its upload, and only the seal's last
    commit is left there to travel to.)"""
    for report in written[scenario]:
        want = [(v, commit_time_ms(report, v)) for v in commit_versions(report)]
        assert spark.history(report["dir"]) == want, report["table"]


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_aggregates_from_statistics(spark, written, scenario):
    """COUNT(*), MIN and MAX of long and integer columns, which Spark answers from the log's
    statistics without reading a file: exact, int64 extremes included."""
    for report in written[scenario]:
        numeric = [n for n, k in column_kinds(report).items() if k in ("long", "integer")]
        exprs = ["count(*)"] + [f"{fn}(`{n}`)" for n in numeric for fn in ("min", "max")]
        (got,) = spark.sql(f"SELECT {', '.join(exprs)} FROM delta.`{report['dir']}`")
        want = [len(report["rows"])]
        for n in numeric:
            values = [int(r[n]) for r in report["rows"] if r[n] is not None]
            want += [min(values, default=None), max(values, default=None)]
        assert list(got) == want, report["table"]
