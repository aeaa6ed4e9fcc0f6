// The instance layout on disk, and the validation of every path segment built from input (instance
// id, day, table) so that nothing escapes the instance root.

import { join, resolve } from 'node:path';
import { isTableName, TABLE_NAMES, type TableName } from '../schema/tables.ts';

export const DEFAULT_DIR = './svc_data';
export const DEFAULT_INSTANCE_ID = 'default';

const INSTANCE_ID = /^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/;
const DAY = /^(\d{4})-(\d{2})-(\d{2})$/;

export function validateInstanceId(id: unknown): string {
  if (typeof id !== 'string' || !INSTANCE_ID.test(id) || id.includes('..')) {
    throw new TypeError(
      `invalid instance id ${JSON.stringify(id)}: use 1-128 letters, digits, '.', '_' or '-', starting with a letter or digit`,
    );
  }
  return id;
}

/** Checks a root directory of instances: a path, not an empty string (which would mean the current directory). */
export function validateDir(dir: unknown): string {
  if (typeof dir !== 'string' || dir.trim() === '' || dir.includes('\0')) {
    throw new TypeError(
      `invalid directory ${JSON.stringify(dir)}: expected a path (use '.' for the current directory)`,
    );
  }
  return dir;
}

/** Checks a `YYYY-MM-DD` string names a real calendar day; returns it unchanged. */
export function validateDay(day: unknown, what = 'day'): string {
  const m = typeof day === 'string' ? DAY.exec(day) : null;
  if (m) {
    const d = new Date(Date.UTC(Number(m[1]), Number(m[2]) - 1, Number(m[3])));
    if (d.toISOString().slice(0, 10) === day) return day as string;
  }
  throw new TypeError(`invalid ${what} ${JSON.stringify(day)}: expected a UTC day as YYYY-MM-DD`);
}

/** Whether a folder or index name is a real `YYYY-MM-DD` day. */
export function isDay(name: string): boolean {
  try {
    validateDay(name);
    return true;
  } catch {
    return false;
  }
}

/** The UTC day of a time in milliseconds since the epoch. */
export function utcDay(ms: number): string {
  return new Date(ms).toISOString().slice(0, 10);
}

/** Every day from `from` to `to`, inclusive (both validated). */
export function daysBetween(from: string, to: string): string[] {
  const start = Date.parse(`${from}T00:00:00Z`);
  const end = Date.parse(`${to}T00:00:00Z`);
  const out: string[] = [];
  for (let t = start; t <= end; t += 86_400_000) out.push(utcDay(t));
  return out;
}

/** Paths of one instance: `<dir>/<instance_id>/...`. */
export class InstanceLayout {
  readonly root: string;
  readonly instanceId: string;

  constructor(dir: string, instanceId: string) {
    this.instanceId = validateInstanceId(instanceId);
    this.root = resolve(validateDir(dir), instanceId);
  }

  get optionsFile(): string {
    return join(this.root, 'configs', 'options.json');
  }
  get daysIndex(): string {
    return join(this.root, 'index', 'days.jsonl');
  }
  get daysDir(): string {
    return join(this.root, 'staging', 'days');
  }
  /** Write-ahead log segments (durability "wal"). */
  get walDir(): string {
    return join(this.root, 'wal');
  }
  /** Hashes of the instance's access tokens (storage/tokens.ts). */
  get tokensFile(): string {
    return join(this.root, 'configs', 'tokens.json');
  }
  get pidFile(): string {
    return join(this.root, 'otelake.pid');
  }
  /** Held by the one Logger that writes the instance (storage/process-lock.ts). */
  get instanceLock(): string {
    return join(this.root, 'instance.lock');
  }
  /** Where the server holding the pidfile listens (JSON), for `otelake status` and `stop`. */
  get addressFile(): string {
    return join(this.root, 'otelake.address.json');
  }
  get serverLog(): string {
    return join(this.root, 'logs', 'server.log');
  }

  dayDir(day: string): string {
    return join(this.daysDir, validateDay(day), 'otel');
  }

  tableDir(day: string, table: TableName): string {
    if (!isTableName(table))
      throw new TypeError(`unknown table ${JSON.stringify(table)}: one of ${TABLE_NAMES.join(', ')}`);
    return join(this.dayDir(day), table);
  }
}
