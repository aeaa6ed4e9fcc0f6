// CORS for browser SDKs: off by default; with server_config.cors_allowed_origins a preflight to
// /v1/* is answered before authentication, allowed origins are echoed on every answer of the OTLP
// routes (refusals included), others get no CORS headers, and /api/* none at all.

import assert from 'node:assert/strict';
import { request } from 'node:http';
import { after, before, describe, test } from 'node:test';
import { closeReadWorkers } from '../../src/read/index.ts';
import { createToken } from '../../src/storage/tokens.ts';
import { getJson, startServer, type TestServer, waitWritten } from './helpers/harness.ts';

after(() => closeReadWorkers());

interface Answer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: string;
}

/** One request with exactly these headers (fetch would add or refuse some, Origin among them). */
function send(url: string, method: string, headers: Record<string, string>, body = ''): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = request(url, { method, headers }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () =>
        resolve({ status: res.statusCode!, headers: res.headers, body: Buffer.concat(chunks).toString() }),
      );
    });
    req.on('error', reject);
    req.end(body);
  });
}

/** The answer's CORS headers. */
function corsHeaders(a: Answer): Record<string, unknown> {
  return Object.fromEntries(Object.entries(a.headers).filter(([k]) => k.startsWith('access-control-')));
}

const LOG = JSON.stringify({
  resourceLogs: [
    { scopeLogs: [{ logRecords: [{ timeUnixNano: '1700000000000000000', body: { stringValue: 'x' } }] }] },
  ],
});

const preflight = (url: string, origin: string, headers = 'content-type') =>
  send(url, 'OPTIONS', {
    origin,
    'access-control-request-method': 'POST',
    'access-control-request-headers': headers,
  });

describe('CORS off (the default)', () => {
  let s: TestServer;
  before(async () => {
    s = await startServer();
  });
  after(() => s.close());

  test('no preflight route, no CORS headers on an answer', async () => {
    const pre = await preflight(`${s.url}/v1/logs`, 'https://app.example.com');
    assert.ok(pre.status >= 400, `preflight answered ${pre.status}`);
    assert.equal(pre.headers['access-control-allow-origin'], undefined);
    const posted = await send(
      `${s.url}/v1/logs`,
      'POST',
      { origin: 'https://app.example.com', 'content-type': 'application/json' },
      LOG,
    );
    assert.equal(posted.status, 200);
    assert.equal(posted.headers['access-control-allow-origin'], undefined);
  });
});

describe('CORS on: listed origins, a wildcard origin, an extra header, auth on', () => {
  let s: TestServer;
  let token: string;
  before(async () => {
    s = await startServer({
      server_config: {
        cors_allowed_origins: ['https://app.example.com', 'https://*.example.org'],
        cors_allowed_headers: ['X-Custom'],
        cors_max_age_s: 600,
      },
    });
    token = (await createToken(s.logger.layout.tokensFile, { project: 'web', scopes: ['ingest', 'read'] }))
      .token;
  });
  after(() => s.close());

  test('a preflight from an allowed origin is answered without a token', async () => {
    for (const origin of ['https://app.example.com', 'https://shop.eu.example.org']) {
      const pre = await preflight(`${s.url}/v1/traces`, origin, 'content-type,authorization,x-project-id');
      assert.equal(pre.status, 204, origin);
      assert.equal(pre.headers['access-control-allow-origin'], origin);
      assert.equal(pre.headers['access-control-allow-credentials'], 'true');
      assert.equal(pre.headers['access-control-allow-methods'], 'POST');
      assert.deepEqual(String(pre.headers['access-control-allow-headers']).toLowerCase().split(', '), [
        'content-type',
        'content-encoding',
        'authorization',
        'x-project-id',
        'x-custom',
      ]);
      assert.equal(pre.headers['access-control-max-age'], '600');
      assert.match(String(pre.headers.vary), /Origin/);
    }
  });

  test('an origin not listed gets no CORS headers, preflight or POST', async () => {
    for (const origin of ['https://evil.example.com', 'https://example.org', 'http://app.example.com']) {
      const pre = await preflight(`${s.url}/v1/logs`, origin);
      // No preflight: an OPTIONS to /v1/*, here refused by auth (405 with auth off).
      assert.equal(pre.status, 401, origin);
      assert.deepEqual(corsHeaders(pre), {}, origin);
    }
    const posted = await send(
      `${s.url}/v1/logs`,
      'POST',
      {
        origin: 'https://evil.example.com',
        'content-type': 'application/json',
        authorization: `Bearer ${token}`,
      },
      LOG,
    );
    assert.deepEqual(corsHeaders(posted), {});
  });

  test("a POST's answer carries the origin: a refusal the page can read, then the row stored", async () => {
    const origin = 'https://app.example.com';
    const refused = await send(
      `${s.url}/v1/logs`,
      'POST',
      { origin, 'content-type': 'application/json' },
      LOG,
    );
    assert.equal(refused.status, 401);
    assert.equal(refused.headers['access-control-allow-origin'], origin);
    assert.equal(refused.headers['access-control-allow-credentials'], 'true');
    // So that an exporter in the page can wait as a 429 or 503 asks.
    assert.equal(refused.headers['access-control-expose-headers'], 'Retry-After');
    const before = (await getJson(`${s.url}/healthz`)).body.aggregator.rows_written as number;
    const posted = await send(
      `${s.url}/v1/logs`,
      'POST',
      { origin, 'content-type': 'application/json', authorization: `Bearer ${token}` },
      LOG,
    );
    assert.equal(posted.status, 200, posted.body);
    assert.equal(posted.headers['access-control-allow-origin'], origin);
    await waitWritten(s.url, before + 1);
  });

  test('the read API and /healthz get no CORS headers', async () => {
    const origin = 'https://app.example.com';
    const pre = await preflight(`${s.url}/api/logs`, origin);
    assert.equal(pre.status, 404);
    assert.equal(pre.headers['access-control-allow-origin'], undefined);
    const health = await send(`${s.url}/healthz`, 'GET', { origin });
    assert.equal(health.status, 200);
    assert.equal(health.headers['access-control-allow-origin'], undefined);
  });
});

describe('CORS on for any origin and any header', () => {
  let s: TestServer;
  before(async () => {
    s = await startServer({ server_config: { cors_allowed_origins: ['*'], cors_allowed_headers: ['*'] } });
  });
  after(() => s.close());

  test('the asking origin and headers are echoed, never a bare *', async () => {
    const origin = 'http://localhost:5173';
    const pre = await preflight(`${s.url}/v1/metrics`, origin, 'content-type,x-anything');
    assert.equal(pre.status, 204);
    assert.equal(pre.headers['access-control-allow-origin'], origin);
    assert.equal(pre.headers['access-control-allow-headers'], 'content-type,x-anything');
    assert.equal(pre.headers['access-control-max-age'], '7200');
  });
});
