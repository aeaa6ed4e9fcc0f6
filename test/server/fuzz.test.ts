// Hostile input, for a bounded time (FUZZ_SECONDS, default 8), against a server process: random and
// mutated OTLP JSON and protobuf bodies, truncations, huge strings, many attributes, deep nesting,
// wrong types, wrong and lying encodings, compression bombs, mixed with valid requests from several
// clients at once. The process must never crash and its memory must stay bounded; every request
// known to be malformed gets a 4xx (a mutated body that is still valid may get 200, never a 5xx
// but a 503 that asks to retry); and every row of a valid request answered 200 is readable
// afterwards, exactly once. FUZZ_SEED replays a run (the seed is printed on failure).

import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import * as zlib from 'node:zlib';
import { logsRequest, tracesRequest } from '../../bench/otlp-payloads.ts';
import { loadProtobuf } from '../../src/otlp/index.ts';
import { closeReadWorkers } from '../../src/read/index.ts';
import { jsonToProtobuf } from '../otlp/helpers.ts';
import { memoryMiB } from './helpers/child-server.ts';
import { startChild } from './helpers/crash-loop.ts';

after(() => closeReadWorkers());

const SECONDS = Number(process.env['FUZZ_SECONDS'] ?? 8);
const SEED = Number(process.env['FUZZ_SEED'] ?? Math.floor(Math.random() * 2 ** 31));
const CLIENTS = 4;
const BODY_LIMIT = 8 * 1024 * 1024;
/**
 * The server's RSS must stay below this (it idles at ~150 MiB; bodies are at most 8 MiB). 8 s runs
 * peaked at 522-554 MiB and 60 s runs at 817-843 MiB since in-day compaction merges the server's
 * files instead of rewriting them with polars (before: 620-750 and 1,411-1,795 MiB, polars
 * allocating 77-123 MiB at once for files holding many of the 4 MiB log bodies).
 */
const RSS_LIMIT_MIB = 1536;

/** mulberry32: a small seeded generator, so that a failing run can be replayed. */
function generator(seed: number) {
  let a = seed >>> 0;
  const next = (): number => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  const int = (n: number) => Math.floor(next() * n);
  return { next, int, pick: <T>(xs: readonly T[]): T => xs[int(xs.length)]! };
}
type Rng = ReturnType<typeof generator>;

type Signal = 'traces' | 'logs' | 'metrics';
interface Case {
  kind: string;
  signal: Signal;
  body: Uint8Array;
  headers: Record<string, string>;
  /** Statuses this request may get (besides 503 + Retry-After, which is retried). */
  expect: readonly number[];
  /** Markers of the rows a 200 stores (valid requests only). */
  markers?: string[];
}

const JSON_CT = { 'content-type': 'application/json' };
const PROTO_CT = { 'content-type': 'application/x-protobuf' };
const FUZZ = { 'x-project-id': 'fuzz' };
const kv = (key: string, value: unknown) => ({ key, value });
// biome-ignore lint/suspicious/noExplicitAny: OTLP JSON trees built and mutated here
type Json = any;

const codec = (await loadProtobuf())!;
let serial = 0;

/** Valid requests go to projects of 100 requests each: a read returns 10,000 rows at most. */
const goodProject = (id: number) => `good-${Math.floor(id / 100)}`;

/** A valid request whose items carry unique markers (span names, log bodies). */
function valid(rng: Rng): Case {
  const n = 1 + rng.int(40);
  const id = serial++;
  const markers = Array.from({ length: n }, (_, i) => `ok-${id}-${i}`);
  const proto = rng.next() < 0.5;
  const signal: Signal = rng.next() < 0.5 ? 'traces' : 'logs';
  let tree: { resourceSpans?: Json[]; resourceLogs?: Json[] };
  if (signal === 'traces') {
    tree = tracesRequest(n, 1 + rng.int(1000));
    tree.resourceSpans![0].scopeSpans[0].spans.forEach((s: Json, i: number) => {
      s.name = markers[i];
    });
  } else {
    tree = logsRequest(n, 1 + rng.int(1000));
    tree.resourceLogs![0].scopeLogs[0].logRecords.forEach((r: Json, i: number) => {
      r.body = { stringValue: markers[i] };
    });
  }
  const body = proto ? jsonToProtobuf(signal, tree, codec) : Buffer.from(JSON.stringify(tree));
  const gzip = rng.next() < 0.3;
  return {
    kind: `valid ${signal} ${proto ? 'protobuf' : 'json'}${gzip ? ' gzip' : ''}`,
    signal,
    body: gzip ? zlib.gzipSync(body) : body,
    headers: {
      ...(proto ? PROTO_CT : JSON_CT),
      'x-project-id': goodProject(id),
      ...(gzip ? { 'content-encoding': 'gzip' } : {}),
    },
    expect: [200],
    markers,
  };
}

