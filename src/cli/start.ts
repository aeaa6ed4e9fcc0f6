// `otelake start`: in the background by default (a detached `start --foreground` child writing to
// the instance's server log), in this terminal with --foreground, and with --reload a supervisor
// that restarts the server child whenever the code changes.

import { type ChildProcess, spawn } from 'node:child_process';
import { watch } from 'node:fs';
import { mkdir, open, readFile, rename, stat } from 'node:fs/promises';
import { createServer } from 'node:net';
import { dirname, resolve } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { isLoopback } from '../server/loopback.ts';
import { becomeServerProcess, withServerEnv, withServerFlags } from '../server/node-flags.ts';
import { InstanceLayout } from '../storage/layout.ts';
import { bindError } from './bind.ts';
import { CliError, UsageError } from './errors.ts';
import type { BoundStartFlags, StartFlags } from './flags.ts';
import { baseUrl, getJson, reachableHost } from './http.ts';
import { claimPidFile, processAlive, readPid, removePidFile, removePidFileSync } from './pidfile.ts';
import { removeServerAddress, savedServerConfig, writeServerAddress } from './server-address.ts';
import { StopSignals } from './stop-signals.ts';

/** The launcher, at the same place relative to src/cli and dist/cli. */
const LAUNCHER = fileURLToPath(new URL('../../bin/otelake.js', import.meta.url));
/** The code the --reload supervisor watches: src/ in a checkout, dist/ when installed. */
const CODE_ROOT = fileURLToPath(new URL('..', import.meta.url));

/** Seconds the background start waits for the server to answer; OTELAKE_START_TIMEOUT_S overrides. */
function startTimeoutSeconds(): number {
  const fromEnv = Number(process.env.OTELAKE_START_TIMEOUT_S);
  return Number.isFinite(fromEnv) && fromEnv > 0 ? fromEnv : 60;
}

export async function startCommand(given: StartFlags): Promise<void> {
  if (given.reload && !given.foreground) {
    throw new UsageError(
      '--reload is only supported with --foreground (use: otelake start --foreground --reload)',
    );
  }
  const layout = new InstanceLayout(given.dir, given.instanceId);
  const flags = await bindAddress(given, layout);
  if (!flags.foreground) return startInBackground(flags, layout);
  if (flags.reload) return superviseWithReload(flags, layout);
  return runInForeground(flags, layout);
}

/** --host and --port, else the instance's saved server_config (its defaults without options.json). */
async function bindAddress(flags: StartFlags, layout: InstanceLayout): Promise<BoundStartFlags> {
  if (flags.host !== undefined && flags.port !== undefined)
    return { ...flags, host: flags.host, port: flags.port };
  const server = await savedServerConfig(layout);
  return { ...flags, host: flags.host ?? server.host, port: flags.port ?? server.port };
}

function alreadyRunning(layout: InstanceLayout, pid: number): CliError {
  return new CliError(
    `otelake is already running for instance '${layout.instanceId}' (pid ${pid}); stop it first with 'otelake stop'`,
  );
}

/** Fails fast and clearly when the port cannot be bound (the server would fail the same way). */
async function checkPortFree(host: string, port: number): Promise<void> {
  const probe = createServer();
  try {
    await new Promise<void>((ok, fail) => {
      probe.once('error', fail);
      probe.listen({ host, port, exclusive: true }, ok);
    });
  } catch (err) {
    throw bindError(err, host, port) ?? err;
  } finally {
    await new Promise<void>((ok) => probe.close(() => ok()));
  }
}

/** Removes a pidfile left by a server that died; refuses when its process still lives. */
async function clearStalePidFile(layout: InstanceLayout): Promise<void> {
  const pid = await readPid(layout.pidFile);
  if (pid === undefined) return;
  if (pid > 0 && processAlive(pid)) throw alreadyRunning(layout, pid);
  await removePidFile(layout.pidFile, pid);
  process.stderr.write(
    `removed a stale pidfile (${pid > 0 ? `process ${pid}` : 'unreadable'}): the previous server did not stop cleanly\n`,
  );
}

