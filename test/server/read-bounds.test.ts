// Bounded reads, outside in: a server in its own process answers reads of 50 MB rows with their
// values cut and its memory bounded, answers a read of 10,000 rows without its own heap growing
// (the rows become JSON in the read process), refuses reads beyond max_concurrent_reads, and a
// project's reads beyond all slots but one, with 503 and Retry-After, and cancels the read of a
// client that goes away.

import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { closeDeltaWorkers } from '../../src/delta/table.ts';
import type { Row } from '../../src/schema/tables.ts';
import { InstanceLayout } from '../../src/storage/layout.ts';
import { waitFor } from '../cli/helpers.ts';
import { appendRows, fullRow } from '../read/fixtures.ts';
import {
  type ChildServer,
  childPids,
  childrenPeakMiB,
  memoryMiB,
  resetPeakRss,
  startChildServer,
} from './helpers/child-server.ts';
import { getJson, type Json } from './helpers/harness.ts';

const DAY = new Date().toISOString().slice(0, 10);
const BIG_ROWS = 6;
const BIG_CHARS = 50 * 1024 * 1024;
const FIELD_LIMIT = 1024 * 1024;
/**
 * The bound stated for the server process while it reads the 50 MB rows (README, docs/http-api.md),
 * with its read process's peak added (the server reads in child processes).
 */
const PEAK_RSS_BOUND_MIB = 1024;
const WIDE_ROWS = 160;
/** Rows of about 2 KB for a read of MAX_LIMIT rows: an answer of ~25 MB. */
const MANY_ROWS = 10_000;
/**
 * How much the server's JS heap may grow while it answers them. Turning the rows into JSON on its
 * event loop took it from 29 to 121-128 MiB in bench/read-bounds.ts (heap used, 10,000 rows).
 */
const HEAP_GROWTH_BOUND_MIB = 24;

let dir: string;
let server: ChildServer;
/** The text the rows' bodies are cut from. */
let text: string;

function row(project: string, i: number, body: string): Row {
  const ts = BigInt(Date.parse(`${DAY}T00:00:00Z`)) * 1000n + BigInt(i) * 1000n;
  return fullRow('logs', { project_id: project, event_ts: ts, time_unix_nano: ts * 1000n, body });
}

before(async () => {
  dir = await mkdtemp(join(tmpdir(), 'otelake-read-bounds-'));
  const layout = new InstanceLayout(dir, 'rb');
  // Incompressible text, so that each 50 MB row is a file of about that size.
  text = randomBytes((BIG_CHARS * 3) / 4).toString('base64');
  for (let i = 0; i < BIG_ROWS; i++) await appendRows(layout, DAY, 'logs', [row('big', i, `${i}${text}`)]);
  // 160 rows of 256 KiB: an answer of 40 MB, more than the sockets between client and server hold.
  const wide = text.slice(0, 256 * 1024);
  await appendRows(
    layout,
    DAY,
    'logs',
    Array.from({ length: WIDE_ROWS }, (_, i) => row('wide', i, `${i}${wide}`)),
  );
  await appendRows(
    layout,
    DAY,
    'logs',
    Array.from({ length: MANY_ROWS }, (_, i) => row('many', i, `${i} ${text.slice(i, i + 2048)}`)),
  );
  await closeDeltaWorkers();
  server = await startChildServer(dir, 'rb', { server_config: { max_concurrent_reads: 2 } });
});

after(async () => {
  await server?.stop();
  await rm(dir, { recursive: true, force: true });
});

const reads = async (): Promise<Json> => (await getJson(`${server.url}/healthz`)).body.reads;