function sampleTree(rng: Rng, signal: Signal): Json {
  if (signal === 'traces') return tracesRequest(1 + rng.int(20), rng.int(100));
  if (signal === 'logs') return logsRequest(1 + rng.int(20), rng.int(100));
  return {
    resourceMetrics: [
      {
        resource: { attributes: [kv('service.name', { stringValue: 'fuzz' })] },
        scopeMetrics: [
          {
            metrics: [
              { name: 'g', gauge: { dataPoints: [{ asDouble: 1.5, timeUnixNano: '1700000000000000000' }] } },
              {
                name: 'h',
                histogram: {
                  aggregationTemporality: 2,
                  dataPoints: [
                    { count: '3', bucketCounts: ['1', '2'], explicitBounds: [1], timeUnixNano: '1' },
                  ],
                },
              },
            ],
          },
        ],
      },
    ],
  };
}

/** Replaces a random value deep in a tree with something of another kind. */
function mutateTree(rng: Rng, tree: Json): Json {
  const weird = [null, -1, 2 ** 64, 'x', '', [], {}, true, 1e308, '\u0000', { stringValue: 7 }, [[[]]], 'zz'];
  let node = tree;
  for (let depth = 0; depth < 12; depth++) {
    const keys = node !== null && typeof node === 'object' ? Object.keys(node) : [];
    if (keys.length === 0) break;
    const k = rng.pick(keys);
    if (rng.next() < 0.25 || node[k] === null || typeof node[k] !== 'object') {
      node[k] = rng.pick(weird);
      break;
    }
    node = node[k];
  }
  return tree;
}

function randomBytes(rng: Rng, n: number): Buffer {
  const b = Buffer.alloc(n);
  for (let i = 0; i < n; i++) b[i] = rng.int(256);
  return b;
}

/** An AnyValue nested `depth` arrays deep, as JSON text (JSON.stringify would run out of stack). */
function nested(depth: number): string {
  return `${'{"arrayValue":{"values":['.repeat(depth)}{"stringValue":"deep"}${']}}'.repeat(depth)}`;
}

const GZIP_BOMB = zlib.gzipSync(Buffer.alloc(64 * 1024 * 1024), { level: 9 });

