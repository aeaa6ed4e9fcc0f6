import assert from 'node:assert/strict';
import { test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { LoopDelay } from '../../src/server/loop-delay.ts';

/** Holds the event loop for `ms`. */
function block(ms: number): void {
  const end = performance.now() + ms;
  while (performance.now() < end);
}

test('the loop delay is sampled while requests come, and not once they stop', async () => {
  const delay = new LoopDelay(150);
  try {
    assert.equal(delay.sampling, false, 'no request yet');
    block(60);
    await sleep(20);
    assert.equal(delay.stats().max, 0, 'a hold-up before any request is not sampled');

    delay.request();
    assert.equal(delay.sampling, true);
    await sleep(30);
    block(60);
    await sleep(30);
    const held = delay.stats().max;
    assert.ok(held >= 30, `a 60 ms hold-up while sampling shows (max ${held} ms)`);

    // Idle: sampling stops within two idle periods.
    await sleep(400);
    assert.equal(delay.sampling, false, 'stopped after 150 ms without a request');
    block(150);
    await sleep(30);
    assert.equal(delay.stats().max, held, 'a hold-up while idle is not sampled');

    delay.request();
    assert.equal(delay.sampling, true, 'the next request starts it again');
  } finally {
    delay.close();
  }
});
