// kill -9 under load: a server child is killed at random moments while clients send uniquely
// numbered rows; after the last kill, the instance is opened again (which replays the
// write-ahead log) and every row of every request answered 200 is stored exactly once.

import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { Logger } from '../../src/index.ts';
import { closeReadWorkers } from '../../src/read/index.ts';
import { crashLoop } from './helpers/crash-loop.ts';

after(() => closeReadWorkers());

test('kill -9 at random moments: every acknowledged row is stored exactly once after restart', async () => {
  const dir = await mkdtemp(join(tmpdir(), 'otelake-crash-'));
  // Small log segments (the children inherit it): each cycle goes through several, written ahead
  // and reused, so the kills also land while a spare is prepared, taken or kept.
  process.env['OTELAKE_WAL_SEGMENT_BYTES'] = String(64 * 1024);
  try {
    const r = await crashLoop({ dir, instanceId: 'crash', cycles: 12, minOk: 51 });
    assert.ok(r.ok > 50, `only ${r.ok} requests were acknowledged in ${r.cycles} cycles`);
    const logger = await Logger.open({ instanceId: 'crash', instanceDir: dir, handleSignals: false });
    try {
      await logger.stop();
      const rows = await logger.read('logs', { projectId: 'crash', select: ['body'], maxRows: 10_000_000 });
      const counts = new Map<string, number>();
      for (const row of rows) counts.set(row['body'] as string, (counts.get(row['body'] as string) ?? 0) + 1);
      const missing = r.acknowledged.filter((b) => !counts.has(b));
      assert.deepEqual(missing.slice(0, 10), [], `${missing.length} acknowledged rows missing`);
      const doubled = [...counts].filter(([, n]) => n > 1);
      assert.deepEqual(doubled.slice(0, 10), [], `${doubled.length} rows stored more than once`);
      // Rows of requests killed before they were answered may be stored (once), nothing else.
      assert.ok(rows.length >= r.acknowledged.length);
      for (const body of counts.keys()) assert.match(body, /^c\d+-b\d+-r\d+$/);
    } finally {
      await logger.stop();
    }
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});