/** A hostile request and what it may get. */
function hostile(rng: Rng): Case {
  const signal = rng.pick(['traces', 'logs', 'metrics'] as const);
  const json = () => Buffer.from(JSON.stringify(sampleTree(rng, signal)));
  const proto = () => jsonToProtobuf(signal, sampleTree(rng, signal), codec);
  const asJson = { ...JSON_CT, ...FUZZ };
  const asProto = { ...PROTO_CT, ...FUZZ };
  /** A logs request of one record changed by `edit`, as JSON text (which `text` may change). */
  const oneLog = (kind: string, expect: number[], edit: (record: Json) => void, text = (t: string) => t) => {
    const tree = logsRequest(1, 1) as Json;
    edit(tree.resourceLogs[0].scopeLogs[0].logRecords[0]);
    return {
      kind,
      signal: 'logs' as const,
      body: Buffer.from(text(JSON.stringify(tree))),
      headers: asJson,
      expect,
    };
  };
  // Cases that build a logs request say so; the others are sent to `signal`.
  const cases: (() => Omit<Case, 'signal'> & { signal?: Signal })[] = [
    () => {
      const b = json();
      return {
        kind: 'truncated json',
        body: b.subarray(0, 1 + rng.int(b.length - 1)),
        headers: asJson,
        expect: [400],
      };
    },
    () => {
      const b = proto();
      return {
        kind: 'truncated protobuf',
        body: b.subarray(0, rng.int(b.length)),
        headers: asProto,
        expect: [200, 400],
      };
    },
    () => {
      const b = Buffer.from(json());
      for (let i = 0; i < 1 + rng.int(8); i++) b[rng.int(b.length)] = rng.int(256);
      return { kind: 'bytes flipped in json', body: b, headers: asJson, expect: [200, 400] };
    },
    () => {
      const b = Buffer.from(proto());
      for (let i = 0; i < 1 + rng.int(8); i++) b[rng.int(b.length)] = rng.int(256);
      return { kind: 'bytes flipped in protobuf', body: b, headers: asProto, expect: [200, 400] };
    },
    () => ({
      kind: 'random bytes as json',
      body: randomBytes(rng, 1 + rng.int(4096)),
      headers: asJson,
      expect: [400],
    }),
    () => ({
      kind: 'random bytes as protobuf',
      body: randomBytes(rng, 1 + rng.int(4096)),
      headers: asProto,
      expect: [200, 400],
    }),
    () => ({
      kind: 'a value of the wrong kind',
      body: Buffer.from(JSON.stringify(mutateTree(rng, sampleTree(rng, signal)))),
      headers: asJson,
      expect: [200, 400],
    }),
    () =>
      oneLog('a huge string', [200], (r) => {
        r.body = { stringValue: 'h'.repeat(1 + rng.int(4 * 1024 * 1024)) };
      }),
    () =>
      oneLog('many attributes', [200], (r) => {
        r.attributes = Array.from({ length: 1 + rng.int(30_000) }, (_, i) =>
          kv(`a${i}`, { stringValue: 'v'.repeat(rng.int(100)) }),
        );
      }),
    () =>
      oneLog(
        'deep nesting (cut at 64 levels)',
        [200],
        (r) => {
          r.body = 'DEEP';
        },
        (text) => text.replace('"DEEP"', nested(65 + rng.int(5000))),
      ),
    () => ({
      kind: 'json sent as protobuf',
      body: json(),
      headers: asProto,
      expect: [200, 400],
    }),
    () => ({ kind: 'protobuf sent as json', body: proto(), headers: asJson, expect: [400] }),
    () => ({
      kind: 'gzip that is not',
      body: json(),
      headers: { ...asJson, 'content-encoding': 'gzip' },
      expect: [400],
    }),
    () => ({
      kind: 'brotli that is not',
      body: json(),
      headers: { ...asJson, 'content-encoding': 'br' },
      expect: [400],
    }),
    () => ({
      kind: 'an unknown encoding',
      body: json(),
      headers: { ...asJson, 'content-encoding': 'lz77' },
      expect: [415],
    }),
    () => ({
      kind: 'text/plain',
      body: json(),
      headers: { 'content-type': 'text/plain', ...FUZZ },
      expect: [415],
    }),
    () => ({
      kind: 'a gzip bomb',
      body: GZIP_BOMB,
      headers: { ...asJson, 'content-encoding': 'gzip' },
      expect: [413],
    }),
    () => ({
      kind: 'over the body limit',
      body: Buffer.alloc(BODY_LIMIT + 1, 0x20),
      headers: asJson,
      expect: [413],
    }),
    () => {
      const b = zlib.gzipSync(json());
      return {
        kind: 'truncated gzip',
        body: b.subarray(0, 1 + rng.int(b.length - 9)),
        headers: { ...asJson, 'content-encoding': 'gzip' },
        expect: [400],
      };
    },
    () => ({
      kind: 'an invalid project',
      body: json(),
      headers: { ...JSON_CT, 'x-project-id': rng.pick(['', '../x', 'a b', 'p'.repeat(129)]) },
      expect: [400],
    }),
    () => ({
      kind: 'invalid UTF-8 in a string',
      signal: 'logs',
      body: Buffer.concat([
        Buffer.from('{"resourceLogs":[{"scopeLogs":[{"logRecords":[{"body":{"stringValue":"'),
        Buffer.from([0xc3, 0x28, 0xff]),
        Buffer.from('"}}]}]}]}'),
      ]),
      headers: asJson,
      expect: [200, 400],
    }),
  ];
  return { signal, ...rng.pick(cases)() };
}

