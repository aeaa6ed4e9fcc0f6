// Shared pieces of the shipping tests: a logger on a fake clock pointed at the test S3 server,
// rows ingested on a given day, the days index as (phase, step) pairs, and the remote tables.

import { readFile } from 'node:fs/promises';
import { readSnapshot } from '../../src/delta/table.ts';
import { Logger, type LoggerInit, TABLE_NAMES } from '../../src/index.ts';
import type { DayPhaseLine } from '../../src/storage/days-index.ts';
import { ObjectStore } from '../../src/storage/object-store.ts';
import { resolveS3, type S3Config } from '../../src/storage/s3-config.ts';

export const DAY = '2026-11-20';
export const NEXT_DAY = '2026-11-21';
export const DAY_MS = Date.parse(`${DAY}T10:00:00Z`);
export const NEXT_DAY_MS = Date.parse(`${NEXT_DAY}T00:00:05Z`);

/** The Logger's `s3` argument for a server's environment. */
export function s3Of(env: Record<string, string>, over: S3Config = {}): S3Config {
  return {
    bucket: env['S3_BUCKET'],
    accessKeyId: env['CLOUD_ACCESS_KEY_ID'],
    secretAccessKey: env['CLOUD_SECRET_ACCESS_KEY'],
    region: env['CLOUD_REGION'],
    endpointUrl: env['CLOUD_ENDPOINT_URL'],
    prefix: env['S3_PREFIX'],
    ...over,
  };
}

/** A clock the test moves. */
export interface FakeClock {
  now: number;
  fn: () => number;
}
export function fakeClock(start = DAY_MS): FakeClock {
  const c: FakeClock = { now: start, fn: () => c.now };
  return c;
}

export function openLogger(init: LoggerInit & { clock: () => number }): Promise<Logger> {
  return Logger.open({
    handleSignals: false,
    // min_batch_rows 1: a batch is written once the queue is drained (the fake clock does not age it).
    options: { shipper_enabled: false, aggregator_config: { min_batch_rows: 1 } },
    ...init,
  });
}

/**
 * Ingests `n` log rows (distinct microseconds; every 5th one ERROR with "boom", `detail(i)` after
 * the body's number) and waits for them.
 */
export async function ingestDay(
  logger: Logger,
  n: number,
  day = DAY,
  start = 0,
  detail: (i: number) => string = () => '',
): Promise<void> {
  const base = BigInt(Date.parse(`${day}T09:00:00Z`)) * 1_000_000n;
  for (let i = start; i < start + n; i++) {
    const [ok, reason] = await logger.ingestLog({
      project_id: i % 2 === 0 ? 'shop' : 'blog',
      time_unix_nano: base + BigInt(i) * 1000n,
      severity_number: i % 5 === 0 ? 17 : 9,
      body: `${i % 5 === 0 ? 'boom' : 'fine'} ${i}${detail(i)}`,
    });
    if (!ok) throw new Error(`row ${i} refused: ${reason}`);
  }
  await logger.whenDayLanded(day);
}

export async function phaseLines(file: string, day = DAY): Promise<DayPhaseLine[]> {
  const text = await readFile(file, 'utf8').catch(() => '');
  return text
    .split('\n')
    .filter((l) => l.trim())
    .map((l) => JSON.parse(l) as DayPhaseLine)
    .filter((l) => l.day === day);
}

/** The day's phases as written, failures as `failed:<step>`. */
export async function phases(file: string, day = DAY): Promise<string[]> {
  return (await phaseLines(file, day)).map((l) => (l.phase === 'failed' ? `failed:${l.step}` : l.phase));
}

/** Row counts and versions of the day's remote tables, from their logs in object storage. */
export async function remoteTables(
  env: Record<string, string>,
  instanceId: string,
  day = DAY,
): Promise<Record<string, { rows: number; version: number }>> {
  const settings = resolveS3(undefined, env).settings!;
  const store = new ObjectStore(settings);
  try {
    const out: Record<string, { rows: number; version: number }> = {};
    for (const t of TABLE_NAMES) {
      const s = await readSnapshot(store.logStore(`${settings.dayKey(instanceId, day)}${t}/`));
      out[t] = { rows: s.files.reduce((n, f) => n + f.numRecords, 0), version: s.version };
    }
    return out;
  } finally {
    store.destroy();
  }
}
