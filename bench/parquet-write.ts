// The Parquet worker's step of the server, per signal: a file per table from the batches of the
// requests one writer pacing interval gathers (the decoder's packed per-request batches joined,
// src/delta/batch.ts joinBatches into an Arena kept from file to file as the worker keeps one,
// checkBatch, then src/delta/parquet-writer.ts writeParquetFile). Prints CPU milliseconds per file
// set (one file of each of the signal's tables), the median over blocks, and the files' bytes.
//
//   node bench/parquet-write.ts [--requests 90] [--blocks 30] [--files 10] [--signal S] [--src DIR]
//
// The batches come from bench requests of 100 items (bench/otlp-payloads.ts) decoded by this
// checkout's decoder; --requests is how many make one file (90: 9,000 log records, what a file
// holds at 36,000 items/s, one file every 250 ms). --src DIR also loads another checkout's writer
// into this process: the two write the same batches in alternating blocks of --files file sets
// each, the order swapped every block, and the B/A ratio of each pair of blocks is printed (one
// process on a shared machine compares more finely than runs side by side; the same code against
// a copy of itself gave medians of 0.96-1.06 over 30 blocks):
//   mkdir -p .tmp/old && git archive <old commit> src package.json | tar -x -C .tmp/old
//   node bench/parquet-write.ts --src .tmp/old/src   # A = .tmp/old, B = this checkout

import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import type { Signal } from '../src/otlp/index.ts';
import type { DecodeResult } from '../src/server/decode.ts';
import { defaultOptions } from '../src/storage/options.ts';
import { decoderUnderTest } from './decoder-under-test.ts';
import { hexIdsToBytes, logsRequest, metricsRequest, tracesRequest } from './otlp-payloads.ts';

const { values: args } = parseArgs({
  options: {
    requests: { type: 'string', default: '90' },
    blocks: { type: 'string', default: '30' },
    files: { type: 'string', default: '10' },
    signal: { type: 'string' },
    src: { type: 'string' },
  },
});
const REQUESTS = Number(args.requests);
const BLOCKS = Number(args.blocks);
const FILES = Number(args.files);
const SIGNALS: readonly Signal[] = ['traces', 'logs', 'metrics'];

// A collection before each block, so that one block's garbage is not the next one's cost.
setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as () => void;

const { codec, decoder } = await decoderUnderTest(undefined);
const { storage_config: storage } = defaultOptions();

/** Each table's packed batches of `REQUESTS` protobuf requests of the signal (32 bodies cycled). */
function batchesOf(signal: Signal): Map<string, unknown[]> {
  const make = { traces: tracesRequest, logs: logsRequest, metrics: metricsRequest }[signal];
  const type = codec!.requestType(signal);
  const bodies = Array.from({ length: 32 }, (_, i) =>
    type.encode(type.fromObject(hexIdsToBytes(make(100, i + 1)) as Record<string, unknown>)).finish(),
  );
  const tables = new Map<string, unknown[]>();
  for (let i = 0; i < REQUESTS; i++) {
    const r: DecodeResult = decoder.decode({
      signal,
      format: 'protobuf',
      body: bodies[i % bodies.length]!,
      codings: [],
      bodyLimit: 64 << 20,
      headerProjectId: undefined,
      defaultProjectId: 'bench',
    });
    if (!r.ok) throw new Error(`${signal}: ${r.message}`);
    for (const [table, t] of Object.entries(r.tables)) {
      if (!tables.has(table)) tables.set(table, []);
      tables.get(table)!.push(t!.batch);
    }
  }
  return tables;
}

/** A checkout's writer: its own batch join, writer and schemas. */
async function writerOf(src: string) {
  const dir = `${resolve(src)}/`;
  const batch = (await import(`${dir}delta/batch.ts`)) as typeof import('../src/delta/batch.ts');
  const writer = (await import(
    `${dir}delta/parquet-writer.ts`
  )) as typeof import('../src/delta/parquet-writer.ts');
  const tables = (await import(`${dir}schema/tables.ts`)) as typeof import('../src/schema/tables.ts');
  return { src: dir, batch, writer, tables };
}

const writers = [await writerOf(new URL('../src/', import.meta.url).pathname)];
if (args.src !== undefined) writers.unshift(await writerOf(args.src));
const out = mkdtempSync(join(tmpdir(), 'otelake-parquet-write-'));
let seq = 0;

/** Each writer's join buffers, kept from file to file, as the Parquet worker keeps its own. */
const arenas = new Map<string, InstanceType<typeof import('../src/delta/batch.ts').Arena>>();
function arenaOf(w: (typeof writers)[number]) {
  if (!arenas.has(w.src)) arenas.set(w.src, new w.batch.Arena());
  return arenas.get(w.src);
}

/** Writes one file per table; returns their bytes. */
function fileSet(w: (typeof writers)[number], tables: Map<string, unknown[]>): number {
  let bytes = 0;
  for (const [table, parts] of tables) {
    const columns = w.tables.SCHEMAS[table as keyof typeof w.tables.SCHEMAS].columns;
    const batch = w.batch.joinBatches(
      parts as Parameters<typeof w.batch.joinBatches>[0],
      columns.map((c) => c.name),
      arenaOf(w),
    );
    // The worker checks the joined batch against the table's columns (before that, the event loop
    // checked each part: a checkout without checkBatch in batch.ts).
    if ('checkBatch' in w.batch) w.batch.checkBatch(table, columns, batch);
    const path = join(out, `${seq++}.parquet`);
    w.writer.writeParquetFile(path, columns, batch, { zstdLevel: storage.zstd_level, rowGroupSize: 1 << 20 });
    bytes += statSync(path).size;
    rmSync(path);
  }
  return bytes;
}

/** "A " and "B " when two writers are compared. */
const label = (i: number) => (writers.length === 2 ? `${'AB'[i]} ` : '');
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[xs.length >> 1]!;
console.log(
  `node ${process.version}; ${REQUESTS} requests of 100 items a file set, ${BLOCKS} blocks of ${FILES} file sets` +
    writers.map((w, i) => `; ${label(i)}${w.src}`).join(''),
);
try {
  for (const signal of SIGNALS) {
    if ((args.signal ?? signal) !== signal) continue;
    const tables = batchesOf(signal);
    const bytes = writers.map((w) => fileSet(w, tables)); // and a warm-up
    const cpu: number[][] = writers.map(() => []);
    for (let b = 0; b < BLOCKS; b++) {
      const order = writers.map((_, i) => i);
      if (b % 2 === 1) order.reverse();
      for (const i of order) {
        gc();
        const t = process.cpuUsage();
        for (let f = 0; f < FILES; f++) fileSet(writers[i]!, tables);
        const d = process.cpuUsage(t);
        cpu[i]!.push((d.user + d.system) / 1000 / FILES);
      }
    }
    const line = writers.map(
      (_, i) =>
        `${label(i)}${median(cpu[i]!).toFixed(1)} ms CPU a file set (${Math.min(...cpu[i]!).toFixed(1)}-${Math.max(...cpu[i]!).toFixed(1)}), ${bytes[i]} bytes`,
    );
    if (writers.length === 2) {
      const ratios = cpu[1]!.map((x, k) => x / cpu[0]![k]!);
      line.push(`B/A ${median(ratios).toFixed(2)} (${ratios.map((r) => r.toFixed(2)).join(' ')})`);
    }
    console.log(`${signal.padEnd(8)} ${REQUESTS * 100} items: ${line.join('; ')}`);
  }
} finally {
  rmSync(out, { recursive: true, force: true });
}
