// What the server benchmarks share (bench/server-load.ts, bench/server-ab.ts): the request bodies
// of a scenario, a server started in a process of its own with the flags and environment of its
// checkout's launcher, the load tool's closed and open loops, and the server's CPU by thread and
// peak RSS from /proc. Run with `--serve`, this file is that server's process.

import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { gzipSync } from 'node:zlib';
import { loadProtobuf, type Signal } from '../src/otlp/index.ts';
import type * as NodeFlags from '../src/server/node-flags.ts';
import { withServerEnv, withServerFlags } from '../src/server/node-flags.ts';
import type { PartialOptions } from '../src/storage/options.ts';
import { RawConnection, rawRequest, sendAtRate } from './http-client.ts';
import { hexIdsToBytes, logsRequest, metricsRequest, tracesRequest } from './otlp-payloads.ts';

/**
 * The server's threads by the name Linux knows them by, in the order of the CPU table. Node 26
 * prefixes its own threads' names with `node-` (`node-MainThread`, `node-V8Worker`).
 */
export const THREAD_GROUPS: [group: string, names: string[]][] = [
  ['event loop', ['MainThread']],
  ['decoders', ['otelake-decode']],
  ['Parquet worker', ['otelake-parquet']],
  ['V8 helpers', ['V8Worker', 'DelayedTaskSche']],
  ['libuv pool', ['libuv-worker']],
];

/** Items per request unless --items says otherwise; the Collector's batch processor sends up to 8,192. */
export const ITEMS_PER_REQUEST = 100;
/** Distinct bodies prepared per scenario (fewer for large requests: they are sent in turn anyway). */
const DISTINCT_BODIES = 32;
const DISTINCT_ITEMS = 3_200;
const REQUESTS = { traces: tracesRequest, logs: logsRequest, metrics: metricsRequest };

/** A scenario's first word names the signal it sends. */
export function signalOf(kind: string): Signal {
  const signal = ({ spans: 'traces', logs: 'logs', metrics: 'metrics' } as const)[kind as 'spans'];
  if (!signal) throw new Error(`unknown scenario kind ${kind}: spans, logs or metrics`);
  return signal;
}

// --- server child -------------------------------------------------------------------------------

/**
 * The option sets a scenario runs with: the defaults, which is what users run, and the tuned ones
 * (full batches of --max-batch-rows, a 500,000-row queue); `--decode-workers` applies to both.
 */
export function optionSets(flags: {
  'max-batch-rows'?: string;
  'min-batch-rows'?: string;
  'decode-workers'?: string;
}): Record<'default' | 'tuned', PartialOptions> {
  const maxBatchRows = Number(flags['max-batch-rows'] ?? 20_000);
  const workers: PartialOptions =
    flags['decode-workers'] === undefined
      ? {}
      : { server_config: { decode_workers: Number(flags['decode-workers']) } };
  const tuned: PartialOptions = {
    ...workers,
    producer_config: { max_queue_size: 500_000, block_timeout_s: 5 },
    aggregator_config: {
      max_batch_rows: maxBatchRows,
      min_batch_rows: Number(flags['min-batch-rows'] ?? maxBatchRows),
      max_age_s: 1,
    },
  };
  return { default: workers, tuned };
}

// Run as `node bench/server-harness.ts --serve DIR OPTIONS [SRC]` by startServer: the server.
if (process.argv[1] === fileURLToPath(import.meta.url) && process.argv[2] === '--serve') {
  const [dir, options, src] = process.argv.slice(3);
  const { runServer } = (await import(
    src === undefined ? '../src/server/index.ts' : `${src}/server/index.ts`
  )) as typeof import('../src/server/index.ts');
  const running = await runServer({
    dir: dir!,
    instanceId: 'bench',
    host: '127.0.0.1',
    port: 0,
    options: JSON.parse(options!) as PartialOptions,
    log: { level: 'warn' },
  });
  process.stdout.write(`${JSON.stringify({ url: running.url })}\n`);
}

// --- the load and its measurements ----------------------------------------------------------------

export interface Scenario {
  name: string;
  /** The scenario's name with gzip, without the option set: `logs-proto`, `spans-json-gzip`. */
  base: string;
  set: 'default' | 'tuned';
  signal: Signal;
  format: 'json' | 'protobuf';
  gzip: boolean;
  durability: 'wal' | 'memory';
  options: PartialOptions;
  /** The src/ folder of the server's checkout; null: this one. */
  src: string | null;
}

