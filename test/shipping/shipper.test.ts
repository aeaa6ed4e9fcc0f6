import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { DeleteObjectCommand, S3Client } from '@aws-sdk/client-s3';
import { closeDeltaWorkers } from '../../src/delta/table.ts';
import { type LoggerInit, type Row, ShipError, TABLE_NAMES } from '../../src/index.ts';
import { closeReadWorkers } from '../../src/read/query.ts';
import { buildServer } from '../../src/server/app.ts';
import { shipperHooks } from '../../src/shipping/shipper.ts';
import { ObjectStore } from '../../src/storage/object-store.ts';
import { processStartTime } from '../../src/storage/process-lock.ts';
import { resolveS3 } from '../../src/storage/s3-config.ts';
import { createdBy } from '../delta/footer.ts';
import {
  DAY,
  fakeClock,
  ingestDay,
  NEXT_DAY,
  NEXT_DAY_MS,
  openLogger,
  phaseLines,
  phases,
  remoteTables,
  s3Of,
} from './helpers.ts';
import { type S3Server, startS3Server, TEST_S3 } from './s3-server.ts';

let server: S3Server;
let dir: string;

before(async () => {
  // Only the settings given to each logger count here, never the environment of the test run.
  for (const k of Object.keys(process.env)) if (/^(S3_|CLOUD_)/.test(k)) delete process.env[k];
  server = await startS3Server();
  dir = await mkdtemp(join(tmpdir(), 'otelake-ship-'));
});

after(async () => {
  await closeReadWorkers();
  await closeDeltaWorkers();
  await server?.stop({ removeData: true });
  await rm(dir, { recursive: true, force: true });
});

/**
 * A logger of `instance` holding `rows` rows of DAY (see ingestDay), its clock past the following
 * midnight.
 */
async function finishedDay(
  instance: string,
  rows: number,
  init: Partial<LoggerInit>,
  detail?: (i: number) => string,
) {
  const clock = fakeClock();
  const logger = await openLogger({ instanceDir: dir, instanceId: instance, clock: clock.fn, ...init });
  await ingestDay(logger, rows, DAY, 0, detail);
  clock.now = NEXT_DAY_MS;
  return { logger, clock, index: join(dir, instance, 'index', 'days.jsonl') };
}

const J = (rows: Row[]) => JSON.stringify(rows, (_k, v) => (typeof v === 'bigint' ? `${v}n` : v));

const QUERIES = [
  { severityGe: 17, bodyLike: 'boom', maxRows: 7 },
  { projectId: 'blog', maxRows: 5, select: ['body', 'event_ts', 'time_unix_nano'] },
  {},
  // An event-time window (rows 100-199), values cut.
  {
    since: `${DAY}T09:00:00.000100Z`,
    until: `${DAY}T09:00:00.000200Z`,
    maxFieldChars: 4,
    select: ['body', 'event_ts'],
  },
];

