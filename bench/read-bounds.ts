// Read bounds benchmark: what reads cost the server process when rows are huge and when many
// clients read at once during ingest. The server runs in a child process (runServer with default
// options, as the tests start it); the figures are the server's.
//
//   huge rows: twelve log records of 50 MB each (one request each), then one
//     `GET /api/logs?project_id=big`: status, time, bytes received, the server's peak RSS during
//     the read (VmHWM reset just before it), the read process's (the server reads in child
//     processes: the largest VmHWM of those alive after it) and the RSS the server still holds
//     3 s afterwards.
//   parallel reads: ingest runs (100 logs per request over 4 connections) while 20 clients read
//     `GET /api/logs?project_id=load` in a closed loop; a client answered 503 waits Retry-After.
//     Prints the latency of a single read alone first, then p50/p99 of the parallel reads by status.
//   large reads beside ingest: ingest at a fixed rate (open loop, 100 logs per request over 4
//     connections), first alone, then while one client reads `limit=N` rows back to back. Prints
//     for each phase the ingest latency (p50/p99/max from the scheduled send), the reads answered,
//     the server's largest JS heap (its /healthz, every 250 ms) and its peak RSS (VmHWM reset at
//     the phase's start): what answering a read takes from the process that ingests.
//
//   node bench/read-bounds.ts [--scenarios huge,parallel,beside] [--seconds 15] [--readers 20]
//                             [--rows 12] [--row-mb 50] [--rate 10000] [--read-limit 10000]

import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import {
  type ChildServer,
  childrenPeakMiB,
  memoryMiB,
  resetPeakRss,
  startChildServer,
} from '../test/server/helpers/child-server.ts';
import { RawConnection, rawRequest, sendAtRate } from './http-client.ts';
import { logsRequest } from './otlp-payloads.ts';

/** A server process on `dir` (a new temporary instance by default, removed when it stops). */
async function startServer(dir?: string): Promise<ChildServer & { close(): Promise<void> }> {
  const own = dir === undefined;
  const root = dir ?? (await mkdtemp(join(tmpdir(), 'otelake-bench-reads-')));
  const server = await startChildServer(root, 'bench');
  return {
    ...server,
    async close() {
      const code = await server.stop();
      if (own) await rm(root, { recursive: true, force: true });
      if (code !== 0) console.log(`(server exited with ${code})`);
    },
  };
}

const mib = async (pid: number, field: 'VmRSS' | 'VmHWM') => Math.round(await memoryMiB(pid, field));

async function rowsWritten(url: string): Promise<number> {
  const h = (await (await fetch(`${url}/healthz`)).json()) as { aggregator: { rows_written: number } };
  return h.aggregator.rows_written;
}

