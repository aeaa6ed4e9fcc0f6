// Where the log's synced writes run: on the event loop (one system call, no thread wake-ups; the
// lower tail at moderate load) or on libuv's pool (the loop keeps reading requests while the disk
// works). The loop is the default. The pool takes the writes while the loop is saturated: on a disk
// whose synced write takes a millisecond or two, a loop that waits for every write spends half of
// full load blocked, and with this choice the server took more items/s in 24 of 27 interleaved runs
// there (median 1.13x; docs/benchmarks.md). The pool also takes them for a while after one write on
// the loop was slow, as a stalled disk must not stop the loop from reading requests and answering
// /healthz.

import { type EventLoopUtilization, performance } from 'node:perf_hooks';

/** The event loop's load is measured over windows this long; the path is chosen after each. */
export const WINDOW_MS = 1000;
/**
 * The loop counts as saturated when it was busy this fraction of a window, counting the writes
 * made on the pool as if it had made them. On a slow disk the loop was busy 0.93-1.00 per half
 * second at full load with its writes (0.36-0.54 of the time in them), 0.50-0.86 at half load.
 */
export const SATURATED = 0.9;
/** How long the pool takes the writes after a slow one on the loop. */
export const POOL_AFTER_SLOW_WRITE_MS = 10_000;

export interface WritePathOptions {
  /** A write on the loop slower than this means the disk is stalling. */
  slowWriteMs: number;
  /** For tests: the clock (ms) and the event loop's utilization since a mark. */
  now?: () => number;
  utilization?: (since?: EventLoopUtilization) => EventLoopUtilization;
}

export class WritePath {
  private readonly slowWriteMs: number;
  private readonly now: () => number;
  private readonly utilization: (since?: EventLoopUtilization) => EventLoopUtilization;
  /** Until then (ms) the pool takes the writes: one on the loop was slow. */
  private poolUntil = 0;
  private saturated = false;
  private windowStart: number;
  private windowMark: EventLoopUtilization;
  /** Time the window's writes on the pool took, start to finish. */
  private poolWriteMs = 0;

  constructor(opts: WritePathOptions) {
    this.slowWriteMs = opts.slowWriteMs;
    this.now = opts.now ?? (() => performance.now());
    this.utilization = opts.utilization ?? ((since) => performance.eventLoopUtilization(since));
    this.windowStart = this.now();
    this.windowMark = this.utilization();
  }

  /** Whether the next write runs on the event loop (else on libuv's pool). */
  onLoop(): boolean {
    const now = this.now();
    if (now - this.windowStart >= WINDOW_MS) this.choose(now);
    return this.loopAt(now);
  }

  /** A write on the loop took `ms`, ending now. */
  loopWrote(ms: number): void {
    if (ms > this.slowWriteMs) this.poolUntil = this.now() + POOL_AFTER_SLOW_WRITE_MS;
  }

  /** A write on the pool took `ms` from its start to its completion. */
  poolWrote(ms: number): void {
    this.poolWriteMs += ms;
  }

  /** Where the writes run now, as the last choice left them (for the log's stats). */
  get current(): 'event_loop' | 'pool' {
    return this.loopAt(this.now()) ? 'event_loop' : 'pool';
  }

  private loopAt(now: number): boolean {
    return !this.saturated && now >= this.poolUntil;
  }

  private choose(now: number): void {
    const busy = this.utilization(this.windowMark).utilization;
    // A write on the pool takes longer than the loop would block for it (the thread's wake-ups), so
    // this overstates the loop's load without the pool: it goes back only once clearly below.
    const pool = this.poolWriteMs / (now - this.windowStart);
    this.saturated = busy + pool >= SATURATED;
    this.windowStart = now;
    this.windowMark = this.utilization();
    this.poolWriteMs = 0;
  }
}
