// The shipper moves each finished UTC day through its phases: open -> sealed -> uploaded ->
// verified -> cleaned, one append-only line per phase in index/days.jsonl (src/storage/days-index.ts).
// A run resumes a day from its last recorded phase, so a process killed anywhere finishes the day
// on its next start. Failures are recorded as `failed` lines with the step and the cause and are
// retried with exponential backoff and jitter; local data is removed only after `verified`, and a
// verification mismatch uploads again, never cleans.
//
// Automatic runs (shipper_enabled and a complete S3 configuration) check for finished days at
// start (resume) and every 30 s (the UTC rollover); `shipNow(day)` runs one day by hand. Without
// automatic shipping, a start only deletes what in-day compaction replaced in the newest finished
// days (tidyFinishedDays), which a seal would have vacuumed.

import { readdir } from 'node:fs/promises';
import { join } from 'node:path';
import type { DeltaOptions } from '../delta/table.ts';
import {
  appendDayPhase,
  type DayProgress,
  type DayState,
  readDayPhases,
  readDayStates,
  type TablePhaseStats,
} from '../storage/days-index.ts';
import { type InstanceLayout, isDay, validateDay } from '../storage/layout.ts';
import { ObjectStore } from '../storage/object-store.ts';
import { claimLock } from '../storage/process-lock.ts';
import { type ResolvedS3, s3Problem } from '../storage/s3-config.ts';
import {
  cleanDay,
  sealDay,
  sealJoins,
  tidyDay,
  type UploadProgress,
  uploadDay,
  VerifyMismatchError,
  verifyDay,
} from './phases.ts';

/**
 * The newest finished days, not shipped, whose replaced files a start without shipping deletes:
 * the day a stopped process left (and one more, should the start after it have stopped before its
 * tidy); each earlier day was tidied by the start after it or closed by a running process.
 * Opening a busy day's table costs ~0.1-0.3 s (its last hour's removals are in its log).
 */
const TIDY_DAYS = 2;

/** Upload-and-verify rounds in one run before a mismatch is left to the next retry. */
const VERIFY_ROUNDS = 2;

export type ShipStep = 'seal' | 'upload' | 'verify' | 'clean';

/** A manual ship refused before anything is done (current day, no configuration, no data...). */
export class ShipError extends Error {
  override name = 'ShipError';
  /** The object-storage settings whose variables are missing, when that is the reason. */
  readonly missing: readonly string[];
  constructor(message: string, missing: readonly string[] = []) {
    super(message);
    this.missing = missing;
  }
}

export interface ShipSummary {
  day: string;
  /** `cleaned` when the day is shipped and removed locally, else `failed` (see error). */
  status: 'cleaned' | 'failed';
  /** The furthest phase the day has reached. */
  phase: DayProgress;
  /** Per table: rows, version, bytes and files (the seal's counts; remote rows once verified). */
  tables: Record<string, TablePhaseStats>;
  /** What this run uploaded (files already there are skipped). */
  uploaded: { files: number; bytes: number };
  error: { step: ShipStep; message: string } | null;
}

export interface ShipProgress extends UploadProgress {
  day: string;
  step: ShipStep;
}

export interface ShipperStats {
  enabled: boolean;
  configured: boolean;
  /** Object-storage settings without a value (named by the setting; see the README for variables). */
  missing: string[];
  state: 'disabled' | 'not_configured' | 'idle' | 'shipping' | 'waiting_retry';
  day: string | null;
  step: ShipStep | null;
  bytes_done: number;
  bytes_total: number;
  files_done: number;
  files_total: number;
  days_pending: number;
  next_retry_at: string | null;
  last_shipped: { day: string; at: string } | null;
  last_error: { at: string; day: string; step: string; message: string } | null;
}

