// More clients than file descriptors: a server whose open-file limit is low (set with the shell's
// `ulimit -n`, as a service manager's LimitNOFILE would) keeps a reserve of descriptors for its
// tables and log. Connections beyond server_config.max_connections (by default what the limit
// leaves) are closed as they are accepted; the connections it holds are still answered 200, and
// their rows are written. Without the limit, idle connections took every descriptor and each
// write failed with EMFILE, so every request was refused (503) while they stayed open.

import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { connect, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { connectionLimit, openFileLimit } from '../../src/server/limits.ts';
import { defaultOptions, mergeOptions, validateOptions } from '../../src/storage/options.ts';
import { type ChildServer, startChildServer } from './helpers/child-server.ts';
import { logsBody } from './helpers/crash-loop.ts';
import { getJson, startServer } from './helpers/harness.ts';

const FILE_LIMIT = 300;

test('the connection limit: the configured one, else what the open-file limit leaves', () => {
  assert.equal(connectionLimit(50, 1024), 50);
  assert.equal(connectionLimit(5000, null), 5000);
  assert.equal(connectionLimit(null, null), null);
  assert.equal(connectionLimit(null, 1024), 768); // 256 kept
  assert.equal(connectionLimit(null, 300), 150); // half kept
  assert.equal(connectionLimit(null, 1_048_576), 786_432); // a quarter kept
  const mine = openFileLimit();
  if (process.platform === 'linux') assert.ok(mine !== null && mine > 0, `read ${mine}`);
});

test('a configured max_connections is the limit, whatever the open-file limit; 0 is refused', async () => {
  const server = await startServer({ server_config: { max_connections: 3 } });
  const held: Socket[] = [];
  try {
    const { hostname, port } = new URL(server.url);
    const closed = new Set<Socket>();
    for (let i = 0; i < 5; i++) {
      const s = connect({ host: hostname, port: Number(port) });
      s.on('error', () => {});
      s.on('close', () => closed.add(s));
      held.push(s);
      await new Promise<void>((ok) => s.once('connect', () => ok()));
    }
    await waitUntil(() => closed.size === 2);
    for (const s of held) s.destroy();
    await waitUntil(() => closed.size === 5);
    const health = (await getJson(`${server.url}/healthz`)).body as { http: Record<string, number> };
    assert.equal(health.http['max_connections'], 3);
    assert.equal(health.http['connections_refused'], 2);
  } finally {
    for (const s of held) s.destroy();
    await server.close();
  }
  for (const bad of [0, -1, 1.5, '10']) {
    assert.throws(
      () =>
        validateOptions(
          mergeOptions(defaultOptions(), { server_config: { max_connections: bad as number } }),
        ),
      /server_config\.max_connections/,
      String(bad),
    );
  }
});

async function waitUntil(cond: () => boolean): Promise<void> {
  for (let i = 0; i < 100 && !cond(); i++) await new Promise((r) => setTimeout(r, 20));
  assert.ok(cond(), 'in time');
}

const sockets: Socket[] = [];
let server: ChildServer | undefined;
let dir: string | undefined;
after(async () => {
  for (const s of sockets) s.destroy();
  server?.child.kill('SIGKILL');
  if (dir) await rm(dir, { recursive: true, force: true });
});

/** An HTTP/1.1 request on an open connection; resolves the status line of its answer. */
function requestOn(socket: Socket, head: string, body: string): Promise<string> {
  return new Promise((resolve, reject) => {
    let text = '';
    const onData = (d: Buffer) => {
      text += d.toString();
      if (text.includes('\r\n')) {
        socket.off('data', onData);
        resolve(text.slice(0, text.indexOf('\r\n')));
      }
    };
    socket.on('data', onData);
    socket.once('close', () => reject(new Error(`connection closed before an answer (${text})`)));
    socket.write(`${head}Content-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`);
  });
}

test('connections beyond the limit are refused, and those held are still answered and written', {
  skip: process.platform === 'linux' ? false : 'the open-file limit is read from /proc (Linux)',
}, async () => {
  dir = await mkdtemp(join(tmpdir(), 'otelake-connections-'));
  // The shell lowers the limit for the server alone (soft and hard: node raises the soft one).
  server = await startChildServer(
    dir,
    'fd',
    { durability: 'wal', aggregator_config: { max_age_s: 0.2 } },
    { setup: `ulimit -n ${FILE_LIMIT}` },
  );
  const { url } = server;
  const log = () => server!.messages.join('\n');
  const health = async () =>
    (await getJson(`${url}/healthz`)).body as { status: string; http: Record<string, number> };
  const max = (await health()).http['max_connections']!;
  assert.equal(max, connectionLimit(null, FILE_LIMIT));

  // More idle connections than the server has descriptors.
  const { hostname, port } = new URL(url);
  const closed = new Set<Socket>();
  for (let i = 0; i < FILE_LIMIT + 20; i++) {
    const s = connect({ host: hostname, port: Number(port) });
    s.on('error', () => {});
    s.on('close', () => closed.add(s));
    sockets.push(s);
    await new Promise<void>((ok) => {
      s.once('connect', () => ok());
      s.once('close', () => ok());
    });
  }
  await new Promise((r) => setTimeout(r, 500));
  const open = sockets.filter((s) => !closed.has(s));
  assert.ok(open.length <= max, `${open.length} connections held, over the limit of ${max}`);
  assert.ok(open.length >= max - 5, `only ${open.length} of ${max} connections held`);

  // Each held connection can still store rows: the tables and the log had descriptors left.
  for (const [i, s] of open.slice(0, 3).entries()) {
    const status = await requestOn(
      s,
      `POST /v1/logs HTTP/1.1\r\nHost: ${hostname}\r\nContent-Type: application/json\r\nX-Project-Id: fd\r\n`,
      logsBody(`held${i}`, 10),
    );
    assert.equal(status, 'HTTP/1.1 200 OK', log());
  }
  // Room for the reads: close the idle connections.
  for (const s of sockets) s.destroy();
  let rows: unknown[] = [];
  for (let i = 0; i < 50 && rows.length < 30; i++) {
    await new Promise((r) => setTimeout(r, 100));
    rows = ((await getJson(`${url}/api/logs?project_id=fd&limit=100`)).body as { rows: unknown[] }).rows;
  }
  assert.equal(rows.length, 30, log());
  const h = await health();
  assert.equal(h.status, 'ok', JSON.stringify(h));
  assert.ok(h.http['connections_refused']! >= FILE_LIMIT + 20 - max, JSON.stringify(h.http));
  assert.match(log(), /refusing new connections: \d+ are open, what the open-file limit of 300 leaves/);
});
