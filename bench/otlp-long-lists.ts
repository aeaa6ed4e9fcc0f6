// The decode step on requests of one item whose attribute list is long (and its resource's as
// long): what the attribute writers' repeated-key check costs as lists grow. A check that compares
// each key with all before it is quadratic: one 60,000-key request held a decode worker for
// seconds. Runs src/server/decode.ts' RequestDecoder on this thread (map, attribute limits,
// validate, normalize), default options first (attribute_count_limit 1,024: a longer list is cut
// and counted), then limits too high to cut (the writers' cost alone). Prints ms per request
// (median of the runs) and CPU ms per 1,000 keys.
//
//   node bench/otlp-long-lists.ts [--keys 100,1000,10000,60000] [--src DIR] [--budget-s 30]
//
// --src DIR runs another checkout's src/ (A against B):
//   mkdir -p .tmp/old && git archive <old commit> src proto | tar -x -C .tmp/old
//   node bench/otlp-long-lists.ts --src .tmp/old/src
// Sizes whose estimated time (from the last size, as if quadratic) passes --budget-s are skipped.

import { parseArgs } from 'node:util';
import type { Signal } from '../src/otlp/index.ts';
import type { DecodeResult } from '../src/server/decode.ts';
import { defaultOptions } from '../src/storage/options.ts';
import { decoderUnderTest } from './decoder-under-test.ts';

const { values: args } = parseArgs({
  options: {
    keys: { type: 'string', default: '100,1000,10000,60000' },
    src: { type: 'string' },
    'budget-s': { type: 'string', default: '30' },
  },
});
const SIZES = args.keys.split(',').map(Number);
const BUDGET_MS = Number(args['budget-s']) * 1000;

const { codec, srcDir, RequestDecoder } = await decoderUnderTest(args.src);
const SETTINGS = {
  validateRequired: true,
  validateTypes: true,
  normalizeServiceName: true,
  defaultServiceName: 'unknown_service',
  strictColumns: true,
};
const { server_config: server } = defaultOptions();
const LIMITS = [
  [
    'default limits',
    { countLimit: server.attribute_count_limit, valueLengthLimit: server.attribute_value_length_limit },
  ],
  ['no cut', { countLimit: 1e9, valueLengthLimit: 1e9 }],
] as const;

const TRACE_ID = '5b8efff798038103d269b633813fc60c';
const SPAN_ID = 'eee19b7ec3c1b174';

/** A request of one item with `n` attributes, its resource with `n` too; ids as hex or bytes. */
function request(signal: Signal, n: number, bytes: boolean): Record<string, unknown> {
  const attributes = Array.from({ length: n }, (_, i) => ({
    key: `attribute.key.${i}`,
    value: { stringValue: `value ${i}` },
  }));
  const resource = { attributes: [{ key: 'service.name', value: { stringValue: 'svc' } }, ...attributes] };
  const time = '1763700000000000000';
  if (signal === 'traces') {
    const id = (hex: string) => (bytes ? Buffer.from(hex, 'hex') : hex);
    const span = {
      traceId: id(TRACE_ID),
      spanId: id(SPAN_ID),
      name: 's',
      startTimeUnixNano: time,
      endTimeUnixNano: time,
      attributes,
    };
    return { resourceSpans: [{ resource, scopeSpans: [{ spans: [span] }] }] };
  }
  if (signal === 'logs') {
    const record = { timeUnixNano: time, body: { stringValue: 'b' }, attributes };
    return { resourceLogs: [{ resource, scopeLogs: [{ logRecords: [record] }] }] };
  }
  const metric = { name: 'g', gauge: { dataPoints: [{ timeUnixNano: time, asDouble: 1, attributes }] } };
  return { resourceMetrics: [{ resource, scopeMetrics: [{ metrics: [metric] }] }] };
}

function body(signal: Signal, format: 'json' | 'protobuf', n: number): Uint8Array {
  if (format === 'json') return Buffer.from(JSON.stringify(request(signal, n, false)));
  const type = codec!.requestType(signal);
  return type.encode(type.fromObject(request(signal, n, true))).finish();
}

console.log(`src: ${srcDir}`);
console.log('case                         keys   body MB   ms/request   CPU ms per 1,000 keys');
for (const [limitsName, limits] of LIMITS) {
  const decoder = new RequestDecoder(codec as unknown as boolean, SETTINGS, limits);
  for (const signal of ['traces', 'logs', 'metrics'] as const) {
    for (const format of ['json', 'protobuf'] as const) {
      let lastMs = 0;
      let lastN = 0;
      for (const n of SIZES) {
        const label = `${signal} ${format}`.padEnd(17);
        const guess = lastN === 0 ? 0 : lastMs * (n / lastN) ** 2;
        if (guess > BUDGET_MS) {
          console.log(
            `${label} ${limitsName.padEnd(14)} ${String(n).padStart(6)}   skipped (~${Math.round(guess / 1000)} s if quadratic)`,
          );
          continue;
        }
        const b = body(signal, format, n);
        const task = {
          signal,
          format,
          body: b,
          codings: [],
          bodyLimit: 1 << 30,
          headerProjectId: undefined,
          defaultProjectId: 'bench',
        };
        const runs: number[] = [];
        const cpu = process.cpuUsage();
        const until = performance.now() + 2000;
        do {
          const t = performance.now();
          const r: DecodeResult = decoder.decode(task);
          runs.push(performance.now() - t);
          if (!r.ok) throw new Error(`${signal} ${format}: ${r.message}`);
        } while (performance.now() < until && runs.length < 50);
        const used = process.cpuUsage(cpu);
        runs.sort((x, y) => x - y);
        const ms = runs[runs.length >> 1]!;
        const cpuPer1k = (used.user + used.system) / 1000 / runs.length / ((2 * n) / 1000);
        console.log(
          `${label} ${limitsName.padEnd(14)} ${String(n).padStart(6)}   ${(b.length / 1e6).toFixed(2).padStart(7)}   ` +
            `${ms.toFixed(1).padStart(10)}   ${cpuPer1k.toFixed(2).padStart(8)}`,
        );
        lastMs = ms;
        lastN = n;
      }
    }
  }
}