async function waitWritten(url: string, rows: number, timeoutMs: number): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  while ((await rowsWritten(url)) < rows) {
    if (performance.now() > deadline) throw new Error(`fewer than ${rows} rows written in time`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

interface ReadOutcome {
  status: number;
  ms: number;
  bytes: number;
  retryAfter: string | null;
  tail: string;
}

/** One GET, its body consumed as it arrives (only its size and last bytes are kept). */
async function read(url: string): Promise<ReadOutcome> {
  const t0 = performance.now();
  const res = await fetch(url);
  let bytes = 0;
  let tail = '';
  const decoder = new TextDecoder();
  for await (const chunk of res.body!) {
    bytes += chunk.byteLength;
    tail = (tail + decoder.decode(chunk.subarray(Math.max(0, chunk.byteLength - 300)))).slice(-300);
  }
  return {
    status: res.status,
    ms: performance.now() - t0,
    bytes,
    retryAfter: res.headers.get('retry-after'),
    tail,
  };
}

function percentile(values: number[], p: number): number {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
}

const fmt = (ms: number) => (ms >= 1000 ? `${(ms / 1000).toFixed(2)} s` : `${ms.toFixed(0)} ms`);

/** One read of the big rows: its answer, and the server's RSS before, at its peak and after. */
async function measureRead(server: ChildServer, label: string): Promise<void> {
  const before = await mib(server.pid, 'VmRSS');
  await resetPeakRss(server.pid);
  const out = await read(`${server.url}/api/logs?project_id=big`);
  const peak = await mib(server.pid, 'VmHWM');
  const readPeak = Math.round(await childrenPeakMiB(server.pid));
  await new Promise((r) => setTimeout(r, 3000));
  const after = await mib(server.pid, 'VmRSS');
  console.log(
    `| ${label} | ${out.status} | ${fmt(out.ms)} | ${out.bytes.toLocaleString('en-US')} | ${before} MiB | ${peak} MiB | ${readPeak} MiB | ${after} MiB |`,
  );
  console.log(`  end of the answer: ${JSON.stringify(out.tail.slice(-160))}`);
}

async function hugeRows(rows: number, rowMb: number): Promise<void> {
  console.log(`\n## huge rows: ${rows} log records of ${rowMb} MB, then GET /api/logs?project_id=big`);
  const dir = await mkdtemp(join(tmpdir(), 'otelake-bench-reads-'));
  try {
    let server = await startServer(dir);
    // Incompressible text, so the Parquet files are as large as the rows.
    const text = randomBytes((rowMb * 1024 * 1024 * 3) / 4).toString('base64');
    for (let i = 0; i < rows; i++) {
      const body = JSON.stringify({
        resourceLogs: [
          {
            resource: { attributes: [{ key: 'service.name', value: { stringValue: 'big' } }] },
            scopeLogs: [
              {
                logRecords: [
                  {
                    timeUnixNano: String(BigInt(Date.now()) * 1_000_000n + BigInt(i)),
                    severityNumber: 9,
                    body: { stringValue: `${i} ${text}` },
                  },
                ],
              },
            ],
          },
        ],
      });
      const res = await fetch(`${server.url}/v1/logs`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-project-id': 'big' },
        body,
      });
      await res.arrayBuffer();
      if (res.status !== 200) throw new Error(`ingest of row ${i}: ${res.status}`);
    }
    await waitWritten(server.url, rows, 120_000);
    // Let the ingest's memory settle so the peak measured below is the read's.
    await new Promise((r) => setTimeout(r, 2000));
    console.log(
      '| server | status | time | bytes received | RSS before | peak during the read | the read process peak | RSS 3 s after |',
    );
    console.log('|---|---|---|---|---|---|---|---|');
    try {
      await measureRead(server, 'the one that ingested');
    } finally {
      await server.close();
    }
    server = await startServer(dir);
    try {
      await measureRead(server, 'a fresh one');
    } finally {
      await server.close();
    }
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

/** Sixteen requests of 100 log records (JSON) for project `load`, ready to send. */
function ingestRequests(target: URL): Buffer[] {
  return Array.from({ length: 16 }, (_, i) =>
    rawRequest(
      target.host,
      '/v1/logs',
      { 'content-type': 'application/json', 'x-project-id': 'load' },
      Buffer.from(JSON.stringify(logsRequest(100, i + 1))),
    ),
  );
}

async function parallelReads(seconds: number, readers: number): Promise<void> {
  console.log(
    `\n## parallel reads: ${readers} clients reading during ingest (4 connections, 100 logs per request), ${seconds} s`,
  );
  const server = await startServer();
  try {
    const target = new URL(server.url);
    const bodies = ingestRequests(target);
    let ingesting = true;
    let sent = 0;
    const ingestStatuses: Record<number, number> = {};
    const conns = Array.from({ length: 4 }, () => new RawConnection(target.hostname, Number(target.port)));
    const ingest = Promise.all(
      conns.map(async (c) => {
        while (ingesting) {
          const status = await c.send(bodies[sent++ % bodies.length]!);
          ingestStatuses[status] = (ingestStatuses[status] ?? 0) + 1;
          if (status !== 200) await new Promise((r) => setTimeout(r, 50));
        }
      }),
    );
    try {
      await new Promise((r) => setTimeout(r, 3000)); // some data first
      const path = `${server.url}/api/logs?project_id=load`;
      const single: number[] = [];
      for (let i = 0; i < 10; i++) single.push((await read(path)).ms);
      console.log(
        `a single read during ingest (10 in a row): min ${fmt(Math.min(...single))}, p50 ${fmt(percentile(single, 50))}, max ${fmt(Math.max(...single))}`,
      );

      const byStatus = new Map<number, number[]>();
      const retryAfter = new Set<string | null>();
      const end = performance.now() + seconds * 1000;
      await Promise.all(
        Array.from({ length: readers }, async () => {
          while (performance.now() < end) {
            const out = await read(path);
            byStatus.set(out.status, [...(byStatus.get(out.status) ?? []), out.ms]);
            if (out.status !== 200) {
              retryAfter.add(out.retryAfter);
              await new Promise((r) => setTimeout(r, Number(out.retryAfter ?? 1) * 1000));
            }
          }
        }),
      );
      console.log('| status | answers | p50 | p99 | max |');
      console.log('|---|---|---|---|---|');
      for (const [status, ms] of [...byStatus].sort((a, b) => a[0] - b[0])) {
        console.log(
          `| ${status} | ${ms.length} | ${fmt(percentile(ms, 50))} | ${fmt(percentile(ms, 99))} | ${fmt(Math.max(...ms))} |`,
        );
      }
      if (retryAfter.size > 0) console.log(`Retry-After of refused reads: ${[...retryAfter].join(', ')}`);
    } finally {
      ingesting = false;
      await ingest;
      for (const c of conns) c.close();
    }
    console.log(`ingest answers meanwhile: ${JSON.stringify(ingestStatuses)}`);
    console.log(
      `server peak RSS over the run: ${await mib(server.pid, 'VmHWM')} MiB; ` +
        `its read processes alive at the end: ${Math.round(await childrenPeakMiB(server.pid))} MiB at their peak`,
    );
  } finally {
    await server.close();
  }
}

/** The server's JS heap (used and total, MiB), sampled from /healthz until `stop` is aborted. */
async function sampleHeap(url: string, stop: AbortSignal): Promise<{ used: number; total: number }> {
  const most = { used: 0, total: 0 };
  while (!stop.aborted) {
    const h = (await (await fetch(`${url}/healthz`)).json()) as {
      memory: { heap_used: number; heap_total: number };
    };
    most.used = Math.max(most.used, h.memory.heap_used / 2 ** 20);
    most.total = Math.max(most.total, h.memory.heap_total / 2 ** 20);
    await new Promise((r) => setTimeout(r, 250));
  }
  return most;
}

async function readsBesideIngest(seconds: number, rate: number, readLimit: number): Promise<void> {
  console.log(
    `\n## large reads beside ingest: ${rate.toLocaleString('en-US')} log records/s (100 per request, 4 connections), ` +
      `${seconds} s alone, then ${seconds} s beside reads of limit=${readLimit}`,
  );
  const server = await startServer();
  try {
    const target = new URL(server.url);
    const raw = ingestRequests(target);
    const conns = Array.from({ length: 4 }, () => new RawConnection(target.hostname, Number(target.port)));
    const rps = rate / 100;
    try {
      // Rows to read, and a server past its first requests.
      const load = await sendAtRate(conns, raw, Math.max(3000, (readLimit / rate) * 1000), rps);
      await waitWritten(server.url, (load.statuses[200] ?? 0) * 100, 30_000);
      console.log(
        '| phase | ingest p50 / p99 / max ms | ingest statuses | reads answered (p50) | server JS heap used / total MiB, largest | server peak RSS MiB |',
      );
      console.log('|---|---|---|---|---|---|');
      for (const withReads of [false, true]) {
        await resetPeakRss(server.pid);
        const stop = new AbortController();
        const heap = sampleHeap(server.url, stop.signal);
        const reads: number[] = [];
        const reader = (async () => {
          while (withReads && !stop.signal.aborted) {
            const out = await read(`${server.url}/api/logs?project_id=load&limit=${readLimit}`);
            if (out.status !== 200) throw new Error(`a read was answered ${out.status}`);
            reads.push(out.ms);
          }
        })();
        const ingest = await sendAtRate(conns, raw, seconds * 1000, rps);
        stop.abort();
        const [most] = await Promise.all([heap, reader]);
        const ms = ingest.latencies;
        console.log(
          `| ${withReads ? 'beside reads' : 'alone'} | ${percentile(ms, 50).toFixed(1)} / ${percentile(ms, 99).toFixed(1)} / ${Math.max(...ms).toFixed(1)} | ` +
            `${JSON.stringify(ingest.statuses)} | ${withReads ? `${reads.length} (${fmt(percentile(reads, 50))})` : '-'} | ` +
            `${Math.round(most.used)} / ${Math.round(most.total)} | ${await mib(server.pid, 'VmHWM')} |`,
        );
      }
    } finally {
      for (const c of conns) c.close();
    }
  } finally {
    await server.close();
  }
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      scenarios: { type: 'string', default: 'huge,parallel' },
      seconds: { type: 'string', default: '15' },
      readers: { type: 'string', default: '20' },
      rows: { type: 'string', default: '12' },
      'row-mb': { type: 'string', default: '50' },
      rate: { type: 'string', default: '10000' },
      'read-limit': { type: 'string', default: '10000' },
    },
  });
  const scenarios = values.scenarios.split(',');
  if (scenarios.includes('huge')) await hugeRows(Number(values.rows), Number(values['row-mb']));
  if (scenarios.includes('parallel')) await parallelReads(Number(values.seconds), Number(values.readers));
  if (scenarios.includes('beside'))
    await readsBesideIngest(Number(values.seconds), Number(values.rate), Number(values['read-limit']));
}

await main();
