// Files a query does not need are never opened: proven by overwriting them with garbage, which
// makes any query that does open them fail.

import assert from 'node:assert/strict';
import { mkdtemp, open, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { batchFromRows } from '../../src/delta/batch.ts';
import { closeDeltaWorkers, DeltaTable } from '../../src/delta/table.ts';
import { closeReadWorkers, readHooks, readTable } from '../../src/read/query.ts';
import { type Row, SCHEMAS } from '../../src/schema/tables.ts';
import { InstanceLayout } from '../../src/storage/layout.ts';
import { chunkRange, chunksOf, footerOf, rowGroupsOf } from '../delta/footer.ts';
import { appendRows, fullRow } from './fixtures.ts';

const DAYS = ['2026-06-01', '2026-06-02'];
let dir: string;
let layout: InstanceLayout;

/** File `f` of day `d`: 20 rows, times increasing with (d, f), severity 9 except in file 2 of day 1. */
function fileRows(d: number, f: number): Row[] {
  const start = BigInt(Date.parse(`${DAYS[d]}T00:00:00Z`)) * 1000n + BigInt(f) * 1_000_000_000n;
  return Array.from({ length: 20 }, (_, i) =>
    fullRow('logs', {
      project_id: 'p',
      event_ts: start + BigInt(i),
      time_unix_nano: BigInt(d * 1000 + f * 100 + i),
      severity_number: d === 1 && f === 2 ? 17 : 9,
      body: `file ${d}.${f} row ${i}`,
    }),
  );
}

async function livePaths(day: string): Promise<string[]> {
  const t = await DeltaTable.open(layout.tableDir(day, 'logs'));
  return t.liveFilePaths();
}

before(async () => {
  dir = await mkdtemp(join(tmpdir(), 'otelake-read-prune-'));
  layout = new InstanceLayout(dir, 'x');
  for (let d = 0; d < 2; d++)
    for (let f = 0; f < 3; f++) await appendRows(layout, DAYS[d]!, 'logs', fileRows(d, f));
  await closeDeltaWorkers();
  // Every file but the newest of the newest day becomes unreadable.
  const newestDay = await livePaths(DAYS[1]!);
  const newest = await DeltaTable.open(layout.tableDir(DAYS[1]!, 'logs'));
  const newestFile = newest.files.reduce((a, b) =>
    (a.stats!.maxValues['event_ts'] as bigint) > (b.stats!.maxValues['event_ts'] as bigint) ? a : b,
  );
  for (const p of [...(await livePaths(DAYS[0]!)), ...newestDay]) {
    if (!p.endsWith(newestFile.path)) await writeFile(p, 'not parquet');
  }
});

after(async () => {
  readHooks.firstRoundRows = undefined;
  await closeReadWorkers();
  await rm(dir, { recursive: true, force: true });
});

describe('file pruning', () => {
  test('newest rows without filters read only the newest file', async () => {
    const rows = await readTable(layout, 'logs', { maxRows: 20, select: ['time_unix_nano'] });
    assert.deepEqual(
      rows.map((r) => r.time_unix_nano),
      Array.from({ length: 20 }, (_, i) => BigInt(1000 + 200 + 19 - i)),
    );
  });

  test('newest rows with filters: rounds stop once older files cannot contribute', async () => {
    readHooks.firstRoundRows = 10; // files of 20 rows: one file per first round
    const rows = await readTable(layout, 'logs', { maxRows: 5, bodyLike: 'row 1', projectId: 'p' });
    assert.deepEqual(
      rows.map((r) => r.body),
      ['file 1.2 row 19', 'file 1.2 row 18', 'file 1.2 row 17', 'file 1.2 row 16', 'file 1.2 row 15'],
    );
    readHooks.firstRoundRows = undefined;
  });

  test('the same query lazily prunes the same way without filters', async () => {
    const lazy = await readTable(layout, 'logs', { maxRows: 3, select: ['body'] }, { returnAs: 'lazy' });
    assert.deepEqual(lazy.collectSync().getColumn('body').toArray(), [
      'file 1.2 row 19',
      'file 1.2 row 18',
      'file 1.2 row 17',
    ]);
  });

  test('statistics rule out files: severity above every other file, a project no file holds', async () => {
    const rows = await readTable(layout, 'logs', { severityGe: 13 });
    assert.equal(rows.length, 20);
    assert.ok(rows.every((r) => r.severity_number === 17));
    assert.deepEqual(await readTable(layout, 'logs', { projectId: 'q' }), []);
    assert.deepEqual(await readTable(layout, 'logs', { projectId: 'a' }), []);
  });

  test('a query that needs the other files does read them (and fails on the garbage)', async () => {
    await assert.rejects(readTable(layout, 'logs', { maxRows: 21 }));
    await assert.rejects(readTable(layout, 'logs', { bodyLike: 'row 1' }));
  });
});

describe('row group pruning', () => {
  // One file of three row groups of 10 rows; its rows are not in time order (as when requests
  // arrive late): the newest 20 are in the first and the last row group. The middle row group's
  // bodies are garbage, so a read that decodes them fails.
  const DAY = '2026-06-03';
  const age = (i: number) => (i < 10 ? 0 : i < 20 ? 2 : 1); // row group 1 holds the oldest rows
  let rowsDir: string;
  let rowsLayout: InstanceLayout;

  before(async () => {
    rowsDir = await mkdtemp(join(tmpdir(), 'otelake-read-row-groups-'));
    rowsLayout = new InstanceLayout(rowsDir, 'x');
    const start = BigInt(Date.parse(`${DAY}T12:00:00Z`)) * 1000n;
    const rows = Array.from({ length: 30 }, (_, i) =>
      fullRow('logs', {
        project_id: 'p',
        event_ts: start - BigInt(age(i)) * 1_000_000n + BigInt(i),
        time_unix_nano: BigInt(i),
        severity_number: 9,
        body: `row ${i}`,
      }),
    );
    const t = await DeltaTable.createOrOpen(rowsLayout.tableDir(DAY, 'logs'), SCHEMAS.logs, {
      rowGroupSize: 10,
      fsync: false,
    });
    await t.append(batchFromRows(SCHEMAS.logs, rows));
    const [path] = t.liveFilePaths();
    await t.close();
    await closeDeltaWorkers();
    const groups = rowGroupsOf(footerOf(path!).meta);
    assert.equal(groups.length, 3);
    const bodyColumn = SCHEMAS.logs.columns.findIndex((c) => c.name === 'body');
    const [first, length] = chunkRange(chunksOf(groups[1]!)[bodyColumn]!);
    const fh = await open(path!, 'r+');
    try {
      await fh.write(Buffer.alloc(length, 0xff), 0, length, first);
    } finally {
      await fh.close();
    }
  });

  after(async () => {
    await rm(rowsDir, { recursive: true, force: true });
  });

  test('the newest rows are read from the row groups that hold them, not those between', async () => {
    const rows = await readTable(rowsLayout, 'logs', { maxRows: 20, select: ['body'] });
    const expected = Array.from({ length: 30 }, (_, i) => i)
      .filter((i) => age(i) < 2)
      .sort((a, b) => age(a) - age(b) || b - a)
      .map((i) => `row ${i}`);
    assert.deepEqual(
      rows.map((r) => r.body),
      expected,
    );
    // The garbage is there: reading the middle row group's bodies fails.
    await assert.rejects(readTable(rowsLayout, 'logs', { maxRows: 21, select: ['body'] }));
  });
});
