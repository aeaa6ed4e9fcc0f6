// Read order with ties at the microsecond, the event-time window over arrival days, reads in
// slices, and the library's bounds (maxBytes, maxFieldChars, cancellation).

import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { closeDeltaWorkers } from '../../src/delta/table.ts';
import { Logger } from '../../src/index.ts';
import { rowsFromIpc } from '../../src/read/arrow-rows.ts';
import { firstDayOfWindow } from '../../src/read/files.ts';
import {
  closeReadWorkers,
  normalizeQuery,
  ReadLimitError,
  readTable,
  streamRows,
} from '../../src/read/index.ts';
import { readHooks } from '../../src/read/query.ts';
import { parseDurationUs, parseInstantUs } from '../../src/read/window.ts';
import type { Row } from '../../src/schema/tables.ts';
import { InstanceLayout } from '../../src/storage/layout.ts';
import { appendRows, fullRow } from './fixtures.ts';

let dir: string;
let layout: InstanceLayout;

const T = BigInt(Date.parse('2026-05-02T10:00:00Z')) * 1000n; // one event_ts microsecond

/** A log at event_ts T with nanosecond time T*1000 + `nanos` (0: unset, the observed time counts). */
function tie(name: string, nanos: number, observed?: number): Row {
  return fullRow('logs', {
    project_id: 'ties',
    event_ts: T,
    time_unix_nano: nanos === 0 ? 0n : T * 1000n + BigInt(nanos),
    observed_time_unix_nano: observed === undefined ? null : T * 1000n + BigInt(observed),
    body: name,
  });
}

before(async () => {
  dir = await mkdtemp(join(tmpdir(), 'otelake-read-order-'));
  layout = new InstanceLayout(dir, 'x');
  // Arrival: day 05-01 first, then the two files of day 05-02 in the order written.
  await appendRows(layout, '2026-05-01', 'logs', [tie('c1', 9)]);
  await appendRows(layout, '2026-05-02', 'logs', [tie('a1', 5), tie('a2', 9), tie('a3', 9), tie('d1', 0, 7)]);
  await appendRows(layout, '2026-05-02', 'logs', [tie('b1', 9), tie('b2', 1)]);
  // A newer and an older row around the ties.
  await appendRows(layout, '2026-05-02', 'logs', [
    fullRow('logs', {
      project_id: 'ties',
      event_ts: T + 1n,
      time_unix_nano: (T + 1n) * 1000n,
      body: 'newer',
    }),
    fullRow('logs', {
      project_id: 'ties',
      event_ts: T - 1n,
      time_unix_nano: (T - 1n) * 1000n,
      body: 'older',
    }),
  ]);
  // Spans tie on start_time_unix_nano; links have no time of their own: arrival decides.
  await appendRows(layout, '2026-05-02', 'spans', [
    fullRow('spans', { project_id: 'ties', event_ts: T, start_time_unix_nano: T * 1000n + 2n, name: 's2' }),
    fullRow('spans', { project_id: 'ties', event_ts: T, start_time_unix_nano: T * 1000n + 8n, name: 's8' }),
  ]);
  await appendRows(layout, '2026-05-02', 'span_links', [
    fullRow('span_links', { project_id: 'ties', event_ts: T, span_name: 'l1' }),
    fullRow('span_links', { project_id: 'ties', event_ts: T, span_name: 'l2' }),
  ]);
  await closeDeltaWorkers();
});

after(async () => {
  readHooks.beforeSlice = undefined;
  await closeReadWorkers();
  await rm(dir, { recursive: true, force: true });
});

const TIE_ORDER = ['newer', 'b1', 'a3', 'a2', 'c1', 'd1', 'a1', 'b2', 'older'];

