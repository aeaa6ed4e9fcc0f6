// The decode step of the server, per signal and encoding: a request body of 100 items mapped into
// column values, each row validated and normalized into its table's column builder, one packed
// batch per table (src/server/decode.ts RequestDecoder, on this thread, bodies uncompressed).
// Prints µs per request (median, p10-p90) and CPU seconds per 1M items (user + system of the
// whole process over the measured requests, GC threads included).
//
//   node bench/otlp-decode-map.ts [--requests N] [--items 100] [--signal S] [--format F] [--src DIR] [--json FILE]
//
// --signal (traces, logs, metrics) and --format (protobuf, json) run only those cases.
// --src DIR runs the decoder of another checkout's src/ (e.g. from before issue 19, when protobuf
// logs and traces and JSON traces were read from their bytes and JSON logs and all metrics went
// through JSON.parse or protobufjs' trees); --json FILE appends one JSON line per case. A against
// B, interleaved (the machine is shared: farm-bench pairs the runs, A B A B...):
//   mkdir -p .tmp/old && git archive <old commit> src proto | tar -x -C .tmp/old
//   farm-bench -n 7 --timeout 900 \
//     --vs "sh -c 'exec node bench/otlp-decode-map.ts --src .tmp/old/src --json .tmp/b.jsonl >/dev/null'" \
//     -- sh -c 'exec node bench/otlp-decode-map.ts --json .tmp/a.jsonl >/dev/null'
//   node bench/otlp-decode-map.ts --compare .tmp/a.jsonl .tmp/b.jsonl   # medians, ranges, A/B
// --vs DIR compares in one process instead, finer than runs side by side when the machine's speed
// swings within minutes: A = DIR's decoder, B = this checkout's, each case in alternating blocks of
// --block requests (the order swapped every block), and the B/A CPU ratio of each pair of blocks
// (median and range over --blocks pairs):
//   node bench/otlp-decode-map.ts --vs .tmp/old/src [--blocks 20] [--block 200]

