// Where the server's Decoders decode a body while their worker is loading (the first body starts
// it, as does the first after the workers stopped idle): a body larger than the event loop's usual
// share, up to WARMING_BODY_BYTES, is decoded on the loop rather than waiting for the worker's
// start; once the worker has loaded, it takes such bodies again. A larger body waits for it.

import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import type { Worker } from 'node:worker_threads';
import Fastify from 'fastify';
import { Logger } from '../../src/index.ts';
import { loadProtobuf, type Signal } from '../../src/otlp/index.ts';
import { BodyBudget } from '../../src/server/body.ts';
import {
  type DecodeResult,
  Decoders,
  type DecodeTask,
  INLINE_BODY_BYTES,
  RequestDecoder,
} from '../../src/server/decode.ts';
import { registerIngestRoutes } from '../../src/server/ingest.ts';
import { WorkerLost } from '../../src/storage/worker-pool.ts';
import { DEFAULT_SETTINGS, jsonToProtobuf } from '../otlp/helpers.ts';

const LIMITS = { countLimit: 128, valueLengthLimit: 4096 };

/** A JSON logs request of `n` records of about `bytes` each. */
function logsBody(n: number, bytes: number): Buffer {
  const logRecords = Array.from({ length: n }, (_, i) => ({
    timeUnixNano: String(1_700_000_000_000_000_000n + BigInt(i)),
    body: { stringValue: `${i} ${'x'.repeat(bytes)}` },
  }));
  return Buffer.from(JSON.stringify({ resourceLogs: [{ resource: {}, scopeLogs: [{ logRecords }] }] }));
}

function task(body: Buffer): DecodeTask {
  return {
    signal: 'logs',
    format: 'json',
    body: new Uint8Array(body),
    codings: [],
    bodyLimit: 64 * 1024 * 1024,
    headerProjectId: 'p',
    defaultProjectId: 'default',
  };
}

async function rows(d: Decoders, body: Buffer): Promise<number> {
  const r = await d.decode(task(body));
  assert.ok(r.ok, JSON.stringify(r));
  return r.tables.logs!.batch.numRows;
}

/** Runs `fn` with Decoders of `workers` threads (JSON only), closed after. */
async function withDecoders(workers: number, fn: (d: Decoders) => Promise<void>): Promise<void> {
  const d = await Decoders.create({ settings: DEFAULT_SETTINGS, limits: LIMITS, workers, protobuf: false });
  try {
    await fn(d);
  } finally {
    await d.close();
  }
}

async function untilRunning(d: Decoders): Promise<void> {
  const deadline = Date.now() + 15_000;
  while (d.stats().running < 1) {
    assert.ok(Date.now() < deadline, 'the decode worker loaded within 15 s');
    await new Promise((r) => setTimeout(r, 10));
  }
}

describe('Decoders while their worker loads', () => {
  test('a 100 KB body is decoded on the event loop until the worker has loaded, then by it', () =>
    withDecoders(1, async (d) => {
      const body = logsBody(100, 1000);
      assert.ok(body.length > INLINE_BODY_BYTES);
      // No worker runs before the first body; it starts one, which cannot have loaded yet.
      assert.equal(d.stats().running, 0);
      assert.equal(await rows(d, body), 100);
      assert.deepEqual(d.stats(), { event_loop: 1, workers: 0, running: 0 });
      await untilRunning(d);
      assert.equal(await rows(d, body), 100);
      assert.deepEqual(d.stats(), { event_loop: 1, workers: 1, running: 1 });
    }));

  test('a body above 512 KiB waits for the worker', () =>
    withDecoders(1, async (d) => {
      const body = logsBody(600, 1000);
      assert.ok(body.length > 512 * 1024);
      assert.equal(await rows(d, body), 600);
      assert.deepEqual(d.stats(), { event_loop: 0, workers: 1, running: 1 });
    }));

  test('without workers every body is decoded on the event loop, none starts', () =>
    withDecoders(0, async (d) => {
      assert.equal(await rows(d, logsBody(600, 1000)), 600);
      assert.deepEqual(d.stats(), { event_loop: 1, workers: 0, running: 0 });
    }));
});

