// A small pool of worker threads that run named tasks off the event loop: the Delta engine's
// writes, checkpoints and compactions, decoding request bodies, queries. Polars runs here with its
// synchronous API, so a native panic surfaces as a catchable error instead of aborting the
// process. A pool may recycle its workers after a number of tasks, as polars frees native memory
// only when V8 collects.

import module from 'node:module';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import {
  isMainThread,
  parentPort,
  type ResourceLimits,
  type Transferable,
  Worker,
} from 'node:worker_threads';

/** URL of a sibling module, `.ts` when running from source and `.js` when built. */
export function siblingModule(importMetaUrl: string, name: string): URL {
  const ext = importMetaUrl.endsWith('.ts') ? '.ts' : '.js';
  return new URL(`./${name}${ext}`, importMetaUrl);
}

type Pending = { resolve: (v: unknown) => void; reject: (e: Error) => void };

interface Slot {
  worker: Worker;
  /** Tasks posted to it that count toward recycleAfter. */
  tasksRun: number;
  /** Takes no new task: it is replaced once its tasks in flight are answered. */
  retiring: boolean;
  /** A spare's timer that stops it once idle for spareIdleMs. */
  idleTimer: NodeJS.Timeout | null;
  /** Tasks posted and not answered yet (a failed worker's are rejected and cleared). */
  pending: Map<number, Pending>;
}

export interface WorkerPoolOptions {
  /**
   * The workers' thread name (`otelake-decode`): what `top -H`, `ps -L` and /proc show for them
   * on Node 24 (Node 22 names every thread `node`), and how `bench/server-load.ts` tells their CPU
   * apart. Linux keeps 15 bytes of it.
   */
  name: string;
  size: number;
  /** Replace a worker after it ran this many tasks (bounds native memory). 0 = never. */
  recycleAfter?: number;
  /**
   * The tasks that count toward `recycleAfter` (default: every task): those that leave native
   * memory behind. A replaced worker's start costs a burst of CPU (modules loaded, code compiled).
   */
  recycleTasks?: readonly string[] | null;
  /** Extra flags for the worker (e.g. '--expose-gc'). */
  execArgv?: string[];
  /** Data every worker gets as `workerData`. */
  workerData?: unknown;
  /**
   * Tasks posted to one worker before it answered the first (default 1). More than one keeps a
   * worker busy with the next task while the main thread handles the previous answer.
   */
  maxInFlight?: number;
  /** V8 heap limits of each worker (e.g. a smaller young generation). */
  resourceLimits?: ResourceLimits;
  /**
   * Workers beyond the first (spares) start only for a task that has waited this long for one
   * (default 0: at once), and stop once idle for `spareIdleMs` (default 10 s): a pool whose first
   * worker keeps up holds the memory of one.
   */
  spareAfterMs?: number;
  spareIdleMs?: number;
}

type Queued = { task: string; payload: unknown; transfer: Transferable[]; p: Pending; at: number };

export class WorkerPool {
  private readonly url: URL;
  private readonly opts: Required<WorkerPoolOptions>;
  private readonly slots: Slot[] = [];
  private readonly queue: Queued[] = [];
  private nextId = 1;
  private closed = false;
  /** Dispatches again when the oldest queued task will have waited spareAfterMs. */
  private spareTimer: NodeJS.Timeout | null = null;

  constructor(moduleUrl: URL, opts: WorkerPoolOptions) {
    this.url = moduleUrl;
    this.opts = {
      recycleAfter: 0,
      recycleTasks: null,
      execArgv: [],
      workerData: undefined,
      maxInFlight: 1,
      resourceLimits: {},
      spareAfterMs: 0,
      spareIdleMs: 10_000,
      ...opts,
    };
  }

  /**
   * Runs `task` on a free worker; rejects with the worker's error message. An aborted `signal`
   * rejects at once with its reason and takes a task still waiting for a worker out of the
   * queue; a task already running finishes in its worker, and its result is dropped.
   */
  run<T>(task: string, payload: unknown, transfer: Transferable[] = [], signal?: AbortSignal): Promise<T> {
    if (this.closed) return Promise.reject(new Error('worker pool is closed'));
    if (signal?.aborted) return Promise.reject(signal.reason);
    return new Promise<T>((resolve, reject) => {
      const job: Queued = {
        task,
        payload,
        transfer,
        p: { resolve: resolve as (v: unknown) => void, reject },
        at: performance.now(),
      };
      if (signal) {
        const onAbort = () => {
          const i = this.queue.indexOf(job);
          if (i >= 0) this.queue.splice(i, 1);
          reject(signal.reason);
        };
        signal.addEventListener('abort', onAbort, { once: true });
        const done = () => signal.removeEventListener('abort', onAbort);
        job.p = {
          resolve: (v) => {
            done();
            resolve(v as T);
          },
          reject: (e) => {
            done();
            reject(e);
          },
        };
      }
      this.queue.push(job);
      this.dispatch();
    });
  }

