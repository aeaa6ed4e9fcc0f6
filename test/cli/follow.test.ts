// `otelake view --follow` as a user runs it: a viewer process beside a server process that keeps
// committing (and compacting after every second file), printing each new row once, in commit
// order, until Ctrl-C. Also: --since/--until on the command line, and the order of rows sharing
// an event_ts microsecond in the library, over HTTP and in the CLI.

import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { after, before, describe, test } from 'node:test';
import { lineFormat } from '../../src/cli/view.ts';
import { closeDeltaWorkers } from '../../src/delta/table.ts';
import { closeReadWorkers, readTable } from '../../src/read/index.ts';
import { InstanceLayout } from '../../src/storage/layout.ts';
import { appendRows, fullRow } from '../read/fixtures.ts';
import { type ChildServer, startChildServer } from '../server/helpers/child-server.ts';
import { getJson } from '../server/helpers/harness.ts';
import { killQuietly, LAUNCHER, otelake, tempDir, waitFor } from './helpers.ts';

let dir: { path: string; remove: () => Promise<void> };
let server: ChildServer;

before(async () => {
  dir = await tempDir('follow');
  server = await startChildServer(dir.path, 'default', {
    aggregator_config: { max_age_s: 0.05, min_batch_rows: 1 },
    // Every second file makes a compaction: new files are often compacted before the viewer looks.
    storage_config: { compact_min_files: 2 },
  });
});

after(async () => {
  await server?.stop();
  await dir.remove();
});

let written = 0;

/** Sends log records (one request) and waits until the server has committed them. */
async function send(records: { body: string; timeUnixNano: bigint }[]): Promise<void> {
  const res = await fetch(`${server.url}/v1/logs`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-project-id': 'follow' },
    body: JSON.stringify({
      resourceLogs: [
        {
          resource: { attributes: [{ key: 'service.name', value: { stringValue: 'tail' } }] },
          scopeLogs: [
            {
              logRecords: records.map((r) => ({
                timeUnixNano: String(r.timeUnixNano),
                severityNumber: 9,
                body: { stringValue: r.body },
              })),
            },
          ],
        },
      ],
    }),
  });
  assert.equal(res.status, 200, await res.text());
  written += records.length;
  await waitFor(
    'rows committed',
    async () => (await getJson(`${server.url}/healthz`)).body.aggregator.rows_written >= written,
  );
}

const nowNs = () => BigInt(Date.now()) * 1_000_000n;

describe('otelake view --follow', () => {
  test('prints the newest rows, then each row as it is committed, once, until Ctrl-C', async () => {
    await send([0, 1, 2].map((i) => ({ body: `first ${i}`, timeUnixNano: nowNs() + BigInt(i) })));
    const viewer = spawn(
      process.execPath,
      [LAUNCHER, 'view', '-D', dir.path, '-t', 'logs', '-n', '2', '-s', 'event_ts,body', '--follow'],
      { stdio: ['ignore', 'pipe', 'pipe'] },
    );
    let stdout = '';
    let stderr = '';
    viewer.stdout.setEncoding('utf8').on('data', (d: string) => {
      stdout += d;
    });
    viewer.stderr.setEncoding('utf8').on('data', (d: string) => {
      stderr += d;
    });
    const exited = new Promise<[number | null, NodeJS.Signals | null]>((resolve) =>
      viewer.on('exit', (code, signal) => resolve([code, signal])),
    );
    try {
      await waitFor('the first rows', () => /first 2/.test(stdout));
      const expected = ['first 1', 'first 2'];
      // New rows, one request at a time: late ones (an old timestamp) too, in commit order.
      for (let k = 0; k < 6; k++) {
        const batch = [0, 1].map((i) => `batch ${k} row ${i}`);
        const time = k === 3 ? BigInt(Date.parse('2020-01-01T00:00:00Z')) * 1_000_000n : nowNs();
        await send(batch.map((body, i) => ({ body, timeUnixNano: time + BigInt(i) })));
        expected.push(...batch);
      }
      await waitFor('every new row printed', () => stdout.includes('batch 5 row 1'));
      const lines = stdout.trimEnd().split('\n');
      assert.match(lines[0]!, /^event_ts\s+body$/);
      assert.deepEqual(
        lines.slice(1).map((l) => l.split(/\s{2,}/)[1]),
        expected,
      );
      assert.match(lines.find((l) => l.includes('batch 3 row 0'))!, /^2020-01-01T00:00:00\.000000Z /);
    } finally {
      viewer.kill('SIGINT');
    }
    // A viewer that ignored Ctrl-C must not outlive the test.
    const guard = setTimeout(() => killQuietly(viewer), 15_000);
    const [code] = await exited;
    clearTimeout(guard);
    assert.equal(code, 130);
    assert.equal(stderr, '');
  });

  test('--since and --until pick rows by event time; bad values are usage errors', async () => {
    await send([
      { body: 'from 2021', timeUnixNano: BigInt(Date.parse('2021-06-01T12:00:00Z')) * 1_000_000n },
    ]);
    const view = (...args: string[]) =>
      otelake(['view', '-D', dir.path, '-t', 'logs', '-s', 'body', ...args]);
    const r = await view('--since', '2021-06-01', '--until', '2021-06-02T00:00:00Z');
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout, /from 2021/);
    assert.match(r.stdout, /1 newest row of logs since 2021-06-01 until 2021-06-02T00:00:00Z/);
    const recent = await view('--since', '1h', '-n', '50');
    assert.equal(recent.code, 0, recent.stderr);
    assert.doesNotMatch(recent.stdout, /from 2021|batch 3/);
    assert.match(recent.stdout, /batch 5 row 1/);

    const bad = await view('--since', 'yesterday');
    assert.equal(bad.code, 2);
    assert.match(bad.stderr, /option '--since <time>' argument 'yesterday' is invalid/);
    const order = await view('--since', '1h', '--until', '2h');
    assert.equal(order.code, 2);
    assert.match(order.stderr, /--since "1h": it is not before --until "2h"/);
  });
});

