// Lock files that name the process holding them, by its id and start time: a lock whose process
// is gone (a crash, kill -9, a reboot that gave its id to another process) is taken over.
// `instance.lock` keeps an instance to one writer at a time: a server (the CLI's or the library's),
// `otelake ship`, a program using the library. Two would replay one write-ahead log into the same
// tables (rows doubled) and delete each other's log segments. `index/shipping.lock` (the shipper)
// is held while a day ships.

import { readFileSync } from 'node:fs';
import { mkdir, open, readFile, stat, unlink } from 'node:fs/promises';
import { dirname } from 'node:path';
import { namingPath } from './files.ts';
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

/** A lock found empty this long after it was made was left by a process that died making it. */
const BEING_WRITTEN_MS = 2_000;
/** A takeover older than this was left by a process that died in it (a takeover takes milliseconds). */
const STALE_TAKEOVER_MS = 10_000;

const pause = () => new Promise((r) => setTimeout(r, 10));

/** The lock's text and how long ago it was last written; null once it is gone. */
async function readLock(file: string): Promise<{ text: string; ageMs: number } | null> {
  try {
    const [text, st] = await Promise.all([readFile(file, 'utf8'), stat(file)]);
    return { text, ageMs: Date.now() - st.mtimeMs };
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw err;
  }
}

/**
 * Creates `file` naming this process, unless another live process holds it (its id is returned).
 * A lock whose process is gone is taken over, one process at a time (`<file>.takeover`, made with
 * O_EXCL), and only if it still names the process found gone: it is then written over in place,
 * which needs no free block on a full disk. Two that both found it stale each deleted the lock
 * the other had just made, and both held it (rows doubled); an empty lock, its maker still
 * writing it, looked stale too. A lock naming this process is taken over as well: the caller
 * knows what it holds.
 */
export async function claimLock(file: string): Promise<Claim> {
  await mkdir(dirname(file), { recursive: true });
  const mine = `${process.pid} ${processStartTime(process.pid) ?? ''}\n`;
  const held: Claim = { held: true, release: () => unlink(file).catch(() => {}) };
  const takeover = `${file}.takeover`;
  for (let attempt = 0; attempt < 1000; attempt++) {
    try {
      const fh = await open(file, 'wx');
      try {
        await fh.writeFile(mine);
      } catch (err) {
        await unlink(file).catch(() => {}); // not left empty (a full disk): no one waits on it
        throw namingPath(err, file);
      } finally {
        await fh.close();
      }
      return held;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    }
    const found = await readLock(file);
    if (found === null) continue; // released meanwhile
    if (found.text === '' && found.ageMs < BEING_WRITTEN_MS) {
      await pause(); // its maker writes it now
      continue;
    }
    const holder = liveHolder(found.text);
    if (holder !== null) return { held: false, holder };
    try {
      await (await open(takeover, 'wx')).close();
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
      // Another process takes it over now: its lock is there in a moment.
      const age = await stat(takeover).then(
        (st) => Date.now() - st.mtimeMs,
        () => 0,
      );
      if (age > STALE_TAKEOVER_MS) await unlink(takeover).catch(() => {});
      await pause();
      continue;
    }
    try {
      if ((await readLock(file))?.text !== found.text) continue; // taken or released meanwhile
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
