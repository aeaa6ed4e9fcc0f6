// Writes Delta tables with otelake's engine for the conformance tests and prints, as one JSON
// document on stdout, what an independent reader must find: version, live files, every row (int64
// and timestamps as decimal strings, special doubles as strings) and how many of them each version
// after an append holds (rows are only appended, so version v holds the first `rows` of them).
//
// Scenarios: plain appends, checkpoints, OPTIMIZE, VACUUM, in-day auto-compaction, a sealed day
// (all six tables written with the logger's own table options, then sealed), and a shipped day
// (the same, sealed, uploaded and verified by src/shipping to the S3 server of the environment's
// settings; its tables are reported by their s3:// URIs, `localCopy` naming what was uploaded).
//
//   S3_BUCKET=... CLOUD_ENDPOINT_URL=... (see README) node conformance/write_tables.ts <out-dir>

import { readFile, utimes, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { LAST_CHECKPOINT, LOG_DIR } from '../src/delta/actions.ts';
import { batchFromRows } from '../src/delta/batch.ts';
import { closeDeltaWorkers, type DeltaOptions, DeltaTable } from '../src/delta/table.ts';
import { closeReadWorkers } from '../src/read/query.ts';
import { type Row, SCHEMAS, TABLE_NAMES, type TableName } from '../src/schema/tables.ts';
import { sealDay, uploadDay, verifyDay } from '../src/shipping/phases.ts';
import { InstanceLayout } from '../src/storage/layout.ts';
import { ObjectStore } from '../src/storage/object-store.ts';
import { defaultOptions, deltaOptions } from '../src/storage/options.ts';
import { describeMissingS3, resolveS3 } from '../src/storage/s3-config.ts';
import { makeRows, rowToJson } from '../test/delta/rows.ts';

interface TableReport {
  /** The table: a local folder, or the s3:// URI of a shipped one. */
  dir: string;
  /** A shipped table's local folder, which was uploaded (its log and files, byte for byte). */
  localCopy?: string;
  table: TableName;
  version: number;
  files: string[];
  rowCount: number;
  checkpointVersion: number | null;
  rows: Record<string, unknown>[];
  /** After each step: the table's version and how many rows (of `rows`, in order) it holds. */
  steps: { version: number; rows: number }[];
}

/** Rows to append, or maintenance; `seal` is what the end of a day does before shipping. */
type Step = number | 'checkpoint' | 'optimize' | 'vacuum' | 'orphan' | 'seal';

/** Writes `table` into `parent/<table>` by `steps`. */
async function build(
  parent: string,
  table: TableName,
  steps: Step[],
  opts: DeltaOptions = {},
  seed = 1,
): Promise<TableReport> {
  const schema = SCHEMAS[table];
  const dir = join(parent, table);
  const t = await DeltaTable.createOrOpen(dir, schema, opts);
  const rows: Row[] = [];
  let checkpointVersion: number | null = null;
  let batchNo = 0;
  const versions = [{ version: t.version, rows: 0 }];
  for (const step of steps) {
    if (typeof step === 'number') {
      const batch = makeRows(schema, step, seed * 1000 + batchNo++, rows.length, {
        specialDoubles: true,
        extremeTimestamps: true,
      });
      rows.push(...batch);
      const { version } = await t.append(batchFromRows(schema, batch));
      versions.push({ version, rows: rows.length });
      continue;
    }
    if (step === 'checkpoint') {
      await t.checkpoint();
      checkpointVersion = t.version;
    } else if (step === 'optimize') {
      await t.optimize();
    } else if (step === 'vacuum') {
      await t.vacuum({ retentionMs: 0 });
    } else if (step === 'orphan') {
      // A file a killed writer could leave behind: unreferenced, old. VACUUM must delete it.
      const orphan = join(dir, 'part-00000000-0000-0000-0000-000000000000.zstd.parquet');
      await writeFile(orphan, 'not parquet');
      await utimes(orphan, new Date(0), new Date(0));
    } else if (step === 'seal') {
      // Sealing a day: files compacted, a checkpoint written, every other file deleted.
      await t.optimize();
      await t.checkpoint();
      checkpointVersion = t.version;
      await t.vacuum({ retentionMs: 0 });
    }
    versions.push({ version: t.version, rows: rows.length });
  }
  await t.close();
  return {
    dir,
    table,
    version: t.version,
    files: t.files.map((f) => f.path),
    rowCount: t.rowCount(),
    checkpointVersion,
    rows: rows.map((r) => rowToJson(schema, r)),
    steps: versions,
  };
}

/** The appends of the i-th table of a day (the sealed and shipped scenarios). */
function daySteps(i: number): number[] {
  return Array.from({ length: 104 }, (_, j) => 1 + ((i + j) % 5));
}

/** The logger's own table options (checkpoints every 100 commits, in-day compaction). */
const DAY_OPTIONS: DeltaOptions = { ...deltaOptions(defaultOptions().storage_config), fsync: false };

/**
 * A day shipped as the shipper ships it: the six tables written into an instance like the sealed
 * day's, then sealed, uploaded and verified by src/shipping (not cleaned: the local copy is what
 * the log's expectations are read from). Reports the remote tables.
 */
async function shipped(out: string): Promise<TableReport[]> {
  const { settings, missing, invalid } = resolveS3();
  if (!settings)
    throw new Error(`the shipped scenario needs S3 settings: ${invalid ?? describeMissingS3(missing)}`);
  const layout = new InstanceLayout(join(out, 'shipped'), 'conformance');
  const day = '2026-11-20';
  const written = await Promise.all(
    TABLE_NAMES.map((table, i) =>
      build(dirname(layout.tableDir(day, table)), table, daySteps(i), DAY_OPTIONS, 30 + i),
    ),
  );
  const sealed = await sealDay(layout, day, DAY_OPTIONS);
  const store = new ObjectStore(settings);
  try {
    await uploadDay(store, layout, day);
    await verifyDay(store, layout, day, sealed);
  } finally {
    store.destroy();
  }
  return Promise.all(
    written.map(async (report) => {
      const t = await DeltaTable.open(report.dir);
      await t.close();
      const hint = JSON.parse(await readFile(join(report.dir, LOG_DIR, LAST_CHECKPOINT), 'utf8'));
      return {
        ...report,
        dir: settings.uri(`${settings.dayKey(layout.instanceId, day)}${report.table}`),
        localCopy: report.dir,
        version: t.version,
        files: t.files.map((f) => f.path),
        checkpointVersion: hint.version as number,
        steps: [...report.steps, { version: t.version, rows: report.rows.length }],
      };
    }),
  );
}

const out = process.argv[2];
if (!out) {
  console.error('usage: node conformance/write_tables.ts <out-dir> (with S3 settings in the environment)');
  process.exit(2);
}

const reports: Record<string, TableReport[]> = {
  appends: [
    await build(join(out, 'appends'), 'logs', [7, 1, 0, 25, 3]),
    await build(join(out, 'appends'), 'metrics_hist', [5, 11, 2], {}, 2),
    await build(join(out, 'appends'), 'spans', [9, 4], {}, 3),
    await build(join(out, 'appends'), 'span_links', [6, 1, 8], {}, 11),
  ],
  checkpoint: [
    await build(
      join(out, 'checkpoint'),
      'logs',
      [3, 4, 5, 6, 7, 8, 9, 'checkpoint'],
      { checkpointInterval: 3 },
      4,
    ),
    await build(
      join(out, 'checkpoint'),
      'metrics_hist',
      [3, 4, 5, 'checkpoint', 2],
      { checkpointInterval: 100 },
      5,
    ),
  ],
  optimize: [
    await build(join(out, 'optimize'), 'logs', [10, 20, 30, 'optimize', 5], {}, 6),
    await build(join(out, 'optimize'), 'metrics_points', [4, 4, 4, 4, 'optimize'], {}, 7),
  ],
  vacuum: [
    await build(join(out, 'vacuum'), 'logs', [10, 20, 'orphan', 'optimize', 'vacuum', 'checkpoint'], {}, 8),
    await build(join(out, 'vacuum'), 'metrics_hist', [6, 6, 6, 'optimize', 'checkpoint', 'vacuum'], {}, 9),
  ],
  autocompact: [
    await build(
      join(out, 'autocompact'),
      'span_events',
      Array.from({ length: 40 }, (_, i) => 1 + (i % 5)),
      { autoCompact: { minFiles: 4, smallFileRows: 100 }, checkpointInterval: 10 },
      10,
    ),
    // Row groups copied as they are (copyRowGroupsFrom 1): files of several small row groups.
    await build(
      join(out, 'autocompact'),
      'spans',
      Array.from({ length: 24 }, (_, i) => 3 + (i % 5)),
      { autoCompact: { minFiles: 4, smallFileRows: 100, copyRowGroupsFrom: 1 }, rowGroupSize: 3 },
      12,
    ),
    await build(
      join(out, 'autocompact'),
      'metrics_hist',
      Array.from({ length: 16 }, (_, i) => 2 + (i % 4)),
      { autoCompact: { minFiles: 4, smallFileRows: 100, copyRowGroupsFrom: 1 }, rowGroupSize: 2 },
      13,
    ),
  ],
  // A day of all six tables written with the logger's table options (checkpoints every 100
  // commits, in-day compaction once 64 small files gather), then sealed.
  sealed: await Promise.all(
    TABLE_NAMES.map((table, i) =>
      build(join(out, 'sealed'), table, [...daySteps(i), 'seal'], DAY_OPTIONS, 20 + i),
    ),
  ),
  // The same day shipped: every engine reads it from the S3 server.
  shipped: await shipped(out),
};
await closeDeltaWorkers();
await closeReadWorkers();
process.stdout.write(JSON.stringify(reports));
