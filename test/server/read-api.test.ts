// The read endpoints' limits and event-time parameters, against a real server in this process:
// answers cut short at read_response_limit_bytes, long values cut at read_field_limit_chars, a
// failure after the answer started, a client that goes away, since/until, and 400s naming the
// parameter.

import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, describe, test } from 'node:test';
import { closeDeltaWorkers } from '../../src/delta/table.ts';
import { readHooks } from '../../src/read/query.ts';
import type { Row } from '../../src/schema/tables.ts';
import { InstanceLayout } from '../../src/storage/layout.ts';
import { waitFor } from '../cli/helpers.ts';
import { appendRows, fullRow } from '../read/fixtures.ts';
import { getJson, type Json, startServer, type TestServer } from './helpers/harness.ts';

const PAST_DAY = '2026-01-05';
const dayStartUs = BigInt(Date.parse(`${PAST_DAY}T00:00:00Z`)) * 1000n;

after(async () => {
  readHooks.beforeSlice = undefined;
  readHooks.afterListing = undefined;
  await closeDeltaWorkers();
});

function logRow(project: string, i: number, body: string): Row {
  const ts = dayStartUs + BigInt(i) * 1000n;
  return fullRow('logs', { project_id: project, event_ts: ts, time_unix_nano: ts * 1000n, body });
}

/** Rows written straight into a past day's table (the server's logger writes only today's). */
async function writePastDay(s: TestServer, rows: Row[]): Promise<void> {
  await appendRows(new InstanceLayout(s.dir, 'test'), PAST_DAY, 'logs', rows);
}

const reads = async (s: TestServer): Promise<Json> => (await getJson(`${s.url}/healthz`)).body.reads;

