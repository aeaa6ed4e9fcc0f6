// Writes Delta tables with otelake's engine for the conformance tests and prints, as one JSON
// document on stdout, what an independent reader must find: version, live files, and every row
// (int64 and timestamps as decimal strings, special doubles as strings).
//
//   node conformance/write_tables.ts <out-dir>

import { utimes, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { batchFromRows } from '../src/delta/batch.ts';
import { closeDeltaWorkers, type DeltaOptions, DeltaTable } from '../src/delta/table.ts';
import { type Row, SCHEMAS, type TableName } from '../src/schema/tables.ts';
import { makeRows, rowToJson } from '../test/delta/rows.ts';

interface TableReport {
  dir: string;
  table: TableName;
  version: number;
  files: string[];
  rowCount: number;
  checkpointVersion: number | null;
  rows: Record<string, unknown>[];
}

type Step = number | 'checkpoint' | 'optimize' | 'vacuum' | 'orphan';

async function build(
  out: string,
  scenario: string,
  table: TableName,
  steps: Step[],
  opts: DeltaOptions = {},
  seed = 1,
): Promise<TableReport> {
  const schema = SCHEMAS[table];
  const dir = join(out, scenario, table);
  const t = await DeltaTable.createOrOpen(dir, schema, opts);
  const rows: Row[] = [];
  let checkpointVersion: number | null = null;
  let batchNo = 0;
  for (const step of steps) {
    if (typeof step === 'number') {
      const batch = makeRows(schema, step, seed * 1000 + batchNo++, rows.length, {
        specialDoubles: true,
        extremeTimestamps: true,
      });
      rows.push(...batch);
      await t.append(batchFromRows(schema, batch));
    } else if (step === 'checkpoint') {
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
    }
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
  };
}

const out = process.argv[2];
if (!out) {
  console.error('usage: node conformance/write_tables.ts <out-dir>');
  process.exit(2);
}

const reports: Record<string, TableReport[]> = {
  appends: [
    await build(out, 'appends', 'logs', [7, 1, 0, 25, 3]),
    await build(out, 'appends', 'metrics_hist', [5, 11, 2], {}, 2),
    await build(out, 'appends', 'spans', [9, 4], {}, 3),
    await build(out, 'appends', 'span_links', [6, 1, 8], {}, 11),
  ],
  checkpoint: [
    await build(out, 'checkpoint', 'logs', [3, 4, 5, 6, 7, 8, 9, 'checkpoint'], { checkpointInterval: 3 }, 4),
    await build(
      out,
      'checkpoint',
      'metrics_hist',
      [3, 4, 5, 'checkpoint', 2],
      { checkpointInterval: 100 },
      5,
    ),
  ],
  optimize: [
    await build(out, 'optimize', 'logs', [10, 20, 30, 'optimize', 5], {}, 6),
    await build(out, 'optimize', 'metrics_points', [4, 4, 4, 4, 'optimize'], {}, 7),
  ],
  vacuum: [
    await build(out, 'vacuum', 'logs', [10, 20, 'orphan', 'optimize', 'vacuum', 'checkpoint'], {}, 8),
    await build(out, 'vacuum', 'metrics_hist', [6, 6, 6, 'optimize', 'checkpoint', 'vacuum'], {}, 9),
  ],
  autocompact: [
    await build(
      out,
      'autocompact',
      'span_events',
      Array.from({ length: 40 }, (_, i) => 1 + (i % 5)),
      { autoCompact: { minFiles: 4, smallFileRows: 100 }, checkpointInterval: 10 },
      10,
    ),
    // Row groups copied as they are (copyRowGroupsFrom 1): files of several small row groups.
    await build(
      out,
      'autocompact',
      'spans',
      Array.from({ length: 24 }, (_, i) => 3 + (i % 5)),
      { autoCompact: { minFiles: 4, smallFileRows: 100, copyRowGroupsFrom: 1 }, rowGroupSize: 3 },
      12,
    ),
    await build(
      out,
      'autocompact',
      'metrics_hist',
      Array.from({ length: 16 }, (_, i) => 2 + (i % 4)),
      { autoCompact: { minFiles: 4, smallFileRows: 100, copyRowGroupsFrom: 1 }, rowGroupSize: 2 },
      13,
    ),
  ],
};
await closeDeltaWorkers();
process.stdout.write(JSON.stringify(reports));
