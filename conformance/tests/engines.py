"""The engines users query otelake's tables with, each behind the same three calls: read a table
(at a version), answer a filter with the matching keys, and say its version. Each goes through
the engine's own Delta reader, as a user of it would:

- delta-rs (`deltalake`): its Arrow reader; filters through its DataFusion QueryBuilder (SQL).
- Polars: `scan_delta`, filters as Polars expressions.
- DuckDB: `delta_scan` of the delta extension, loaded from the `duckdb-extension-delta` package
  with automatic extension install and load off (nothing is downloaded); filters in SQL.
- Daft: `read_deltalake`, filters as Daft expressions.
- Spark + Delta Lake (`pyspark`, `delta-spark`): the jars come from Maven Central at the first
  start and are cached in conformance/.ivy; filters through the DataFrame API.

Tables are local folders or s3:// URIs on the suite's S3 server (a shipped day): each engine is
given the server's endpoint and keys in its own form (storage options for delta-rs and Polars, an
IOConfig for Daft, a secret and the httpfs extension for DuckDB, hadoop-aws's s3a settings for
Spark).
"""

import operator
import os
import shutil
import tempfile
from dataclasses import dataclass
from importlib.metadata import version as package_version
from pathlib import Path
from urllib.parse import urlparse

import pyarrow as pa
from expected import Filter, as_datetime

ROOT = Path(__file__).resolve().parents[2]
IVY_CACHE = ROOT / "conformance" / ".ivy"
OPS = {"=": operator.eq, "<": operator.lt, ">=": operator.ge}


def sql_string(s: str) -> str:
    return "'" + s.replace("'", "''") + "'"


def sql_literal(f: Filter, timestamp_literal) -> str:
    if f.kind == "string":
        return sql_string(f.value)
    if f.kind == "double":
        return f"CAST('{f.value!r}' AS DOUBLE)"
    if f.kind == "timestamp":
        return timestamp_literal(as_datetime(f.value).isoformat())
    return str(f.value)


@dataclass(frozen=True)
class S3:
    """An S3-compatible server and the keys the engines read it with (conftest.s3_server)."""

    endpoint: str  # http://127.0.0.1:<port>
    key: str
    secret: str
    bucket: str
    region: str = "us-east-1"

    def object_store_options(self) -> dict[str, str]:
        """Options of the Rust object_store crate (delta-rs, Polars)."""
        return {
            "AWS_ENDPOINT_URL": self.endpoint,
            "AWS_ACCESS_KEY_ID": self.key,
            "AWS_SECRET_ACCESS_KEY": self.secret,
            "AWS_REGION": self.region,
            "AWS_ALLOW_HTTP": "true",
        }

    def options_for(self, path: str) -> dict[str, str] | None:
        return self.object_store_options() if path.startswith("s3://") else None

    def otelake_env(self, prefix: str, secret: str | None = None) -> dict[str, str]:
        """The process environment with otelake's S3 settings for this server (and no others)."""
        env = {k: v for k, v in os.environ.items() if not k.startswith(("S3_", "CLOUD_"))}
        env.update({
            "S3_BUCKET": self.bucket,
            "S3_ACCESS_KEY_ID": self.key,
            "S3_SECRET_ACCESS_KEY": secret or self.secret,
            "S3_REGION": self.region,
            "S3_URL": self.endpoint,
            "S3_PREFIX": prefix,
        })  # fmt: skip
        return env


class Engine:
    name = ""
    #: Whether the engine skips files by the statistics of the Delta log (shown by
    #: test_engine_skips_files_by_delta_stats on a table whose stats were made to lie).
    skips_files_by_stats = True
    #: Whether the engine needs the JSON commit of the checkpoint it starts from (log cleanup
    #: keeps it; only the commits before it are deleted).
    needs_checkpoint_commit = False

    def version(self) -> str:
        raise NotImplementedError

    def read(self, path: str, version: int | None = None) -> pa.Table:
        raise NotImplementedError

    def keys(self, path: str, f: Filter) -> list[str]:
        """The sorted project_id of the rows `f` holds for."""
        raise NotImplementedError

    def close(self) -> None:
        pass


class DeltaRs(Engine):
    name = "delta-rs"

    def __init__(self, s3: S3):
        import deltalake

        self.deltalake = deltalake
        self.s3 = s3

    def version(self):
        return f"deltalake {self.deltalake.__version__}"

    def table(self, path, version=None):
        return self.deltalake.DeltaTable(path, version=version, storage_options=self.s3.options_for(path))

    def read(self, path, version=None):
        return self.table(path, version).to_pyarrow_table()

    def keys(self, path, f):
        literal = sql_literal(f, lambda iso: f"arrow_cast('{iso}', 'Timestamp(Microsecond, Some(\"UTC\"))')")
        sql = f'SELECT project_id FROM t WHERE "{f.column}" {f.op} {literal}'
        dt = self.table(path)
        result = self.deltalake.QueryBuilder().register("t", dt).execute(sql).read_all()
        return sorted(result.column("project_id").to_pylist())


