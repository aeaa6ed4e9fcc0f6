// Library ingest benchmark: N log rows through Logger.ingestLog until committed to the Delta
// table, with the default batch settings and with large batches. Prints rows/s, peak RSS and the
// event-loop delay seen during ingest (Parquet writing must not stall the loop).
// Usage: node bench/ingest-library.ts [rows=1000000] [mode=both|default|large]
//        (INGEST_CHUNK=n: rows ingested per await, default 1000)

import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { DeltaTable } from '../src/delta/table.ts';
import { Logger, type PartialOptions } from '../src/index.ts';

const N = Number(process.argv[2] ?? 1_000_000);
// The delay histogram records whole timer intervals: the delay is what exceeds the resolution.
const LOOP_RESOLUTION_MS = 5;
const delayMs = (ns: number) => Math.max(0, ns / 1e6 - LOOP_RESOLUTION_MS).toFixed(1);
const mode = process.argv[3] ?? 'both';

const SERVICES = ['checkout', 'cart', 'payments', 'search', 'frontend'];
const SEVERITIES = [9, 9, 9, 9, 13, 17];
const base = BigInt(Date.now()) * 1_000_000n;

// String fields come from a pool of distinct values built up front, so the figures measure
// otelake rather than the generator's string building.
const POOL = 10_007;
const pool = Array.from({ length: POOL }, (_, i) => {
  const sev = SEVERITIES[i % SEVERITIES.length]!;
  const status = sev >= 17 ? 500 : 200;
  return {
    service_name: SERVICES[i % SERVICES.length],
    severity_number: sev,
    severity_text: sev >= 17 ? 'ERROR' : sev >= 13 ? 'WARN' : 'INFO',
    body: `GET /api/v1/orders/${i} completed with status ${status} in ${i % 250} ms`,
    attributes: `{"http.method":"GET","http.route":"/api/v1/orders/:id","http.status_code":${status},"user.id":"u-${i % 5000}"}`,
    trace_id: (i * 2654435761).toString(16).padStart(32, '0').slice(-32),
    span_id: (i * 40503).toString(16).padStart(16, '0').slice(-16),
  };
});

function row(i: number) {
  const p = pool[i % POOL]!;
  const t = base + BigInt(i) * 1000n;
  return {
    project_id: 'bench',
    service_name: p.service_name,
    time_unix_nano: t,
    observed_time_unix_nano: t + 500n,
    severity_number: p.severity_number,
    severity_text: p.severity_text,
    body: p.body,
    attributes: p.attributes,
    trace_id: p.trace_id,
    span_id: p.span_id,
    scope_name: 'bench',
  };
}

async function run(label: string, options: PartialOptions): Promise<void> {
  const dir = await mkdtemp(join(tmpdir(), 'otelake-bench-'));
  global.gc?.();
  let peakRss = process.memoryUsage.rss();
  const sampler = setInterval(() => {
    peakRss = Math.max(peakRss, process.memoryUsage.rss());
  }, 25);
  const loop = monitorEventLoopDelay({ resolution: LOOP_RESOLUTION_MS });
  try {
    const logger = await Logger.open({
      instanceDir: dir,
      instanceId: 'bench',
      options,
      handleSignals: false,
    });
    loop.enable();
    const t0 = performance.now();
    const CHUNK = Number(process.env.INGEST_CHUNK ?? 1000);
    let refused = 0;
    for (let i = 0; i < N; i += CHUNK) {
      const pending: Promise<[boolean, string | null]>[] = [];
      for (let j = i; j < Math.min(N, i + CHUNK); j++) pending.push(logger.ingestLog(row(j)));
      for (const [ok] of await Promise.all(pending)) if (!ok) refused++;
    }
    const tQueued = performance.now();
    await logger.stop({ flush: 'auto' });
    const t1 = performance.now();
    loop.disable();
    const day = new Date().toISOString().slice(0, 10);
    const table = await DeltaTable.open(logger.layout.tableDir(day, 'logs'));
    const committed = table.rowCount();
    const secs = (t1 - t0) / 1000;
    console.log(
      `${label}: ${N} rows, ${committed} committed, ${refused} refused in ${secs.toFixed(2)} s -> ` +
        `${Math.round(committed / secs).toLocaleString('en-US')} rows/s ` +
        `(queued in ${((tQueued - t0) / 1000).toFixed(2)} s); files ${table.files.length}, version ${table.version}; ` +
        `peak RSS ${(peakRss / 2 ** 20).toFixed(0)} MiB; event-loop delay p50 ${delayMs(loop.percentile(50))} ms, ` +
        `p99 ${delayMs(loop.percentile(99))} ms, max ${delayMs(loop.max)} ms`,
    );
    if (committed !== N) process.exitCode = 1;
  } finally {
    clearInterval(sampler);
    await rm(dir, { recursive: true, force: true });
  }
}

if (mode === 'both' || mode === 'default') await run('defaults (max_batch_rows 1000)', {});
if (mode === 'both' || mode === 'large') {
  await run('large batches (max_batch_rows 50000)', {
    aggregator_config: { max_batch_rows: 50_000, min_batch_rows: 1000 },
  });
}
