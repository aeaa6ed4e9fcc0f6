// Tenancy over HTTP, against a running server: tokens bound to a project and scopes (401, 403, the
// token deciding the project), isolation of projects on every read endpoint and filter, tokens made
// and revoked while the server runs, a broken tokens file, require_auth, the Host rule, per-project
// rate and queue share (429), project.id rules and attribute limits.

import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { readdir, readFile, rm, truncate, writeFile } from 'node:fs/promises';
import { request as httpRequest } from 'node:http';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { loadProtobuf } from '../../src/otlp/index.ts';
import { closeReadWorkers } from '../../src/read/index.ts';
import { createToken, revokeToken, type TokenScope } from '../../src/storage/tokens.ts';
import { jsonToProtobuf } from '../otlp/helpers.ts';
import {
  decodeStatusProto,
  getJson,
  type Json,
  post,
  startServer,
  type TestServer,
  waitWritten,
} from './helpers/harness.ts';

after(() => closeReadWorkers());

const JSON_CT = { 'content-type': 'application/json' };
const PROTO_CT = { 'content-type': 'application/x-protobuf' };
const A = 'tenant-a';
const B = 'tenant-b';
const TRACE = '5b8efff798038103d269b633813fc60c';
const fixture = (name: string) =>
  readFileSync(new URL(`../fixtures/otlp/${name}.json`, import.meta.url), 'utf8');

const kv = (key: string, value: unknown) => ({ key, value });
const str = (s: string) => ({ stringValue: s });

/** A trace of one span with an event and a link (rows in spans, span_events and span_links). */
function traceBody(tag: string, resourceAttrs: object[] = []): string {
  return JSON.stringify({
    resourceSpans: [
      {
        resource: { attributes: [kv('service.name', str(`svc-${tag}`)), ...resourceAttrs] },
        scopeSpans: [
          {
            spans: [
              {
                traceId: TRACE,
                spanId: 'eee19b7ec3c1b174',
                name: `span-${tag}`,
                startTimeUnixNano: '1700000000000000000',
                endTimeUnixNano: '1700000000000001000',
                events: [{ timeUnixNano: '1700000000000000500', name: `event-${tag}` }],
                links: [{ traceId: TRACE, spanId: 'eee19b7ec3c1b173' }],
              },
            ],
          },
        ],
      },
    ],
  });
}

function logsBody(bodies: string[], resourceAttrs: object[] = []): string {
  return JSON.stringify({
    resourceLogs: [
      {
        resource: { attributes: [kv('service.name', str('svc')), ...resourceAttrs] },
        scopeLogs: [
          {
            logRecords: bodies.map((b, i) => ({
              timeUnixNano: String(1_700_000_000_000_000_000n + BigInt(i)),
              body: str(b),
            })),
          },
        ],
      },
    ],
  });
}

const bearer = (token: string) => ({ authorization: `Bearer ${token}` });

/** GET with headers; the JSON body and status. */
async function get(
  url: string,
  headers: Record<string, string> = {},
): Promise<{ status: number; body: Json }> {
  const res = await fetch(url, { headers });
  return { status: res.status, body: await res.json() };
}

/** A request with a Host header of our choice (fetch does not let one set it). */
function withHost(url: string, host: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(url, { headers: { host } }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode ?? 0));
    });
    req.on('error', reject);
    req.end();
  });
}

const READ_PATHS = ['spans', 'span_events', 'span_links', 'logs', 'metrics/points', 'metrics/hist'];