describe('the same order in the library, over HTTP and in the CLI', () => {
  test('rows sharing an event_ts microsecond: by nanosecond time, then newest arrival first', async () => {
    const tie = await tempDir('ties');
    let reader: ChildServer | undefined;
    try {
      const layout = new InstanceLayout(tie.path, 'default');
      const us = BigInt(Date.parse('2026-03-03T03:03:03Z')) * 1000n;
      const row = (body: string, nanos: bigint) =>
        fullRow('logs', { project_id: 'p', event_ts: us, time_unix_nano: us * 1000n + nanos, body });
      await appendRows(layout, '2026-03-03', 'logs', [row('tie 5', 5n), row('tie 9a', 9n)]);
      await appendRows(layout, '2026-03-03', 'logs', [row('tie 9b', 9n), row('tie 1', 1n)]);
      await closeDeltaWorkers();
      const expected = ['tie 9b', 'tie 9a', 'tie 5', 'tie 1'];

      const library = await readTable(layout, 'logs', { select: ['body'] });
      assert.deepEqual(
        library.map((r) => r.body),
        expected,
      );
      const cli = await otelake(['view', '-D', tie.path, '-t', 'logs', '-s', 'body']);
      assert.equal(cli.code, 0, cli.stderr);
      assert.deepEqual(
        [...cli.stdout.matchAll(/│ (tie \w+)\s+│/g)].map((m) => m[1]),
        expected,
      );
      reader = await startChildServer(tie.path, 'default');
      const { body } = await getJson(`${reader.url}/api/logs?select=body`);
      assert.deepEqual(
        body.rows.map((r: { body: string }) => r.body),
        expected,
      );
    } finally {
      await reader?.stop();
      await closeReadWorkers();
      await tie.remove();
    }
  });
});

describe('--follow lines', () => {
  test('aligned columns fixed up front, numbers to the right, hideable columns dropped first', () => {
    const first = [
      {
        event_ts: '2026-03-03T03:03:03.000001Z',
        name: 'GET /',
        duration_ns: '1200',
        trace_id: 'ab'.repeat(16),
      },
    ];
    const wide = lineFormat('spans', ['event_ts', 'name', 'duration_ns', 'trace_id'], first, 200);
    // Widths: a timestamp 27, a name 60 (free text), numbers 12 (right-aligned), a trace id 32.
    const row = (...cells: string[]) =>
      [cells[0]!.padEnd(27), cells[1]!.padEnd(60), cells[2]!.padStart(12), cells[3]!].join('  ').trimEnd();
    assert.equal(wide.header, row('event_ts', 'name', 'duration_ns', 'trace_id'));
    const later = wide.line({
      event_ts: '2026-03-03T03:03:04.000001Z',
      name: 'x\ny',
      duration_ns: '7',
      trace_id: null,
    });
    assert.equal(later, row('2026-03-03T03:03:04.000001Z', 'x\\ny', '7', ''));
    const narrow = lineFormat('spans', ['event_ts', 'name', 'duration_ns', 'trace_id'], first, 80, [
      'trace_id',
    ]);
    assert.match(narrow.header, /^event_ts\s+name\s+duration_ns$/);
    assert.ok(narrow.line(first[0]!).length <= 80);
  });
});
