// Idle memory benchmark: what a server holds once a burst of ingest is over, and what the first
// requests after a quiet spell wait. A server in a child process, with the node flags and malloc
// environment `otelake start` gives it, takes 100-item log requests (JSON) over N connections in
// closed loop for `--seconds`, then nothing for `--idle` seconds, then the same load again.
//
// Prints its RSS, anonymous RSS and thread count at the start, after the burst and every 5 s of
// the quiet spell (its ingest workers stop once idle for WORKER_IDLE_MS), then the latency of the
// first request after it from one client, and p50/p99/max of a 3 s burst from all connections.
//
//   node bench/idle-memory.ts [--seconds 15] [--idle 75] [--connections 8]

import { readdirSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { withServerEnv, withServerFlags } from '../src/server/node-flags.ts';
import { WORKER_IDLE_MS } from '../src/storage/worker-pool.ts';
import { memoryMiB, startChildServer } from '../test/server/helpers/child-server.ts';
import { RawConnection, rawRequest } from './http-client.ts';
import { logsRequest } from './otlp-payloads.ts';

const { values } = parseArgs({
  options: {
    seconds: { type: 'string', default: '15' },
    idle: { type: 'string', default: String(Math.ceil(WORKER_IDLE_MS / 1000) + 15) },
    connections: { type: 'string', default: '8' },
  },
});
const seconds = Number(values.seconds);
const idle = Number(values.idle);
const connections = Number(values.connections);

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function percentile(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? Number.NaN;
}

/** Closed loop over `conns` for `ms`: each request's latency, sorted. */
async function load(conns: RawConnection[], raw: Buffer[], ms: number): Promise<number[]> {
  const latencies: number[] = [];
  const end = performance.now() + ms;
  let next = 0;
  await Promise.all(
    conns.map(async (c) => {
      while (performance.now() < end) {
        const t0 = performance.now();
        const status = await c.send(raw[next++ % raw.length]!);
        if (status !== 200) throw new Error(`an ingest request was answered ${status}`);
        latencies.push(performance.now() - t0);
      }
    }),
  );
  return latencies.sort((a, b) => a - b);
}

const dir = await mkdtemp(join(tmpdir(), 'otelake-bench-idle-'));
const server = await startChildServer(
  dir,
  'bench',
  {},
  { nodeFlags: withServerFlags([]), env: withServerEnv({}) as Record<string, string> },
);
try {
  const target = new URL(server.url);
  const raw = Array.from({ length: 16 }, (_, i) =>
    rawRequest(
      target.host,
      '/v1/logs',
      { 'content-type': 'application/json' },
      Buffer.from(JSON.stringify(logsRequest(100, i + 1))),
    ),
  );
  const state = async (label: string) => {
    const threads = readdirSync(`/proc/${server.pid}/task`).length;
    const rss = await memoryMiB(server.pid, 'VmRSS');
    const anon = await memoryMiB(server.pid, 'RssAnon');
    console.log(`| ${label} | ${rss.toFixed(0)} | ${anon.toFixed(0)} | ${threads} |`);
  };
  console.log(
    `${connections} connections, 100 log records (JSON) a request, ${seconds} s, then ${idle} s idle ` +
      `(ingest workers stop after ${WORKER_IDLE_MS / 1000} s idle)\n`,
  );
  console.log('| when | RSS MiB | anonymous MiB | threads |');
  console.log('|---|---|---|---|');
  await sleep(1000);
  await state('started');
  const conns = Array.from(
    { length: connections },
    () => new RawConnection(target.hostname, Number(target.port)),
  );
  const burst = await load(conns, raw, seconds * 1000);
  await state(`after ${burst.length} requests`);
  for (let t = 5; t <= idle; t += 5) {
    await sleep(5000);
    await state(`idle ${t} s`);
  }
  // New connections (a loopback connect is well under a millisecond): the server closed the idle
  // ones (server_config.idle_timeout_s).
  for (const c of conns) c.close();
  const fresh = Array.from(
    { length: connections },
    () => new RawConnection(target.hostname, Number(target.port)),
  );
  const t0 = performance.now();
  await fresh[0]!.send(raw[0]!);
  const first = performance.now() - t0;
  const again = await load(fresh, raw, 3000);
  await state('after the second burst');
  console.log(
    `\nfirst request after the quiet spell: ${first.toFixed(1)} ms; then ${again.length} requests in 3 s: ` +
      `p50 ${percentile(again, 50).toFixed(1)} ms, p99 ${percentile(again, 99).toFixed(1)}, max ${again.at(-1)!.toFixed(1)}` +
      ` (the first burst: p50 ${percentile(burst, 50).toFixed(1)}, p99 ${percentile(burst, 99).toFixed(1)}, max ${burst.at(-1)!.toFixed(1)})`,
  );
  for (const c of fresh) c.close();
} finally {
  await server.stop();
  await rm(dir, { recursive: true, force: true });
}