describe('tokens: auth on once the instance has one; a token decides the project', () => {
  let s: TestServer;
  let file: string;
  const tokens: Record<string, string> = {};
  const make = async (key: string, project: string, scopes: TokenScope[]) => {
    tokens[key] = (await createToken(file, { project, scopes, name: key })).token;
  };

  before(async () => {
    s = await startServer();
    file = s.logger.layout.tokensFile;
  });
  after(() => s.close());

  test('without a token, auth is off: anyone writes any project; /healthz says so', async () => {
    assert.deepEqual((await getJson(`${s.url}/healthz`)).body.auth, { enabled: false, required: false });
    for (const project of [A, B]) {
      const h = { ...JSON_CT, 'x-project-id': project };
      for (const [signal, body] of [
        ['traces', traceBody(project)],
        ['logs', fixture('logs')],
        ['metrics', fixture('metrics')],
      ] as const) {
        const res = await post(`${s.url}/v1/${signal}`, body, h);
        assert.equal(res.status, 200, res.text);
      }
    }
    await waitWritten(s.url, 2 * (3 + 1 + 4));
  });

  test('a token made while the server runs turns auth on at once', async () => {
    await make('a', A, ['ingest', 'read']);
    await make('aRead', A, ['read']);
    await make('aIngest', A, ['ingest']);
    await make('b', B, ['ingest', 'read']);
    const health = await getJson(`${s.url}/healthz`);
    assert.equal(health.status, 200, '/healthz stays open');
    assert.deepEqual(health.body.auth, { enabled: true, required: false });
    const text = JSON.stringify(health.body);
    assert.ok(!text.includes(A) && !text.includes(B), 'no project data in /healthz');
    assert.equal((await get(`${s.url}/api/openapi.json`)).status, 200, 'the API description stays open');
  });

  test('OTLP without a valid token: 401 with a google.rpc.Status in the request encoding', async () => {
    const body = logsBody(['x']);
    const cases: [string, Record<string, string>][] = [
      ['no token', {}],
      ['an unknown token', bearer(`otelake_0123456789ab_${'A'.repeat(43)}`)],
      ['a token with one character changed', bearer(`${tokens['a']!.slice(0, -1)}x`)],
      ['not a token', bearer('hunter2')],
      ['Basic', { authorization: `Basic ${Buffer.from(`u:${tokens['a']}`).toString('base64')}` }],
      ['the token without Bearer', { authorization: tokens['a']! }],
    ];
    for (const [label, headers] of cases) {
      const res = await post(`${s.url}/v1/logs`, body, { ...JSON_CT, ...headers });
      assert.equal(res.status, 401, label);
      assert.equal(res.headers.get('content-type'), 'application/json', label);
      const status = JSON.parse(res.text);
      assert.equal(status.code, 16, `${label}: UNAUTHENTICATED`);
      assert.match(status.message, /authentication required/, label);
      assert.match(res.headers.get('www-authenticate') ?? '', /^Bearer realm="otelake"/, label);
    }
    const proto = await post(`${s.url}/v1/traces`, new Uint8Array([1, 2, 3]), PROTO_CT);
    assert.equal(proto.status, 401);
    assert.equal(proto.headers.get('content-type'), 'application/x-protobuf');
    assert.equal(decodeStatusProto(proto.bytes).code, 16);
    // Any method of an OTLP path, before anything else.
    assert.equal((await fetch(`${s.url}/v1/metrics`)).status, 401);
  });

  test('an ingest token decides the project: another X-Project-Id is 403, project.id is overridden', async () => {
    const readOnly = await post(`${s.url}/v1/logs`, logsBody(['r']), {
      ...JSON_CT,
      ...bearer(tokens['aRead']!),
    });
    assert.equal(readOnly.status, 403);
    assert.equal(JSON.parse(readOnly.text).code, 7, 'PERMISSION_DENIED');
    assert.match(JSON.parse(readOnly.text).message, /ingest scope/);

    const other = await post(`${s.url}/v1/logs`, logsBody(['o']), {
      ...JSON_CT,
      ...bearer(tokens['a']!),
      'x-project-id': B,
    });
    assert.equal(other.status, 403);
    assert.match(JSON.parse(other.text).message, /not X-Project-Id "tenant-b"/);
    const twice = await post(`${s.url}/v1/logs`, logsBody(['o']), {
      ...JSON_CT,
      ...bearer(tokens['a']!),
      'x-project-id': `${A}, ${B}`,
    });
    assert.equal(twice.status, 403, 'a list smuggling another project');

    const same = await post(`${s.url}/v1/logs`, logsBody(['own-header']), {
      ...JSON_CT,
      ...bearer(tokens['aIngest']!),
      'x-project-id': A,
    });
    assert.equal(same.status, 200, same.text);
    // project.id naming B (or invalid) in the resource: the token's project A wins.
    for (const value of [str(B), str(''), { intValue: '3' }]) {
      const res = await post(`${s.url}/v1/logs`, logsBody(['overridden'], [kv('project.id', value)]), {
        ...JSON_CT,
        Authorization: `bearer   ${tokens['a']}`,
      });
      assert.equal(res.status, 200, res.text);
    }
    const codec = (await loadProtobuf())!;
    const protoBody = jsonToProtobuf(
      'logs',
      JSON.parse(logsBody(['proto-b'], [kv('project.id', str(B))])),
      codec,
    );
    assert.equal(
      (await post(`${s.url}/v1/logs`, protoBody, { ...PROTO_CT, ...bearer(tokens['a']!) })).status,
      200,
    );

    const read = async (token: string, query: string) =>
      (await get(`${s.url}/api/logs?${query}&limit=1000`, bearer(token))).body.rows.map((r: Json) => r.body);
    const deadline = Date.now() + 10_000;
    let bodies: string[] = [];
    while (Date.now() < deadline) {
      bodies = await read(tokens['a']!, 'service_name=svc');
      if (bodies.length >= 5) break;
      await new Promise((r) => setTimeout(r, 50));
    }
    assert.deepEqual(bodies.sort(), ['overridden', 'overridden', 'overridden', 'own-header', 'proto-b']);
    assert.deepEqual(await read(tokens['b']!, 'service_name=svc'), [], 'nothing landed in B');
  });

  test("a read token sees its project's rows only, on every endpoint and with every filter", async () => {
    const filters = (project: string) => [
      '',
      `project_id=${project}`,
      `trace_id=${TRACE}`,
      'span_id=eee19b7ec3c1b174',
      `service_name=svc-${B}`,
      'service_name=my.service',
      `name=span-${B}`,
      'metric_name=my.counter',
      'metric_type=sum',
      'select=project_id,event_ts',
      'storage=local&date_from=2000-01-01',
      'since=2000-01-01',
    ];
    for (const [key, project] of [
      ['aRead', A],
      ['b', B],
    ] as const) {
      let seen = 0;
      for (const path of READ_PATHS) {
        for (const filter of filters(project)) {
          const { status, body } = await get(`${s.url}/api/${path}?${filter}`, bearer(tokens[key]!));
          if (status === 400) {
            assert.match(body.message, /not a filter of table|metric types of/, `${path}?${filter}`);
            continue; // a filter the table does not have
          }
          assert.equal(status, 200, `${path}?${filter}: ${JSON.stringify(body)}`);
          for (const row of body.rows) assert.equal(row.project_id, project, `${path}?${filter}`);
          seen += body.count;
        }
        const all = await get(`${s.url}/api/${path}`, bearer(tokens[key]!));
        assert.ok(all.body.count > 0, `${project} has rows in ${path}`);
      }
      assert.ok(seen > 0);
    }
    // Asking for another project is refused, in any form.
    for (const query of [`project_id=${B}`, `project_id=${A}&project_id=${B}`, 'project_id=..']) {
      const res = await get(`${s.url}/api/logs?${query}`, bearer(tokens['aRead']!));
      assert.equal(res.status, 403, query);
      assert.equal(res.body.error, 'Forbidden');
    }
  });

  test('/api without a read token: 401, or 403 for a token without the read scope', async () => {
    const none = await get(`${s.url}/api/spans`);
    assert.equal(none.status, 401);
    assert.match(none.body.message, /authentication required/);
    const ingestOnly = await get(`${s.url}/api/spans`, bearer(tokens['aIngest']!));
    assert.equal(ingestOnly.status, 403);
    assert.match(ingestOnly.body.message, /read scope/);
  });

  test('a revoked token stops working at the next request, without a restart; auth stays on', async () => {
    await make('short', A, ['ingest', 'read']);
    assert.equal((await get(`${s.url}/api/logs`, bearer(tokens['short']!))).status, 200);
    const id = tokens['short']!.split('_')[1]!;
    assert.equal((await revokeToken(file, id))?.already, false);
    assert.equal((await get(`${s.url}/api/logs`, bearer(tokens['short']!))).status, 401);
    const res = await post(`${s.url}/v1/logs`, logsBody(['late']), {
      ...JSON_CT,
      ...bearer(tokens['short']!),
    });
    assert.equal(res.status, 401);
    assert.equal(
      (await get(`${s.url}/api/logs`, bearer(tokens['aRead']!))).status,
      200,
      'the others still work',
    );
  });

  test('a tokens file that cannot be read accepts no token (auth stays on) until it is mended', async () => {
    const good = readFileSync(file, 'utf8');
    await writeFile(file, '{"tokens": [ broken');
    // Refused with 503 and Retry-After, which clients retry: their token is not what is wrong.
    const read = await fetch(`${s.url}/api/logs`, { headers: bearer(tokens['aRead']!) });
    assert.equal(read.status, 503);
    assert.equal(read.headers.get('retry-after'), '5');
    await read.body?.cancel();
    const ingest = await post(`${s.url}/v1/logs`, logsBody(['while broken']), {
      ...JSON_CT,
      ...bearer(tokens['aIngest']!),
    });
    assert.equal(ingest.status, 503);
    assert.match(
      ingest.text,
      /no token can be checked now: the server's configs\/tokens\.json cannot be used/,
    );
    assert.doesNotMatch(ingest.text, new RegExp(s.dir), 'no path of the server in a client answer');
    const health = await getJson(`${s.url}/healthz`);
    assert.equal(health.body.status, 'degraded');
    assert.match(health.body.problems.join('\n'), /tokens\.json cannot be used/);
    assert.equal(health.body.auth.enabled, true);
    await rm(file);
    assert.equal((await getJson(`${s.url}/healthz`)).body.auth.enabled, false, 'no file: no tokens');
    await writeFile(file, good);
    assert.equal((await get(`${s.url}/api/logs`, bearer(tokens['aRead']!))).status, 200);
    assert.equal((await getJson(`${s.url}/healthz`)).body.status, 'ok');
  });

  test('bound to loopback, a request naming another host is refused (DNS rebinding)', async () => {
    const port = new URL(s.url).port;
    for (const host of [
      `localhost:${port}`,
      '127.0.0.1',
      `127.1.2.3:${port}`,
      '[::1]:9',
      'app.localhost',
      'LOCALHOST.',
    ]) {
      assert.equal(await withHost(`${s.url}/healthz`, host), 200, host);
    }
    for (const host of [
      'evil.example',
      `evil.example:${port}`,
      'localhost.evil.example',
      '127.0.0.1.evil.example',
      '0.0.0.0',
      '[::2]',
      '[::1].evil.example',
      '[::1]x',
    ]) {
      assert.equal(await withHost(`${s.url}/healthz`, host), 403, host);
      assert.equal(await withHost(`${s.url}/api/logs`, host), 403, host);
    }
  });
});

