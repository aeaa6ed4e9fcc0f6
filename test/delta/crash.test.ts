// A writer process killed with SIGKILL at random moments (mid-append, mid-checkpoint,
// mid-optimize) while a reader in this process keeps refreshing the table. After every kill the
// table must reopen, hold every batch the writer reported committed, hold no partial batch, read
// back exactly, and take new appends.

import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { batchFromRows } from '../../src/delta/batch.ts';
import { closeDeltaWorkers, DeltaTable } from '../../src/delta/table.ts';
import { readRows, sortRows } from './read.ts';
import { prng, rowToJson } from './rows.ts';
import { batchRows, batchSize, CHILD_SCHEMA } from './writer-child.ts';

const CHILD = fileURLToPath(new URL('./writer-child.ts', import.meta.url));
const KILLS = Number(process.env.OTELAKE_CRASH_KILLS ?? 8);
const root = mkdtempSync(join(tmpdir(), 'otelake-crash-'));

after(async () => {
  await closeDeltaWorkers();
  rmSync(root, { recursive: true, force: true });
});

/** Starts a writer, kills it `delayMs` after its first commit; returns the batches it reported. */
async function runAndKill(dir: string, start: number, delayMs: number): Promise<{ committed: number[] }> {
  const opts = JSON.stringify({
    checkpointInterval: 3,
    autoCompact: { minFiles: 3, smallFileRows: 40 },
    optimizeEvery: 5,
  });
  const child: ChildProcess = spawn(process.execPath, [CHILD, dir, '-1', String(start), opts], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const committed: number[] = [];
  let stderr = '';
  let buffered = '';
  let killTimer: NodeJS.Timeout | null = null;
  child.stderr!.on('data', (d: Buffer) => {
    stderr += d.toString();
  });
  child.stdout!.on('data', (d: Buffer) => {
    buffered += d.toString();
    const lines = buffered.split('\n');
    buffered = lines.pop()!;
    for (const line of lines) {
      const [kind, batch] = line.split(' ');
      if (kind === 'committed') {
        committed.push(Number(batch));
        killTimer ??= setTimeout(() => child.kill('SIGKILL'), delayMs);
      }
    }
  });
  const exit = await new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.on('exit', (code, signal) => resolve({ code, signal })),
  );
  if (killTimer) clearTimeout(killTimer);
  assert.equal(exit.signal, 'SIGKILL', `writer exited on its own (code ${exit.code}): ${stderr}`);
  return { committed };
}

test('SIGKILL at any moment never leaves a half commit', { timeout: 600_000 }, async () => {
  const dir = join(root, 'table');
  const rand = prng(42);
  const known = new Set<number>(); // batches reported committed by a writer
  let next = 0;
  let readerChecks = 0;

  // A reader in this process follows the table the whole time, as a CLI viewer would.
  const reader = { table: null as DeltaTable | null, stop: false, error: null as Error | null };
  const follow = (async () => {
    while (!reader.stop) {
      try {
        if (!reader.table) {
          if (existsSync(join(dir, '_delta_log', '00000000000000000000.json')))
            reader.table = await DeltaTable.open(dir);
        } else {
          const before = reader.table.version;
          await reader.table.refresh();
          assert.ok(reader.table.version >= before);
          assert.equal(
            reader.table.rowCount(),
            reader.table.files.reduce((n, f) => n + f.numRecords, 0),
          );
          readerChecks++;
        }
      } catch (err) {
        reader.error = err as Error;
        return;
      }
      await new Promise((r) => setTimeout(r, 15));
    }
  })();

  for (let round = 0; round < KILLS; round++) {
    const { committed } = await runAndKill(dir, next, 50 + Math.floor(rand() * 900));
    for (const b of committed) known.add(b);

    const table = await DeltaTable.open(dir);
    const rows = readRows(table.liveFilePaths(), CHILD_SCHEMA);
    assert.equal(rows.length, table.rowCount());
    // Group rows by batch (project_id "key-<batch*1000 + i>-...").
    const byBatch = new Map<number, number>();
    for (const r of rows) {
      const seq = Number(String(r.project_id).slice(4, 12));
      const b = Math.floor(seq / 1000);
      byBatch.set(b, (byBatch.get(b) ?? 0) + 1);
    }
    for (const b of known) assert.ok(byBatch.has(b), `round ${round}: committed batch ${b} is missing`);
    for (const [b, n] of byBatch) assert.equal(n, batchSize(b), `round ${round}: batch ${b} is partial`);
    const expected = sortRows(
      [...byBatch.keys()].flatMap((b) => batchRows(b).map((r) => rowToJson(CHILD_SCHEMA, r))),
    );
    assert.deepEqual(rows, expected, `round ${round}: rows differ`);
    // At most the batch in flight is missing: everything before the last reported one is there.
    next = Math.max(next, ...byBatch.keys(), ...known) + 1;
  }

  reader.stop = true;
  await follow;
  assert.equal(reader.error, null, `reader failed: ${reader.error?.stack}`);
  assert.ok(readerChecks > 0);

  // The survivor table takes new appends, and VACUUM clears what killed writers left behind.
  const table = await DeltaTable.createOrOpen(dir, CHILD_SCHEMA);
  const rowsBefore = table.rowCount();
  await table.append(batchFromRows(CHILD_SCHEMA, batchRows(next)));
  assert.equal(table.rowCount(), rowsBefore + batchSize(next));
  await table.vacuum({ retentionMs: 0 });
  await table.close();
  const reopened = await DeltaTable.open(dir);
  assert.equal(readRows(reopened.liveFilePaths(), CHILD_SCHEMA).length, rowsBefore + batchSize(next));
});