export interface ShipperInit {
  layout: InstanceLayout;
  s3: ResolvedS3;
  /** shipper_enabled: ship finished days automatically. */
  enabled: boolean;
  deltaOptions: DeltaOptions;
  /** The memory the process plans for (options.ts memoryLimit); the seal follows it (sealJoins). */
  memoryLimit: number;
  /** The current UTC day (days before it are finished). */
  today: () => string;
  /** Resolves once every row of the day accepted by this process is in its Delta tables. */
  whenDayLanded: (day: string) => Promise<void>;
  /** Lets go of the day's open tables (before the seal and before the clean). */
  releaseDay: (day: string) => Promise<void>;
  /**
   * Without automatic shipping, start() deletes the files in-day compaction replaced in the newest
   * finished days (see tidyFinishedDays). Off for a process that ships by hand (`otelake ship`).
   */
  tidyAtStart: boolean;
  /**
   * The operator's log: what the tidy deleted, and automatic shipping's failed steps and scans
   * (with when they are tried again) and shipped days.
   */
  report: (level: 'info' | 'warn', message: string) => void;
  /** Timing (tests shorten it). */
  timing?: ShipperTiming;
}

export interface ShipperTiming {
  /** How often automatic shipping looks for finished days (default 30 s). */
  checkMs: number;
  /** Retry delays: the first failure waits about baseMs, each next one twice as long, at most maxMs. */
  baseMs: number;
  maxMs: number;
}

const DEFAULT_TIMING: ShipperTiming = { checkMs: 30_000, baseMs: 5_000, maxMs: 15 * 60_000 };

/** Test seam: runs after each phase line is recorded (e.g. to kill the process there). */
export const shipperHooks: { afterPhase?: (day: string, phase: DayProgress) => Promise<void> | void } = {};

const STEP_OF: Record<Exclude<DayProgress, 'cleaned'>, ShipStep> = {
  open: 'seal',
  sealed: 'upload',
  uploaded: 'verify',
  verified: 'clean',
};

export class Shipper {
  private readonly init: ShipperInit;
  private readonly store: ObjectStore | null;
  private readonly timing: ShipperTiming;
  private chain: Promise<unknown> = Promise.resolve();
  private readonly abort = new AbortController();
  private stopped = false;
  private running = false;
  private timer: NodeJS.Timeout | null = null;
  private readonly retryAt = new Map<string, number>();
  private current: ShipProgress | null = null;
  private pending = 0;
  private lastShipped: ShipperStats['last_shipped'] = null;
  private lastError: ShipperStats['last_error'] = null;

  constructor(init: ShipperInit) {
    this.init = init;
    this.store = init.s3.settings ? new ObjectStore(init.s3.settings) : null;
    this.timing = init.timing ?? DEFAULT_TIMING;
    // What shipped before this process: the last `cleaned` line (a day shipped since wins).
    void readDayPhases(init.layout.daysIndex).then(
      (lines) => {
        const last = lines.findLast((l) => l.phase === 'cleaned');
        if (last && this.lastShipped === null) this.lastShipped = { day: last.day, at: last.at };
      },
      () => {},
    );
  }

  get configured(): boolean {
    return this.store !== null;
  }

  /**
   * Starts automatic shipping (when enabled and configured): resumes unfinished days now. Without
   * it, tidies the newest finished days (tidyAtStart). The Logger calls it once, as it starts.
   */
  start(): void {
    if (this.running || this.stopped) return;
    if (!this.init.enabled || !this.store) {
      if (this.init.tidyAtStart) {
        void this.serialized(() => this.tidyFinishedDays()).catch((err: unknown) =>
          this.report('warn', `tidying finished days failed: ${(err as Error).message}`),
        );
      }
      return;
    }
    this.running = true;
    this.schedule(0);
  }

