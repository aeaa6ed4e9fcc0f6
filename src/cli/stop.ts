// `otelake stop`: SIGTERM to the pid in the instance's pidfile (found from -I/-D), then wait for
// the server to flush and exit. `--force` escalates to SIGKILL when the graceful stop takes too
// long (SIGTERM again where SIGKILL does not exist). A pidfile whose process is gone is removed.

import { open } from 'node:fs/promises';
import { constants } from 'node:os';
import { setTimeout as sleep } from 'node:timers/promises';
import { InstanceLayout } from '../storage/layout.ts';
import { CliError } from './errors.ts';
import type { StopFlags } from './flags.ts';
import { processAlive, readPid, removePidFile } from './pidfile.ts';
import { readServerAddress, removeServerAddress } from './server-address.ts';

/**
 * Seconds a graceful stop may take (flushing pending batches); OTELAKE_STOP_GRACE_S overrides.
 * Longer than the server's own 30 s for its flush, so that a flush held up by failing writes ends
 * with the server's word on what it left, not with `stop` giving up first.
 */
function graceSeconds(): number {
  const fromEnv = Number(process.env.OTELAKE_STOP_GRACE_S);
  return Number.isFinite(fromEnv) && fromEnv > 0 ? fromEnv : 45;
}

async function waitForExit(pid: number, seconds: number): Promise<boolean> {
  const deadline = Date.now() + seconds * 1000;
  while (processAlive(pid)) {
    if (Date.now() >= deadline) return false;
    await sleep(100);
  }
  return true;
}

function signal(pid: number, sig: NodeJS.Signals): void {
  try {
    process.kill(pid, sig);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'EPERM') {
      throw new CliError(`not allowed to signal the server (pid ${pid}): it runs as another user`);
    }
    // ESRCH: it exited meanwhile, which is what we want.
  }
}

async function forget(layout: InstanceLayout, pid: number): Promise<void> {
  await removeServerAddress(layout.addressFile, pid);
  await removePidFile(layout.pidFile, pid);
}

export async function stopCommand(flags: StopFlags): Promise<void> {
  const layout = new InstanceLayout(flags.dir, flags.instanceId);
  const pid = await readPid(layout.pidFile);
  if (pid === undefined) {
    throw new CliError(
      `no server is running for instance '${layout.instanceId}' (no pidfile at ${layout.pidFile})`,
    );
  }
  if (pid === 0 || !processAlive(pid)) {
    await forget(layout, pid);
    throw new CliError(
      `no server is running for instance '${layout.instanceId}': removed a stale pidfile` +
        (pid === 0 ? ' (unreadable)' : ` (process ${pid} no longer exists)`),
    );
  }

  const grace = graceSeconds();
  const address = await readServerAddress(layout.addressFile);
  const at = address?.pid === pid ? ` at ${address.url}` : '';
  process.stdout.write(`stopping otelake (pid ${pid}${at}), waiting up to ${grace} s for it to flush...\n`);
  signal(pid, 'SIGTERM');
  if (await waitForExit(pid, grace)) {
    await forget(layout, pid); // normally the server removed its files already
    // The server's own last word when its flush left rows (writes failing): how many, and where.
    process.stdout.write(`${(await leftRows(layout.serverLog)) ?? 'stopped'}\n`);
    return;
  }
  if (!flags.force) {
    throw new CliError(
      `the server (pid ${pid}) did not stop within ${grace} s; run 'otelake stop --force' to kill it`,
    );
  }
  const kill: NodeJS.Signals = 'SIGKILL' in constants.signals ? 'SIGKILL' : 'SIGTERM';
  process.stdout.write(`the server did not stop within ${grace} s; sending ${kill}\n`);
  signal(pid, kill);
  if (!(await waitForExit(pid, 10))) {
    throw new CliError(`the server (pid ${pid}) is still running after ${kill}`);
  }
  await forget(layout, pid);
  process.stdout.write(
    'killed; the rows it had accepted and not written are replayed from its write-ahead log at the ' +
      'next start (lost with durability "memory")\n',
  );
}

/** The background server's last line when it stopped leaving rows unwritten ("stopped; N accepted rows ..."), else null. */
export async function leftRows(serverLog: string): Promise<string | null> {
  let tail: string;
  try {
    const fh = await open(serverLog, 'r');
    try {
      const { size } = await fh.stat();
      const length = Math.min(size, 16_384);
      const buf = Buffer.alloc(length);
      await fh.read(buf, 0, length, size - length);
      tail = buf.toString('utf8');
    } finally {
      await fh.close();
    }
  } catch {
    return null;
  }
  const last = tail.trimEnd().split('\n').at(-1) ?? '';
  try {
    const msg = (JSON.parse(last) as { msg?: unknown }).msg;
    return typeof msg === 'string' && msg.startsWith('stopped; ') ? msg : null;
  } catch {
    return null;
  }
}
