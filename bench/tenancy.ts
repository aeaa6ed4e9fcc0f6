// Tenancy benchmark: what fairness and authentication cost, and what fairness buys.
//
//   fairness: project A sends logs at a fixed rate (open loop: latency counted from each request's
//     scheduled time, so a stall is not hidden) while project B sends, from a thread of its own
//     (as another tenant's client would from its own machine: B's answers must not delay A's
//     timers and answers in A's event loop), in one of these ways:
//       B at rate   at 90% of its allowed rate (open loop): the load B may legitimately add
//       B floods    as fast as the server answers over its connections, each waiting Retry-After
//                   (1 s here) after a 429, as the OpenTelemetry SDKs and the Collector do
//       B hammers   the same, ignoring Retry-After: the worst case, every refusal at once resent
//       no limits   B hammering a server with default options (nothing stops it)
//     and `alone`, A only. Each scenario runs on a fresh server process; all of them, in turn,
//     --rounds times in one run (the machine is shared: interleaving spreads its noise over all),
//     then the median of each scenario's figures. Prints A's rows/s and answers, its latency
//     p50/p99/max, B's rows admitted and requests refused, the server's peak RSS and its CPU.
//   auth: the per-request cost of the token check: the stat of configs/tokens.json and the hash
//     and constant-time comparison of a token, timed over many calls in this process.
//
//   node bench/tenancy.ts [--scenarios fairness,auth] [--seconds 20] [--a-rate 10000]
//                         [--b-limit 15000] [--b-connections 8] [--a-connections 4]
//                         [--durability wal|memory] [--rounds 3]

import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { isMainThread, parentPort, Worker, workerData } from 'node:worker_threads';
import type { PartialOptions } from '../src/storage/options.ts';
import { createToken, TokenFile } from '../src/storage/tokens.ts';
import { memoryMiB, startChildServer } from '../test/server/helpers/child-server.ts';
import { RawConnection, rawRequest } from './http-client.ts';
import { logsRequest } from './otlp-payloads.ts';

const { values: args } = parseArgs({
  options: {
    scenarios: { type: 'string', default: 'fairness,auth' },
    // A's p99 rests on its 20 slowest answers in 20 s, on 10 in 10 s: a stall of the machine or
    // two moves it (docs/http-api.md).
    seconds: { type: 'string', default: '20' },
    'a-rate': { type: 'string', default: '10000' },
    'b-limit': { type: 'string', default: '15000' },
    'a-connections': { type: 'string', default: '4' },
    'b-connections': { type: 'string', default: '8' },
    rounds: { type: 'string', default: '3' },
    durability: { type: 'string', default: 'wal' },
  },
});
const SECONDS = Number(args.seconds);
const WARMUP_S = 3;
const ROWS_PER_REQUEST = 100;
const A_RATE = Number(args['a-rate']);
const B_LIMIT = Number(args['b-limit']);

function percentile(sorted: number[], p: number): number {
  if (sorted.length === 0) return Number.NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
}

function requestsOf(host: string, project: string): Buffer[] {
  return Array.from({ length: 16 }, (_, i) =>
    rawRequest(
      host,
      '/v1/logs',
      { 'content-type': 'application/json', 'x-project-id': project },
      Buffer.from(JSON.stringify(logsRequest(ROWS_PER_REQUEST, 1 + i))),
    ),
  );
}

interface Figures {
  aRowsPerS: number;
  aStatus: Record<number, number>;
  p50: number;
  p99: number;
  max: number;
  bAdmittedRowsPerS: number;
  bRefusedPerS: number;
  peakRssMiB: number;
  /** The server's CPU (user + system) while measured, in % of one core. */
  cpuPct: number;
}

