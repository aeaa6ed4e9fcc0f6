// Decode + map throughput of OTLP requests (100 spans or 100 log records each), JSON and
// protobuf. Usage: node bench/otlp-decode-map.ts [seconds per case, default 2]

import {
  decodeRequest,
  type ExportRequest,
  loadProtobuf,
  mapRequest,
  type Signal,
} from '../src/otlp/index.ts';
import { parseJson } from '../src/otlp/request.ts';
import { logsRequest, tracesRequest } from './otlp-payloads.ts';

const SECONDS = Number(process.argv[2] ?? 2);
const ITEMS = 100;
const REQUESTS = 50; // distinct bodies, cycled
const ctx = { defaultProjectId: 'bench' };

const codec = await loadProtobuf();
if (!codec) throw new Error('protobufjs is needed for the protobuf cases');

const ID_KEYS = new Set(['traceId', 'spanId', 'parentSpanId']);
function hexIdsToBytes(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(hexIdsToBytes);
  if (v === null || typeof v !== 'object') return v;
  const out: Record<string, unknown> = {};
  for (const [k, x] of Object.entries(v))
    out[k] = ID_KEYS.has(k) && typeof x === 'string' ? Buffer.from(x, 'hex') : hexIdsToBytes(x);
  return out;
}

function bodies(signal: Signal, format: 'json' | 'protobuf'): Uint8Array[] {
  const out: Uint8Array[] = [];
  for (let i = 0; i < REQUESTS; i++) {
    const tree = signal === 'traces' ? tracesRequest(ITEMS, i + 1) : logsRequest(ITEMS, i + 1);
    if (format === 'json') out.push(Buffer.from(JSON.stringify(tree)));
    else {
      const type = codec!.requestType(signal);
      out.push(type.encode(type.fromObject(hexIdsToBytes(tree) as Record<string, unknown>)).finish());
    }
  }
  return out;
}

function run<T>(
  label: string,
  signal: Signal,
  format: 'json' | 'protobuf',
  work: (input: T) => void,
  prepare: (body: Uint8Array) => T = (b) => b as T,
) {
  const raw = bodies(signal, format);
  const bytes = raw.reduce((a, b) => a + b.length, 0) / raw.length;
  const list = raw.map(prepare);
  for (let i = 0; i < 200; i++) work(list[i % list.length]!); // warm up
  const samples: number[] = [];
  const end = performance.now() + SECONDS * 1000;
  let n = 0;
  while (performance.now() < end) {
    const t = performance.now();
    work(list[n++ % list.length]!);
    samples.push(performance.now() - t);
  }
  samples.sort((a, b) => a - b);
  const median = samples[samples.length >> 1]! * 1000;
  const total = samples.reduce((a, b) => a + b, 0);
  const us = (total / samples.length) * 1000;
  const pct = (p: number) => (samples[Math.floor(samples.length * p)]! * 1000).toFixed(0);
  console.log(
    `${label.padEnd(34)} ${String(Math.round(bytes / 1024)).padStart(4)} KiB  ${us.toFixed(0).padStart(6)} µs/req` +
      `  p50 ${pct(0.5).padStart(5)}  p99 ${pct(0.99).padStart(5)}  ${Math.round((ITEMS * 1e6) / us)
        .toLocaleString('en-US')
        .padStart(9)} items/s` +
      ` (at p50 ${Math.round((ITEMS * 1e6) / median)
        .toLocaleString('en-US')
        .padStart(9)})`,
  );
}

console.log(
  `node ${process.version}, ${ITEMS} items per request, ${SECONDS}s per case (shared machine: figures are indicative)`,
);
for (const signal of ['traces', 'logs'] as const) {
  for (const format of ['json', 'protobuf'] as const) {
    run(`${signal} ${format} decode+map`, signal, format, (body: Uint8Array) => {
      const m = mapRequest(signal, decodeRequest(signal, body, format, codec), ctx);
      if (m.items !== ITEMS) throw new Error('wrong item count');
    });
    // Protobuf traces and logs, and JSON traces, are mapped in one step from the bytes: see below.
    if (format === 'protobuf' || signal === 'traces') continue;
    run(`${signal} ${format} decode only`, signal, format, (body: Uint8Array) => {
      decodeRequest(signal, body, format, codec);
    });
    run(
      `${signal} ${format} map only`,
      signal,
      format,
      (req: ExportRequest) => mapRequest(signal, req, ctx),
      (body) => decodeRequest(signal, body, format, codec),
    );
  }
}
// For comparison, the routes through a message tree: JSON.parse's (the fallback of JSON traces),
// and protobufjs' (which metrics take).
run('traces json via parsed tree', 'traces', 'json', (body: Uint8Array) => {
  const req = decodeRequest('traces', body, 'json', codec);
  parseJson(req);
  const m = mapRequest('traces', req, ctx);
  if (m.items !== ITEMS) throw new Error('wrong item count');
});
for (const signal of ['traces', 'logs'] as const) {
  run(`${signal} protobuf via message tree`, signal, 'protobuf', (body: Uint8Array) => {
    const root = codec.decodeRequest(signal, body);
    const m = mapRequest(
      signal,
      { signal, format: 'protobuf', root, text: null, wire: null, json: null },
      ctx,
    );
    if (m.items !== ITEMS) throw new Error('wrong item count');
  });
}
// int64 times written as JSON numbers (legal, but beyond 2^53): the body is parsed a second time, exactly.
{
  const signal = 'traces';
  run(
    'traces json, int64 as numbers',
    signal,
    'json',
    (body: Uint8Array) => {
      const m = mapRequest(signal, decodeRequest(signal, body, 'json', null), ctx);
      if (m.items !== ITEMS) throw new Error('wrong item count');
    },
    (body) =>
      Buffer.from(
        Buffer.from(body)
          .toString()
          .replace(/"(\w+UnixNano)":"(\d+)"/g, '"$1":$2'),
      ),
  );
}
console.log(`peak RSS ${Math.round(process.resourceUsage().maxRSS / 1024)} MiB`);