  /**
   * A day's files that in-day compaction replaced in its last hour are deleted when its tables
   * close after its end, and by its seal's VACUUM; a process stopped (or crashed) over midnight
   * that does not ship leaves them for good. So a start without shipping deletes them in the
   * TIDY_DAYS newest finished days still open, once the rows the log replays into them landed; a
   * day whose rows cannot land yet is left to its tables' close. Deleting a removed file is safe
   * whoever else has the table open: no version from now on names it.
   */
  private async tidyFinishedDays(): Promise<void> {
    const today = this.init.today();
    const states = await readDayStates(this.init.layout.daysIndex);
    const days = [...states.values()]
      .filter((s) => s.phase === 'open' && s.day < today)
      .map((s) => s.day)
      .sort()
      .slice(-TIDY_DAYS);
    let deleted = 0;
    const tidied: string[] = [];
    for (const day of days) {
      if (this.stopped) break;
      const landed = await this.init.whenDayLanded(day).then(
        () => true,
        () => false,
      );
      if (!landed) continue;
      const n = await tidyDay(this.init.layout, day, this.init.deltaOptions);
      if (n > 0) tidied.push(day);
      deleted += n;
    }
    if (deleted > 0)
      this.report('info', `deleted ${deleted} files that in-day compaction replaced in ${tidied.join(', ')}`);
  }

  /** Reports through the logger's sink; a sink that throws is not this task's failure. */
  private report(level: 'info' | 'warn', message: string): void {
    try {
      this.init.report(level, message);
    } catch {
      // nothing else to tell
    }
  }

  /** Stops automatic shipping and aborts uploads in flight; resolves when the current step ended. */
  async stop(): Promise<void> {
    this.stopped = true;
    this.running = false;
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    this.abort.abort();
    await this.chain.catch(() => {});
    this.store?.destroy();
  }

  private schedule(ms: number): void {
    if (!this.running) return;
    if (this.timer) clearTimeout(this.timer);
    this.timer = setTimeout(() => {
      this.timer = null;
      void this.pass();
    }, ms);
    this.timer.unref();
  }

  /** One automatic pass: every finished day not cleaned and not waiting for a retry, oldest first. */
  private async pass(): Promise<void> {
    let scanned = false;
    try {
      for (const day of await this.pendingDays()) {
        if (!this.running) return;
        if ((this.retryAt.get(day) ?? 0) > Date.now()) continue;
        await this.serialized(() => this.runDay(day));
      }
      scanned = true;
    } catch (err) {
      this.report('warn', `shipping could not look for finished days: ${this.recordError('-', 'scan', err)}`);
    } finally {
      // The next pass at the earliest retry; at once for one already due. A timer can fire a little
      // before Date.now() reaches its time: the pass skipped that day, and leaving the due retry
      // out here put it off to the next scan, 30 s on (a failed scan waits for that scan too).
      const now = Date.now();
      const waits = scanned ? [...this.retryAt.values()].map((t) => Math.max(0, t - now)) : [];
      this.schedule(Math.min(this.timing.checkMs, ...waits));
    }
  }

  /** Finished days (before today) not cleaned yet, oldest first. */
  async pendingDays(): Promise<string[]> {
    const today = this.init.today();
    const states = await readDayStates(this.init.layout.daysIndex);
    const local = await readdir(this.init.layout.daysDir).catch(() => [] as string[]);
    const days = new Set<string>();
    for (const d of local) if (isDay(d)) days.add(d);
    for (const [d, s] of states) if (isDay(d) && (s.phase !== 'open' || days.has(d))) days.add(d);
    const out = [...days].filter((d) => d < today && states.get(d)?.phase !== 'cleaned').sort();
    this.pending = out.length;
    // A day another process (`otelake ship`) shipped meanwhile waits for no retry here.
    for (const d of this.retryAt.keys()) if (!out.includes(d)) this.retryAt.delete(d);
    return out;
  }

