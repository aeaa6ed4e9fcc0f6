// Read-path benchmark: one day of log rows written into a Delta table in chunks, then repeated
// "newest 100 errors whose body contains X" queries through readTable. Prints latency percentiles,
// the longest event-loop stall and RSS every 10 queries (it must stay flat).
//
//   node bench/read-logs.ts [rows] [repetitions]      (or READ_BENCH_ROWS / READ_BENCH_REPS)
//   defaults: 5,000,000 rows, 100 repetitions; e.g. `node bench/read-logs.ts 500000 20` for a quick run.
//   READ_BENCH_DIR=<dir> keeps the generated instance there and reuses it on the next run.

import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import type { ColumnBatch } from '../src/delta/batch.ts';
import { closeDeltaWorkers, DeltaTable } from '../src/delta/table.ts';
import { closeReadWorkers, readTable } from '../src/read/index.ts';
import { SCHEMAS } from '../src/schema/tables.ts';
import { InstanceLayout } from '../src/storage/layout.ts';

const ROWS = Number(process.argv[2] ?? process.env.READ_BENCH_ROWS ?? 5_000_000);
const REPS = Number(process.argv[3] ?? process.env.READ_BENCH_REPS ?? 100);
const CHUNK = 250_000;
const DAY = '2026-11-20';
const DAY_START_US = BigInt(Date.UTC(2026, 10, 20)) * 1000n;

const SERVICES = ['checkout', 'payments', 'auth', 'catalog', 'search', 'gateway', 'inventory', 'email'];
const PROJECTS = ['shop', 'backoffice', 'mobile'];
const HOSTS = ['ip-10-0-1-12', 'ip-10-0-1-37', 'ip-10-0-2-5', 'ip-10-0-3-81'];
const PATHS = ['/api/v1/orders', '/api/v1/cart', '/api/v1/users', '/api/v1/products', '/health'];
// severity number, text, cumulative share (per mille)
const SEVERITIES: [number, string, number][] = [
  [1, 'TRACE', 20],
  [5, 'DEBUG', 170],
  [9, 'INFO', 820],
  [13, 'WARN', 940],
  [17, 'ERROR', 990],
  [21, 'FATAL', 1000],
];

/** Cheap deterministic pseudo-random numbers (xorshift32). */
function rng(seed: number): () => number {
  let x = seed | 0 || 1;
  return () => {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    return (x >>> 0) / 4294967296;
  };
}

const hex = (r: () => number, n: number) => {
  let s = '';
  for (let i = 0; i < n; i += 8)
    s += Math.floor(r() * 4294967296)
      .toString(16)
      .padStart(8, '0');
  return s.slice(0, n);
};

function body(sev: number, r: () => number): string {
  const pick = <T>(a: readonly T[]) => a[Math.floor(r() * a.length)]!;
  const id = Math.floor(r() * 1_000_000);
  const ms = Math.floor(r() * 2000);
  if (sev >= 17) {
    switch (Math.floor(r() * 4)) {
      case 0:
        return `upstream ${pick(SERVICES)} returned 503 after ${ms}ms (order ${id})`;
      case 1:
        return `XML parse error in invoice ${id}: unexpected token at line ${ms % 400}`;
      case 2:
        return `payment declined for order ${id}: card_declined (issuer code ${ms % 100})`;
      default:
        return `Exception in worker-${ms % 16}: TimeoutError: request ${hex(r, 16)} timed out after ${ms}ms`;
    }
  }
  if (sev === 13) return `slow query on table orders took ${ms}ms (rows=${id % 5000})`;
  if (sev === 9)
    return `${pick(['GET', 'POST', 'PUT'])} ${pick(PATHS)}/${id} ${pick([200, 200, 201, 204, 404])} in ${ms}ms`;
  return `cache ${r() < 0.8 ? 'hit' : 'miss'} for key user:${id} on ${pick(HOSTS)}`;
}

