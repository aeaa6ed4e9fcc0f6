// Slow and stalled uploads against an otelake server in its own process (runServer), over raw
// sockets: what they cost the server in memory, and how long they keep their connections.
//
//   stalled: N connections each announce --declared-mb of body, send --sent-mb of it, then stall.
//   trickle: N connections each announce a small body and send it one byte every 100 ms.
//
// Prints the server's RSS at rest, its peak RSS (VmHWM) and the largest RSS sampled while the
// connections are open, how each connection ended (the status line the server sent, or none), and
// when the server closed them (or how many were still open after --observe seconds).
//
// Usage: node bench/slow-uploads.ts [--scenario stalled|trickle] [--connections 60]
//          [--declared-mb 60] [--sent-mb 50] [--observe 120] [--options '{"server_config":{...}}']

import { spawn } from 'node:child_process';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { connect, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { parseArgs } from 'node:util';
import type { PartialOptions } from '../src/storage/options.ts';

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
      scenario: { type: 'string', default: 'stalled' },
      connections: { type: 'string', default: '60' },
      'declared-mb': { type: 'string', default: '60' },
      'sent-mb': { type: 'string', default: '50' },
      observe: { type: 'string', default: '120' },
      options: { type: 'string', default: '{}' },
    },
  });
  const scenario = values.scenario!;
  const n = Number(values.connections);
  const MB = 1_000_000;
  const declared = Number(values['declared-mb']) * MB;
  const sent = Number(values['sent-mb']) * MB;
  const observeMs = Number(values.observe) * 1000;

  const dir = await mkdtemp(join(tmpdir(), 'otelake-slow-'));
  const options = { durability: 'memory', ...JSON.parse(values.options!) };
  const child = spawn(
    process.execPath,
    [new URL(import.meta.url).pathname, '--serve', dir, JSON.stringify(options)],
    {
      stdio: ['ignore', 'pipe', 'inherit'],
    },
  );
  const port = await new Promise<number>((resolve, reject) => {
    createInterface({ input: child.stdout! }).on('line', (line) => {
      const m = /listening on http:\/\/[^:]+:(\d+)/.exec(line);
      if (m) resolve(Number(m[1]));
    });
    child.once('exit', () => reject(new Error('server exited early')));
  });
  const status = async (field: string): Promise<number> => {
    const text = await readFile(`/proc/${child.pid}/status`, 'utf8');
    return Number(new RegExp(`${field}:\\s+(\\d+) kB`).exec(text)![1]) * 1024;
  };
  await new Promise((r) => setTimeout(r, 1000));
  const atRest = await status('VmRSS');
  let sampled = atRest;
  const sampler = setInterval(() => {
    status('VmRSS').then(
      (r) => {
        sampled = Math.max(sampled, r);
      },
      () => {},
    );
  }, 100);

  const t0 = Date.now();
  const ends: ({ line: string; s: number } | null)[] = new Array(n).fill(null);
  const sockets: Socket[] = [];
  const write = (s: Socket, data: string | Buffer) =>
    new Promise<void>((resolve) => {
      if (s.destroyed || s.write(data)) return resolve();
      const done = () => {
        s.off('drain', done);
        s.off('close', done);
        resolve();
      };
      s.once('drain', done);
      s.once('close', done);
    });
  const head = (length: number) =>
    `POST /v1/logs HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: ${length}\r\n\r\n`;
  const trickleBody = JSON.stringify({ resourceLogs: [] }).padEnd(2000, ' ');
  let stop = false;
  const clients = Array.from({ length: n }, async (_, i) => {
    const s = connect(port, '127.0.0.1');
    sockets.push(s);
    let got = '';
    s.setEncoding('latin1');
    s.on('data', (d: string) => {
      got += d;
    });
    s.on('error', () => {});
    s.once('close', () => {
      ends[i] = { line: got.split('\r\n')[0] || '(closed without an answer)', s: (Date.now() - t0) / 1000 };
    });
    if (scenario === 'stalled') {
      await write(s, head(declared));
      const chunk = Buffer.alloc(1 << 20, 'x');
      for (let k = 0; k < sent && !s.destroyed; k += chunk.length)
        await write(s, chunk.subarray(0, Math.min(chunk.length, sent - k)));
    } else {
      await write(s, head(trickleBody.length));
      for (let k = 0; k < trickleBody.length && !s.destroyed && !stop; k++) {
        s.write(trickleBody[k]!);
        await new Promise((r) => setTimeout(r, 100));
      }
    }
  });
  const deadline = Date.now() + observeMs;
  while (Date.now() < deadline && ends.some((e) => e === null)) await new Promise((r) => setTimeout(r, 200));
  stop = true;
  clearInterval(sampler);
  const peak = await status('VmHWM');
  const closed = ends.filter((e): e is { line: string; s: number } => e !== null);
  for (const s of sockets) s.destroy();
  await Promise.all(clients);

  const mib = (b: number) => `${(b / 1048576).toFixed(0)} MiB`;
  const byLine = new Map<string, number[]>();
  for (const e of closed) byLine.set(e.line, [...(byLine.get(e.line) ?? []), e.s]);
  console.log(
    `${scenario}: ${n} connections` +
      (scenario === 'stalled'
        ? `, ${values['declared-mb']} MB declared, ${values['sent-mb']} MB sent each`
        : '') +
      `; options ${JSON.stringify(options)}`,
  );
  console.log(
    `server RSS at rest ${mib(atRest)}, largest sampled ${mib(sampled)}, peak (VmHWM) ${mib(peak)}`,
  );
  for (const [line, times] of byLine) {
    times.sort((a, b) => a - b);
    console.log(
      `  ${times.length} closed by the server with "${line}" after ${times[0]!.toFixed(1)}-${times.at(-1)!.toFixed(1)} s`,
    );
  }
  console.log(`  ${n - closed.length} still open after ${values.observe} s`);

  child.kill('SIGTERM');
  await new Promise((r) => child.once('exit', r));
  await rm(dir, { recursive: true, force: true });
}