class Polars(Engine):
    name = "polars"

    def __init__(self, s3: S3):
        import polars

        self.pl = polars
        self.s3 = s3

    def version(self):
        return f"polars {self.pl.__version__}"

    def scan(self, path, version=None):
        return self.pl.scan_delta(path, version=version, storage_options=self.s3.options_for(path))

    def read(self, path, version=None):
        return self.scan(path, version).collect().to_arrow()

    def keys(self, path, f):
        pl = self.pl
        dtype = {"string": pl.String, "long": pl.Int64, "integer": pl.Int32, "double": pl.Float64}
        value = (
            pl.lit(as_datetime(f.value), dtype=pl.Datetime("us", "UTC"))
            if f.kind == "timestamp"
            else pl.lit(f.value, dtype=dtype[f.kind])
        )
        frame = self.scan(path).filter(OPS[f.op](pl.col(f.column), value)).select("project_id").collect()
        return sorted(frame["project_id"].to_list())


class DuckDB(Engine):
    name = "duckdb"

    def __init__(self, s3: S3):
        import duckdb
        import duckdb_extension_delta
        import duckdb_extension_httpfs

        self.duckdb = duckdb
        self.con = duckdb.connect(
            config={"autoinstall_known_extensions": False, "autoload_known_extensions": False}
        )
        for package, name in ((duckdb_extension_httpfs, "httpfs"), (duckdb_extension_delta, "delta")):
            extension = (
                Path(package.__file__).parent / "extensions" / f"v{duckdb.__version__}" / f"{name}.duckdb_extension"
            )
            self.con.execute(f"LOAD {sql_string(str(extension))}")
        self.con.execute("SET TimeZone = 'UTC'")
        endpoint = urlparse(s3.endpoint)
        self.con.execute(
            "CREATE SECRET otelake_s3 (TYPE s3, "
            f"KEY_ID {sql_string(s3.key)}, SECRET {sql_string(s3.secret)}, REGION {sql_string(s3.region)}, "
            f"ENDPOINT {sql_string(endpoint.netloc)}, URL_STYLE 'path', "
            f"USE_SSL {'true' if endpoint.scheme == 'https' else 'false'})"
        )

    def version(self):
        (ext,) = self.con.execute(
            "SELECT extension_version FROM duckdb_extensions() WHERE extension_name = 'delta' AND loaded"
        ).fetchone()
        return f"duckdb {self.duckdb.__version__}, delta extension {ext}"

    def scan(self, path, version=None) -> str:
        at = "" if version is None else f", version => {int(version)}"
        return f"delta_scan({sql_string(path)}{at})"

    def read(self, path, version=None):
        return self.con.execute(f"SELECT * FROM {self.scan(path, version)}").to_arrow_table()

    def keys(self, path, f):
        literal = sql_literal(f, lambda iso: f"TIMESTAMPTZ '{iso}'")
        sql = f'SELECT project_id FROM {self.scan(path)} WHERE "{f.column}" {f.op} {literal}'
        return sorted(r[0] for r in self.con.execute(sql).fetchall())

    def close(self):
        self.con.close()


class Daft(Engine):
    name = "daft"
    # Daft 0.7.26 hands the log's stats to its scan tasks but still reads a file whose stats rule
    # the value out; its filters are checked for their answers (it prunes by the Parquet footers).
    skips_files_by_stats = False

    def __init__(self, s3: S3):
        import daft

        self.daft = daft
        self.io_config = daft.io.IOConfig(
            s3=daft.io.S3Config(
                endpoint_url=s3.endpoint,
                key_id=s3.key,
                access_key=s3.secret,
                region_name=s3.region,
                use_ssl=s3.endpoint.startswith("https://"),
            )
        )

    def version(self):
        return f"daft {self.daft.__version__}"

    def frame(self, path, version=None):
        return self.daft.read_deltalake(path, version=version, io_config=self.io_config)

    def read(self, path, version=None):
        return self.frame(path, version).to_arrow()

    def keys(self, path, f):
        daft = self.daft
        types = {
            "string": daft.DataType.string(),
            "long": daft.DataType.int64(),
            "integer": daft.DataType.int32(),
            "double": daft.DataType.float64(),
        }
        value = (
            daft.lit(as_datetime(f.value)) if f.kind == "timestamp" else daft.lit(f.value).cast(types[f.kind])
        )
        df = self.frame(path).where(OPS[f.op](daft.col(f.column), value)).select("project_id")
        return sorted(df.to_pydict()["project_id"])


