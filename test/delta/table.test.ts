import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  statSync,
  utimesSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { checkpointFileName, commitFileName, LOG_DIR } from '../../src/delta/actions.ts';
import { batchFromRows, type ColumnBatch, isIntact, packBatch } from '../../src/delta/batch.ts';
import { deltaSchemaString } from '../../src/delta/schema-string.ts';
import { computeStats } from '../../src/delta/stats.ts';
import {
  closeDeltaWorkers,
  type DeltaOptions,
  DeltaTable,
  decodeCheckpointsOffThread,
} from '../../src/delta/table.ts';
import { type Row, SCHEMAS, type TableSchema } from '../../src/schema/tables.ts';
import { readRows, sortRows } from './read.ts';
import { makeRows, rowToJson } from './rows.ts';
import { batchRows, CHILD_SCHEMA } from './writer-child.ts';

const run = promisify(execFile);
const CHILD = fileURLToPath(new URL('./writer-child.ts', import.meta.url));
const LOGS = SCHEMAS.logs;
const dirs: string[] = [];

function tempDir(): string {
  const d = mkdtempSync(join(tmpdir(), 'otelake-delta-'));
  dirs.push(d);
  return join(d, 'table');
}

after(async () => {
  await closeDeltaWorkers();
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

function commitLines(dir: string, version: number): Record<string, Record<string, unknown>>[] {
  return readFileSync(join(dir, LOG_DIR, commitFileName(version)), 'utf8')
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l) as Record<string, Record<string, unknown>>);
}

async function appendRows(t: DeltaTable, schema: TableSchema, rows: Row[]) {
  return t.append(batchFromRows(schema, rows));
}

/** Everything a reader derives from the log (used to compare replay paths). */
function snapshotOf(t: DeltaTable) {
  return { version: t.version, files: t.files, rows: t.rowCount(), metadata: t.metadata };
}

test('create, append, open: exact rows, one file and one commit per batch', async () => {
  const dir = tempDir();
  const t = await DeltaTable.createOrOpen(dir, LOGS);
  assert.equal(t.version, 0);
  const first = commitLines(dir, 0);
  assert.ok(first[0]!.commitInfo);
  assert.deepEqual(first[1], { protocol: { minReaderVersion: 1, minWriterVersion: 2 } });
  const meta = first[2]!.metaData!;
  assert.equal(meta.schemaString, deltaSchemaString(LOGS));
  assert.deepEqual(meta.format, { provider: 'parquet', options: {} });
  assert.deepEqual(meta.partitionColumns, []);

  const batches = [makeRows(LOGS, 10, 1, 0), makeRows(LOGS, 3, 2, 100), makeRows(LOGS, 17, 3, 200)];
  for (const [i, rows] of batches.entries()) {
    const r = await appendRows(t, LOGS, rows);
    assert.equal(r.version, i + 1);
    assert.equal(r.rows, rows.length);
    assert.match(r.path, /\/part-[0-9a-f-]{36}\.zstd\.parquet$/);
    const lines = commitLines(dir, r.version);
    assert.equal(lines.length, 2);
    assert.equal(lines[0]!.commitInfo!.operation, 'WRITE');
    const add = lines[1]!.add!;
    assert.equal(add.size, statSync(r.path).size);
    assert.equal(add.dataChange, true);
    assert.deepEqual(add.partitionValues, {});
    const stats = JSON.parse(add.stats as string) as { numRecords: number };
    assert.equal(stats.numRecords, rows.length);
  }
  assert.equal(t.files.length, 3);
  assert.equal(t.rowCount(), 30);

  const reader = await DeltaTable.open(dir);
  assert.deepEqual(snapshotOf(reader), snapshotOf(t));
  const expected = sortRows(batches.flat().map((r) => rowToJson(LOGS, r)));
  assert.deepEqual(readRows(reader.liveFilePaths(), reader.schema), expected);
  // The in-memory stats equal the stats of the file contents.
  assert.deepEqual(reader.files[1]!.stats, computeStats(LOGS, batchFromRows(LOGS, batches[1]!)));
  await t.close();
});

test('an empty batch commits nothing; a null in a non-nullable column is refused', async () => {
  const dir = tempDir();
  const t = await DeltaTable.createOrOpen(dir, LOGS);
  assert.deepEqual(await appendRows(t, LOGS, []), { version: 0, path: '', rows: 0 });
  const rows = makeRows(LOGS, 2, 1);
  rows[1]!.event_ts = null;
  await assert.rejects(t.append(batchFromRows(LOGS, rows)), /non-nullable column event_ts is null in row 1/);
  const noProject = makeRows(LOGS, 3, 1);
  noProject[2]!.project_id = null;
  await assert.rejects(
    t.append(packBatch(batchFromRows(LOGS, noProject))),
    /non-nullable column project_id is null in row 2/,
    'a string column, packed',
  );
  // Repeat marks (see ColumnData) that point at nothing or hide bytes are refused too.
  const twice = makeRows(LOGS, 2, 1);
  twice[1]!.body = twice[0]!.body = 'same';
  for (const [row, mark] of [
    [0, 'first row'],
    [1, 'with bytes'],
  ] as const) {
    const batch = batchFromRows(LOGS, twice);
    const body = batch.columns['body']!;
    assert.ok(body.kind === 'utf8' && body.repeats);
    if (body.kind !== 'utf8') continue;
    if (row === 0) body.repeats![0] = 1;
    else body.offsets[2]! += 1;
    await assert.rejects(t.append(batch), /column body: row \d is marked as a repeat/, mark);
  }
  // Packed parts (the server's, one a request) are checked once joined, by the Parquet worker: the
  // row counts from the first part's first row.
  const parts = [makeRows(LOGS, 2, 1), makeRows(LOGS, 3, 2)];
  parts[1]![1]!.event_ts = null;
  await assert.rejects(
    t.append(parts.map((p) => packBatch(batchFromRows(LOGS, p)))),
    /non-nullable column event_ts is null in row 3/,
    'packed parts',
  );
  const rows2 = batchFromRows(LOGS, makeRows(LOGS, 2, 1));
  const misfit = { ...rows2, columns: { ...rows2.columns, body: rows2.columns['event_ts']! } };
  await assert.rejects(
    t.append([packBatch(misfit), packBatch(misfit)]),
    /column body: expected string, got timestamp/,
  );
  assert.equal(t.version, 0);
  assert.equal(readdirSync(dir).filter((f) => f.endsWith('.parquet')).length, 0);
  await t.close();
  await assert.rejects(t.append(batchFromRows(LOGS, makeRows(LOGS, 1, 1))), /closed/);
});

