// The OTLP/HTTP server over the real pipeline: fixtures in, rows out through /api; every kind of
// bad input answered as OTLP says while the server keeps serving; project ids; backpressure;
// /healthz; read parameters; the OpenAPI document.

import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { request as httpRequest } from 'node:http';
import { after, before, describe, test } from 'node:test';
import * as zlib from 'node:zlib';
import { compressFrameSync } from 'lz4-napi';
import { Compressor, compressSync as snappyCompress } from 'snappy';
import { loadProtobuf } from '../../src/otlp/index.ts';
import { closeReadWorkers } from '../../src/read/index.ts';
import { INLINE_BODY_BYTES } from '../../src/server/decode.ts';
import { sentProjectId } from '../../src/server/project-header.ts';
import { FIXTURE_LOG_ATTRIBUTES, jsonToProtobuf } from '../otlp/helpers.ts';
import {
  decodeStatusProto,
  getJson,
  type Json,
  post,
  readUntil,
  startServer,
  type TestServer,
  waitDecodeWorker,
  waitWritten,
} from './helpers/harness.ts';

const fixture = (name: string): Buffer =>
  readFileSync(new URL(`../fixtures/otlp/${name}.json`, import.meta.url));
const JSON_CT = { 'content-type': 'application/json' };
const attrs = (row: Record<string, unknown>, column = 'attributes') => JSON.parse(row[column] as string);

after(() => closeReadWorkers());