describe('require_auth: on without any token', () => {
  let s: TestServer;
  before(async () => {
    s = await startServer({ server_config: { require_auth: true } });
  });
  after(() => s.close());

  test('every ingest and read is 401 until a token exists; /healthz says auth is required', async () => {
    assert.deepEqual((await getJson(`${s.url}/healthz`)).body.auth, { enabled: true, required: true });
    assert.equal((await post(`${s.url}/v1/logs`, logsBody(['x']))).status, 401);
    assert.equal((await get(`${s.url}/api/logs`)).status, 401);
    const { token } = await createToken(s.logger.layout.tokensFile, { project: A, scopes: ['ingest'] });
    assert.equal(
      (await post(`${s.url}/v1/logs`, logsBody(['x']), { ...JSON_CT, ...bearer(token) })).status,
      200,
    );
  });
});

describe('project.id: the same rule for the header and the resource attribute', () => {
  let s: TestServer;
  before(async () => {
    s = await startServer();
  });
  after(() => s.close());

  test("an empty, non-string or invalid project.id refuses that resource's items (partial_success), on every signal and encoding, not filed under default", async () => {
    const codec = (await loadProtobuf())!;
    const RESPONSE: Record<string, [string, string]> = {
      traces: ['opentelemetry.proto.collector.trace.v1.ExportTraceServiceResponse', 'rejectedSpans'],
      logs: ['opentelemetry.proto.collector.logs.v1.ExportLogsServiceResponse', 'rejectedLogRecords'],
      metrics: [
        'opentelemetry.proto.collector.metrics.v1.ExportMetricsServiceResponse',
        'rejectedDataPoints',
      ],
    };
    const bad = [str(''), { intValue: '42' }, { boolValue: true }, str('a/b'), {}];
    for (const value of bad) {
      const attrs = [kv('project.id', value)];
      const bodies: [string, string][] = [
        ['traces', traceBody('x', attrs)],
        ['logs', logsBody(['x'], attrs)],
        [
          'metrics',
          JSON.stringify({
            resourceMetrics: [
              {
                resource: { attributes: attrs },
                scopeMetrics: [
                  { metrics: [{ name: 'm', gauge: { dataPoints: [{ asInt: '1', timeUnixNano: '1' }] } }] },
                ],
              },
            ],
          }),
        ],
      ];
      for (const [signal, body] of bodies) {
        const label = `${signal} ${JSON.stringify(value)}`;
        const [typeName, field] = RESPONSE[signal]!;
        const j = await post(`${s.url}/v1/${signal}`, body);
        assert.equal(j.status, 200, label);
        const partial = JSON.parse(j.text).partialSuccess;
        assert.equal(partial[field], 1, label);
        assert.match(
          partial.errorMessage,
          /^1 \S+ \S*\s?rejected: invalid resource attribute project\.id/,
          label,
        );
        const p = await post(
          `${s.url}/v1/${signal}`,
          jsonToProtobuf(signal as never, JSON.parse(body), codec),
          PROTO_CT,
        );
        assert.equal(p.status, 200, `${label} (protobuf)`);
        const type = codec.root.lookupType(typeName);
        const answer = type.toObject(type.decode(p.bytes), { longs: Number }) as {
          partialSuccess: Record<string, unknown>;
        };
        assert.equal(answer.partialSuccess[field], 1, `${label} (protobuf)`);
        assert.match(String(answer.partialSuccess['errorMessage']), /invalid resource attribute project\.id/);
      }
    }
    assert.equal(
      (await post(`${s.url}/v1/logs`, logsBody(['x']), { ...JSON_CT, 'x-project-id': '' })).status,
      400,
    );
    const { body } = await getJson(`${s.url}/healthz`);
    assert.equal(body.producer.accepted, 0, 'nothing was stored');
  });

  test("a gateway's batch: the resources with a valid project.id are stored, the one without is refused alone", async () => {
    const resource = (project: string, records: string[]) => ({
      resource: { attributes: [kv('service.name', str(`svc-${project}`)), kv('project.id', str(project))] },
      scopeLogs: [
        {
          logRecords: records.map((b) => ({ timeUnixNano: '1700000000000000000', body: str(b) })),
        },
      ],
    });
    const body = JSON.stringify({
      resourceLogs: [
        resource('gw-a', ['a1', 'a2']),
        resource('not valid', ['x1', 'x2', 'x3']),
        resource('gw-b', ['b1']),
      ],
    });
    const res = await post(`${s.url}/v1/logs`, body);
    assert.equal(res.status, 200);
    assert.deepEqual(JSON.parse(res.text).partialSuccess, {
      rejectedLogRecords: 3,
      errorMessage: `3 log records rejected: invalid resource attribute project.id "not valid": use 1-128 letters, digits, '.', '_' or '-', starting with a letter or digit (3)`,
    });
    await waitWritten(s.url, 3);
    const stored = async (project: string) =>
      (
        (await getJson(`${s.url}/api/logs?project_id=${project}&date_from=2000-01-01&select=body`)).body
          .rows as Json[]
      ).map((r) => r['body']);
    assert.deepEqual((await stored('gw-a')).sort(), ['a1', 'a2']);
    assert.deepEqual(await stored('gw-b'), ['b1']);
  });
});