test('createOrOpen refuses an existing table with another schema', async () => {
  const dir = tempDir();
  await (await DeltaTable.createOrOpen(dir, LOGS)).close();
  await assert.rejects(DeltaTable.createOrOpen(dir, SCHEMAS.spans), /different schema/);
  const again = await DeltaTable.createOrOpen(dir, LOGS);
  assert.equal(again.version, 0);
});

test('open of a folder without a log fails clearly', async () => {
  await assert.rejects(DeltaTable.open(tempDir()), /not a Delta table/);
});

test('concurrent appends commit in call order; close waits for them', async () => {
  const dir = tempDir();
  const t = await DeltaTable.createOrOpen(dir, LOGS);
  const pending = Array.from({ length: 8 }, (_, i) => appendRows(t, LOGS, makeRows(LOGS, 2, i, i * 10)));
  await t.close();
  assert.equal(t.version, 8);
  const results = await Promise.all(pending);
  assert.deepEqual(
    results.map((r) => r.version),
    [1, 2, 3, 4, 5, 6, 7, 8],
  );
  // File i of the log is batch i.
  assert.deepEqual(
    t.liveFilePaths(),
    results.map((r) => r.path),
  );
});

test('a stale writer hits EEXIST, re-reads the log and commits at the next version', async () => {
  const dir = tempDir();
  const a = await DeltaTable.createOrOpen(dir, LOGS);
  const b = await DeltaTable.open(dir); // stale from here on
  const rowsA = makeRows(LOGS, 4, 1, 0);
  const rowsB = makeRows(LOGS, 5, 2, 100);
  assert.equal((await appendRows(a, LOGS, rowsA)).version, 1);
  assert.equal((await appendRows(a, LOGS, rowsA.slice(0, 1))).version, 2);
  assert.equal(b.version, 0);
  const rb = await appendRows(b, LOGS, rowsB);
  assert.equal(rb.version, 3);
  assert.equal(b.files.length, 3); // b caught up with a's two commits
  await a.refresh();
  assert.equal(a.version, 3);
  assert.deepEqual(a.files, b.files);
  // No temporary commit file is left behind.
  assert.deepEqual(
    readdirSync(join(dir, LOG_DIR)).filter((f) => f.endsWith('.tmp')),
    [],
  );
  await a.close();
  await b.close();
});

test('two processes appending at once: every commit lands exactly once', async () => {
  const dir = tempDir();
  const t = await DeltaTable.createOrOpen(dir, CHILD_SCHEMA);
  const child = run(process.execPath, [CHILD, dir, '15', '1000'], { timeout: 120_000 });
  const mine: number[] = [];
  for (let b = 0; b < 15; b++) mine.push((await t.append(batchFromRows(CHILD_SCHEMA, batchRows(b)))).version);
  const { stdout } = await child;
  const theirs = stdout
    .split('\n')
    .filter((l) => l.startsWith('committed'))
    .map((l) => Number(l.split(' ')[2]));
  assert.equal(theirs.length, 15);
  const all = [...mine, ...theirs].sort((x, y) => x - y);
  assert.deepEqual(
    all,
    Array.from({ length: 30 }, (_, i) => i + 1),
  );
  await t.refresh();
  const expected = sortRows(
    [...Array.from({ length: 15 }, (_, b) => b), ...Array.from({ length: 15 }, (_, b) => 1000 + b)].flatMap(
      (b) => batchRows(b).map((r) => rowToJson(CHILD_SCHEMA, r)),
    ),
  );
  assert.deepEqual(readRows(t.liveFilePaths(), CHILD_SCHEMA), expected);
  await t.close();
});

