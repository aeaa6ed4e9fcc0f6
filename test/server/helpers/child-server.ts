// A server in a child process (run-server.ts: runServer as `otelake start --foreground` runs it),
// for tests that measure or stop the server process itself.

import { type ChildProcess, spawn } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { readFile, writeFile } from 'node:fs/promises';
import { createInterface } from 'node:readline';
import type { PartialOptions } from '../../../src/storage/options.ts';

const CHILD = new URL('./run-server.ts', import.meta.url).pathname;

export interface ChildServer {
  url: string;
  pid: number;
  child: ChildProcess;
  /** The server's log messages so far. */
  messages: string[];
  /** SIGTERM, then the exit code. */
  stop(): Promise<number | null>;
}

/** How the child starts, beyond `node run-server.ts`. */
export interface ChildLaunch {
  /**
   * Shell commands the server's shell runs before it becomes the server (`sh -c '<setup> && exec
   * node ...'`): a `ulimit`, joining a cgroup.
   */
  setup?: string;
  /** Node flags before the script (e.g. the server's own, SERVER_NODE_FLAGS). */
  nodeFlags?: readonly string[];
  /** Variables added to the environment. */
  env?: Record<string, string>;
}

export async function startChildServer(
  dir: string,
  instanceId: string,
  options: PartialOptions = {},
  launch: ChildLaunch = {},
): Promise<ChildServer> {
  const args = [...(launch.nodeFlags ?? []), CHILD, dir, instanceId, JSON.stringify(options)];
  const child = spawn(
    launch.setup === undefined ? process.execPath : 'sh',
    launch.setup === undefined
      ? args
      : ['-c', `${launch.setup} && exec "$0" "$@"`, process.execPath, ...args],
    { stdio: ['ignore', 'pipe', 'inherit'], env: { ...process.env, ...launch.env } },
  );
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  const messages: string[] = [];
  const url = await new Promise<string>((resolve, reject) => {
    createInterface({ input: child.stdout! }).on('line', (line) => {
      const msg = (JSON.parse(line) as { msg: string }).msg;
      messages.push(msg);
      const m = /listening on (http:\/\/\S+)/.exec(msg);
      if (m) resolve(m[1]!);
    });
    child.on('exit', () => reject(new Error(`server exited early: ${messages.join(' | ')}`)));
  });
  return {
    url,
    pid: child.pid!,
    child,
    messages,
    async stop() {
      if (child.exitCode === null) child.kill('SIGTERM');
      return exited;
    },
  };
}

/** A field of /proc/<pid>/status in MiB (Linux). */
export async function memoryMiB(pid: number, field: 'VmRSS' | 'VmHWM' | 'RssAnon'): Promise<number> {
  const status = await readFile(`/proc/${pid}/status`, 'utf8');
  const kb = Number(new RegExp(`${field}:\\s+(\\d+) kB`).exec(status)?.[1]);
  if (!Number.isFinite(kb)) throw new Error(`no ${field} in /proc/${pid}/status`);
  return kb / 1024;
}

/** Resets the peak RSS (VmHWM) of a process to its current RSS (Linux). */
export async function resetPeakRss(pid: number): Promise<void> {
  await writeFile(`/proc/${pid}/clear_refs`, '5');
}

/** The child processes of `pid` (Linux): a server's read processes. */
export function childPids(pid: number): number[] {
  return readdirSync(`/proc/${pid}/task`).flatMap((t) => {
    try {
      return readFileSync(`/proc/${pid}/task/${t}/children`, 'latin1')
        .split(/\s+/)
        .filter(Boolean)
        .map(Number);
    } catch {
      return []; // a thread that ended meanwhile
    }
  });
}

/** The largest peak RSS (VmHWM, MiB) of `pid`'s child processes alive now; 0 when none is. */
export async function childrenPeakMiB(pid: number): Promise<number> {
  let peak = 0;
  for (const child of childPids(pid)) {
    const hwm = await memoryMiB(child, 'VmHWM').catch(() => 0); // it ended meanwhile
    peak = Math.max(peak, hwm);
  }
  return peak;
}
