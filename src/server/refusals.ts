// One log line per refused request (any answer of 400 or more): status, reason, project, client
// address, method and path, so that a user sees why clients are turned away. The lines are
// rate-limited, so that a flood of refusals cannot fill the disk: a burst of BURST lines, then one
// every 60 / BURST seconds; what is left out is counted and told in one summary line a minute.

import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { sentProjectId } from './project-header.ts';

/** Lines a flood may write at once, and per minute after that. */
const BURST = 10;
const SUMMARY_INTERVAL_MS = 60_000;

const reasons = new WeakMap<FastifyRequest, string>();

/** Records why a request is refused, for its log line (the text sent to the client). */
export function noteRefusal(reply: FastifyReply, reason: string): void {
  reasons.set(reply.request, reason);
}

/** A token bucket of log lines: `burst` at once, refilled at `burst` per minute. */
export class LineBudget {
  private readonly burst: number;
  private readonly clock: () => number;
  private tokens: number;
  private last: number;
  /** Refusals left out since the last summary, by status. */
  readonly leftOut = new Map<number, number>();

  constructor(burst = BURST, clock: () => number = Date.now) {
    this.burst = burst;
    this.clock = clock;
    this.tokens = burst;
    this.last = clock();
  }

  /** Whether a line may be written now; when not, the refusal is counted under its status. */
  take(status: number): boolean {
    const now = this.clock();
    this.tokens = Math.min(this.burst, this.tokens + ((now - this.last) * this.burst) / 60_000);
    this.last = now;
    if (this.tokens >= 1) {
      this.tokens -= 1;
      return true;
    }
    this.leftOut.set(status, (this.leftOut.get(status) ?? 0) + 1);
    return false;
  }

  /** The summary of what was left out ("503 x 95, 400 x 2"), and a fresh count; null when none. */
  drain(): { total: number; byStatus: string } | null {
    if (this.leftOut.size === 0) return null;
    const entries = [...this.leftOut.entries()].sort((a, b) => b[1] - a[1]);
    this.leftOut.clear();
    return {
      total: entries.reduce((a, [, n]) => a + n, 0),
      byStatus: entries.map(([status, n]) => `${status} x ${n}`).join(', '),
    };
  }
}

export function logRefusals(app: FastifyInstance, budget = new LineBudget()): void {
  const summarize = (): void => {
    const left = budget.drain();
    if (left) {
      app.log.warn(
        { refusals_left_out: left.total },
        `${left.total} more refused requests were not logged one by one (${left.byStatus})`,
      );
    }
  };
  const timer = setInterval(summarize, SUMMARY_INTERVAL_MS);
  timer.unref();
  app.addHook('onClose', async () => {
    clearInterval(timer);
    summarize();
  });

  app.addHook('onResponse', async (request, reply) => {
    const status = reply.statusCode;
    if (status < 400 || !budget.take(status)) return;
    const reason = reasons.get(request) ?? reply.raw.statusMessage ?? `HTTP ${status}`;
    // The project of an accepted token; else the X-Project-Id sent, named as such: with auth on
    // it is only a claim (a refused token, or another project's token, sent with it).
    const project = request.principal?.project ?? null;
    const claimed = project === null ? (sentProjectId(request.headers) ?? null) : null;
    const refusal = {
      status,
      reason,
      project,
      x_project_id: claimed,
      client: request.ip,
      method: request.method,
      path: request.url,
    };
    const who =
      project !== null
        ? `${refusal.client}, project ${project}`
        : claimed !== null
          ? `${refusal.client}, X-Project-Id ${claimed}`
          : refusal.client;
    request.log.warn({ refusal }, `refused ${request.method} ${request.url} (${who}): ${status} ${reason}`);
  });
}
