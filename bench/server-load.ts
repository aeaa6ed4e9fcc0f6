// Server load benchmark: a load generator sends realistic OTLP/HTTP requests (100 spans, log
// records or metric data points each, HTTP-service attributes, points of all five kinds) over N
// keep-alive connections to an otelake server running in a separate process (runServer), in JSON
// and protobuf, with and without gzip.
//
// For each scenario it measures, after a warm-up:
//   - sustained throughput: rows committed to Delta tables (healthz aggregator.rows_written) per second,
//     converted to spans/s, log records/s or data points/s (span events are committed rows too,
//     counted apart);
//   - request latency p50/p99 at full load (closed loop: each connection sends its next request
//     when the previous one is answered);
//   - request latency p50/p99 at half the measured rate (open loop, measured from the scheduled
//     send time, so a stall is not hidden; in brackets from when the request was written, which
//     leaves out the load tool's own lateness). A request goes out on an idle connection, and when
//     all are busy on a new one, as an exporter's HTTP pool does (Go's opens a connection per
//     concurrent request); the cell names the connections used. That phase's
//     CPU seconds per million items and rows per file once its rows are written (with
//     `--half-rate`, any lighter load's);
//   - the server process's peak RSS (VmHWM), its CPU (process and event loop), CPU seconds per
//     million items, and the event-loop delay p99/max it reports on /healthz;
//   - where the CPU went, per million items, by thread (a second table; at full load, and at the
//     half rate as its CPU per 1M is counted): the event loop, the decoders, the Parquet worker (by
//     the names the pools give their threads), V8's helper threads, libuv's pool, and the rest
//     (threads that ended meanwhile included).
//   - how fast the machine was: the CPU of the decode step alone (bench/otlp-decode-map.ts, log
//     records over protobuf) just before and just after the run, as its speed swings from hour
//     to hour; and how steady (bench/machine-stalls.ts: the share of 5 s it ran below a third of
//     its speed), as in some hours the whole machine slows ~10x for 10-150 ms every 1-2 s, and a
//     server at half load then queues tens of ms of requests whatever it does.
// Request bodies are encoded (and gzipped) before the clock starts: the generator only sends, each
// request as one prepared buffer over a lean HTTP/1.1 client (bench/http-client.ts), so that it takes
// little of the CPU the server needs.
//
// Usage: node bench/server-load.ts [--seconds 10] [--warmup 3] [--connections 8]
//          [--scenarios spans-json,spans-proto,logs-json,logs-proto,metrics-json,metrics-proto]
//          [--gzip off,on] [--items 100]
//          [--max-batch-rows 20000] [--min-batch-rows MAX] [--decode-workers N] [--no-half]
//          [--half-rate ITEMS_PER_S]
//          [--durability wal,memory] [--options default,tuned] [--rounds 1]
//          [--server-src DIR,...]
//
// `--half-rate N` runs the open-loop phase at N items/s instead of half the measured rate: to
// compare two builds' latency at the same load when their full-load throughput differs, or to see
// what an item costs under a light load (a file's fixed cost spread over fewer rows).
//
// `--items N` sends requests of N items (100 by default; the Collector's batch processor sends up
// to 8,192, an SDK's batch processor up to 512).
//
// `--options default,tuned` (the default) runs each scenario with the default options, which is
// what users run, then with the tuned ones (--max-batch-rows, --min-batch-rows, a 500,000-row
// queue).
//
// `--rounds N` runs the whole list N times, each scenario's option sets back to back, and then
// prints the medians and the ratios the targets of issue 19 are stated in (default against tuned
// items/s, CPU per item of metrics against logs and of JSON against protobuf), round by round: on
// a machine whose speed drifts, ratios within a round are what compares.
//
// `--server-src DIR,...` runs each scenario once per server: DIR is the src/ folder of another
// checkout (`this` for this one's), each scenario's servers back to back, with the same load tool
// and measurements; a server gets the node flags and environment of its own checkout's launcher
// (server/node-flags.ts), none where it has none. A last table gives each other server against the
// first, pair by pair (items/s, CPU per item, half-load p99, peak RSS). Before against after:
//   mkdir -p .tmp/before && git archive 690ce73 package.json src proto | tar -x -C .tmp/before
//   node bench/server-load.ts --server-src .tmp/before/src,this --rounds 2
// (690ce73: main before issue 19.) Another checkout's modules resolve to this one's node_modules
// when it lies inside this folder.
//
// Before measuring, a server runs once with a few requests of each scenario, so that every measured
// server loads its modules from Node's compile cache, as an installed server does (primeCompileCache).
//
// `--durability wal,memory` runs each scenario once per durability, one after the other, so that
// the cost of the write-ahead log (acknowledging only synced rows) is measured A against B in one
// run; the default is the default option, `wal`.
//
// Batches are written when full (min_batch_rows = max_batch_rows) or max_age_s old. A file has a
// fixed cost: writing 5,000-row span files took 6.1 µs of CPU per row in the Parquet worker and
// polars, 50,000-row files 3.0. With a lower min_batch_rows a batch is written whenever the writer
// is idle, and under load that settles at small files: three back-to-back pairs (spans-json, at
// most 50,000 rows) gave 63-71k spans/s with min_batch_rows 5,000 and 84-90k with full batches.
// Full 20,000-row batches did as well (86-91k). Their p99 at half rate was 55-161 ms in 6 of 24
// scenarios while an in-day compaction still merged 64 such files at once (1.28M rows, ~1 s of
// both cores); since a compaction stops at compact_small_file_rows it was 12-47 ms in all 40 of
// five full runs, and 11-35 ms in all 24 of three later ones. 50,000-row batches raised it to 91 ms.
// In-day compactions of these files now copy their row groups instead of rewriting them: polars'
// threads went from 18-20% to 9-10% of a core at ~105k spans/s.

import { resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { describeStalls, measureStalls } from './machine-stalls.ts';
import {
  buildBodies,
  closedLoop,
  cpuByGroup,
  cpuSeconds,
  decodeStepSeconds,
  health,
  ITEMS_PER_REQUEST,
  openLoop,
  optionSets,
  type PhaseResult,
  p50p99,
  peakRssMiB,
  percentile,
  primeCompileCache,
  type Scenario,
  signalOf,
  spread,
  startServer,
  THREAD_GROUPS,
  waitDrained,
} from './server-harness.ts';

/** Seconds of bench/machine-stalls.ts before and after the run. */
const STALL_SECONDS = 5;

await main();

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      seconds: { type: 'string', default: '10' },
      warmup: { type: 'string', default: '3' },
      connections: { type: 'string', default: '8' },
      scenarios: {
        type: 'string',
        default: 'spans-json,spans-proto,logs-json,logs-proto,metrics-json,metrics-proto',
      },
      gzip: { type: 'string', default: 'off,on' },
      'max-batch-rows': { type: 'string', default: '20000' },
      'min-batch-rows': { type: 'string' },
      'decode-workers': { type: 'string' },
      items: { type: 'string', default: String(ITEMS_PER_REQUEST) },
      'no-half': { type: 'boolean', default: false },
      'half-rate': { type: 'string' },
      durability: { type: 'string', default: 'wal' },
      'server-src': { type: 'string', default: 'this' },
      options: { type: 'string', default: 'default,tuned' },
      rounds: { type: 'string', default: '1' },
    },
  });
  const setNames = values.options!.split(',') as ('default' | 'tuned')[];
  const durabilities = values.durability!.split(',') as ('wal' | 'memory')[];
  const srcNames = values['server-src']!.split(',');
  const srcs = srcNames.map((d) => (d === 'this' ? null : resolve(d)));
  // A scenario's label names its server: two the same would be one label.
  if (new Set(srcNames).size < srcNames.length) throw new Error('--server-src: each server once');
  const seconds = Number(values.seconds);
  const warmup = Number(values.warmup);
  const connections = Number(values.connections);
  const items = Number(values.items);
  const halfRate = values['half-rate'] === undefined ? null : Number(values['half-rate']);
  if (halfRate !== null && !(halfRate > 0)) throw new Error('--half-rate: items per second, above 0');
  const optionsOf = optionSets(values);
  const tuned = optionsOf.tuned;
  console.log(
    `the decode step alone, before the run: ${await decodeStepSeconds()} of CPU per 1M log records`,
  );
  console.log(`the machine before the run: ${describeStalls(measureStalls(STALL_SECONDS), STALL_SECONDS)}`);
  console.log(`tuned options: ${JSON.stringify(tuned)}`);
  console.log(
    `${connections} keep-alive connections, ${warmup} s warm-up, ${seconds} s measured, ${items} items per request`,
  );

  const scenarios: Scenario[] = [];
  for (const name of values.scenarios!.split(',')) {
    const [kind, fmt] = name.split('-');
    for (const g of values.gzip!.split(',')) {
      for (const set of setNames) {
        for (const durability of durabilities) {
          for (const [i, src] of srcs.entries()) {
            // Variants beyond the option set (durability, server) name the scenario's base.
            const variants = [
              ...(durabilities.length > 1 ? [durability] : []),
              ...(srcs.length > 1 ? [srcNames[i]!] : []),
            ];
            const base = [`${name}${g === 'on' ? '-gzip' : ''}`, ...variants].join(', ');
            scenarios.push({
              name: `${name}${g === 'on' ? '-gzip' : ''} [${[set, ...variants].join(', ')}]`,
              base,
              set,
              signal: signalOf(kind!),
              format: fmt === 'proto' ? 'protobuf' : 'json',
              gzip: g === 'on',
              durability,
              options: optionsOf[set],
              src,
            });
          }
        }
      }
    }
  }

  for (const src of srcs) await primeCompileCache(scenarios, items, src);
  const rows: string[][] = [];
  const results: Measured[] = [];
  const threadRows: string[][] = [];
  const rounds = Number(values.rounds);
  // Each round runs the whole list; a scenario's option sets stay back to back.
  const runs = Array.from({ length: rounds }, (_, round) => scenarios.map((s) => ({ s, round }))).flat();
  for (const { s, round } of runs) {
    const { bodies, rowsPerRequest, itemsPerRequest } = await buildBodies(s, items);
    const avgBytes = Math.round(bodies.reduce((n, b) => n + b.bytes.length, 0) / bodies.length);
    const server = await startServer({ ...s.options, durability: s.durability }, s.src);
    const path = `/v1/${s.signal}`;
    try {
      const warm = await closedLoop(server.url, bodies, connections, warmup * 1000, path);
      const { rows_written: w0, batches_written: b0 } = (await health(server.url)).aggregator;
      const c0 = await cpuSeconds(server.pid);
      const t0 = performance.now();
      const full = await closedLoop(server.url, bodies, connections, seconds * 1000, path);
      const { rows_written: w1, batches_written: b1 } = (await health(server.url)).aggregator;
      const c1 = await cpuSeconds(server.pid);
      const elapsed = (performance.now() - t0) / 1000;
      const committedRows = (w1 - w0) / elapsed;
      const itemsPerSec = committedRows * (itemsPerRequest / rowsPerRequest);
      const accepted = full.statuses[200] ?? 0;
      full.latencies.sort((a, b) => a - b);

      let half: PhaseResult | null = null;
      let halfCpuPerMillion: number | null = null;
      let halfRowsPerFile: number | null = null;
      let halfThreadRow: string[] | null = null;
      if (!values['no-half']) {
        // Let the backlog of the full-load phase drain first.
        const acceptedSoFar = (warm.statuses[200] ?? 0) + accepted;
        await waitDrained(server.url, acceptedSoFar * rowsPerRequest, 30_000);
        const rps = halfRate ? halfRate / itemsPerRequest : Math.max(1, committedRows / rowsPerRequest / 2);
        const { rows_written: w2, batches_written: b2 } = (await health(server.url)).aggregator;
        const c2 = await cpuSeconds(server.pid);
        half = await openLoop(server.url, bodies, connections, seconds * 1000, path, rps);
        half.latencies.sort((a, b) => a - b);
        half.fromWrite?.sort((a, b) => a - b);
        // What the phase's rows cost once written: a lighter load spreads each file over fewer rows.
        await waitDrained(server.url, (acceptedSoFar + (half.statuses[200] ?? 0)) * rowsPerRequest, 30_000);
        const { rows_written: w3, batches_written: b3 } = (await health(server.url)).aggregator;
        const c3 = await cpuSeconds(server.pid);
        if (w3 > w2) {
          const halfMillions = ((w3 - w2) * (itemsPerRequest / rowsPerRequest)) / 1e6;
          halfCpuPerMillion = (c3.process - c2.process) / halfMillions;
          const byThread = [...cpuByGroup(c2, c3).values()];
          halfThreadRow = [`${s.name} half rate`, ...byThread.map((v) => (v / halfMillions).toFixed(2))];
        }
        if (b3 > b2) halfRowsPerFile = (w3 - w2) / (b3 - b2);
      }
      const peak = await peakRssMiB(server.pid);
      const loop = (await health(server.url)).event_loop_delay_ms;
      const cpuProcess = (c1.process - c0.process) / elapsed;
      const cpuMain = (c1.main - c0.main) / elapsed;
      // Server CPU per million items: what 2 dedicated cores would sustain, whatever else runs here.
      const millions = ((w1 - w0) * (itemsPerRequest / rowsPerRequest)) / 1e6;
      const cpuPerMillion = (c1.process - c0.process) / millions;
      threadRows.push([s.name, ...[...cpuByGroup(c0, c1).values()].map((v) => (v / millions).toFixed(2))]);
      if (halfThreadRow) threadRows.push(halfThreadRow);
      const line = [
        s.name,
        String(avgBytes),
        Math.round(itemsPerSec).toLocaleString('en-US'),
        Math.round((accepted * itemsPerRequest) / elapsed).toLocaleString('en-US'),
        p50p99(full.latencies),
        half
          ? `${Math.round((half.requests * itemsPerRequest) / seconds).toLocaleString('en-US')}: ${p50p99(half.latencies)} (${p50p99(half.fromWrite ?? [])}), ${half.connections} conns`
          : '-',
        halfCpuPerMillion === null ? '-' : halfCpuPerMillion.toFixed(1),
        halfRowsPerFile === null ? '-' : Math.round(halfRowsPerFile).toLocaleString('en-US'),
        String(peak),
        `${(cpuProcess * 100).toFixed(0)}% / ${(cpuMain * 100).toFixed(0)}%`,
        cpuPerMillion.toFixed(1),
        b1 > b0 ? Math.round((w1 - w0) / (b1 - b0)).toLocaleString('en-US') : '-',
        `${loop.p99} / ${loop.max}`,
        Object.entries(full.statuses)
          .map(([k, v]) => `${k}:${v}`)
          .join(' '),
      ];
      rows.push(line);
      console.log(line.join(' | '));
      results.push({
        base: s.base,
        set: s.set,
        round,
        itemsPerSec,
        cpuPerMillion,
        halfP99: half ? percentile(half.latencies, 99) : null,
        peak,
      });
    } catch (err) {
      // A server that fails (crashes, stops answering) is reported in its row, and the run goes on.
      const line = [s.name, `failed: ${(err as Error).message}`];
      rows.push(line);
      console.log(line.join(' | '));
      process.exitCode = 1;
    } finally {
      await server.stop().catch((err: Error) => {
        console.log(`${s.name}: ${err.message}`);
        process.exitCode = 1;
      });
    }
  }
  console.log('');
  console.log(
    '| scenario | body bytes | committed items/s | accepted items/s | full-load p50 / p99 ms | half rate items/s: p50 / p99 ms (from the write), connections used | half rate: CPU s per 1M items | half rate: rows per file | server peak RSS MiB | server CPU process / main thread | server CPU s per 1M items | rows per file | event-loop delay p99 / max ms | statuses |',
  );
  console.log('|---|---|---|---|---|---|---|---|---|---|---|---|---|---|');
  for (const r of rows) console.log(`| ${r.join(' | ')} |`);
  console.log('');
  const groups = [...THREAD_GROUPS.map(([g]) => g), 'other'];
  console.log(`| server CPU s per 1M items by thread (full load; half rate) | ${groups.join(' | ')} |`);
  console.log(`|---|${groups.map(() => '---|').join('')}`);
  for (const r of threadRows) console.log(`| ${r.join(' | ')} |`);
  console.log('');
  console.log(`the decode step alone, after the run: ${await decodeStepSeconds()} of CPU per 1M log records`);
  console.log(`the machine after the run: ${describeStalls(measureStalls(STALL_SECONDS), STALL_SECONDS)}`);
  if (rounds > 1) printRounds(results);
  if (srcNames.length > 1) printServerRatios(results, srcNames);
}

