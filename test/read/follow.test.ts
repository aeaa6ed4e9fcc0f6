// The follower behind `otelake view --follow`: rows committed after its start, once each, in
// commit order, also when a compaction moved them before it looked, and on a new day.

import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { closeDeltaWorkers, DeltaTable } from '../../src/delta/table.ts';
import { Follower } from '../../src/read/follow.ts';
import { closeReadWorkers } from '../../src/read/index.ts';
import type { Row } from '../../src/schema/tables.ts';
import { InstanceLayout } from '../../src/storage/layout.ts';
import { appendRows, fullRow } from './fixtures.ts';

const DAY = '2026-07-10';
const NEXT_DAY = '2026-07-11';
const noon = (day: string) => Date.parse(`${day}T12:00:00Z`);

after(async () => {
  await closeReadWorkers();
  await closeDeltaWorkers();
});

let n = 0;
function rows(project: string, ...names: string[]): Row[] {
  return names.map((body) => {
    const ts = BigInt(noon(DAY)) * 1000n + BigInt(n++);
    return fullRow('logs', { project_id: project, event_ts: ts, time_unix_nano: ts * 1000n, body });
  });
}

const bodies = (rs: Row[]) => rs.map((r) => r.body);

describe('Follower', () => {
  test('new rows once each, in commit order, wherever a compaction moved them', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'otelake-follow-'));
    try {
      const layout = new InstanceLayout(dir, 'x');
      let now = noon(DAY);
      await appendRows(layout, DAY, 'logs', rows('p', 'a1', 'a2'));
      const follower = new Follower(
        layout,
        'logs',
        { select: ['body'], maxRows: 1, projectId: 'p' },
        () => now,
      );
      assert.deepEqual(bodies(await follower.start()), ['a2']);
      assert.deepEqual(await follower.poll(), []);

      await appendRows(layout, DAY, 'logs', rows('p', 'b1', 'b2'));
      await appendRows(layout, DAY, 'logs', [...rows('q', 'other project'), ...rows('p', 'c1')]);
      assert.deepEqual(bodies(await follower.poll()), ['b1', 'b2', 'c1']);

      // Two more files, then every file compacted into one before the follower looks.
      await appendRows(layout, DAY, 'logs', rows('p', 'd1'));
      await appendRows(layout, DAY, 'logs', rows('p', 'e1', 'e2'));
      const table = await DeltaTable.open(layout.tableDir(DAY, 'logs'));
      assert.ok(await table.optimize());
      await table.close();
      assert.deepEqual(bodies(await follower.poll()), ['d1', 'e1', 'e2']);

      // A row with an old event time is new all the same; then a new day's table.
      const late = fullRow('logs', { project_id: 'p', event_ts: 1n, time_unix_nano: 1000n, body: 'late' });
      await appendRows(layout, DAY, 'logs', [late]);
      assert.deepEqual(bodies(await follower.poll()), ['late']);
      now = noon(NEXT_DAY);
      await appendRows(layout, NEXT_DAY, 'logs', rows('p', 'f1'));
      assert.deepEqual(bodies(await follower.poll()), ['f1']);
      assert.deepEqual(await follower.poll(), []);
      assert.equal(follower.lost, 0);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  test('a row committed while the follower starts is reported once, in the answer or after it', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'otelake-follow-'));
    try {
      const layout = new InstanceLayout(dir, 'x');
      await appendRows(layout, DAY, 'logs', rows('p', 'g1'));
      // A commit lands while the follower starts: whenever it lands, its row is reported once.
      const follower = new Follower(layout, 'logs', { select: ['body'] }, () => noon(DAY));
      const started = follower.start();
      await appendRows(layout, DAY, 'logs', rows('p', 'g2'));
      const first = bodies(await started);
      const next = bodies(await follower.poll());
      assert.deepEqual([...first].sort().concat(next).sort(), ['g1', 'g2'], `${first} then ${next}`);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
