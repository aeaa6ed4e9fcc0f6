// The server's memory in a container under the Collector's largest requests: eight clients each
// send 8,192 spans (~7.2 MB of JSON) a request, the next once answered (503s retried after 100
// ms), for --seconds. The server runs in a memory cgroup of --cgroup-mib (room to spare, so that
// the peak is measured rather than cut off by the kernel), planning for --plan-mib
// (server_config.memory_limit_bytes) with otelake start's flags and malloc settings.
//
// Prints per run: the answers, the server's peak anonymous memory (RssAnon sampled every 20 ms)
// and the cgroup's peak usage while loaded, and its anonymous memory 3 s after the load; then the
// ranges over the runs. Linux, root (it makes the cgroup; v1 or v2).
//
// Usage: node bench/container-memory.ts [--runs 3] [--plan-mib 256] [--cgroup-mib 1024]
//          [--seconds 4] [--clients 8] [--options '{"server_config":{...}}']

import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, readFile, rm, rmdir, writeFile } from 'node:fs/promises';
import { request } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { parseArgs } from 'node:util';
import { withServerEnv, withServerFlags } from '../src/server/node-flags.ts';
import type { PartialOptions } from '../src/storage/options.ts';
import { tracesRequest } from './otlp-payloads.ts';

const MiB = 1024 * 1024;

if (process.argv[2] === '--serve') {
  const { runServer } = await import('../src/server/index.ts');
  const [dir, options] = process.argv.slice(3);
  await runServer({
    dir: dir!,
    instanceId: 'bench',
    host: '127.0.0.1',
    port: 0,
    options: JSON.parse(options!) as PartialOptions,
    log: { level: 'info' },
  });
} else {
  await main();
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      runs: { type: 'string', default: '3' },
      'plan-mib': { type: 'string', default: '256' },
      'cgroup-mib': { type: 'string', default: '1024' },
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
      `planning for ${values['plan-mib']} MiB in a ${values['cgroup-mib']} MiB cgroup; options ${JSON.stringify(options)}`,
  );
  const peaks: number[] = [];
  const idles: number[] = [];
  for (let run = 1; run <= Number(values.runs); run++) {
    const r = await oneRun(options, bodies, Number(values['cgroup-mib']) * MiB, values);
    peaks.push(r.peakAnon);
    idles.push(r.idleAnon);
    console.log(
      `run ${run}: answers ${JSON.stringify(r.statuses)}, peak anonymous ${r.peakAnon} MiB, cgroup peak ` +
        `${r.cgroupPeak} MiB, anonymous 3 s later ${r.idleAnon} MiB, rows written ${r.rows}`,
    );
  }
  console.log(
    `peak anonymous ${Math.min(...peaks)}-${Math.max(...peaks)} MiB, 3 s later ${Math.min(...idles)}-${Math.max(...idles)} MiB`,
  );
}

async function oneRun(
  options: PartialOptions,
  bodies: Buffer[],
  cgroupBytes: number,
  values: { seconds: string; clients: string },
) {
  const cgroup = await memoryCgroup(cgroupBytes);
  const dir = await mkdtemp(join(tmpdir(), 'otelake-container-memory-'));
  const script = new URL(import.meta.url).pathname;
  const args = [...withServerFlags([]), script, '--serve', dir, JSON.stringify(options)];
  const child = spawn(
    'sh',
    ['-c', `echo $$ > "${cgroup.procs}" && exec "$0" "$@"`, process.execPath, ...args],
    {
      stdio: ['ignore', 'pipe', 'inherit'],
      env: withServerEnv(process.env),
    },
  );
  try {
    const url = await new Promise<string>((resolve, reject) => {
      createInterface({ input: child.stdout! }).on('line', (line) => {
        const m = /listening on (http:\/\/[^\s"]+)/.exec(line);
        if (m) resolve(m[1]!);
      });
      child.once('exit', () => reject(new Error('the server exited before listening')));
      setTimeout(() => reject(new Error('the server did not listen within 30 s')), 30_000).unref();
    });
    const anon = async () =>
      Math.round(
        Number(/^RssAnon:\s+(\d+)/m.exec(await readFile(`/proc/${child.pid}/status`, 'latin1'))![1]) / 1024,
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
          const status = await post(url, bodies[i % bodies.length]!);
          statuses[status] = (statuses[status] ?? 0) + 1;
          if (status !== 200) await new Promise((r) => setTimeout(r, status === 0 ? 500 : 100));
        }
      }),
    );
    clearInterval(sampler);
    const cgroupPeak = Math.round(Number(await readFile(cgroup.peakFile, 'utf8')) / MiB);
    await new Promise((r) => setTimeout(r, 3000));
    const health = (await (await fetch(`${url}/healthz`)).json()) as { aggregator: { rows_written: number } };
    return { statuses, peakAnon, cgroupPeak, idleAnon: await anon(), rows: health.aggregator.rows_written };
  } finally {
    const exited = new Promise((r) => child.once('exit', r));
    child.kill('SIGKILL');
    await exited;
    await cgroup.remove();
    await rm(dir, { recursive: true, force: true });
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

/** A new memory cgroup limited to `bytes` (v1 or v2). */
async function memoryCgroup(bytes: number) {
  const name = `otelake-bench-${process.pid}-${Date.now()}`;
  const v1 = '/sys/fs/cgroup/memory';
  if (existsSync(join(v1, 'memory.limit_in_bytes'))) {
    const dir = join(v1, name);
    await mkdir(dir);
    await writeFile(join(dir, 'memory.limit_in_bytes'), String(bytes));
    return {
      procs: join(dir, 'cgroup.procs'),
      peakFile: join(dir, 'memory.max_usage_in_bytes'),
      remove: () => rmdir(dir),
    };
  }
  const dir = join('/sys/fs/cgroup', name);
  await mkdir(dir);
  await writeFile(join(dir, 'memory.max'), String(bytes));
  return { procs: join(dir, 'cgroup.procs'), peakFile: join(dir, 'memory.peak'), remove: () => rmdir(dir) };
}
