// The server's memory under the Collector's largest requests, planning for a container's limit:
// eight clients each send 8,192 spans (~7.2 MB of JSON) a request, the next once answered (503s
// retried after 100 ms), for --seconds. The server (bench/server-harness.ts: otelake start's flags
// and malloc settings) plans for --plan-mib (server_config.memory_limit_bytes) but runs without a
// cgroup, so that its peak is measured rather than cut off by the kernel.
//
// Prints per run: the answers, the server's peak anonymous memory (RssAnon sampled every 20 ms)
// and peak RSS (VmHWM) while loaded, and its anonymous memory 3 s after the load; then the ranges
// over the runs. Linux (/proc).
//
// Usage: node bench/container-memory.ts [--runs 3] [--plan-mib 256] [--seconds 4] [--clients 8]
//          [--options '{"server_config":{...}}']

import { readFile } from 'node:fs/promises';
import { request } from 'node:http';
import { parseArgs } from 'node:util';
import type { PartialOptions } from '../src/storage/options.ts';
import { tracesRequest } from './otlp-payloads.ts';
import { peakRssMiB, startServer } from './server-harness.ts';

const MiB = 1024 * 1024;

const { values } = parseArgs({
  options: {
    runs: { type: 'string', default: '3' },
    'plan-mib': { type: 'string', default: '256' },
    seconds: { type: 'string', default: '4' },
    clients: { type: 'string', default: '8' },
    options: { type: 'string', default: '{}' },
  },
});
const extra = JSON.parse(values.options) as PartialOptions;
const options: PartialOptions = {
  durability: 'wal',
  ...extra,
  server_config: { memory_limit_bytes: Number(values['plan-mib']) * MiB, ...extra.server_config },
};
// Four distinct bodies, as the Collector's batches differ.
const bodies = [1, 2, 3, 4].map((seed) => Buffer.from(JSON.stringify(tracesRequest(8192, seed))));
console.log(
  `${values.clients} clients x ${(bodies[0]!.length / MiB).toFixed(1)} MiB bodies for ${values.seconds} s; ` +
    `planning for ${values['plan-mib']} MiB; options ${JSON.stringify(options)}`,
);
const peaks: number[] = [];
const idles: number[] = [];
for (let run = 1; run <= Number(values.runs); run++) {
  const r = await oneRun();
  peaks.push(r.peakAnon);
  idles.push(r.idleAnon);
  console.log(
    `run ${run}: answers ${JSON.stringify(r.statuses)}, peak anonymous ${r.peakAnon} MiB, peak RSS ` +
      `${r.peakRss} MiB, anonymous 3 s later ${r.idleAnon} MiB, rows written ${r.rows}`,
  );
}
console.log(
  `peak anonymous ${Math.min(...peaks)}-${Math.max(...peaks)} MiB, 3 s later ${Math.min(...idles)}-${Math.max(...idles)} MiB`,
);

async function oneRun() {
  const server = await startServer(options);
  try {
    const anon = async () =>
      Math.round(
        Number(/^RssAnon:\s+(\d+)/m.exec(await readFile(`/proc/${server.pid}/status`, 'latin1'))![1]) / 1024,
      );
    let peakAnon = 0;
    const sampler = setInterval(() => {
      anon().then(
        (a) => {
          peakAnon = Math.max(peakAnon, a);
        },
        () => {},
      );
    }, 20);
    const statuses: Record<number, number> = {};
    const until = Date.now() + Number(values.seconds) * 1000;
    await Promise.all(
      Array.from({ length: Number(values.clients) }, async (_, c) => {
        for (let i = c; Date.now() < until; i++) {
          const status = await post(server.url, bodies[i % bodies.length]!);
          statuses[status] = (statuses[status] ?? 0) + 1;
          if (status !== 200) await new Promise((r) => setTimeout(r, status === 0 ? 500 : 100));
        }
      }),
    );
    clearInterval(sampler);
    const peakRss = await peakRssMiB(server.pid);
    await new Promise((r) => setTimeout(r, 3000));
    const health = (await (await fetch(`${server.url}/healthz`)).json()) as {
      aggregator: { rows_written: number };
    };
    return { statuses, peakAnon, peakRss, idleAnon: await anon(), rows: health.aggregator.rows_written };
  } finally {
    await server.stop();
  }
}

/** POSTs a traces body; the status, or 0 when the connection ended without an answer. */
function post(url: string, body: Buffer): Promise<number> {
  return new Promise((resolve) => {
    const req = request(
      `${url}/v1/traces`,
      { method: 'POST', headers: { 'content-type': 'application/json', 'x-project-id': 'bench' } },
      (res) => {
        res.resume();
        res.on('end', () => resolve(res.statusCode!));
      },
    );
    req.on('error', () => resolve(0));
    req.end(body);
  });
}
