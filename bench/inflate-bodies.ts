// Inflating gzip request bodies the way a decoder does, one body after another on each of two
// threads (the decode workers): Node's one-shot gunzipSync, as decoders did before, against the
// decoders' kept inflater (src/server/inflater.ts: one zlib context and one output buffer reused
// from body to body). Each run is its own process, started with the server's Node flags and malloc
// settings, so that its peak RSS (VmHWM) is its own. Prints, per run, the peak RSS, the CPU per
// body and the wall time per body on a thread; the modes alternate, round after round.
//
//   node bench/inflate-bodies.ts [--bodies 40000] [--threads 2] [--items 100] [--rounds 3]
//
// The bodies: 64 different requests of `--items` log records as JSON (bench/otlp-payloads.ts),
// gzipped at level 6 as the Collector does.

import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { isMainThread, parentPort, Worker, workerData } from 'node:worker_threads';
import * as zlib from 'node:zlib';
import { gunzipBufferSize } from '../src/server/body.ts';
import { KeptInflaters } from '../src/server/inflater.ts';
import { SERVER_ENV, SERVER_NODE_FLAGS } from '../src/server/node-flags.ts';
import { logsRequest } from './otlp-payloads.ts';

const MODES = ['one-shot', 'kept'] as const;
type Mode = (typeof MODES)[number];
const LIMIT = 64 * 1024 * 1024;

interface Job {
  mode: Mode;
  bodies: Uint8Array[];
  count: number;
}

/** Inflates `count` bodies, round robin, on this thread; the wall time per body in µs. */
function inflateAll({ mode, bodies, count }: Job): number {
  const kept = new KeptInflaters();
  const input = bodies.map((b) => Buffer.from(b));
  let check = 0;
  const start = performance.now();
  for (let i = 0; i < count; i++) {
    const body = input[i % input.length]!;
    const size = gunzipBufferSize(body, LIMIT)!;
    const out =
      mode === 'kept'
        ? kept.gunzip.inflate(body, size, LIMIT)
        : zlib.gunzipSync(body, { maxOutputLength: LIMIT, chunkSize: size });
    check += out[out.length >> 1]!; // the decoder reads the output, then drops it
  }
  if (check < 0) throw new Error('unreachable');
  return ((performance.now() - start) * 1000) / count;
}

function status(field: string): number {
  const line = readFileSync('/proc/self/status', 'utf8').match(new RegExp(`${field}:\\s+(\\d+)`));
  return Number(line![1]) / 1024;
}

/** One run: `threads` workers inflating `count` bodies each; prints one line. */
async function run(mode: Mode, threads: number, count: number, items: number): Promise<void> {
  const bodies: Uint8Array[] = [];
  for (let seed = 1; seed <= 64; seed++) {
    bodies.push(zlib.gzipSync(Buffer.from(JSON.stringify(logsRequest(items, seed))), { level: 6 }));
  }
  const inflated = zlib.gunzipSync(bodies[0]!).length;
  const cpu = process.cpuUsage();
  const perBody = await Promise.all(
    Array.from({ length: threads }, () => {
      const worker = new Worker(fileURLToPath(import.meta.url), { workerData: { mode, bodies, count } });
      return new Promise<number>((resolve, reject) => {
        worker.once('message', resolve);
        worker.once('error', reject);
      }).finally(() => worker.terminate());
    }),
  );
  const used = process.cpuUsage(cpu);
  const cpuPerBody = (used.user + used.system) / (threads * count);
  console.log(
    `${mode.padEnd(8)} peak RSS ${status('VmHWM').toFixed(0)} MiB, CPU ${cpuPerBody.toFixed(1)} µs a body, ` +
      `wall ${perBody.map((us) => us.toFixed(1)).join(' / ')} µs a body per thread ` +
      `(${threads} threads x ${count} bodies of ${bodies[0]!.length} bytes inflating to ${inflated})`,
  );
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      bodies: { type: 'string', default: '40000' },
      threads: { type: 'string', default: '2' },
      items: { type: 'string', default: '100' },
      rounds: { type: 'string', default: '3' },
      mode: { type: 'string' },
    },
  });
  const [threads, count, items] = [values.threads, values.bodies, values.items].map(Number) as [
    number,
    number,
    number,
  ];
  if (values.mode !== undefined) return run(values.mode as Mode, threads, count, items);
  for (let round = 1; round <= Number(values.rounds); round++) {
    for (const mode of MODES) {
      const args = [
        ...SERVER_NODE_FLAGS,
        fileURLToPath(import.meta.url),
        ...process.argv.slice(2),
        '--mode',
        mode,
      ];
      const child = spawnSync(process.execPath, args, {
        env: { ...process.env, ...SERVER_ENV },
        stdio: ['ignore', 'inherit', 'inherit'],
      });
      if (child.status !== 0) throw new Error(`the ${mode} run failed (${child.status})`);
    }
  }
}

if (isMainThread) await main();
else parentPort!.postMessage(inflateAll(workerData as Job));