test('checkpoints: every N commits, and replay from any of them equals the full replay', async () => {
  const dir = tempDir();
  const opts: DeltaOptions = { checkpointInterval: 5 };
  const t = await DeltaTable.createOrOpen(dir, SCHEMAS.metrics_hist, opts);
  for (let i = 0; i < 12; i++)
    await appendRows(t, SCHEMAS.metrics_hist, makeRows(SCHEMAS.metrics_hist, 3, i, i * 10));
  const optimized = await t.optimize({ targetFileRows: 9 }); // removes in the log -> tombstones
  assert.ok(optimized);
  await t.close(); // waits for the background checkpoints
  const logDir = join(dir, LOG_DIR);
  assert.ok(existsSync(join(logDir, checkpointFileName(5))));
  assert.ok(existsSync(join(logDir, checkpointFileName(10))));
  assert.equal(JSON.parse(readFileSync(join(logDir, '_last_checkpoint'), 'utf8')).version, 10);
  await t.checkpoint(); // on demand, of the current version (13)
  const last = JSON.parse(readFileSync(join(logDir, '_last_checkpoint'), 'utf8'));
  assert.equal(last.version, 13);
  assert.equal(last.numOfAddFiles, t.files.length);
  const want = snapshotOf(t);

  const fromCheckpoint = await DeltaTable.open(dir);
  assert.deepEqual(snapshotOf(fromCheckpoint), want);
  // Decoded in the Parquet worker, as a process that ingests does: the same snapshot; a
  // checkpoint that cannot be decoded there is skipped for the commits, as in this thread.
  decodeCheckpointsOffThread(true);
  try {
    assert.deepEqual(snapshotOf(await DeltaTable.open(dir)), want);
    const good = readFileSync(join(logDir, checkpointFileName(13)));
    writeFileSync(join(logDir, checkpointFileName(13)), Buffer.from('not parquet'));
    const skipping = await DeltaTable.open(dir);
    assert.deepEqual(snapshotOf(skipping), want);
    assert.deepEqual(
      skipping.unreadableCheckpoints.map((u) => u.version),
      [13],
    );
    writeFileSync(join(logDir, checkpointFileName(13)), good);
  } finally {
    decodeCheckpointsOffThread(false);
  }

  // Stale _last_checkpoint (a crash between the checkpoint and its pointer): still the newest.
  writeFileSync(join(logDir, '_last_checkpoint'), JSON.stringify({ version: 5, size: 1 }));
  assert.deepEqual(snapshotOf(await DeltaTable.open(dir)), want);
  // Garbage or a pointer to a missing checkpoint: ignored.
  writeFileSync(join(logDir, '_last_checkpoint'), '{"version":');
  assert.deepEqual(snapshotOf(await DeltaTable.open(dir)), want);
  writeFileSync(join(logDir, '_last_checkpoint'), JSON.stringify({ version: 99, size: 1 }));
  assert.deepEqual(snapshotOf(await DeltaTable.open(dir)), want);

  // Without any checkpoint: the full JSON replay gives the same snapshot.
  const saved = new Map<string, Buffer>();
  for (const f of readdirSync(logDir).filter((n) => n.includes('checkpoint'))) {
    saved.set(f, readFileSync(join(logDir, f)));
    rmSync(join(logDir, f));
  }
  assert.deepEqual(snapshotOf(await DeltaTable.open(dir)), want);

  // Only the newest checkpoint and no JSON commit at or before it: the checkpoint alone suffices.
  for (const [f, data] of saved) writeFileSync(join(logDir, f), data);
  for (let v = 0; v <= 13; v++) rmSync(join(logDir, commitFileName(v)));
  assert.deepEqual(snapshotOf(await DeltaTable.open(dir)), want);
});

test('tombstones expire after the retention the engine gives its tables: out of checkpoints and memory, their files deleted', async (t) => {
  const dir = tempDir();
  // From the real time: VACUUM compares the files' real modification times with the mocked clock.
  const start = Date.now();
  t.mock.timers.enable({ apis: ['Date'], now: start });
  const table = await DeltaTable.createOrOpen(dir, LOGS, { checkpointInterval: 1000 });
  assert.equal(table.metadata.configuration['delta.deletedFileRetentionDuration'], 'interval 60 minutes');
  for (let i = 0; i < 6; i++) await appendRows(table, LOGS, makeRows(LOGS, 2, i, i * 10));
  assert.ok(await table.optimize({ targetFileRows: 100 })); // six removes
  const removesInCheckpoint = async () => {
    await table.checkpoint();
    const last = JSON.parse(readFileSync(join(dir, LOG_DIR, '_last_checkpoint'), 'utf8'));
    // The checkpoint's actions: protocol, metaData, the live adds, the tombstones.
    return last.size - 2 - last.numOfAddFiles;
  };
  const tombstones = () =>
    (table as unknown as { state: { removes: Map<string, unknown> } }).state.removes.size;
  const dataFiles = () => readdirSync(dir).filter((n) => n.endsWith('.parquet')).length;
  assert.equal(await removesInCheckpoint(), 6);
  assert.equal(dataFiles(), 7, 'six removed, one live');
  t.mock.timers.setTime(start + 59 * 60_000);
  await appendRows(table, LOGS, makeRows(LOGS, 1, 7, 70));
  assert.equal(await removesInCheckpoint(), 6, 'younger than an hour: kept');
  assert.equal(tombstones(), 6);
  assert.equal(dataFiles(), 8, 'and their files');
  t.mock.timers.setTime(start + 61 * 60_000);
  await appendRows(table, LOGS, makeRows(LOGS, 1, 8, 80));
  assert.equal(await removesInCheckpoint(), 0, 'older than an hour: left out');
  assert.equal(tombstones(), 0, 'and forgotten');
  // Without a seal (an instance that does not ship) nothing else would delete them.
  assert.equal(dataFiles(), 3, 'their files deleted: the three live ones stay');
  const want = snapshotOf(table);
  assert.deepEqual(snapshotOf(await DeltaTable.open(dir)), want);
  assert.equal(table.files.length, 3);
  assert.equal((await table.vacuum({ retentionMs: 0 })).deleted, 0);
  await table.close();
});