describe("a damaged file of one project's rows", () => {
  test("stays reported after another project's read skips it, and goes once the file is sound again", async () => {
    const s = await startServer();
    try {
      const send = async (project: string, rows: string[]) =>
        (await post(`${s.url}/v1/logs`, logsBody(rows), { ...JSON_CT, 'x-project-id': project })).status;
      assert.equal(await send(B, ['b1', 'b2']), 200);
      await waitWritten(s.url, 2);
      const days = join(s.dir, 'test', 'staging', 'days'); // instance 'test' of the harness
      const [day] = await readdir(days); // the day the rows arrived
      const tableDir = join(days, day!, 'otel', 'logs');
      const files = async () => (await readdir(tableDir)).filter((n) => n.endsWith('.parquet'));
      const [bFile] = await files();
      assert.equal(await send(A, ['a1', 'a2']), 200);
      await waitWritten(s.url, 4);
      assert.equal((await files()).length, 2, "one file of B's rows, one of A's");
      const path = join(tableDir, bFile!);
      const whole = await readFile(path);
      await truncate(path, 100);

      const read = (project: string) =>
        getJson(`${s.url}/api/logs?project_id=${project}&date_from=${day}&date_to=${day}`);
      const damaged = async () =>
        ((await getJson(`${s.url}/healthz`)).body.damaged_tables as Json[]).map((d) => [
          d.table,
          d.day,
          d.found_by,
        ]);
      assert.equal((await read(B)).status, 500);
      assert.deepEqual(await damaged(), [['logs', day, 'read']]);
      const a = await read(A);
      assert.equal(a.status, 200);
      assert.equal(a.body.count, 2);
      assert.deepEqual(await damaged(), [['logs', day, 'read']], "A's read never opened B's file");

      await writeFile(path, whole);
      assert.equal((await read(A)).status, 200);
      assert.deepEqual(await damaged(), [], 'checked again after a read: the file is sound');
      assert.equal((await read(B)).body.count, 2);
    } finally {
      await s.close();
    }
  });
});

