import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { type ColumnBatch, columnsOf } from '../../src/delta/batch.ts';
import { Producer, type Queued, type QueuedBatch } from '../../src/pipeline/producer.ts';

const rows = (n: number, from = 0) => Array.from({ length: n }, (_, i) => [from + i]);
/** A batch of n rows whose single column holds from, from + 1, ... */
const batch = (n: number, from = 0): ColumnBatch => ({
  numRows: n,
  columns: { id: { kind: 'integer', values: Int32Array.from(rows(n, from), (r) => r[0]!), valid: null } },
});
const idsOf = (entries: Queued[]) =>
  entries.flatMap((q) =>
    q.batch === undefined
      ? [q.values[0]]
      : [
          ...(columnsOf(q.batch, ['id']).columns['id'] as { values: Int32Array }).values.subarray(
            q.from,
            q.to,
          ),
        ],
  );
const ids = (p: Producer) => idsOf(p.take(Number.POSITIVE_INFINITY));

describe('Producer', () => {
  it('drop_newest refuses whole groups that do not fit and counts them', async () => {
    const p = new Producer(4, 'drop_newest', 0, Date.now);
    assert.equal(await p.enqueue('logs', rows(3)), 'enqueued');
    assert.equal(await p.enqueue('logs', rows(2, 3)), 'queue_full');
    assert.equal(await p.enqueue('logs', rows(1, 5)), 'enqueued');
    assert.deepEqual(ids(p), [0, 1, 2, 5]);
    assert.deepEqual(p.stats().dropped, { drop_newest: 2 });
    assert.equal(p.stats().accepted, 4);
  });

  it('drop_oldest evicts the oldest queued rows', async () => {
    const p = new Producer(4, 'drop_oldest', 0, Date.now);
    await p.enqueue('logs', rows(4));
    await p.enqueue('logs', rows(3, 4));
    assert.deepEqual(ids(p), [3, 4, 5, 6]);
    assert.deepEqual(p.stats().dropped, { drop_oldest: 3 });
  });

  it('a batch split by take keeps its write-ahead log position in both parts', async () => {
    const p = new Producer(10, 'block', 0, Date.now);
    const res = await p.reserve(6);
    assert.ok(typeof res !== 'string');
    p.fill(res, [{ table: 'logs', day: '2026-11-24', batch: batch(6), from: 0, to: 6, seq: 500 }]);
    const [first] = p.take(4) as QueuedBatch[];
    const [rest] = p.take(4) as QueuedBatch[];
    // Rows from..to of a part are log rows seq + from .. seq + to - 1.
    assert.deepEqual([first!.seq, first!.from, first!.to], [500, 0, 4]);
    assert.deepEqual([rest!.seq, rest!.from, rest!.to], [500, 4, 6]);
  });

  it('counts the rows of batches: depth, limits, take and drop_oldest work in rows', async () => {
    const p = new Producer(10, 'drop_oldest', 0, Date.now);
    assert.equal(await p.enqueueBatch('logs', batch(4)), 'enqueued');
    assert.equal(await p.enqueue('logs', rows(2, 4)), 'enqueued');
    assert.equal(await p.enqueueBatch('logs', batch(3, 6)), 'enqueued');
    assert.equal(p.depth, 9);
    // Two more rows overflow by one: the oldest row of the first batch goes, the rest of it stays.
    assert.equal(await p.enqueueBatch('logs', batch(2, 9)), 'enqueued');
    assert.equal(p.depth, 10);
    assert.deepEqual(p.stats().dropped, { drop_oldest: 1 });
    assert.deepEqual(idsOf(p.take(4)), [1, 2, 3, 4], 'entries up to the limit');
    assert.deepEqual(idsOf(p.take(2)), [5, 6], 'a batch split at the limit');
    assert.equal(p.depth, 4);
    assert.deepEqual(idsOf(p.take(1)), [7]);
    assert.deepEqual(idsOf(p.take(2)), [8, 9], 'the rest of the split batch first');
    assert.equal(p.depth, 1);
    assert.equal(p.stats().accepted, 11);
    // Within a limit, a batch crossing max is taken whole; past the limit it is split there.
    await p.enqueueBatch('logs', batch(4, 11));
    assert.deepEqual(idsOf(p.take(2, 5)), [10, 11, 12, 13, 14], 'whole: 5 rows is within the limit');
    await p.enqueueBatch('logs', batch(4, 15));
    assert.deepEqual(idsOf(p.take(2, 3)), [15, 16, 17], 'split at the limit');
    assert.equal(p.depth, 1);
    const q = new Producer(3, 'drop_newest', 0, Date.now);
    assert.equal(
      await q.enqueueBatch('logs', batch(4)),
      'enqueued',
      'an oversized batch enters an empty queue',
    );
    assert.equal(await q.enqueueBatch('logs', batch(1)), 'queue_full');
    assert.deepEqual(q.stats().dropped, { drop_newest: 1 });
    assert.equal(q.discard(), 4);
    assert.equal(q.depth, 0);
  });

  it('block waits for room and resumes in order when the consumer takes rows', async () => {
    const p = new Producer(4, 'block', 10_000, Date.now);
    await p.enqueue('logs', rows(4));
    let done = false;
    const waiting = p.enqueue('logs', rows(2, 4)).then((r) => {
      done = true;
      return r;
    });
    await new Promise((r) => setImmediate(r));
    assert.equal(done, false);
    assert.equal(p.stats().blocked_producers, 1);
    assert.deepEqual(idsOf(p.take(1)), [0]);
    await new Promise((r) => setImmediate(r));
    assert.equal(done, false, 'one free slot is not room for two rows');
    p.take(1);
    assert.equal(await waiting, 'enqueued');
    assert.deepEqual(ids(p), [2, 3, 4, 5]);
  });

  it('block serves waiting producers first: a request larger than the queue is not starved by smaller ones', async () => {
    const p = new Producer(10, 'block', 10_000, Date.now);
    await p.enqueue('logs', rows(5));
    const order: string[] = [];
    // 50 rows only get into an empty queue; then, while rows stay queued, a request of 2 that
    // would fit beside them comes.
    const large = p.enqueue('logs', rows(50, 100), 10_000).then((r) => order.push(`large ${r}`));
    await new Promise((r) => setImmediate(r));
    const small = p.enqueue('logs', rows(2, 200), 10_000).then((r) => order.push(`small ${r}`));
    await new Promise((r) => setImmediate(r));
    assert.deepEqual(order, [], 'the small request waits behind the large one');
    assert.equal(p.stats().blocked_producers, 2);
    // The consumer takes what is queued: the large request gets the empty queue, then the small one.
    assert.deepEqual(ids(p), [0, 1, 2, 3, 4]);
    await large;
    assert.deepEqual(order, ['large enqueued']);
    assert.deepEqual(
      ids(p),
      rows(50, 100).map((r) => r[0]),
    );
    await small;
    assert.deepEqual(order, ['large enqueued', 'small enqueued']);
    assert.deepEqual(ids(p), [200, 201]);
  });

  it('block gives up after the timeout with queue_full', async () => {
    const p = new Producer(2, 'block', 20, Date.now);
    await p.enqueue('logs', rows(2));
    assert.equal(await p.enqueue('logs', rows(1)), 'queue_full');
    assert.deepEqual(p.stats().dropped, { queue_full: 1 });
  });

  it('lets an oversized group into an empty queue, and refuses after close', async () => {
    const p = new Producer(2, 'block', 0, Date.now);
    assert.equal(await p.enqueue('logs', rows(5)), 'enqueued');
    assert.equal(p.depth, 5);
    const blocked = p.enqueue('logs', rows(1), 10_000);
    p.close();
    assert.equal(await blocked, 'stopped');
    assert.equal(await p.enqueue('logs', rows(1)), 'stopped');
  });

  it('captures the UTC day at enqueue time', async () => {
    let now = Date.parse('2026-11-20T23:59:59.900Z');
    const p = new Producer(10, 'block', 0, () => now);
    await p.enqueue('logs', rows(1));
    now = Date.parse('2026-11-21T00:00:00.100Z');
    await p.enqueue('logs', rows(1, 1));
    assert.deepEqual(
      p.take(10).map((q) => q.day),
      ['2026-11-20', '2026-11-21'],
    );
  });

  it('never holds more than its capacity, whatever the concurrency and the policy', async () => {
    for (const policy of ['block', 'drop_newest', 'drop_oldest'] as const) {
      const p = new Producer(10, policy, 20, Date.now);
      let peak = 0;
      p.onEnqueue = () => {
        peak = Math.max(peak, p.stats().queue_depth);
      };
      // 5,000 producers at once, nobody taking rows: each reserves room, then fills it a turn later.
      const outcomes = await Promise.all(
        Array.from({ length: 5000 }, async (_, i) => {
          const res = await p.reserve(1);
          if (typeof res === 'string') return res;
          peak = Math.max(peak, p.stats().queue_depth);
          await new Promise((r) => setImmediate(r));
          p.fill(res, [{ table: 'logs', day: p.today(), values: [i] }]);
          return 'enqueued';
        }),
      );
      const accepted = outcomes.filter((o) => o === 'enqueued').length;
      assert.ok(peak <= 10, `${policy}: the queue held ${peak} rows`);
      assert.equal(p.depth, 10, `${policy}: full`);
      // drop_oldest evicts queued rows, never room reserved by a request still being logged.
      assert.equal(accepted, 10, `${policy}: exactly the capacity is accepted`);
    }
  });

  it('reserves room for a request across tables at once; a cancelled reservation gives it back', async () => {
    const p = new Producer(10, 'block', 5000, Date.now);
    const a = await p.reserve(6);
    assert.ok(typeof a !== 'string');
    // The next request does not fit until the first one's room is given back.
    let settled = false;
    const b = p.reserve(6).then((r) => {
      settled = true;
      return r;
    });
    await new Promise((r) => setTimeout(r, 20));
    assert.equal(settled, false, 'waits: 6 reserved + 6 > 10');
    p.cancel(a);
    const res = await b;
    assert.ok(typeof res !== 'string');
    p.fill(res, [
      { table: 'spans', day: p.today(), batch: batch(4), from: 0, to: 4 },
      { table: 'span_links', day: p.today(), batch: batch(2, 4), from: 0, to: 2 },
    ]);
    assert.equal(p.depth, 6);
    assert.deepEqual(ids(p), [0, 1, 2, 3, 4, 5]);
    assert.throws(() => p.fill(res, []), /settled/);
  });

  it("fills several callers' reservations with one gathered batch", async () => {
    const p = new Producer(10, 'drop_newest', 0, Date.now);
    const rs = await Promise.all([p.reserve(1), p.reserve(2), p.reserve(1)]);
    assert.ok(rs.every((r) => typeof r !== 'string'));
    assert.equal(await p.reserve(7), 'queue_full');
    p.fill(rs as never, [{ table: 'logs', day: p.today(), batch: batch(4), from: 0, to: 4 }]);
    assert.equal(p.stats().accepted, 4);
    assert.equal(p.stats().queue_depth, 4);
  });

  describe('project share', () => {
    /** Reserves and queues a request of `n` rows of one project as the server does; returns the outcome. */
    async function request(p: Producer, project: string, n: number, waitMs = 0) {
      const res = await p.reserve(n, waitMs, false, { [project]: n });
      if (typeof res === 'string') return res;
      p.fill(res, [
        { table: 'spans', day: p.today(), batch: batch(n - 1), from: 0, to: n - 1 },
        { table: 'span_events', day: p.today(), batch: batch(1), from: 0, to: 1 },
      ]);
      return 'queued';
    }

    it('refuses a project at its share at once, while another project still gets in', async () => {
      const p = new Producer(100, 'block', 5000, Date.now, 0.5);
      assert.equal(await request(p, 'noisy', 30), 'queued');
      assert.equal(await request(p, 'noisy', 20), 'queued', 'exactly its share: 50 of 100');
      assert.equal(p.heldBy('noisy'), 50);
      assert.equal(await request(p, 'noisy', 1), 'project_full', 'beyond its share, without waiting');
      assert.equal(await request(p, 'quiet', 40), 'queued', 'the others keep the rest of the queue');
      assert.deepEqual(p.stats().dropped, { project_queue_share: 1 });
      assert.equal(p.stats().blocked_producers, 0);
    });

    it('holds rows until the whole request leaves the queue: split, evicted, discarded, cancelled', async () => {
      const p = new Producer(100, 'block', 5000, Date.now, 0.2);
      await request(p, 'a', 10);
      await request(p, 'b', 10);
      p.take(5);
      assert.equal(p.heldBy('a'), 10, 'part of a request taken: still held');
      p.take(5);
      assert.equal(p.heldBy('a'), 0, "the request's last entry left: released");
      assert.equal(p.heldBy('b'), 10);
      p.discard();
      assert.equal(p.heldBy('b'), 0, 'discarded rows are released');
      const res = await p.reserve(20, 0, false, { c: 15, d: 5 });
      assert.ok(typeof res !== 'string');
      assert.equal(p.heldBy('c'), 15);
      p.cancel(res);
      assert.equal(p.heldBy('c') + p.heldBy('d'), 0, 'a cancelled reservation releases');

      const old = new Producer(20, 'drop_oldest', 0, Date.now, 0.5);
      await request(old, 'x', 10);
      await request(old, 'y', 10);
      await request(old, 'z', 10);
      assert.equal(old.heldBy('x'), 0, 'evicted whole: released');
      assert.equal(old.heldBy('y') + old.heldBy('z'), 20);
    });

    it('counts rows waiting for room against the share; a wait that fails releases them', async () => {
      const p = new Producer(10, 'block', 5000, Date.now, 0.6);
      assert.equal(await request(p, 'a', 5), 'queued');
      assert.equal(await request(p, 'b', 5), 'queued');
      // The queue is full: b's next request waits, and its rows count against b meanwhile.
      const waiting = request(p, 'b', 1, 50);
      assert.equal(p.heldBy('b'), 6);
      assert.equal(await request(p, 'b', 1), 'project_full', 'b would hold 7 > 6 with the waiting row');
      assert.equal(await waiting, 'queue_full', 'nobody took rows within 50 ms');
      assert.equal(p.heldBy('b'), 5);
    });

    it('lets a request larger than the share in when its project holds nothing; 1 means no share', async () => {
      const p = new Producer(100, 'block', 0, Date.now, 0.1);
      assert.equal(await request(p, 'big', 50), 'queued');
      assert.equal(await request(p, 'big', 1), 'project_full');
      const all = new Producer(100, 'block', 0, Date.now, 1);
      assert.equal(await request(all, 'one', 100), 'queued');
      assert.equal(all.heldBy('one'), 0, 'no accounting without a share');
    });

    it('never lets a project hold more than its share, whatever the concurrency', async () => {
      const p = new Producer(1000, 'block', 200, Date.now, 0.25);
      let peak = 0;
      const outcomes = await Promise.all(
        Array.from({ length: 200 }, async (_, i) => {
          const project = i % 4 === 0 ? 'quiet' : 'noisy';
          const r = await request(p, project, 1 + (i % 7));
          peak = Math.max(peak, p.heldBy('noisy'));
          if (i % 10 === 0) p.take(30);
          return [project, r] as const;
        }),
      );
      assert.ok(peak <= 250, `noisy held at most its share (${peak})`);
      assert.ok(outcomes.some(([pr, r]) => pr === 'noisy' && r === 'project_full'));
      assert.ok(outcomes.filter(([pr]) => pr === 'quiet').every(([, r]) => r === 'queued'));
    });
  });

  describe('the day rows are captured for', () => {
    const at = (iso: string) => Date.parse(iso);
    it('follows the clock forward, not back across midnight, and says so once', () => {
      let now = at('2026-11-20T23:59:59.900Z');
      const p = new Producer(4, 'block', 0, () => now);
      const told: string[] = [];
      p.onClockBack = (clockDay, day) => told.push(`${clockDay}->${day}`);
      assert.equal(p.today(), '2026-11-20');
      now = at('2026-11-21T00:00:00.000Z');
      assert.equal(p.today(), '2026-11-21');
      now = at('2026-11-20T23:59:58Z'); // stepped back
      assert.equal(p.today(), '2026-11-21');
      assert.equal(p.today(), '2026-11-21');
      assert.deepEqual(told, ['2026-11-20->2026-11-21']);
      now = at('2026-11-21T12:00:00Z'); // caught up: a later step back is told again
      assert.equal(p.today(), '2026-11-21');
      now = at('2026-11-20T12:00:00Z');
      assert.equal(p.today(), '2026-11-21');
      assert.equal(told.length, 2);
      now = at('2026-11-22T00:00:00Z');
      assert.equal(p.today(), '2026-11-22');
    });

    it('starts after the days sealed, and ignores sealed days before today', () => {
      let now = at('2026-11-20T10:00:00Z');
      const p = new Producer(4, 'block', 0, () => now);
      p.sealedThrough('2026-11-19');
      assert.equal(p.today(), '2026-11-20');
      p.sealedThrough('2026-11-20');
      assert.equal(p.today(), '2026-11-21');
      now = at('2026-11-21T23:59:59Z');
      assert.equal(p.today(), '2026-11-21');
      now = at('2026-11-22T00:00:01Z');
      assert.equal(p.today(), '2026-11-22');
    });
  });
});
