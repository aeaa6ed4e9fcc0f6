// The per-project rate: a project is let in while its bucket is not empty, then owes its rows;
// Retry-After says when it may send again; other projects are not affected.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ProjectRates } from '../../src/server/fairness.ts';

test('a project over its rate waits until its bucket refills; the others do not', () => {
  let now = 0;
  const rates = new ProjectRates(1000, () => now);
  assert.equal(rates.retryAfter(['a']), 0, 'a project never seen may send');
  rates.take({ a: 400 });
  assert.equal(rates.retryAfter(['a']), 0, '600 rows left');
  rates.take({ a: 3600 }); // a request of any size passes: the bucket goes 3000 rows into debt
  assert.equal(rates.retryAfter(['a']), 4, '(3000 + 1) / 1000 rows/s, rounded up');
  assert.equal(rates.retryAfter(['b']), 0, 'b has its own bucket');
  assert.equal(rates.retryAfter(['b', 'a']), 4, 'a request of several projects waits for the slowest');
  now += 2000;
  assert.equal(rates.retryAfter(['a']), 2);
  now += 1001;
  assert.equal(rates.retryAfter(['a']), 0, 'refilled past zero');
  now += 60_000;
  rates.take({ a: 1500 });
  assert.equal(rates.retryAfter(['a']), 1, 'the bucket holds one second at most: no credit saved up');
});

test('a request that was not stored gives its rows back', () => {
  const now = 0;
  const rates = new ProjectRates(100, () => now);
  rates.take({ a: 150 });
  assert.ok(rates.retryAfter(['a']) > 0);
  rates.refund({ a: 150 });
  assert.equal(rates.retryAfter(['a']), 0);
});

test('full buckets of projects seen once are forgotten', () => {
  let now = 0;
  const rates = new ProjectRates(10, () => now);
  for (let i = 0; i < 5000; i++) rates.take({ [`p${i}`]: 1 });
  assert.ok(rates.size > 4096);
  now += 2000; // every bucket is full again
  rates.take({ last: 1 });
  assert.equal(rates.size, 1, 'only the last project is remembered');
});