// Bodies are decoded in worker threads by default (one per core), small ones (these fixtures) on
// the event loop; decode_workers 0 decodes every body on the event loop. Each route, in turn.
const ROUTES = [
  { name: 'decode workers, small bodies on the event loop', decodeWorkers: null, inlineBodyBytes: undefined },
  { name: 'every body in a decode worker', decodeWorkers: null, inlineBodyBytes: 0 },
  { name: 'decode_workers 0', decodeWorkers: 0, inlineBodyBytes: undefined },
];
for (const route of ROUTES) {
  describe(`OTLP fixtures in, rows out through /api (${route.name})`, () => {
    let s: TestServer;
    before(async () => {
      s = await startServer(
        { server_config: { decode_workers: route.decodeWorkers } },
        route.inlineBodyBytes === undefined ? {} : { inlineBodyBytes: route.inlineBodyBytes },
      );
    });
    after(() => s.close());

    test('each fixture is accepted (gzip, deflate, zstd and plain) and read back field by field', async () => {
      const zstd = (zlib as unknown as { zstdCompressSync: (b: Buffer) => Buffer }).zstdCompressSync;
      const sends: [string, Buffer, Record<string, string>][] = [
        [
          'traces',
          zlib.gzipSync(fixture('trace')),
          { 'content-encoding': 'gzip', 'x-project-id': 'fx-trace' },
        ],
        ['logs', fixture('logs'), { 'x-project-id': 'fx-logs' }],
        [
          'metrics',
          zlib.deflateSync(fixture('metrics')),
          { 'content-encoding': 'deflate', 'x-project-id': 'fx-metrics' },
        ],
        ['logs', zstd(fixture('events')), { 'content-encoding': 'zstd', 'x-project-id': 'fx-events' }],
      ];
      for (const [signal, body, headers] of sends) {
        const res = await post(`${s.url}/v1/${signal}`, body, { ...JSON_CT, ...headers });
        assert.equal(res.status, 200, res.text);
        assert.equal(res.headers.get('content-type'), 'application/json');
        assert.deepEqual(JSON.parse(res.text), {});
      }
      await waitWritten(s.url, 7);

      const resource = { 'service.name': 'my.service' };
      const scope = { 'my.scope.attribute': 'some scope attribute' };
      const common = (row: Record<string, unknown>, project: string) => {
        assert.equal(row['project_id'], project);
        assert.equal(row['service_name'], 'my.service');
        assert.deepEqual(attrs(row, 'resource_attributes'), resource);
        assert.equal(row['scope_name'], 'my.library');
        assert.equal(row['scope_version'], '1.0.0');
        assert.deepEqual(attrs(row, 'scope_attributes'), scope);
      };

      const { body: spans } = await getJson(`${s.url}/api/spans?project_id=fx-trace`);
      assert.equal(spans.count, 1);
      const span = spans.rows[0];
      common(span, 'fx-trace');
      assert.equal(span.trace_id, '5b8efff798038103d269b633813fc60c');
      assert.equal(span.span_id, 'eee19b7ec3c1b174');
      assert.equal(span.parent_span_id, 'eee19b7ec3c1b173');
      assert.equal(span.name, "I'm a server span");
      assert.equal(span.kind, 2);
      assert.equal(span.start_time_unix_nano, '1544712660000000000');
      assert.equal(span.end_time_unix_nano, '1544712661000000000');
      assert.equal(span.duration_ns, '1000000000');
      assert.equal(span.event_ts, '2018-12-13T14:51:00.000000Z');
      assert.deepEqual(attrs(span), { 'my.span.attr': 'some value' });
      assert.equal(span.events_count, 0);
      assert.equal(span.links_count, 0);

      const { body: logs } = await getJson(`${s.url}/api/logs?project_id=fx-logs`);
      assert.equal(logs.count, 1);
      const log = logs.rows[0];
      common(log, 'fx-logs');
      assert.equal(log.time_unix_nano, '1544712660300000000');
      assert.equal(log.observed_time_unix_nano, '1544712660300000000');
      assert.equal(log.event_ts, '2018-12-13T14:51:00.300000Z');
      assert.equal(log.severity_number, 10);
      assert.equal(log.severity_text, 'Information');
      assert.equal(log.body, 'Example log record');
      assert.equal(log.trace_id, '5b8efff798038103d269b633813fc60c');
      assert.equal(log.span_id, 'eee19b7ec3c1b174');
      assert.deepEqual(attrs(log), FIXTURE_LOG_ATTRIBUTES);

      const { body: events } = await getJson(`${s.url}/api/logs?project_id=fx-events`);
      assert.equal(events.count, 1);
      const ev = events.rows[0];
      common(ev, 'fx-events');
      assert.equal(ev.event_name, 'browser.page_view');
      assert.equal(ev.severity_number, 9);
      assert.equal(ev.severity_text, 'test severity text');
      assert.deepEqual(JSON.parse(ev.body), {
        type: 0,
        url: 'https://www.guidgenerator.com/online-guid-generator.aspx',
        referrer: 'https://wwww.google.com',
        title: 'Free Online GUID Generator',
      });
      assert.deepEqual(attrs(ev), { 'event.attribute': 'some event attribute' });
      assert.equal(ev.trace_id, null);

      const { body: points } = await getJson(`${s.url}/api/metrics/points?project_id=fx-metrics`);
      assert.equal(points.count, 2);
      const byName = new Map<string, Json>(points.rows.map((r: Json) => [r.metric_name, r]));
      const counter = byName.get('my.counter');
      common(counter, 'fx-metrics');
      assert.equal(counter.metric_type, 'sum');
      assert.equal(counter.description, 'I am a Counter');
      assert.equal(counter.unit, '1');
      assert.equal(counter.aggregation_temporality, 1);
      assert.equal(counter.is_monotonic, true);
      assert.equal(counter.value_double, 5);
      assert.equal(counter.value_int, null);
      assert.equal(counter.start_time_unix_nano, '1544712660300000000');
      assert.equal(counter.time_unix_nano, '1544712660300000000');
      assert.deepEqual(attrs(counter), { 'my.counter.attr': 'some value' });
      const gauge = byName.get('my.gauge');
      assert.equal(gauge.metric_type, 'gauge');
      assert.equal(gauge.value_double, 10);
      assert.equal(gauge.time_unix_nano, '1544712660300000000');
      assert.deepEqual(attrs(gauge), { 'my.gauge.attr': 'some value' });

      const { body: hist } = await getJson(`${s.url}/api/metrics/hist?project_id=fx-metrics`);
      assert.equal(hist.count, 2);
      const h = hist.rows.find((r: Json) => r.metric_type === 'histogram');
      common(h, 'fx-metrics');
      assert.equal(h.metric_name, 'my.histogram');
      assert.equal(h.count, '2');
      assert.equal(h.sum, 2);
      assert.equal(h.min, 0);
      assert.equal(h.max, 2);
      assert.deepEqual(h.bucket_counts, ['1', '1']);
      assert.deepEqual(h.explicit_bounds, [1]);
      assert.deepEqual(attrs(h), { 'my.histogram.attr': 'some value' });
      const e = hist.rows.find((r: Json) => r.metric_type === 'exponential_histogram');
      assert.equal(e.metric_name, 'my.exponential.histogram');
      assert.equal(e.count, '3');
      assert.equal(e.sum, 10);
      assert.equal(e.scale, 0);
      assert.equal(e.zero_count, '1');
      assert.equal(e.zero_threshold, 0);
      assert.equal(e.positive_offset, 1);
      assert.deepEqual(e.positive_bucket_counts, ['0', '2']);
      assert.equal(e.min, 0);
      assert.equal(e.max, 5);
    });

    test('snappy (a block and framed) and lz4 bodies, as the Collector sends them, are stored', async () => {
      const logs = fixture('logs');
      const framed = new Compressor();
      const sends: [string, Buffer][] = [
        ['snappy', snappyCompress(logs)],
        ['x-snappy-framed', Buffer.concat([framed.update(logs), await framed.finish()])],
        ['lz4', compressFrameSync(logs, { contentChecksum: true })],
      ];
      for (const [coding, body] of sends) {
        const res = await post(`${s.url}/v1/logs`, body, {
          ...JSON_CT,
          'content-encoding': coding,
          'x-project-id': `codec-${coding}`,
        });
        assert.equal(res.status, 200, `${coding}: ${res.text}`);
      }
      for (const [coding] of sends) {
        const rows = await readUntil(`${s.url}/api/logs?project_id=codec-${coding}`, 1);
        assert.equal(rows.length, 1, coding);
        assert.equal(rows[0].body, 'Example log record', coding);
      }
    });

    test('span events and links land in their tables, tied to their span', async () => {
      const body = {
        resourceSpans: [
          {
            resource: { attributes: [{ key: 'service.name', value: { stringValue: 'checkout' } }] },
            scopeSpans: [
              {
                spans: [
                  {
                    traceId: '0af7651916cd43dd8448eb211c80319c',
                    spanId: 'b7ad6b7169203331',
                    name: 'charge',
                    startTimeUnixNano: '1700000000000000000',
                    endTimeUnixNano: '1700000000500000000',
                    events: [
                      {
                        timeUnixNano: '1700000000100000000',
                        name: 'retry',
                        attributes: [{ key: 'attempt', value: { intValue: '2' } }],
                      },
                    ],
                    links: [
                      {
                        traceId: '11111111111111111111111111111111',
                        spanId: '2222222222222222',
                        attributes: [{ key: 'why', value: { stringValue: 'batch' } }],
                      },
                    ],
                    status: { code: 2, message: 'card declined' },
                  },
                ],
              },
            ],
          },
        ],
      };
      const res = await post(`${s.url}/v1/traces`, JSON.stringify(body), {
        ...JSON_CT,
        'x-project-id': 'ev-links',
      });
      assert.equal(res.status, 200, res.text);
      const [span] = await readUntil(`${s.url}/api/spans?project_id=ev-links`, 1);
      assert.equal(span.status_code, 2);
      assert.equal(span.status_message, 'card declined');
      assert.equal(span.events_count, 1);
      assert.equal(span.links_count, 1);
      const [event] = await readUntil(`${s.url}/api/span_events?project_id=ev-links`, 1);
      assert.equal(event.trace_id, '0af7651916cd43dd8448eb211c80319c');
      assert.equal(event.span_id, 'b7ad6b7169203331');
      assert.equal(event.name, 'retry');
      assert.equal(event.time_unix_nano, '1700000000100000000');
      assert.deepEqual(attrs(event), { attempt: 2 });
      assert.equal(event.service_name, 'checkout');
      const [link] = await readUntil(`${s.url}/api/span_links?project_id=ev-links`, 1);
      assert.equal(link.span_id, 'b7ad6b7169203331');
      assert.equal(link.linked_trace_id, '11111111111111111111111111111111');
      assert.equal(link.linked_span_id, '2222222222222222');
      assert.deepEqual(attrs(link), { why: 'batch' });
    });
  });
}

