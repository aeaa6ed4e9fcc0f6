import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Producer } from '../../src/pipeline/producer.ts';

const rows = (n: number, from = 0) => Array.from({ length: n }, (_, i) => [from + i]);
const ids = (p: Producer) => p.take(Number.POSITIVE_INFINITY).map((q) => q.values[0]);

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
    assert.deepEqual(
      p.take(1).map((q) => q.values[0]),
      [0],
    );
    await new Promise((r) => setImmediate(r));
    assert.equal(done, false, 'one free slot is not room for two rows');
    p.take(1);
    assert.equal(await waiting, 'enqueued');
    assert.deepEqual(ids(p), [2, 3, 4, 5]);
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
});
