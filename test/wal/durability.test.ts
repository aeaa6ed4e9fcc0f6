// The write-ahead log behind the Logger: acknowledged rows survive a crash at any moment and are
// written exactly once. A crash is taken as a copy of the instance's files while the logger runs
// (what a killed process leaves); test/server/crash.test.ts kills real server processes.

import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { cp, mkdir, mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { BatchBuilder, packBatch } from '../../src/delta/batch.ts';
import { DeltaTable } from '../../src/delta/table.ts';
import { Logger, type PartialOptions } from '../../src/index.ts';
import { SCHEMAS } from '../../src/schema/tables.ts';
import { RowNormalizer, validationSettings } from '../../src/schema/validate.ts';
import { defaultOptions } from '../../src/storage/options.ts';
import { WriteAheadLog } from '../../src/wal/wal.ts';
import { WINDOW_MS } from '../../src/wal/write-path.ts';

let dir: string;
before(async () => {
  dir = await mkdtemp(join(tmpdir(), 'otelake-durability-'));
});
after(async () => {
  await rm(dir, { recursive: true, force: true });
});

const today = () => new Date().toISOString().slice(0, 10);
const logRow = (i: number) => ({ project_id: 'p', time_unix_nano: BigInt(i), body: `row ${i}` });

/** A packed batch of log rows i = from .. from + n - 1, as the server's decode workers build them. */
function logBatch(n: number, from: number) {
  const normalizer = new RowNormalizer(
    SCHEMAS.logs,
    validationSettings(defaultOptions().producer_config, true),
  );
  const b = new BatchBuilder(SCHEMAS.logs, n);
  for (let i = 0; i < n; i++) b.pushValues(normalizer.normalize(logRow(from + i)) as unknown[]);
  return packBatch(b.finish());
}

/** A packed batch of spans whose start times are from .. from + n - 1. */
function spanBatch(n: number, from: number) {
  const normalizer = new RowNormalizer(
    SCHEMAS.spans,
    validationSettings(defaultOptions().producer_config, true),
  );
  const b = new BatchBuilder(SCHEMAS.spans, n);
  for (let i = 0; i < n; i++) {
    b.pushValues(
      normalizer.normalize({
        project_id: 'p',
        name: 's',
        start_time_unix_nano: BigInt(from + i),
      }) as unknown[],
    );
  }
  return packBatch(b.finish());
}

/** The time_unix_nano of every stored log row, sorted. */
async function storedTimes(logger: Logger): Promise<number[]> {
  const rows = await logger.readLogs({ maxRows: 1_000_000, select: ['time_unix_nano'] });
  return rows.map((r) => Number(r['time_unix_nano'])).sort((a, b) => a - b);
}

const range = (n: number, from = 0) => Array.from({ length: n }, (_, i) => from + i);

/** Opens the logger of instance `instanceId` under the test's folder, without signal handlers. */
const openLogger = (instanceId: string, options?: PartialOptions) =>
  Logger.open({ instanceDir: dir, instanceId, handleSignals: false, ...(options ? { options } : {}) });

/** Options under which nothing is written to the tables for a minute (rows wait in memory). */
const HOLD: PartialOptions = {
  aggregator_config: { max_age_s: 60, min_batch_rows: 100_000, max_batch_rows: 100_000 },
};

describe('durability "wal"', () => {
  it('rows acknowledged by ingestLog survive a crash and are written once after the restart', async () => {
    const logger = await openLogger('crash', HOLD);
    const results = await Promise.all(range(300).map((i) => logger.ingestLog(logRow(i))));
    assert.ok(results.every(([ok]) => ok));
    // The process dies now: nothing is in the tables, every row is in the log.
    await cp(join(dir, 'crash'), join(dir, 'crashed'), { recursive: true });
    await logger.stop({ flush: 'none' });
    assert.ok((await readdir(join(dir, 'crashed', 'wal'))).some((n) => n.endsWith('.wal')));
    const restarted = await openLogger('crashed');
    await restarted.stop();
    assert.deepEqual(await storedTimes(restarted), range(300));
    assert.deepEqual(
      (await readdir(join(dir, 'crashed', 'wal'))).filter((n) => n.endsWith('.wal')),
      [],
      'committed: the log is empty',
    );
    // A second restart finds nothing left to replay.
    const again = await openLogger('crashed');
    await again.stop();
    assert.deepEqual(await storedTimes(again), range(300));
  });

  it("rows acknowledged while the log writes through libuv's pool (a saturated loop) survive a crash", async () => {
    const logger = await openLogger('crash-pool', HOLD);
    // An idle window and a write start a fresh window; a loop kept busy through it sends the next
    // writes to the pool (src/wal/write-path.ts).
    await new Promise((resolve) => setTimeout(resolve, WINDOW_MS + 50));
    assert.deepEqual(await logger.ingestLog(logRow(0)), [true, null]);
    const until = performance.now() + WINDOW_MS + 50;
    while (performance.now() < until);
    const results = await Promise.all(range(299, 1).map((i) => logger.ingestLog(logRow(i))));
    assert.ok(results.every(([ok]) => ok));
    assert.equal(logger.stats().wal?.write_path, 'pool');
    await cp(join(dir, 'crash-pool'), join(dir, 'crashed-pool'), { recursive: true });
    await logger.stop({ flush: 'none' });
    const restarted = await openLogger('crashed-pool');
    await restarted.stop();
    assert.deepEqual(await storedTimes(restarted), range(300));
  });

  it('replays only the rows a table does not have yet, by the position its commits record', async () => {
    const root = join(dir, 'partial');
    // An earlier process logged three requests (rows 0-29), then committed the first one and five
    // rows of the second before it died.
    const { wal } = await WriteAheadLog.open(join(root, 'wal'));
    for await (const _ of wal.replay());
    for (let r = 0; r < 3; r++) {
      await wal.append([{ table: 'logs', day: today(), batch: logBatch(10, r * 10) }], () => {});
    }
    await wal.close();
    const table = await DeltaTable.createOrOpen(
      join(root, 'staging', 'days', today(), 'otel', 'logs'),
      SCHEMAS.logs,
    );
    await table.append(logBatch(15, 0), { txn: { appId: wal.appId, version: 15 } });
    await table.close();
    const logger = await openLogger('partial');
    await logger.stop();
    assert.deepEqual(await storedTimes(logger), range(30), 'rows 15-29 replayed, none twice');
    const after = await DeltaTable.open(join(root, 'staging', 'days', today(), 'otel', 'logs'));
    assert.equal(after.txnVersion(wal.appId), 30);
  });

  it('rows the replay cannot queue (their table does not open) are held in the log, then queued once it opens', async () => {
    const logger = await openLogger('held', HOLD);
    assert.ok((await Promise.all(range(100).map((i) => logger.ingestLog(logRow(i))))).every(([ok]) => ok));
    await cp(join(dir, 'held'), join(dir, 'held-crashed'), { recursive: true });
    await logger.stop({ flush: 'none' });
    // After the restart the logs table of today does not open: a file stands where its folder goes.
    const tableDir = join(dir, 'held-crashed', 'staging', 'days', today(), 'otel', 'logs');
    await rm(tableDir, { recursive: true, force: true });
    await mkdir(dirname(tableDir), { recursive: true });
    await writeFile(tableDir, 'not a table');
    const restarted = await Logger.open({
      instanceDir: dir,
      instanceId: 'held-crashed',
      handleSignals: false,
      heldRetryMs: 50,
      log: () => {},
    });
    // New rows of that table and day are refused meanwhile: their commit's `txn` would count the
    // held rows as written, and the next start would skip them.
    const [ok] = await restarted.ingestLog(logRow(1000));
    assert.equal(ok, false);
    assert.match(restarted.problems().join('\n'), /100 rows of the logs table of .* are held/);
    // Nor has the day landed: a seal of it fails, to be tried again later.
    await assert.rejects(restarted.whenDayLanded(today()), /has not landed: 100 rows of the logs table/);
    // Mended, the table opens at the next try: the held rows are queued, and ingest resumes.
    await rm(tableDir);
    for (let waited = 0; restarted.problems().length > 0; waited += 20) {
      assert.ok(waited < 10_000, `still held: ${restarted.problems()}`);
      await new Promise((r) => setTimeout(r, 20));
    }
    await restarted.whenDayLanded(today());
    assert.ok(
      (await Promise.all(range(50, 100).map((i) => restarted.ingestLog(logRow(i))))).every(([ok]) => ok),
    );
    await restarted.stop();
    assert.deepEqual(await storedTimes(restarted), range(150));
    // The next start finds every row written once: none skipped, none replayed again.
    const again = await openLogger('held-crashed');
    await again.stop();
    assert.deepEqual(await storedTimes(again), range(150));
  });

  it('a stop whose writes keep failing says how many rows it leaves in the log; the next start writes them once', async () => {
    const lines: string[] = [];
    const logger = await Logger.open({
      instanceDir: dir,
      instanceId: 'unwritten',
      handleSignals: false,
      options: HOLD,
      stopFlushTimeoutMs: 300,
      log: (level, message) => lines.push(`${level} ${message}`),
    });
    assert.ok((await Promise.all(range(40).map((i) => logger.ingestLog(logRow(i))))).every(([ok]) => ok));
    assert.equal(logger.unwrittenAtStop, 0);
    // A file stands where today's logs table goes: every write of it fails.
    const tableDir = join(dir, 'unwritten', 'staging', 'days', today(), 'otel', 'logs');
    await rm(tableDir, { recursive: true, force: true });
    await mkdir(dirname(tableDir), { recursive: true });
    await writeFile(tableDir, 'not a table');
    await logger.stop();
    assert.equal(logger.unwrittenAtStop, 40);
    assert.ok(
      lines.some((l) =>
        /^warn stopped with 40 accepted rows not written .* stay in the write-ahead log/.test(l),
      ),
      lines.join('\n'),
    );
    await rm(tableDir);
    const again = await openLogger('unwritten');
    await again.stop();
    assert.equal(again.unwrittenAtStop, 0);
    assert.deepEqual(await storedTimes(again), range(40));
  });

  it('a request is stored whole or not at all across the tables it feeds', async () => {
    const logger = await Logger.open({
      instanceDir: dir,
      instanceId: 'whole',
      handleSignals: false,
      options: { producer_config: { max_queue_size: 10, block_timeout_s: 0 } },
    });
    // 300 requests of 3 spans and 3 log rows each against a queue of 10 that the aggregator
    // drains meanwhile: many are refused, and each is stored entirely or not at all.
    const outcomes = await Promise.all(
      range(300).map((r) =>
        logger.ingestRequest({
          logs: { batch: logBatch(3, r * 10) },
          spans: { batch: spanBatch(3, r * 10) },
        }),
      ),
    );
    const accepted = range(300).filter((r) => outcomes[r]!.outcome === 'accepted');
    assert.ok(accepted.length > 0 && accepted.length < 300, `${accepted.length} of 300 accepted`);
    assert.ok(outcomes.every((o) => o.outcome === 'accepted' || o.outcome === 'queue_full'));
    await logger.stop();
    const expected = accepted.flatMap((r) => range(3, r * 10));
    assert.deepEqual(await storedTimes(logger), expected);
    const spans = await logger.readSpans({ maxRows: 1_000_000, select: ['start_time_unix_nano'] });
    assert.deepEqual(
      spans.map((s) => Number(s['start_time_unix_nano'])).sort((a, b) => a - b),
      expected,
    );
  });

  it('with 5,000 concurrent ingestLog calls the queue never holds more than max_queue_size', async () => {
    const logger = await Logger.open({
      instanceDir: dir,
      instanceId: 'bound',
      handleSignals: false,
      options: { ...HOLD, producer_config: { max_queue_size: 10, drop_policy: 'drop_newest' } },
    });
    const results = await Promise.all(range(5000).map((i) => logger.ingestLog(logRow(i))));
    const accepted = results.filter(([ok]) => ok).length;
    assert.equal(accepted, 10);
    assert.ok(results.filter(([ok]) => !ok).every(([, reason]) => reason === 'queue_full'));
    assert.equal(logger.stats().producer.queue_depth, 10);
    await logger.stop();
    assert.equal((await storedTimes(logger)).length, 10);
  });

  it('stop with flush "none" keeps the queued rows in the log: the next start writes them', async () => {
    const logger = await openLogger('none', HOLD);
    await Promise.all(range(50).map((i) => logger.ingestLog(logRow(i))));
    await logger.stop({ flush: 'none' });
    assert.deepEqual(await storedTimes(logger), []);
    assert.equal(logger.stats().producer.dropped['stopped_unflushed'], undefined, 'nothing dropped');
    const next = await openLogger('none');
    await next.stop();
    assert.deepEqual(await storedTimes(next), range(50));
  });
});

describe('OTELAKE_WAL_SEGMENT_BYTES', () => {
  after(() => {
    delete process.env['OTELAKE_WAL_SEGMENT_BYTES'];
  });

  it('sets the size of a log segment; a value that is not a size is reported and ignored', async () => {
    process.env['OTELAKE_WAL_SEGMENT_BYTES'] = '8192';
    const small = await openLogger('seg', HOLD);
    // One at a time: a group of appends is written to one segment.
    for (const i of range(300)) await small.ingestLog(logRow(i));
    assert.ok(small.stats().wal!.segments > 2, `${small.stats().wal!.segments} segments`);
    await small.stop({ flush: 'none' });
    process.env['OTELAKE_WAL_SEGMENT_BYTES'] = '8k';
    const lines: string[] = [];
    const next = await Logger.open({
      instanceDir: dir,
      instanceId: 'seg',
      handleSignals: false,
      log: (level, message) => lines.push(`${level}: ${message}`),
    });
    assert.ok(
      lines.includes(
        'warn: OTELAKE_WAL_SEGMENT_BYTES=8k ignored: expected an integer of at least 4096 (bytes)',
      ),
      lines.join('\n'),
    );
    await next.stop();
    assert.deepEqual(await storedTimes(next), range(300), 'every row of the small segments replayed');
  });
});

describe('durability "memory"', () => {
  it('keeps no log, and loses what is queued on a crash (the documented window)', async () => {
    const options: PartialOptions = { ...HOLD, durability: 'memory' };
    const logger = await openLogger('mem', options);
    await Promise.all(range(20).map((i) => logger.ingestLog(logRow(i))));
    assert.equal(existsSync(join(dir, 'mem', 'wal')), false);
    assert.equal(logger.stats().wal, null);
    await cp(join(dir, 'mem'), join(dir, 'mem-crashed'), { recursive: true });
    await logger.stop();
    assert.deepEqual(await storedTimes(logger), range(20), 'a clean stop writes them');
    const restarted = await openLogger('mem-crashed');
    await restarted.stop();
    assert.deepEqual(await storedTimes(restarted), [], 'the crash lost the queued rows');
  });

  it('a start with "memory" writes the rows a crashed run with "wal" left in the log; the next runs without it', async () => {
    const logger = await openLogger('to-mem', HOLD);
    await Promise.all(range(50).map((i) => logger.ingestLog(logRow(i))));
    await cp(join(dir, 'to-mem'), join(dir, 'to-mem-crashed'), { recursive: true });
    await logger.stop({ flush: 'none' });
    const open = (lines: string[]) =>
      Logger.open({
        instanceDir: dir,
        instanceId: 'to-mem-crashed',
        handleSignals: false,
        options: { ...HOLD, durability: 'memory' },
        log: (level, message) => lines.push(`${level}: ${message}`),
      });
    const lines: string[] = [];
    const mem = await open(lines);
    assert.ok(
      lines.some((l) => l.startsWith('warn: the write-ahead log holds rows of a run with durability "wal"')),
      lines.join('\n'),
    );
    // This run logs its own rows too, as "wal" would: a crash now loses neither.
    assert.equal(mem.stats().durability, 'wal');
    assert.deepEqual(await mem.ingestLog(logRow(50)), [true, null]);
    await mem.stop();
    assert.deepEqual(await storedTimes(mem), range(51), 'every row of the crashed run written once');
    const segments = await readdir(join(dir, 'to-mem-crashed', 'wal'));
    assert.deepEqual(
      segments.filter((n) => n.endsWith('.wal')),
      [],
      'the log emptied',
    );
    const quiet: string[] = [];
    const next = await open(quiet);
    assert.equal(next.stats().durability, 'memory');
    assert.equal(next.stats().wal, null);
    assert.deepEqual(
      quiet.filter((l) => l.includes('write-ahead log')),
      [],
    );
    await next.stop();
    assert.deepEqual(await storedTimes(next), range(51));
  });
});
