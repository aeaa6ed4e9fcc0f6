// CLI latency: how long each `otelake` command takes from the shell's point of view (process
// start to exit, start-up included), beside `node -e 0`, the floor no Node CLI goes below. Each
// command runs with Node's compile cache (the launcher's default) and without it
// (NODE_DISABLE_COMPILE_CACHE=1), the two alternating run by run so that a drift of the machine's
// speed hits both alike.
//
//   node bench/cli-latency.ts [runs]          (default 15 runs per command and cache setting)
//
// Set up in a temporary folder: an initialized instance with 20 log rows written (for `view`), a
// background server of it on a free loopback port (for `status`, found from the instance alone).
// `stop` is measured twice: with no server running (what the command itself costs), and stopping
// a real background server (includes that server's flush and exit; a new one is started, untimed,
// before each of 5 runs). CPU is the mean per run of the children's user + system time, read from
// /proc/self/stat (Linux only; 10 ms clock ticks, so a mean over the runs).

import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Logger } from '../src/index.ts';
import { freePort } from '../test/cli/helpers.ts';

const RUNS = Number(process.argv[2] ?? 15);
const LAUNCHER = fileURLToPath(new URL('../bin/otelake.js', import.meta.url));
const NO_CACHE = { NODE_DISABLE_COMPILE_CACHE: '1' };

