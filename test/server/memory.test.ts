// A server in a container with a memory limit: the defaults of max_body_bytes_in_flight and
// decode_workers follow the limit (server_config.memory_limit_bytes, else the cgroup's), so that
// the Collector's large requests from several clients are refused for a while (503, Retry-After)
// rather than taking more memory than the container has. With the defaults for an unlimited
// machine (256 MiB of bodies in flight, a decoder per core), a server in a 256 MiB cgroup was
// killed by the kernel within 2 s of eight clients sending 8 MB bodies of 8,192 spans.

import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { mkdir, mkdtemp, rm, rmdir, writeFile } from 'node:fs/promises';
import { request } from 'node:http';
import { availableParallelism, tmpdir, totalmem } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { gzipSync } from 'node:zlib';
import {
  bodyBytesInFlight,
  concurrentReads,
  decodeWorkerCount,
  rowsPerRequest,
} from '../../src/server/limits.ts';
import { SERVER_ENV, SERVER_NODE_FLAGS } from '../../src/server/node-flags.ts';
import { defaultOptions, memoryLimit, mergeOptions, validateOptions } from '../../src/storage/options.ts';
import { type ChildServer, childPids, startChildServer } from './helpers/child-server.ts';
import { getJson, startServer } from './helpers/harness.ts';

const MiB = 1024 * 1024;

test('the memory limit sets the defaults of bodies in flight and decode workers', () => {
  assert.equal(bodyBytesInFlight(null, 24 * 1024 * MiB), 256 * MiB);
  assert.equal(bodyBytesInFlight(null, 256 * MiB), 16 * MiB);
  assert.equal(bodyBytesInFlight(null, 512 * MiB), 48 * MiB);
  assert.equal(bodyBytesInFlight(null, 1024 * MiB), 112 * MiB);
  assert.equal(bodyBytesInFlight(null, 2048 * MiB), 240 * MiB);
  assert.equal(bodyBytesInFlight(null, 16 * 1024 * MiB), 256 * MiB);
  assert.equal(bodyBytesInFlight(null, 4 * MiB), MiB);
  assert.equal(bodyBytesInFlight(5000, 256 * MiB), 5000, 'a configured number wins');
  assert.equal(decodeWorkerCount(null, 8, 24 * 1024 * MiB), 8);
  assert.equal(decodeWorkerCount(null, 8, 256 * MiB), 1);
  assert.equal(decodeWorkerCount(null, 8, 100 * MiB), 1);
  assert.equal(decodeWorkerCount(null, 8, 768 * MiB), 3);
  assert.equal(decodeWorkerCount(null, 2, 4096 * MiB), 2);
  assert.equal(decodeWorkerCount(0, 8, 256 * MiB), 0, 'a configured number wins');
  assert.equal(concurrentReads(null, 24 * 1024 * MiB), 4);
  assert.equal(concurrentReads(null, 512 * MiB), 1);
  assert.equal(concurrentReads(3, 512 * MiB), 3, 'a configured number wins');
  assert.equal(rowsPerRequest(256 * MiB), 65_536);
  assert.equal(rowsPerRequest(512 * MiB), 131_072);
  assert.equal(rowsPerRequest(32 * MiB), 16_384, 'at least the Collector batch twice over');
  assert.equal(rowsPerRequest(24 * 1024 * MiB), 1_048_576, 'at most MAX_HELD_ROWS');
  assert.deepEqual(memoryLimit(300 * MiB), { bytes: 300 * MiB, from: 'server_config.memory_limit_bytes' });
  // Outside a container, the machine's memory (this process is not in a limited cgroup, or the
  // cgroup's limit is below the machine's).
  const mine = memoryLimit(null);
  if (mine.from === "the machine's") assert.equal(mine.bytes, totalmem());
  else assert.ok(mine.from === "the cgroup's" && mine.bytes < totalmem(), JSON.stringify(mine));
});

test('memory_limit_bytes: the server plans for it and says so; null or a positive integer', async () => {
  const s = await startServer({ server_config: { memory_limit_bytes: 256 * MiB } });
  try {
    const h = (await getJson(`${s.url}/healthz`)).body;
    assert.equal(h.memory.limit, 256 * MiB);
    assert.equal(h.decode.threads, 1);
    assert.equal(h.http.max_body_bytes_in_flight, 16 * MiB);
    assert.equal(h.reads.max_in_flight, 1);
  } finally {
    await s.close();
  }
  const own = await startServer({
    server_config: { memory_limit_bytes: 256 * MiB, decode_workers: 2, max_body_bytes_in_flight: 5 * MiB },
  });
  try {
    const h = (await getJson(`${own.url}/healthz`)).body;
    assert.equal(h.decode.threads, 2);
    assert.equal(h.http.max_body_bytes_in_flight, 5 * MiB);
  } finally {
    await own.close();
  }
  for (const bad of [0, -1, 1.5, '256M']) {
    assert.throws(
      () =>
        validateOptions(
          mergeOptions(defaultOptions(), { server_config: { memory_limit_bytes: bad as number } }),
        ),
      /server_config\.memory_limit_bytes/,
    );
  }
});

