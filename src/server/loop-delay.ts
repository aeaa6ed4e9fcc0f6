// How long the event loop is held up (Parquet batches, large requests): the first suspect of slow
// answers. A timer every 10 ms measures it, but only while requests come: on an idle server its
// 100 wake-ups a second were most of the process's CPU (13 ms a second of ~17 on a 2-core
// machine). Sampling stops once no request has come for `idleMs` and starts again with the next.

import { monitorEventLoopDelay } from 'node:perf_hooks';

/** The sampling interval: the histogram records the whole interval, the delay is what exceeds it. */
const RESOLUTION_MS = 10;

export class LoopDelay {
  private readonly histogram = monitorEventLoopDelay({ resolution: RESOLUTION_MS });
  private readonly idleMs: number;
  /** Runs while sampling, to stop it once requests stop: an idle server has no timer of this. */
  private idleCheck: NodeJS.Timeout | null = null;
  private lastRequestAt = 0;

  constructor(idleMs = 2_000) {
    this.idleMs = idleMs;
  }

  get sampling(): boolean {
    return this.idleCheck !== null;
  }

  /**
   * A request came: sample from now on, until `idleMs` without one. Sampling starts over: Node's
   * histogram measures each sample from the one before, and without the reset the first after an
   * idle spell counted the whole spell as a hold-up (a max of minutes on a server idle that long).
   */
  request(): void {
    this.lastRequestAt = performance.now();
    if (this.idleCheck !== null) return;
    this.histogram.reset();
    this.histogram.enable();
    this.idleCheck = setInterval(() => {
      if (performance.now() - this.lastRequestAt >= this.idleMs) this.close();
    }, this.idleMs).unref();
  }

  /** Milliseconds the loop was held up beyond the interval, since sampling last started. */
  stats(): { p50: number; p99: number; max: number } {
    const ms = (ns: number) => Math.max(0, Math.round(ns / 1e4 - RESOLUTION_MS * 100) / 100);
    const h = this.histogram;
    return { p50: ms(h.percentile(50)), p99: ms(h.percentile(99)), max: ms(h.max) };
  }

  /** Stops sampling (until the next request); what was sampled stays. */
  close(): void {
    if (this.idleCheck !== null) clearInterval(this.idleCheck);
    this.idleCheck = null;
    this.histogram.disable();
  }
}
