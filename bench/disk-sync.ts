// Synced writes on a disk, as the write-ahead log makes them (durability "wal"): each writer opens a
// file it has written ahead with O_DSYNC and writes --kib at a time into it, one write every
// --interval-ms, for --seconds. Prints each writer's latency percentiles, its writes over
// --slow-ms and when they came, and how many of those came at the same time in every writer.
//
// An acknowledged request waits for the synced write that holds its rows, so the disk's slowest
// writes are a floor under the server's request latency. Writers in separate threads, to separate
// files, that stall at the same moments show a stall of the disk (or of the filesystem's journal
// commits, or the host under a virtual machine), not of one file or one thread: nothing in the
// server can shorten it short of not syncing (durability "memory").
//
// Usage: node bench/disk-sync.ts [--dir DIR] [--writers 2] [--seconds 15] [--kib 35]
//          [--interval-ms 3] [--slow-ms 10]
// --dir: where the files go (default: the system's temporary directory); give the data directory's
// disk to measure that one.

import { closeSync, constants, fsyncSync, mkdtempSync, openSync, rmSync, writeSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { parseArgs } from 'node:util';
import { isMainThread, parentPort, Worker, workerData } from 'node:worker_threads';

interface WriterTask {
  path: string;
  startAt: number;
  seconds: number;
  bytes: number;
  intervalMs: number;
  slowMs: number;
}

interface WriterResult {
  latencies: number[];
  /** Start (ms since startAt) and duration of each write over slowMs. */
  slow: [number, number][];
}

/** Bytes of each writer's file, written (and synced) before the clock starts. */
const FILE_BYTES = 64 * 1024 * 1024;

if (!isMainThread) {
  parentPort!.postMessage(runWriter(workerData as WriterTask));
} else {
  await main();
}

function runWriter(task: WriterTask): WriterResult {
  const chunk = Buffer.alloc(1024 * 1024);
  let fd = openSync(task.path, 'w');
  for (let at = 0; at < FILE_BYTES; at += chunk.length) writeSync(fd, chunk, 0, chunk.length, at);
  // Synced, as the log's spares are: else the kernel would write these pages back during the run.
  fsyncSync(fd);
  closeSync(fd);
  fd = openSync(task.path, constants.O_WRONLY | constants.O_DSYNC);
  const record = Buffer.alloc(task.bytes, 0x5a);
  const latencies: number[] = [];
  const slow: [number, number][] = [];
  const clock = () => performance.timeOrigin + performance.now();
  while (clock() < task.startAt);
  const end = task.startAt + task.seconds * 1000;
  let position = 0;
  for (let next = task.startAt; clock() < end; next += task.intervalMs) {
    // Paced by spinning: a timer's wake-up would add its own delay to the thread's.
    while (clock() < next);
    const t = clock();
    // Behind (a slow write, or a late start): the next write is paced from now, not in a burst.
    if (t - next > task.intervalMs) next = t;
    writeSync(fd, record, 0, record.length, position);
    const ms = clock() - t;
    latencies.push(ms);
    if (ms > task.slowMs) slow.push([t - task.startAt, ms]);
    position = (position + record.length) % (FILE_BYTES - record.length);
  }
  closeSync(fd);
  return { latencies, slow };
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      dir: { type: 'string' },
      writers: { type: 'string', default: '2' },
      seconds: { type: 'string', default: '15' },
      kib: { type: 'string', default: '35' },
      'interval-ms': { type: 'string', default: '3' },
      'slow-ms': { type: 'string', default: '10' },
    },
  });
  const writers = Number(values.writers);
  const slowMs = Number(values['slow-ms']);
  const dir = mkdtempSync(join(values.dir ?? tmpdir(), 'otelake-disk-sync-'));
  try {
    // Every writer starts writing at the same moment, after its file is written ahead.
    const startAt = performance.timeOrigin + performance.now() + 3000;
    const results = await Promise.all(
      Array.from({ length: writers }, (_, i) => {
        const task: WriterTask = {
          path: join(dir, `writer-${i}`),
          startAt,
          seconds: Number(values.seconds),
          bytes: Number(values.kib) * 1024,
          intervalMs: Number(values['interval-ms']),
          slowMs,
        };
        const worker = new Worker(new URL(import.meta.url), { workerData: task });
        return new Promise<WriterResult>((resolve, reject) => {
          worker.once('message', resolve);
          worker.once('error', reject);
        });
      }),
    );
    console.log(
      `${writers} writers, ${values.kib} KiB synced (O_DSYNC) every ${values['interval-ms']} ms each, ${values.seconds} s, in ${dir}`,
    );
    console.log('| writer | writes | p50 ms | p99 ms | p99.9 ms | max ms | writes over slow-ms: at s (ms) |');
    console.log('|---|---|---|---|---|---|---|');
    results.forEach((r, i) => {
      const sorted = r.latencies.toSorted((a, b) => a - b);
      const q = (p: number) => sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))]!.toFixed(2);
      const slow = r.slow.map(([at, ms]) => `${(at / 1000).toFixed(2)} (${ms.toFixed(1)})`).join(', ');
      console.log(
        `| ${i} | ${sorted.length} | ${q(0.5)} | ${q(0.99)} | ${q(0.999)} | ${sorted.at(-1)!.toFixed(2)} | ${r.slow.length}: ${slow} |`,
      );
    });
    if (writers > 1) {
      // A stall of the disk: a slow write of the first writer that a slow write of every other one overlaps.
      const overlaps = (a: [number, number], b: [number, number]) => a[0] < b[0] + b[1] && b[0] < a[0] + a[1];
      const others = results.slice(1);
      const shared = results[0]!.slow.filter((w) => others.every((r) => r.slow.some((o) => overlaps(w, o))));
      console.log(
        `slow writes of writer 0 that a slow write of every other writer overlaps: ${shared.length} of ${results[0]!.slow.length}`,
      );
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