describe('read order', () => {
  test('newest first by event_ts, then the nanosecond time, then the newest arrival', async () => {
    const rows = await readTable(layout, 'logs', { select: ['body'] });
    assert.deepEqual(
      rows.map((r) => r.body),
      TIE_ORDER,
    );
    const limited = await readTable(layout, 'logs', { select: ['body'], maxRows: 4 });
    assert.deepEqual(
      limited.map((r) => r.body),
      TIE_ORDER.slice(0, 4),
    );
    // With filters, in rounds of one file: the rounds meet the same order.
    readHooks.firstRoundRows = 1;
    try {
      const rounds = await readTable(layout, 'logs', { select: ['body'], maxRows: 6, projectId: 'ties' });
      assert.deepEqual(
        rounds.map((r) => r.body),
        TIE_ORDER.slice(0, 6),
      );
    } finally {
      readHooks.firstRoundRows = undefined;
    }
  });

  test('the lazy frame orders the same way', async () => {
    const lazy = await readTable(layout, 'logs', { select: ['body'] }, { returnAs: 'lazy' });
    const rows = await rowsFromIpc(lazy.collectSync().writeIPC());
    assert.deepEqual(
      rows.map((r) => r.body),
      TIE_ORDER,
    );
  });

  test('a slice at a time: the same rows in the same order', async () => {
    const slices: string[][] = [];
    const tasks: string[] = [];
    readHooks.onTask = (task) => tasks.push(task);
    try {
      for await (const chunk of streamRows(layout, 'logs', { select: ['body'] }, { chunkBytes: 1 }))
        slices.push(chunk.rows.map((r) => r.body as string));
    } finally {
      readHooks.onTask = undefined;
    }
    assert.ok(slices.length > 2, `${slices.length} slices`);
    assert.deepEqual(slices.flat(), TIE_ORDER);
    // The first slice comes with the keys; each later one is a task of its own.
    assert.deepEqual(tasks, ['keys', ...Array<string>(slices.length - 1).fill('fetch')]);
  });

  test('a read that fits one slice is one task for the query worker', async () => {
    const tasks: string[] = [];
    readHooks.onTask = (task) => tasks.push(task);
    try {
      const rows = await readTable(layout, 'logs', { select: ['body'], maxRows: 4 });
      assert.deepEqual(
        rows.map((r) => r.body),
        TIE_ORDER.slice(0, 4),
      );
      assert.deepEqual(tasks, ['keys']);
      tasks.length = 0;
      assert.deepEqual(await readTable(layout, 'logs', { projectId: 'nobody' }), []);
      assert.deepEqual(tasks, ['keys']);
    } finally {
      readHooks.onTask = undefined;
    }
  });

  test('spans tie on their start time, links on their arrival', async () => {
    const spans = await readTable(layout, 'spans', { select: ['name'] });
    assert.deepEqual(
      spans.map((r) => r.name),
      ['s8', 's2'],
    );
    const links = await readTable(layout, 'span_links', { select: ['span_name'] });
    assert.deepEqual(
      links.map((r) => r.span_name),
      ['l2', 'l1'],
    );
  });
});

describe('event-time window', () => {
  test('since is inclusive, until exclusive, at the microsecond', async () => {
    const bodies = async (q: object) =>
      (await readTable(layout, 'logs', { select: ['body'], ...q })).map((r) => r.body);
    assert.deepEqual(await bodies({ since: '2026-05-02T10:00:00.000001Z' }), ['newer']);
    assert.deepEqual(
      await bodies({ since: '2026-05-02T10:00:00Z', until: '2026-05-02T10:00:00.000001Z' }),
      TIE_ORDER.slice(1, 8),
    );
    assert.deepEqual(await bodies({ until: '2026-05-02T10:00:00Z' }), ['older']);
    assert.deepEqual(await bodies({ since: new Date('2026-05-02T10:00:00Z'), maxRows: 2 }), ['newer', 'b1']);
    assert.deepEqual(await bodies({ since: '2026-05-03' }), []);
  });

  test('a row stamped ahead of its arrival, filed under the day before its event, is found', async () => {
    // c1 arrived on 05-01; its event time is 05-02. A 05-02 window still reads day 05-01 (the day
    // before since may hold rows stamped ahead of their arrival).
    const rows = await readTable(layout, 'logs', {
      select: ['body'],
      since: '2026-05-02T00:00:00Z',
      until: '2026-05-03T00:00:00Z',
    });
    assert.ok(rows.some((r) => r.body === 'c1'));
    assert.equal(firstDayOfWindow(T), '2026-05-01');
  });

  test('durations count back from now; instants take offsets; bad input names the parameter', () => {
    const now = 1_800_000_000_000_000n;
    assert.equal(normalizeQuery('logs', { since: '15m' }, now).sinceUs, now - 900_000_000n);
    assert.equal(normalizeQuery('logs', { since: '1h30m', until: '90s' }, now).sinceUs, now - 5_400_000_000n);
    assert.equal(parseDurationUs('2d'), 172_800_000_000n);
    assert.equal(parseDurationUs('15'), null);
    assert.equal(parseInstantUs('2026-05-02T12:00:00.123456789+02:00'), T + 123_456n);
    assert.equal(parseInstantUs('2026-05-02'), BigInt(Date.parse('2026-05-02T00:00:00Z')) * 1000n);
    assert.equal(parseInstantUs('2026-05-02T10:00:00'), null, 'a time needs its offset');
    assert.equal(parseInstantUs('2026-02-29T00:00:00Z'), null, 'no such day');
    // The years 0-99 are those years, not 1900-1999 (as Date.UTC would have them).
    assert.equal(parseInstantUs('0001-01-01'), BigInt(Date.parse('0001-01-01T00:00:00Z')) * 1000n);
    assert.equal(parseInstantUs('0099-12-31T23:59:59Z'), BigInt(Date.parse('0099-12-31T23:59:59Z')) * 1000n);
    assert.throws(() => normalizeQuery('logs', { since: 'last week' }), /invalid since "last week"/);
    assert.throws(() => normalizeQuery('logs', { until: 5 as unknown as string }), /invalid until 5/);
    assert.throws(
      () => normalizeQuery('logs', { since: '1h', until: '2h' }, now),
      /invalid since "1h": it is not before until "2h"/,
    );
  });
});

