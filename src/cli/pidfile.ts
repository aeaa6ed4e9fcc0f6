// The pidfile of a running server: claimed exclusively when a server starts, removed when it stops.
// A pidfile whose process is gone (crash, kill -9, reboot) is stale and may be taken over.

import { readFileSync, unlinkSync } from 'node:fs';
import { mkdir, open, unlink } from 'node:fs/promises';
import { dirname } from 'node:path';
import { namingPath, readTextIfExists } from '../storage/files.ts';
import { processExists, processState } from '../storage/process-lock.ts';

/** Whether a process with this id exists (and, on Linux, is an otelake process). */
export function processAlive(pid: number): boolean {
  return processExists(pid) && looksLikeOtelake(pid);
}

// After a crash and a reboot the id may belong to an unrelated process: where the command line is
// readable, require it to be ours so that neither start refuses nor stop signals a stranger.
function looksLikeOtelake(pid: number): boolean {
  // A zombie has exited; only its parent has yet to collect its status, which a container's init
  // may do more than a second later (a detached server's parent is init).
  if (processState(pid) === 'Z') return false;
  let cmdline: string;
  try {
    cmdline = readFileSync(`/proc/${pid}/cmdline`, 'utf8');
  } catch {
    return true; // no procfs (macOS, Windows) or the process just exited: trust the signal check
  }
  if (cmdline === '') return true; // a kernel thread: let the signal check decide
  // One argument must be otelake's program: its launcher or command (bin/otelake.js, an installed
  // `otelake`) or the CLI's entry; a name merely containing "otelake" (otelake-notes) is not.
  return cmdline.split('\0').some((arg) => OTELAKE_PROGRAM.test(arg));
}

const OTELAKE_PROGRAM = /(?:^|[\\/])otelake(?:\.[cm]?js)?$|[\\/]cli[\\/]main\.[jt]s$/;

/** The process id in a pidfile, or undefined when there is no pidfile. */
export async function readPid(file: string): Promise<number | undefined> {
  const text = await readTextIfExists(file);
  if (text === undefined) return undefined;
  const pid = Number(text.trim().split(/\s+/)[0]);
  // An empty or garbled pidfile (e.g. the disk filled up while writing it) counts as stale.
  return Number.isSafeInteger(pid) && pid > 0 ? pid : 0;
}

export type ClaimResult = { claimed: true; stalePid?: number } | { claimed: false; runningPid: number };

/**
 * Writes our pid into the pidfile unless a live process holds it. Exclusive creation makes two
 * concurrent starts safe: exactly one of them wins. A stale pidfile is replaced (reported back).
 */
export async function claimPidFile(file: string, pid = process.pid): Promise<ClaimResult> {
  await mkdir(dirname(file), { recursive: true });
  let stalePid: number | undefined;
  for (let attempt = 0; attempt < 5; attempt++) {
    try {
      const handle = await open(file, 'wx');
      try {
        await handle.writeFile(`${pid}\n`);
      } catch (err) {
        await unlink(file).catch(() => {}); // not left empty (a full disk), to be taken for a stale one
        throw namingPath(err, file);
      } finally {
        await handle.close();
      }
      return stalePid === undefined ? { claimed: true } : { claimed: true, stalePid };
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    }
    const holder = await readPid(file);
    if (holder === undefined) continue; // removed meanwhile: try again
    if (holder > 0 && holder !== pid && processAlive(holder)) return { claimed: false, runningPid: holder };
    stalePid = holder;
    await removePidFile(file, holder);
  }
  throw new Error(`could not claim the pidfile ${file}: it keeps changing`);
}

/** Removes the pidfile if it still names `pid` (never someone else's newer pidfile). */
export async function removePidFile(file: string, pid: number): Promise<boolean> {
  const holder = await readPid(file);
  if (holder === undefined || (holder !== pid && holder !== 0)) return false;
  try {
    await unlink(file);
    return true;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return false;
    throw err;
  }
}

/** removePidFile for a process about to exit at once (a second Ctrl+C): no awaiting possible. */
export function removePidFileSync(file: string, pid: number): void {
  try {
    const holder = Number(readFileSync(file, 'utf8').trim().split(/\s+/)[0]);
    if (holder === pid) unlinkSync(file);
  } catch {
    // already gone or unreadable: nothing of ours to remove
  }
}