/** CPU seconds a process has used (user + system), from /proc (Linux). */
async function cpuSeconds(pid: number): Promise<number> {
  const stat = await readFile(`/proc/${pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(fields[11]) + Number(fields[12])) / 100; // utime, stime in clock ticks (USER_HZ 100)
}

type BMode = 'none' | 'rate' | 'flood' | 'hammer';

/** The least Retry-After the server sends with a 429 (a flood of 8 connections is paced and rarely sees one). */
const RETRY_AFTER_MS = 1000;

/** Sends `requests` round robin over `conns` at `rowsPerS` until `end`; `onAnswer` gets each status and its delay. */
async function openLoop(
  conns: RawConnection[],
  requests: Buffer[],
  rowsPerS: number,
  start: number,
  end: number,
  onAnswer: (status: number, at: number) => void,
): Promise<void> {
  const intervalMs = (1000 * ROWS_PER_REQUEST) / rowsPerS;
  const pending: Promise<void>[] = [];
  for (let n = 0; ; n++) {
    const at = start + n * intervalMs;
    if (at >= end) break;
    const wait = at - performance.now();
    if (wait > 1) await new Promise((r) => setTimeout(r, wait));
    pending.push(
      conns[n % conns.length]!.send(requests[n % requests.length]!).then((st) => onAnswer(st, at)),
    );
  }
  await Promise.all(pending);
}

/** B's load, for its thread. Times are epoch ms (performance.timeOrigin differs between threads). */
interface BJob {
  host: string;
  port: number;
  mode: Exclude<BMode, 'none'>;
  start: number;
  measureFrom: number;
  end: number;
}

const epoch = (now: number) => performance.timeOrigin + now;
const local = (at: number) => at - performance.timeOrigin;

/** Runs B's load in a thread of its own; resolves with B's rows admitted and requests refused while measured. */
function inThread(job: BJob): Promise<{ admitted: number; refused: number }> {
  return new Promise((resolve, reject) => {
    const worker = new Worker(new URL(import.meta.url), { workerData: job, argv: process.argv.slice(2) });
    worker.once('message', resolve);
    worker.once('error', reject);
    worker.once('exit', (code) => reject(new Error(`B's thread exited with ${code}`)));
  });
}

/** B's side: sends until the measured seconds end, counting the answers within them. */
async function driveB(job: BJob): Promise<{ admitted: number; refused: number }> {
  const requests = requestsOf(`${job.host}:${job.port}`, 'project-b');
  const conns = Array.from(
    { length: Number(args['b-connections']) },
    () => new RawConnection(job.host, job.port),
  );
  const end = local(job.end);
  let admitted = 0;
  let refused = 0;
  // Answers within the measured seconds only.
  const count = (status: number) => {
    const now = performance.now();
    if (now < local(job.measureFrom) || now >= end) return;
    if (status === 200) admitted += ROWS_PER_REQUEST;
    else refused++;
  };
  if (job.mode === 'rate') await openLoop(conns, requests, 0.9 * B_LIMIT, local(job.start), end, count);
  else {
    // Flooding: each connection sends its next request as soon as the last is answered (until the
    // server closes it).
    await Promise.allSettled(
      conns.map(async (c, i) => {
        for (let n = i; performance.now() < end; n++) {
          const status = await c.send(requests[n % requests.length]!);
          count(status);
          if (status === 429 && job.mode === 'flood') await new Promise((r) => setTimeout(r, RETRY_AFTER_MS));
        }
      }),
    );
  }
  for (const c of conns) c.close();
  return { admitted, refused };
}