export interface Body {
  bytes: Buffer;
  headers: Record<string, string>;
}

/** `p50 / p99` of sorted latencies, in ms. */
export function p50p99(sorted: number[]): string {
  return `${percentile(sorted, 50).toFixed(1)} / ${percentile(sorted, 99).toFixed(1)}`;
}

export function percentile(sorted: number[], p: number): number {
  if (sorted.length === 0) return Number.NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
}

export function median(xs: readonly number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 === 1 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
}

/** Median and range: `1.21 (1.10-1.35)`. */
export function spread(xs: readonly number[], digits: number): string {
  if (xs.length === 0) return '-';
  const f = (x: number) =>
    x.toLocaleString('en-US', { minimumFractionDigits: digits, maximumFractionDigits: digits });
  return `${f(median(xs))} (${f(Math.min(...xs))}-${f(Math.max(...xs))})`;
}

export async function buildBodies(
  s: Scenario,
  items: number,
): Promise<{ bodies: Body[]; rowsPerRequest: number; itemsPerRequest: number }> {
  const proto = s.format === 'protobuf' ? await loadProtobuf() : null;
  if (s.format === 'protobuf' && !proto) throw new Error('protobuf scenarios need protobufjs');
  const bodies: Body[] = [];
  let rowsPerRequest = 0;
  const distinct = Math.max(4, Math.min(DISTINCT_BODIES, Math.ceil(DISTINCT_ITEMS / items)));
  for (let i = 0; i < distinct; i++) {
    const seed = 1 + i * 7;
    const msg = REQUESTS[s.signal](items, seed);
    if (i === 0) {
      rowsPerRequest =
        s.signal === 'traces'
          ? items +
            (msg as ReturnType<typeof tracesRequest>).resourceSpans[0]!.scopeSpans[0]!.spans.reduce(
              (n, sp) => n + sp.events.length,
              0,
            )
          : items; // a log record, or a data point of any kind, is one row
    }
    let bytes: Buffer;
    if (proto) {
      const type = proto.requestType(s.signal);
      bytes = Buffer.from(
        type.encode(type.fromObject(hexIdsToBytes(msg) as Record<string, unknown>)).finish(),
      );
    } else bytes = Buffer.from(JSON.stringify(msg));
    const headers: Record<string, string> = {
      'content-type': s.format === 'json' ? 'application/json' : 'application/x-protobuf',
      'x-project-id': 'bench',
    };
    if (s.gzip) {
      bytes = gzipSync(bytes, { level: 6 });
      headers['content-encoding'] = 'gzip';
    }
    headers['content-length'] = String(bytes.length);
    bodies.push({ bytes, headers });
  }
  return { bodies, rowsPerRequest, itemsPerRequest: items };
}

/** The connections of a phase, and each body as the complete request bytes for `path`. */
export function prepare(url: string, bodies: Body[], connections: number, path: string) {
  const target = new URL(url);
  const raw = bodies.map((b) => rawRequest(target.host, path, b.headers, b.bytes));
  const conns = Array.from(
    { length: connections },
    () => new RawConnection(target.hostname, Number(target.port)),
  );
  return { raw, conns };
}

export interface Health {
  aggregator: { rows_written: number; batches_written: number };
  event_loop_delay_ms: { p50: number; p99: number; max: number };
}

export async function health(url: string): Promise<Health> {
  return (await (await fetch(`${url}/healthz`)).json()) as Health;
}

export async function rowsWritten(url: string): Promise<number> {
  return (await health(url)).aggregator.rows_written;
}

/** The launcher's flags and environment of the checkout whose src/ is `src` (null: this one). */
async function launcherOf(
  src: string | null,
): Promise<Pick<typeof NodeFlags, 'withServerFlags' | 'withServerEnv'>> {
  if (src === null) return { withServerFlags, withServerEnv };
  const file = join(src, 'server', 'node-flags.ts');
  if (existsSync(file)) return (await import(file)) as typeof NodeFlags;
  return { withServerFlags: (extra) => [...extra], withServerEnv: (env) => env };
}

/**
 * Extra node flags for a server: BENCH_SERVER_FLAGS, e.g. "--cpu-prof" to profile it (or
 * "--max-semi-space-size=16" to undo ours).
 */
export function benchServerFlags(): string[] {
  return (process.env['BENCH_SERVER_FLAGS'] ?? '').split(' ').filter(Boolean);
}

