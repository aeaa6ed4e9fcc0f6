import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { BatchBuilder, type Batches, joinBatches, packBatch, transferables } from '../../src/delta/batch.ts';
import { Aggregator, type TableWriter } from '../../src/pipeline/aggregator.ts';
import { Producer } from '../../src/pipeline/producer.ts';
import { SCHEMAS, type TableName } from '../../src/schema/tables.ts';
import { defaultOptions } from '../../src/storage/options.ts';

// An in-memory table writer: the aggregator's contract is "append batches in order"; the real
// Delta writer is exercised by the logger and delta tests.
class MemoryTables {
  written = new Map<string, bigint[][]>();
  failNext = 0;
  /** Fail like a worker that died mid-write: the transferred batch is gone. */
  loseNext = 0;
  gate: Promise<void> | null = null;
  open = async (table: TableName, day: string): Promise<TableWriter> => ({
    append: async (batch: Batches) => {
      if (this.gate) await this.gate;
      if (this.failNext > 0) {
        this.failNext--;
        throw new Error('disk hiccup');
      }
      if (this.loseNext > 0) {
        this.loseNext--;
        structuredClone(batch, { transfer: transferables(batch) });
        throw new Error('worker exited with code 134');
      }
      const col = joinBatches(batch, names).columns['time_unix_nano']!;
      assert.ok(col.kind === 'long');
      const key = `${table}/${day}`;
      this.written.set(key, [...(this.written.get(key) ?? []), [...col.values]]);
    },
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
  const agg = new Aggregator(producer, cfg, tables.open, clock);
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
    const { producer, tables, agg } = setup({ max_batch_rows: 1000, min_batch_rows: 100, max_age_s: 60 });
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

  it('keeps queued batches as parts, split where a file reaches max_batch_rows; every row written once', async () => {
    const { producer, tables, agg } = setup({ max_batch_rows: 1000, min_batch_rows: 100, max_age_s: 60 });
    agg.start();
    // 30 requests of 85 rows, with rows queued one by one in between.
    for (let i = 0; i < 30; i++) {
      await producer.enqueueBatch('logs', packedRows(logRows(85, i * 100)));
      await producer.enqueue('logs', logRows(1, i * 100 + 85));
    }
    const key = 'logs/' + producer.today();
    await until(() => tables.rows(key).length === 30 * 86);
    const sizes = tables.written.get(key)!.map((b) => b.length);
    assert.deepEqual(sizes.slice(0, 2), [1000, 1000], 'a batch is cut at the limit, not after it');
    const sorted = (xs: unknown[]) => [...xs].sort((a, b) => Number((a as bigint) - (b as bigint)));
    const expected = Array.from({ length: 30 }, (_, i) => logRows(86, i * 100)).flat();
    assert.deepEqual(
      sorted(tables.rows(key)),
      sorted(expected.map((r) => r[names.indexOf('time_unix_nano')])),
    );
    assert.equal(agg.stats().rows_written, 30 * 86);
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
    const { producer, tables, agg } = setup({ min_batch_rows: 1, max_age_s: 60 });
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
    const { producer, tables, agg } = setup({ max_batch_rows: 10, min_batch_rows: 10, max_age_s: 60 });
    let open!: () => void;
    tables.gate = new Promise((r) => {
      open = r;
    });
    agg.start();
    await producer.enqueue('logs', logRows(200));
    await new Promise((r) => setTimeout(r, 50));
    assert.equal(producer.depth, 200 - 40, 'the aggregator holds at most 4 batches while writes lag');
    open();
    tables.gate = null;
    await until(() => tables.rows('logs/' + producer.today()).length === 200);
    await agg.close();
  });
});
