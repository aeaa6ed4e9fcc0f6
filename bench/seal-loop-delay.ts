// How long a day's seal holds the event loop of the process that ingests: a day of log rows
// ingested through the library as a live day gets them (small files, a commit each, checkpoints),
// then sealed (OPTIMIZE, VACUUM, checkpoint, log cleanup) in a fresh process per run, with the
// checkpoints decoded in the Parquet worker (as a Logger's process does) or in the event loop's
// thread, alternately. Prints the event loop's longest delay during each seal, and its time.
//
// Usage: node bench/seal-loop-delay.ts [--rows 500000] [--runs 3]

import { spawnSync } from 'node:child_process';
import { cp, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { decodeCheckpointsOffThread } from '../src/delta/table.ts';
import { Logger } from '../src/index.ts';
import { sealDay } from '../src/shipping/phases.ts';
import { InstanceLayout } from '../src/storage/layout.ts';

const DAY = '2026-11-20';
const DAY_MS = Date.parse(`${DAY}T12:00:00Z`);
const INSTANCE = 'seal';

const { values } = parseArgs({
  options: {
    rows: { type: 'string', default: '500000' },
    runs: { type: 'string', default: '3' },
    seal: { type: 'string' }, // internal: seal the day in <dir>, 'off' or 'in' thread
    dir: { type: 'string' },
  },
});

if (values.seal !== undefined) await sealOnce(values.dir!, values.seal === 'off');
else await main(Number(values.rows), Number(values.runs));

async function main(rows: number, runs: number): Promise<void> {
  const base = await mkdtemp(join(tmpdir(), 'otelake-seal-loop-'));
  try {
    const day = join(base, 'filled');
    await fill(day, rows);
    console.log(`a day of ${rows} log rows, ingested 250 a call every 20 ms; ${runs} seals each way`);
    console.log('| checkpoints decoded | event loop delay max, ms | seal ms |');
    console.log('|---|---|---|');
    for (let i = 0; i < runs; i++) {
      for (const where of ['off', 'in'] as const) {
        const copy = join(base, `${where}-${i}`);
        await cp(day, copy, { recursive: true });
        const me = fileURLToPath(import.meta.url);
        const out = spawnSync(process.execPath, [me, '--seal', where, '--dir', copy], { encoding: 'utf8' });
        if (out.status !== 0) throw new Error(out.stderr);
        const r = JSON.parse(out.stdout) as { delayMaxMs: number; sealMs: number };
        const label = where === 'off' ? 'in the Parquet worker' : "in the event loop's thread";
        console.log(`| ${label} | ${r.delayMaxMs} | ${r.sealMs} |`);
        await rm(copy, { recursive: true, force: true });
      }
    }
  } finally {
    await rm(base, { recursive: true, force: true });
  }
}

/** Ingests `rows` log rows into DAY as a live day gets them: small calls, a file every few hundred ms. */
async function fill(dir: string, rows: number): Promise<void> {
  const logger = await Logger.open({
    instanceDir: dir,
    instanceId: INSTANCE,
    clock: () => DAY_MS,
    handleSignals: false,
    options: { shipper_enabled: false },
  });
  for (let i = 0; i < rows; i += 250) {
    await new Promise((r) => setTimeout(r, 20));
    const batch = Array.from({ length: 250 }, (_, k) => ({
      project_id: 'p',
      service_name: `svc-${k % 7}`,
      time_unix_nano: BigInt(DAY_MS) * 1_000_000n + BigInt(i + k),
      severity_number: 9,
      body: `request ${i + k} served in ${k % 97} ms`,
      attributes: JSON.stringify({ 'http.route': `/api/v${k % 3}/items`, 'http.status_code': 200 }),
    }));
    const r = await logger.ingestRows('logs', batch);
    if (r.accepted !== batch.length) throw new Error(JSON.stringify(r));
  }
  await logger.stop();
}

async function sealOnce(dir: string, offThread: boolean): Promise<void> {
  decodeCheckpointsOffThread(offThread);
  const delay = monitorEventLoopDelay({ resolution: 5 });
  delay.enable();
  const started = performance.now();
  await sealDay(new InstanceLayout(dir, INSTANCE), DAY, {});
  const sealMs = Math.round(performance.now() - started);
  delay.disable();
  process.stdout.write(JSON.stringify({ delayMaxMs: Math.round(delay.max / 1e6), sealMs }));
  process.exit(0); // the Parquet worker's idle time aside
}