// --- the rounds' summary ------------------------------------------------------------------------

interface Measured {
  base: string;
  set: 'default' | 'tuned';
  round: number;
  itemsPerSec: number;
  cpuPerMillion: number;
  halfP99: number | null;
  peak: number;
}

/** a / b round by round, for the rounds that measured both. */
function ratios(
  results: Measured[],
  a: (m: Measured) => boolean,
  b: (m: Measured) => boolean,
  of: (m: Measured) => number,
) {
  const out: number[] = [];
  for (const x of results.filter(a)) {
    const y = results.find((m) => b(m) && m.round === x.round);
    if (y) out.push(of(x) / of(y));
  }
  return out;
}

function printRounds(results: Measured[]): void {
  const rounds = Math.max(...results.map((m) => m.round)) + 1;
  const bases = [...new Set(results.map((m) => m.base))];
  const sets = [...new Set(results.map((m) => m.set))];
  console.log('');
  console.log(`Over ${rounds} rounds: median (lowest-highest)`);
  console.log('');
  console.log('| scenario | options | items/s | CPU s per 1M items | half-load p99 ms | peak RSS MiB |');
  console.log('|---|---|---|---|---|---|');
  for (const base of bases) {
    for (const set of sets) {
      const ms = results.filter((m) => m.base === base && m.set === set);
      if (ms.length === 0) continue;
      const p99 = ms.flatMap((m) => (m.halfP99 === null ? [] : [m.halfP99]));
      console.log(
        `| ${base} | ${set} | ${spread(
          ms.map((m) => Math.round(m.itemsPerSec)),
          0,
        )} | ` +
          `${spread(
            ms.map((m) => m.cpuPerMillion),
            1,
          )} | ${spread(p99, 1)} | ${spread(
            ms.map((m) => m.peak),
            0,
          )} |`,
      );
    }
  }
  const is = (base: string, set: string) => (m: Measured) => m.base === base && m.set === set;
  console.log('');
  console.log('Ratios within each round: median (lowest-highest)');
  console.log('');
  console.log('| ratio | options | round by round |');
  console.log('|---|---|---|');
  const line = (what: string, set: string, xs: number[]) => {
    if (xs.length > 0) console.log(`| ${what} | ${set} | ${spread(xs, 2)} |`);
  };
  for (const base of bases) {
    line(
      `${base}: items/s, default / tuned`,
      '',
      ratios(results, is(base, 'default'), is(base, 'tuned'), (m) => m.itemsPerSec),
    );
  }
  const cpu = (m: Measured) => m.cpuPerMillion;
  for (const set of sets) {
    for (const base of bases.filter((b) => b.startsWith('metrics-'))) {
      const logs = base.replace('metrics-', 'logs-');
      line(`CPU per item, ${base} / ${logs}`, set, ratios(results, is(base, set), is(logs, set), cpu));
    }
    for (const base of bases.filter((b) => b.includes('-json'))) {
      const proto = base.replace('-json', '-proto');
      line(`CPU per item, ${base} / ${proto}`, set, ratios(results, is(base, set), is(proto, set), cpu));
    }
  }
}