describe('read limits', () => {
  test('an answer ends early at read_response_limit_bytes, as valid JSON saying so', async () => {
    // Every body is cut too: the list of cut values counts toward the limit.
    const s = await startServer({
      server_config: { read_response_limit_bytes: 8192, read_field_limit_chars: 500 },
    });
    try {
      await writePastDay(
        s,
        Array.from({ length: 50 }, (_, i) => logRow('p', i, `${i} ${'x'.repeat(1000)}`)),
      );
      const res = await fetch(`${s.url}/api/logs?project_id=p&select=body`);
      assert.equal(res.status, 200);
      const text = await res.text();
      assert.ok(Buffer.byteLength(text) <= 8192, `${Buffer.byteLength(text)} bytes`);
      const body = JSON.parse(text) as Json;
      assert.ok(body.count >= 5 && body.count < 16, `count ${body.count}`);
      assert.equal(body.rows.length, body.count);
      assert.equal(body.rows[0].body.split(' ')[0], '49', 'newest first');
      assert.equal(body.rows[0].body.length, 500);
      assert.equal(body.truncated_values.length, body.count);
      assert.equal(body.incomplete.reason, 'response_limit');
      assert.match(body.incomplete.message, /read_response_limit_bytes \(8192 bytes\)/);
      assert.equal((await reads(s)).cut_short, 1);

      // Within the limit nothing is said.
      const small = (await getJson(`${s.url}/api/logs?project_id=p&select=body&limit=2`)).body;
      assert.equal(small.count, 2);
      assert.equal(small.incomplete, undefined);
    } finally {
      await s.close();
    }
  });

  test('values longer than read_field_limit_chars are cut to whole characters, and listed', async () => {
    const s = await startServer({ server_config: { read_field_limit_chars: 10 } });
    try {
      await writePastDay(s, [
        logRow('p', 1, 'short'),
        logRow('p', 2, 'é'.repeat(25)),
        fullRow('logs', {
          ...logRow('p', 3, 'x'.repeat(11)),
          attributes: `{"k":"${'v'.repeat(20)}"}`,
        }),
      ]);
      const { status, body } = await getJson(`${s.url}/api/logs?project_id=p&select=body,attributes`);
      assert.equal(status, 200);
      assert.deepEqual(
        body.rows.map((r: Json) => r.body),
        ['x'.repeat(10), 'é'.repeat(10), 'short'],
      );
      assert.equal(body.rows[0].attributes, '{"k":"vvvv');
      assert.deepEqual(body.truncated_values, [
        { row: 0, column: 'body', chars: 11 },
        { row: 0, column: 'attributes', chars: 28 },
        { row: 1, column: 'body', chars: 25 },
      ]);
    } finally {
      await s.close();
    }
  });

  test('a failure after the answer started closes the connection: the client cannot take it as whole', async () => {
    const s = await startServer();
    try {
      // Incompressible bodies of 100 KB: an answer of 10 MB, read in several slices.
      await writePastDay(
        s,
        Array.from({ length: 100 }, (_, i) =>
          logRow('p', i, `${i} ${randomBytes(75_000).toString('base64')}`),
        ),
      );
      readHooks.beforeSlice = async (slice, files) => {
        if (slice !== 1) return;
        // The table's files vanish after the first slice was sent.
        const { unlink } = await import('node:fs/promises');
        for (const f of files) await unlink(f.path);
      };
      const res = await fetch(`${s.url}/api/logs?project_id=p&select=body`);
      assert.equal(res.status, 200);
      await assert.rejects(res.text());
      await waitFor('the failed read counted', async () => (await reads(s)).failed === 1);
      assert.equal((await reads(s)).in_flight, 0);
    } finally {
      readHooks.beforeSlice = undefined;
      await s.close();
    }
  });

  test('a client that goes away before its query runs: the query never runs, its slot is freed', async () => {
    const s = await startServer();
    try {
      await writePastDay(s, [logRow('p', 1, 'one')]);
      let release!: () => void;
      const listed = new Promise<void>((ok) => {
        readHooks.afterListing = async () => {
          ok();
          await new Promise<void>((r) => {
            release = r;
          });
        };
      });
      let sliced = 0;
      readHooks.beforeSlice = async () => {
        sliced++;
      };
      const client = new AbortController();
      const answer = fetch(`${s.url}/api/logs?project_id=p`, { signal: client.signal });
      await listed;
      client.abort();
      await assert.rejects(answer);
      await waitFor('the read cancelled', async () => (await reads(s)).cancelled === 1);
      readHooks.afterListing = undefined;
      release();
      const after = await reads(s);
      assert.equal(after.in_flight, 0);
      assert.equal(after.completed, 0);
      await new Promise((r) => setImmediate(r));
      assert.equal(sliced, 0, 'no row was read for a client that went away');
    } finally {
      readHooks.afterListing = undefined;
      readHooks.beforeSlice = undefined;
      await s.close();
    }
  });
});

describe('paths no route takes', () => {
  test("404 says so; under /api/ it lists the read endpoints (a table's name is not its path)", async () => {
    const s = await startServer();
    try {
      const table = await getJson(`${s.url}/api/metrics_points?limit=1`);
      assert.equal(table.status, 404);
      assert.equal(table.body.error, 'Not Found');
      assert.match(
        table.body.message,
        /^no route for GET \/api\/metrics_points; the read endpoints: \/api\/spans, .*\/api\/metrics\/points, \/api\/metrics\/hist/,
      );
      const other = await getJson(`${s.url}/nope`);
      assert.equal(other.status, 404);
      assert.equal(other.body.message, 'no route for GET /nope');
    } finally {
      await s.close();
    }
  });
});

