"""docs/data-model.md, "Attribute values in the JSON", is true: the log it describes, sent to a
server as OTLP/JSON, is stored with the attributes JSON shown there, and the DuckDB and Spark SQL
shown there read back the values in the result table shown there."""

import glob
import json
import math
import re
import urllib.request

import pytest
from conftest import ROOT, otelake_server, wait_written

DOC = ROOT / "docs" / "data-model.md"
SECTION = "## Attribute values in the JSON"


def kv(key: str, value: dict) -> dict:
    return {"key": key, "value": value}


ATTRIBUTES = [
    kv("user", {"stringValue": "zoë"}),
    kv("retry", {"boolValue": True}),
    kv("items", {"intValue": "3"}),
    kv("order_id", {"intValue": "9007199254740993"}),
    kv("amount", {"doubleValue": 12.5}),
    kv("ratio", {"doubleValue": "NaN"}),
    kv("digest", {"bytesValue": "3q2+7w=="}),
    kv("tags", {"arrayValue": {"values": [{"stringValue": "new"}, {"intValue": "7"}]}}),
    kv(
        "card",
        {
            "kvlistValue": {
                "values": [kv("brand", {"stringValue": "visa"}), kv("last4", {"intValue": "4242"})]
            }
        },
    ),
    kv("note", {}),
]


def section() -> str:
    text = DOC.read_text()
    start = text.index(SECTION)
    return text[start : text.index("\n## ", start + 1)]


def code_blocks(lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", section(), re.S)


def result_table() -> tuple[list[str], list[str]]:
    """The header and the one row of the result table."""
    lines = section().splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("| user_name"))
    cells = [[c.strip() for c in line.strip().strip("|").split("|")] for line in (lines[at], lines[at + 2])]
    return cells[0], cells[1]


def shown(v) -> str:
    """A value as the doc's result table shows it."""
    if v is None:
        return "NULL"
    if isinstance(v, bool):
        return str(v).lower()
    if isinstance(v, float) and math.isnan(v):
        return "NaN"
    if isinstance(v, (bytes, bytearray)):
        return "0x" + bytes(v).hex().upper()
    return str(v)


@pytest.fixture(scope="module")
def logs_table(tmp_path_factory):
    """The logs table of a server that received the doc's log."""
    data = tmp_path_factory.mktemp("otelake-attributes")
    body = {
        "resourceLogs": [
            {
                "resource": {"attributes": [kv("service.name", {"stringValue": "checkout"})]},
                "scopeLogs": [
                    {
                        "scope": {"name": "doc"},
                        "logRecords": [
                            {
                                "timeUnixNano": "1718000000123456789",
                                "body": {"stringValue": "paid"},
                                "attributes": ATTRIBUTES,
                            }
                        ],
                    }
                ],
            }
        ]
    }
    with otelake_server(data, "attrs") as url:
        request = urllib.request.Request(
            f"{url}/v1/logs",
            data=json.dumps(body).encode(),
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=10) as res:
            assert res.status == 200
        wait_written(url, 1)
        (table,) = glob.glob(str(data / "attrs" / "staging" / "days" / "*" / "otel" / "logs"))
        yield table


def test_stored_json_is_the_documented_one(logs_table, engines):
    (doc_json,) = code_blocks("json")
    got = engines("duckdb").read(logs_table).column("attributes").to_pylist()
    assert got == [doc_json.strip()]


@pytest.mark.parametrize("engine", ["duckdb", "spark"])
def test_documented_sql_reads_the_values_back(logs_table, engines, engine):
    duckdb_sql, spark_sql = code_blocks("sql")
    names, values = result_table()
    if engine == "duckdb":
        sql = re.sub(r"delta_scan\('[^']*'\)", f"delta_scan('{logs_table}')", duckdb_sql)
        cur = engines("duckdb").con.execute(sql)
        columns = [d[0] for d in cur.description]
        (row,) = cur.fetchall()
    else:
        sql = re.sub(r"delta\.`[^`]*`", f"delta.`{logs_table}`", spark_sql)
        (r,) = engines("spark").sql(sql)
        columns, row = list(r.asDict()), list(r)
    assert sql != (duckdb_sql if engine == "duckdb" else spark_sql)  # the table was substituted
    assert columns == names
    assert [shown(v) for v in row] == values