test('tombstones that a failed checkpoint let expire stay in memory, and the next checkpoint deletes their files', async (t) => {
  const dir = tempDir();
  const start = Date.now();
  t.mock.timers.enable({ apis: ['Date'], now: start });
  const table = await DeltaTable.createOrOpen(dir, LOGS, { checkpointInterval: 1000 });
  for (let i = 0; i < 4; i++) await appendRows(table, LOGS, makeRows(LOGS, 2, i, i * 10));
  assert.ok(await table.optimize({ targetFileRows: 100 })); // four removes
  t.mock.timers.setTime(start + 61 * 60_000);
  await appendRows(table, LOGS, makeRows(LOGS, 1, 5, 50));
  const tombstones = () =>
    (table as unknown as { state: { removes: Map<string, unknown> } }).state.removes.size;
  const dataFiles = () => readdirSync(dir).filter((n) => n.endsWith('.parquet')).length;
  assert.equal(dataFiles(), 6, 'four removed, two live');
  // A directory where the checkpoint goes: its write fails.
  const blocker = join(dir, LOG_DIR, checkpointFileName(table.version));
  mkdirSync(blocker);
  await assert.rejects(table.checkpoint());
  assert.equal(tombstones(), 4, 'the expired removals are kept, not forgotten');
  assert.equal(dataFiles(), 6, 'nor their files deleted');
  rmSync(blocker, { recursive: true });
  await table.checkpoint();
  assert.equal(tombstones(), 0);
  assert.equal(dataFiles(), 2, 'the next checkpoint deletes them');
  assert.deepEqual(snapshotOf(await DeltaTable.open(dir)), snapshotOf(table));
  await table.close();
});

test('a replaced file that cannot be deleted is a warning: the checkpoint, the log cleanup and the other deletions go on', async (t) => {
  const dir = tempDir();
  const start = Date.now();
  t.mock.timers.enable({ apis: ['Date'], now: start });
  const warnings: string[] = [];
  const table = await DeltaTable.createOrOpen(dir, LOGS, {
    checkpointInterval: 1000,
    logRetentionMs: 0,
    onBackgroundError: (task, err) => warnings.push(`${task}: ${err.message}`),
  });
  for (let i = 0; i < 4; i++) await appendRows(table, LOGS, makeRows(LOGS, 2, i, i * 10));
  assert.ok(await table.optimize({ targetFileRows: 100 })); // four removes
  t.mock.timers.setTime(start + 61 * 60_000);
  await appendRows(table, LOGS, makeRows(LOGS, 1, 5, 50));
  const live = new Set(table.files.map((f) => f.path));
  const removed = readdirSync(dir).filter((n) => n.endsWith('.parquet') && !live.has(n));
  assert.equal(removed.length, 4);
  // A directory where one of them was: unlink fails (EISDIR), as it would for EACCES or EBUSY.
  rmSync(join(dir, removed[0]!));
  mkdirSync(join(dir, removed[0]!, 'x'), { recursive: true });
  await table.checkpoint();
  const onDisk = () => readdirSync(dir).filter((n) => n.endsWith('.parquet'));
  assert.deepEqual(onDisk().sort(), [...live, removed[0]!].sort(), 'the other three deleted');
  const commits = () => readdirSync(join(dir, LOG_DIR)).filter((n) => n.endsWith('.json')).length;
  assert.equal(commits(), 1, 'the log before the checkpoint cleaned up');
  assert.equal(warnings.length, 1, warnings.join('\n'));
  assert.ok(
    warnings[0]!.startsWith(`deleting replaced files: cannot delete replaced data files: ${removed[0]} (`),
    warnings[0],
  );

  await appendRows(table, LOGS, makeRows(LOGS, 1, 6, 60));
  await table.checkpoint(); // the next one is not held up by it
  assert.equal(commits(), 1);
  await table.close();
});

test('a missing commit in the middle of the log is an error, not a silent gap', async () => {
  const dir = tempDir();
  const t = await DeltaTable.createOrOpen(dir, LOGS);
  for (let i = 0; i < 3; i++) await appendRows(t, LOGS, makeRows(LOGS, 1, i, i));
  await t.close();
  rmSync(join(dir, LOG_DIR, commitFileName(2)));
  await assert.rejects(DeltaTable.open(dir), /missing commit 2/);
});

test('an optimize that fails in one group leaves no output of any group behind', async () => {
  const dir = tempDir();
  const t = await DeltaTable.createOrOpen(dir, LOGS);
  for (let i = 0; i < 4; i++) await appendRows(t, LOGS, makeRows(LOGS, 10, i, i * 100));
  const inputs = t.files.map((f) => f.path);
  // The first group's first file cut short: its rewrite fails while the second group's runs.
  writeFileSync(join(dir, inputs[0]!), Buffer.from('PAR1 not a parquet file'));
  await assert.rejects(t.optimize({ targetFileRows: 20 }), /parquet|PAR1|footer|magic/i);
  await new Promise((r) => setTimeout(r, 1000)); // a group's task still running would write by now
  const parquet = readdirSync(dir).filter((n) => n.endsWith('.parquet'));
  assert.deepEqual(parquet.sort(), [...inputs].sort(), 'only the inputs');
  assert.equal(t.version, 4);
  await t.close();
});

