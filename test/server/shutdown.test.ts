// Graceful shutdown: runServer in a child process takes requests, gets SIGTERM while requests are
// in flight and rows are still held in memory, and exits 0; reopening the instance shows every
// row of every request answered 200.

import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { connect, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { after, test } from 'node:test';
import { Logger } from '../../src/index.ts';
import { closeReadWorkers } from '../../src/read/index.ts';
import { decodeStatusProto, getJson, startServer } from './helpers/harness.ts';

const CHILD = new URL('./helpers/run-server.ts', import.meta.url).pathname;

after(() => closeReadWorkers());

function logsBody(batch: number, size: number): string {
  return JSON.stringify({
    resourceLogs: [
      {
        resource: { attributes: [{ key: 'service.name', value: { stringValue: 'shutdown-test' } }] },
        scopeLogs: [
          {
            logRecords: Array.from({ length: size }, (_, i) => ({
              timeUnixNano: String(1_700_000_000_000_000_000n + BigInt(batch * size + i)),
              body: { stringValue: `b${batch}-r${i}` },
            })),
          },
        ],
      },
    ],
  });
}

test('SIGTERM: requests in flight finish, held rows are flushed, exit code 0, nothing accepted is lost', async () => {
  const dir = await mkdtemp(join(tmpdir(), 'otelake-sigterm-'));
  try {
    // Batches that never fill and a long max age: only the shutdown flush writes these rows.
    const options = {
      aggregator_config: { max_age_s: 300, min_batch_rows: 1_000_000, max_batch_rows: 1_000_000 },
      producer_config: { max_queue_size: 1_000_000 },
    };
    const child = spawn(process.execPath, [CHILD, dir, 'sig', JSON.stringify(options)], {
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
    const messages: string[] = [];
    const url = await new Promise<string>((resolve, reject) => {
      createInterface({ input: child.stdout! }).on('line', (line) => {
        const msg = (JSON.parse(line) as { msg: string }).msg;
        messages.push(msg);
        const m = /listening on (http:\/\/\S+)/.exec(msg);
        if (m) resolve(m[1]!);
      });
      child.on('exit', () => reject(new Error(`server exited early: ${messages.join(' | ')}`)));
    });

    const size = 50;
    const accepted: number[] = [];
    let batch = 0;
    const send = async (b: number) => {
      try {
        const res = await fetch(`${url}/v1/logs`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', 'x-project-id': 'sig' },
          body: logsBody(b, size),
        });
        await res.arrayBuffer();
        if (res.status === 200) accepted.push(b);
      } catch {
        // Connection refused or closed once the server stops listening: not accepted.
      }
    };
    for (let i = 0; i < 20; i++) await send(batch++);
    const health = (await getJson(`${url}/healthz`)).body;
    assert.equal(health.aggregator.rows_written, 0, 'nothing written before the signal');
    assert.equal(health.producer.accepted, 20 * size);

    // Keep 8 clients sending while the signal arrives.
    let stop = false;
    const clients = Array.from({ length: 8 }, async () => {
      while (!stop) await send(batch++);
    });
    await new Promise((r) => setTimeout(r, 100));
    child.kill('SIGTERM');
    const code = await exited;
    stop = true;
    await Promise.all(clients);
    assert.equal(code, 0, messages.join(' | '));
    assert.ok(messages.some((m) => /SIGTERM: stopping/.test(m)));
    assert.ok(messages.some((m) => /stopped cleanly/.test(m)));
    assert.ok(accepted.length > 20, `accepted ${accepted.length} requests`);

    const logger = await Logger.open({ instanceId: 'sig', instanceDir: dir, handleSignals: false });
    try {
      const rows = await logger.read('logs', { projectId: 'sig', select: ['body'] });
      const stored = new Set(rows.map((r) => r['body'] as string));
      const expected = accepted.flatMap((b) => Array.from({ length: size }, (_, i) => `b${b}-r${i}`));
      for (const body of expected) assert.ok(stored.has(body), `row ${body} was accepted but not stored`);
      assert.equal(rows.length, expected.length, 'no row stored twice or from a refused request');
    } finally {
      await logger.stop({ flush: 'none' });
    }
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});

test('only loopback hosts count as loopback (the server warns about the others)', async () => {
  const { isLoopback } = await import('../../src/server/index.ts');
  for (const h of ['127.0.0.1', '127.1.2.3', 'localhost', '::1']) assert.equal(isLoopback(h), true, h);
  for (const h of ['0.0.0.0', '::', '192.168.1.10', 'example.com', '128.0.0.1'])
    assert.equal(isLoopback(h), false, h);
});

/** A raw HTTP exchange split in two: the first part now, the rest later; resolves with the answer. */
function splitRequest(port: number, first: string): { socket: Socket; answer: Promise<Buffer> } {
  const socket = connect(port, '127.0.0.1');
  const parts: Buffer[] = [];
  socket.on('data', (d: Buffer) => parts.push(d));
  socket.on('error', () => {});
  const answer = new Promise<Buffer>((resolve) => socket.once('close', () => resolve(Buffer.concat(parts))));
  socket.write(first);
  return { socket, answer };
}

function parseAnswer(raw: Buffer): { status: number; headers: Map<string, string>; body: Buffer } {
  const end = raw.indexOf('\r\n\r\n');
  const lines = raw.subarray(0, end).toString('latin1').split('\r\n');
  const headers = new Map<string, string>();
  for (const l of lines.slice(1)) {
    const i = l.indexOf(':');
    headers.set(l.slice(0, i).trim().toLowerCase(), l.slice(i + 1).trim());
  }
  const length = Number(headers.get('content-length') ?? '0');
  return { status: Number(lines[0]!.split(' ')[1]), headers, body: raw.subarray(end + 4, end + 4 + length) };
}

test('requests arriving while the server closes get 503 + Retry-After, OTLP ones a Status in their encoding', async () => {
  const s = await startServer();
  const port = Number(new URL(s.url).port);
  // Requests whose headers are under way when the server starts closing: their connections are
  // busy, so they stay open and the requests reach the router while it closes.
  const head = (type: string) =>
    `POST /v1/logs HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: ${type}\r\nContent-Length: 2\r\n`;
  const accepted: Socket[] = [];
  s.app.server.on('connection', (c: Socket) => accepted.push(c));
  const json = splitRequest(port, head('application/json'));
  const proto = splitRequest(port, head('application/x-protobuf'));
  const read = splitRequest(port, 'GET /api/logs HTTP/1.1\r\nHost: 127.0.0.1\r\n');
  // Until the server has read the start of all three: a connection it has not read from yet
  // counts as idle, and closing drops it instead of answering.
  const deadline = Date.now() + 10_000; // beyond it, the answers below say what went wrong
  while ((accepted.length < 3 || accepted.some((c) => c.bytesRead === 0)) && Date.now() < deadline) {
    await new Promise((r) => setTimeout(r, 5));
  }
  const closing = s.app.close();
  try {
    while (s.app.server.listening) await new Promise((r) => setTimeout(r, 10));
    json.socket.write('\r\n{}');
    proto.socket.write('\r\n\n\0');
    read.socket.write('\r\n');

    const j = parseAnswer(await json.answer);
    assert.equal(j.status, 503);
    assert.equal(j.headers.get('retry-after'), '1');
    assert.equal(j.headers.get('connection'), 'close');
    assert.match(j.headers.get('content-type')!, /^application\/json/);
    const status = JSON.parse(j.body.toString('utf8'));
    assert.equal(status.code, 14, 'UNAVAILABLE');
    assert.match(status.message, /the server is stopping; retry after 1 s/);

    const p = parseAnswer(await proto.answer);
    assert.equal(p.status, 503);
    assert.equal(p.headers.get('retry-after'), '1');
    assert.equal(p.headers.get('content-type'), 'application/x-protobuf');
    const decoded = decodeStatusProto(p.body);
    assert.equal(decoded.code, 14);
    assert.match(decoded.message, /stopping/);

    const r = parseAnswer(await read.answer);
    assert.equal(r.status, 503);
    assert.equal(r.headers.get('retry-after'), '1');
    assert.match(JSON.parse(r.body.toString('utf8')).message, /stopping/);
  } finally {
    await closing;
    await s.logger.stop({ flush: 'auto' });
    await rm(s.dir, { recursive: true, force: true });
  }
});