/** CPU seconds of the children this process has waited for (Linux), or null. */
function childrenCpu(): number | null {
  try {
    const stat = readFileSync('/proc/self/stat', 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    // Fields 16 and 17 of stat (cutime, cstime), counted from 1 with pid and comm before ')'.
    return (Number(fields[13]) + Number(fields[14])) / 100;
  } catch {
    return null;
  }
}

interface Run {
  ms: number;
  code: number | null;
  output: string;
}

function run(args: string[], cwd: string, env: Record<string, string> = {}): Promise<Run> {
  return new Promise((resolve, reject) => {
    const t0 = process.hrtime.bigint();
    const child = spawn(process.execPath, args, { cwd, env: { ...process.env, ...env } });
    let output = '';
    child.stdout.on('data', (c: Buffer) => {
      output += c;
    });
    child.stderr.on('data', (c: Buffer) => {
      output += c;
    });
    child.on('error', reject);
    child.on('close', (code) => resolve({ ms: Number(process.hrtime.bigint() - t0) / 1e6, code, output }));
  });
}

const otelake = (args: string[], cwd: string, env?: Record<string, string>) =>
  run([LAUNCHER, ...args], cwd, env);

interface Figures {
  median: number;
  p90: number;
  min: number;
  max: number;
  cpuMs: number | null;
}

function figures(ms: number[], cpuSeconds: number | null): Figures {
  const s = [...ms].sort((a, b) => a - b);
  const at = (q: number) => s[Math.min(s.length - 1, Math.floor(q * s.length))]!;
  return {
    median: at(0.5),
    p90: at(0.9),
    min: s[0]!,
    max: s[s.length - 1]!,
    cpuMs: cpuSeconds === null ? null : (cpuSeconds * 1000) / ms.length,
  };
}

/** Runs `make()` RUNS times per setting, the settings alternating; checks each exit code. */
async function measure(
  name: string,
  settings: Record<string, () => Promise<Run>>,
  expectCode: number,
  runs = RUNS,
  before?: () => Promise<void>,
): Promise<Record<string, Figures>> {
  const times: Record<string, number[]> = {};
  const cpu: Record<string, number | null> = {};
  for (const key of Object.keys(settings)) {
    times[key] = [];
    cpu[key] = 0;
  }
  for (let i = 0; i < runs; i++) {
    for (const [key, make] of Object.entries(settings)) {
      await before?.();
      const c0 = childrenCpu();
      const r = await make();
      const c1 = childrenCpu();
      if (r.code !== expectCode) {
        throw new Error(`${name} (${key}) exited ${r.code}, expected ${expectCode}:\n${r.output}`);
      }
      times[key]!.push(r.ms);
      cpu[key] = c0 === null || c1 === null || cpu[key] === null ? null : cpu[key]! + (c1 - c0);
    }
  }
  return Object.fromEntries(Object.keys(settings).map((k) => [k, figures(times[k]!, cpu[k]!)]));
}

const f0 = (x: number | null) => (x === null ? '-' : x.toFixed(0));

const work = await mkdtemp(join(tmpdir(), 'otelake-cli-latency-'));
const port = await freePort();
const rows: [string, Record<string, Figures>][] = [];
try {
  // An instance with a small logs table, and a background server of it.
  const logger = await Logger.open({ instanceId: 'default', instanceDir: join(work, 'svc_data') });
  const now = BigInt(Date.now()) * 1_000_000n;
  for (let i = 0; i < 20; i++) {
    await logger.ingestLog({
      project_id: 'bench',
      service_name: 'checkout',
      time_unix_nano: now + BigInt(i),
      severity_number: 9,
      severity_text: 'INFO',
      body: `request ${i} done`,
    });
  }
  await logger.stop({ flush: 'auto' });
  const start = () => otelake(['start', '-H', '127.0.0.1', '-P', String(port)], work);
  const started = await start();
  if (started.code !== 0) throw new Error(`start failed:\n${started.output}`);

  const both = (args: string[]) => ({
    cache: () => otelake(args, work),
    'no cache': () => otelake(args, work, NO_CACHE),
  });
  // Warm the compile cache (and the file system cache) once.
  for (const args of [['--version'], ['status'], ['view', '-t', 'logs']]) await otelake(args, work);

  rows.push(['node -e 0', await measure('node -e 0', { cache: () => run(['-e', '0'], work) }, 0)]);
  rows.push(['otelake --version', await measure('--version', both(['--version']), 0)]);
  rows.push(['otelake --help', await measure('--help', both(['--help']), 0)]);
  rows.push(['otelake init (existing instance)', await measure('init', both(['init']), 0)]);
  rows.push([
    'otelake status (server found from the instance)',
    await measure('status', both(['status']), 0),
  ]);
  rows.push([
    'otelake view -t logs (20 rows, newest 10)',
    await measure('view', both(['view', '-t', 'logs']), 0),
  ]);
  const stopped = await otelake(['stop'], work);
  if (stopped.code !== 0) throw new Error(`stop failed:\n${stopped.output}`);
  rows.push(['otelake stop (no server running)', await measure('stop', both(['stop']), 1)]);
  rows.push([
    'otelake stop (a running background server)',
    await measure(
      'stop (server)',
      { cache: () => otelake(['stop'], work) },
      0,
      Math.min(RUNS, 5),
      async () => {
        const r = await start();
        if (r.code !== 0) throw new Error(`start failed:\n${r.output}`);
      },
    ),
  ]);
} finally {
  await otelake(['stop', '--force'], work);
  await rm(work, { recursive: true, force: true });
}

console.log(`otelake CLI latency, ${RUNS} runs per command and setting (wall ms; CPU ms = mean per run)`);
console.log(`node ${process.version}, ${process.platform}/${process.arch}\n`);
const header = ['command', 'median', 'p90', 'min', 'max', 'CPU', 'no cache: median', 'p90', 'CPU'];
const table = rows.map(([name, r]) => {
  const a = r['cache']!;
  const b = r['no cache'];
  return [
    name,
    f0(a.median),
    f0(a.p90),
    f0(a.min),
    f0(a.max),
    f0(a.cpuMs),
    b ? f0(b.median) : '',
    b ? f0(b.p90) : '',
    b ? f0(b.cpuMs) : '',
  ];
});
const widths = header.map((h, i) => Math.max(h.length, ...table.map((r) => r[i]!.length)));
const line = (cells: string[]) =>
  cells.map((c, i) => (i === 0 ? c.padEnd(widths[i]!) : c.padStart(widths[i]!))).join('  ');
console.log(line(header));
for (const r of table) console.log(line(r));
