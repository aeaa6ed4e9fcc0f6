// checkTable's finer cases, on tables written here: what only older versions need is a warning;
// an empty commit, a gap in the log and a _last_checkpoint naming a missing checkpoint are
// damage; a DeltaTable mends unreadable checkpoints with a new one and deletes the older ones.

import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { readdir, rename, unlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { checkpointFileName, commitFileName, LAST_CHECKPOINT, LOG_DIR } from '../../src/delta/actions.ts';
import { batchFromRows } from '../../src/delta/batch.ts';
import { checkTable } from '../../src/delta/check.ts';
import { closeDeltaWorkers, DeltaLogError, DeltaTable } from '../../src/delta/table.ts';
import { SCHEMAS } from '../../src/schema/tables.ts';
import { makeRows } from './rows.ts';

const LOGS = SCHEMAS.logs;
const roots: string[] = [];

after(async () => {
  await closeDeltaWorkers();
  for (const d of roots) rmSync(d, { recursive: true, force: true });
});

/** A logs table with `commits` appends of 10 rows after its creation, checkpoints every 2 commits. */
async function table(commits: number): Promise<string> {
  const root = mkdtempSync(join(tmpdir(), 'otelake-check-'));
  roots.push(root);
  const dir = join(root, 'logs');
  const t = await DeltaTable.createOrOpen(dir, LOGS, { checkpointInterval: 2 });
  for (let i = 0; i < commits; i++) await t.append(batchFromRows(LOGS, makeRows(LOGS, 10, i, i * 10)));
  await t.close();
  return dir;
}

const log = (dir: string, name: string) => join(dir, LOG_DIR, name);

test('a sound table has no findings; its version, files and rows are reported', async () => {
  const dir = await table(3);
  const r = await checkTable(dir);
  assert.deepEqual(r.findings, []);
  assert.deepEqual([r.version, r.files, r.rows], [3, 3, 30]);
});

test('an unreadable commit or checkpoint older than the newest checkpoint is only a warning', async () => {
  const dir = await table(5); // checkpoints at 2 and 4
  await writeFile(log(dir, commitFileName(1)), '{"add":');
  await writeFile(log(dir, checkpointFileName(2)), 'junk');
  const r = await checkTable(dir);
  assert.deepEqual(
    r.findings.map((f) => f.severity),
    ['warning', 'warning'],
  );
  assert.match(
    r.findings.map((f) => f.problem).join('\n'),
    /checkpoint .*2\.checkpoint\.parquet is unreadable/,
  );
  assert.match(r.findings.map((f) => f.repair).join('\n'), /only versions before 4/);
  assert.equal(r.rows, 50, 'the snapshot is whole');
});

test('an empty newest commit, a gap, a _last_checkpoint naming a missing checkpoint are damage', async () => {
  const empty = await table(3);
  await writeFile(log(empty, commitFileName(3)), '');
  const a = await checkTable(empty);
  assert.equal(a.findings[0]?.severity, 'damaged');
  assert.match(a.findings[0]!.problem, /commit .*3\.json is empty/);
  assert.match(a.findings[0]!.repair, /the table then ends at version 2/);

  const gap = await table(3);
  await rename(log(gap, commitFileName(3)), log(gap, commitFileName(4)));
  const b = await checkTable(gap);
  assert.ok(b.findings.some((f) => f.severity === 'damaged' && /3\.json is missing/.test(f.problem)));

  const hint = await table(3);
  await writeFile(log(hint, LAST_CHECKPOINT), JSON.stringify({ version: 3, size: 1 }));
  const c = await checkTable(hint);
  assert.equal(c.findings.length, 1);
  assert.match(c.findings[0]!.problem, /_last_checkpoint names checkpoint 3, which is missing/);
  assert.match(c.findings[0]!.repair, /delete _delta_log\/_last_checkpoint/);
});

test('unreadable checkpoints: the table opens from the commits and mends them with a new one', async () => {
  const dir = await table(5); // checkpoints at 2 and 4
  await writeFile(log(dir, checkpointFileName(4)), 'junk');
  await writeFile(log(dir, checkpointFileName(2)), 'junk');
  assert.equal((await checkTable(dir)).findings.filter((f) => f.severity === 'damaged').length, 2);
  const t = await DeltaTable.createOrOpen(dir, LOGS, { checkpointInterval: 2 });
  assert.deepEqual(
    t.unreadableCheckpoints.map((c) => c.version),
    [4, 2],
  );
  assert.equal(t.rowCount(), 50);
  assert.equal(await t.mendCheckpoints(), 2);
  await t.close();
  const names = await readdir(join(dir, LOG_DIR));
  assert.ok(!names.includes(checkpointFileName(2)) && !names.includes(checkpointFileName(4)), names.join());
  assert.ok(names.includes(checkpointFileName(5)));
  assert.deepEqual((await checkTable(dir)).findings, []);
});

test('a log that gives no snapshot throws DeltaLogError, saying why', async () => {
  const dir = await table(2); // checkpoint at 2
  await writeFile(log(dir, checkpointFileName(2)), 'junk');
  for (const v of [0, 1]) await unlink(log(dir, commitFileName(v)));
  await assert.rejects(DeltaTable.open(dir), (err: unknown) => {
    assert.ok(err instanceof DeltaLogError);
    assert.match(err.message, /not a Delta table .*checkpoint 2 is unreadable/);
    return true;
  });
});
