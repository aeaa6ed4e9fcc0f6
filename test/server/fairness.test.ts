// The per-project rate: a project sending faster than its rate is held back request by request
// (up to MAX_WAIT_MS), then refused with Retry-After; other projects are not affected.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { MAX_WAIT_MS, ProjectRates } from '../../src/server/fairness.ts';

test('a project over its rate is paced, then refused beyond the longest wait; the others are not', () => {
  let now = 0;
  const rates = new ProjectRates(1000, () => now);
  assert.deepEqual(rates.admit({ a: 100 }), { waitMs: 0 }, 'a project never seen goes at once');
  assert.deepEqual(rates.admit({ a: 100 }), { waitMs: 0 }, 'within the burst (100 ms of rows)');
  // 200 rows at 1,000/s are paid for at 200 ms: the next request waits 200 - 100 = 100 ms.
  assert.deepEqual(rates.admit({ a: 100 }), { waitMs: 100 });
  assert.deepEqual(rates.admit({ a: 100 }), { waitMs: 200 }, 'each request waits behind the last');
  assert.deepEqual(rates.admit({ b: 100 }), { waitMs: 0 }, 'b has its own account');
  rates.admit({ a: 900 }); // paid for at 1,300 ms: the next would wait 1,200 ms
  assert.ok(1200 > MAX_WAIT_MS);
  assert.deepEqual(rates.admit({ a: 1 }), { retryAfterS: 2 }, 'refused, charged nothing');
  assert.equal(rates.retryAfter(['a']), 2);
  assert.equal(rates.retryAfter(['b', 'a']), 2, 'a request of several projects waits for the slowest');
  assert.equal(rates.retryAfter(['b']), 0);
  now += 300;
  assert.equal(rates.retryAfter(['a']), 0, 'a wait of 900 ms is served, not refused');
  assert.deepEqual(rates.admit({ a: 1 }), { waitMs: 900 });
  now += 60_000;
  assert.deepEqual(rates.admit({ a: 100 }), { waitMs: 0 }, 'no credit saved up over a pause');
  assert.deepEqual(rates.admit({ a: 100 }), { waitMs: 0 });
  assert.deepEqual(rates.admit({ a: 100 }), { waitMs: 100 });
});

test('a request that was not stored gives its rows back', () => {
  const now = 0;
  const rates = new ProjectRates(100, () => now);
  rates.admit({ a: 150 });
  assert.ok(rates.retryAfter(['a']) > 0);
  rates.refund({ a: 150 });
  assert.equal(rates.retryAfter(['a']), 0);
  assert.deepEqual(rates.admit({ a: 5 }), { waitMs: 0 });
});

test('paid-up projects seen once are forgotten', () => {
  let now = 0;
  const rates = new ProjectRates(10, () => now);
  for (let i = 0; i < 5000; i++) rates.admit({ [`p${i}`]: 1 });
  assert.ok(rates.size > 4096);
  now += 2000; // every project is paid up again
  rates.admit({ last: 1 });
  assert.equal(rates.size, 1, 'only the last project is remembered');
});