test('optimize compacts into bins with exact rows and stats, dataChange false', async () => {
  const dir = tempDir();
  const schema = SCHEMAS.metrics_hist;
  const t = await DeltaTable.createOrOpen(dir, schema);
  const all: Row[] = [];
  for (let i = 0; i < 6; i++) {
    const rows = makeRows(schema, 10, i, i * 100, { specialDoubles: true });
    all.push(...rows);
    await appendRows(t, schema, rows);
  }
  const before = t.files.map((f) => f.path);
  const result = await t.optimize({ targetFileRows: 30 });
  assert.deepEqual(result, { removed: 6, added: 2, version: 7 });
  assert.equal(t.files.length, 2);
  assert.equal(t.rowCount(), 60);
  const lines = commitLines(dir, 7);
  assert.equal(lines[0]!.commitInfo!.operation, 'OPTIMIZE');
  const removes = lines.filter((l) => l.remove).map((l) => l.remove!);
  assert.deepEqual(
    removes.map((r) => r.path),
    before,
  );
  for (const r of removes) {
    assert.equal(r.dataChange, false);
    assert.equal(r.extendedFileMetadata, true);
    assert.equal(typeof r.deletionTimestamp, 'number');
  }
  assert.ok(lines.filter((l) => l.add).every((l) => l.add!.dataChange === false));
  assert.deepEqual(readRows(t.liveFilePaths(), schema), sortRows(all.map((r) => rowToJson(schema, r))));
  // The merged stats are the stats of each compacted file's rows (first 3 batches, last 3).
  assert.deepEqual(t.files[0]!.stats, computeStats(schema, batchFromRows(schema, all.slice(0, 30))));
  assert.deepEqual(t.files[1]!.stats, computeStats(schema, batchFromRows(schema, all.slice(30))));
  const reopened = await DeltaTable.open(dir);
  assert.deepEqual(reopened.files, t.files);
  // Nothing left to do.
  assert.equal(await t.optimize({ targetFileRows: 30 }), null);
  assert.equal(t.version, 7);
  await t.close();
});

test('vacuum: keeps live and recently removed files, deletes expired and old orphans', async () => {
  const dir = tempDir();
  const t = await DeltaTable.createOrOpen(dir, LOGS);
  const rows: Row[] = [];
  for (let i = 0; i < 4; i++) {
    const r = makeRows(LOGS, 5, i, i * 10);
    rows.push(...r);
    await appendRows(t, LOGS, r);
  }
  const removed = t.liveFilePaths();
  await t.optimize();
  const oldOrphan = join(dir, 'part-00000000-0000-0000-0000-000000000001.zstd.parquet');
  const newOrphan = join(dir, 'part-00000000-0000-0000-0000-000000000002.zstd.parquet');
  writeFileSync(oldOrphan, 'left by a killed writer');
  utimesSync(oldOrphan, new Date(Date.now() - 7_200_000), new Date(Date.now() - 7_200_000));
  writeFileSync(newOrphan, 'maybe being written right now');
  const hidden = join(dir, '_hidden.parquet');
  writeFileSync(hidden, 'not ours');
  utimesSync(hidden, new Date(0), new Date(0));

  const v = t.version;
  assert.deepEqual(await t.vacuum({ retentionMs: 3_600_000 }), { deleted: 1 });
  assert.equal(existsSync(oldOrphan), false);
  assert.equal(existsSync(newOrphan), true);
  assert.ok(removed.every((p) => existsSync(p)));
  assert.equal(t.version, v + 2); // VACUUM START + VACUUM END
  assert.equal(commitLines(dir, v + 1)[0]!.commitInfo!.operation, 'VACUUM START');
  assert.equal(commitLines(dir, v + 2)[0]!.commitInfo!.operation, 'VACUUM END');

  assert.deepEqual(await t.vacuum({ retentionMs: 0 }), { deleted: removed.length + 1 });
  assert.ok(removed.every((p) => !existsSync(p)));
  assert.equal(existsSync(hidden), true);
  assert.deepEqual(
    readdirSync(dir)
      .filter((f) => f.startsWith('part-'))
      .map((f) => join(dir, f)),
    t.liveFilePaths(),
  );
  assert.deepEqual(readRows(t.liveFilePaths(), LOGS), sortRows(rows.map((r) => rowToJson(LOGS, r))));
  // Nothing to delete: no commits.
  const v2 = t.version;
  assert.deepEqual(await t.vacuum({ retentionMs: 0 }), { deleted: 0 });
  assert.equal(t.version, v2);
  await t.close();
});

test('vacuum never deletes a file being written for a commit in flight', async () => {
  const dir = tempDir();
  const t = await DeltaTable.createOrOpen(dir, LOGS);
  const appends = Array.from({ length: 6 }, (_, i) => appendRows(t, LOGS, makeRows(LOGS, 50, i, i * 100)));
  const vacuums = [t.vacuum({ retentionMs: 0 }), t.vacuum({ retentionMs: 0 })];
  await Promise.all([...appends, ...vacuums]);
  assert.equal(t.files.length, 6);
  assert.ok(t.liveFilePaths().every((p) => existsSync(p)));
  assert.equal(readRows(t.liveFilePaths(), LOGS).length, 300);
  await t.close();
});