describe('bounds of the library reads', () => {
  test('maxBytes refuses a result that grows beyond it, naming the ways out', async () => {
    await assert.rejects(
      readTable(layout, 'logs', { maxBytes: 100 }),
      (err: unknown) => err instanceof ReadLimitError && /maxBytes \(100 bytes\).*maxRows/.test(err.message),
    );
    assert.equal((await readTable(layout, 'logs', { maxBytes: 1_000_000 })).length, TIE_ORDER.length);
  });

  test('maxFieldChars cuts long strings; a slice lists what it cut', async () => {
    const rows = await readTable(layout, 'logs', { select: ['body'], maxFieldChars: 2 });
    assert.deepEqual(
      rows.map((r) => r.body),
      TIE_ORDER.map((b) => b.slice(0, 2)),
    );
    const cuts = [];
    for await (const chunk of streamRows(layout, 'logs', { select: ['body'], maxFieldChars: 2 }))
      cuts.push(...chunk.cuts);
    assert.deepEqual(cuts, [
      { row: 0, column: 'body', chars: 5 },
      { row: 8, column: 'body', chars: 5 },
    ]);
  });

  test('an aborted signal cancels a read before its next slice', async () => {
    const controller = new AbortController();
    let slices = 0;
    readHooks.beforeSlice = async (slice) => {
      slices++;
      if (slice === 1) controller.abort(new Error('no longer wanted'));
    };
    const got: string[] = [];
    try {
      const stream = streamRows(
        layout,
        'logs',
        { select: ['body'] },
        { signal: controller.signal, chunkBytes: 1 },
      );
      await assert.rejects(async () => {
        for await (const chunk of stream) for (const r of chunk.rows) got.push(r.body as string);
      }, /no longer wanted/);
    } finally {
      readHooks.beforeSlice = undefined;
    }
    assert.equal(slices, 2);
    assert.deepEqual(got, TIE_ORDER.slice(0, got.length), 'only the first slice was read');
    await assert.rejects(
      readTable(layout, 'logs', {}, { signal: AbortSignal.abort(new Error('gone')) }),
      /gone/,
    );
  });
});

describe('the library front door', () => {
  test('Logger.readStream yields the rows in read order; read helpers take a signal', async () => {
    const logger = await Logger.open({ instanceId: 'x', instanceDir: dir, handleSignals: false });
    try {
      const bodies: unknown[] = [];
      for await (const row of logger.readStream('logs', { select: ['body'] })) bodies.push(row.body);
      assert.deepEqual(bodies, TIE_ORDER);
      const two = await logger.readLogs({
        select: ['body'],
        maxRows: 2,
        signal: new AbortController().signal,
      });
      assert.deepEqual(
        two.map((r) => r.body),
        TIE_ORDER.slice(0, 2),
      );
      await assert.rejects(logger.readLogs({ signal: AbortSignal.abort(new Error('nope')) }), /nope/);
    } finally {
      await logger.stop({ flush: 'none' });
    }
  });
});