interface Answer {
  status: number;
  retryAfter: string | null;
}

async function send(url: string, c: Case): Promise<Answer> {
  const res = await fetch(`${url}/v1/${c.signal}`, { method: 'POST', body: c.body, headers: c.headers });
  await res.arrayBuffer();
  return { status: res.status, retryAfter: res.headers.get('retry-after') };
}

test(`fuzz: hostile input for ${SECONDS} s never crashes the server, gets 4xx, loses no valid row (seed ${SEED})`, async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'otelake-fuzz-'));
  const server = await startChild(dir, 'fuzz', {
    server_config: { body_limit_bytes: BODY_LIMIT },
    aggregator_config: { max_age_s: 0.1 },
  });
  const pid = server.child.pid!;
  const seedNote = `(FUZZ_SEED=${SEED})`;
  let peakMiB = 0;
  const sampler = setInterval(() => {
    memoryMiB(pid, 'VmRSS').then(
      (m) => {
        peakMiB = Math.max(peakMiB, m);
      },
      () => {},
    );
  }, 100);
  const expected: string[] = [];
  const seen = new Map<string, number>();
  try {
    const deadline = Date.now() + SECONDS * 1000;
    await Promise.all(
      Array.from({ length: CLIENTS }, async (_, client) => {
        const rng = generator(SEED + client);
        while (Date.now() < deadline) {
          const c = rng.next() < 0.35 ? valid(rng) : hostile(rng);
          let answer = await send(server.url, c);
          for (let tries = 0; answer.status === 503 && tries < 50; tries++) {
            assert.ok(answer.retryAfter !== null, `${c.kind}: 503 without Retry-After ${seedNote}`);
            await new Promise((r) => setTimeout(r, 100));
            answer = await send(server.url, c);
          }
          seen.set(`${c.kind} ${answer.status}`, (seen.get(`${c.kind} ${answer.status}`) ?? 0) + 1);
          assert.ok(
            c.expect.includes(answer.status),
            `${c.kind}: got ${answer.status}, expected ${c.expect.join(' or ')} ${seedNote}`,
          );
          if (c.markers && answer.status === 200) expected.push(...c.markers);
        }
      }),
    );
    assert.equal(server.child.exitCode, null, `the server is still running ${seedNote}`);

    // Every row of a valid request is there, once.
    const read = async (path: string, column: string): Promise<string[]> => {
      const out: string[] = [];
      for (let g = 0; g * 100 < serial; g++) {
        const query = `project_id=${goodProject(g * 100)}&select=${column}&limit=10000`;
        const body = (await (await fetch(`${server.url}/api/${path}?${query}`)).json()) as {
          rows: Record<string, string>[];
        };
        for (const r of body.rows) out.push(r[column]!);
      }
      return out;
    };
    const want = [...expected].sort();
    let got: string[] = [];
    const until = Date.now() + 30_000;
    while (Date.now() < until) {
      got = [...(await read('spans', 'name')), ...(await read('logs', 'body'))].sort();
      if (got.length >= want.length) break;
      await new Promise((r) => setTimeout(r, 100));
    }
    assert.ok(want.length > 0, 'valid requests were sent');
    assert.deepEqual(got, want, `every valid row stored exactly once ${seedNote}`);
    assert.ok(peakMiB > 0 && peakMiB < RSS_LIMIT_MIB, `peak RSS ${peakMiB.toFixed(0)} MiB ${seedNote}`);
    const requests = [...seen.values()].reduce((a, b) => a + b, 0);
    t.diagnostic(
      `${requests} requests, ${want.length} valid rows, server peak RSS ${peakMiB.toFixed(0)} MiB`,
    );
    const errors = server.log.filter((l) =>
      /"level":50|request failed|decoding an OTLP request failed/.test(l),
    );
    assert.deepEqual(errors, [], `no internal errors in the server log ${seedNote}`);
  } catch (err) {
    console.error(`fuzz outcomes ${seedNote}:`, Object.fromEntries([...seen].sort()));
    throw err;
  } finally {
    clearInterval(sampler);
    server.child.kill('SIGTERM');
    assert.equal(await server.exited, 0, 'a clean stop after the fuzz');
    await rm(dir, { recursive: true, force: true });
  }
});