test('autoCompact keeps the file count bounded under many small appends', async () => {
  const dir = tempDir();
  const schema = SCHEMAS.span_events;
  const t = await DeltaTable.createOrOpen(dir, schema, {
    autoCompact: { minFiles: 4, smallFileRows: 500 },
    checkpointInterval: 20,
  });
  const all: Row[] = [];
  for (let i = 0; i < 120; i++) {
    const rows = makeRows(schema, 3, i, i * 10);
    all.push(...rows);
    await appendRows(t, schema, rows);
  }
  // How far compactions kept up during the appends depends on the machine; what is left is due now.
  await t.compactDue();
  await t.close();
  assert.deepEqual(t.backgroundErrors, []);
  // Tiers of 4x rows below 500 rows (3, 12, 48, 192 rows): at most 3 files in each.
  assert.ok(t.files.length <= 12, `files ${t.files.length}`);
  assert.equal(t.rowCount(), 360);
  assert.deepEqual(readRows(t.liveFilePaths(), schema), sortRows(all.map((r) => rowToJson(schema, r))));
  const reopened = await DeltaTable.open(dir);
  assert.deepEqual(snapshotOf(reopened), snapshotOf(t));
});

test('autoCompact closes a group once it reaches smallFileRows, before minFiles files', async () => {
  const dir = tempDir();
  const t = await DeltaTable.createOrOpen(dir, LOGS, { autoCompact: { minFiles: 64, smallFileRows: 100 } });
  const all: Row[] = [];
  for (let i = 0; i < 20; i++) {
    const rows = makeRows(LOGS, 30, i, i * 100);
    all.push(...rows);
    await appendRows(t, LOGS, rows);
  }
  await t.close();
  assert.deepEqual(t.backgroundErrors, []);
  // Each compaction takes the four oldest 30-row files (120 rows >= 100), not 64 of them.
  const removed: number[] = [];
  for (let v = 1; v <= t.version; v++) {
    const info = commitLines(dir, v)[0]!.commitInfo as {
      operation: string;
      operationMetrics?: Record<string, string>;
    };
    if (info.operation === 'OPTIMIZE') removed.push(Number(info.operationMetrics!.numFilesRemoved));
  }
  assert.ok(removed.length >= 1, 'no compaction ran');
  assert.deepEqual(
    removed,
    removed.map(() => 4),
  );
  for (const f of t.files)
    assert.ok(f.numRecords === 30 || f.numRecords === 120, `file of ${f.numRecords} rows`);
  assert.equal(t.files.filter((f) => f.numRecords === 120).length, removed.length);
  assert.deepEqual(readRows(t.liveFilePaths(), LOGS), sortRows(all.map((r) => rowToJson(LOGS, r))));
});

test('refresh follows another writer, reloading from a checkpoint when far behind', async () => {
  const dir = tempDir();
  const w = await DeltaTable.createOrOpen(dir, LOGS, { checkpointInterval: 50 });
  await appendRows(w, LOGS, makeRows(LOGS, 2, 1));
  const r = await DeltaTable.open(dir);
  assert.equal(r.version, 1);
  await appendRows(w, LOGS, makeRows(LOGS, 2, 2, 10));
  await r.refresh();
  assert.equal(r.version, 2);
  assert.equal(r.rowCount(), 4);
  for (let i = 0; i < 250; i++) await appendRows(w, LOGS, makeRows(LOGS, 1, 100 + i, 100 + i));
  await w.close();
  // Commits the reader would replay one by one are gone: only the checkpoint path works.
  for (let v = 3; v <= 200; v++) rmSync(join(dir, LOG_DIR, commitFileName(v)));
  await r.refresh();
  assert.deepEqual(snapshotOf(r), snapshotOf(w));
});

test('log cleanup keeps the newest old-enough checkpoint and after; stale readers reload', async () => {
  const dir = tempDir();
  const logDir = join(dir, LOG_DIR);
  const w = await DeltaTable.createOrOpen(dir, LOGS, { checkpointInterval: 5, logRetentionMs: null });
  for (let i = 0; i < 3; i++) await appendRows(w, LOGS, makeRows(LOGS, 2, i, i * 10));
  const stale = await DeltaTable.open(dir);
  assert.equal(stale.version, 3);
  for (let i = 3; i < 12; i++) await appendRows(w, LOGS, makeRows(LOGS, 2, i, i * 10));
  await w.checkpoint(); // 5, 10 automatic; 12 on demand
  // Nothing is old enough under a one-hour retention.
  assert.deepEqual(await w.cleanupLog({ retentionMs: 3_600_000 }), { deleted: 0 });
  // Make checkpoint 10 old and 12 recent: 10 stays, with everything after it.
  const old = new Date(Date.now() - 7_200_000);
  utimesSync(join(logDir, checkpointFileName(10)), old, old);
  assert.deepEqual(await w.cleanupLog({ retentionMs: 3_600_000 }), { deleted: 11 }); // 0..9.json, 5.checkpoint
  const left = readdirSync(logDir)
    .filter((n) => /^\d{20}\./.test(n))
    .sort();
  assert.deepEqual(left, [
    checkpointFileName(10),
    commitFileName(10),
    commitFileName(11),
    checkpointFileName(12),
    commitFileName(12),
  ]);
  assert.deepEqual(snapshotOf(await DeltaTable.open(dir)), snapshotOf(w));
  // A reader at version 3 cannot replay 4..9 any more: it reloads from the checkpoint.
  await stale.refresh();
  assert.deepEqual(snapshotOf(stale), snapshotOf(w));
  // Zero retention keeps only the newest checkpoint; new appends continue the log.
  assert.deepEqual(await w.cleanupLog({ retentionMs: 0 }), { deleted: 3 });
  await appendRows(w, LOGS, makeRows(LOGS, 1, 99, 990));
  await w.close();
  assert.deepEqual(snapshotOf(await DeltaTable.open(dir)), snapshotOf(w));
  assert.equal(w.rowCount(), 25);
  // Without version 0 the table still exists: createOrOpen opens it instead of starting over.
  const again = await DeltaTable.createOrOpen(dir, LOGS);
  assert.deepEqual(snapshotOf(again), snapshotOf(w));
  assert.equal(existsSync(join(logDir, commitFileName(0))), false);
});

