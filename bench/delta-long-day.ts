// A long day of small appends: N appends of R log rows each into one Delta table with the
// pipeline's storage settings (auto-compaction, checkpoints). Then: time to open the table and
// read every row (polars scan of the live files) against the same rows after the seal
// (OPTIMIZE into one file + checkpoint + VACUUM). Prints append rate and latency, file count, log
// length, checkpoint size, the read ratio and peak RSS.
//
//   node bench/delta-long-day.ts [--appends 10000] [--rows 100] [--quick] [--keep]
//   (--quick = 500 appends; --keep leaves the table folder for inspection)

import { readdirSync, statSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { BatchBuilder, type ColumnBatch } from '../src/delta/batch.ts';
import { closeDeltaWorkers, DeltaTable } from '../src/delta/table.ts';
import { scanFiles } from '../src/read/scan.ts';
import { SCHEMAS } from '../src/schema/tables.ts';
import { defaultOptions, deltaOptions } from '../src/storage/options.ts';

const { values: args } = parseArgs({
  options: {
    appends: { type: 'string', default: '10000' },
    rows: { type: 'string', default: '100' },
    quick: { type: 'boolean', default: false },
    keep: { type: 'boolean', default: false },
  },
});
const APPENDS = args.quick ? 500 : Number(args.appends);
const ROWS = Number(args.rows);
const schema = SCHEMAS.logs;
const storage = defaultOptions().storage_config;

const SERVICES = ['checkout', 'cart', 'payments', 'search', 'frontend'];
const base = BigInt(Date.now()) * 1000n;

function batch(n: number, first: number): ColumnBatch {
  const b = new BatchBuilder(schema, n);
  for (let i = first; i < first + n; i++) {
    const sev = [9, 9, 9, 13, 17][i % 5]!;
    b.push({
      project_id: `project-${i % 3}`,
      event_ts: base + BigInt(i) * 10n,
      service_name: SERVICES[i % SERVICES.length],
      time_unix_nano: (base + BigInt(i) * 10n) * 1000n,
      observed_time_unix_nano: (base + BigInt(i) * 10n) * 1000n + 500n,
      severity_number: sev,
      severity_text: sev >= 17 ? 'ERROR' : sev >= 13 ? 'WARN' : 'INFO',
      body: `GET /api/v1/orders/${i % 9973} completed with status ${sev >= 17 ? 500 : 200} in ${i % 250} ms`,
      attributes: `{"http.method":"GET","http.status_code":${sev >= 17 ? 500 : 200},"user.id":"u-${i % 5000}"}`,
      trace_id: (i * 2654435761).toString(16).padStart(32, '0').slice(-32),
      span_id: (i * 40503).toString(16).padStart(16, '0').slice(-16),
      flags: 1n,
      scope_name: 'bench',
      resource_attributes: '{"host.name":"bench-host","service.version":"1.2.3"}',
    });
  }
  return b.finish();
}

const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const pct = (xs: number[], p: number): number =>
  [...xs].sort((a, b) => a - b)[Math.floor((xs.length - 1) * p)]!;
const mb = (bytes: number): string => `${(bytes / 1048576).toFixed(1)} MB`;

function dirBytes(dir: string): number {
  let n = 0;
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = join(dir, e.name);
    n += e.isDirectory() ? dirBytes(p) : statSync(p).size;
  }
  return n;
}

/** Open the table from its log and read every row of every column (median of `runs`). */
async function openAndRead(
  dir: string,
  runs = 3,
): Promise<{ openMs: number; readMs: number; rows: number; files: number }> {
  const opens: number[] = [];
  const reads: number[] = [];
  let rows = 0;
  let files = 0;
  for (let i = 0; i < runs; i++) {
    const t0 = performance.now();
    const t = await DeltaTable.open(dir);
    const t1 = performance.now();
    const paths = t.liveFilePaths();
    const df = scanFiles(
      'logs',
      paths.map((path, arrival) => ({ path, arrival })),
    ).collectSync();
    const t2 = performance.now();
    rows = df.height;
    files = paths.length;
    opens.push(t1 - t0);
    reads.push(t2 - t1);
  }
  return { openMs: median(opens), readMs: median(reads), rows, files };
}

function logStats(dir: string) {
  const names = readdirSync(join(dir, '_delta_log'));
  const checkpoints = names.filter((n) => n.endsWith('.checkpoint.parquet')).sort();
  const last = checkpoints.at(-1);
  return {
    commits: names.filter((n) => /^\d{20}\.json$/.test(n)).length,
    checkpoints: checkpoints.length,
    lastCheckpointBytes: last ? statSync(join(dir, '_delta_log', last)).size : 0,
  };
}