function logsRequest(project: string | null, bodies: string[], service = 'svc'): string {
  const resourceAttrs = [{ key: 'service.name', value: { stringValue: service } }];
  if (project !== null) resourceAttrs.push({ key: 'project.id', value: { stringValue: project } });
  return JSON.stringify({
    resourceLogs: [
      {
        resource: { attributes: resourceAttrs },
        scopeLogs: [
          {
            logRecords: bodies.map((b, i) => ({
              timeUnixNano: String(1_700_000_000_000_000_000n + BigInt(i) * 1_000_000n),
              severityNumber: 9 + (i % 3) * 4,
              body: { stringValue: b },
            })),
          },
        ],
      },
    ],
  });
}

const ZSTD = { 'content-encoding': 'zstd' };

describe('where a body is decoded', () => {
  test('a small body on the event loop, a larger one (as sent or decompressed) in a decode worker, each stored whole', async () => {
    const s = await startServer(); // decode workers, one per core
    try {
      const where = async () => {
        const { threads, running, ...bodies } = (await getJson(`${s.url}/healthz`)).body.decode;
        assert.ok(threads >= 1, `${threads} decode threads`);
        assert.ok(running <= threads, `${running} of ${threads} decode threads running`);
        return bodies;
      };
      const lines = (n: number, text: string) => Array.from({ length: n }, (_, i) => `${text} ${i}`);
      const send = async (body: string | Buffer, headers: Record<string, string> = {}) =>
        post(`${s.url}/v1/logs`, body, { ...JSON_CT, ...headers });
      assert.deepEqual(await where(), { event_loop: 0, workers: 0 });

      const small = logsRequest('dw-small', lines(3, 'small'));
      assert.ok(small.length <= INLINE_BODY_BYTES);
      assert.equal((await send(small)).status, 200);
      assert.deepEqual(await where(), { event_loop: 1, workers: 0 });
      // The first body started a decode worker; larger bodies wait for it no more once it runs.
      await waitDecodeWorker(s.url);

      const large = logsRequest('dw-large', lines(100, `large ${'y'.repeat(80)}`));
      assert.ok(large.length > INLINE_BODY_BYTES);
      assert.equal((await send(large)).status, 200);
      assert.deepEqual(await where(), { event_loop: 1, workers: 1 });

      // Compressed: small as sent and decompressed, then small as sent only (the output is capped).
      const gz = zlib.gzipSync(small.replace('dw-small', 'dw-gz'));
      assert.equal((await send(gz, { 'content-encoding': 'gzip' })).status, 200);
      assert.deepEqual(await where(), { event_loop: 2, workers: 1 });
      const expanding = logsRequest('dw-expand', lines(300, `same ${'z'.repeat(100)}`));
      const packed = zlib.gzipSync(expanding);
      assert.ok(packed.length <= INLINE_BODY_BYTES && expanding.length > INLINE_BODY_BYTES);
      assert.equal((await send(packed, { 'content-encoding': 'gzip' })).status, 200);
      assert.deepEqual(await where(), { event_loop: 2, workers: 2 });
      // Two gzip members: the trailer announces only the last, small one, so the event loop tries
      // the body, the capped output stops it, and a worker decodes it whole.
      const twice = logsRequest('dw-twice', lines(300, `again ${'w'.repeat(100)}`));
      const members = Buffer.concat([zlib.gzipSync(twice.slice(0, -50)), zlib.gzipSync(twice.slice(-50))]);
      assert.ok(members.length <= INLINE_BODY_BYTES && members.readUInt32LE(members.length - 4) === 50);
      assert.equal((await send(members, { 'content-encoding': 'gzip' })).status, 200);
      assert.deepEqual(await where(), { event_loop: 2, workers: 3 });
      // zstd bodies of two frames, every frame read (Node's one-shot call reads the first only):
      // one small enough for the event loop, one a worker decodes.
      const zstd = (zlib as unknown as { zstdCompressSync: (b: string) => Buffer }).zstdCompressSync;
      const frames = (text: string) => Buffer.concat([zstd(text.slice(0, -50)), zstd(text.slice(-50))]);
      assert.equal((await send(frames(logsRequest('dw-zstd-small', lines(3, 'zs'))), ZSTD)).status, 200);
      assert.deepEqual(await where(), { event_loop: 3, workers: 3 });
      const zstdLarge = frames(logsRequest('dw-zstd-large', lines(100, `zl ${'v'.repeat(80)}`)));
      assert.equal((await send(zstdLarge, ZSTD)).status, 200);
      assert.deepEqual(await where(), { event_loop: 3, workers: 4 });

      // A small body that cannot be decompressed: the worker refuses it as it always has.
      const corrupt = await send(Buffer.from('not gzip at all'), { 'content-encoding': 'gzip' });
      assert.equal(corrupt.status, 400);
      assert.match(JSON.parse(corrupt.text).message, /cannot decompress the request body/);
      assert.deepEqual(await where(), { event_loop: 3, workers: 5 });

      await waitWritten(s.url, 3 + 100 + 3 + 300 + 300 + 3 + 100);
      for (const [project, n] of [
        ['dw-small', 3],
        ['dw-large', 100],
        ['dw-gz', 3],
        ['dw-expand', 300],
        ['dw-twice', 300],
        ['dw-zstd-small', 3],
        ['dw-zstd-large', 100],
      ] as const) {
        const { body } = await getJson(`${s.url}/api/logs?project_id=${project}&limit=1000`);
        assert.equal(body.count, n, project);
      }
    } finally {
      await s.close();
    }
  });
});