test('a created table keeps an hour of its log: a checkpoint removes what is older', async () => {
  const dir = tempDir();
  const logDir = join(dir, LOG_DIR);
  const w = await DeltaTable.createOrOpen(dir, LOGS, { checkpointInterval: 5 });
  assert.equal(w.metadata.configuration['delta.logRetentionDuration'], 'interval 60 minutes');
  for (let i = 0; i < 6; i++) await appendRows(w, LOGS, makeRows(LOGS, 1, i, i)); // versions 1-6, checkpoint 5
  const early = readdirSync(logDir).filter((n) => /^\d{20}\./.test(n)).length;
  // Checkpoint 5 written two hours ago: the next checkpoint (10) removes the log before it.
  const old = new Date(Date.now() - 7_200_000);
  utimesSync(join(logDir, checkpointFileName(5)), old, old);
  for (let i = 6; i < 11; i++) await appendRows(w, LOGS, makeRows(LOGS, 1, i, i));
  await w.close(); // the checkpoint and its cleanup run in the background: close waits for them
  const names = readdirSync(logDir)
    .filter((n) => /^\d{20}\./.test(n))
    .sort();
  assert.equal(early, 8); // 0..6.json and checkpoint 5: nothing removed within the hour
  assert.equal(names[0], checkpointFileName(5));
  assert.ok(!names.includes(commitFileName(4)) && names.includes(commitFileName(5)), names.join(' '));
  assert.deepEqual(snapshotOf(await DeltaTable.open(dir)), snapshotOf(w));
  assert.equal(w.rowCount(), 11);
});

test('automatic log cleanup after checkpoints with logRetentionMs 0 bounds the log', async () => {
  const dir = tempDir();
  const w = await DeltaTable.createOrOpen(dir, LOGS, { checkpointInterval: 4, logRetentionMs: 0 });
  for (let i = 0; i < 14; i++) await appendRows(w, LOGS, makeRows(LOGS, 1, i, i));
  await w.close();
  const names = readdirSync(join(dir, LOG_DIR)).filter((n) => /^\d{20}\./.test(n));
  // Checkpoint 12 and commits 12..14 remain.
  assert.deepEqual(names.sort(), [
    checkpointFileName(12),
    commitFileName(12),
    commitFileName(13),
    commitFileName(14),
  ]);
  assert.deepEqual(snapshotOf(await DeltaTable.open(dir)), snapshotOf(w));
});

test('a commit that fails after the file is written is retried with the file', async () => {
  const dir = tempDir();
  const t = await DeltaTable.createOrOpen(dir, LOGS);
  const rows = makeRows(LOGS, 30, 9, 0);
  const log = join(dir, '_delta_log');
  // The log folder is away while the file is written: the first commits fail, a later one works.
  renameSync(log, `${log}.away`);
  const appending = t.append(batchFromRows(LOGS, rows), { transfer: true });
  // Back only once the file is written and the first commit attempt (made at once) has failed.
  while (!readdirSync(dir).some((f) => f.endsWith('.parquet'))) await new Promise((r) => setTimeout(r, 5));
  await new Promise((r) => setTimeout(r, 150));
  renameSync(`${log}.away`, log);
  const r = await appending;
  assert.equal(r.version, 1);
  const got = sortRows(readRows((await DeltaTable.open(dir)).liveFilePaths(), LOGS));
  assert.equal(JSON.stringify(got), JSON.stringify(sortRows(rows.map((x) => rowToJson(LOGS, x)))));
});

test('a transferred batch whose write fails comes back intact and can be appended again', async () => {
  const dir = tempDir();
  const t = await DeltaTable.createOrOpen(dir, LOGS);
  const rows = makeRows(LOGS, 40, 7, 0);
  const batch = batchFromRows(LOGS, rows);
  // The table's folder disappears under the writer: the Parquet write fails in the worker.
  renameSync(dir, `${dir}.away`);
  const err = (await t.append(batch, { transfer: true }).catch((e: unknown) => e)) as Error & {
    batch?: ColumnBatch;
  };
  assert.ok(err instanceof Error, 'the append fails');
  assert.equal(isIntact(batch), false, 'the original buffers moved to the worker');
  assert.ok(err.batch && isIntact(err.batch), 'the error hands the batch back');
  renameSync(`${dir}.away`, dir);
  const r = await t.append(err.batch, { transfer: true });
  assert.equal(r.rows, 40);
  const got = sortRows(readRows(t.liveFilePaths(), LOGS));
  assert.ok(
    JSON.stringify(got) === JSON.stringify(sortRows(rows.map((r) => rowToJson(LOGS, r)))),
    'the rows read back are the rows of the batch',
  );
});

