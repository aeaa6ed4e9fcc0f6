import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { BatchBuilder, type Batches, joinBatches, packBatch, transferables } from '../../src/delta/batch.ts';
import type { DataFile, TxnMark } from '../../src/delta/table.ts';
import { Aggregator, FILE_ROWS, type TableWriter } from '../../src/pipeline/aggregator.ts';
import { Producer } from '../../src/pipeline/producer.ts';
import { SCHEMAS, type TableName } from '../../src/schema/tables.ts';
import { defaultOptions } from '../../src/storage/options.ts';

// An in-memory table writer: the aggregator's contract is "write files, commit them in order";
// the real Delta writer is exercised by the logger and delta tests.
type MemoryFile = DataFile & { values: bigint[] };

class MemoryTables {
  written = new Map<string, bigint[][]>();
  /** When each write began (performance.now()), by table and day. */
  starts = new Map<string, number[]>();
  /** The txn marks of the commits, by table and day. */
  txns = new Map<string, (TxnMark | null)[]>();
  failNext = 0;
  /** Fail like a worker that died mid-write: the transferred batch is gone. */
  loseNext = 0;
  failCommits = 0;
  gate: Promise<void> | null = null;
  /** Delays the write of the batch whose first time_unix_nano is this, until `release` is called. */
  holdFirst: bigint | null = null;
  release: () => void = () => {};
  open = async (table: TableName, day: string): Promise<TableWriter> => ({
    write: async (batch: Batches) => {
      const key = `${table}/${day}`;
      this.starts.set(key, [...(this.starts.get(key) ?? []), performance.now()]);
      if (this.gate) await this.gate;
      if (this.failNext > 0) {
        this.failNext--;
        throw Object.assign(new Error('disk hiccup'), { batch });
      }
      if (this.loseNext > 0) {
        this.loseNext--;
        structuredClone(batch, { transfer: transferables(batch) });
        throw new Error('worker exited with code 134');
      }
      const col = joinBatches(batch, names).columns['time_unix_nano']!;
      assert.ok(col.kind === 'long');
      const values = [...col.values];
      if (this.holdFirst !== null && values[0] === this.holdFirst) {
        await new Promise<void>((r) => {
          this.release = r;
        });
      }
      const file: MemoryFile = {
        name: `f${values[0]}`,
        rows: values.length,
        size: 0,
        modificationTime: 0,
        stats: null as never,
        values,
      };
      return file;
    },
    commit: async (files, txn) => {
      if (this.failCommits > 0) {
        this.failCommits--;
        throw new Error('commit failed: ENOSPC');
      }
      const key = `${table}/${day}`;
      this.written.set(key, [
        ...(this.written.get(key) ?? []),
        ...files.map((f) => (f as MemoryFile).values),
      ]);
      this.txns.set(key, [...(this.txns.get(key) ?? []), txn]);
    },
    discard: async () => {},
    close: async () => {},
  });
  rows(key: string): bigint[] {
    return (this.written.get(key) ?? []).flat();
  }
}

const names = SCHEMAS.logs.columns.map((c) => c.name);
/** The rows as a packed batch, as a server decode worker hands them over. */
const packedRows = (rows: unknown[][]) => {
  const b = new BatchBuilder(SCHEMAS.logs, rows.length);
  for (const r of rows) b.pushValues(r);
  return packBatch(b.finish());
};
const logRows = (n: number, from = 0) =>
  Array.from({ length: n }, (_, i) => {
    const row: Record<string, unknown> = { project_id: 'p', event_ts: 1n, time_unix_nano: BigInt(from + i) };
    return names.map((name) => row[name] ?? null);
  });

function setup(over: Partial<ReturnType<typeof defaultOptions>['aggregator_config']> = {}, clock = Date.now) {
  const cfg = { ...defaultOptions().aggregator_config, ...over };
  const producer = new Producer(100_000, 'block', 1000, clock);
  const tables = new MemoryTables();
  const agg = new Aggregator({ producer, cfg, openTable: tables.open, clock });
  return { producer, tables, agg };
}

const until = async (cond: () => boolean, ms = 5000) => {
  const end = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > end) throw new Error('timed out waiting');
    await new Promise((r) => setTimeout(r, 5));
  }
};

