// Where the server of an instance listens: recorded by `start` beside the pidfile (which keeps
// only the pid, as scripts expect), so that `status` and `stop` find the server from -I/-D alone;
// else where the instance's saved server_config says it would listen.

import { rename, unlink, writeFile } from 'node:fs/promises';
import { namingPath, readTextIfExists } from '../storage/files.ts';
import type { InstanceLayout } from '../storage/layout.ts';
import { resolveOptions, type ServerConfig } from '../storage/options.ts';
import { CliError } from './errors.ts';
import { processAlive } from './pidfile.ts';

/** Where the server of an instance listens, as `start` records it. */
export interface ServerAddress {
  pid: number;
  /** The base URL that reaches it from this machine (a wildcard bind is reached over loopback). */
  url: string;
}

export async function writeServerAddress(file: string, address: ServerAddress): Promise<void> {
  const tmp = `${file}.${process.pid}.tmp`;
  try {
    await writeFile(tmp, `${JSON.stringify(address)}\n`);
    await rename(tmp, file);
  } catch (err) {
    await unlink(tmp).catch(() => {});
    throw namingPath(err, tmp);
  }
}

/** The recorded address, or undefined when there is none (or it is unreadable). */
export async function readServerAddress(file: string): Promise<ServerAddress | undefined> {
  const text = await readTextIfExists(file);
  if (text === undefined) return undefined;
  try {
    const { pid, url } = JSON.parse(text) as Partial<ServerAddress>;
    if (Number.isSafeInteger(pid) && typeof url === 'string') return { pid: pid as number, url };
  } catch {
    // garbled: as good as none
  }
  return undefined;
}

/** The address of a live server of the instance, or undefined (none recorded, or its process is gone). */
export async function liveServerAddress(file: string): Promise<ServerAddress | undefined> {
  const address = await readServerAddress(file);
  return address && processAlive(address.pid) ? address : undefined;
}

/** Removes the address file if it was written for `pid`. */
export async function removeServerAddress(file: string, pid: number): Promise<void> {
  if ((await readServerAddress(file))?.pid !== pid) return;
  await unlink(file).catch((err: NodeJS.ErrnoException) => {
    if (err.code !== 'ENOENT') throw err;
  });
}

/**
 * The instance's server_config: saved options over the defaults, validated (no options.json: the
 * defaults). Saved options that are invalid or cannot be read are a CliError naming the file.
 */
export async function savedServerConfig(layout: InstanceLayout): Promise<ServerConfig> {
  try {
    return (await resolveOptions(layout.optionsFile, undefined)).server_config;
  } catch (err) {
    throw new CliError(err instanceof Error ? err.message : String(err));
  }
}
