// Two servers under one load in alternating slices: A against B as whole servers, for a change
// whose effect is smaller than the machine's swings between runs. bench/server-load.ts runs a
// scenario's servers one after the other (`--server-src`), each for its own 10-20 s; this machine's
// speed can change by a third between two such runs. Here both servers run for the whole
// measurement and the load tool sends to one at a time, in slices of a few seconds, A B A B ... A,
// so that each slice of B has a slice of A just before it and just after.
//
// A slice's CPU is its server's process CPU (/proc, every thread) from the slice's start to the
// start of that server's next slice: what it does after its slice (writing the slice's rows, while
// the other server takes the load) counts toward it, and every CPU second of each process counts
// once. Per slice of B, B/A against the mean of the two slices of A around it, of CPU per item and
// of items a second (requests answered 200 times their items); printed as median and range over the
// slices, as bench/otlp-decode-map.ts --vs prints its pairs. With `--rate N` every slice sends N
// items a second (open loop, as server-load's half-rate phase) instead of as fast as answered, and
// the latencies of each server's slices are pooled into p50/p99.
//
//   node bench/server-ab.ts [--a this] [--b this] [--a-flags=FLAGS] [--b-flags=FLAGS]
//          [--a-env K=V,...] [--b-env K=V,...] [--a-options JSON] [--b-options JSON]
//          [--scenario logs-proto] [--options default]
//          [--slices 16] [--slice 2] [--warmup 5] [--rate N] [--connections 8] [--items 100]
//
// --a and --b: a src/ folder of another checkout, or `this`; a server gets its checkout's launcher
// flags and environment (src/server/node-flags.ts), then --a-flags / --b-flags (extra node flags,
// given with `=`, e.g. `--b-flags=--no-maglev`; BENCH_SERVER_FLAGS where not given), --a-env /
// --b-env, and --a-options / --b-options (options merged over the option set's, section by
// section, e.g. `--b-options '{"server_config":{"decode_workers":1}}'`). The scenario is one of
// server-load's names (`spans-json`, `logs-proto`, `metrics-proto-gzip`, ...); --options default
// or tuned.
//
// The same server on both sides shows what is left of the noise: B/A of CPU per item 0.96-1.00 at
// the median here, p99 up to ~7% lower for B. So run a change both ways round (as A, then as B).

import { resolve } from 'node:path';
import { parseArgs } from 'node:util';
import type { PartialOptions } from '../src/storage/options.ts';
import {
  benchServerFlags,
  buildBodies,
  closedLoop,
  cpuSeconds,
  ITEMS_PER_REQUEST,
  openLoop,
  optionSets,
  p50p99,
  peakRssMiB,
  primeCompileCache,
  type Scenario,
  signalOf,
  spread,
  startServer,
} from './server-harness.ts';

const { values } = parseArgs({
  options: {
    a: { type: 'string', default: 'this' },
    b: { type: 'string', default: 'this' },
    'a-flags': { type: 'string' },
    'b-flags': { type: 'string' },
    'a-env': { type: 'string', default: '' },
    'b-env': { type: 'string', default: '' },
    'a-options': { type: 'string', default: '{}' },
    'b-options': { type: 'string', default: '{}' },
    scenario: { type: 'string', default: 'logs-proto' },
    options: { type: 'string', default: 'default' },
    slices: { type: 'string', default: '16' },
    slice: { type: 'string', default: '2' },
    warmup: { type: 'string', default: '5' },
    rate: { type: 'string' },
    connections: { type: 'string', default: '8' },
    items: { type: 'string', default: String(ITEMS_PER_REQUEST) },
    'max-batch-rows': { type: 'string' },
    'min-batch-rows': { type: 'string' },
    'decode-workers': { type: 'string' },
  },
});

interface Side {
  label: string;
  src: string | null;
  flags: string[];
  env: Record<string, string>;
  options: PartialOptions;
}

function side(name: 'a' | 'b'): Side {
  const dir = values[name]!;
  const flags = values[`${name}-flags`];
  const env = Object.fromEntries(
    values[`${name}-env`]!.split(',')
      .filter(Boolean)
      .map((kv) => {
        const at = kv.indexOf('=');
        if (at < 1) throw new Error(`--${name}-env: K=V pairs, comma-separated, not ${kv}`);
        return [kv.slice(0, at), kv.slice(at + 1)];
      }),
  );
  const extra = flags === undefined ? benchServerFlags() : flags.split(' ').filter(Boolean);
  const options = JSON.parse(values[`${name}-options`]!) as PartialOptions;
  const label = [
    dir,
    ...extra,
    ...Object.entries(env).map(([k, v]) => `${k}=${v}`),
    ...(Object.keys(options).length > 0 ? [JSON.stringify(options)] : []),
  ].join(' ');
  return { label, src: dir === 'this' ? null : resolve(dir), flags: extra, env, options };
}

function scenarioOf(name: string, set: 'default' | 'tuned'): Scenario {
  const [kind, fmt, gzip] = name.split('-');
  if ((fmt !== 'json' && fmt !== 'proto') || (gzip !== undefined && gzip !== 'gzip'))
    throw new Error(`--scenario ${name}: spans|logs|metrics, then -json or -proto, then -gzip or not`);
  return {
    name,
    base: name,
    set,
    signal: signalOf(kind!),
    format: fmt === 'proto' ? 'protobuf' : 'json',
    gzip: gzip === 'gzip',
    durability: 'wal',
    options: optionSets(values)[set],
    src: null,
  };
}