describe('per-project ingest rate and queue share: 429 + Retry-After for the noisy project only', () => {
  test('a project over its rate gets 429 (before or after decoding) while another still gets in', async () => {
    const LIMIT = 64 * 1024;
    const s = await startServer({ server_config: { project_max_rows_per_s: 100, body_limit_bytes: LIMIT } });
    try {
      const rows = (n: number) => Array.from({ length: n }, (_, i) => `r${i}`);
      const first = await post(`${s.url}/v1/logs`, logsBody(rows(150)), { ...JSON_CT, 'x-project-id': A });
      assert.equal(first.status, 200, 'a request of any size passes while the bucket is not empty');
      const again = await post(`${s.url}/v1/logs`, logsBody(['x']), { ...JSON_CT, 'x-project-id': A });
      assert.equal(again.status, 429);
      assert.ok(Number(again.headers.get('retry-after')) >= 1);
      assert.equal(JSON.parse(again.text).code, 8, 'RESOURCE_EXHAUSTED');
      assert.match(JSON.parse(again.text).message, /project_max_rows_per_s/);
      const proto = await post(`${s.url}/v1/logs`, new Uint8Array(0), { ...PROTO_CT, 'x-project-id': A });
      assert.equal(proto.status, 429, 'refused before the body is read');
      assert.equal(decodeStatusProto(proto.bytes).code, 8);
      // What sending again cannot mend is answered as such, not with a wait that ends in it.
      const big = logsBody(rows(2000));
      assert.ok(big.length > LIMIT);
      const oversized = await post(`${s.url}/v1/logs`, big, { ...JSON_CT, 'x-project-id': A });
      assert.equal(oversized.status, 413, oversized.text);
      assert.equal(oversized.headers.get('retry-after'), null);
      const coded = { ...JSON_CT, 'x-project-id': A, 'content-encoding': 'xz' };
      assert.equal((await post(`${s.url}/v1/logs`, logsBody(['x']), coded)).status, 415);
      // The project from the resource attribute: refused once decoded.
      const attr = await post(`${s.url}/v1/logs`, logsBody(['y'], [kv('project.id', str(A))]));
      assert.equal(attr.status, 429);
      const other = await post(`${s.url}/v1/logs`, logsBody(['z']), { ...JSON_CT, 'x-project-id': B });
      assert.equal(other.status, 200, 'another project is not affected');
      await waitWritten(s.url, 151);
      const { body } = await getJson(`${s.url}/api/logs?project_id=${A}&limit=1000`);
      assert.equal(body.count, 150, 'refused requests stored nothing');
    } finally {
      await s.close();
    }
  });

  test('a project holding its share of the queue gets 429 while another project still gets in', async () => {
    // The aggregator holds 1,000 rows at most and writes a batch only when it has 1,000 rows of a
    // table (or after 30 s): 999 spans and one log record stop it, and the queue keeps what follows.
    const s = await startServer({
      producer_config: { max_queue_size: 200, project_queue_share: 0.5, block_timeout_s: 0.2 },
      aggregator_config: {
        max_batch_rows: 1000,
        min_batch_rows: 1000,
        max_pending_rows: 1000,
        max_age_s: 30,
      },
    });
    try {
      const spans = JSON.parse(traceBody('filler'));
      const span = spans.resourceSpans[0].scopeSpans[0].spans[0];
      delete span.events;
      delete span.links;
      spans.resourceSpans[0].scopeSpans[0].spans = Array.from({ length: 999 }, () => span);
      const h = (project: string) => ({ ...JSON_CT, 'x-project-id': project });
      assert.equal((await post(`${s.url}/v1/traces`, JSON.stringify(spans), h('filler'))).status, 200);
      assert.equal((await post(`${s.url}/v1/logs`, logsBody(['stop']), h('filler'))).status, 200);
      const depth = async () => (await getJson(`${s.url}/healthz`)).body.producer.queue_depth;
      const rows = (n: number) => Array.from({ length: n }, (_, i) => `r${i}`);
      assert.equal((await post(`${s.url}/v1/logs`, logsBody(rows(100)), h(A))).status, 200);
      assert.equal(await depth(), 100, 'the queue keeps the rows');
      const noisy = await post(`${s.url}/v1/logs`, logsBody(['one more']), h(A));
      assert.equal(noisy.status, 429, 'A holds its share: 100 of 200');
      assert.equal(noisy.headers.get('retry-after'), '1');
      assert.match(JSON.parse(noisy.text).message, /project_queue_share/);
      assert.equal((await post(`${s.url}/v1/logs`, logsBody(rows(100)), h(B))).status, 200, 'B gets in');
      // The queue is full now: a third project waits for room, then gets 503 (not 429).
      assert.equal((await post(`${s.url}/v1/logs`, logsBody(['c']), h('tenant-c'))).status, 503);
      const { body } = await getJson(`${s.url}/healthz`);
      assert.equal(body.producer.dropped.project_queue_share, 1);
    } finally {
      await s.close();
    }
  });
});