/**
 * `--server-src`: each other server against the first (after against before), pair by pair: a
 * scenario's servers ran back to back in the same round. Per scenario and option set, then all
 * pairs together.
 */
function printServerRatios(results: Measured[], names: string[]): void {
  const [first, ...others] = names;
  const suffix = `, ${first}`;
  const sets = [...new Set(results.map((m) => m.set))];
  const of: [string, (m: Measured) => number | null][] = [
    ['items/s', (m) => m.itemsPerSec],
    ['CPU per item', (m) => m.cpuPerMillion],
    ['half-load p99', (m) => m.halfP99],
    ['peak RSS', (m) => m.peak],
  ];
  for (const other of others) {
    console.log('');
    console.log(`${other} against ${first}, pair by pair: median (lowest-highest)`);
    console.log('');
    console.log(`| scenario | options | ${of.map(([what]) => what).join(' | ')} |`);
    console.log(`|---|---|${of.map(() => '---|').join('')}`);
    const all = of.map((): number[] => []);
    for (const base of [...new Set(results.map((m) => m.base))].filter((b) => b.endsWith(suffix))) {
      const scenario = base.slice(0, -suffix.length);
      for (const set of sets) {
        const pairs = of.map(([, value], k) => {
          const xs = ratios(
            results,
            (m) => m.base === `${scenario}, ${other}` && m.set === set,
            (m) => m.base === base && m.set === set,
            (m) => value(m) ?? Number.NaN,
          ).filter((x) => Number.isFinite(x));
          all[k]!.push(...xs);
          return xs;
        });
        if (pairs[0]!.length > 0)
          console.log(`| ${scenario} | ${set} | ${pairs.map((xs) => spread(xs, 2)).join(' | ')} |`);
      }
    }
    console.log(`| all | | ${all.map((xs) => spread(xs, 2)).join(' | ')} |`);
  }
}