test('files written first and committed later, together, with a txn that survives a checkpoint', async () => {
  const dir = tempDir();
  const t = await DeltaTable.createOrOpen(dir, LOGS, { checkpointInterval: 2 });
  const a = await t.writeFile(batchFromRows(LOGS, makeRows(LOGS, 4, 1, 0)));
  const b = await t.writeFile(batchFromRows(LOGS, makeRows(LOGS, 6, 2, 100)));
  assert.ok(a && b);
  assert.equal(t.version, 0, 'written files are not part of the table yet');
  assert.equal(await t.writeFile(batchFromRows(LOGS, [])), null);
  const v = await t.commitFiles([a, b], { txn: { appId: 'wal-x', version: 42 } });
  assert.equal(v, 1);
  const lines = commitLines(dir, 1);
  assert.deepEqual(lines[1]!.txn!.appId, 'wal-x');
  assert.deepEqual(lines[1]!.txn!.version, 42);
  assert.equal(lines.filter((l) => l.add).length, 2);
  assert.equal(lines[0]!.commitInfo!.operationMetrics!['numOutputRows' as never], '10');
  assert.equal(t.rowCount(), 10);
  assert.equal(t.txnVersion('wal-x'), 42);
  assert.equal(t.txnVersion('other'), null);
  // A discarded file is deleted and never committed.
  const c = await t.writeFile(batchFromRows(LOGS, makeRows(LOGS, 2, 3, 200)));
  await t.discardFile(c!);
  assert.equal(existsSync(join(dir, c!.name)), false);
  await t.append(batchFromRows(LOGS, makeRows(LOGS, 1, 4, 300)));
  await t.checkpoint();
  await t.close();
  const reopened = await DeltaTable.open(dir);
  assert.equal(reopened.txnVersion('wal-x'), 42, 'the txn is kept by the checkpoint');
  assert.equal(reopened.rowCount(), 11);
});

/** Each commit's `commitInfo.timestamp` and its file's modification time (whole ms), oldest first. */
function commitTimes(dir: string): { timestamp: number; mtime: number }[] {
  const out: { timestamp: number; mtime: number }[] = [];
  for (let v = 0; existsSync(join(dir, LOG_DIR, commitFileName(v))); v++) {
    const info = commitLines(dir, v)[0]!.commitInfo as { timestamp: number };
    const mtime = Math.floor(statSync(join(dir, LOG_DIR, commitFileName(v))).mtimeMs);
    out.push({ timestamp: info.timestamp, mtime });
  }
  return out;
}

test('commit timestamps strictly increase: one millisecond for all, a clock stepping back, a stale writer', async (t) => {
  const start = Date.now();
  // The clock stands still: every commit happens in the same millisecond.
  t.mock.timers.enable({ apis: ['Date'], now: start });
  const dir = tempDir();
  const a = await DeltaTable.createOrOpen(dir, LOGS);
  const stale = await DeltaTable.open(dir);
  await appendRows(a, LOGS, makeRows(LOGS, 3, 1, 0));
  await appendRows(a, LOGS, makeRows(LOGS, 3, 2, 10));
  await a.optimize();
  await appendRows(stale, LOGS, makeRows(LOGS, 3, 3, 20)); // EEXIST, caught up, retried
  // The clock steps back an hour.
  t.mock.timers.setTime(start - 3_600_000);
  await a.refresh();
  await appendRows(a, LOGS, makeRows(LOGS, 3, 4, 30));
  await a.checkpoint();
  await a.close();
  await stale.close();
  // A writer that knows the log only from disk (the checkpoint's commit) continues after it.
  const reopened = await DeltaTable.open(dir);
  await appendRows(reopened, LOGS, makeRows(LOGS, 3, 5, 40));
  await reopened.close();

  const times = commitTimes(dir);
  assert.equal(times.length, 7);
  assert.equal(times[0]!.timestamp, start);
  for (let v = 1; v < times.length; v++) {
    assert.ok(times[v]!.timestamp > times[v - 1]!.timestamp, `commit ${v}: ${JSON.stringify(times)}`);
  }
  // Readers that take a commit's time from its file (Spark) see the same times.
  for (const [v, { timestamp, mtime }] of times.entries()) assert.equal(mtime, timestamp, `commit ${v}`);
});

test('an in-day compaction that keeps failing is not started over at once, and the appends go on', async () => {
  const dir = tempDir();
  const t = await DeltaTable.createOrOpen(dir, LOGS, {
    autoCompact: { minFiles: 2, smallFileRows: 1000 },
    fsync: false,
  });
  const warnings: string[] = [];
  const onWarning = (w: Error) => {
    if (w.name === 'DeltaWarning') warnings.push(w.message);
  };
  process.on('warning', onWarning);
  try {
    await t.append(batchFromRows(LOGS, makeRows(LOGS, 10, 1)));
    // The first file is no longer Parquet: no join or rewrite of it can succeed.
    const [first] = t.liveFilePaths();
    writeFileSync(first!, 'not parquet');
    for (let i = 0; i < 20; i++) {
      await t.append(batchFromRows(LOGS, makeRows(LOGS, 10, 2 + i)));
      await new Promise((r) => setTimeout(r, 10));
    }
    await t.compactDue().catch(() => {});
    assert.equal(t.files.length, 21, 'every append committed, nothing compacted');
    // Started over right away, the failing compaction ran hundreds of times in these ~300 ms.
    assert.ok(warnings.length >= 1 && warnings.length <= 2, `${warnings.length} failed compactions`);
  } finally {
    process.off('warning', onWarning);
    await t.close();
  }
});
