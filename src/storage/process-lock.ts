// Lock files that name the process holding them, by its id and start time: a lock whose process
// is gone (a crash, kill -9, a reboot that gave its id to another process) is taken over.
// `instance.lock` keeps an instance to one writer at a time: a server (the CLI's or the library's),
// `otelake ship`, a program using the library. Two would replay one write-ahead log into the same
// tables (rows doubled) and delete each other's log segments. `index/shipping.lock` (the shipper)
// is held while a day ships.

import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { link, mkdir, open, readFile, stat, unlink, writeFile } from 'node:fs/promises';
import { dirname } from 'node:path';
import type { InstanceLayout } from './layout.ts';

/** Whether a process with this id exists (EPERM: it does, and belongs to someone else). */
export function processExists(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** The fields of /proc/<pid>/stat after the command (state first); null without procfs or once it has ended. */
function statFields(pid: number): string[] | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  } catch {
    return null;
  }
}

/** A process's state letter from /proc (`Z`: a zombie, ended but not yet collected); null without procfs or once it has ended. */
export function processState(pid: number): string | null {
  return statFields(pid)?.[0] ?? null;
}

/**
 * When a process started (clock ticks since boot: field 22 of /proc/<pid>/stat), which with its
 * id tells it from a later process given the same id; null without procfs or once it has ended.
 */
export function processStartTime(pid: number): string | null {
  return statFields(pid)?.[19] ?? null;
}

/**
 * Whether the process a lock names (its id, and start time where it was recorded) still runs. A
 * zombie does not: it has ended, and a container's init may collect it seconds later.
 */
function lockHolderAlive(pid: number, startedAt: string | undefined): boolean {
  if (!processExists(pid)) return false;
  const fields = statFields(pid);
  if (fields === null) return true; // no procfs: the signal check decides
  if (fields[0] === 'Z') return false;
  return !startedAt || fields[19] === startedAt;
}

export type Claim = { held: true; release: () => Promise<void> } | { held: false; holder: number };

/** The live process other than this one a lock's text names, or null (gone, unreadable, ours). */
function liveHolder(text: string): number | null {
  const [id, startedAt] = text.trim().split(/\s+/);
  const pid = Number(id);
  return Number.isSafeInteger(pid) && pid > 0 && pid !== process.pid && lockHolderAlive(pid, startedAt)
    ? pid
    : null;
}

/**
 * Creates `file` holding `text`, unless it exists: written to a file of its own first and then
 * linked into place, so that no one ever reads a lock without its holder (an empty one looked stale).
 */
async function createWith(file: string, text: string): Promise<boolean> {
  const tmp = `${file}.${process.pid}-${randomUUID()}`;
  await writeFile(tmp, text, { flag: 'wx' });
  try {
    await link(tmp, file);
    return true;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'EEXIST') return false;
    throw err;
  } finally {
    await unlink(tmp).catch(() => {});
  }
}

/** A takeover older than this was left by a process that died in it (a takeover takes milliseconds). */
const STALE_TAKEOVER_MS = 10_000;

/**
 * Creates `file` naming this process, unless another live process holds it (its id is returned).
 * A lock whose process is gone is taken over, one process at a time: under `<file>.takeover` (a
 * hard link, which needs no free block on a full disk), and only if it still names the process
 * found gone, it is written over in place. Two that both found it stale each deleted the lock the
 * other had just made, and both held it (rows doubled). A lock naming this process is taken over
 * too: the caller knows what it holds.
 */
export async function claimLock(file: string): Promise<Claim> {
  await mkdir(dirname(file), { recursive: true });
  const mine = `${process.pid} ${processStartTime(process.pid) ?? ''}\n`;
  const held: Claim = { held: true, release: () => unlink(file).catch(() => {}) };
  const takeover = `${file}.takeover`;
  for (let attempt = 0; attempt < 200; attempt++) {
    const text = await readFile(file, 'utf8').catch((err: NodeJS.ErrnoException) => {
      if (err.code === 'ENOENT') return null;
      throw err;
    });
    if (text === null) {
      if (await createWith(file, mine)) return held;
      continue; // another process made it meanwhile
    }
    const holder = liveHolder(text);
    if (holder !== null) return { held: false, holder };
    try {
      await link(file, takeover);
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      if (code === 'ENOENT') continue; // released meanwhile
      if (code !== 'EEXIST') throw err;
      // Another process takes it over now: its lock is there in a moment. Linking set the
      // takeover's ctime; one this old was left by a process that died in it.
      const since = await stat(takeover).then(
        (s) => Date.now() - s.ctimeMs,
        () => 0,
      );
      if (since > STALE_TAKEOVER_MS) await unlink(takeover).catch(() => {});
      await new Promise((r) => setTimeout(r, 10));
      continue;
    }
    try {
      if ((await readFile(file, 'utf8').catch(() => null)) !== text) continue; // taken meanwhile
      const fh = await open(file, 'r+');
      try {
        await fh.write(mine, 0);
        await fh.truncate(Buffer.byteLength(mine));
      } finally {
        await fh.close();
      }
      return held;
    } finally {
      await unlink(takeover).catch(() => {});
    }
  }
  throw new Error(`cannot take the lock ${file}: other processes keep taking it over`);
}

/** Another process (or a Logger of this one) writes the instance. */
export class InstanceInUseError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'InstanceInUseError';
  }
}

/** The instance locks this process holds (a copied instance folder holds our id but is not ours). */
const held = new Set<string>();

/**
 * Takes the instance's `instance.lock` for a Logger; returns its release. Throws
 * InstanceInUseError while another process, or another Logger of this process, has it.
 */
export async function lockInstance(layout: InstanceLayout): Promise<() => Promise<void>> {
  const file = layout.instanceLock;
  if (held.has(file))
    throw new InstanceInUseError(
      `a Logger of this process already runs instance ${layout.root}; stop it first`,
    );
  held.add(file);
  try {
    const claim = await claimLock(file);
    if (!claim.held) {
      throw new InstanceInUseError(
        `instance ${layout.root} is in use by process ${claim.holder} (a server, \`otelake ship\` or a ` +
          'program using the library): one process at a time writes an instance; stop that one first',
      );
    }
    return async () => {
      await claim.release();
      held.delete(file);
    };
  } catch (err) {
    held.delete(file);
    throw err;
  }
}