class Spark(Engine):
    name = "spark"
    # Delta Spark 4.4.0 fails without it: "Could not find any delta files for version N".
    needs_checkpoint_commit = True

    def __init__(self, s3: S3):
        from pyspark.sql import SparkSession

        from delta import configure_spark_with_delta_pip

        self.scratch = tempfile.mkdtemp(prefix="otelake-spark-")
        builder = (
            SparkSession.builder.master("local[2]")
            .appName("otelake-conformance")
            .config("spark.jars.ivy", str(IVY_CACHE))
            .config("spark.sql.extensions", "io.delta.sql.DeltaSparkSessionExtension")
            .config("spark.sql.catalog.spark_catalog", "org.apache.spark.sql.delta.catalog.DeltaCatalog")
            .config("spark.sql.session.timeZone", "UTC")
            .config("spark.sql.warehouse.dir", os.path.join(self.scratch, "warehouse"))
            .config("spark.local.dir", self.scratch)
            .config("spark.ui.enabled", "false")
            .config("spark.driver.memory", "1g")
            # Small tables on 2 cores: Delta's log replay defaults to 50 partitions, 2.6 s a read.
            .config("spark.sql.shuffle.partitions", "2")
            .config("spark.databricks.delta.snapshotPartitions", "1")
        )
        if hadoop_version() != HADOOP:
            raise AssertionError(f"pyspark bundles Hadoop {hadoop_version()}: set HADOOP and AWS_SDK to match")
        builder = builder.config("spark.jars.excludes", "software.amazon.awssdk:bundle")
        for k, v in s3a_settings(s3).items():
            builder = builder.config(f"spark.hadoop.{k}", v)
        self.spark = configure_spark_with_delta_pip(builder, extra_packages=S3A_PACKAGES).getOrCreate()
        self.spark.sparkContext.setLogLevel("ERROR")

    def version(self):
        return f"spark {self.spark.version}, delta-spark {package_version('delta-spark')}"

    def frame(self, path, **options):
        reader = self.spark.read.format("delta")
        for k, v in options.items():
            reader = reader.option(k, v)
        return reader.load(path)

    def read(self, path, version=None):
        options = {} if version is None else {"versionAsOf": version}
        return self.frame(path, **options).toArrow()

    def read_at(self, path, timestamp_ms: int) -> pa.Table:
        """The table as of a time (an ISO timestamp in UTC, to the millisecond)."""
        iso = as_datetime(timestamp_ms * 1000).isoformat()
        return self.frame(path, timestampAsOf=iso).toArrow()

    def history(self, path) -> list[tuple[int, int]]:
        """(version, time in ms) of every commit, oldest first, as Spark sees them."""
        from delta.tables import DeltaTable

        history = DeltaTable.forPath(self.spark, path).history()
        return sorted(
            (r.version, r.ms) for r in history.selectExpr("version", "unix_millis(timestamp) AS ms").collect()
        )

    def sql(self, query: str):
        return self.spark.sql(query).collect()

    def keys(self, path, f):
        from pyspark.sql import functions as F

        # A timestamp goes as text: PySpark's own conversion of a datetime shifts days before
        # 1582 (0001-01-01 arrives as 0001-01-03).
        value = (
            F.lit(as_datetime(f.value).isoformat()).cast("timestamp")
            if f.kind == "timestamp"
            else F.lit(f.value)
        )
        df = self.frame(path).where(OPS[f.op](F.col(f.column), value)).select("project_id")
        return sorted(r.project_id for r in df.collect())

    def close(self):
        self.spark.stop()
        shutil.rmtree(self.scratch, ignore_errors=True)


def hadoop_version() -> str:
    """The Hadoop version pyspark bundles (hadoop-aws must match it)."""
    import pyspark

    jars = Path(pyspark.__file__).parent / "jars"
    (api,) = jars.glob("hadoop-client-api-*.jar")
    return api.name.removeprefix("hadoop-client-api-").removesuffix(".jar")


# S3A for Spark, from Maven Central into conformance/.ivy: hadoop-aws of the Hadoop pyspark bundles,
# and the modules S3A uses of the AWS SDK v2 version that Hadoop is built with (hadoop-project's
# aws-java-sdk-v2.version). hadoop-aws depends on the SDK's bundle jar instead, 686 MB: excluded.
HADOOP = "3.5.0"
AWS_SDK = "2.35.4"
S3A_PACKAGES = [
    f"org.apache.hadoop:hadoop-aws:{HADOOP}",
    f"software.amazon.awssdk:s3:{AWS_SDK}",
    f"software.amazon.awssdk:s3-transfer-manager:{AWS_SDK}",
]


def s3a_settings(s3: S3) -> dict[str, str]:
    """Hadoop settings that read s3:// (and s3a://) paths from the server through S3A."""
    return {
        "fs.s3.impl": "org.apache.hadoop.fs.s3a.S3AFileSystem",
        "fs.s3a.endpoint": s3.endpoint,
        "fs.s3a.endpoint.region": s3.region,
        "fs.s3a.access.key": s3.key,
        "fs.s3a.secret.key": s3.secret,
        "fs.s3a.path.style.access": "true",
        "fs.s3a.connection.ssl.enabled": "true" if s3.endpoint.startswith("https://") else "false",
        "fs.s3a.aws.credentials.provider": "org.apache.hadoop.fs.s3a.SimpleAWSCredentialsProvider",
    }


ENGINES = {e.name: e for e in (DeltaRs, Polars, DuckDB, Daft, Spark)}