  /**
   * Ships one finished day now, from its last phase. Refuses (ShipError) the current or a future
   * day, an incomplete configuration and a day without data; a failure of a step is recorded and
   * returned in the summary.
   */
  async shipNow(day: string, opts: { onProgress?: (p: ShipProgress) => void } = {}): Promise<ShipSummary> {
    validateDay(day);
    const today = this.init.today();
    if (day >= today) {
      throw new ShipError(
        day === today
          ? `day ${day} is the current UTC day: only finished days are shipped`
          : `day ${day} is in the future (today is ${today} UTC)`,
      );
    }
    const problem = s3Problem(this.init.s3);
    if (problem !== null) throw new ShipError(`cannot ship: ${problem}`, this.init.s3.missing);
    if (this.stopped) throw new ShipError('cannot ship: the logger is stopped');
    const state = (await readDayStates(this.init.layout.daysIndex)).get(day);
    const hasLocal = await readdir(this.init.layout.dayDir(day)).then(
      () => true,
      () => false,
    );
    if ((state === undefined || state.phase === 'open') && !hasLocal) {
      throw new ShipError(`no data for day ${day} in instance '${this.init.layout.instanceId}'`);
    }
    return this.serialized(() => this.runDay(day, opts.onProgress));
  }

  private serialized<T>(fn: () => Promise<T>): Promise<T> {
    const run = this.chain.then(fn, fn);
    this.chain = run.catch(() => {});
    return run;
  }

  /** Runs the day's remaining steps; every outcome is recorded in days.jsonl and in the summary. */
  private async runDay(day: string, onProgress?: (p: ShipProgress) => void): Promise<ShipSummary> {
    const store = this.store!;
    const layout = this.init.layout;
    const summary: ShipSummary = {
      day,
      status: 'failed',
      phase: 'open',
      tables: {},
      uploaded: { files: 0, bytes: 0 },
      error: null,
    };
    const releaseLock = await this.lock();
    let step: ShipStep = 'seal';
    try {
      const state: DayState | undefined = (await readDayStates(layout.daysIndex)).get(day);
      let phase: DayProgress = state?.phase ?? 'open';
      let sealed: Record<string, TablePhaseStats> | null = state?.sealed ?? null;
      // The last verification found a mismatch: upload again before verifying.
      let reupload = state?.failure?.step === 'verify';
      let rounds = 0;
      const record = async (next: DayProgress, tables: Record<string, TablePhaseStats>) => {
        await appendDayPhase(layout.daysIndex, { day, phase: next, tables });
        phase = next;
        summary.phase = next;
        summary.tables = tables;
        await shipperHooks.afterPhase?.(day, next);
      };
      summary.phase = phase;
      summary.tables = sealed ?? {};
      const progress = (p: UploadProgress) => {
        this.current = { day, step, ...p };
        onProgress?.(this.current);
      };
      progress({ bytesDone: 0, bytesTotal: 0, filesDone: 0, filesTotal: 0 });
      while (phase !== 'cleaned') {
        this.throwIfStopped();
        step = reupload && phase === 'uploaded' ? 'upload' : STEP_OF[phase];
        progress({ bytesDone: 0, bytesTotal: 0, filesDone: 0, filesTotal: 0 });
        if (step === 'seal') {
          await this.init.whenDayLanded(day);
          await this.init.releaseDay(day);
          sealed = await sealDay(layout, day, this.init.deltaOptions, {
            join: sealJoins(this.init.memoryLimit),
          });
          await record('sealed', sealed);
        } else if (step === 'upload') {
          if (!sealed) throw new Error(`day ${day} has no sealed counts in ${layout.daysIndex}`);
          const sent = await uploadDay(store, layout, day, progress, this.abort.signal);
          summary.uploaded.files += sent.files;
          summary.uploaded.bytes += sent.bytes;
          reupload = false;
          await record('uploaded', sealed);
        } else if (step === 'verify') {
          if (!sealed) throw new Error(`day ${day} has no sealed counts in ${layout.daysIndex}`);
          try {
            await record('verified', await verifyDay(store, layout, day, sealed, this.abort.signal));
          } catch (err) {
            if (!(err instanceof VerifyMismatchError) || ++rounds >= VERIFY_ROUNDS) throw err;
            await this.recordFailure(day, step, err);
            reupload = true;
          }
        } else {
          await this.init.releaseDay(day);
          await cleanDay(layout, day);
          await record('cleaned', summary.tables);
        }
      }
      summary.status = 'cleaned';
      this.retryAt.delete(day);
      this.lastShipped = { day, at: new Date().toISOString() };
      if (this.running) {
        const { files, bytes } = summary.uploaded;
        this.report(
          'info',
          `shipped ${day}: ${files} files (${bytes} bytes) uploaded, verified, local copy removed`,
        );
      }
    } catch (err) {
      if (this.stopped) {
        summary.error = { step, message: 'stopped before the day was shipped' };
      } else {
        const message = await this.recordFailure(day, step, err);
        summary.error = { step, message };
        const failures = ((await readDayStates(layout.daysIndex)).get(day)?.failures ?? 1) - 1;
        const delay = Math.min(this.timing.maxMs, this.timing.baseMs * 2 ** Math.min(failures, 30));
        const at = Date.now() + delay * (0.5 + Math.random() / 2);
        this.retryAt.set(day, at);
        // In the server's log too (a hand-run ship answers with its summary instead).
        if (this.running) {
          const next = new Date(at).toISOString();
          this.report('warn', `shipping ${day} failed at ${step}: ${message}; tried again at ${next}`);
        }
      }
    } finally {
      this.current = null;
      await releaseLock();
      await this.pendingDays().catch(() => {}); // days_pending of stats()
    }
    return summary;
  }