/** A new memory cgroup limited to `bytes` (v1 or v2), or why there cannot be one here. */
async function memoryCgroup(bytes: number): Promise<{ procs: string; remove: () => Promise<void> } | string> {
  if (process.platform !== 'linux') return 'memory cgroups are Linux';
  if (process.getuid?.() !== 0) return 'making a cgroup needs root';
  const name = `otelake-test-${process.pid}`;
  const v1 = '/sys/fs/cgroup/memory';
  const v2 = '/sys/fs/cgroup';
  try {
    if (existsSync(join(v1, 'memory.limit_in_bytes'))) {
      const dir = join(v1, name);
      await mkdir(dir);
      await writeFile(join(dir, 'memory.limit_in_bytes'), String(bytes));
      return { procs: join(dir, 'cgroup.procs'), remove: () => rmdir(dir) };
    }
    if (readFileSync(join(v2, 'cgroup.controllers'), 'utf8').split(/\s+/).includes('memory')) {
      if (!readFileSync(join(v2, 'cgroup.subtree_control'), 'utf8').includes('memory'))
        await writeFile(join(v2, 'cgroup.subtree_control'), '+memory');
      const dir = join(v2, name);
      await mkdir(dir);
      await writeFile(join(dir, 'memory.max'), String(bytes));
      return { procs: join(dir, 'cgroup.procs'), remove: () => rmdir(dir) };
    }
  } catch (err) {
    return `cannot make a memory cgroup: ${(err as Error).message}`;
  }
  return 'no memory cgroup controller';
}

/** An ExportTraceServiceRequest of `n` spans of ~1 KB each in JSON, as the Collector batches them. */
function largeTracesBody(n: number, seed: number): Buffer {
  const hex = (v: number, bytes: number) =>
    v
      .toString(16)
      .padStart(bytes * 2, '0')
      .slice(-bytes * 2);
  const spans = Array.from({ length: n }, (_, i) => ({
    traceId: hex(seed * 1e6 + i, 16),
    spanId: hex(seed * 1e6 + i + 1, 8),
    name: `GET /api/v1/orders/{id}/items ${i % 50}`,
    kind: 2,
    startTimeUnixNano: String(1_764_000_000_000_000_000n + BigInt(i)),
    endTimeUnixNano: String(1_764_000_000_000_500_000n + BigInt(i)),
    attributes: [
      ['http.request.method', 'GET'],
      ['url.full', `https://shop.example.com/api/v1/orders/${seed}-${i}/items?page=${i % 7}&sort=created`],
      ['http.route', '/api/v1/orders/{id}/items'],
      ['user_agent.original', 'Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko)'],
      ['server.address', 'orders.internal.example.com'],
      ['db.query.text', `SELECT id, sku, qty, price FROM order_items WHERE order_id = $1 -- ${i}`],
      ['enduser.id', `customer-${(seed * 31 + i) % 10_000}`],
    ].map(([key, value]) => ({ key, value: { stringValue: value } })),
    status: { code: 1 },
  }));
  return Buffer.from(
    JSON.stringify({
      resourceSpans: [
        {
          resource: { attributes: [{ key: 'service.name', value: { stringValue: 'orders' } }] },
          scopeSpans: [{ scope: { name: 'memory-test' }, spans }],
        },
      ],
    }),
  );
}

/** POSTs `body` to /v1/traces; the status, or 0 when the connection ended without an answer. */
function postTraces(url: string, body: Buffer): Promise<{ status: number; retryAfter: string | undefined }> {
  return new Promise((resolve) => {
    const req = request(
      `${url}/v1/traces`,
      { method: 'POST', headers: { 'content-type': 'application/json', 'x-project-id': 'mem' } },
      (res) => {
        res.resume();
        res.on('end', () => resolve({ status: res.statusCode!, retryAfter: res.headers['retry-after'] }));
      },
    );
    req.on('error', () => resolve({ status: 0, retryAfter: undefined }));
    req.end(body);
  });
}

let server: ChildServer | undefined;
let dir: string | undefined;
let cgroup: { procs: string; remove: () => Promise<void> } | undefined;
after(async () => {
  const child = server?.child;
  if (child && child.exitCode === null && child.signalCode === null) {
    const exited = new Promise((r) => child.once('exit', r));
    child.kill('SIGKILL');
    await exited;
  }
  await cgroup?.remove().catch(() => {});
  if (dir) await rm(dir, { recursive: true, force: true });
});