describe('project id, partial success, empty requests', () => {
  let s: TestServer;
  before(async () => {
    s = await startServer({ server_config: { default_project_id: 'fallback' } });
  });
  after(() => s.close());

  test('X-Project-Id wins over resource attribute project.id, which wins over the default', async () => {
    assert.equal(
      (
        await post(`${s.url}/v1/logs`, logsRequest('from-attr', ['a']), {
          ...JSON_CT,
          'x-project-id': 'from-header',
        })
      ).status,
      200,
    );
    assert.equal((await post(`${s.url}/v1/logs`, logsRequest('from-attr', ['b']))).status, 200);
    assert.equal((await post(`${s.url}/v1/logs`, logsRequest(null, ['c']))).status, 200);
    await waitWritten(s.url, 3);
    const bodies = async (project: string) =>
      (await getJson(`${s.url}/api/logs?project_id=${project}`)).body.rows.map((r: Json) => r.body);
    assert.deepEqual(await bodies('from-header'), ['a']);
    assert.deepEqual(await bodies('from-attr'), ['b']);
    assert.deepEqual(await bodies('fallback'), ['c']);
  });

  test('an unsafe X-Project-Id is 400 with a google.rpc.Status in the request encoding', async () => {
    const j = await post(`${s.url}/v1/logs`, logsRequest(null, ['x']), {
      ...JSON_CT,
      'x-project-id': '../etc',
    });
    assert.equal(j.status, 400);
    const status = JSON.parse(j.text);
    assert.equal(status.code, 3);
    assert.match(status.message, /X-Project-Id/);
    const p = await post(`${s.url}/v1/logs`, new Uint8Array(0), {
      'content-type': 'application/x-protobuf',
      'x-project-id': 'a b',
    });
    assert.equal(p.status, 400);
    assert.equal(p.headers.get('content-type'), 'application/x-protobuf');
    assert.match(decodeStatusProto(p.bytes).message, /X-Project-Id/);
    // Sent twice: refused, not one of the two picked (fetch would join them itself; raw headers here).
    const twice = await new Promise<{ status: number; text: string }>((done, fail) => {
      const body = Buffer.from(JSON.stringify(logsRequest(null, ['twice'])));
      const req = httpRequest(`${s.url}/v1/logs`, {
        method: 'POST',
        // In this form Node's client adds no Host header itself.
        headers: ['host', new URL(s.url).host, 'content-type', 'application/json'].concat([
          'x-project-id',
          'shop',
          'x-project-id',
          'other',
        ]),
      });
      req.on('response', (res) => {
        let text = '';
        res.on('data', (c: Buffer) => {
          text += c;
        });
        res.on('end', () => done({ status: res.statusCode!, text }));
      });
      req.on('error', fail);
      req.end(body);
    });
    assert.equal(twice.status, 400, twice.text);
    assert.match(JSON.parse(twice.text).message, /invalid X-Project-Id "shop, other"/);
    // Node's server joins the repeat itself; values kept apart (inject, headersDistinct) are joined
    // the same way rather than one picked.
    assert.equal(sentProjectId({ 'x-project-id': ['shop', 'other'] }), 'shop, other');
    assert.equal(sentProjectId({}), undefined);
  });

  test("an unsafe resource attribute project.id refuses its resource's items (the header would win over it)", async () => {
    const res = await post(`${s.url}/v1/logs`, logsRequest('bad/project', ['y']));
    assert.equal(res.status, 200);
    const partial = JSON.parse(res.text).partialSuccess;
    assert.equal(partial.rejectedLogRecords, 1);
    assert.match(partial.errorMessage, /invalid resource attribute project\.id "bad\/project"/);
    const overridden = await post(`${s.url}/v1/logs`, logsRequest('bad/project', ['z']), {
      ...JSON_CT,
      'x-project-id': 'header-wins',
    });
    assert.equal(overridden.status, 200);
  });

  test('rows refused by validation are counted in partial_success with a message; the rest is stored', async () => {
    const span = (id: string, start: string) => ({
      traceId: '5b8efff798038103d269b633813fc60c',
      spanId: id,
      name: `span-${id}`,
      startTimeUnixNano: start,
      endTimeUnixNano: '1700000001000000000',
    });
    const body = {
      resourceSpans: [
        {
          scopeSpans: [
            {
              spans: [
                span('0000000000000001', '1700000000000000000'),
                // A start time beyond int64: the duration cannot be stored, the span is refused.
                span('0000000000000002', '9223372036854775808'),
                span('0000000000000003', '1700000000000000000'),
              ],
            },
          ],
        },
      ],
    };
    const res = await post(`${s.url}/v1/traces`, JSON.stringify(body), {
      ...JSON_CT,
      'x-project-id': 'partial',
    });
    assert.equal(res.status, 200);
    const out = JSON.parse(res.text);
    assert.equal(out.partialSuccess.rejectedSpans, 1);
    assert.match(out.partialSuccess.errorMessage, /1 spans rejected: out_of_range/);
    const rows = await readUntil(`${s.url}/api/spans?project_id=partial`, 2);
    assert.deepEqual(rows.map((r) => r.span_id).sort(), ['0000000000000001', '0000000000000003']);
  });

  test('invalid ids are stored as null and reported as a warning with rejected 0', async () => {
    const body = {
      resourceLogs: [
        {
          scopeLogs: [
            {
              logRecords: [
                { timeUnixNano: '1700000000000000000', traceId: 'not-hex', body: { stringValue: 'w' } },
              ],
            },
          ],
        },
      ],
    };
    const res = await post(`${s.url}/v1/logs`, JSON.stringify(body), {
      ...JSON_CT,
      'x-project-id': 'warned',
    });
    assert.equal(res.status, 200);
    const out = JSON.parse(res.text);
    assert.equal(out.partialSuccess.rejectedLogRecords, undefined);
    assert.match(out.partialSuccess.errorMessage, /1 invalid trace or span ids were stored as null/);
    const [row] = await readUntil(`${s.url}/api/logs?project_id=warned`, 1);
    assert.equal(row.trace_id, null);
  });

  test('a log record without any time is ordered by its arrival, not filed at 1970', async () => {
    const before = Date.now();
    const body = { resourceLogs: [{ scopeLogs: [{ logRecords: [{ body: { stringValue: 'timeless' } }] }] }] };
    const res = await post(`${s.url}/v1/logs`, JSON.stringify(body), {
      ...JSON_CT,
      'x-project-id': 'timeless',
    });
    assert.equal(res.status, 200);
    const [row] = await readUntil(`${s.url}/api/logs?project_id=timeless`, 1);
    assert.equal(row.time_unix_nano, '0', 'the record time stays as sent');
    const observedMs = Number(BigInt(row.observed_time_unix_nano) / 1_000_000n);
    assert.ok(observedMs >= before && observedMs <= Date.now(), `observed ${observedMs} is the arrival`);
    assert.equal(Date.parse(row.event_ts), observedMs);
  });

  test('invalid UTF-8 in a protobuf string is stored as U+FFFD, the rest of the request with it', async () => {
    const codec = (await loadProtobuf())!;
    const record = (body: string) => ({ timeUnixNano: '1700000000000000000', body: { stringValue: body } });
    const tree = {
      resourceLogs: [{ scopeLogs: [{ logRecords: [record('aXb'), record('fine')] }] }],
    };
    const bytes = Buffer.from(jsonToProtobuf('logs', tree, codec));
    bytes[bytes.indexOf('aXb') + 1] = 0xff;
    const res = await post(`${s.url}/v1/logs`, bytes, {
      'content-type': 'application/x-protobuf',
      'x-project-id': 'utf8',
    });
    assert.equal(res.status, 200);
    assert.equal(res.bytes.length, 0, 'no partial success: nothing refused');
    const rows = await readUntil(`${s.url}/api/logs?project_id=utf8&date_from=2000-01-01`, 2);
    assert.deepEqual(rows.map((r: Json) => r.body).sort(), ['a\uFFFDb', 'fine']);
  });

  test('empty requests succeed: no body, {} and an empty protobuf message', async () => {
    for (const signal of ['traces', 'logs', 'metrics']) {
      const empty = await post(`${s.url}/v1/${signal}`, '', JSON_CT);
      assert.equal(empty.status, 200);
      assert.equal(empty.text, '{}');
      const obj = await post(`${s.url}/v1/${signal}`, '{}', {
        'content-type': 'application/json; charset=utf-8',
      });
      assert.equal(obj.status, 200);
      const pb = await post(`${s.url}/v1/${signal}`, new Uint8Array(0), {
        'content-type': 'application/x-protobuf',
      });
      assert.equal(pb.status, 200);
      assert.equal(pb.headers.get('content-type'), 'application/x-protobuf');
      assert.equal(pb.bytes.length, 0);
      // Compressed to nothing: lz4 (undone before the decoder) and gzip.
      for (const [coding, body] of [
        ['lz4', compressFrameSync(Buffer.alloc(0))],
        ['gzip', zlib.gzipSync(Buffer.alloc(0))],
      ] as const) {
        const res = await post(`${s.url}/v1/${signal}`, body, { ...JSON_CT, 'content-encoding': coding });
        assert.equal(res.status, 200, `${coding}: ${res.text}`);
        assert.equal(res.text, '{}');
      }
    }
  });
});