/** `over` merged onto `base`, section by section (`server_config`, `aggregator_config`, ...). */
function merged(base: PartialOptions, over: PartialOptions): PartialOptions {
  const out: Record<string, unknown> = { ...base };
  for (const [key, value] of Object.entries(over)) {
    const was = out[key];
    out[key] =
      typeof was === 'object' && was !== null && typeof value === 'object' && value !== null
        ? { ...was, ...value }
        : value;
  }
  return out as PartialOptions;
}

const set = values.options as 'default' | 'tuned';
if (set !== 'default' && set !== 'tuned') throw new Error('--options: default or tuned');
const scenario = scenarioOf(values.scenario!, set);
const sides = [side('a'), side('b')];
const slicesOfB = Number(values.slices);
const sliceMs = Number(values.slice) * 1000;
const warmupMs = Number(values.warmup) * 1000;
const connections = Number(values.connections);
const items = Number(values.items);
const rate = values.rate === undefined ? null : Number(values.rate);
if (!(slicesOfB >= 1) || !(sliceMs > 0)) throw new Error('--slices and --slice: above 0');
if (rate !== null && !(rate > 0)) throw new Error('--rate: items per second, above 0');

console.log(`A = ${sides[0]!.label}; B = ${sides[1]!.label}`);
console.log(
  `${scenario.name} [${set}], ${slicesOfB} slices of B between ${slicesOfB + 1} of A, ${values.slice} s each, ` +
    `${rate === null ? 'as fast as answered' : `${rate} items/s`}, ${connections} connections, ${items} items per request`,
);

for (const s of new Set(sides.map((x) => x.src))) await primeCompileCache([scenario], items, s);
const { bodies, itemsPerRequest } = await buildBodies(scenario, items);
const path = `/v1/${scenario.signal}`;
const servers = await Promise.all(
  sides.map((s) => startServer(merged(scenario.options, s.options), s.src, s.flags, s.env)),
);
const load = (url: string, ms: number) =>
  rate === null
    ? closedLoop(url, bodies, connections, ms, path)
    : openLoop(url, bodies, connections, ms, path, rate / itemsPerRequest);

try {
  for (const s of servers) await load(s.url, warmupMs);
  // Slice k goes to server k % 2: A B A B ... A.
  const slices: { server: number; cpuAtStart: number; items: number; latencies: number[] }[] = [];
  for (let k = 0; k < 2 * slicesOfB + 1; k++) {
    const server = servers[k % 2]!;
    const cpuAtStart = (await cpuSeconds(server.pid)).process;
    const phase = await load(server.url, sliceMs);
    const answered = phase.statuses[200] ?? 0;
    if (answered < phase.requests) console.log(`slice ${k}: statuses ${JSON.stringify(phase.statuses)}`);
    slices.push({ server: k % 2, cpuAtStart, items: answered * itemsPerRequest, latencies: phase.latencies });
  }
  // Each slice's window ends one slice after it, as every other's does: B's last now (A's last
  // slice has just run), A's last a slice's time later.
  const endOfB = (await cpuSeconds(servers[1]!.pid)).process;
  await new Promise((r) => setTimeout(r, sliceMs));
  const cpuAtEnd = [(await cpuSeconds(servers[0]!.pid)).process, endOfB];
  const cpu = slices.map((sl, k) => {
    const next = slices.slice(k + 1).find((n) => n.server === sl.server);
    return (next?.cpuAtStart ?? cpuAtEnd[sl.server]!) - sl.cpuAtStart;
  });
  const perMillion = slices.map((sl, k) => (cpu[k]! / sl.items) * 1e6);
  const perSecond = slices.map((sl) => sl.items / (sliceMs / 1000));
  const cpuRatios: number[] = [];
  const rateRatios: number[] = [];
  for (let k = 1; k < slices.length; k += 2) {
    cpuRatios.push(perMillion[k]! / ((perMillion[k - 1]! + perMillion[k + 1]!) / 2));
    rateRatios.push(perSecond[k]! / ((perSecond[k - 1]! + perSecond[k + 1]!) / 2));
  }
  const of = (i: number, xs: number[]) => xs.filter((_, k) => slices[k]!.server === i);
  const latencies = [0, 1].map((i) =>
    slices
      .filter((sl) => sl.server === i)
      .flatMap((sl) => sl.latencies)
      .sort((x, y) => x - y),
  );
  const peaks = await Promise.all(servers.map((s) => peakRssMiB(s.pid)));
  console.log('');
  console.log('| per slice | A: median (range) | B: median (range) | B/A per slice of B: median (range) |');
  console.log('|---|---|---|---|');
  console.log(
    `| server CPU s per 1M items | ${spread(of(0, perMillion), 2)} | ${spread(of(1, perMillion), 2)} | ${spread(cpuRatios, 2)} |`,
  );
  const thousands = (xs: number[]) => xs.map((x) => x / 1000);
  console.log(
    `| items/s, thousands | ${spread(thousands(of(0, perSecond)), 0)} | ${spread(thousands(of(1, perSecond)), 0)} | ${spread(rateRatios, 2)} |`,
  );
  console.log(`| latency p50 / p99 ms, all slices | ${p50p99(latencies[0]!)} | ${p50p99(latencies[1]!)} | |`);
  console.log(`| server peak RSS MiB, the whole run | ${peaks[0]} | ${peaks[1]} | |`);
} finally {
  await Promise.all(servers.map((s) => s.stop()));
}