export async function startServer(
  options: PartialOptions,
  src: string | null = null,
  extraFlags: readonly string[] = benchServerFlags(),
  extraEnv: Readonly<Record<string, string>> = {},
): Promise<{ url: string; pid: number; stop(): Promise<void> }> {
  const dir = await mkdtemp(join(tmpdir(), 'otelake-bench-server-'));
  const launcher = await launcherOf(src);
  // The flags `otelake start` gives a server, then the extra ones.
  const flags = launcher.withServerFlags(extraFlags);
  const child = spawn(
    process.execPath,
    [
      ...flags,
      fileURLToPath(import.meta.url),
      '--serve',
      dir,
      JSON.stringify(options),
      ...(src === null ? [] : [src]),
    ],
    {
      stdio: ['ignore', 'pipe', 'inherit'],
      // The compile cache on from the first module, as under bin/otelake.js (a .js launcher):
      // enabled only once this .ts file runs, the server's main thread stripped its types with
      // Node's TypeScript loader (idle: 111 MiB of RSS against 85). And the environment
      // `otelake start` gives a server (malloc settings).
      env: launcher.withServerEnv({
        ...process.env,
        NODE_COMPILE_CACHE: process.env['NODE_COMPILE_CACHE'] ?? join(tmpdir(), 'node-compile-cache'),
        ...extraEnv,
      }),
    },
  );
  const exited = new Promise<number | null>((r) => child.on('exit', (code) => r(code)));
  const url = await new Promise<string>((resolve, reject) => {
    // Other output of the server (e.g. --trace-gc) goes to stderr.
    createInterface({ input: child.stdout! }).on('line', (line) => {
      if (line.startsWith('{"url"')) resolve((JSON.parse(line) as { url: string }).url);
      else process.stderr.write(`${line}\n`);
    });
    child.once('exit', () => reject(new Error('server exited before listening')));
  });
  return {
    url,
    pid: child.pid!,
    async stop() {
      child.kill('SIGTERM');
      const code = await exited;
      await rm(dir, { recursive: true, force: true });
      if (code !== 0) throw new Error(`server exited with ${code}`);
    },
  };
}

export async function peakRssMiB(pid: number): Promise<number> {
  const status = await readFile(`/proc/${pid}/status`, 'utf8');
  const kb = Number(/VmHWM:\s+(\d+) kB/.exec(status)?.[1] ?? Number.NaN);
  return Math.round(kb / 1024);
}

export interface CpuSnapshot {
  /** The whole process, ended threads included. */
  process: number;
  main: number;
  /** Each live thread's CPU seconds and its group ('other' if none). */
  threads: Map<string, { group: string; seconds: number }>;
}

/** CPU seconds (user + system) used so far by the server process and each of its threads (/proc). */
export async function cpuSeconds(pid: number): Promise<CpuSnapshot> {
  const hz = 100;
  // utime + stime, after the "(comm) " part; undefined for a thread that ended meanwhile.
  const stat = async (path: string) => {
    const text = await readFile(path, 'utf8').catch(() => undefined);
    if (text === undefined) return undefined;
    const comm = text.slice(text.indexOf('(') + 1, text.lastIndexOf(')'));
    const fields = text.slice(text.lastIndexOf(')') + 2).split(' ');
    return { comm, seconds: (Number(fields[11]) + Number(fields[12])) / hz };
  };
  const threads = new Map<string, { group: string; seconds: number }>();
  for (const tid of await readdir(`/proc/${pid}/task`)) {
    const t = await stat(`/proc/${pid}/task/${tid}/stat`);
    if (!t) continue;
    const name = t.comm.replace(/^node-/, '');
    const group = THREAD_GROUPS.find(([, names]) => names.includes(name))?.[0] ?? 'other';
    threads.set(tid, { group, seconds: t.seconds });
  }
  return {
    process: (await stat(`/proc/${pid}/stat`))!.seconds,
    main: threads.get(String(pid))?.seconds ?? 0,
    threads,
  };
}

/** CPU seconds per group between two snapshots; 'other' takes what no live thread accounts for. */
export function cpuByGroup(a: CpuSnapshot, b: CpuSnapshot): Map<string, number> {
  const out = new Map<string, number>([
    ...THREAD_GROUPS.map(([g]) => [g, 0] as [string, number]),
    ['other', 0],
  ]);
  let counted = 0;
  for (const [tid, t] of b.threads) {
    const used = t.seconds - (a.threads.get(tid)?.seconds ?? 0); // a thread started meanwhile: all of it
    out.set(t.group, out.get(t.group)! + used);
    counted += used;
  }
  out.set('other', out.get('other')! + Math.max(0, b.process - a.process - counted));
  return out;
}