  private throwIfStopped(): void {
    if (this.stopped) throw new Error('stopped');
  }

  /** Records a `failed` line for the step; returns its message (secrets removed). */
  private async recordFailure(day: string, step: string, err: unknown): Promise<string> {
    const message = this.recordError(day, step, err);
    await appendDayPhase(this.init.layout.daysIndex, { day, phase: 'failed', step, error: message }).catch(
      () => {},
    );
    return message;
  }

  private recordError(day: string, step: string, err: unknown): string {
    const raw = err instanceof Error ? err.message : String(err);
    const message = this.init.s3.settings ? this.init.s3.settings.redact(raw) : raw;
    this.lastError = { at: new Date().toISOString(), day, step, message };
    return message;
  }

  /**
   * Holds `index/shipping.lock` while a day is shipped, so that two processes on one instance (a
   * server and `otelake ship`) never ship at once. A lock whose process is gone is taken over:
   * the lock names the process by its id and start time, as after a crash and a reboot its id may
   * be another process's.
   */
  private async lock(): Promise<() => Promise<void>> {
    const file = join(this.init.layout.root, 'index', 'shipping.lock');
    const claim = await claimLock(file);
    if (!claim.held)
      throw new ShipError(`process ${claim.holder} is shipping days of this instance (${file})`);
    return claim.release;
  }

  stats(): ShipperStats {
    // A retry stays `waiting_retry` (its time past: due) until its pass takes the day up, not
    // `idle` for the moment between the two; without automatic shipping nothing retries.
    const retries = this.running ? [...this.retryAt.values()] : [];
    const state: ShipperStats['state'] = !this.store
      ? 'not_configured'
      : this.current
        ? 'shipping'
        : retries.length > 0
          ? 'waiting_retry'
          : this.init.enabled
            ? 'idle'
            : 'disabled';
    return {
      enabled: this.init.enabled,
      configured: this.store !== null,
      missing: [...this.init.s3.missing],
      state,
      day: this.current?.day ?? null,
      step: this.current?.step ?? null,
      bytes_done: this.current?.bytesDone ?? 0,
      bytes_total: this.current?.bytesTotal ?? 0,
      files_done: this.current?.filesDone ?? 0,
      files_total: this.current?.filesTotal ?? 0,
      days_pending: this.pending,
      next_retry_at: retries.length > 0 ? new Date(Math.min(...retries)).toISOString() : null,
      last_shipped: this.lastShipped,
      last_error: this.lastError,
    };
  }
}