describe('bad input: each gets its status and message, and the server keeps serving', () => {
  let s: TestServer;
  before(async () => {
    s = await startServer();
  });
  after(() => s.close());

  const before3 = ['kept-1', 'kept-2', 'kept-3'];
  test('data accepted before the bad requests', async () => {
    const res = await post(`${s.url}/v1/logs`, logsRequest('survivor', before3));
    assert.equal(res.status, 200);
    await waitWritten(s.url, 3);
  });

  test('truncated JSON is 400 with a JSON google.rpc.Status', async () => {
    const full = fixture('trace').toString();
    const res = await post(`${s.url}/v1/traces`, full.slice(0, full.length / 2));
    assert.equal(res.status, 400);
    const status = JSON.parse(res.text);
    assert.equal(status.code, 3);
    assert.match(status.message, /invalid JSON/);
  });

  test('wrong types are 400 naming the field', async () => {
    const cases: [string, RegExp][] = [
      ['{"resourceSpans":{}}', /resourceSpans: expected an array/],
      ['[1,2]', /must be an object/],
      ['{"resourceSpans":[{"scopeSpans":[{"spans":[{"name":5}]}]}]}', /span\.name: expected a string/],
    ];
    for (const [body, message] of cases) {
      const res = await post(`${s.url}/v1/traces`, body);
      assert.equal(res.status, 400, body);
      assert.match(JSON.parse(res.text).message, message);
    }
  });

  test('invalid protobuf is 400 with a protobuf google.rpc.Status', async () => {
    const res = await post(`${s.url}/v1/logs`, new Uint8Array([0x0a, 0xff, 0xff, 0xff, 0x0f, 1, 2]), {
      'content-type': 'application/x-protobuf',
    });
    assert.equal(res.status, 400);
    assert.equal(res.headers.get('content-type'), 'application/x-protobuf');
    const status = decodeStatusProto(res.bytes);
    assert.equal(status.code, 3);
    assert.match(status.message, /invalid protobuf/);
  });

  test('a gzip bomb (1 GiB of zeros) is cut at the limit without inflating into memory', async () => {
    // 16 gzip members of 64 MiB of zeros each: 1 GiB inflated, about 1 MiB on the wire.
    const member = zlib.gzipSync(Buffer.alloc(64 * 1024 * 1024), { level: 9 });
    const bomb = Buffer.concat(Array.from({ length: 16 }, () => member));
    assert.ok(bomb.length < 2 * 1024 * 1024);
    // The server's decode workers are threads of this process: its peak RSS shows what they inflated
    // (up to the 64 MiB limit, not the whole GiB).
    const peakBefore = process.resourceUsage().maxRSS;
    const res = await post(`${s.url}/v1/logs`, bomb, { ...JSON_CT, 'content-encoding': 'gzip' });
    const grownKiB = process.resourceUsage().maxRSS - peakBefore;
    assert.equal(res.status, 413);
    assert.match(JSON.parse(res.text).message, /exceeds the limit of 67108864 bytes/);
    assert.ok(grownKiB < 512 * 1024, `peak RSS grew by ${grownKiB} KiB`);
  });

  test('a small gzip body of a million empty log records in one resource is 413, and the server stays up', async () => {
    // 3.3 MB of JSON, a few KB of gzip: a mapper would hold 25M cells for its rows.
    const records = 1_100_000;
    const json = `{"resourceLogs":[{"scopeLogs":[{"logRecords":[${'{},'.repeat(records - 1)}{}]}]}]}`;
    const gz = zlib.gzipSync(json, { level: 9 });
    assert.ok(gz.length < 8 * 1024, `${gz.length} bytes`);
    const res = await post(`${s.url}/v1/logs`, gz, {
      ...JSON_CT,
      'content-encoding': 'gzip',
      'x-project-id': 'many',
    });
    assert.equal(res.status, 413);
    assert.match(
      JSON.parse(res.text).message,
      /more than 1048576 logs rows in one request: send smaller batches/,
    );
    // Served on (this suite's server counts what it accepts: the test after this one checks it).
    const health = await getJson(`${s.url}/healthz`);
    assert.equal(health.status, 200);
    assert.equal(health.body.status, 'ok');
  });

  test('an oversized body is 413, announced or streamed', async () => {
    const big = Buffer.alloc(64 * 1024 * 1024 + 1, 0x20);
    const announced = await post(`${s.url}/v1/logs`, big);
    assert.equal(announced.status, 413);
    assert.match(JSON.parse(announced.text).message, /Content-Length/);
    // The rest of the body is not read, so the connection ends: the answer says so.
    assert.equal(announced.headers.get('connection'), 'close');
    const chunks = (async function* () {
      for (let i = 0; i < big.length; i += 1024 * 1024) yield big.subarray(i, i + 1024 * 1024);
    })();
    const res = await fetch(`${s.url}/v1/logs`, {
      method: 'POST',
      body: chunks as unknown as ReadableStream,
      headers: JSON_CT,
      duplex: 'half',
    } as RequestInit);
    assert.equal(res.status, 413);
    assert.equal(res.headers.get('connection'), 'close');
    assert.match(((await res.json()) as Json).message, /exceeds the limit/);
  });

  test('an unsupported content type is 415 in plain text', async () => {
    for (const ct of ['text/plain', 'application/xml', 'multipart/form-data; boundary=x']) {
      const res = await post(`${s.url}/v1/traces`, '{}', { 'content-type': ct });
      assert.equal(res.status, 415, ct);
      assert.match(res.headers.get('content-type') ?? '', /^text\/plain/);
      assert.match(res.text, /unsupported content type.*application\/json or application\/x-protobuf/);
    }
    const none = await fetch(`${s.url}/v1/traces`, { method: 'POST', body: new Uint8Array([1]) });
    assert.equal(none.status, 415);
    const encoding = await post(`${s.url}/v1/traces`, '{}', { ...JSON_CT, 'content-encoding': 'compress' });
    assert.equal(encoding.status, 415);
    assert.match(encoding.text, /Content-Encoding "compress"/);
  });

  test('other methods are 405 with Allow: POST', async () => {
    for (const method of ['GET', 'PUT', 'DELETE', 'PATCH']) {
      const res = await fetch(`${s.url}/v1/metrics`, { method });
      assert.equal(res.status, 405, method);
      assert.equal(res.headers.get('allow'), 'POST');
      assert.match(await res.text(), /use POST \/v1\/metrics/);
    }
  });

  test('corrupt gzip is 400', async () => {
    const gz = zlib.gzipSync(fixture('logs'));
    gz.fill(0x55, 12, 40);
    const res = await post(`${s.url}/v1/logs`, gz, { ...JSON_CT, 'content-encoding': 'gzip' });
    assert.equal(res.status, 400);
    assert.match(JSON.parse(res.text).message, /cannot decompress/);
  });

  test('afterwards the earlier data is intact and new requests are stored', async () => {
    const { body } = await getJson(`${s.url}/api/logs?project_id=survivor`);
    assert.deepEqual(body.rows.map((r: Json) => r.body).sort(), before3);
    const res = await post(`${s.url}/v1/logs`, logsRequest('survivor', ['kept-4']));
    assert.equal(res.status, 200);
    const rows = await readUntil(`${s.url}/api/logs?project_id=survivor`, 4);
    assert.equal(rows.length, 4);
    const health = await getJson(`${s.url}/healthz`);
    assert.equal(health.body.producer.accepted, 4);
  });
});