test('in a 256 MiB cgroup the server plans for it and holds the Collector-size requests of eight clients', async (t) => {
  const made = await memoryCgroup(256 * MiB);
  if (typeof made === 'string') return t.skip(made);
  cgroup = made;
  dir = await mkdtemp(join(tmpdir(), 'otelake-memory-'));
  // The shell joins the cgroup, then becomes the server, with `otelake start`'s flags and malloc settings.
  server = await startChildServer(
    dir,
    'mem',
    { durability: 'wal', aggregator_config: { max_age_s: 0.2 } },
    { setup: `echo $$ > "${cgroup.procs}"`, nodeFlags: SERVER_NODE_FLAGS, env: { ...SERVER_ENV } },
  );
  const { url } = server;
  const log = () => server!.messages.join('\n');
  let killed: string | null = null;
  server.child.once('exit', (code, signal) => {
    killed = `exited (${code ?? signal})`;
  });
  const health = async () => (await getJson(`${url}/healthz`)).body;
  const h = await health();
  assert.equal(h.memory.limit, 256 * MiB, 'the limit read from the cgroup');
  assert.equal(h.decode.threads, decodeWorkerCount(null, availableParallelism(), 256 * MiB));
  assert.equal(h.http.max_body_bytes_in_flight, 16 * MiB);
  assert.match(
    log(),
    /memory limit 256 MiB \(the cgroup's\): 1 decode worker, 16 MiB of request bodies in flight, 1 read at once, 65536 rows of a table per request/,
  );

  // Eight clients, each sending 8,192 spans (~7 MB of JSON) a request, as fast as answered, for 4 s.
  const SPANS = 8192;
  const bodies = [1, 2, 3, 4].map((seed) => largeTracesBody(SPANS, seed));
  assert.ok(bodies[0]!.length > 6 * MiB, `a body of ${bodies[0]!.length} bytes`);
  const statuses = new Map<number, number>();
  let acknowledged = 0;
  const until = Date.now() + 4000;
  await Promise.all(
    Array.from({ length: 8 }, async (_, c) => {
      for (let i = c; Date.now() < until && killed === null; i++) {
        const r = await postTraces(url, bodies[i % bodies.length]!);
        statuses.set(r.status, (statuses.get(r.status) ?? 0) + 1);
        if (r.status === 200) acknowledged += SPANS;
        else if (r.status === 0)
          await new Promise((r) => setTimeout(r, 500)); // killed? told below
        else {
          assert.equal(r.status, 503, `status ${r.status}: ${log()}`);
          assert.ok(r.retryAfter !== undefined, 'a 503 says when to retry');
          await new Promise((r) => setTimeout(r, 100));
        }
      }
    }),
  );
  const seen = JSON.stringify(Object.fromEntries(statuses));
  assert.equal(killed, null, `the server ${killed} under load (${seen}): ${log()}`);
  assert.ok(acknowledged >= 4 * SPANS, `only ${acknowledged} spans acknowledged (${seen})`);

  // Every acknowledged span is written, and nothing else was (spans have no events or links here).
  const deadline = Date.now() + 60_000;
  let written = 0;
  while (Date.now() < deadline) {
    written = (await health()).aggregator.rows_written;
    if (written >= acknowledged) break;
    await new Promise((r) => setTimeout(r, 200));
  }
  assert.equal(written, acknowledged, seen);
  assert.equal(killed, null, `the server ${killed}: ${log()}`);
  assert.equal((await health()).status, 'ok');

  // Reads run in child processes that the server stops once they and it pass readMemoryCeiling,
  // and that the kernel kills first when memory runs out (oom_score_adj 1000): each read is
  // answered whole, or refused (503) or cut short saying why its process ended, and the server
  // lives on, ingest with it.
  const pid = server.child.pid!;
  const outcomes: string[] = [];
  let readProcesses = 0;
  for (let i = 0; i < 3; i++) {
    const logged = server.messages.length;
    const readStarted = Date.now();
    const reading = getText(`${url}/api/spans?limit=10000`);
    let done = false;
    void reading.finally(() => {
      done = true;
    });
    // While it reads: the server's children are read processes, first in line for the OOM killer.
    // A child is looked at from its second sighting on, 50 ms later: a process just forked is
    // still a copy of the server until it runs its program and the server sets its score.
    const seen = new Set<number>();
    while (!done) {
      for (const child of childPids(pid)) {
        if (!seen.has(child)) {
          seen.add(child);
          continue;
        }
        try {
          const cmdline = readFileSync(`/proc/${child}/cmdline`, 'latin1');
          if (cmdline === '') continue; // killed, not yet reaped
          assert.match(cmdline, /query-worker/);
          assert.equal(readFileSync(`/proc/${child}/oom_score_adj`, 'latin1').trim(), '1000');
          readProcesses++;
        } catch (err) {
          if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err; // it ended meanwhile
        }
      }
      await new Promise((r) => setTimeout(r, 50));
    }
    const read = await reading;
    outcomes.push(`${read.status}: ${read.body.length} bytes in ${Date.now() - readStarted} ms`);
    // A server killed would have ended the connection too: its exit is told first.
    await new Promise((r) => setTimeout(r, 200));
    assert.equal(killed, null, `the server ${killed} under a read: ${log()}`);
    if (read.status === 200 || read.status === 0) {
      // Whole, or cut short once the answer had started (status 0: before its headers were out).
      let rows = -1;
      try {
        rows = (JSON.parse(read.body) as { rows: unknown[] }).rows.length;
      } catch {
        // Logged for this read, not an earlier one.
        const since = server.messages.slice(logged).join('\n');
        assert.match(since, /read failed after its answer had started/, 'a read cut short is logged');
      }
      if (rows >= 0) assert.equal(rows, 10_000);
    } else {
      assert.equal(read.status, 503, read.body);
      // Stopped by the server once it and the server together passed the ceiling, or killed by the kernel.
      assert.match(
        read.body,
        /otelake-query process (was stopped: it held \d+ MiB and its parent \d+ MiB|was killed \(SIGKILL\)).*Ingest goes on/,
      );
    }
  }
  t.diagnostic(`reads: ${outcomes.join(', ')}`);
  assert.ok(readProcesses > 0, 'the reads ran in child processes');
  assert.equal((await postTraces(url, bodies[0]!)).status, 200, 'ingest after the reads');
  assert.equal(killed, null, `the server ${killed}: ${log()}`);

  // A few KB of gzip that inflate to a million empty log records, in JSON and in protobuf (one
  // took a server to 552 MiB): refused at the rows a request may make in 256 MiB, before they
  // take the memory, and the server goes on.
  const records = 1_000_000;
  const json = `{"resourceLogs":[{"scopeLogs":[{"logRecords":[${'{},'.repeat(records - 1)}{}]}]}]}`;
  const scope = Buffer.concat([Buffer.from([0x12, ...varint(2 * records)]), Buffer.alloc(2 * records)]);
  for (let i = 0; i < records; i++) scope[scope.length - 2 * records + 2 * i] = 0x12; // log_records {}
  const proto = Buffer.concat([Buffer.from([0x0a, ...varint(scope.length)]), scope]);
  // In snake_case the JSON reader declines it, and JSON.parse would hold every {} of 8M at once.
  const snake = `{"resource_logs":[{"scope_logs":[{"log_records":[${'{},'.repeat(8_000_000 - 1)}{}]}]}]}`;
  for (const [type, body, message] of [
    ['application/json', json, /more than 65536 logs rows in one request: send smaller batches/],
    ['application/x-protobuf', proto, /more than 65536 logs rows in one request: send smaller batches/],
    ['application/json', snake, /a JSON body of more than 1048576 values in a form read through JSON\.parse/],
  ] as const) {
    const gz = gzipSync(body, { level: 9 });
    assert.ok(gz.length < 64 * 1024, `${gz.length} bytes of gzip`);
    const r = await postLogs(url, gz, type);
    assert.equal(r.status, 413, `${type}: ${r.body}`);
    assert.match(r.body, message);
    assert.equal(killed, null, `the server ${killed} on ${type}: ${log()}`);
  }
  assert.equal((await postTraces(url, bodies[0]!)).status, 200, 'ingest after the refusals');
  assert.equal(killed, null, `the server ${killed}: ${log()}`);
});

function varint(v: number): number[] {
  const out: number[] = [];
  for (; v > 127; v = Math.floor(v / 128)) out.push((v & 127) | 128);
  out.push(v);
  return out;
}

/** POSTs a gzip body to /v1/logs: the status and the answer's text. */
function postLogs(url: string, gz: Buffer, type: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve) => {
    const req = request(
      `${url}/v1/logs`,
      {
        method: 'POST',
        headers: { 'content-type': type, 'content-encoding': 'gzip', 'x-project-id': 'mem' },
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () =>
          resolve({ status: res.statusCode!, body: Buffer.concat(chunks).toString('latin1') }),
        );
      },
    );
    req.on('error', () => resolve({ status: 0, body: '' }));
    req.end(gz);
  });
}

/** GETs `url`: its status and whole body ('' and status 0 when the connection ended early). */
function getText(url: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve) => {
    request(url, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode!, body: Buffer.concat(chunks).toString() }));
      res.on('error', () => resolve({ status: res.statusCode!, body: Buffer.concat(chunks).toString() }));
    })
      .on('error', () => resolve({ status: 0, body: '' }))
      .end();
  });
}
