// Per-project ingest rate (server_config.project_max_rows_per_s), paced rather than cut off: each
// project has a time at which the rows it was let in are paid for at its rate (a generic cell
// rate algorithm). A request whose project is paid up to within BURST_MS goes at once; one that
// would have to wait up to MAX_WAIT_MS waits that long and then goes; beyond that it gets 429 with
// Retry-After. So a project sending faster than its rate is slowed to it, request by request,
// instead of being let in a second's worth at a time and refused in between: a bucket refilled
// once a second let a flooding project in as a burst that raised the other projects' p99 by a
// third (bench/tenancy.ts). A refused request whose project is known from its header or token is
// refused before its body is decoded. The other half of fairness, the share of the queue one
// project may hold, is the producer's.

/** Rows a project may send at once after a pause, as time at its rate. */
const BURST_MS = 100;
/** The longest a request is held back to keep its project at its rate. */
export const MAX_WAIT_MS = 1000;
/** Projects beyond this many are swept of the paid-up ones (the same as none), once a second at most. */
const SWEEP_AT = 4096;
const SWEEP_EVERY_MS = 1000;

export type Admission = { waitMs: number } | { retryAfterS: number };

export class ProjectRates {
  private readonly msPerRow: number;
  private readonly clock: () => number;
  /** By project: when the rows let in so far are paid for (clock ms). */
  private readonly paidAt = new Map<string, number>();
  private sweptAt = Number.NEGATIVE_INFINITY;

  constructor(rowsPerSecond: number, clock: () => number = () => performance.now()) {
    this.msPerRow = 1000 / rowsPerSecond;
    this.clock = clock;
  }

  /** How long a request of these projects would wait now (ms, 0: none). */
  private waitMs(projects: Iterable<string>, now: number): number {
    let wait = 0;
    for (const p of projects) wait = Math.max(wait, (this.paidAt.get(p) ?? now) - BURST_MS - now);
    return wait;
  }

  /** Seconds after which a request of these projects would be let in, when it cannot be now (0: it can). */
  retryAfter(projects: Iterable<string>): number {
    const wait = this.waitMs(projects, this.clock());
    return wait <= MAX_WAIT_MS ? 0 : Math.ceil(wait / 1000);
  }

  /**
   * Lets a request's rows in, after `waitMs`, charging them to their projects; or refuses it
   * (charging nothing) when it would wait more than MAX_WAIT_MS.
   */
  admit(rowsByProject: Readonly<Record<string, number>>): Admission {
    const now = this.clock();
    const wait = this.waitMs(Object.keys(rowsByProject), now);
    if (wait > MAX_WAIT_MS) return { retryAfterS: Math.ceil(wait / 1000) };
    for (const [p, rows] of Object.entries(rowsByProject)) {
      this.paidAt.set(p, Math.max(this.paidAt.get(p) ?? now, now) + rows * this.msPerRow);
    }
    if (this.paidAt.size > SWEEP_AT && now - this.sweptAt >= SWEEP_EVERY_MS) this.sweep(now);
    return { waitMs: Math.max(0, wait) };
  }

  /** Gives back the rows of a request that was let in but not stored. */
  refund(rowsByProject: Readonly<Record<string, number>>): void {
    for (const [p, rows] of Object.entries(rowsByProject)) {
      const at = this.paidAt.get(p);
      if (at !== undefined) this.paidAt.set(p, at - rows * this.msPerRow);
    }
  }

  /** Forgets paid-up projects: a project that sends once is not remembered for ever. */
  private sweep(now: number): void {
    this.sweptAt = now;
    for (const [p, at] of this.paidAt) if (at <= now) this.paidAt.delete(p);
  }

  /** Projects remembered (for tests). */
  get size(): number {
    return this.paidAt.size;
  }
}