describe('protobuf without the optional package', () => {
  test('is 415 naming protobufjs; JSON still works', async () => {
    const s = await startServer(undefined, { protobuf: false });
    try {
      const res = await post(`${s.url}/v1/traces`, new Uint8Array(0), {
        'content-type': 'application/x-protobuf',
      });
      assert.equal(res.status, 415);
      assert.match(res.text, /"protobufjs"/);
      assert.match(res.text, /npm install protobufjs/);
      assert.equal((await post(`${s.url}/v1/traces`, fixture('trace'))).status, 200);
      assert.equal((await getJson(`${s.url}/healthz`)).body.protobuf, false);
    } finally {
      await s.close();
    }
  });
});

describe('backpressure', () => {
  // Batches of at most 4 rows (the hold limit splits a request; max_batch_rows 1 cuts each piece),
  // one commit each, keep the aggregator busy long enough for the queue to stay full.
  const slow = {
    aggregator_config: { max_batch_rows: 1, min_batch_rows: 1, max_pending_rows: 4, max_age_s: 0.05 },
  };
  const first = Array.from({ length: 20 }, (_, i) => `row-${i}`);
  // The aggregator holds at most 4 rows of this configuration: 16 stay queued, 10 more do not fit.
  const late = Array.from({ length: 10 }, (_, i) => `late-${i}`);

  test('a full queue with drop_policy block is 503 with Retry-After; a retry later succeeds', async () => {
    const s = await startServer({ ...slow, producer_config: { max_queue_size: 20, block_timeout_s: 0 } });
    try {
      assert.equal((await post(`${s.url}/v1/logs`, logsRequest('bp', first))).status, 200);
      const full = await post(`${s.url}/v1/logs`, logsRequest('bp', late));
      assert.equal(full.status, 503);
      assert.equal(full.headers.get('retry-after'), '1');
      const status = JSON.parse(full.text);
      assert.equal(status.code, 14);
      assert.match(status.message, /queue is full/);
      const pb = await post(`${s.url}/v1/logs`, new Uint8Array([0x0a, 0x00]), {
        'content-type': 'application/x-protobuf',
      });
      assert.equal(pb.status, 200, 'a request without rows needs no room');
      await waitWritten(s.url, 20, 60_000);
      assert.equal((await post(`${s.url}/v1/logs`, logsRequest('bp', late))).status, 200);
      const rows = await readUntil(`${s.url}/api/logs?project_id=bp&limit=1000`, 30, 60_000);
      assert.equal(rows.length, 30);
    } finally {
      await s.close();
    }
  });

  test('a stopped pipeline answers 503 with Retry-After (e.g. while shutting down)', async () => {
    const s = await startServer();
    try {
      await s.logger.stop({ flush: 'auto' });
      const res = await post(`${s.url}/v1/logs`, logsRequest('late', ['x']));
      assert.equal(res.status, 503);
      assert.equal(res.headers.get('retry-after'), '1');
      assert.match(JSON.parse(res.text).message, /not accepting data/);
    } finally {
      await s.close();
    }
  });

  test('with drop_policy drop_newest the refused rows are reported as rejected, not retried', async () => {
    const s = await startServer({
      ...slow,
      producer_config: { max_queue_size: 20, drop_policy: 'drop_newest' },
    });
    try {
      assert.equal((await post(`${s.url}/v1/logs`, logsRequest('dn', first))).status, 200);
      const res = await post(`${s.url}/v1/logs`, logsRequest('dn', late));
      assert.equal(res.status, 200);
      const out = JSON.parse(res.text);
      assert.equal(out.partialSuccess.rejectedLogRecords, 10);
      assert.match(out.partialSuccess.errorMessage, /10 log records rejected: queue_full \(drop_newest\)/);
      const health = await getJson(`${s.url}/healthz`);
      assert.equal(health.body.producer.dropped.drop_newest, 10);
    } finally {
      await s.close();
    }
  });

  test('drop_oldest that cannot make room names its own policy in the refusal', async () => {
    const s = await startServer({ producer_config: { max_queue_size: 20, drop_policy: 'drop_oldest' } });
    try {
      // Library rows given just before the request's rows are queued reserve the whole queue while
      // their log write is pending (room drop_oldest cannot evict): the request's rows are refused.
      const ingestRequest = s.logger.ingestRequest.bind(s.logger);
      let library: Promise<unknown> = Promise.resolve();
      s.logger.ingestRequest = (tables, opts) => {
        const row = (i: number) => ({
          project_id: 'lib',
          service_name: 'x',
          time_unix_nano: 1n,
          body: `lib-${i}`,
        });
        library = s.logger.ingestRows(
          'logs',
          Array.from({ length: 20 }, (_, i) => row(i)),
        );
        return ingestRequest(tables, opts);
      };
      const res = await post(`${s.url}/v1/logs`, logsRequest('do', late));
      assert.equal(res.status, 200);
      const out = JSON.parse(res.text);
      assert.equal(out.partialSuccess.rejectedLogRecords, 10);
      assert.match(out.partialSuccess.errorMessage, /10 log records rejected: queue_full \(drop_oldest\)/);
      assert.equal(((await library) as { accepted: number }).accepted, 20);
      const health = await getJson(`${s.url}/healthz`);
      assert.equal(health.body.producer.dropped.drop_oldest, 10);
    } finally {
      await s.close();
    }
  });

  test('bodies beyond max_body_bytes_in_flight get 503 with Retry-After at once; the others are stored whole', async () => {
    // A budget of one byte: while a request is in flight (read, decoded, queued), any other is refused.
    const s = await startServer({ server_config: { decode_workers: 1, max_body_bytes_in_flight: 1 } });
    try {
      const big = (i: number) =>
        logsRequest(
          `bl${i}`,
          Array.from({ length: 3000 }, (_, j) => `body ${i}-${j} ${'x'.repeat(200)}`),
        );
      const replies = await Promise.all(
        [0, 1, 2, 3, 4, 5, 6, 7].map((i) => post(`${s.url}/v1/logs`, big(i))),
      );
      const statuses = replies.map((r) => r.status);
      assert.ok(statuses.includes(200), `some requests are decoded: ${statuses}`);
      assert.ok(statuses.includes(503), `some are refused while another is in flight: ${statuses}`);
      for (const r of replies.filter((x) => x.status === 503)) {
        assert.equal(r.headers.get('retry-after'), '1');
        assert.equal(r.headers.get('connection'), 'close');
        assert.match(JSON.parse(r.text).message, /max_body_bytes_in_flight = 1 bytes.*retry after 1 s/);
      }
      const health = await getJson(`${s.url}/healthz`);
      assert.equal(health.body.http.bodies_refused, statuses.filter((x) => x === 503).length);
      assert.equal(health.body.http.body_bytes_in_flight, 0, 'every answered request gave its bytes back');
      const accepted = statuses.filter((x) => x === 200).length;
      await waitWritten(s.url, accepted * 3000);
      for (const [i, r] of replies.entries()) {
        const { body } = await getJson(`${s.url}/api/logs?project_id=bl${i}&limit=5000`);
        assert.equal(body.count, r.status === 200 ? 3000 : 0, `request ${i} stored all or nothing`);
      }
    } finally {
      await s.close();
    }
  });
  test('a trace request is admitted whole: a 503 leaves none of its spans, events or links stored', async () => {
    // A queue of 10 rows that the aggregator drains meanwhile; each request feeds three tables.
    const s = await startServer({ producer_config: { max_queue_size: 10, block_timeout_s: 0 } });
    try {
      const hex = (n: number, len: number) => n.toString(16).padStart(len, '0');
      const request = (r: number) =>
        JSON.stringify({
          resourceSpans: [
            {
              scopeSpans: [
                {
                  spans: Array.from({ length: 3 }, (_, i) => ({
                    traceId: hex(r + 1, 32),
                    spanId: hex(r * 10 + i + 1, 16),
                    name: `s${i}`,
                    startTimeUnixNano: '1763700000000000000',
                    events: [{ timeUnixNano: '1763700000000000001', name: 'e' }],
                    links: [{ traceId: hex(999_999, 32), spanId: hex(1, 16) }],
                  })),
                },
              ],
            },
          ],
        });
      const replies = await Promise.all(
        Array.from({ length: 200 }, (_, r) => post(`${s.url}/v1/traces`, request(r))),
      );
      const ok = replies.flatMap((x, r) => (x.status === 200 ? [hex(r + 1, 32)] : []));
      assert.ok(replies.every((x) => x.status === 200 || x.status === 503));
      assert.ok(ok.length > 0 && ok.length < 200, `${ok.length} of 200 admitted`);
      await waitWritten(s.url, ok.length * 9);
      for (const table of ['spans', 'span_events', 'span_links']) {
        const { body } = await getJson(`${s.url}/api/${table}?limit=10000&select=trace_id`);
        const traces = body.rows.map((row: Json) => row.trace_id as string).sort();
        assert.deepEqual(
          traces,
          ok.flatMap((t) => [t, t, t]).sort(),
          `${table}: three rows of each admitted request`,
        );
      }
    } finally {
      await s.close();
    }
  });
});