describe('shipping a finished day', () => {
  test('seal, upload, verify, clean: phases with counts, remote tables, identical reads from either source', async () => {
    const clock = fakeClock();
    const logger = await openLogger({
      instanceDir: dir,
      instanceId: 'full',
      clock: clock.fn,
      s3: s3Of(server.env),
    });
    await ingestDay(logger, 300);
    const localRows = await Promise.all(QUERIES.map((q) => logger.readLogs({ ...q, storage: 'local' })));
    assert.equal(localRows[2]!.length, 300);
    assert.equal(localRows[3]!.length, 100);
    assert.ok(localRows[3]!.every((r) => (r['body'] as string).length <= 4));
    clock.now = NEXT_DAY_MS;

    const seen: string[] = [];
    shipperHooks.afterPhase = async (_day, phase) => {
      seen.push(phase);
      if (phase !== 'verified') return;
      // Verified, not cleaned yet: the same query gives the same rows from either source.
      for (const [i, q] of QUERIES.entries()) {
        assert.equal(J(await logger.readLogs({ ...q, storage: 's3' })), J(localRows[i]!), `s3 ${i}`);
        assert.equal(J(await logger.readLogs({ ...q, storage: 'auto' })), J(localRows[i]!), `auto ${i}`);
      }
      // And over HTTP: /api/logs answers the same for either source.
      const app = await buildServer(logger, { protobuf: false });
      try {
        const get = async (storage: string) =>
          (await app.inject(`/api/logs?severity_ge=17&body_like=boom&limit=7&storage=${storage}`)).json();
        const local = await get('local');
        assert.equal(local.count, 7);
        assert.deepEqual(await get('s3'), local);
        const health = (await app.inject('/healthz')).json();
        assert.equal(health.shipper.state, 'shipping');
        assert.equal(health.shipper.day, DAY);
        assert.doesNotMatch(JSON.stringify(health), new RegExp(TEST_S3.secretAccessKey));
      } finally {
        await app.close();
      }
    };
    let progressCalls = 0;
    const summary = await logger.shipNow(DAY, { onProgress: () => progressCalls++ }).finally(() => {
      shipperHooks.afterPhase = undefined;
    });
    assert.equal(summary.status, 'cleaned');
    assert.equal(summary.error, null);
    assert.deepEqual(seen, ['sealed', 'uploaded', 'verified', 'cleaned']);
    assert.ok(progressCalls > 0);
    assert.equal(summary.tables['logs']!.rows, 300);
    for (const t of TABLE_NAMES) if (t !== 'logs') assert.equal(summary.tables[t]!.rows, 0, t);
    assert.ok(summary.uploaded.files >= 6 * 3 && summary.uploaded.bytes > 0);

    const index = join(dir, 'full', 'index', 'days.jsonl');

    assert.deepEqual(await phases(index), ['open', 'sealed', 'uploaded', 'verified', 'cleaned']);
    const sealed = (await phaseLines(index)).find((l) => l.phase === 'sealed')!;
    assert.equal(sealed.tables!['logs']!.rows, 300);
    assert.ok(sealed.tables!['logs']!.bytes! > 0);
    assert.equal(existsSync(join(dir, 'full', 'staging', 'days', DAY)), false, 'local copy removed');

    // The layout: s3://<bucket>/<prefix>/<instance>/days/<day>/otel/<table>/, each a Delta table
    // whose log is a checkpoint (the seal) and its commit.
    const remote = await remoteTables(server.env, 'full');
    for (const t of TABLE_NAMES) {
      assert.deepEqual(remote[t], { rows: t === 'logs' ? 300 : 0, version: sealed.tables![t]!.version }, t);
    }
    const settings = resolveS3(undefined, server.env).settings!;
    const store = new ObjectStore(settings);
    const keys = [...(await store.list(`otelake-tests/full/days/${DAY}/otel/logs/`)).keys()];
    store.destroy();
    assert.ok(
      keys.some((k) => /^part-[0-9a-f-]+\.zstd\.parquet$/.test(k)),
      keys.join(),
    );
    assert.ok(keys.includes('_delta_log/_last_checkpoint'), keys.join());
    assert.ok(
      keys.some((k) => /^_delta_log\/\d{20}\.checkpoint\.parquet$/.test(k)),
      keys.join(),
    );

    // Cleaned: auto and s3 read it from object storage, local has nothing of it.
    for (const [i, q] of QUERIES.entries()) {
      assert.equal(J(await logger.readLogs(q)), J(localRows[i]!), `after clean, auto ${i}`);
    }
    assert.deepEqual(await logger.readLogs({ storage: 'local', dateTo: DAY }), []);
    const streamed: Row[] = [];
    for await (const row of logger.readStream('logs')) streamed.push(row);
    assert.equal(J(streamed), J(localRows[2]!), 'streamed from object storage');

    const lazy = await logger.readLogs({ severityGe: 17, returnAs: 'lazy' });
    assert.equal((await lazy.collect()).height, 60);

    // Shipping it again finds it done: nothing uploaded, no line written.
    const again = await logger.shipNow(DAY);
    assert.equal(again.status, 'cleaned');
    assert.deepEqual(again.uploaded, { files: 0, bytes: 0 });
    assert.equal((await phases(index)).length, 5);

    // Today keeps working.
    await ingestDay(logger, 3, NEXT_DAY);
    assert.equal((await logger.readLogs({ dateFrom: NEXT_DAY })).length, 3);
    await logger.stop();
  });

  test('under a memory limit below 1 GiB the seal merges the files it wrote instead of rewriting them with polars', async () => {
    // A rewrite holds its group of files whole in memory: in a 256 MiB container the kernel killed
    // the server at every seal. The merged files are the engine's own, their rows the same.
    const writers: Record<string, string[]> = {};
    shipperHooks.afterPhase = async (_day, phase) => {
      if (phase !== 'sealed') return;
      for (const instance of ['merge', 'rewrite']) {
        const logs = join(dir, instance, 'staging', 'days', DAY, 'otel', 'logs');
        if (!existsSync(logs)) continue;
        writers[instance] = (await readdir(logs))
          .filter((f) => f.endsWith('.parquet'))
          .map((f) => createdBy(readFileSync(join(logs, f))));
      }
    };
    try {
      for (const [instance, memory] of [
        ['merge', 512 * 1024 * 1024],
        ['rewrite', null],
      ] as const) {
        const { logger } = await finishedDay(instance, 200, {
          s3: s3Of(server.env),
          options: {
            shipper_enabled: false,
            aggregator_config: { min_batch_rows: 1, max_batch_rows: 20 },
            server_config: { memory_limit_bytes: memory },
          },
        });
        const summary = await logger.shipNow(DAY);
        assert.equal(summary.status, 'cleaned', JSON.stringify(summary.error));
        assert.equal(summary.tables['logs']!.rows, 200);
        assert.equal((await logger.readLogs({ dateTo: DAY, maxRows: 1000 })).length, 200, instance);
        await logger.stop();
      }
    } finally {
      shipperHooks.afterPhase = undefined;
    }
    assert.equal(writers['merge']?.length, 1, JSON.stringify(writers));
    assert.doesNotMatch(writers['merge']![0]!, /^Polars/);
    assert.equal(writers['rewrite']?.length, 1, JSON.stringify(writers));
    assert.match(writers['rewrite']![0]!, /^Polars/);
  });

  test('a shipped day is read in place: a query fetches the columns it needs, not the day', async () => {
    // Bodies of 128 hex digits, as little compressible as log text: most of the day is a column
    // the query does not read (it reads the order columns, then severity_number of 3 rows).
    const hex = (i: number) => createHash('sha512').update(String(i)).digest('hex');
    const { logger } = await finishedDay('inplace', 20_000, { s3: s3Of(server.env) }, (i) => ` ${hex(i)}`);
    const summary = await logger.shipNow(DAY);
    assert.equal(summary.status, 'cleaned');
    const first = await logger.readLogs({ maxRows: 3, storage: 's3' }); // the table's snapshot is loaded
    await server.resetStats();
    const few = await logger.readLogs({ select: ['severity_number'], maxRows: 3, storage: 's3' });
    assert.deepEqual(
      few,
      first.map((r) => ({ severity_number: r['severity_number'] })),
    );
    const fetched = (await server.stats()).bytesServed;
    const size = summary.tables['logs']!.bytes!;
    assert.ok(fetched > 0 && fetched < size / 4, `${fetched} of ${size} bytes fetched`);
    await logger.stop();
  });

  test('a clock set back into a shipped day sends rows to the next day, after a restart too', async () => {
    const warnings: string[] = [];
    const log = (level: string, message: string) => level === 'warn' && warnings.push(message);
    const { logger, clock } = await finishedDay('clockback', 50, { s3: s3Of(server.env), log });
    assert.equal((await logger.shipNow(DAY)).status, 'cleaned');
    const dayDir = join(dir, 'clockback', 'staging', 'days', DAY);
    const both = { dateFrom: DAY, dateTo: NEXT_DAY, maxRows: 1000 };
    // A step of NTP back across midnight: these rows must not go into the cleaned day.
    clock.now = Date.parse(`${DAY}T23:59:58Z`);
    await ingestDay(logger, 10, NEXT_DAY, 1000);
    assert.equal(existsSync(dayDir), false, 'the cleaned day was written again');
    assert.equal((await logger.readLogs({ ...both, storage: 'auto' })).length, 60);
    assert.equal((await logger.readLogs({ ...both, storage: 'local' })).length, 10);
    assert.equal(warnings.length, 1);
    assert.match(
      warnings[0]!,
      new RegExp(`clock went back to ${DAY}: rows keep going to the tables of ${NEXT_DAY}`),
    );
    await logger.stop();
    // Started again while the clock still stands in the shipped day: the same.
    const again = await openLogger({
      instanceDir: dir,
      instanceId: 'clockback',
      clock: clock.fn,
      s3: s3Of(server.env),
    });
    await ingestDay(again, 5, NEXT_DAY, 2000);
    assert.equal(existsSync(dayDir), false, 'the cleaned day was written again after a restart');
    assert.equal((await again.readLogs({ ...both, storage: 'auto' })).length, 65);
    await again.stop();
  });

  test('refuses the current day, a future day, a day without data, and incomplete settings', async () => {
    const clock = fakeClock();
    const logger = await openLogger({
      instanceDir: dir,
      instanceId: 'refuse',
      clock: clock.fn,
      s3: s3Of(server.env),
    });
    await ingestDay(logger, 5);
    await assert.rejects(
      logger.shipNow(DAY),
      /day 2026-11-20 is the current UTC day: only finished days are shipped/,
    );
    await assert.rejects(logger.shipNow('2030-01-01'), /is in the future/);
    await assert.rejects(logger.shipNow('2026-13-01'), /invalid day/);
    clock.now = NEXT_DAY_MS;
    await assert.rejects(logger.shipNow('2026-11-01'), (err: Error) => {
      assert.ok(err instanceof ShipError);
      assert.match(err.message, /no data for day 2026-11-01/);
      return true;
    });
    await logger.stop();

    const secret = 'a-secret-that-must-never-show-1234';
    const partial = await openLogger({
      instanceDir: dir,
      instanceId: 'refuse',
      clock: clock.fn,
      s3: { bucket: 'b', secretAccessKey: secret, region: '' },
    });
    await assert.rejects(partial.shipNow(DAY), (err: Error) => {
      assert.ok(err instanceof ShipError);
      assert.match(
        err.message,
        /missing: accessKeyId \(CLOUD_ACCESS_KEY_ID or S3_ACCESS_KEY_ID\), endpointUrl \(CLOUD_ENDPOINT_URL or S3_URL\)/,
      );
      assert.deepEqual(err.missing, ['accessKeyId', 'endpointUrl']);
      return true;
    });
    const stats = partial.stats().shipper;
    assert.equal(stats.configured, false);
    assert.equal(stats.state, 'not_configured');
    assert.deepEqual(stats.missing, ['accessKeyId', 'endpointUrl']);
    // Local reads and writes keep working.
    assert.equal((await partial.readLogs({ dateTo: DAY })).length, 5);
    await ingestDay(partial, 2, NEXT_DAY);
    assert.equal((await partial.readLogs({ dateFrom: NEXT_DAY })).length, 2);
    await partial.stop();
    const persisted = await readFile(join(dir, 'refuse', 'configs', 'options.json'), 'utf8');
    assert.doesNotMatch(persisted + JSON.stringify(stats), new RegExp(secret));
    assert.doesNotMatch(persisted, /secret|access_key/i);
  });
});