/** `n` log rows starting at row `first` of the day, event_ts increasing with jitter. */
function logsChunk(first: number, n: number, total: number): ColumnBatch {
  const r = rng(first + 17);
  const usPerRow = (86_400_000_000n - 1_000_000n) / BigInt(total);
  const eventTs = new BigInt64Array(n);
  const timeNano = new BigInt64Array(n);
  const observedNano = new BigInt64Array(n);
  const severity = new Int32Array(n);
  const flags = new BigInt64Array(n);
  const flagsValid = new Uint8Array(n);
  const dropped = new Int32Array(n);
  const project: string[] = new Array(n);
  const service: (string | null)[] = new Array(n);
  const sevText: (string | null)[] = new Array(n);
  const bodies: (string | null)[] = new Array(n);
  const attrs: (string | null)[] = new Array(n);
  const traceId: (string | null)[] = new Array(n);
  const spanId: (string | null)[] = new Array(n);
  const resource: (string | null)[] = new Array(n);
  const scopeName: (string | null)[] = new Array(n);
  const scopeVersion: (string | null)[] = new Array(n);
  const none: null[] = new Array(n).fill(null);
  for (let i = 0; i < n; i++) {
    const row = first + i;
    const ts = DAY_START_US + BigInt(row) * usPerRow + BigInt(Math.floor(r() * 1000));
    eventTs[i] = ts;
    timeNano[i] = ts * 1000n + BigInt(Math.floor(r() * 1000));
    observedNano[i] = timeNano[i]! + 1_500_000n;
    const p = r() * 1000;
    const [num, text] = SEVERITIES.find((s) => p < s[2])!;
    severity[i] = num;
    sevText[i] = text;
    const svc = SERVICES[Math.floor(r() * SERVICES.length)]!;
    service[i] = svc;
    project[i] = PROJECTS[Math.floor(r() * PROJECTS.length)]!;
    bodies[i] = body(num, r);
    attrs[i] = `{"http.route":"${PATHS[row % PATHS.length]}","thread.id":${row % 64}}`;
    if (r() < 0.6) {
      traceId[i] = hex(r, 32);
      spanId[i] = hex(r, 16);
      flags[i] = 1n;
      flagsValid[i] = 1;
    } else {
      traceId[i] = null;
      spanId[i] = null;
    }
    resource[i] = `{"service.name":"${svc}","host.name":"${HOSTS[row % HOSTS.length]}"}`;
    scopeName[i] = `io.opentelemetry.${svc}`;
    scopeVersion[i] = '1.4.2';
  }
  const valid = null;
  return {
    numRows: n,
    columns: {
      project_id: { kind: 'string', values: project },
      event_ts: { kind: 'timestamp', values: eventTs, valid },
      service_name: { kind: 'string', values: service },
      time_unix_nano: { kind: 'long', values: timeNano, valid },
      observed_time_unix_nano: { kind: 'long', values: observedNano, valid },
      severity_number: { kind: 'integer', values: severity, valid },
      severity_text: { kind: 'string', values: sevText },
      body: { kind: 'string', values: bodies },
      attributes: { kind: 'string', values: attrs },
      trace_id: { kind: 'string', values: traceId },
      span_id: { kind: 'string', values: spanId },
      flags: { kind: 'long', values: flags, valid: flagsValid },
      event_name: { kind: 'string', values: none },
      dropped_attributes_count: { kind: 'integer', values: dropped, valid },
      schema_version: { kind: 'integer', values: new Int32Array(n), valid: new Uint8Array(n) },
      resource_attributes: { kind: 'string', values: resource },
      resource_dropped_attributes_count: { kind: 'integer', values: new Int32Array(n), valid },
      resource_schema_url: { kind: 'string', values: none },
      scope_name: { kind: 'string', values: scopeName },
      scope_version: { kind: 'string', values: scopeVersion },
      scope_attributes: { kind: 'string', values: none },
      scope_dropped_attributes_count: { kind: 'integer', values: new Int32Array(n), valid },
      scope_schema_url: { kind: 'string', values: none },
    },
  };
}

const mb = (bytes: number) => `${(bytes / 1048576).toFixed(0)} MB`;
const pct = (sorted: number[], p: number) =>
  sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))]!;

