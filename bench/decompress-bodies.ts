// Decompressing request bodies the way a decoder does, one body after another on each of two
// threads (the decode workers): Node's one-shot call (gunzipSync, zstdDecompressSync), as decoders
// did before, against the decoders' kept decompressor (src/server/kept-decompressors.ts: one
// context and one output buffer reused from body to body). Each run is its own process, started
// with the server's Node flags and malloc settings, so that its peak RSS (VmHWM) is its own.
// Prints, per run, the peak RSS, the CPU per body and the wall time per body on a thread; the
// modes alternate, round after round.
//
//   node bench/decompress-bodies.ts [--coding gzip|zstd] [--bodies 40000] [--threads 2] [--items 100]
//                                [--rounds 3]
//
// The bodies: 64 different requests of `--items` log records as JSON (bench/otlp-payloads.ts),
// compressed as the Collector does (gzip at level 6, zstd at its default level).

import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { isMainThread, parentPort, Worker, workerData } from 'node:worker_threads';
import * as zlib from 'node:zlib';
import { gunzipBufferSize } from '../src/server/body.ts';
import { KeptDecompressors } from '../src/server/kept-decompressors.ts';
import { SERVER_ENV, SERVER_NODE_FLAGS } from '../src/server/node-flags.ts';
import { logsRequest } from './otlp-payloads.ts';

const MODES = ['one-shot', 'kept'] as const;
type Mode = (typeof MODES)[number];
const LIMIT = 64 * 1024 * 1024;

type Coding = 'gzip' | 'zstd';
const zstd = zlib as unknown as {
  zstdCompressSync: (b: Buffer) => Buffer;
  zstdDecompressSync: (b: Buffer, options: object) => Buffer;
};
const COMPRESS: Record<Coding, (b: Buffer) => Buffer> = {
  gzip: (b) => zlib.gzipSync(b, { level: 6 }),
  zstd: (b) => zstd.zstdCompressSync(b),
};

interface Job {
  mode: Mode;
  coding: Coding;
  bodies: Uint8Array[];
  count: number;
}

/** Decompresses `count` bodies, round robin, on this thread; the wall time per body in µs. */
function decompressAll({ mode, coding, bodies, count }: Job): number {
  const kept = new KeptDecompressors();
  const input = bodies.map((b) => Buffer.from(b));
  let check = 0;
  const start = performance.now();
  for (let i = 0; i < count; i++) {
    const body = input[i % input.length]!;
    let out: Buffer;
    if (coding === 'zstd') {
      out =
        mode === 'kept'
          ? kept.zstd!.transform(body, body.length * 4, LIMIT)
          : zstd.zstdDecompressSync(body, { maxOutputLength: LIMIT });
    } else {
      const size = gunzipBufferSize(body, LIMIT)!;
      out =
        mode === 'kept'
          ? kept.gunzip.transform(body, size, LIMIT)
          : zlib.gunzipSync(body, { maxOutputLength: LIMIT, chunkSize: size });
    }
    check += out[out.length >> 1]!; // the decoder reads the output, then drops it
  }
  if (check < 0) throw new Error('unreachable');
  return ((performance.now() - start) * 1000) / count;
}

function status(field: string): number {
  const line = readFileSync('/proc/self/status', 'utf8').match(new RegExp(`${field}:\\s+(\\d+)`));
  return Number(line![1]) / 1024;
}

/** One run: `threads` workers decompressing `count` bodies each; prints one line. */
async function run(mode: Mode, coding: Coding, threads: number, count: number, items: number): Promise<void> {
  const plain = Array.from({ length: 64 }, (_, i) => Buffer.from(JSON.stringify(logsRequest(items, i + 1))));
  const bodies = plain.map(COMPRESS[coding]);
  const cpu = process.cpuUsage();
  const perBody = await Promise.all(
    Array.from({ length: threads }, () => {
      const worker = new Worker(fileURLToPath(import.meta.url), {
        workerData: { mode, coding, bodies, count },
      });
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
      `(${threads} threads x ${count} ${coding} bodies of ${bodies[0]!.length} bytes, ${plain[0]!.length} decompressed)`,
  );
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      bodies: { type: 'string', default: '40000' },
      threads: { type: 'string', default: '2' },
      items: { type: 'string', default: '100' },
      rounds: { type: 'string', default: '3' },
      coding: { type: 'string', default: 'gzip' },
      mode: { type: 'string' },
    },
  });
  const [threads, count, items] = [values.threads, values.bodies, values.items].map(Number) as [
    number,
    number,
    number,
  ];
  const coding = values.coding as Coding;
  if (!(coding in COMPRESS)) throw new Error('--coding: gzip or zstd');
  if (values.mode !== undefined) return run(values.mode as Mode, coding, threads, count, items);
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
else parentPort!.postMessage(decompressAll(workerData as Job));
