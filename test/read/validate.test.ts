import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { type FileEntry, pruneForNewest } from '../../src/read/files.ts';
import { filtersOf, normalizeQuery, type ReadQuery, validateQuery } from '../../src/read/index.ts';
import { SCHEMAS, type TableName } from '../../src/schema/tables.ts';
import { missingS3Settings } from '../../src/storage/s3-config.ts';

function rejects(table: TableName, q: unknown, message: RegExp): void {
  assert.throws(
    () => validateQuery(table, q as ReadQuery),
    (err: unknown) => {
      assert.ok(err instanceof TypeError, `expected a TypeError, got ${err}`);
      assert.match(err.message, message);
      return true;
    },
  );
}

describe('validateQuery', () => {
  test('accepts a full valid logs query and normalizes it', () => {
    const q = normalizeQuery('logs', {
      dateFrom: '2026-03-01',
      dateTo: '2026-03-02',
      projectId: 'p',
      serviceName: 's',
      severityGe: 17,
      bodyLike: 'a.b',
      traceId: 'ABCDEF0123456789abcdef0123456789',
      spanId: '0123456789ABCDEF',
      select: ['body', 'event_ts', 'body'],
      maxRows: 5,
      storage: 'local',
    });
    assert.deepEqual(q.filters, [
      { column: 'project_id', op: 'eq', value: 'p' },
      { column: 'service_name', op: 'eq', value: 's' },
      { column: 'severity_number', op: 'ge', value: 17 },
      { column: 'body', op: 'contains', value: 'a.b' },
      { column: 'trace_id', op: 'eq', value: 'abcdef0123456789abcdef0123456789' },
      { column: 'span_id', op: 'eq', value: '0123456789abcdef' },
    ]);
    assert.deepEqual(q.select, ['body', 'event_ts']);
    assert.equal(q.maxRows, 5);
    assert.equal(q.storage, 'local');
    assert.equal(q.dateFrom, '2026-03-01');
  });

  test('defaults: every column, no limit, auto storage, open range; null counts as absent', () => {
    const q = normalizeQuery('spans', { projectId: undefined, maxRows: null } as unknown as ReadQuery);
    assert.deepEqual(
      q.select,
      SCHEMAS.spans.columns.map((c) => c.name),
    );
    assert.equal(q.maxRows, null);
    assert.equal(q.storage, 'auto');
    assert.equal(q.dateFrom, null);
    assert.deepEqual(q.filters, []);
  });

  test('filters of each table', () => {
    assert.deepEqual(filtersOf('logs'), [
      'projectId',
      'serviceName',
      'severityGe',
      'bodyLike',
      'traceId',
      'spanId',
    ]);
    assert.deepEqual(filtersOf('spans'), ['projectId', 'serviceName', 'traceId', 'spanId', 'name']);
    assert.deepEqual(filtersOf('span_events'), ['projectId', 'serviceName', 'traceId', 'spanId', 'name']);
    assert.deepEqual(filtersOf('span_links'), ['projectId', 'serviceName', 'traceId', 'spanId']);
    assert.deepEqual(filtersOf('metrics_points'), ['projectId', 'serviceName', 'metricName', 'metricType']);
    assert.deepEqual(filtersOf('metrics_hist'), ['projectId', 'serviceName', 'metricName', 'metricType']);
  });

  test('malformed days', () => {
    rejects(
      'logs',
      { dateFrom: '2026-3-01' },
      /invalid dateFrom "2026-3-01": expected a UTC day as YYYY-MM-DD/,
    );
    rejects('logs', { dateTo: '2026-02-30' }, /invalid dateTo "2026-02-30"/);
    rejects('logs', { dateTo: 20260301 }, /invalid dateTo 20260301/);
    rejects('logs', { dateFrom: '../etc' }, /invalid dateFrom/);
  });

  test('dateFrom after dateTo', () => {
    rejects(
      'logs',
      { dateFrom: '2026-03-02', dateTo: '2026-03-01' },
      /dateFrom 2026-03-02: it is after dateTo 2026-03-01/,
    );
  });

  test('unknown select columns list the valid ones', () => {
    rejects(
      'logs',
      { select: ['body', 'nope'] },
      /invalid select: unknown column "nope" for table logs; valid columns: project_id, event_ts,.* body,/,
    );
    rejects('spans', { select: ['a', 'b'] }, /unknown columns "a", "b" for table spans/);
    rejects('logs', { select: [] }, /invalid select \[\]: expected a non-empty list/);
    rejects('logs', { select: 'body' }, /invalid select "body"/);
    rejects('logs', { select: [1] }, /unknown column 1 for table logs/);
  });

  test('storage values', () => {
    rejects('logs', { storage: 'gcs' }, /invalid storage "gcs": one of auto, local, s3/);
  });

  test('filters not valid for the table name the filter and the valid ones', () => {
    rejects(
      'spans',
      { severityGe: 9 },
      /severityGe is not a filter of table spans: filters of spans are projectId, serviceName, traceId, spanId, name/,
    );
    rejects('spans', { bodyLike: 'x' }, /bodyLike is not a filter of table spans/);
    rejects('span_links', { name: 'x' }, /name is not a filter of table span_links/);
    rejects('logs', { metricName: 'cpu' }, /metricName is not a filter of table logs/);
    rejects('spans', { metricType: 'gauge' }, /metricType is not a filter of table spans/);
    rejects('metrics_points', { traceId: '0'.repeat(32) }, /traceId is not a filter of table metrics_points/);
    rejects('metrics_hist', { spanId: '0'.repeat(16) }, /spanId is not a filter of table metrics_hist/);
  });

  test('bad numbers', () => {
    for (const v of [1.5, Number.NaN, Number.POSITIVE_INFINITY, '17', 17n, 2 ** 31, -(2 ** 31) - 1]) {
      rejects(
        'logs',
        { severityGe: v },
        /invalid severityGe .*: expected an integer severity number \(int32\)/,
      );
    }
    // Library rows may carry any severity number, a negative one too.
    for (const v of [-5, -(2 ** 31), 2 ** 31 - 1]) validateQuery('logs', { severityGe: v });
    for (const v of [0, -3, 2.5, Number.NaN, '10', 10n, 2 ** 53]) {
      rejects('logs', { maxRows: v }, /invalid maxRows .*: expected a positive integer/);
    }
  });

  test('ids and strings', () => {
    rejects('logs', { traceId: 'abc' }, /invalid traceId "abc": expected 32 hexadecimal characters/);
    rejects('logs', { traceId: 'g'.repeat(32) }, /invalid traceId/);
    rejects(
      'spans',
      { spanId: '0'.repeat(15) },
      /invalid spanId "0{15}": expected 16 hexadecimal characters/,
    );
    rejects('logs', { projectId: 5 }, /invalid projectId 5: expected a string/);
    rejects('logs', { serviceName: ['a'] }, /invalid serviceName \["a"\]: expected a string/);
    rejects('logs', { bodyLike: {} }, /invalid bodyLike \{\}: expected a string/);
    rejects('spans', { name: true }, /invalid name true: expected a string/);
    rejects('metrics_points', { metricName: 1 }, /invalid metricName 1/);
    rejects('metrics_hist', { metricType: 1 }, /invalid metricType 1/);
  });

  test('empty strings and project ids outside the rule are refused, as over HTTP', () => {
    rejects('logs', { bodyLike: '' }, /invalid bodyLike "": expected a non-empty string/);
    rejects('logs', { serviceName: '' }, /invalid serviceName "": expected a non-empty string/);
    rejects('spans', { name: '' }, /invalid name ""/);
    rejects('metrics_points', { metricName: '' }, /invalid metricName ""/);
    rejects('logs', { projectId: '' }, /invalid projectId ""/);
    for (const id of ['..x', '../../etc', '-lead', 'a b', 'x'.repeat(129)]) {
      rejects('logs', { projectId: id }, /invalid projectId .*: use 1-128 letters, digits/);
    }
    assert.deepEqual(normalizeQuery('logs', { projectId: 'Team-a.b_1' }).filters, [
      { column: 'project_id', op: 'eq', value: 'Team-a.b_1' },
    ]);
  });

  test('unknown parameters, tables and query shapes', () => {
    rejects(
      'logs',
      { projectID: 'x' },
      /unknown query parameter "projectID": one of dateFrom, dateTo, since, until, select, maxRows, maxBytes, maxFieldChars, storage, projectId,/,
    );
    rejects('traces' as TableName, {}, /invalid table "traces": one of spans, span_events/);
    rejects('logs', 'x', /invalid query: expected an object/);
    rejects('logs', [], /invalid query: expected an object/);
  });
});

