import assert from 'node:assert/strict';
import type { EventLoopUtilization } from 'node:perf_hooks';
import { describe, it } from 'node:test';
import { POOL_AFTER_SLOW_WRITE_MS, WINDOW_MS, WritePath } from '../../src/wal/write-path.ts';

/** A clock and an event loop whose busy time the test sets, millisecond by millisecond. */
function fakeLoop() {
  const loop = { now: 0, active: 0 };
  const mark = (): EventLoopUtilization => ({
    idle: loop.now - loop.active,
    active: loop.active,
    utilization: 0,
  });
  const utilization = (since?: EventLoopUtilization): EventLoopUtilization => {
    const m = mark();
    if (!since) return m;
    const active = m.active - since.active;
    const idle = m.idle - since.idle;
    return { active, idle, utilization: active / (active + idle) };
  };
  /** `ms` pass, the loop busy `busy` of them. */
  const pass = (ms: number, busy: number) => {
    loop.now += ms;
    loop.active += ms * busy;
  };
  return { loop, pass, options: { now: () => loop.now, utilization } };
}

describe('the write path of the log', () => {
  it('moves the writes to the pool while the loop is saturated, and back once it is not', () => {
    const { pass, options } = fakeLoop();
    const path = new WritePath({ slowWriteMs: 50, ...options });
    assert.equal(path.onLoop(), true, 'the event loop by default');
    pass(WINDOW_MS, 0.85);
    assert.equal(path.onLoop(), true, 'busy 85% of a window: still the loop');
    pass(WINDOW_MS / 2, 0.97);
    assert.equal(path.onLoop(), true, 'chosen again only after a whole window');
    pass(WINDOW_MS / 2, 0.97);
    assert.equal(path.onLoop(), false, 'busy 91% of a window: the pool');
    assert.equal(path.current, 'pool');
    // On the pool the loop is less busy; the writes' own time counts as if the loop made them.
    pass(WINDOW_MS, 0.6);
    path.poolWrote(350);
    assert.equal(path.onLoop(), false, 'busy 60% plus writes 35%: still the pool');
    pass(WINDOW_MS, 0.5);
    path.poolWrote(300);
    assert.equal(path.onLoop(), true, 'busy 50% plus writes 30%: the loop again');
    assert.equal(path.current, 'event_loop');
    // An idle stretch ends with the loop, whatever came before it.
    pass(WINDOW_MS, 1);
    assert.equal(path.onLoop(), false);
    pass(60_000, 0.01);
    assert.equal(path.onLoop(), true, 'the first write after a quiet minute');
  });

  it('moves the writes to the pool for a while after a slow write on the loop', () => {
    const { pass, options } = fakeLoop();
    const path = new WritePath({ slowWriteMs: 50, ...options });
    path.loopWrote(50);
    assert.equal(path.onLoop(), true, 'a write of exactly the limit is not slow');
    path.loopWrote(51);
    assert.equal(path.onLoop(), false);
    pass(POOL_AFTER_SLOW_WRITE_MS - 1, 0.1);
    assert.equal(path.onLoop(), false, 'the pool until the time is up, however idle the loop');
    pass(1, 0.1);
    assert.equal(path.onLoop(), true);
  });
});
