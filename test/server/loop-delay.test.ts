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
    assert.ok(delay.stats().max >= 30, `a 60 ms hold-up while sampling shows (max ${delay.stats().max} ms)`);

    // Idle: sampling stops within two idle periods. (What it holds is read once it has stopped: a
    // busy machine may hold the loop longer than 60 ms before then, and that is sampled too.)
    await sleep(400);
    assert.equal(delay.sampling, false, 'stopped after 150 ms without a request');
    const held = delay.stats().max;
    block(150);
    await sleep(30);
    assert.equal(delay.stats().max, held, 'a hold-up while idle is not sampled');

    delay.request();
    assert.equal(delay.sampling, true, 'the next request starts it again');
    // The idle spell (~600 ms since sampling stopped) is no hold-up of the first sample after it.
    await sleep(60);
    assert.ok(delay.stats().max < 60, `max ${delay.stats().max} ms after an idle spell`);
  } finally {
    delay.close();
  }
});