  get queuedTasks(): number {
    return this.queue.length;
  }

  /** Workers running (for tests and stats). */
  get workers(): number {
    return this.slots.length;
  }

  private dispatch(): void {
    while (this.queue.length > 0) {
      let slot = this.idlest();
      if ((!slot || slot.pending.size > 0) && this.slots.length < this.opts.size && this.spareDue())
        slot = this.spawn();
      if (!slot) return;
      const job = this.queue.shift()!;
      const id = this.nextId++;
      if (slot.idleTimer) clearTimeout(slot.idleTimer);
      slot.idleTimer = null;
      slot.worker.ref(); // a task in flight keeps the process alive; an idle worker does not
      slot.pending.set(id, job.p);
      if (this.opts.recycleTasks?.includes(job.task) ?? true) slot.tasksRun++;
      slot.worker.postMessage({ id, task: job.task, payload: job.payload }, job.transfer);
    }
  }

  /**
   * Whether another worker may start now: the first at once, a spare once the oldest queued task
   * has waited spareAfterMs (until then a timer dispatches again).
   */
  private spareDue(): boolean {
    if (this.slots.length === 0 || this.opts.spareAfterMs <= 0) return true;
    const wait = this.queue[0]!.at + this.opts.spareAfterMs - performance.now();
    if (wait <= 0) return true;
    this.spareTimer ??= setTimeout(() => {
      this.spareTimer = null;
      if (!this.closed) this.dispatch();
    }, wait);
    this.spareTimer.unref();
    return false;
  }

  /** The worker with the fewest tasks in flight that can take one more, if any. */
  private idlest(): Slot | undefined {
    let best: Slot | undefined;
    for (const s of this.slots) {
      if (s.retiring || s.pending.size >= this.opts.maxInFlight) continue;
      if (!best || s.pending.size < best.pending.size) best = s;
    }
    return best;
  }

  private spawn(): Slot {
    // Without execArgv a worker inherits the parent's flags; extra flags replace them.
    const cache = module.getCompileCacheDir?.();
    const worker = new Worker(this.url, {
      name: this.opts.name,
      ...(this.opts.execArgv.length > 0 ? { execArgv: this.opts.execArgv } : {}),
      // The compile cache the process enabled (bin/otelake.js does) serves the workers too: a
      // worker then loads compiled code instead of stripping the types of every module again
      // (~10 MiB of RSS less per worker, measured with the server's four).
      ...(cache ? { env: { ...process.env, NODE_COMPILE_CACHE: cache } } : {}),
      workerData: this.opts.workerData,
      resourceLimits: this.opts.resourceLimits,
    });
    worker.unref();
    const slot: Slot = { worker, tasksRun: 0, retiring: false, idleTimer: null, pending: new Map() };
    worker.on(
      'message',
      (msg: { id: number; ok: boolean; result?: unknown; error?: string; returned?: unknown }) => {
        const p = slot.pending.get(msg.id);
        slot.pending.delete(msg.id);
        if (slot.pending.size === 0) slot.worker.unref();
        if (p) {
          if (msg.ok) p.resolve(msg.result);
          else
            p.reject(
              Object.assign(
                new Error(msg.error),
                msg.returned === undefined ? {} : { returned: msg.returned },
              ),
            );
        }
        if (this.opts.recycleAfter > 0 && slot.tasksRun >= this.opts.recycleAfter) slot.retiring = true;
        if (slot.retiring && slot.pending.size === 0) this.retire(slot);
        this.dispatch();
        if (this.opts.spareAfterMs > 0 && slot.pending.size === 0 && !slot.retiring) this.idleSpare(slot);
      },
    );
    worker.on('error', (err) => this.fail(slot, err));
    worker.on('exit', (code) => {
      if (slot.pending.size > 0) this.fail(slot, new Error(`worker exited with code ${code}`));
      this.remove(slot);
    });
    this.slots.push(slot);
    return slot;
  }