async function generate(layout: InstanceLayout): Promise<void> {
  const started = performance.now();
  let generating = 0;
  const table = await DeltaTable.createOrOpen(layout.tableDir(DAY, 'logs'), SCHEMAS.logs, { fsync: false });
  try {
    // Two chunks in flight: the next one is generated while the Delta workers write.
    const inFlight: Promise<unknown>[] = [];
    for (let first = 0; first < ROWS; first += CHUNK) {
      const t0 = performance.now();
      const batch = logsChunk(first, Math.min(CHUNK, ROWS - first), ROWS);
      generating += performance.now() - t0;
      if (inFlight.length >= 2) await inFlight.shift();
      inFlight.push(table.append(batch, { transfer: true }));
    }
    await Promise.all(inFlight);
  } finally {
    await table.close();
    await closeDeltaWorkers();
  }
  const s = (performance.now() - started) / 1000;
  console.log(
    `generated ${ROWS} rows in ${s.toFixed(1)} s (${Math.round(ROWS / s)} rows/s; ${(generating / 1000).toFixed(1)} s making rows in JS)`,
  );
}

/** Generates the data in a child process, so that the query process's RSS is its own. */
function generateInChild(dir: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn(
      process.execPath,
      [...process.execArgv, fileURLToPath(import.meta.url), String(ROWS)],
      {
        env: { ...process.env, READ_BENCH_GENERATE_INTO: dir },
        stdio: 'inherit',
      },
    );
    child.on('error', reject);
    child.on('exit', (code) => (code === 0 ? resolve() : reject(new Error(`generator exited with ${code}`))));
  });
}

async function measure(layout: InstanceLayout): Promise<void> {
  const query = { severityGe: 17, bodyLike: 'X', maxRows: 100 };
  const m0 = process.memoryUsage();
  console.log(`before the queries: rss ${mb(m0.rss)}`);
  const lag = monitorEventLoopDelay({ resolution: 1 });
  lag.enable();
  const times: number[] = [];
  const busy: number[] = [];
  for (let i = 1; i <= REPS; i++) {
    const t0 = performance.now();
    const elu0 = performance.eventLoopUtilization();
    const rows = await readTable(layout, 'logs', query);
    busy.push(performance.eventLoopUtilization(elu0).active);
    times.push(performance.now() - t0);
    if (rows.length !== 100) throw new Error(`expected 100 rows, got ${rows.length}`);
    if (i % 10 === 0 || i === REPS) {
      const m = process.memoryUsage();
      console.log(`after ${i} queries: rss ${mb(m.rss)}, heap ${mb(m.heapUsed)}, external ${mb(m.external)}`);
    }
  }
  lag.disable();
  const sorted = [...times].sort((a, b) => a - b);
  const busySorted = [...busy].sort((a, b) => a - b);
  console.log(
    `readTable(logs, ${JSON.stringify(query)}) over ${ROWS} rows x ${REPS}: ` +
      `first ${times[0]!.toFixed(0)} ms, median ${pct(sorted, 0.5).toFixed(0)} ms, ` +
      `p95 ${pct(sorted, 0.95).toFixed(0)} ms, max ${sorted.at(-1)!.toFixed(0)} ms`,
  );
  console.log(
    `main-thread busy time per query: median ${pct(busySorted, 0.5).toFixed(1)} ms, max ${busySorted.at(-1)!.toFixed(1)} ms; ` +
      `longest event-loop delay ${(lag.max / 1e6).toFixed(1)} ms (includes waiting for a CPU on a shared machine)`,
  );

  // A query no file statistic can help: every row's body is searched.
  const t0 = performance.now();
  const none = await readTable(layout, 'logs', { bodyLike: 'no such text', maxRows: 100 });
  console.log(
    `full scan (body never matches, ${none.length} rows): ${(performance.now() - t0).toFixed(0)} ms`,
  );
}

async function main(): Promise<void> {
  const into = process.env.READ_BENCH_GENERATE_INTO;
  if (into) return generate(new InstanceLayout(into, 'bench'));
  const keep = process.env.READ_BENCH_DIR;
  const dir = keep ?? (await mkdtemp(join(tmpdir(), 'otelake-read-bench-')));
  const layout = new InstanceLayout(dir, 'bench');
  try {
    if (!keep || !existsSync(layout.tableDir(DAY, 'logs'))) await generateInChild(dir);
    await measure(layout);
  } finally {
    await closeReadWorkers();
    if (!keep) await rm(dir, { recursive: true, force: true });
  }
}

await main();