async function runScenario(options: PartialOptions, b: BMode): Promise<Figures> {
  const dir = await mkdtemp(join(tmpdir(), 'otelake-bench-tenancy-'));
  const server = await startChildServer(dir, 'bench', options);
  const url = new URL(server.url);
  const aRequests = requestsOf(url.host, 'project-a');
  const aConns = Array.from(
    { length: Number(args['a-connections']) },
    () => new RawConnection(url.hostname, Number(url.port)),
  );

  let measuring = false;
  const latencies: number[] = [];
  const aStatus: Record<number, number> = {};
  let peak = 0;
  const sampler = setInterval(() => {
    memoryMiB(server.pid, 'VmRSS').then(
      (m) => {
        if (measuring) peak = Math.max(peak, m);
      },
      () => {},
    );
  }, 100);

  const start = performance.now();
  const end = start + (WARMUP_S + SECONDS) * 1000;
  const measureFrom = start + WARMUP_S * 1000;
  const bLoad =
    b === 'none'
      ? Promise.resolve({ admitted: 0, refused: 0 })
      : inThread({
          host: url.hostname,
          port: Number(url.port),
          mode: b,
          start: epoch(start),
          measureFrom: epoch(measureFrom),
          end: epoch(end),
        });
  // The measured seconds: CPU and peak RSS from their start to their end.
  let cpuFrom = 0;
  let cpuTo = 0;
  const measure = setTimeout(async () => {
    measuring = true;
    cpuFrom = await cpuSeconds(server.pid);
  }, WARMUP_S * 1000);
  const measured = new Promise<void>((done) =>
    setTimeout(
      async () => {
        measuring = false;
        cpuTo = await cpuSeconds(server.pid);
        done();
      },
      (WARMUP_S + SECONDS) * 1000,
    ),
  );
  // A: requests at fixed times, round robin over its connections.
  await openLoop(aConns, aRequests, A_RATE, start, end, (status, at) => {
    if (at < measureFrom) return;
    aStatus[status] = (aStatus[status] ?? 0) + 1;
    latencies.push(performance.now() - at);
  });
  clearTimeout(measure);
  await measured;
  const { admitted: bAdmitted, refused: bRefused } = await bLoad;
  clearInterval(sampler);
  for (const c of aConns) c.close();
  await server.stop();
  await rm(dir, { recursive: true, force: true });

  latencies.sort((x, y) => x - y);
  return {
    aRowsPerS: ((aStatus[200] ?? 0) * ROWS_PER_REQUEST) / SECONDS,
    aStatus,
    p50: percentile(latencies, 50),
    p99: percentile(latencies, 99),
    max: latencies.at(-1) ?? Number.NaN,
    bAdmittedRowsPerS: bAdmitted / SECONDS,
    bRefusedPerS: bRefused / SECONDS,
    peakRssMiB: peak,
    cpuPct: (100 * (cpuTo - cpuFrom)) / SECONDS,
  };
}