  /** Stops a spare (a worker beyond the first) once it has been idle for spareIdleMs. */
  private idleSpare(slot: Slot): void {
    if (this.slots.indexOf(slot) < 1) return;
    if (slot.idleTimer) clearTimeout(slot.idleTimer);
    slot.idleTimer = setTimeout(() => {
      slot.idleTimer = null;
      if (slot.pending.size === 0 && this.slots.indexOf(slot) >= 1) this.retire(slot);
    }, this.opts.spareIdleMs);
    slot.idleTimer.unref();
  }

  private fail(slot: Slot, err: Error): void {
    for (const p of slot.pending.values()) p.reject(err);
    slot.pending.clear();
    this.remove(slot);
    void slot.worker.terminate();
    this.dispatch();
  }

  private retire(slot: Slot): void {
    this.remove(slot);
    void slot.worker.terminate();
  }

  private remove(slot: Slot): void {
    if (slot.idleTimer) clearTimeout(slot.idleTimer);
    slot.idleTimer = null;
    const i = this.slots.indexOf(slot);
    if (i >= 0) this.slots.splice(i, 1);
  }

  /** Waits for tasks in flight, then stops every worker. Queued tasks not yet started are rejected. */
  async close(): Promise<void> {
    this.closed = true;
    if (this.spareTimer) clearTimeout(this.spareTimer);
    this.spareTimer = null;
    for (const q of this.queue.splice(0)) q.p.reject(new Error('worker pool is closed'));
    await Promise.all(
      this.slots.map(
        (s) =>
          new Promise<void>((resolve) => {
            if (s.pending.size === 0) return resolve();
            const t = setInterval(() => {
              if (s.pending.size === 0) {
                clearInterval(t);
                resolve();
              }
            }, 5);
          }),
      ),
    );
    await Promise.all(this.slots.splice(0).map((s) => s.worker.terminate()));
  }
}

export type TaskHandlers = Record<string, (payload: never) => unknown | Promise<unknown>>;

/**
 * Worker side: answers tasks posted by a WorkerPool. A result may be `{ value, transfer }` built
 * with `transferResult` to hand buffers back without copying.
 */
export function serveTasks(handlers: TaskHandlers): void {
  if (isMainThread || !parentPort) throw new Error('serveTasks must run in a worker thread');
  const port = parentPort;
  port.on('message', async (msg: { id: number; task: string; payload: unknown }) => {
    try {
      const handler = handlers[msg.task];
      if (!handler) throw new Error(`unknown task ${msg.task}`);
      const out = await handler(msg.payload as never);
      if (out instanceof TransferResult)
        port.postMessage({ id: msg.id, ok: true, result: out.value }, out.transfer);
      else port.postMessage({ id: msg.id, ok: true, result: out });
    } catch (err) {
      const error = err instanceof Error ? err.message : String(err);
      if (err instanceof ReturnedInput) {
        port.postMessage({ id: msg.id, ok: false, error, returned: err.value }, err.transfer);
      } else {
        port.postMessage({ id: msg.id, ok: false, error });
      }
    }
  });
}

class TransferResult {
  readonly value: unknown;
  readonly transfer: Transferable[];
  constructor(value: unknown, transfer: Transferable[]) {
    this.value = value;
    this.transfer = transfer;
  }
}

export function transferResult(value: unknown, transfer: Transferable[]): TransferResult {
  return new TransferResult(value, transfer);
}

/**
 * A task failure that hands (transferred) input back to the caller, who can retry with it: the
 * main thread sees it as `error.returned`.
 */
export class ReturnedInput extends Error {
  readonly value: unknown;
  readonly transfer: Transferable[];
  constructor(message: string, value: unknown, transfer: Transferable[]) {
    super(message);
    this.value = value;
    this.transfer = transfer;
  }
}

/**
 * A young-generation (or full) collection on demand, for a worker thread: polars frees a frame's
 * native memory only when V8 collects its JS wrapper, which a small heap rarely asks for.
 */
export function exposeGc(): (type: 'minor' | 'major') => void {
  setFlagsFromString('--expose-gc');
  const gc = runInNewContext('gc') as (o: { type: 'minor' | 'major' }) => void;
  return (type) => gc({ type });
}
