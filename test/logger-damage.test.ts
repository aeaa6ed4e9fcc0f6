// The library over an instance whose logs table of today is damaged: it opens, refuses log rows
// (storage_unavailable) while other tables take theirs, and reports the table in stats() and
// problems(); reading it fails with a DamagedTableError naming the table and day.

import assert from 'node:assert/strict';
import { after, test } from 'node:test';
import { closeDeltaWorkers } from '../src/delta/table.ts';
import { DamagedTableError, Logger } from '../src/index.ts';
import { closeReadWorkers } from '../src/read/index.ts';
import { InstanceLayout } from '../src/storage/layout.ts';
import { tempDir } from './cli/helpers.ts';
import { days, truncateNewestCommit, writeInstance } from './fixtures/damage.ts';

after(async () => {
  await closeReadWorkers();
  await closeDeltaWorkers();
});

test('a damaged table of today: the logger opens, refuses its rows alone, and reports it', async () => {
  const tmp = await tempDir('logger-damage');
  const lines: string[] = [];
  try {
    await writeInstance(tmp.path, 'l');
    const { today } = days();
    await truncateNewestCommit(new InstanceLayout(tmp.path, 'l').tableDir(today, 'logs'));
    const logger = await Logger.open({
      instanceDir: tmp.path,
      instanceId: 'l',
      handleSignals: false,
      log: (level, message) => lines.push(`${level}: ${message}`),
    });
    try {
      assert.ok(
        lines.some((l) => l.startsWith(`error: the logs table of ${today} is damaged`)),
        lines.join('\n'),
      );
      assert.deepEqual(await logger.ingestLog({ project_id: 'p', time_unix_nano: 1n }), [
        false,
        'storage_unavailable',
      ]);
      const spans = await logger.ingestRows('spans', [
        { project_id: 'p', start_time_unix_nano: 1n, end_time_unix_nano: 2n, name: 's' },
      ]);
      assert.equal(spans.accepted, 1);
      const damaged = logger.stats().damaged_tables;
      assert.equal(damaged.length, 1);
      assert.equal(damaged[0]!.table, 'logs');
      assert.match(damaged[0]!.reason, /corrupt Delta commit 3/);
      assert.match(logger.problems().join('\n'), new RegExp(`the logs table of ${today} is damaged`));
      await assert.rejects(logger.readLogs({ dateFrom: today }), (err: unknown) => {
        assert.ok(err instanceof DamagedTableError);
        assert.equal(err.table, 'logs');
        assert.equal(err.day, today);
        return true;
      });
    } finally {
      await logger.stop({ flush: 'auto' });
    }
  } finally {
    await tmp.remove();
  }
});
