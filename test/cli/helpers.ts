// Runs the otelake launcher as a user would (a separate process) and finds free local ports.

import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { processExists, processState } from '../../src/storage/process-lock.ts';

export const LAUNCHER = fileURLToPath(new URL('../../bin/otelake.js', import.meta.url));

export interface RunResult {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

export interface RunOptions {
  cwd?: string;
  env?: NodeJS.ProcessEnv;
  /** Kill the command after this many ms (a test must never hang). */
  timeoutMs?: number;
}

/** Runs a command with stdin closed and collects its output; resolves when it exits. */
export function runProcess(command: string, args: readonly string[], o: RunOptions = {}): Promise<RunResult> {
  return new Promise((done, fail) => {
    const child = spawn(command, args, {
      cwd: o.cwd,
      env: { ...process.env, ...o.env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (d: string) => {
      stdout += d;
    });
    child.stderr.setEncoding('utf8').on('data', (d: string) => {
      stderr += d;
    });
    const timer = setTimeout(() => child.kill('SIGKILL'), o.timeoutMs ?? 60_000);
    child.on('error', fail);
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      done({ code, signal, stdout, stderr });
    });
  });
}

/** `otelake <args>` with stdin closed; resolves when it exits. */
export function otelake(args: readonly string[], o: RunOptions = {}): Promise<RunResult> {
  return runProcess(process.execPath, [LAUNCHER, ...args], o);
}

export async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((ok) => server.listen(0, '127.0.0.1', ok));
  const address = server.address();
  await new Promise<void>((ok) => server.close(() => ok()));
  if (typeof address !== 'object' || address === null) throw new Error('no port');
  return address.port;
}

export async function tempDir(prefix: string): Promise<{ path: string; remove: () => Promise<void> }> {
  const path = await mkdtemp(join(tmpdir(), `otelake-cli-${prefix}-`));
  return { path, remove: () => rm(path, { recursive: true, force: true }) };
}

/** Whether the process runs: an exited one that its parent has yet to collect (a zombie) does not. */
export function alive(pid: number): boolean {
  return processExists(pid) && processState(pid) !== 'Z';
}

export async function waitFor(
  what: string,
  check: () => boolean | Promise<boolean>,
  timeoutMs = 30_000,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** Kills a process we started if it is still there (test cleanup). */
export function killQuietly(target: ChildProcess | number | undefined): void {
  const pid = typeof target === 'number' ? target : target?.pid;
  if (pid === undefined) return;
  try {
    process.kill(pid, 'SIGKILL');
  } catch {
    // already gone
  }
}