describe('/healthz, /api parameters and the OpenAPI document', () => {
  let s: TestServer;
  const count = 150;
  before(async () => {
    s = await startServer();
    const bodies = Array.from({ length: count }, (_, i) => `message ${i}${i % 10 === 0 ? ' needle' : ''}`);
    assert.equal((await post(`${s.url}/v1/logs`, logsRequest('reads', bodies, 'api-svc'))).status, 200);
    await waitWritten(s.url, count);
    await waitDecodeWorker(s.url); // the one the first body started
  });
  after(() => s.close());

  test('/healthz reports version, process and pipeline state', async () => {
    const { status, body } = await getJson(`${s.url}/healthz`);
    assert.equal(status, 200);
    assert.equal(body.status, 'ok');
    assert.equal(body.version, '0.1.1');
    assert.equal(body.pid, process.pid);
    assert.ok(body.uptime_s >= 0);
    assert.ok(body.memory.rss > 0 && body.memory.heap_used > 0);
    assert.ok(
      body.event_loop_delay_ms.p99 >= body.event_loop_delay_ms.p50 &&
        body.event_loop_delay_ms.max >= body.event_loop_delay_ms.p99 &&
        body.event_loop_delay_ms.max < 10_000,
    );
    assert.equal(body.producer.accepted, count);
    assert.equal(body.producer.queue_capacity, 2048);
    assert.ok(body.aggregator.rows_written >= count);
    assert.ok(['event_loop', 'pool'].includes(body.wal.write_path), `wal.write_path ${body.wal.write_path}`);
    assert.deepEqual(
      body.decode,
      { threads: body.decode.threads, event_loop: 1, workers: 0, running: 1 },
      'one body of 150 records, the first: on the event loop while the decode worker it started loads',
    );
    assert.ok(body.decode.threads >= 1);
    assert.equal(typeof body.shipper.enabled, 'boolean');
  });

  test('limit defaults to 100, newest first; limit, filters and select narrow the result', async () => {
    const { body } = await getJson(`${s.url}/api/logs`);
    assert.equal(body.count, 100);
    const times = body.rows.map((r: Json) => BigInt(r.time_unix_nano));
    for (let i = 1; i < times.length; i++) assert.ok(times[i - 1] >= times[i], 'newest first');
    assert.equal(body.rows[0].body, `message ${count - 1}`);

    const five = (await getJson(`${s.url}/api/logs?limit=5&select=body,severity_number&select=event_ts`))
      .body;
    assert.equal(five.count, 5);
    assert.deepEqual(Object.keys(five.rows[0]), ['body', 'severity_number', 'event_ts']);

    const needles = (await getJson(`${s.url}/api/logs?body_like=needle&limit=10000`)).body;
    assert.equal(needles.count, 15);
    const errors = (await getJson(`${s.url}/api/logs?severity_ge=17&service_name=api-svc&limit=10000`)).body;
    assert.equal(errors.count, 50);
    const none = (await getJson(`${s.url}/api/logs?project_id=nobody`)).body;
    assert.deepEqual(none, { rows: [], count: 0 });
    const today = new Date().toISOString().slice(0, 10);
    const dated = (
      await getJson(`${s.url}/api/logs?date_from=${today}&date_to=${today}&limit=3&storage=local`)
    ).body;
    assert.equal(dated.count, 3);
    const past = (await getJson(`${s.url}/api/logs?date_from=2001-01-01&date_to=2001-01-02`)).body;
    assert.equal(past.count, 0);
  });

  test('invalid parameters are 400 naming the parameter', async () => {
    const cases: [string, string][] = [
      ['limit=0', 'limit'],
      ['limit=10001', 'limit'],
      ['limit=ten', 'limit'],
      ['date_from=2024-13-01', 'date_from'],
      ['date_from=2024-02-02&date_to=2024-02-01', 'date_from'],
      ['trace_id=xyz', 'trace_id'],
      ['span_id=12', 'span_id'],
      ['severity_ge=high', 'severity_ge'],
      ['storage=ftp', 'storage'],
      ['select=body,nope', 'select'],
      ['limit=1&limit=2', 'limit'],
      ['colour=red', 'colour'],
    ];
    for (const [qs, param] of cases) {
      const { status, body } = await getJson(`${s.url}/api/logs?${qs}`);
      assert.equal(status, 400, qs);
      assert.equal(body.parameter, param, qs);
      assert.match(body.message, new RegExp(`\\b${param}\\b`), qs);
    }
    const spans = await getJson(`${s.url}/api/spans?severity_ge=9`);
    assert.equal(spans.status, 400);
    assert.equal(spans.body.parameter, 'severity_ge');
    assert.match(spans.body.message, /severity_ge is not a filter of table spans/);
    if (process.env['S3_BUCKET'] === undefined) {
      const s3 = await getJson(`${s.url}/api/logs?storage=s3`);
      assert.equal(s3.status, 400);
      assert.equal(s3.body.parameter, 'storage');
      assert.match(s3.body.message, /object.storage/);
    }
    const metrics = await getJson(`${s.url}/api/metrics/points?body_like=x`);
    assert.equal(metrics.status, 400);
    assert.equal(metrics.body.parameter, 'body_like');
  });

  test('/api/openapi.json describes every endpoint', async () => {
    const { status, body } = await getJson(`${s.url}/api/openapi.json`);
    assert.equal(status, 200);
    assert.equal(body.openapi, '3.1.0');
    assert.equal(body.info.version, '0.1.1');
    for (const path of [
      '/v1/traces',
      '/v1/logs',
      '/v1/metrics',
      '/healthz',
      '/api/spans',
      '/api/span_events',
      '/api/span_links',
      '/api/logs',
      '/api/metrics/points',
      '/api/metrics/hist',
    ]) {
      assert.ok(body.paths[path], path);
    }
    const logParams = body.paths['/api/logs'].get.parameters.map((p: Json) => p.name);
    for (const p of [
      'date_from',
      'date_to',
      'project_id',
      'service_name',
      'severity_ge',
      'body_like',
      'select',
      'limit',
      'storage',
    ]) {
      assert.ok(logParams.includes(p), p);
    }
    const spanParams = body.paths['/api/spans'].get.parameters.map((p: Json) => p.name);
    assert.ok(!spanParams.includes('severity_ge'));
    assert.ok(body.components.schemas.logs.properties.time_unix_nano);
  });
});