async function logTail(file: string, from: number, lines = 20): Promise<string> {
  const text = await readFile(file, 'utf8').catch(() => '');
  const tail = text.slice(from).trimEnd().split('\n').slice(-lines);
  return tail.map((l) => `  | ${l}`).join('\n');
}

/** The server log is appended to by every start; past this size it is kept as `.1` and restarted. */
const LOG_ROTATE_BYTES = 16 * 1024 * 1024;

async function rotateLog(file: string): Promise<void> {
  const size = await stat(file).then(
    (s) => s.size,
    () => 0,
  );
  if (size > LOG_ROTATE_BYTES) await rename(file, `${file}.1`);
}

/** The command line of a server process running `start --foreground` for these flags. */
function foregroundArgs(layout: InstanceLayout, flags: BoundStartFlags, extra: string[] = []): string[] {
  return [
    ...withServerFlags(process.execArgv),
    LAUNCHER,
    'start',
    '--foreground',
    ...extra,
    '--instance-id',
    layout.instanceId,
    '--dir',
    resolve(flags.dir),
    '--host',
    flags.host,
    '--port',
    String(flags.port),
  ];
}

async function startInBackground(flags: BoundStartFlags, layout: InstanceLayout): Promise<void> {
  await clearStalePidFile(layout);
  await checkPortFree(flags.host, flags.port);

  const logFile = layout.serverLog;
  await mkdir(dirname(logFile), { recursive: true });
  await rotateLog(logFile);
  const log = await open(logFile, 'a');
  const logStart = (await stat(logFile)).size;
  let child: ChildProcess;
  try {
    // A full disk takes the header, not the start: the server's own lines are dropped likewise.
    await log.write(`--- otelake start ${new Date().toISOString()} ---\n`).catch(() => {});
    const args = foregroundArgs(layout, flags);
    child = spawn(process.execPath, args, {
      env: withServerEnv(process.env),
      detached: true,
      stdio: ['ignore', log.fd, log.fd],
      windowsHide: true,
    });
  } finally {
    await log.close();
  }
  let exited: { code: number | null; signal: NodeJS.Signals | null } | undefined;
  child.once('exit', (code, signal) => {
    exited = { code, signal };
  });
  const spawnError = new Promise<Error>((ok) => child.once('error', ok));
  child.unref();

  const url = baseUrl(reachableHost(flags.host), flags.port);
  const deadline = Date.now() + startTimeoutSeconds() * 1000;
  let failure: Error | undefined;
  void spawnError.then((err) => {
    failure = err;
  });
  let health: Awaited<ReturnType<typeof getJson>>;
  for (;;) {
    if (failure) throw new CliError(`could not launch the server: ${failure.message}`);
    if (exited) {
      const how = exited.signal ? `signal ${exited.signal}` : `exit code ${exited.code}`;
      const tail = await logTail(logFile, logStart);
      throw new CliError(`the server stopped during startup (${how}); ${logFile} ends with:\n${tail}`);
    }
    health = await getJson(`${url}/healthz`, 2);
    if (health.ok && (await readPid(layout.pidFile)) === child.pid) break;
    if (Date.now() > deadline) {
      throw new CliError(
        `the server (pid ${child.pid}) did not answer on ${url} within ${startTimeoutSeconds()} s; ` +
          `it may still be starting: see ${logFile}, or stop it with 'otelake stop'`,
      );
    }
    await sleep(150);
  }
  process.stdout.write(`otelake listening on ${baseUrl(flags.host, flags.port)} (pid ${child.pid})\n`);
  process.stdout.write(`  log: ${logFile}\n`);
  const auth = health.ok ? (health.body as { auth?: { enabled?: boolean } }).auth : undefined;
  process.stdout.write(
    auth?.enabled
      ? '  auth: on (requests need a token: Authorization: Bearer <token>)\n'
      : `  auth: off (no token; 'otelake token create' makes one)${isLoopback(flags.host) ? '' : ': anyone who can reach the port can write and read'}\n`,
  );
}

