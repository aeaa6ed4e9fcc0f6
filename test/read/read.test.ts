import assert from 'node:assert/strict';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import type { LazyDataFrame } from 'nodejs-polars';
import { rowsFromIpc } from '../../src/read/arrow-rows.ts';
import { closeReadWorkers, type ReadQuery, readTable, rowToJson } from '../../src/read/index.ts';
import { readHooks } from '../../src/read/query.ts';
import { type Row, SCHEMAS, TABLE_NAMES, type TableName } from '../../src/schema/tables.ts';
import { InstanceLayout } from '../../src/storage/layout.ts';
import { appendRows, DAYS, expected, type Fixture, fullRow, makeFixture } from './fixtures.ts';

let fx: Fixture;

before(async () => {
  fx = await makeFixture();
});

after(async () => {
  await closeReadWorkers();
  await fx?.cleanup();
});

const read = (table: TableName, q: ReadQuery = {}) => readTable(fx.layout, table, q);

async function collectLazy(lf: LazyDataFrame): Promise<Row[]> {
  return rowsFromIpc(lf.collectSync().writeIPC());
}

describe('readTable over Delta tables', () => {
  test('every table: all rows of every day, every column, newest first', async () => {
    for (const table of TABLE_NAMES) {
      const rows = await read(table);
      const want = expected(fx, table);
      assert.ok(want.length > 0);
      assert.deepEqual(rows, want, table);
      assert.deepEqual(
        Object.keys(rows[0]!),
        SCHEMAS[table].columns.map((c) => c.name),
      );
    }
  });

  test('exact int64 beyond 2^53 and negative, nulls, NaN/Infinity/-0 and lists survive', async () => {
    const hist = await read('metrics_hist');
    const big = hist.flatMap((r) => (r.bucket_counts as bigint[] | null) ?? []);
    assert.ok(big.includes(2n ** 63n - 1n) && big.includes(-(2n ** 63n)) && big.includes(2n ** 53n + 1n));
    assert.ok(
      hist.some((r) => r.bucket_counts === null) &&
        hist.some((r) => Array.isArray(r.bucket_counts) && r.bucket_counts.length === 0),
    );
    assert.ok(hist.every((r) => typeof r.event_ts === 'bigint' && typeof r.zero_count === 'bigint'));
    assert.ok(hist.some((r) => Array.isArray(r.quantile_values) && Number.isNaN(r.quantile_values[0])));
    const points = await read('metrics_points');
    const ints = points.map((r) => r.value_int).filter((v) => v !== null) as bigint[];
    assert.ok(ints.some((v) => v > 2n ** 53n) && ints.some((v) => v < -(2n ** 53n)));
    const doubles = points.map((r) => r.value_double);
    assert.ok(
      doubles.some((v) => Number.isNaN(v)) &&
        doubles.includes(Number.NEGATIVE_INFINITY) &&
        doubles.some((v) => Object.is(v, -0)),
    );
    assert.ok(points.some((r) => r.is_monotonic === true) && points.some((r) => r.is_monotonic === false));
  });

  test('each filter, alone and combined', async () => {
    const cases: [TableName, ReadQuery, (r: Row) => boolean][] = [
      ['logs', { projectId: 'beta' }, (r) => r.project_id === 'beta'],
      ['logs', { serviceName: 'worker' }, (r) => r.service_name === 'worker'],
      ['logs', { severityGe: 17 }, (r) => r.severity_number !== null && (r.severity_number as number) >= 17],
      ['logs', { severityGe: 0 }, (r) => r.severity_number !== null],
      // literal substring: '.' is no wildcard, so "axb" rows do not match
      ['logs', { bodyLike: 'a.b' }, (r) => typeof r.body === 'string' && r.body.includes('a.b')],
      [
        'logs',
        { traceId: '0000000000000000000000000000000A' },
        (r) => r.trace_id === '0000000000000000000000000000000a',
      ],
      ['logs', { spanId: '0000000000000003' }, (r) => r.span_id === '0000000000000003'],
      [
        'logs',
        { projectId: 'alpha', serviceName: 'api', severityGe: 10, bodyLike: 'request' },
        (r) =>
          r.project_id === 'alpha' &&
          r.service_name === 'api' &&
          (r.severity_number as number | null) !== null &&
          (r.severity_number as number) >= 10 &&
          String(r.body).includes('request'),
      ],
      ['spans', { name: 'POST /b' }, (r) => r.name === 'POST /b'],
      [
        'spans',
        { traceId: '00000000000000000000000000000002', projectId: 'gamma' },
        (r) => r.trace_id === '00000000000000000000000000000002' && r.project_id === 'gamma',
      ],
      ['span_events', { name: 'retry' }, (r) => r.name === 'retry'],
      ['span_events', { spanId: '0000000000000005' }, (r) => r.span_id === '0000000000000005'],
      [
        'span_links',
        { traceId: '00000000000000000000000000000001' },
        (r) => r.trace_id === '00000000000000000000000000000001',
      ],
      ['metrics_points', { metricName: 'mem' }, (r) => r.metric_name === 'mem'],
      [
        'metrics_points',
        { metricType: 'sum', projectId: 'beta' },
        (r) => r.metric_type === 'sum' && r.project_id === 'beta',
      ],
      [
        'metrics_hist',
        { metricName: 'size', metricType: 'summary' },
        (r) => r.metric_name === 'size' && r.metric_type === 'summary',
      ],
      ['logs', { projectId: 'nobody' }, () => false],
    ];
    for (const [table, q, keep] of cases) {
      const want = expected(fx, table, { keep });
      assert.deepEqual(await read(table, q), want, `${table} ${JSON.stringify(q)}`);
      if (!(table === 'logs' && q.projectId === 'nobody'))
        assert.ok(want.length > 0, `${JSON.stringify(q)} selects rows`);
      assert.ok(want.length < expected(fx, table).length, `${JSON.stringify(q)} filters rows out`);
    }
  });

  test('maxRows keeps the newest rows, with and without filters, across days and files', async () => {
    for (const maxRows of [1, 3, 41, 79, 80, 81, 1000]) {
      assert.deepEqual(
        await read('logs', { maxRows }),
        expected(fx, 'logs', { maxRows }),
        `maxRows ${maxRows}`,
      );
    }
    const keep = (r: Row) =>
      r.project_id === 'gamma' &&
      (r.severity_number as number | null) !== null &&
      (r.severity_number as number) >= 5;
    for (const maxRows of [1, 7, 30, 500]) {
      assert.deepEqual(
        await read('logs', { projectId: 'gamma', severityGe: 5, maxRows }),
        expected(fx, 'logs', { keep, maxRows }),
      );
    }
  });

  test('filtered maxRows read in many small rounds over interleaved files equals the whole answer', async () => {
    readHooks.firstRoundRows = 1; // one file in the first round, then 4x more rows per round
    try {
      // alpha rows are in both files of every day, whose times interleave
      const keep = (r: Row) => r.project_id === 'alpha';
      for (const maxRows of [1, 10, 25, 60, 200]) {
        assert.deepEqual(
          await read('logs', { projectId: 'alpha', maxRows }),
          expected(fx, 'logs', { keep, maxRows }),
          `maxRows ${maxRows}`,
        );
      }
    } finally {
      readHooks.firstRoundRows = undefined;
    }
  });

  test('select projects columns in the order asked, and ordering still uses event_ts', async () => {
    const select = ['body', 'flags', 'project_id'];
    const rows = await read('logs', { select, maxRows: 10 });
    assert.deepEqual(rows, expected(fx, 'logs', { select, maxRows: 10 }));
    assert.deepEqual(Object.keys(rows[0]!), select);
    const dup = await read('spans', { select: ['name', 'name', 'event_ts'], maxRows: 2 });
    assert.deepEqual(Object.keys(dup[0]!), ['name', 'event_ts']);
  });

  test('date range: inclusive bounds, open ends, days without the table skipped', async () => {
    const [d1, d2, d3] = DAYS;
    assert.deepEqual(await read('logs', { dateFrom: d2 }), expected(fx, 'logs', { dateFrom: d2 }));
    assert.deepEqual(await read('logs', { dateTo: d2 }), expected(fx, 'logs', { dateTo: d2 }));
    assert.deepEqual(
      await read('logs', { dateFrom: d2, dateTo: d2 }),
      expected(fx, 'logs', { dateFrom: d2, dateTo: d2 }),
    );
    assert.deepEqual(
      await read('logs', { dateFrom: d1, dateTo: d3, maxRows: 5 }),
      expected(fx, 'logs', { maxRows: 5 }),
    );
    assert.deepEqual(await read('logs', { dateFrom: '2027-01-01' }), []);
    // 2026-03-04 holds only spans: spans see it, logs do not
    const spans = await read('spans', { dateFrom: '2026-03-04' });
    assert.equal(spans.length, 1);
    assert.deepEqual(await read('logs', { dateFrom: '2026-03-04' }), []);
  });

  test('lazy result equals the objects result', async () => {
    const queries: [TableName, ReadQuery][] = [
      ['logs', {}],
      ['logs', { projectId: 'beta', severityGe: 9, maxRows: 7, select: ['event_ts', 'body', 'flags'] }],
      ['logs', { maxRows: 3 }],
      ['metrics_hist', { metricName: 'latency' }],
      ['spans', { dateFrom: DAYS[1], maxRows: 4 }],
    ];
    for (const [table, q] of queries) {
      const lazy = await readTable(fx.layout, table, q, { returnAs: 'lazy' });
      assert.deepEqual(await collectLazy(lazy), await read(table, q), `${table} ${JSON.stringify(q)}`);
    }
  });

  test('rowToJson of read rows is JSON-safe and exact', async () => {
    const [row] = await read('metrics_hist', { maxRows: 1 });
    const json = rowToJson(row!, 'metrics_hist');
    const text = JSON.stringify(json);
    const back = JSON.parse(text) as Record<string, unknown>;
    assert.equal(back.count, row!.count === null ? null : String(row!.count));
    assert.match(String(back.event_ts), /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z$/);
    const us = row!.event_ts as bigint;
    assert.equal(
      back.event_ts,
      `${new Date(Number(us / 1000n)).toISOString().slice(0, -1)}${String(us % 1000n).padStart(3, '0')}Z`,
    );
  });

  test('storage: local reads local tables; s3 needs the S3 settings and names the missing ones', async () => {
    assert.deepEqual(
      await read('logs', { storage: 'local', maxRows: 2 }),
      expected(fx, 'logs', { maxRows: 2 }),
    );
    const saved = { ...process.env };
    try {
      for (const k of Object.keys(process.env)) if (/^(S3_|CLOUD_)/.test(k)) delete process.env[k];
      process.env.S3_BUCKET = 'bucket';
      await assert.rejects(read('logs', { storage: 's3' }), (err: Error) => {
        assert.ok(err instanceof TypeError);
        assert.match(
          err.message,
          /storage 's3' needs the object-storage configuration; missing: accessKeyId \(CLOUD_ACCESS_KEY_ID or S3_ACCESS_KEY_ID\), secretAccessKey \(.*S3_SECRET_ACCESS_KEY\), region \(CLOUD_REGION or S3_REGION\), endpointUrl \(CLOUD_ENDPOINT_URL or S3_URL\)/,
        );
        assert.doesNotMatch(err.message, /bucket/);
        return true;
      });
      Object.assign(process.env, {
        S3_ACCESS_KEY_ID: 'k',
        S3_SECRET_KEY: 's',
        S3_REGION: '',
        S3_URL: 'http://127.0.0.1:1',
      });
      // Configured: read from there (nothing listens on that port).
      await assert.rejects(
        read('logs', { storage: 's3' }),
        /cannot reach the object storage at http:\/\/127\.0\.0\.1:1 \(ECONNREFUSED\)/,
      );
    } finally {
      for (const k of Object.keys(process.env)) if (!(k in saved)) delete process.env[k];
      Object.assign(process.env, saved);
    }
  });
});

