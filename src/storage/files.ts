// Small file helpers shared by the instance's own files (options, days index, pidfile) and the
// writers that sync what they write.

import { open, readFile, statfs } from 'node:fs/promises';
import { dirname } from 'node:path';

/** The file's text, or undefined when it does not exist. */
export async function readTextIfExists(file: string): Promise<string | undefined> {
  try {
    return await readFile(file, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw err;
  }
}

/** Flushes a file (or a directory's entries) to the disk. */
export async function fsyncPath(path: string): Promise<void> {
  const fh = await open(path, 'r');
  try {
    await fh.sync();
  } finally {
    await fh.close();
  }
}

/**
 * " (no space left on device: N bytes free)" when the file system holding `path` is (nearly)
 * full, else "": for errors that do not say so themselves (polars' writer, a short write).
 */
export async function diskFullNote(path: string): Promise<string> {
  const fs = await statfs(dirname(path)).catch(() => null);
  if (!fs || fs.bavail * fs.bsize >= 1024 * 1024) return '';
  return ` (no space left on device: ${fs.bavail * fs.bsize} bytes free)`;
}

/**
 * `err`, a failed file system call, naming `path` when it names none (a FileHandle's writes do
 * not), so that the CLI says which file could not be written rather than a bare ENOSPC.
 */
export function namingPath(err: unknown, path: string): unknown {
  const e = err as NodeJS.ErrnoException;
  if (e instanceof Error && typeof e.code === 'string' && e.path === undefined) e.path = path;
  return err;
}