const root = await mkdtemp(join(tmpdir(), 'otelake-long-day-'));
const dir = join(root, 'logs');
let peakRss = process.memoryUsage.rss();
const sampler = setInterval(() => {
  peakRss = Math.max(peakRss, process.memoryUsage.rss());
}, 50);

try {
  console.log(
    `long day: ${APPENDS} appends x ${ROWS} rows; checkpointInterval ${storage.checkpoint_interval}, ` +
      `autoCompact minFiles ${storage.compact_min_files} smallFileRows ${storage.compact_small_file_rows}, zstd ${storage.zstd_level}`,
  );
  const table = await DeltaTable.createOrOpen(dir, schema, deltaOptions(storage));
  const latencies: number[] = [];
  let maxFiles = 0;
  let readerMs = 0;
  const t0 = performance.now();
  for (let i = 0; i < APPENDS; i++) {
    const b = batch(ROWS, i * ROWS);
    const s = performance.now();
    await table.append(b);
    latencies.push(performance.now() - s);
    maxFiles = Math.max(maxFiles, table.files.length);
    if ((i + 1) % 1000 === 0) {
      // A reader during the day (CLI viewer): open + read everything so far.
      const r0 = performance.now();
      const during = await openAndRead(dir, 1);
      readerMs += performance.now() - r0;
      const el = (performance.now() - t0 - readerMs) / 1000;
      console.log(
        `  ${i + 1} appends, ${((i + 1) / el) | 0}/s, files ${table.files.length}, version ${table.version}; ` +
          `reader: open ${during.openMs.toFixed(0)} ms + read ${during.rows} rows from ${during.files} files ` +
          `${during.readMs.toFixed(0)} ms`,
      );
    }
  }
  await table.close(); // waits for the background compaction and checkpoint
  const appendSec = (performance.now() - t0 - readerMs) / 1000;
  const appendPeakRss = peakRss;
  const totalRows = APPENDS * ROWS;
  const log = logStats(dir);
  console.log(
    `appends: ${(APPENDS / appendSec).toFixed(0)}/s, ${(totalRows / appendSec).toFixed(0)} rows/s; latency p50 ` +
      `${median(latencies).toFixed(1)} ms, p99 ${pct(latencies, 0.99).toFixed(1)} ms, max ${Math.max(...latencies).toFixed(0)} ms`,
  );
  console.log(
    `end of day: version ${table.version}, live files ${table.files.length} (max ${maxFiles}), ` +
      `${log.commits} commits, ${log.checkpoints} checkpoints (last ${mb(log.lastCheckpointBytes)}), ` +
      `commits to replay after it ${table.version % storage.checkpoint_interval}, table dir ${mb(dirBytes(dir))}, ` +
      `background errors ${table.backgroundErrors.length}`,
  );
  const day = await openAndRead(dir);
  if (day.rows !== totalRows) throw new Error(`read ${day.rows} rows, wrote ${totalRows}`);

  // Seal: compact to one file, checkpoint, vacuum with zero retention.
  const sealer = await DeltaTable.createOrOpen(dir, schema);
  const s0 = performance.now();
  const opt = await sealer.optimize({ targetFileRows: Number.MAX_SAFE_INTEGER });
  await sealer.checkpoint();
  const vac = await sealer.vacuum({ retentionMs: 0 });
  const cleaned = await sealer.cleanupLog({ retentionMs: 0 });
  await sealer.close();
  const sealMs = performance.now() - s0;
  const sealed = await openAndRead(dir);
  if (sealed.rows !== totalRows) throw new Error(`read ${sealed.rows} rows after the seal`);
  console.log(
    `seal: ${sealMs.toFixed(0)} ms (optimize removed ${opt?.removed ?? 0} files, vacuum deleted ${vac.deleted}, ` +
      `log cleanup deleted ${cleaned.deleted}), table dir ${mb(dirBytes(dir))}, log ${mb(dirBytes(join(dir, '_delta_log')))}`,
  );
  console.log(
    `open+read all ${totalRows} rows: long day ${day.files} files ${(day.openMs + day.readMs).toFixed(0)} ms ` +
      `(open ${day.openMs.toFixed(0)}, read ${day.readMs.toFixed(0)}); compacted ${sealed.files} file ` +
      `${(sealed.openMs + sealed.readMs).toFixed(0)} ms (open ${sealed.openMs.toFixed(0)}, read ${sealed.readMs.toFixed(0)}); ` +
      `ratio ${((day.openMs + day.readMs) / (sealed.openMs + sealed.readMs)).toFixed(2)}x`,
  );
  console.log(`peak RSS: appends ${mb(appendPeakRss)}, overall (incl. the reads) ${mb(peakRss)}`);
} finally {
  clearInterval(sampler);
  await closeDeltaWorkers();
  if (!args.keep) await rm(root, { recursive: true, force: true });
  else console.log(`kept ${root}`);
}