describe('a decode worker that ends with bodies in hand', () => {
  test('fails them with WorkerLost; a new worker takes the next body', () =>
    withDecoders(1, async (d) => {
      await rows(d, logsBody(600, 1000)); // starts the worker
      await untilRunning(d);
      // The worker's pool, and its one worker, as the test stops it mid-task.
      const pool = (d as unknown as { pool: { slots: { pending: Map<number, unknown>; worker: Worker }[] } })
        .pool;
      const decoding = d.decode(task(logsBody(4000, 200)));
      const slot = pool.slots[0]!;
      assert.equal(slot.pending.size, 1, 'the body went to the worker');
      await slot.worker.terminate();
      await assert.rejects(decoding, (err) => err instanceof WorkerLost);
      assert.equal(await rows(d, logsBody(4000, 200)), 4000);
    }));

  test('the ingest route answers 503 with Retry-After, which OTLP clients retry (a 500 they drop)', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'otelake-decoder-lost-'));
    const logger = await Logger.open({ instanceDir: dir, instanceId: 't', handleSignals: false });
    const app = Fastify();
    const lost = {
      protobuf: false,
      decode: () => Promise.reject(new WorkerLost('worker exited with code 1')),
    } as unknown as Decoders;
    registerIngestRoutes(app, {
      logger,
      decoders: lost,
      bodies: new BodyBudget(1024 * 1024),
      bodyLimitBytes: 1024 * 1024,
      defaultProjectId: 'default',
      rates: null,
    });
    try {
      const res = await app.inject({
        method: 'POST',
        url: '/v1/logs',
        headers: { 'content-type': 'application/json' },
        payload: logsBody(1, 10),
      });
      assert.equal(res.statusCode, 503);
      assert.equal(res.headers['retry-after'], '1');
      assert.match(res.json().message, /the decoder ended before answering/);
    } finally {
      await app.close();
      await logger.stop();
      await rm(dir, { recursive: true, force: true });
    }
  });
});

describe('the rows a request may make (limits.maxRows, from the memory limit)', () => {
  const capped = new RequestDecoder(true, DEFAULT_SETTINGS, { ...LIMITS, maxRows: 1000 });
  const decode = (body: Uint8Array, format: 'json' | 'protobuf' = 'json', signal: Signal = 'logs') =>
    capped.decode({ ...task(Buffer.from(body)), format, signal });
  const refused = (r: DecodeResult, table: string) => {
    assert.ok(!r.ok, 'refused');
    assert.equal(r.status, 413);
    assert.match(r.message, new RegExp(`more than 1000 ${table} rows in one request: send smaller batches`));
  };
  const resource = (n: number, bytes = 10) => ({
    scopeLogs: [
      {
        logRecords: Array.from({ length: n }, (_, i) => ({
          body: { stringValue: `${i}${'x'.repeat(bytes)}` },
        })),
      },
    ],
  });

  test('a resource, or resources together, of more rows than the cap: 413; the cap itself is taken', async () => {
    const ok = decode(Buffer.from(JSON.stringify({ resourceLogs: [resource(1000)] })));
    assert.ok(ok.ok && ok.tables.logs!.batch.numRows === 1000);
    refused(decode(Buffer.from(JSON.stringify({ resourceLogs: [resource(1001)] }))), 'logs');
    refused(
      decode(Buffer.from(JSON.stringify({ resourceLogs: [resource(400), resource(400), resource(400)] }))),
      'logs',
    );
    // The decoder takes the next request as before.
    assert.ok(decode(Buffer.from(JSON.stringify({ resourceLogs: [resource(10)] }))).ok);
  });

  test('protobuf, a large resource whose rows are handed on as they are made; the tree route', async () => {
    const codec = (await loadProtobuf())!;
    // 1,001 records of 300 bytes: a resource over 256 KiB, handed on every 256 rows.
    const large = jsonToProtobuf('logs', { resourceLogs: [resource(1001, 300)] }, codec);
    assert.ok(large.length > 256 * 1024);
    refused(decode(large, 'protobuf'), 'logs');
    assert.ok(decode(jsonToProtobuf('logs', { resourceLogs: [resource(1000, 300)] }, codec), 'protobuf').ok);
    // snake_case keys: the JSON reader declines, JSON.parse's tree maps it.
    const snake = JSON.stringify({
      resource_logs: [{ scope_logs: [{ log_records: resource(1001).scopeLogs[0]!.logRecords }] }],
    });
    refused(decode(Buffer.from(snake)), 'log_records|logRecords');
    // Counted before JSON.parse holds them: 16 values a row at most, here ~40 a record.
    const attributes = Array.from({ length: 10 }, (_, i) => ({ key: `k${i}`, value: { intValue: i } }));
    const many = { log_records: Array.from({ length: 500 }, () => ({ attributes })) };
    const r = decode(Buffer.from(JSON.stringify({ resource_logs: [{ scope_logs: [many] }] })));
    assert.ok(!r.ok && r.status === 413, JSON.stringify(r));
    assert.match(r.message, /a JSON body of more than 16000 values in a form read through JSON\.parse/);
    // The same rows as the SDKs write them go the reader's way, which holds no tree.
    const camel = { logRecords: many.log_records };
    assert.ok(decode(Buffer.from(JSON.stringify({ resourceLogs: [{ scopeLogs: [camel] }] }))).ok);
  });

  test('span events count apart from their spans', () => {
    const spans = Array.from({ length: 600 }, (_, i) => ({
      traceId: 'ab'.repeat(16),
      spanId: (i + 1).toString(16).padStart(16, '0'),
      name: 's',
      startTimeUnixNano: '1700000000000000000',
      endTimeUnixNano: '1700000000000000001',
      events: [{ name: 'e1' }, { name: 'e2' }],
    }));
    const body = Buffer.from(JSON.stringify({ resourceSpans: [{ scopeSpans: [{ spans }] }] }));
    refused(decode(body, 'json', 'traces'), 'span_events');
  });
});