describe('event-time reads over HTTP', () => {
  test('since/until select by event_ts, whatever day the rows arrived in', async () => {
    const s = await startServer();
    try {
      const now = BigInt(Date.now()) * 1_000_000n;
      const old = BigInt(Date.parse('2020-03-01T12:00:00Z')) * 1_000_000n;
      const result = await s.logger.ingestRows('logs', [
        { project_id: 'w', time_unix_nano: old, body: 'from 2020' },
        { project_id: 'w', time_unix_nano: old + 86_400_000_000_000n, body: 'a day later' },
        { project_id: 'w', time_unix_nano: now - 3_600_000_000_000n, body: 'an hour ago' },
        { project_id: 'w', time_unix_nano: now, body: 'now' },
      ]);
      assert.equal(result.accepted, 4);
      await waitFor(
        'rows written',
        async () => (await getJson(`${s.url}/api/logs?project_id=w`)).body.count === 4,
      );
      const bodies = async (qs: string) => {
        const { status, body } = await getJson(`${s.url}/api/logs?project_id=w&select=body&${qs}`);
        assert.equal(status, 200, JSON.stringify(body));
        return body.rows.map((r: Json) => r.body);
      };
      // Filed under today (arrival), found by their 2020 event time.
      assert.deepEqual(await bodies('since=2020-03-01T00:00:00Z&until=2020-03-02T00:00:00Z'), ['from 2020']);
      assert.deepEqual(await bodies('since=2020-03-01&until=2020-03-03'), ['a day later', 'from 2020']);
      assert.deepEqual(await bodies('date_from=2020-03-01&date_to=2020-03-02'), []);
      assert.deepEqual(await bodies('since=15m'), ['now']);
      assert.deepEqual(await bodies('since=2h&until=30m'), ['an hour ago']);
      assert.deepEqual(await bodies('until=2020-03-01T12:00:00.000001Z'), ['from 2020']);
      assert.deepEqual(await bodies('until=2020-03-01T12:00:00Z'), [], 'until is exclusive');
      assert.deepEqual(await bodies('since=2020-03-01T14:00:00%2B02:00&until=2020-03-01T12:00:01Z'), [
        'from 2020',
      ]);
    } finally {
      await s.close();
    }
  });

  test('invalid read parameters are 400 naming the parameter', async () => {
    const s = await startServer();
    try {
      const cases: [string, string, string, RegExp][] = [
        ['logs', 'since=yesterday', 'since', /invalid since "yesterday": expected an RFC 3339 instant/],
        ['logs', 'until=2026-02-30', 'until', /invalid until/],
        ['logs', 'since=2026-01-01T10:00:00', 'since', /invalid since/],
        ['logs', 'since=1h&until=2h', 'since', /not before until/],
        [
          'metrics/points',
          'metric_type=histogram',
          'metric_type',
          /the metric types of metrics_points are gauge, sum/,
        ],
        ['metrics/hist', 'metric_type=counter', 'metric_type', /histogram, exponential_histogram, summary/],
        ['logs', 'storage=disk', 'storage', /one of auto, local, s3/],
        ['logs', 'project_id=a%20b', 'project_id', /letters, digits/],
        ['spans', 'project_id=..', 'project_id', /letters, digits/],
        ['logs', 'limit=0', 'limit', /expected 1\.\.10000/],
        ['logs', 'sinse=1h', 'sinse', /unknown parameter/],
      ];
      for (const [path, qs, parameter, message] of cases) {
        const { status, body } = await getJson(`${s.url}/api/${path}?${qs}`);
        assert.equal(status, 400, qs);
        assert.equal(body.parameter, parameter, qs);
        assert.match(body.message, message, qs);
      }
    } finally {
      await s.close();
    }
  });
});

describe('the read endpoints in the OpenAPI document', () => {
  test('since, until, the metric types and the read limits are described', async () => {
    const s = await startServer();
    try {
      const { body } = await getJson(`${s.url}/api/openapi.json`);
      for (const path of ['/api/spans', '/api/span_links', '/api/logs', '/api/metrics/hist']) {
        const get = body.paths[path].get;
        const names = get.parameters.map((p: Json) => p.name);
        assert.ok(names.includes('since') && names.includes('until'), path);
        assert.ok(get.responses['503'].headers['Retry-After'], path);
        assert.ok(get.responses['200'].content['application/json'].schema.properties.truncated_values, path);
      }
      const metricType = (path: string) =>
        body.paths[path].get.parameters.find((p: Json) => p.name === 'metric_type').schema.enum;
      assert.deepEqual(metricType('/api/metrics/points'), ['gauge', 'sum']);
      assert.deepEqual(metricType('/api/metrics/hist'), ['histogram', 'exponential_histogram', 'summary']);
    } finally {
      await s.close();
    }
  });
});