describe('shipping failures', () => {
  test('a wrong secret is refused and recorded without the secret; the right one resumes from the seal', async () => {
    const wrong = 'wrong-secret-value-0123456789';
    const { logger, clock, index } = await finishedDay('secret', 50, {
      s3: s3Of(server.env, { secretAccessKey: wrong }),
    });
    const summary = await logger.shipNow(DAY);
    assert.equal(summary.status, 'failed');
    assert.equal(summary.phase, 'sealed');
    assert.equal(summary.error!.step, 'upload');
    assert.match(summary.error!.message, /refused the credentials \(SignatureDoesNotMatch/);
    const stats = logger.stats().shipper;
    assert.equal(stats.last_error!.step, 'upload');
    assert.deepEqual(await phases(index), ['open', 'sealed', 'failed:upload']);
    const recorded = await readFile(index, 'utf8');
    assert.match(recorded, /SignatureDoesNotMatch/);
    for (const text of [recorded, JSON.stringify(stats), JSON.stringify(summary), summary.error!.message]) {
      assert.doesNotMatch(text, new RegExp(wrong));
      assert.doesNotMatch(text, new RegExp(TEST_S3.secretAccessKey));
    }
    assert.equal((await logger.readLogs({ storage: 'local' })).length, 50, 'local data kept');
    await logger.stop();

    const right = await openLogger({
      instanceDir: dir,
      instanceId: 'secret',
      clock: clock.fn,
      s3: s3Of(server.env),
    });
    assert.equal((await right.shipNow(DAY)).status, 'cleaned');
    assert.deepEqual(await phases(index), [
      'open',
      'sealed',
      'failed:upload',
      'uploaded',
      'verified',
      'cleaned',
    ]);
    assert.equal((await remoteTables(server.env, 'secret'))['logs']!.rows, 50);
    await right.stop();
  });

  test('an unreachable server fails the upload and keeps the data; shipped once it is back', async () => {
    const other = await startS3Server();
    const port = other.port;
    await other.stop();
    const { logger } = await finishedDay('down', 40, { s3: s3Of(other.env) });
    const failed = await logger.shipNow(DAY);
    assert.equal(failed.status, 'failed');
    assert.match(
      failed.error!.message,
      /cannot reach the object storage at http:\/\/127\.0\.0\.1:\d+ \(ECONNREFUSED\)/,
    );
    assert.equal((await logger.readLogs({ storage: 'local' })).length, 40);
    const app = await buildServer(logger, { protobuf: false });
    const res = await app.inject('/api/logs?storage=s3');
    await app.close();
    assert.equal(res.statusCode, 502);
    assert.match(res.json().message, /cannot reach the object storage/);
    const back = await startS3Server({ port, dataDir: other.dataDir });
    try {
      const ok = await logger.shipNow(DAY);
      assert.equal(ok.status, 'cleaned');
      assert.equal((await remoteTables(back.env, 'down'))['logs']!.rows, 40);
    } finally {
      await logger.stop();
      await back.stop({ removeData: true });
    }
  });

  test('a file missing remotely before verification is uploaded again, and the day is never cleaned before', async () => {
    const { logger, index } = await finishedDay('missing', 80, { s3: s3Of(server.env) });
    const settings = resolveS3(undefined, server.env).settings!;
    const client = new S3Client({
      endpoint: server.endpoint,
      region: TEST_S3.region,
      forcePathStyle: true,
      credentials: { accessKeyId: TEST_S3.accessKeyId, secretAccessKey: TEST_S3.secretAccessKey },
    });
    let deleted = '';
    shipperHooks.afterPhase = async (_day, phase) => {
      if (phase !== 'uploaded' || deleted) return;
      const prefix = settings.dayKey('missing', DAY);
      const store = new ObjectStore(settings);
      deleted = [...(await store.list(`${prefix}logs/`)).keys()].find((k) => k.startsWith('part-'))!;
      store.destroy();
      await client.send(
        new DeleteObjectCommand({ Bucket: settings.bucket, Key: `${prefix}logs/${deleted}` }),
      );
    };
    const summary = await logger.shipNow(DAY).finally(() => {
      shipperHooks.afterPhase = undefined;
      client.destroy();
    });
    assert.ok(deleted);
    assert.equal(summary.status, 'cleaned');
    const lines = await phaseLines(index);
    assert.deepEqual(
      lines.map((l) => (l.phase === 'failed' ? `failed:${l.step}` : l.phase)),
      ['open', 'sealed', 'uploaded', 'failed:verify', 'uploaded', 'verified', 'cleaned'],
    );
    assert.match(lines[3]!.error!, /logs: 1 data file\(s\) missing or of another size remotely/);
    assert.equal((await remoteTables(server.env, 'missing'))['logs']!.rows, 80);
    await logger.stop();
  });
});

describe('the shipping lock', () => {
  test("a lock left by a process that has ended is taken over, though its id is now another process's", async () => {
    const { logger } = await finishedDay('lock', 10, { s3: s3Of(server.env) });
    const file = join(dir, 'lock', 'index', 'shipping.lock');
    // A live process that is not shipping, whose id a lock names: with its own start time it holds
    // the lock; with another (the process that wrote the lock is gone) it does not.
    const other = spawn('sleep', ['60'], { stdio: 'ignore' });
    try {
      const pid = other.pid!;
      for (let i = 0; i < 100 && processStartTime(pid) === null; i++)
        await new Promise((r) => setTimeout(r, 10));
      await writeFile(file, `${pid} ${processStartTime(pid)}\n`);
      await assert.rejects(
        logger.shipNow(DAY),
        new RegExp(`process ${pid} is shipping days of this instance`),
      );
      await writeFile(file, `${pid} 1\n`);
      const summary = await logger.shipNow(DAY);
      assert.equal(summary.status, 'cleaned', JSON.stringify(summary));
      assert.equal(existsSync(file), false, 'the lock is let go');
    } finally {
      other.kill();
      await logger.stop();
    }
  });
});

describe('automatic shipping', () => {
  test('after the UTC rollover a finished day is shipped; failures are retried with backoff and shown in stats', async () => {
    const other = await startS3Server();
    const port = other.port;
    await other.stop();
    const lines: string[] = [];
    const { logger, index } = await finishedDay('auto', 30, {
      s3: s3Of(other.env),
      options: { shipper_enabled: true, aggregator_config: { min_batch_rows: 1 } },
      shipperTiming: { checkMs: 50, baseMs: 100, maxMs: 400 },
      log: (level, message) => lines.push(`${level} ${message}`),
    });
    const until = async (what: string, ok: () => Promise<boolean>) => {
      for (let i = 0; i < 600 && !(await ok()); i++) await new Promise((r) => setTimeout(r, 50));
      assert.ok(await ok(), what);
    };
    // Between failures the state is waiting_retry, or shipping while a retry runs: never idle,
    // not even between a retry's time and its pass taking the day up.
    const seen = new Set<string>();
    const sampler = setInterval(() => {
      const s = logger.stats().shipper;
      if (s.last_error) seen.add(`${s.state} ${s.state === 'waiting_retry' && s.next_retry_at !== null}`);
    }, 1);
    await until(
      'three failed attempts',
      async () => (await phases(index)).filter((p) => p === 'failed:upload').length >= 3,
    ).finally(() => clearInterval(sampler));
    assert.ok(seen.has('waiting_retry true'), [...seen].join(', '));
    for (const s of seen) assert.ok(['shipping false', 'waiting_retry true'].includes(s), s);
    const stats = logger.stats().shipper;
    assert.equal(stats.last_error!.day, DAY);
    assert.match(stats.last_error!.message, /ECONNREFUSED/);
    assert.ok(['waiting_retry', 'shipping'].includes(stats.state), stats.state);
    assert.equal(stats.days_pending, 1);
    const back = await startS3Server({ port, dataDir: other.dataDir });
    try {
      // stats() names the day once its `cleaned` line is synced; the line is readable a little
      // earlier (between the append and the sync), so wait on stats and then read the index.
      await until('shipped', async () => logger.stats().shipper.last_shipped?.day === DAY);
      assert.equal((await phases(index)).at(-1), 'cleaned');
      assert.equal((await remoteTables(back.env, 'auto'))['logs']!.rows, 30);
      assert.deepEqual(await phases(index, NEXT_DAY), [], 'the current day stays open');
      // The operator's log says both, not only /healthz.
      const failed = new RegExp(
        `^warn shipping ${DAY} failed at upload: .*ECONNREFUSED.*; tried again at \\d{4}-`,
      );
      assert.ok(
        lines.some((l) => failed.test(l)),
        lines.join('\n'),
      );
      assert.ok(
        lines.some((l) =>
          new RegExp(`^info shipped ${DAY}: \\d+ files \\(\\d+ bytes\\) uploaded, verified`).test(l),
        ),
        lines.join('\n'),
      );
    } finally {
      await logger.stop();
      await back.stop({ removeData: true });
    }
  });
  test('retries keep their backoff, none waiting for the next scan; a failing day is a problem; the last shipped outlives a restart', async () => {
    const down = await startS3Server();
    const port = down.port;
    await down.stop();
    // The day is finished already when the logger opens: the pass at start takes it up.
    const { logger } = await finishedDay('retries', 10, {});
    await logger.stop();
    const index = join(dir, 'retries', 'index', 'days.jsonl');
    const again = await openLogger({
      instanceDir: dir,
      instanceId: 'retries',
      clock: () => NEXT_DAY_MS,
      s3: s3Of(down.env),
      options: { shipper_enabled: true },
      // A scan a minute apart: each retry, 50-400 ms after a failure, must come on its own time.
      shipperTiming: { checkMs: 60_000, baseMs: 100, maxMs: 400 },
    });
    try {
      const started = Date.now();
      while ((await phases(index)).filter((p) => p === 'failed:upload').length < 8) {
        assert.ok(Date.now() - started < 20_000, `${(await phases(index)).join(', ')}`);
        await new Promise((r) => setTimeout(r, 50));
      }
      const next = again.stats().shipper.next_retry_at;
      if (next !== null) assert.ok(Date.parse(next) > Date.now() - 1000, `next_retry_at ${next} is past`);
      // /healthz turns degraded while it waits (a moment's `shipping` aside).
      while (again.stats().shipper.state !== 'waiting_retry') await new Promise((r) => setTimeout(r, 5));
      assert.match(
        again.problems().join('\n'),
        new RegExp(`shipping ${DAY} failed at its upload step .*ECONNREFUSED`),
      );
    } catch (err) {
      await again.stop();
      throw err;
    }
    const back = await startS3Server({ port, dataDir: down.dataDir });
    try {
      const started = Date.now();
      while (again.stats().shipper.last_shipped?.day !== DAY) {
        assert.ok(Date.now() - started < 20_000, 'shipped once S3 is back');
        await new Promise((r) => setTimeout(r, 50));
      }
      assert.deepEqual(again.problems(), []);
      await again.stop();
      const later = await openLogger({
        instanceDir: dir,
        instanceId: 'retries',
        clock: () => NEXT_DAY_MS,
        s3: s3Of(back.env),
        options: { shipper_enabled: true },
      });
      try {
        for (let i = 0; i < 100 && later.stats().shipper.last_shipped === null; i++)
          await new Promise((r) => setTimeout(r, 10));
        assert.equal(later.stats().shipper.last_shipped?.day, DAY, 'read back from the days index');
      } finally {
        await later.stop();
      }
    } finally {
      await back.stop({ removeData: true });
    }
  });
});
