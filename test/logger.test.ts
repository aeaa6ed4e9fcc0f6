import assert from 'node:assert/strict';
import { existsSync, readdirSync } from 'node:fs';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { BatchBuilder, packBatch } from '../src/delta/batch.ts';
import { DeltaTable } from '../src/delta/table.ts';
import { Logger, TABLE_NAMES } from '../src/index.ts';
import { SCHEMAS } from '../src/schema/tables.ts';
import { RowNormalizer } from '../src/schema/validate.ts';

let dir: string;
before(async () => {
  dir = await mkdtemp(join(tmpdir(), 'otelake-logger-'));
});
after(async () => {
  await rm(dir, { recursive: true, force: true });
});

const BIG = 2n ** 62n + 12345n; // beyond 2^53: must survive exactly
const today = () => new Date().toISOString().slice(0, 10);

/** Waits until `done`, up to 15 s: the first file starts the Parquet worker, slow on a loaded machine. */
async function until(what: string, done: () => boolean | Promise<boolean>): Promise<void> {
  for (let i = 0; i < 300 && !(await done()); i++) await new Promise((r) => setTimeout(r, 50));
  assert.ok(await done(), what);
}

describe('Logger', () => {
  it("prepares the instance: options, days index and today's six empty tables", async () => {
    const logger = await Logger.open({ instanceDir: dir, instanceId: 'prep', handleSignals: false });
    const root = join(dir, 'prep');
    const saved = JSON.parse(await readFile(join(root, 'configs', 'options.json'), 'utf8'));
    assert.equal(saved.producer_config.max_queue_size, 2048);
    const index = (await readFile(join(root, 'index', 'days.jsonl'), 'utf8'))
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l));
    assert.deepEqual(
      index.map((l) => [l.day, l.phase]),
      [[today(), 'open']],
    );
    for (const t of TABLE_NAMES) {
      const table = await DeltaTable.open(join(root, 'staging', 'days', today(), 'otel', t));
      assert.equal(table.rowCount(), 0, t);
      assert.deepEqual(
        await logger.read(t, { projectId: 'p', maxRows: 10 }),
        [],
        `empty ${t} reads as no rows`,
      );
    }
    await logger.stop();
  });

  it("refuses an init that is not its settings, and takes the specification's instance_dir and instance_id", async () => {
    // Each of these once opened ./svc_data/default unnoticed: a path instead of the object, a
    // mistyped key, an S3 field in another spelling.
    const refused: [unknown, RegExp][] = [
      [null, /init is an object .* got null/],
      ['./data', /got string/],
      [[], /got an array/],
      [{ dir: dir }, /unknown setting "dir"; the settings: instanceId, instanceDir/],
      [{ instanceDir: dir, s3: { access_key_id: 'x' } }, /unknown s3 setting "access_key_id"/],
      [
        { instance_dir: dir, instanceDir: join(dir, 'other') },
        /instance_dir and instanceDir are the same setting/,
      ],
      [{ instanceDir: 5 }, /instanceDir is a string/],
    ];
    for (const [init, message] of refused) {
      assert.throws(() => new Logger(init as never), message, JSON.stringify(init));
    }
    const logger = await Logger.open({ instance_dir: dir, instance_id: 'spec-names', handleSignals: false });
    await logger.stop();
    assert.ok(existsSync(join(dir, 'spec-names', 'configs', 'options.json')));
  });

  it('ingests, commits and reads back log rows exactly, newest first', async () => {
    const logger = await Logger.open({ instanceDir: dir, instanceId: 'rw', handleSignals: false });
    const t0 = 1_763_700_000_000_000_000n;
    const results = await Promise.all([
      logger.ingestLog({
        project_id: 'shop',
        time_unix_nano: t0,
        severity_number: 9,
        body: 'first',
        service_name: 'api',
      }),
      logger.ingestLog({
        project_id: 'shop',
        time_unix_nano: (t0 + 2000n).toString(),
        severity_number: 17,
        body: 'épée 🚀 failed',
        observed_time_unix_nano: BIG,
      }),
      logger.ingestLog({
        project_id: 'shop',
        time_unix_nano: Number(t0 / 1_000_000n) * 1_000_000 + 1000,
        body: null,
      }),
      logger.ingestLog({ project_id: 'shop', severity_number: 9 }),
      logger.ingestLog({ project_id: 'shop', time_unix_nano: t0, severity_number: 'loud' }),
    ]);
    assert.deepEqual(results, [
      [true, null],
      [true, null],
      [true, null],
      [false, 'missing_required:time_unix_nano'],
      [false, 'invalid_type:severity_number'],
    ]);
    await logger.stop({ flush: 'auto' });
    const rows = await logger.readLogs({ projectId: 'shop' });
    assert.equal(rows.length, 3);
    // The number form is a double: it arrives rounded, and is stored as that double's value.
    const asNumber = BigInt(Number(t0 / 1_000_000n) * 1_000_000 + 1000);
    assert.deepEqual(
      rows.map((r) => r['time_unix_nano']),
      [t0 + 2000n, asNumber, t0],
    );
    assert.equal(rows[0]['observed_time_unix_nano'], BIG);
    assert.equal(rows[0]['body'], 'épée 🚀 failed');
    assert.equal(rows[0]['event_ts'], (t0 + 2000n) / 1000n);
    assert.equal(rows[0]['service_name'], 'unknown_service');
    assert.equal(rows[2]['service_name'], 'api');
    assert.equal(rows[1]['body'], null);
    const errors = await logger.readLogs({ severityGe: 17, select: ['body', 'severity_number'] });
    assert.deepEqual(errors, [{ body: 'épée 🚀 failed', severity_number: 17 }]);
    // The specification's spellings (read_logs(severity_ge=..., return_as=...)) read the same.
    const spec = logger.readLogs.bind(logger) as (q: Record<string, unknown>) => Promise<unknown>;
    assert.deepEqual(await spec({ severity_ge: 17, select: ['body', 'severity_number'] }), errors);
    assert.deepEqual(await spec({ project_id: 'shop', max_rows: 1, return_as: 'objects' }), [rows[0]]);
    const lazy = (await spec({ project_id: 'shop', return_as: 'lazy' })) as {
      collect(): Promise<{ height: number }>;
    };
    assert.equal((await lazy.collect()).height, 3);
    await assert.rejects(
      spec({ project_id: 'shop', projectId: 'other' }),
      /project_id and projectId are the same parameter/,
    );
    await assert.rejects(spec({ severity_gte: 3 }), /unknown query parameter "severity_gte"/);
    assert.deepEqual(await spec({ max_rows: 1, maxRows: 1, select: ['body'] }), [{ body: rows[0]['body'] }]);
    const streamed = [];
    for await (const r of logger.readStream('logs', { max_rows: 2 } as never)) streamed.push(r);
    assert.deepEqual(streamed, rows.slice(0, 2));
    const stats = logger.stats();
    assert.equal(stats.producer.accepted, 3);
    assert.deepEqual(stats.producer.rejected, {
      'missing_required:time_unix_nano': 1,
      'invalid_type:severity_number': 1,
    });
    assert.equal(stats.aggregator.rows_written, 3);
  });

  it('with auto_start false refuses rows until start(), and start() is idempotent', async () => {
    const logger = await Logger.open({
      instanceDir: dir,
      instanceId: 'manual',
      options: { auto_start: false },
      handleSignals: false,
    });
    assert.deepEqual(await logger.ingestLog({ project_id: 'p', time_unix_nano: 1n }), [false, 'not_started']);
    await Promise.all([logger.start(), logger.start()]);
    await logger.start();
    assert.deepEqual(await logger.ingestLog({ project_id: 'p', time_unix_nano: 1n }), [true, null]);
    await logger.stop();
    assert.deepEqual(await logger.ingestLog({ project_id: 'p', time_unix_nano: 1n }), [false, 'stopped']);
    await assert.rejects(logger.start(), /cannot start a logger that is stopped/);
    assert.equal((await logger.readLogs()).length, 1);
  });

  for (const autoStart of [false, true]) {
    it(`the specified order works: construct, await start(), ingest (auto_start ${autoStart})`, async () => {
      const logger = new Logger({
        instanceDir: dir,
        instanceId: `order-${autoStart}`,
        options: { auto_start: autoStart },
        handleSignals: false,
      });
      // start() right after the constructor waits for the instance to be prepared.
      await logger.start();
      assert.deepEqual(await logger.ingestLog({ project_id: 'p', time_unix_nano: 1n }), [true, null]);
      await logger.stop();
      assert.equal((await logger.readLogs()).length, 1);
    });
  }

  it('reloads the saved options when created without options', async () => {
    const a = await Logger.open({
      instanceDir: dir,
      instanceId: 'persist',
      options: { aggregator_config: { max_batch_rows: 4321 } },
      handleSignals: false,
    });
    await a.stop();
    const b = await Logger.open({ instanceDir: dir, instanceId: 'persist', handleSignals: false });
    assert.equal(b.options.aggregator_config.max_batch_rows, 4321);
    await b.stop();
  });

  it('stop({flush:"none"}) drops the queue but leaves readable tables; "auto" loses nothing', async () => {
    const opts = { aggregator_config: { max_age_s: 3600, min_batch_rows: 1000, max_batch_rows: 1000 } };
    const rows = (n: number) =>
      Array.from({ length: n }, (_, i) => ({ project_id: 'p', time_unix_nano: BigInt(i + 1) }));
    const none = await Logger.open({
      instanceDir: dir,
      instanceId: 'none',
      options: opts,
      handleSignals: false,
    });
    const r = await none.ingestRows('logs', rows(1500));
    assert.equal(r.accepted, 1500);
    await none.stop({ flush: 'none' });
    const kept = (await none.readLogs()).length;
    assert.ok(kept < 1500, `flush none must not drain everything (kept ${kept})`);
    assert.equal(kept % 1000, 0, 'only whole batches already handed to the writer are committed');

    const auto = await Logger.open({
      instanceDir: dir,
      instanceId: 'auto',
      options: opts,
      handleSignals: false,
    });
    await auto.ingestRows('logs', rows(1500));
    await auto.stop({ flush: 'auto' });
    assert.equal((await auto.readLogs()).length, 1500);
  });

  it('stop({flush:"none"}) finishes and commits a write in flight, without a write-ahead log too', async () => {
    const none = await Logger.open({
      instanceDir: dir,
      instanceId: 'none-in-flight',
      options: { durability: 'memory', aggregator_config: { min_batch_rows: 1 } },
      handleSignals: false,
    });
    const rows = Array.from({ length: 1000 }, (_, i) => ({ project_id: 'p', time_unix_nano: BigInt(i + 1) }));
    assert.equal((await none.ingestRows('logs', rows)).accepted, 1000);
    const deadline = Date.now() + 10_000;
    while (none.stats().aggregator.writes_in_flight === 0) {
      assert.ok(Date.now() < deadline, 'the batch went to its writer');
      await new Promise((r) => setImmediate(r));
    }
    await none.stop({ flush: 'none' });
    const { rows_written, rows_failed } = none.stats().aggregator;
    assert.equal(rows_failed, 0, 'a file written is committed, not given up');
    assert.equal(rows_written, 1000);
    assert.equal((await none.readLogs({ maxRows: 2000 })).length, 1000);
  });

  it('writes a batch that waited across midnight into the day its rows arrived in', async () => {
    let now = Date.parse('2030-01-01T23:59:59.800Z');
    const logger = await Logger.open({
      instanceDir: dir,
      instanceId: 'midnight',
      options: { aggregator_config: { max_age_s: 3600, min_batch_rows: 1000 } },
      clock: () => now,
      handleSignals: false,
    });
    assert.deepEqual(await logger.ingestLog({ project_id: 'p', time_unix_nano: 1n, body: 'late' }), [
      true,
      null,
    ]);
    now = Date.parse('2030-01-02T00:00:00.300Z');
    assert.deepEqual(await logger.ingestLog({ project_id: 'p', time_unix_nano: 2n, body: 'new day' }), [
      true,
      null,
    ]);
    await logger.stop();
    const day1 = await logger.readLogs({ dateFrom: '2030-01-01', dateTo: '2030-01-01' });
    const day2 = await logger.readLogs({ dateFrom: '2030-01-02', dateTo: '2030-01-02' });
    assert.deepEqual(
      day1.map((r) => r['body']),
      ['late'],
    );
    assert.deepEqual(
      day2.map((r) => r['body']),
      ['new day'],
    );
    const index = await readFile(join(dir, 'midnight', 'index', 'days.jsonl'), 'utf8');
    assert.match(index, /"day":"2030-01-02","phase":"open"/);
  });

  it("deletes a finished day's files that in-day compaction replaced once its tables close, without shipping", async () => {
    // The clock runs, shifted to just before midnight, then moved past it.
    let shift = Date.parse('2030-01-03T23:58:00Z') - Date.now();
    const logger = await Logger.open({
      instanceDir: dir,
      instanceId: 'replaced',
      options: {
        aggregator_config: { max_age_s: 0.1, min_batch_rows: 1 },
        storage_config: { compact_min_files: 2, compact_small_file_rows: 1000 },
      },
      clock: () => Date.now() + shift,
      handleSignals: false,
    });
    const dayDir = join(dir, 'replaced', 'staging', 'days', '2030-01-03', 'otel', 'logs');
    const onDisk = () => readdirSync(dayDir).filter((n) => n.endsWith('.parquet')).length;
    const live = async () => (await DeltaTable.open(dayDir)).files.length;
    for (let i = 0; i < 6; i++) {
      await logger.ingestLog({ project_id: 'p', time_unix_nano: BigInt(i + 1), body: `row ${i}` });
      await until('written', () => logger.stats().aggregator.rows_written === i + 1);
    }
    await until('compacted: removed files still on disk', async () => onDisk() > (await live()));
    shift += 3 * 60_000;
    await logger.ingestLog({ project_id: 'p', time_unix_nano: 7n, body: 'next day' });
    await until('the next day written', () => logger.stats().aggregator.rows_written === 7);
    await until('the finished day keeps only its live files', async () => onDisk() === (await live()));
    await logger.stop();
    const rows = await logger.readLogs({ dateFrom: '2030-01-03', dateTo: '2030-01-03' });
    assert.equal(rows.length, 6);
  });

  it("deletes them at the next start when no process ran at the day's end, without shipping", async () => {
    let now = Date.parse('2030-01-05T23:50:00Z');
    const clock = () => now;
    const options = {
      aggregator_config: { max_age_s: 0.1, min_batch_rows: 1 },
      storage_config: { compact_min_files: 2, compact_small_file_rows: 1000 },
    };
    const messages: string[] = [];
    const open = () =>
      Logger.open({
        instanceDir: dir,
        instanceId: 'stopped-over-midnight',
        options,
        clock,
        handleSignals: false,
        log: (_level, message) => messages.push(message),
      });
    const dayDir = join(dir, 'stopped-over-midnight', 'staging', 'days', '2030-01-05', 'otel', 'logs');
    const onDisk = () => readdirSync(dayDir).filter((n) => n.endsWith('.parquet')).length;
    const live = async () => (await DeltaTable.open(dayDir)).files.length;
    const first = await open();
    for (let i = 0; i < 6; i++) {
      await first.ingestLog({ project_id: 'p', time_unix_nano: BigInt(i + 1), body: `row ${i}` });
      await until('written', () => first.stats().aggregator.rows_written === i + 1);
    }
    await until('compacted: removed files still on disk', async () => onDisk() > (await live()));
    await first.stop();
    const left = onDisk() - (await live());
    assert.ok(left > 0, 'the stop, before midnight, leaves the replaced files');

    now = Date.parse('2030-01-06T08:00:00Z');
    const second = await open();
    await until('the next start deletes them', async () => onDisk() === (await live()));
    assert.ok(
      messages.some((m) => m.endsWith(`deleted ${left} files that in-day compaction replaced in 2030-01-05`)),
      messages.join('\n'),
    );
    const rows = await second.readLogs({ dateFrom: '2030-01-05', dateTo: '2030-01-05' });
    assert.equal(rows.length, 6);
    await second.stop();
  });

  it("opens each day's tables with the storage_config options", async () => {
    const logDir = (id: string) => join(dir, id, 'staging', 'days', today(), 'otel', 'logs', '_delta_log');
    for (const [id, interval] of [
      ['ckpt1', 1],
      ['ckpt100', 100],
    ] as const) {
      const logger = await Logger.open({
        instanceDir: dir,
        instanceId: id,
        handleSignals: false,
        options: { storage_config: { checkpoint_interval: interval } },
      });
      await logger.ingestLog({ project_id: 'p', time_unix_nano: 1n, body: 'x' });
      await logger.stop({ flush: 'auto' });
    }
    // Version 1 is the flush's commit: a checkpoint follows it only at interval 1.
    assert.ok(existsSync(join(logDir('ckpt1'), '00000000000000000001.checkpoint.parquet')));
    assert.ok(existsSync(join(logDir('ckpt100'), '00000000000000000001.json')));
    assert.ok(!existsSync(join(logDir('ckpt100'), '00000000000000000001.checkpoint.parquet')));
  });

  it('ingests rows of every table through ingestRows', async () => {
    const logger = await Logger.open({ instanceDir: dir, instanceId: 'all', handleSignals: false });
    const r = await logger.ingestRows('metrics_hist', [
      {
        project_id: 'p',
        time_unix_nano: 5_000n,
        metric_name: 'latency',
        bucket_counts: [1n, BIG],
        explicit_bounds: [0.5],
      },
      { project_id: 'p', metric_name: 'no time' },
    ]);
    assert.deepEqual([r.accepted, r.rejected, r.firstError], [1, 1, 'missing_required:time_unix_nano']);
    await logger.stop();
    const [row] = await logger.readMetricHist({ metricName: 'latency' });
    assert.deepEqual(row['bucket_counts'], [1n, BIG]);
    assert.deepEqual(row['explicit_bounds'], [0.5]);
  });

  it('counts the rejections of ingestRows and ingestRequest in the result and in stats()', async () => {
    const logger = await Logger.open({ instanceDir: dir, instanceId: 'rejects', handleSignals: false });
    const rows = await logger.ingestRows('logs', [
      { project_id: 'p' },
      { project_id: 'p', time_unix_nano: 1n, severity_number: 'high' },
      { project_id: 'p' },
      { project_id: 'p', time_unix_nano: 1n },
    ]);
    assert.deepEqual(rows, {
      accepted: 1,
      rejected: 3,
      dropped: 0,
      queueFull: false,
      firstError: 'missing_required:time_unix_nano',
      reasons: { 'missing_required:time_unix_nano': 2, 'invalid_type:severity_number': 1 },
    });
    // A batch as the server's decode workers build it, with the reasons of the rows they refused.
    const normalizer = new RowNormalizer(SCHEMAS.logs, {
      validateRequired: true,
      validateTypes: true,
      normalizeServiceName: true,
      defaultServiceName: 'unknown_service',
      strictColumns: true,
    });
    const builder = new BatchBuilder(SCHEMAS.logs);
    builder.pushValues(normalizer.normalize({ project_id: 'p', time_unix_nano: 2n }) as unknown[]);
    const batch = packBatch(builder.finish());
    const rejected = { 'invalid_type:body': 2, not_an_object: 1 };
    const request = await logger.ingestRequest({ logs: { batch, rejected } });
    assert.equal(request.outcome, 'accepted');
    assert.deepEqual(request.tables.logs, {
      accepted: 1,
      rejected: 3,
      dropped: 0,
      queueFull: false,
      firstError: 'invalid_type:body',
      reasons: rejected,
    });
    const expected = { ...rows.reasons, 'invalid_type:body': 2, not_an_object: 1 };
    assert.deepEqual(logger.stats().producer.rejected, expected);
    await logger.stop();
    // Stopped: ingestRows refuses before validating, ingestRequest still counts the caller's rejections.
    const lateRows = await logger.ingestRows('logs', [{ project_id: 'p' }]);
    assert.deepEqual([lateRows.rejected, lateRows.dropped, lateRows.firstError], [0, 1, 'stopped']);
    const late = await logger.ingestRequest({ logs: { batch, rejected: { not_an_object: 4 } } });
    assert.equal(late.outcome, 'stopped');
    const lateBatch = late.tables.logs!;
    assert.deepEqual(
      [lateBatch.rejected, lateBatch.reasons, lateBatch.dropped, lateBatch.firstError],
      [4, { not_an_object: 4 }, 1, 'stopped'],
    );
    assert.deepEqual(logger.stats().producer.rejected, { ...expected, not_an_object: 5 });
  });

  it('rejects invalid read arguments clearly', async () => {
    const logger = await Logger.open({ instanceDir: dir, instanceId: 'args', handleSignals: false });
    await assert.rejects(logger.readLogs({ dateFrom: '2026-13-01' }), /dateFrom/);
    await assert.rejects(
      logger.readLogs({ dateFrom: '2026-11-21', dateTo: '2026-11-20' }),
      /dateFrom.*dateTo|after/,
    );
    await assert.rejects(logger.readLogs({ select: ['nope'] }), /nope/);
    await assert.rejects(logger.readLogs({ storage: 'cloud' as never }), /storage/);
    await logger.stop();
    assert.equal(existsSync(join(dir, 'args', 'configs', 'options.json')), true);
  });
});
