// Slow, stalled and flooding clients against a real server process over real sockets: the bytes
// of bodies held stay within server_config.max_body_bytes_in_flight (the server's RSS grows by
// no more than that, plus slack), requests beyond it get 503 + Retry-After at once, and the
// header, request and idle timeouts close every connection that stops or trickles.

import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { connect as connectHttp2 } from 'node:http2';
import { connect, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { after, before, describe, test } from 'node:test';
import { getJson, post } from './helpers/harness.ts';

const CHILD = new URL('./helpers/run-server.ts', import.meta.url).pathname;
const MiB = 1024 * 1024;
const BUDGET = 32 * MiB;
const TIMEOUTS = { header_timeout_s: 2, request_timeout_s: 3, idle_timeout_s: 2 };

let child: ChildProcess;
let dir: string;
let url: string;
let port: number;
/** The server's log lines. */
const serverLog: string[] = [];

before(async () => {
  dir = await mkdtemp(join(tmpdir(), 'otelake-limits-'));
  const options = {
    durability: 'memory',
    server_config: { body_limit_bytes: 8 * MiB, max_body_bytes_in_flight: BUDGET, ...TIMEOUTS },
  };
  child = spawn(process.execPath, [CHILD, dir, 'limits', JSON.stringify(options)], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  url = await new Promise<string>((resolve, reject) => {
    createInterface({ input: child.stdout! }).on('line', (line) => {
      serverLog.push(line);
      const m = /listening on (http:\/\/\S+)/.exec(line);
      if (m) resolve(m[1]!);
    });
    child.once('exit', (code) => reject(new Error(`server exited early (${code})`)));
  });
  port = Number(new URL(url).port);
});

after(async () => {
  const exited = new Promise((r) => child.once('exit', r));
  child.kill('SIGTERM');
  await exited;
  await rm(dir, { recursive: true, force: true });
});

interface Connection {
  socket: Socket;
  /** Everything the server sent, once it closed the connection, and when. */
  closed: Promise<{ text: string; at: number }>;
}

function open(): Connection {
  const socket = connect(port, '127.0.0.1');
  let text = '';
  socket.setEncoding('latin1');
  socket.on('data', (d: string) => {
    text += d;
  });
  socket.on('error', () => {}); // a reset after the server closed: the close below still comes
  const closed = new Promise<{ text: string; at: number }>((resolve) =>
    socket.once('close', () => resolve({ text, at: Date.now() })),
  );
  return { socket, closed };
}

/** Writes, waiting for room; resolves at once when the server has closed the connection. */
function write(socket: Socket, data: string | Buffer): Promise<void> {
  return new Promise((resolve) => {
    if (socket.destroyed || socket.write(data)) return resolve();
    const done = () => {
      socket.off('drain', done);
      socket.off('close', done);
      resolve();
    };
    socket.once('drain', done);
    socket.once('close', done);
  });
}

function logsHead(length: number): string {
  return (
    'POST /v1/logs HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n' +
    `Content-Length: ${length}\r\n\r\n`
  );
}

/** A connection that announces `declared` bytes of body, sends `sent` of them, then stalls. */
async function stalledUpload(declared: number, sent: number): Promise<Connection> {
  const c = open();
  await write(c.socket, logsHead(declared));
  const chunk = Buffer.alloc(256 * 1024, 'x');
  for (let n = 0; n < sent && !c.socket.destroyed; n += chunk.length) {
    await write(c.socket, chunk.subarray(0, Math.min(chunk.length, sent - n)));
  }
  return c;
}

async function rss(): Promise<number> {
  return (await getJson(`${url}/healthz`)).body.memory.rss as number;
}

function withDeadline<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: not within ${ms} ms`)), ms);
  });
  return Promise.race([p, deadline]).finally(() => clearTimeout(timer));
}

describe('bounded memory and timeouts on the way in', () => {
  test('stalled uploads: bodies beyond the budget get 503, RSS stays within it, all are closed', async (t) => {
    const before = await rss();
    // 40 uploads of 8 MiB each stall after 6 MiB: 240 MiB if they were all held.
    const uploads = 40;
    const declared = 8 * MiB;
    const conns: Connection[] = [];
    let peak = before;
    const sampler = setInterval(() => {
      rss().then(
        (r) => {
          peak = Math.max(peak, r);
        },
        () => {},
      );
    }, 50);
    try {
      const opening = Array.from({ length: uploads }, () => stalledUpload(declared, 6 * MiB));
      // Each resolves once its bytes are sent, or once the server has refused and closed it.
      conns.push(...(await Promise.all(opening)));
      const health = (await getJson(`${url}/healthz`)).body;
      assert.ok(
        health.http.body_bytes_in_flight <= BUDGET,
        `${health.http.body_bytes_in_flight} bytes in flight`,
      );
      peak = Math.max(peak, health.memory.rss);
      const ends = await withDeadline(
        Promise.all(conns.map((c) => c.closed)),
        60_000,
        'the server closes every stalled upload',
      );
      const admitted = ends.filter((e) => e.text.startsWith('HTTP/1.1 408'));
      const refused = ends.filter((e) => e.text.startsWith('HTTP/1.1 503'));
      // The budget holds 4 bodies at once (more may come in once the first ones time out).
      assert.ok(admitted.length >= BUDGET / declared, `${admitted.length} admitted`);
      assert.ok(refused.length >= uploads / 2, `${refused.length} refused`);
      assert.equal(admitted.length + refused.length, uploads, 'every upload got an answer');
      for (const e of refused) {
        assert.match(e.text, /\r\nretry-after: 1\r\n/i);
        assert.match(e.text, /max_body_bytes_in_flight/);
        assert.doesNotMatch(e.text, /408/, 'no second answer after the 503');
      }
      for (const e of admitted) assert.match(e.text, /whole body within 3 s/);
    } finally {
      clearInterval(sampler);
      for (const c of conns) c.socket.destroy();
    }
    const grown = peak - before;
    t.diagnostic(`server RSS grew by ${(grown / MiB).toFixed(0)} MiB (budget ${BUDGET / MiB} MiB)`);
    // Holding the stalled bodies would have grown RSS by 240 MiB; the budget allows 32 MiB held,
    // and the bytes of uploads refused part way are garbage until collected: 79-93 MiB grown
    // (48-49 while bodies counted as announced, refused before a byte was read).
    assert.ok(grown < 3 * BUDGET + 48 * MiB, `RSS grew by ${(grown / MiB).toFixed(0)} MiB`);
    // A refused upload gives its bytes back as it is refused; one cut off at the timeout once closed.
    let health = (await getJson(`${url}/healthz`)).body;
    for (let i = 0; i < 50 && health.http.body_bytes_in_flight !== 0; i++) {
      await new Promise((r) => setTimeout(r, 100));
      health = (await getJson(`${url}/healthz`)).body;
    }
    assert.equal(health.http.body_bytes_in_flight, 0);
    assert.ok(health.http.requests_timed_out >= BUDGET / declared);
    assert.ok(health.http.bodies_refused >= uploads / 2);
    const ok = await post(`${url}/v1/logs`, JSON.stringify({ resourceLogs: [] }));
    assert.equal(ok.status, 200, 'the server serves on');
  });

  test('uploads that announce large bodies and send a few bytes hold only those bytes: others still get in', async () => {
    // Eight bodies announcing a quarter of the budget each; counted as announced, four held it all.
    const stalled = await Promise.all(Array.from({ length: 8 }, () => stalledUpload(BUDGET / 4, 10)));
    try {
      let health = (await getJson(`${url}/healthz`)).body;
      for (let i = 0; i < 50 && health.http.body_bytes_in_flight < 80; i++) {
        await new Promise((r) => setTimeout(r, 20));
        health = (await getJson(`${url}/healthz`)).body;
      }
      assert.equal(health.http.body_bytes_in_flight, 80, 'the bytes sent, not those announced');
      const ok = await post(`${url}/v1/logs`, JSON.stringify({ resourceLogs: [] }));
      assert.equal(ok.status, 200, ok.text);
    } finally {
      for (const c of stalled) c.socket.destroy();
    }
  });

  test('a trickled body is answered 408 at the request timeout; trickled headers at the header timeout', async () => {
    const body = JSON.stringify({ resourceLogs: [] }).padEnd(4000, ' ');
    const trickling = Array.from({ length: 20 }, () => open());
    const slowHeaders = open();
    let stop = false;
    const trickle = (async () => {
      for (const c of trickling) await write(c.socket, logsHead(body.length));
      await write(slowHeaders.socket, 'POST /v1/logs HTTP/1.1\r\n');
      for (let i = 0; !stop; i++) {
        for (const c of trickling) if (!c.socket.destroyed) c.socket.write(body[i] ?? ' ');
        if (!slowHeaders.socket.destroyed) slowHeaders.socket.write(`X-Slow-${i}: a\r\n`);
        await new Promise((r) => setTimeout(r, 100));
      }
    })();
    try {
      const ends = await withDeadline(
        Promise.all(trickling.map((c) => c.closed)),
        30_000,
        'the server closes every trickled upload',
      );
      for (const e of ends) {
        assert.match(e.text, /^HTTP\/1\.1 408 /);
        assert.match(e.text, /whole body within 3 s/);
      }
      const headers = await withDeadline(slowHeaders.closed, 30_000, 'slow headers are cut off');
      assert.match(headers.text, /^HTTP\/1\.1 408 /);
    } finally {
      stop = true;
      await trickle;
    }
  });

  test('an idle keep-alive connection is closed after idle_timeout_s', async () => {
    const c = open();
    await write(
      c.socket,
      'POST /v1/logs HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}',
    );
    const end = await withDeadline(c.closed, 30_000, 'the idle connection is closed');
    assert.match(end.text, /^HTTP\/1\.1 200 /);
    assert.match(end.text, /keep-alive: timeout=2/i);
  });

  test('an HTTP/2 client (an OTLP/gRPC exporter) is told in HTTP/2 to use HTTP/1.1, and the log says why', async () => {
    // Node's HTTP/2 client (nghttp2) reads the server's answer as any h2c client would.
    const session = connectHttp2(url);
    session.on('error', () => {}); // the connection ends with the GOAWAY
    const goaway = new Promise<{ code: number; debug: string }>((resolve) =>
      session.once('goaway', (code: number, _last: number, data?: Buffer) =>
        resolve({ code, debug: data?.toString() ?? '' }),
      ),
    );
    const stream = session.request({
      ':method': 'POST',
      ':path': '/opentelemetry.proto.collector.logs.v1.LogsService/Export',
    });
    stream.on('error', () => {});
    stream.end(Buffer.alloc(5));
    const { code, debug } = await withDeadline(goaway, 10_000, 'GOAWAY');
    session.destroy();
    assert.equal(code, 13, 'HTTP_1_1_REQUIRED');
    assert.match(debug, /OTEL_EXPORTER_OTLP_PROTOCOL=http\/protobuf/);
    const deadline = Date.now() + 5000;
    while (!serverLog.some((l) => l.includes('spoke HTTP/2'))) {
      if (Date.now() > deadline) assert.fail(`no log line about HTTP/2:\n${serverLog.join('\n')}`);
      await new Promise((r) => setTimeout(r, 50));
    }
    const line = JSON.parse(serverLog.find((l) => l.includes('spoke HTTP/2'))!);
    assert.equal(line.level, 40, 'a warning');
    assert.match(line.msg, /\(1 so far\)/);
    // The server goes on answering HTTP/1.1.
    assert.equal((await getJson(`${url}/healthz`)).status, 200);
  });
});