describe('Aggregator', () => {
  it('cuts batches at max_batch_rows and writes the rest once the queue is drained', async () => {
    const { producer, tables, agg } = setup({ max_batch_rows: 1000, min_batch_rows: 100, max_age_s: 0.4 });
    agg.start();
    await producer.enqueue('logs', logRows(2500));
    await until(() => tables.rows('logs/' + producer.today()).length === 2500);
    const sizes = tables.written.get('logs/' + producer.today())!.map((b) => b.length);
    assert.deepEqual(sizes.slice(0, 2), [1000, 1000]);
    assert.deepEqual(
      tables.rows('logs/' + producer.today()),
      logRows(2500).map((r) => r[names.indexOf('time_unix_nano')]),
    );
    assert.equal(agg.stats().rows_written, 2500);
    await agg.close();
  });

  it('keeps queued batches as parts, a request never split between batches; every row written once', async () => {
    const { producer, tables, agg } = setup({ max_batch_rows: 1000, min_batch_rows: 100, max_age_s: 0.4 });
    agg.start();
    // 30 requests of 85 rows, with rows queued one by one in between; then one of 2,500 rows.
    for (let i = 0; i < 30; i++) {
      await producer.enqueueBatch('logs', packedRows(logRows(85, i * 100)));
      await producer.enqueue('logs', logRows(1, i * 100 + 85));
    }
    await producer.enqueueBatch('logs', packedRows(logRows(2500, 10_000)));
    const key = 'logs/' + producer.today();
    await until(() => tables.rows(key).length === 30 * 86 + 2500);
    const files = tables.written.get(key)!;
    // The first batch is cut before the request that would take it past 1,000 rows: 11 x 86.
    assert.equal(files[0]!.length, 946, 'a batch is cut before a request that does not fit');
    // Each request's rows are in one file (a file joins whole batches).
    const fileOf = new Map<bigint, number>();
    files.forEach((values, f) => {
      for (const v of values) fileOf.set(v, f);
    });
    for (let i = 0; i < 30; i++) {
      const where = new Set(Array.from({ length: 85 }, (_, k) => fileOf.get(BigInt(i * 100 + k))));
      assert.equal(where.size, 1, `request ${i} is in one file`);
    }
    const big = new Set(Array.from({ length: 2500 }, (_, k) => fileOf.get(BigInt(10_000 + k))));
    assert.equal(big.size, 1, 'a request of more than max_batch_rows rows is not split');
    const sorted = (xs: unknown[]) => [...xs].sort((a, b) => Number((a as bigint) - (b as bigint)));
    const expected = [
      ...Array.from({ length: 30 }, (_, i) => logRows(86, i * 100)).flat(),
      ...logRows(2500, 10_000),
    ];
    assert.deepEqual(
      sorted(tables.rows(key)),
      sorted(expected.map((r) => r[names.indexOf('time_unix_nano')])),
    );
    assert.equal(agg.stats().rows_written, 30 * 86 + 2500);
    assert.deepEqual(agg.pendingRows().logs, 0);
    await agg.close();
  });

  it('holds a batch under min_batch_rows until max_age_s', async () => {
    let now = 1_000_000;
    const { producer, tables, agg } = setup({ min_batch_rows: 100, max_age_s: 0.5 }, () => now);
    agg.start();
    await producer.enqueue('logs', logRows(10));
    await new Promise((r) => setTimeout(r, 300));
    assert.equal(tables.rows('logs/' + producer.today()).length, 0, 'small batch waits for company');
    assert.equal(agg.stats().pending_rows.logs, 10);
    now += 500;
    await until(() => tables.rows('logs/' + producer.today()).length === 10);
    await agg.close();
  });

  it('writes a late batch into the UTC day its rows arrived in', async () => {
    let now = Date.parse('2026-11-20T23:59:59.500Z');
    const { producer, tables, agg } = setup({ min_batch_rows: 1000, max_age_s: 60 }, () => now);
    agg.start();
    await producer.enqueue('logs', logRows(3));
    now = Date.parse('2026-11-21T00:00:01.000Z');
    await producer.enqueue('logs', logRows(2, 3));
    await agg.flushAll();
    assert.deepEqual(tables.rows('logs/2026-11-20'), [0n, 1n, 2n]);
    assert.deepEqual(tables.rows('logs/2026-11-21'), [3n, 4n]);
    await agg.close();
  });

  it('retries a failed write and records the error', async () => {
    const { producer, tables, agg } = setup({ min_batch_rows: 1, max_age_s: 60 });
    tables.failNext = 1;
    agg.start();
    await producer.enqueue('logs', logRows(5));
    await until(() => tables.rows('logs/' + producer.today()).length === 5);
    const s = agg.stats();
    assert.match(s.last_error?.message ?? '', /disk hiccup/);
    assert.equal(s.rows_written, 5);
    assert.equal(s.rows_failed, 0);
    await agg.close();
  });

  it('counts a batch lost with its writer as failed instead of retrying it', async () => {
    const { producer, tables, agg } = setup({ min_batch_rows: 1, max_age_s: 0.2 });
    tables.loseNext = 1;
    agg.start();
    await producer.enqueue('logs', logRows(7));
    await until(() => agg.stats().rows_failed === 7);
    assert.match(agg.stats().last_error?.message ?? '', /worker exited/);
    await producer.enqueue('logs', logRows(3, 7));
    await until(() => tables.rows('logs/' + producer.today()).length === 3);
    await agg.close();
  });

  it('stops taking rows when writes lag, so the queue fills and backpressure applies', async () => {
    const { producer, tables, agg } = setup({ max_batch_rows: 1000, min_batch_rows: 1000, max_age_s: 0.4 });
    let open!: () => void;
    tables.gate = new Promise((r) => {
      open = r;
    });
    agg.start();
    // max_pending_rows is 65,536 by default.
    await producer.enqueue('logs', logRows(70_000));
    await until(() => agg.stats().pending_rows.logs === 65_536);
    await new Promise((r) => setTimeout(r, 50));
    assert.equal(
      producer.depth,
      70_000 - 65_536,
      'the aggregator holds at most 65,536 rows while writes lag',
    );
    open();
    tables.gate = null;
    await until(() => tables.rows('logs/' + producer.today()).length === 70_000);
    await agg.close();
  });

  it('joins the batches cut while the writer is busy into one file, keeping their order', async () => {
    const { producer, tables, agg } = setup({ max_batch_rows: 100, min_batch_rows: 100, max_age_s: 0.2 });
    let open!: () => void;
    tables.gate = new Promise((r) => {
      open = r;
    });
    agg.start();
    await producer.enqueue('logs', logRows(1000));
    await until(() => producer.depth === 0);
    // The second file is due half of max_age_s after the first started.
    await new Promise((r) => setTimeout(r, 150));
    open();
    tables.gate = null;
    const key = 'logs/' + producer.today();
    await until(() => tables.rows(key).length === 1000);
    // The first file was under way when the other nine batches were cut: they became one file.
    assert.deepEqual(
      tables.written.get(key)!.map((f) => f.length),
      [100, 900],
    );
    assert.deepEqual(
      tables.rows(key),
      logRows(1000).map((r) => r[names.indexOf('time_unix_nano')]),
    );
    await agg.close();
  });

  it('starts the next file half of max_age_s after the last: the batches cut meanwhile become one file', async () => {
    const { producer, tables, agg } = setup({ max_batch_rows: 100, min_batch_rows: 100, max_age_s: 2 });
    agg.start();
    await producer.enqueue('logs', logRows(1000));
    const key = 'logs/' + producer.today();
    await until(() => tables.rows(key).length === 1000);
    assert.deepEqual(
      tables.written.get(key)!.map((f) => f.length),
      [100, 900],
    );
    const [first, second] = tables.starts.get(key)!;
    const gap = second! - first!;
    // 1,000 ms, plus a timer's lateness (up to a second on a busy machine): not at once, and
    // before max_age_s. The writes are timed where the table receives them, after the
    // aggregator's clock: the first one also waits for the table to open, which a busy machine
    // delayed by 15 ms once.
    assert.ok(gap >= 900 && gap < 2000, `second file started ${gap.toFixed(0)} ms after the first`);
    await agg.close();
  });

  it('starts the next file at once when FILE_ROWS rows wait for it', async () => {
    const { producer, tables, agg } = setup({ max_batch_rows: 1000, min_batch_rows: 1000, max_age_s: 60 });
    agg.start();
    // One batch starts the first file; the batches after it wait until they make FILE_ROWS.
    const waiting = Math.ceil(FILE_ROWS / 1000) * 1000;
    await producer.enqueue('logs', logRows(1000 + waiting));
    const key = 'logs/' + producer.today();
    // Well before the 30 s (half of max_age_s) the second file would otherwise wait.
    await until(() => tables.rows(key).length === 1000 + waiting);
    assert.deepEqual(
      tables.written.get(key)!.map((f) => f.length),
      [1000, waiting],
    );
    await agg.close();
  });

  it('joins waiting batches into files of at most 16 MiB', async () => {
    const { producer, tables, agg } = setup({ max_batch_rows: 3, min_batch_rows: 3, max_age_s: 0.2 });
    let open!: () => void;
    tables.gate = new Promise((r) => {
      open = r;
    });
    agg.start();
    // 10 batches of three 1 MB rows: one file under way, then 9 batches (27 MB) waiting.
    const big = 'x'.repeat(1024 * 1024);
    const rows = logRows(30).map((r) => {
      r[names.indexOf('body')] = big;
      return r;
    });
    await producer.enqueue('logs', rows);
    await until(() => producer.depth === 0);
    await new Promise((r) => setTimeout(r, 150));
    open();
    tables.gate = null;
    const key = 'logs/' + producer.today();
    await until(() => tables.rows(key).length === 30);
    const sizes = tables.written.get(key)!.map((f) => f.length);
    assert.equal(sizes[0], 3);
    assert.ok(sizes.length >= 3, `the waiting 27 MB are split into files: ${sizes}`);
    assert.ok(Math.max(...sizes.slice(2)) <= 15, `at most 15 MB a file: ${sizes}`);
    await agg.close();
  });

  describe('with a write-ahead log', () => {
    /** A log that remembers what it released and hands rows back from the queued batches. */
    function withLog(over: Partial<ReturnType<typeof defaultOptions>['aggregator_config']> = {}) {
      const cfg = { ...defaultOptions().aggregator_config, max_age_s: 60, ...over };
      const producer = new Producer(100_000, 'block', 1000, Date.now);
      const tables = new MemoryTables();
      const released: [number, number][] = [];
      const logged = new Map<number, unknown[][]>();
      const events: string[] = [];
      const log = {
        appId: 'test-log',
        release: (seq: number, rows: number) => released.push([seq, rows]),
        read: async (_t: TableName, _d: string, ranges: readonly { seq: number; rows: number }[]) =>
          ranges.map((r) => packedRows(logged.get(r.seq)!.slice(0, r.rows))),
      };
      const agg = new Aggregator({
        producer,
        cfg,
        openTable: tables.open,
        clock: Date.now,
        log,
        onEvent: (e) => events.push(e.kind),
      });
      let seq = 0;
      /** Queues a request's batch of n rows with the next sequence numbers. */
      const request = async (n: number, from: number) => {
        const res = await producer.reserve(n);
        assert.ok(typeof res !== 'string');
        const rows = logRows(n, from);
        logged.set(seq, rows);
        producer.fill(res, [
          { table: 'logs', day: producer.today(), batch: packedRows(rows), from: 0, to: n, seq },
        ]);
        seq += n;
      };
      return { producer, tables, agg, released, events, request };
    }

    it('commits batches in order with the log position they cover, even when a later one is written first', async () => {
      const { producer, tables, agg, released, request } = withLog({
        max_batch_rows: 10,
        min_batch_rows: 10,
        max_age_s: 0.2,
      });
      tables.holdFirst = 0n; // the first batch's write is slow
      agg.start();
      await request(10, 0);
      await request(10, 10);
      await request(10, 20);
      const key = `logs/${producer.today()}`;
      await new Promise((r) => setTimeout(r, 150));
      assert.deepEqual(tables.rows(key), [], 'nothing is committed before the first batch');
      tables.release();
      await until(() => tables.rows(key).length === 30);
      assert.deepEqual(
        tables.rows(key),
        logRows(30).map((r) => r[names.indexOf('time_unix_nano')]),
      );
      const marks = tables.txns.get(key)!;
      assert.deepEqual(marks.at(-1), { appId: 'test-log', version: 30 });
      const versions = marks.map((m) => m!.version);
      assert.deepEqual(
        versions,
        [...versions].sort((a, b) => a - b),
        'positions only grow',
      );
      // The second and third batches waited for the write interval together: one file.
      assert.deepEqual(
        released.sort((a, b) => a[0] - b[0]),
        [
          [0, 10],
          [10, 20],
        ],
      );
      await agg.close();
    });

    it('retries a failing commit until it lands, reporting the failure and the recovery', async () => {
      const { producer, tables, agg, events, request } = withLog({ min_batch_rows: 1 });
      tables.failCommits = 3;
      agg.start();
      await request(5, 0);
      await until(() => agg.failure('logs') !== null);
      assert.match(agg.stats().failing[0]?.message ?? '', /ENOSPC/);
      await until(() => tables.rows(`logs/${producer.today()}`).length === 5, 10_000);
      assert.equal(agg.failure('logs'), null);
      assert.deepEqual(events, ['write_failed', 'write_recovered']);
      assert.equal(agg.stats().rows_failed, 0);
      await agg.close();
    });

    it('reads a batch lost with its worker back from the log instead of giving it up', async () => {
      const { producer, tables, agg, request } = withLog({ min_batch_rows: 1 });
      tables.loseNext = 1;
      agg.start();
      await request(7, 0);
      await until(() => tables.rows(`logs/${producer.today()}`).length === 7);
      assert.equal(agg.stats().rows_failed, 0);
      await agg.close();
    });

    it('gives up a batch still failing at close without committing anything after it', async () => {
      const { producer, tables, agg, released, request } = withLog({ max_batch_rows: 5, min_batch_rows: 5 });
      tables.failNext = 1_000;
      agg.start();
      await request(5, 0);
      await until(() => agg.failure('logs') !== null);
      tables.failNext = 0;
      tables.holdFirst = 0n;
      await agg.close();
      assert.deepEqual(tables.rows(`logs/${producer.today()}`), []);
      assert.deepEqual(released, [], 'the rows stay in the log for the next start');
      assert.equal(agg.stats().rows_failed, 0, 'not lost: they are in the log');
    });
  });
});