describe('attribute limits: truncated and counted, never refused', () => {
  test('attributes beyond the count are dropped and counted; long values are cut', async () => {
    const s = await startServer({
      server_config: { attribute_count_limit: 3, attribute_value_length_limit: 8 },
    });
    try {
      const many = Array.from({ length: 6 }, (_, i) => kv(`k${i}`, str(`value-${i}-${'x'.repeat(20)}`)));
      const body = JSON.stringify({
        resourceLogs: [
          {
            resource: { attributes: many, droppedAttributesCount: 1 },
            scopeLogs: [
              {
                scope: { name: 's', attributes: [kv('only', str('short'))] },
                logRecords: [
                  {
                    timeUnixNano: '1700000000000000000',
                    body: str('b'.repeat(100)),
                    attributes: [...many, kv('list', { arrayValue: { values: [str('abcdefghijk')] } })],
                    droppedAttributesCount: 2,
                  },
                ],
              },
            ],
          },
        ],
      });
      const res = await post(`${s.url}/v1/logs`, body, { ...JSON_CT, 'x-project-id': 'limits' });
      assert.equal(res.status, 200, res.text);
      assert.deepEqual(JSON.parse(res.text), {}, 'nothing rejected');
      await waitWritten(s.url, 1);
      const [row] = (await getJson(`${s.url}/api/logs?project_id=limits`)).body.rows;
      assert.deepEqual(JSON.parse(row.attributes), { k0: 'value-0-', k1: 'value-1-', k2: 'value-2-' });
      assert.equal(row.dropped_attributes_count, 6, '2 sent + 4 dropped here');
      assert.deepEqual(JSON.parse(row.resource_attributes), {
        k0: 'value-0-',
        k1: 'value-1-',
        k2: 'value-2-',
      });
      assert.equal(row.resource_dropped_attributes_count, 4, '1 sent + 3 dropped here');
      assert.deepEqual(JSON.parse(row.scope_attributes), { only: 'short' });
      assert.equal(row.body, 'b'.repeat(100), 'a body is not an attribute');
    } finally {
      await s.close();
    }
  });
});