describe('readTable on sparse instances', () => {
  test('a missing instance reads empty, for rows and lazily', async () => {
    const layout = new InstanceLayout(join(tmpdir(), 'otelake-read-nothing-here'), 'none');
    for (const table of TABLE_NAMES) assert.deepEqual(await readTable(layout, table, { maxRows: 5 }), []);
    const lazy = await readTable(layout, 'logs', { select: ['body'] }, { returnAs: 'lazy' });
    const df = lazy.collectSync();
    assert.equal(df.height, 0);
    assert.deepEqual(df.columns, ['body']);
  });

  test('a table folder replaced by a new table with as many commits is read anew', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'otelake-read-replaced-'));
    try {
      const layout = new InstanceLayout(dir, 'x');
      const day = '2026-05-04';
      const row = (body: string) =>
        fullRow('logs', { project_id: 'p', event_ts: BigInt(Date.parse(`${day}T12:00:00Z`)) * 1000n, body });
      await appendRows(layout, day, 'logs', [row('first table')]);
      assert.deepEqual(
        (await readTable(layout, 'logs', {})).map((r) => r.body),
        ['first table'],
      );
      // The same log file names (versions 0 and 1), another table.
      await rm(layout.tableDir(day, 'logs'), { recursive: true });
      await appendRows(layout, day, 'logs', [row('second table')]);
      assert.deepEqual(
        (await readTable(layout, 'logs', {})).map((r) => r.body),
        ['second table'],
      );
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  test('day folders without tables, folders without a committed table and stray names are skipped', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'otelake-read-sparse-'));
    try {
      const layout = new InstanceLayout(dir, 'x');
      await mkdir(layout.dayDir('2026-05-01'), { recursive: true });
      await mkdir(join(layout.tableDir('2026-05-02', 'logs'), '_delta_log'), { recursive: true });
      await mkdir(join(layout.daysDir, 'not-a-day'), { recursive: true });
      await mkdir(join(layout.root, 'index'), { recursive: true });
      await writeFile(layout.daysIndex, '{"day":"2026-05-03","phase":"open","at":"x"}\n{"day":"2026-05-0');
      assert.deepEqual(await readTable(layout, 'logs', {}), []);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  test('auto reads a shipped day from object storage (refused clearly without its settings); local skips it', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'otelake-read-shipped-'));
    const saved = { ...process.env };
    try {
      for (const k of Object.keys(process.env)) if (/^(S3_|CLOUD_)/.test(k)) delete process.env[k];
      const layout = new InstanceLayout(dir, 'x');
      await mkdir(join(layout.root, 'index'), { recursive: true });
      await writeFile(
        layout.daysIndex,
        ['sealed', 'uploaded', 'verified', 'cleaned']
          .map((phase) => JSON.stringify({ day: '2026-05-01', phase, at: 'x' }))
          .join('\n') + '\n',
      );
      assert.deepEqual(await readTable(layout, 'logs', { storage: 'local' }), []);
      await assert.rejects(readTable(layout, 'logs', {}), /missing: bucket \(S3_BUCKET\)/);
      Object.assign(process.env, {
        S3_BUCKET: 'b',
        S3_ACCESS_KEY_ID: 'k',
        S3_SECRET_KEY: 's',
        S3_REGION: '',
        S3_URL: 'http://127.0.0.1:1',
      });
      await assert.rejects(
        readTable(layout, 'logs', {}),
        /cannot reach the object storage at http:\/\/127\.0\.0\.1:1/,
      );
      // outside the range it is not needed
      assert.deepEqual(await readTable(layout, 'logs', { dateFrom: '2026-05-02' }), []);
    } finally {
      for (const k of Object.keys(process.env)) if (!(k in saved)) delete process.env[k];
      Object.assign(process.env, saved);
      await rm(dir, { recursive: true, force: true });
    }
  });
});