async function fairness(): Promise<void> {
  const durability = { durability: args.durability as 'wal' | 'memory' };
  const fair: PartialOptions = {
    ...durability,
    server_config: { project_max_rows_per_s: B_LIMIT },
    producer_config: { project_queue_share: 0.5 },
  };
  console.log(
    `fairness: A sends ${A_RATE} log rows/s (${ROWS_PER_REQUEST} per request); B sends ${B_LIMIT} rows/s ` +
      `or floods over ${args['b-connections']} connections; fairness options: project_max_rows_per_s ${B_LIMIT}, ` +
      `project_queue_share 0.5; durability ${args.durability}; ${SECONDS} s each after ${WARMUP_S} s of warm-up`,
  );
  console.log(
    'scenario   A rows/s  A answers         A p50 ms  A p99 ms  A max ms  B admitted rows/s  B refused req/s  peak RSS MiB  server CPU %',
  );
  const scenarios = [
    ['alone', fair, 'none'],
    ['B at rate', fair, 'rate'],
    ['B floods', fair, 'flood'],
    ['B hammers', fair, 'hammer'],
    ['no limits', durability, 'hammer'],
  ] as const;
  const runs = new Map<string, Figures[]>();
  const line = (name: string, f: Figures) => {
    const answers = Object.entries(f.aStatus)
      .map(([st, n]) => `${st}:${n}`)
      .join(' ');
    console.log(
      `${name.padEnd(10)} ${f.aRowsPerS.toFixed(0).padStart(8)}  ${answers.padEnd(16)}  ${f.p50.toFixed(1).padStart(8)}  ` +
        `${f.p99.toFixed(1).padStart(8)}  ${f.max.toFixed(0).padStart(8)}  ${f.bAdmittedRowsPerS.toFixed(0).padStart(17)}  ` +
        `${f.bRefusedPerS.toFixed(0).padStart(15)}  ${f.peakRssMiB.toFixed(0).padStart(12)}  ${f.cpuPct.toFixed(0).padStart(12)}`,
    );
  };
  for (let round = 0; round < Number(args.rounds); round++) {
    for (const [name, options, b] of scenarios) {
      const f = await runScenario(options, b);
      runs.set(name, [...(runs.get(name) ?? []), f]);
      line(name, f);
    }
  }
  const median = (xs: number[]) => {
    const s = [...xs].sort((a, b) => a - b);
    return s.length % 2 ? s[(s.length - 1) / 2]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2;
  };
  const med = new Map<string, Figures>();
  console.log(`medians of ${args.rounds} rounds:`);
  for (const [name] of scenarios) {
    const fs = runs.get(name)!;
    const pick = (k: keyof Figures) => median(fs.map((f) => f[k] as number));
    const m: Figures = {
      aRowsPerS: pick('aRowsPerS'),
      // Answers of all rounds together.
      aStatus: fs.reduce<Record<number, number>>((all, f) => {
        for (const [st, n] of Object.entries(f.aStatus)) all[Number(st)] = (all[Number(st)] ?? 0) + n;
        return all;
      }, {}),
      p50: pick('p50'),
      p99: pick('p99'),
      max: pick('max'),
      bAdmittedRowsPerS: pick('bAdmittedRowsPerS'),
      bRefusedPerS: pick('bRefusedPerS'),
      peakRssMiB: pick('peakRssMiB'),
      cpuPct: pick('cpuPct'),
    };
    med.set(name, m);
    line(name, m);
  }
  const pct = (x: number, y: number) => `${((100 * x) / y).toFixed(0)}%`;
  const alone = med.get('alone')!;
  for (const name of ['B at rate', 'B floods', 'B hammers', 'no limits']) {
    const f = med.get(name)!;
    console.log(
      `${name} vs alone: A throughput ${pct(f.aRowsPerS, alone.aRowsPerS)}, p50 ${pct(f.p50, alone.p50)}, p99 ${pct(f.p99, alone.p99)}`,
    );
  }
}

async function auth(): Promise<void> {
  const dir = await mkdtemp(join(tmpdir(), 'otelake-bench-tokens-'));
  const file = join(dir, 'tokens.json');
  let token = '';
  for (let i = 0; i < 20; i++)
    token = (await createToken(file, { project: `p${i}`, scopes: ['ingest'] })).token;
  const tokens = new TokenFile(file);
  const time = (label: string, calls: number, f: () => unknown) => {
    f();
    const t = process.hrtime.bigint();
    for (let i = 0; i < calls; i++) f();
    const ns = Number(process.hrtime.bigint() - t) / calls;
    console.log(`${label.padEnd(48)} ${(ns / 1000).toFixed(2)} µs per call`);
  };
  console.log('auth: the token check of one request, 20 tokens in tokens.json');
  time('TokenFile.current() (stat, file unchanged)', 200_000, () => tokens.current());
  const set = tokens.current();
  time('TokenSet.verify(a valid token)', 200_000, () => set.verify(token));
  time('TokenSet.verify(an unknown token)', 200_000, () => set.verify(`${token.slice(0, -1)}x`));
  await rm(dir, { recursive: true, force: true });
}

if (!isMainThread) parentPort!.postMessage(await driveB(workerData as BJob));
else {
  for (const scenario of args.scenarios.split(',')) {
    if (scenario === 'fairness') await fairness();
    else if (scenario === 'auth') await auth();
    else throw new Error(`unknown scenario ${scenario}`);
  }
}