import { appendFileSync, readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { parseArgs } from 'node:util';
import type { Signal } from '../src/otlp/index.ts';
import type { DecodeResult, DecodeTask } from '../src/server/decode.ts';
import { decoderUnderTest } from './decoder-under-test.ts';
import { hexIdsToBytes, logsRequest, metricsRequest, tracesRequest } from './otlp-payloads.ts';

const { values: args } = parseArgs({
  options: {
    requests: { type: 'string', default: '2000' },
    items: { type: 'string', default: '100' },
    signal: { type: 'string' },
    format: { type: 'string' },
    src: { type: 'string' },
    json: { type: 'string' },
    compare: { type: 'boolean', default: false },
    vs: { type: 'string' },
    blocks: { type: 'string', default: '20' },
    block: { type: 'string', default: '200' },
  },
  allowPositionals: true,
});

interface CaseResult {
  case: string;
  bytes: number;
  usMedian: number;
  usP10: number;
  usP90: number;
  cpuSecondsPer1M: number;
}

if (args.compare) {
  compare(process.argv.filter((a) => a.endsWith('.jsonl')));
  process.exit(0);
}

const REQUESTS = Number(args.requests);
const ITEMS = Number(args.items);
const BODIES = 50; // distinct bodies, cycled
const SIGNALS: readonly Signal[] = ['traces', 'logs', 'metrics'];
const ITEM_TABLES: Record<Signal, readonly string[]> = {
  traces: ['spans'],
  logs: ['logs'],
  metrics: ['metrics_points', 'metrics_hist'],
};

const { codec, srcDir, decoder } = await decoderUnderTest(args.src);

function bodies(signal: Signal, format: 'json' | 'protobuf'): Uint8Array[] {
  const make = { traces: tracesRequest, logs: logsRequest, metrics: metricsRequest }[signal];
  const out: Uint8Array[] = [];
  for (let i = 0; i < BODIES; i++) {
    const tree = make(ITEMS, i + 1);
    if (format === 'json') out.push(Buffer.from(JSON.stringify(tree)));
    else {
      const type = codec!.requestType(signal);
      out.push(type.encode(type.fromObject(hexIdsToBytes(tree) as Record<string, unknown>)).finish());
    }
  }
  return out;
}

function decode(
  signal: Signal,
  format: 'json' | 'protobuf',
  body: Uint8Array,
  by: { decode(task: DecodeTask): DecodeResult } = decoder,
): void {
  const task: DecodeTask = {
    signal,
    format,
    body,
    codings: [],
    bodyLimit: 64 << 20,
    headerProjectId: undefined,
    defaultProjectId: 'bench',
  };
  const r: DecodeResult = by.decode(task);
  if (!r.ok) throw new Error(`${signal} ${format}: ${r.message}`);
  let rows = 0;
  for (const table of ITEM_TABLES[signal])
    rows += r.tables[table as keyof typeof r.tables]?.batch.numRows ?? 0;
  if (rows !== ITEMS) throw new Error(`${signal} ${format}: ${rows} rows, expected ${ITEMS}`);
}

function run(signal: Signal, format: 'json' | 'protobuf'): CaseResult {
  const list = bodies(signal, format);
  const bytes = list.reduce((a, b) => a + b.length, 0) / list.length;
  for (let i = 0; i < 300; i++) decode(signal, format, list[i % list.length]!); // warm up
  const samples = new Float64Array(REQUESTS);
  const cpu = process.cpuUsage();
  for (let i = 0; i < REQUESTS; i++) {
    const t = performance.now();
    decode(signal, format, list[i % list.length]!);
    samples[i] = performance.now() - t;
  }
  const used = process.cpuUsage(cpu);
  samples.sort();
  const at = (p: number) => samples[Math.min(REQUESTS - 1, Math.floor(REQUESTS * p))]! * 1000;
  return {
    case: `${signal} ${format}`,
    bytes,
    usMedian: at(0.5),
    usP10: at(0.1),
    usP90: at(0.9),
    cpuSecondsPer1M: (used.user + used.system) / 1e6 / ((REQUESTS * ITEMS) / 1e6),
  };
}

if (args.vs !== undefined) {
  await versus(args.vs);
  process.exit(0);
}

console.log(
  `node ${process.version}, ${srcDir}, ${REQUESTS} requests of ${ITEMS} items a case (shared machine: figures are indicative)`,
);
console.log('case                 KiB/req   µs/req (p10-p90)    CPU s/1M items');
for (const signal of SIGNALS) {
  for (const format of ['protobuf', 'json'] as const) {
    if ((args.signal ?? signal) !== signal || (args.format ?? format) !== format) continue;
    const r = run(signal, format);
    console.log(
      `${r.case.padEnd(18)} ${(r.bytes / 1024).toFixed(1).padStart(8)}  ${r.usMedian.toFixed(0).padStart(6)} (${r.usP10.toFixed(0)}-${r.usP90.toFixed(0)})`.padEnd(
        48,
      ) + r.cpuSecondsPer1M.toFixed(2).padStart(8),
    );
    if (args.json !== undefined) appendFileSync(args.json, `${JSON.stringify(r)}\n`);
  }
}
console.log(`peak RSS ${Math.round(process.resourceUsage().maxRSS / 1024)} MiB`);

/** --vs: DIR's decoder (A) against this checkout's (B) in alternating blocks, CPU B/A per pair. */
async function versus(dir: string): Promise<void> {
  const a = (await decoderUnderTest(dir)).decoder;
  const blocks = Number(args.blocks);
  const block = Number(args.block);
  console.log(
    `node ${process.version}; A = ${resolve(dir)}/, B = ${srcDir}; ${blocks} pairs of blocks of ${block} requests`,
  );
  console.log('case              µs CPU a request, A   B          B/A per pair: median (range)');
  for (const signal of SIGNALS) {
    for (const format of ['protobuf', 'json'] as const) {
      if ((args.signal ?? signal) !== signal || (args.format ?? format) !== format) continue;
      const list = bodies(signal, format);
      const cpuOf = (by: typeof decoder, from: number) => {
        const before = process.cpuUsage();
        for (let i = 0; i < block; i++) decode(signal, format, list[(from + i) % list.length]!, by);
        const used = process.cpuUsage(before);
        return (used.user + used.system) / block;
      };
      for (let i = 0; i < 300; i++) {
        decode(signal, format, list[i % list.length]!, a);
        decode(signal, format, list[i % list.length]!, decoder);
      }
      const cpuA: number[] = [];
      const cpuB: number[] = [];
      for (let k = 0; k < blocks; k++) {
        if (k % 2 === 0) {
          cpuA.push(cpuOf(a, k * block));
          cpuB.push(cpuOf(decoder, k * block));
        } else {
          cpuB.push(cpuOf(decoder, k * block));
          cpuA.push(cpuOf(a, k * block));
        }
      }
      const ratios = cpuB.map((b, k) => b / cpuA[k]!).sort((x, y) => x - y);
      const median = (xs: number[]) => [...xs].sort((x, y) => x - y)[xs.length >> 1]!;
      console.log(
        `${`${signal} ${format}`.padEnd(18)}${median(cpuA).toFixed(0).padStart(6)} ${median(cpuB).toFixed(0).padStart(6)}` +
          `          ${median(ratios).toFixed(2)} (${ratios[0]!.toFixed(2)}-${ratios.at(-1)!.toFixed(2)})`,
      );
    }
  }
}

/**
 * Per case over the runs in each file: the median and range of µs per request and CPU per 1M
 * items; with two files (written by interleaved runs, A B A B...), the CPU ratio A/B of each pair.
 */
function compare(files: string[]): void {
  const runs = files.map((f) =>
    readFileSync(f, 'utf8')
      .split('\n')
      .filter(Boolean)
      .map((l) => JSON.parse(l) as CaseResult),
  );
  const median = (xs: number[]) => {
    const s = [...xs].sort((a, b) => a - b);
    return s.length % 2 ? s[s.length >> 1]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2;
  };
  const fmt = (xs: number[], digits: number) =>
    `${median(xs).toFixed(digits)} (${Math.min(...xs).toFixed(digits)}-${Math.max(...xs).toFixed(digits)})`;
  const cases = [...new Set(runs[0]!.map((r) => r.case))];
  console.log(
    `${'case'.padEnd(18)}${files.map((f) => `${f}: µs/req; CPU s/1M items`.padEnd(50)).join('')}${files.length === 2 ? 'CPU A/B, pair by pair' : ''}`,
  );
  for (const c of cases) {
    const per = runs.map((rs) => rs.filter((r) => r.case === c));
    const cols = per.map((rs) =>
      `${fmt(
        rs.map((r) => r.usMedian),
        0,
      )}; ${fmt(
        rs.map((r) => r.cpuSecondsPer1M),
        2,
      )} [${rs.length}]`.padEnd(50),
    );
    let ratio = '';
    if (per.length === 2) {
      const n = Math.min(per[0]!.length, per[1]!.length);
      const pairs = Array.from(
        { length: n },
        (_, i) => per[0]![i]!.cpuSecondsPer1M / per[1]![i]!.cpuSecondsPer1M,
      );
      ratio = fmt(pairs, 2);
    }
    console.log(`${c.padEnd(18)}${cols.join('')}${ratio}`);
  }
}
