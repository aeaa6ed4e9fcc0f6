// Small file helpers shared by the instance's own files (options, days index, pidfile) and the
// writers that sync what they write.

import { open, readFile } from 'node:fs/promises';

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