describe('bounded reads (server in its own process)', () => {
  test(`50 MB rows: answered with their values cut, the server and its read process under ${PEAK_RSS_BOUND_MIB} MiB`, async (t) => {
    const before = await memoryMiB(server.pid, 'VmRSS');
    await resetPeakRss(server.pid);
    const res = await fetch(`${server.url}/api/logs?project_id=big`);
    assert.equal(res.status, 200);
    const body = (await res.json()) as Json;
    const serverPeak = await memoryMiB(server.pid, 'VmHWM');
    // The read process stays 5 s after its read: its VmHWM is the read's.
    const readPeak = await childrenPeakMiB(server.pid);
    assert.ok(readPeak > 0, 'the read ran in a child process of the server');
    const peak = serverPeak + readPeak;
    t.diagnostic(
      `server RSS ${before.toFixed(0)} MiB before the read, peak ${serverPeak.toFixed(0)} MiB during it; ` +
        `the read process's peak ${readPeak.toFixed(0)} MiB`,
    );

    assert.equal(body.count, BIG_ROWS);
    assert.deepEqual(
      body.rows.map((r: Json) => r.body.length),
      Array(BIG_ROWS).fill(FIELD_LIMIT),
    );
    // Newest first, each body the start of its own row.
    assert.deepEqual(
      body.rows.map((r: Json) => r.body[0]),
      Array.from({ length: BIG_ROWS }, (_, i) => String(BIG_ROWS - 1 - i)),
    );
    assert.deepEqual(
      body.truncated_values,
      Array.from({ length: BIG_ROWS }, (_, i) => ({ row: i, column: 'body', chars: BIG_CHARS + 1 })),
    );
    assert.equal(body.incomplete, undefined);
    assert.ok(peak < PEAK_RSS_BOUND_MIB, `peak RSS ${peak.toFixed(0)} MiB`);
  });

  test(`10,000 rows: the server's JS heap grows by less than ${HEAP_GROWTH_BOUND_MIB} MiB while it answers`, async (t) => {
    const heapUsed = async (): Promise<number> =>
      (await getJson(`${server.url}/healthz`)).body.memory.heap_used / 2 ** 20;
    const start = await heapUsed();
    let most = start;
    let reading = true;
    const sampling = (async () => {
      while (reading) {
        most = Math.max(most, await heapUsed());
        await new Promise((r) => setTimeout(r, 20));
      }
    })();
    const res = await fetch(`${server.url}/api/logs?project_id=many&limit=${MANY_ROWS}&select=body`);
    const body = (await res.json()) as Json;
    reading = false;
    await sampling;
    t.diagnostic(
      `server heap used ${start.toFixed(0)} MiB before the read, ${most.toFixed(0)} MiB at most during it`,
    );
    assert.equal(res.status, 200);
    assert.equal(body.count, MANY_ROWS);
    assert.equal(body.rows[0].body, `${MANY_ROWS - 1} ${text.slice(MANY_ROWS - 1, MANY_ROWS - 1 + 2048)}`);
    assert.ok(most - start < HEAP_GROWTH_BOUND_MIB, `heap grew by ${(most - start).toFixed(0)} MiB`);
  });

  test('a read whose process is killed (out of memory) gets 503 with Retry-After; the next read is answered', async () => {
    // Every read process of the server is killed as soon as it shows, before or during its task,
    // as the kernel's out-of-memory killer does (its oom_score_adj makes it the first choice).
    let killing = true;
    const killer = (async () => {
      while (killing) {
        for (const pid of childPids(server.pid)) {
          try {
            process.kill(pid, 'SIGKILL');
          } catch {}
        }
        await new Promise((r) => setTimeout(r, 2));
      }
    })();
    let res: Response;
    try {
      res = await fetch(`${server.url}/api/logs?project_id=big&limit=6`);
    } finally {
      killing = false;
      await killer;
    }
    assert.equal(res.status, 503);
    assert.equal(res.headers.get('retry-after'), '5');
    assert.match(((await res.json()) as Json).message, /killed \(SIGKILL\).*Ingest goes on/);
    const again = await getJson(`${server.url}/api/logs?project_id=big&limit=1&select=event_ts`);
    assert.equal(again.status, 200);
    assert.equal(again.body.count, 1);
  });

  test("beyond a project's share or max_concurrent_reads: 503 with Retry-After; a client that goes away cancels its read", async () => {
    const start = await reads();
    // A client that asks for 25-40 MB and reads none of it holds a read slot.
    const url = new URL(server.url);
    const stall = async (query: string) => {
      const socket = connect({ host: url.hostname, port: Number(url.port) });
      await new Promise<void>((ok) => socket.once('connect', ok));
      socket.pause();
      socket.write(`GET /api/logs?${query} HTTP/1.1\r\nhost: ${url.host}\r\n\r\n`);
      return socket;
    };
    const refusal = async (query: string, why: RegExp) => {
      const refused = await fetch(`${server.url}/api/logs?${query}`);
      assert.equal(refused.status, 503, query);
      assert.equal(refused.headers.get('retry-after'), '1');
      assert.match(((await refused.json()) as Json).message, why);
    };
    const wide = await stall('project_id=wide&limit=1000');
    await waitFor('the stalled read in flight', async () => (await reads()).in_flight === 1);
    // Project "wide" holds all slots but one: its next read waits, another project's is answered.
    await refusal(
      'project_id=wide&limit=1',
      /this project's reads hold 1 of the server_config\.max_concurrent_reads/,
    );
    const other = await getJson(`${server.url}/api/logs?project_id=big&limit=1&select=event_ts`);
    assert.equal(other.status, 200);
    const many = await stall(`project_id=many&limit=${MANY_ROWS}`);
    await waitFor('both stalled reads in flight', async () => (await reads()).in_flight === 2);
    await refusal(
      'project_id=big&limit=1',
      /as many reads as it may at once \(server_config\.max_concurrent_reads\)/,
    );
    assert.equal((await reads()).refused, start.refused + 2);

    // They stay in flight while their clients hold on: the server waits for the client, not the reverse.
    await new Promise((r) => setTimeout(r, 300));
    assert.equal((await reads()).in_flight, 2);

    wide.destroy();
    many.destroy();
    await waitFor('the reads cancelled', async () => (await reads()).in_flight === 0);
    const end = await reads();
    assert.equal(end.cancelled, start.cancelled + 2);
    assert.equal(end.completed, start.completed + 1);

    assert.ok(!server.messages.some((m) => /failed|error/i.test(m)), server.messages.join(' | '));

    // The slots are free again.
    const { status, body } = await getJson(`${server.url}/api/logs?project_id=wide&limit=2&select=event_ts`);
    assert.equal(status, 200);
    assert.equal(body.count, 2);
  });
});
