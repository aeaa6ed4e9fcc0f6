// Small file helpers shared by the instance's own files (options, days index, pidfile).

import { readFile } from 'node:fs/promises';

/** The file's text, or undefined when it does not exist. */
export async function readTextIfExists(file: string): Promise<string | undefined> {
  try {
    return await readFile(file, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw err;
  }
}