export interface PhaseResult {
  requests: number;
  statuses: Record<number, number>;
  latencies: number[];
  /** Open loop: each request's latency from when it was written (the load tool's lateness left out). */
  fromWrite?: number[];
  /** Open loop: the connections it used (more open when all are busy). */
  connections?: number;
}

/** Closed loop: every connection sends its next request as soon as the previous one is answered. */
export async function closedLoop(
  url: string,
  bodies: Body[],
  connections: number,
  ms: number,
  path: string,
): Promise<PhaseResult> {
  const { raw, conns } = prepare(url, bodies, connections, path);
  const out: PhaseResult = { requests: 0, statuses: {}, latencies: [] };
  const end = performance.now() + ms;
  let next = 0;
  await Promise.all(
    conns.map(async (conn) => {
      while (performance.now() < end) {
        const body = raw[next++ % raw.length]!;
        const t0 = performance.now();
        const status = await conn.send(body);
        out.latencies.push(performance.now() - t0);
        out.statuses[status] = (out.statuses[status] ?? 0) + 1;
        out.requests++;
        // A full queue answers 503 at once: back off instead of spinning.
        if (status === 503) await new Promise((r) => setTimeout(r, 50));
      }
    }),
  );
  for (const c of conns) c.close();
  return out;
}

/**
 * Open loop at a fixed request rate; latency counts from the scheduled send time. A request finds
 * an idle connection or opens one, as a client's pool does.
 */
export async function openLoop(
  url: string,
  bodies: Body[],
  connections: number,
  ms: number,
  path: string,
  rps: number,
): Promise<PhaseResult> {
  const { raw, conns } = prepare(url, bodies, connections, path);
  const target = new URL(url);
  try {
    return await sendAtRate(
      conns,
      raw,
      ms,
      rps,
      () => new RawConnection(target.hostname, Number(target.port)),
    );
  } finally {
    for (const c of conns) c.close();
  }
}

/**
 * Runs a server once, a few requests of each scenario, before anything is measured, so that Node's
 * compile cache holds every module a server loads (its workers' too). A server that has to strip
 * its TypeScript when it starts (the first run after an edit; a second checkout's changed files)
 * runs with a higher first heap limit and a lower tail than one whose modules come from the cache
 * (docs/benchmarks.md): primed, every measured server starts from the cache.
 */
export async function primeCompileCache(
  scenarios: readonly Scenario[],
  items: number,
  src: string | null,
): Promise<void> {
  const server = await startServer({}, src);
  const primed = new Set<string>();
  try {
    for (const s of scenarios) {
      // Option sets and durabilities load the same modules: one kind of body primes them.
      const kind = `${s.signal} ${s.format} ${s.gzip}`;
      if (primed.has(kind)) continue;
      primed.add(kind);
      const { bodies } = await buildBodies(s, items);
      await closedLoop(server.url, bodies.slice(0, 1), 1, 200, `/v1/${s.signal}`);
    }
  } finally {
    await server.stop();
  }
}

export async function waitDrained(url: string, expectRows: number, timeoutMs: number): Promise<number> {
  const deadline = performance.now() + timeoutMs;
  let written = await rowsWritten(url);
  while (written < expectRows && performance.now() < deadline) {
    await new Promise((r) => setTimeout(r, 100));
    written = await rowsWritten(url);
  }
  return written;
}

/**
 * How fast the machine is now: the CPU seconds per 1M log records over protobuf of the server's
 * decode step alone, in a process of its own (bench/otlp-decode-map.ts). This machine's speed
 * swings: the same step took ~2.7-3.0 s in fast stretches and 5-7 on medium and slow days, and
 * the server's CPU per item follows it. Printed before and after the run, so that its figures say
 * what kind of hour they come from.
 */
export async function decodeStepSeconds(): Promise<string> {
  const script = new URL('./otlp-decode-map.ts', import.meta.url).pathname;
  const args = [script, '--requests', '1500', '--signal', 'logs', '--format', 'protobuf'];
  const child = spawn(process.execPath, args, { stdio: ['ignore', 'pipe', 'inherit'] });
  let out = '';
  child.stdout.on('data', (b: Buffer) => {
    out += b.toString();
  });
  const code = await new Promise<number | null>((done) => child.on('close', done));
  const figure = /^logs protobuf .* (\d+\.\d+)\s*$/m.exec(out)?.[1];
  return code === 0 && figure ? `${figure} s` : 'not measured';
}
