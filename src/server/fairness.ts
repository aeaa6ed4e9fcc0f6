// Per-project ingest rate (server_config.project_max_rows_per_s): a token bucket per project,
// refilled at the rate and holding at most one second of rows. A request is let in while its
// projects' buckets are not empty and then takes its rows, which may leave a bucket in debt; the
// project's next requests get 429 with Retry-After (the seconds until the bucket refills) until it
// has. So a project ingests at its rate on average, a request of any size can pass, and a refused
// request whose project is known from its header or token is refused before its body is decoded.
// The other half of fairness, the share of the queue one project may hold, is the producer's.

/** Buckets beyond this many are swept of the full ones (which are the same as no bucket), once a second at most. */
const SWEEP_AT = 4096;
const SWEEP_EVERY_MS = 1000;

interface Bucket {
  rows: number;
  at: number;
}

export class ProjectRates {
  private readonly rate: number;
  private readonly clock: () => number;
  private readonly buckets = new Map<string, Bucket>();
  private sweptAt = Number.NEGATIVE_INFINITY;

  constructor(rowsPerSecond: number, clock: () => number = () => performance.now()) {
    this.rate = rowsPerSecond;
    this.clock = clock;
  }

  /** The bucket of a project, refilled to now (undefined: full, as for a project not seen lately). */
  private refill(project: string, now: number): Bucket | undefined {
    const b = this.buckets.get(project);
    if (b === undefined) return undefined;
    b.rows = Math.min(this.rate, b.rows + ((now - b.at) * this.rate) / 1000);
    b.at = now;
    return b;
  }

  /** Seconds until all of these projects may send again (0: now). */
  retryAfter(projects: Iterable<string>): number {
    const now = this.clock();
    let wait = 0;
    for (const p of projects) {
      const b = this.refill(p, now);
      if (b !== undefined && b.rows <= 0) wait = Math.max(wait, (1 - b.rows) / this.rate);
    }
    return wait === 0 ? 0 : Math.max(1, Math.ceil(wait));
  }

  /** Takes the rows of a request that was let in. */
  take(rowsByProject: Readonly<Record<string, number>>): void {
    this.add(rowsByProject, -1);
  }

  /** Gives back the rows of a request that was let in but not stored. */
  refund(rowsByProject: Readonly<Record<string, number>>): void {
    this.add(rowsByProject, 1);
  }

  private add(rowsByProject: Readonly<Record<string, number>>, sign: 1 | -1): void {
    const now = this.clock();
    for (const [p, rows] of Object.entries(rowsByProject)) {
      let b = this.refill(p, now);
      if (b === undefined) {
        b = { rows: this.rate, at: now };
        this.buckets.set(p, b);
      }
      b.rows = Math.min(this.rate, b.rows + sign * rows);
    }
    if (this.buckets.size > SWEEP_AT && now - this.sweptAt >= SWEEP_EVERY_MS) this.sweep(now);
  }

  /** Forgets full buckets: a project that sends once is not remembered for ever. */
  private sweep(now: number): void {
    this.sweptAt = now;
    for (const [p] of this.buckets) {
      if (this.refill(p, now)!.rows >= this.rate) this.buckets.delete(p);
    }
  }

  /** Projects with a bucket (for tests). */
  get size(): number {
    return this.buckets.size;
  }
}