/** Runs the server in this process until SIGINT/SIGTERM, holding the pidfile meanwhile. */
async function runInForeground(flags: BoundStartFlags, layout: InstanceLayout): Promise<void> {
  // The heaps and malloc's arenas are sized as the process starts (node-flags.ts).
  becomeServerProcess();
  const signals = new StopSignals(() => {
    if (flags.pidfile) removePidFileSync(layout.pidFile, process.pid);
    process.exit(1);
  });
  try {
    if (flags.pidfile) {
      const claim = await claimPidFile(layout.pidFile);
      if (!claim.claimed) throw alreadyRunning(layout, claim.runningPid);
      if (claim.stalePid !== undefined) {
        process.stderr.write(
          `removed a stale pidfile (process ${claim.stalePid}): the previous server did not stop cleanly\n`,
        );
      }
    }
    try {
      const { serveUntilStopped } = await import('./serve.ts');
      await serveUntilStopped(flags, layout, signals, {
        onListening: async (port) => {
          if (!flags.pidfile) return;
          // Without it (a full disk) the server still serves: status and stop find it by the pidfile
          // and the saved options, unless --host or --port moved it.
          await recordAddress(layout, flags.host, port).catch((err: Error) =>
            process.stderr.write(`otelake warning: cannot record where the server listens: ${err.message}\n`),
          );
        },
      });
    } finally {
      if (flags.pidfile) await forgetServer(layout);
    }
  } finally {
    signals.close();
  }
}

/** Beside the pidfile: where this server listens, so that `status` and `stop` find it from -I/-D. */
function recordAddress(layout: InstanceLayout, host: string, port: number): Promise<void> {
  const url = baseUrl(reachableHost(host), port);
  return writeServerAddress(layout.addressFile, { pid: process.pid, url });
}

async function forgetServer(layout: InstanceLayout): Promise<void> {
  await removeServerAddress(layout.addressFile, process.pid);
  await removePidFile(layout.pidFile, process.pid);
}

/** A supervisor that owns the pidfile and restarts its server child when the code changes. */
async function superviseWithReload(flags: BoundStartFlags, layout: InstanceLayout): Promise<void> {
  let child: ChildProcess | undefined;
  const signals = new StopSignals(() => {
    child?.kill('SIGTERM');
    removePidFileSync(layout.pidFile, process.pid);
    process.exit(1);
  });
  try {
    const claim = await claimPidFile(layout.pidFile);
    if (!claim.claimed) throw alreadyRunning(layout, claim.runningPid);
    const say = (msg: string) => process.stderr.write(`[reload] ${msg}\n`);
    if (claim.stalePid !== undefined) say(`removed a stale pidfile (process ${claim.stalePid})`);

    const args = foregroundArgs(layout, flags, ['--no-pidfile']);
    let childExit: Promise<void> = Promise.resolve();
    let stopping = false;
    let restarting = false;

    const launch = () => {
      const c = spawn(process.execPath, args, { env: withServerEnv(process.env), stdio: 'inherit' });
      child = c;
      childExit = new Promise<void>((ok) =>
        c.once('exit', (code, signal) => {
          if (child === c) child = undefined;
          if (!stopping && !restarting) {
            say(`server exited (${signal ?? `code ${code}`}); waiting for a code change to restart`);
          }
          ok();
        }),
      );
    };
    const stopChild = async () => {
      if (child) child.kill('SIGTERM');
      await childExit;
    };

    let timer: NodeJS.Timeout | undefined;
    let changed = '';
    const watcher = watch(CODE_ROOT, { recursive: true }, (_event, name) => {
      if (stopping || !name || !/\.(ts|js|mjs|cjs|json)$/.test(String(name))) return;
      changed = String(name);
      clearTimeout(timer);
      timer = setTimeout(async () => {
        restarting = true;
        say(`${changed} changed; restarting the server`);
        await stopChild();
        restarting = false;
        if (!stopping) launch();
      }, 250);
    });

    say(`watching ${CODE_ROOT} for changes`);
    try {
      // The children bind flags.port (a port 0 would differ from one child to the next: unrecorded).
      if (flags.port !== 0) await recordAddress(layout, flags.host, flags.port);
      launch();
      await new Promise<void>((done) => {
        signals.handle(async () => {
          if (stopping) return;
          stopping = true;
          clearTimeout(timer);
          watcher.close();
          await stopChild();
          done();
        });
      });
    } finally {
      await forgetServer(layout);
    }
  } finally {
    signals.close();
  }
}