describe('pruneForNewest', () => {
  const f = (name: string, min: bigint | null, max: bigint | null, rows: number | null): FileEntry => ({
    path: name,
    arrival: 0,
    size: 0,
    minTs: min,
    maxTs: max,
    numRecords: rows,
  });

  test('keeps the newest files holding maxRows rows and every file overlapping them', () => {
    const files = [
      f('old', 0n, 99n, 100),
      f('mid', 100n, 199n, 100),
      f('overlap', 150n, 160n, 5),
      f('new', 200n, 299n, 100),
    ];
    assert.deepEqual(
      pruneForNewest(files, 100).map((x) => x.path),
      ['new'],
    );
    assert.deepEqual(
      pruneForNewest(files, 101).map((x) => x.path),
      ['mid', 'overlap', 'new'],
    );
    assert.deepEqual(
      pruneForNewest(files, 1000).map((x) => x.path),
      ['old', 'mid', 'overlap', 'new'],
    );
  });

  test('files with unknown bounds are always kept', () => {
    const files = [f('old', 0n, 99n, 100), f('unknown', null, null, null), f('new', 200n, 299n, 100)];
    assert.deepEqual(
      pruneForNewest(files, 50).map((x) => x.path),
      ['unknown', 'new'],
    );
  });
});

describe('missingS3Settings', () => {
  test('names what is missing; the region may be empty; aliases count', () => {
    assert.deepEqual(missingS3Settings({}), [
      'bucket',
      'accessKeyId',
      'secretAccessKey',
      'region',
      'endpointUrl',
    ]);
    assert.deepEqual(
      missingS3Settings({
        S3_BUCKET: 'b',
        S3_ACCESS_KEY_ID: 'k',
        S3_SECRET_ACCESS_KEY: 's',
        S3_REGION: '',
        S3_URL: 'http://127.0.0.1:9000',
      }),
      [],
    );
    assert.deepEqual(missingS3Settings({ S3_BUCKET: '', CLOUD_ACCESS_KEY_ID: 'k', CLOUD_REGION: 'eu' }), [
      'bucket',
      'secretAccessKey',
      'endpointUrl',
    ]);
  });
});
