// A small pool of worker threads that run named tasks off the event loop: the Delta engine's
// writes, checkpoints and compactions, decoding request bodies, queries. Polars runs here with its
// synchronous API, so a native panic surfaces as a catchable error instead of aborting the
// process. A pool may recycle its workers after a number of tasks, as polars frees native memory
// only when V8 collects, and stop them once idle. A task goes only to a worker that has loaded its
// module (each says so), so that none waits for a load while another worker could answer. A pool
// may run its workers as child processes instead (`isolation`): the server's reads do, so that a
// read the memory limit cannot hold is killed alone.

import { type ChildProcess, fork } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import module from 'node:module';
import type { Socket } from 'node:net';
import { fileURLToPath } from 'node:url';
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
/**
 * What a worker posts: `{ ready }` once its module has loaded and it takes tasks; its answer to
 * task `id`, and from a child process first `{ id, started }` as it takes it.
 */
type Answer =
  | { ready: true }
  | { id: number; ok: boolean; result?: unknown; error?: string; returned?: unknown }
  | { id: number; started: true };
/** A task as a worker receives it. */
type TaskMessage = { id: number; task: string; payload: unknown };

/** What the pool needs of a worker: a thread (`Worker`) or a child process (`ChildProcess`). */
interface Runner {
  post(message: TaskMessage, transfer: Transferable[]): void;
  ref(): void;
  unref(): void;
  terminate(): Promise<unknown>;
}

/**
 * A task's worker ended (crashed, ran out of memory, exited) before answering: the task may be
 * sound, and another worker may run it. Every task the worker held fails with this.
 */
export class WorkerLost extends Error {
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = 'WorkerLost';
  }
}

/**
 * A child process ended while it had tasks: a signal (SIGKILL from the kernel's out-of-memory
 * killer, most likely) or an exit code. Its tasks fail with this; the pool starts another for
 * the next task. `startError`: it ended before it was ready, with this last error line on its
 * stderr (a module that does not load: a native package missing, say).
 */
export class WorkerProcessEnded extends WorkerLost {
  readonly signal: NodeJS.Signals | null;
  readonly startError: string | null;
  /** Why the pool stopped it for memory (`stopAboveCombinedAnonymousBytes`), if it did. */
  readonly stoppedFor: string | null;
  constructor(
    name: string,
    code: number | null,
    signal: NodeJS.Signals | null,
    startError: string | null = null,
    stoppedFor: string | null = null,
  ) {
    super(
      startError !== null
        ? `the ${name} process could not start (${signal ?? `exit code ${code}`}): ${startError}`
        : stoppedFor !== null
          ? `the ${name} process was stopped: ${stoppedFor}, as the task needed more memory than the limit left it`
          : signal === 'SIGKILL'
            ? `the ${name} process was killed (SIGKILL): most likely the system's out-of-memory killer, ` +
              'as the task needed more memory than the limit left it'
            : `the ${name} process ended (${signal ?? `exit code ${code}`}) before answering`,
    );
    this.name = 'WorkerProcessEnded';
    this.signal = signal;
    this.startError = startError;
    this.stoppedFor = stoppedFor;
  }
}

/** The last line of `text` that names an error (Node prints the error and its stack on a crash). */
function lastErrorLine(text: string): string | null {
  const lines = text.split('\n').filter((l) => /Error\b/.test(l) && !/^\s+at /.test(l));
  return lines.at(-1)?.trim() ?? null;
}

/**
 * How long an ingest worker (a decoder, the Parquet writer) waits idle before it stops: its heap
 * and code are not given back while it waits. After 15 s of ingest, the server held 216-220 MiB
 * of RSS idle against 141-155 once they stopped (a major collection in each kept 199). A start
 * takes 0.3-0.5 s on a slow day, which the requests do not wait for (the decoders decode on the
 * event loop meanwhile; each ingest request starts the Parquet worker if none runs). A minute:
 * an SDK exports every 1-60 s.
 */
export const WORKER_IDLE_MS = 60_000;

/** How often a pool with `stopAboveCombinedAnonymousBytes` looks at its processes' memory. */
const MEMORY_CHECK_MS = 100;

/** The period of the timer that holds the event loop while a pool closes (it does nothing). */
const CLOSE_HOLD_MS = 60_000;

interface Slot {
  worker: Runner;
  /** A child process's id (process isolation). */
  pid: number | null;
  /** Tasks posted to it that count toward recycleAfter. */
  tasksRun: number;
  /** Takes no new task: it is replaced once its tasks in flight are answered. */
  retiring: boolean;
  /** The timer that stops it once idle (spareIdleMs for a spare, idleMs). */
  idleTimer: NodeJS.Timeout | null;
  /** Tasks posted and not answered yet (a failed worker's are rejected and cleared). */
  pending: Map<number, Queued>;
  /** Tasks a child process said it started (those it had not are run again if it dies). */
  started: Set<number>;
  /** Its module has loaded: a task posted now starts at once. */
  ready: boolean;
  /** Why the pool killed it for memory, told to the tasks it fails. */
  stoppedFor: string | null;
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
  /**
   * Every worker, the first too, stops once idle this long, giving its memory back (a worker's
   * heap is not collected while it waits); the next task starts one. Default 0: the first stays.
   */
  idleMs?: number;
  /**
   * `process`: each worker is a child process running the module (forked with this process's
   * node flags; messages are copied, not transferred; no `workerData` or `resourceLimits`). With
   * `oomScoreAdj` (Linux), the kernel's out-of-memory killer picks it before this process.
   * Default `thread`.
   */
  isolation?: 'thread' | 'process';
  /** A child process's /proc oom_score_adj (-1000..1000); raising it needs no privilege. */
  oomScoreAdj?: number | null;
  /**
   * A child process whose anonymous resident memory (not its mapped files) is above this after a
   * task stops (0: never): the memory a task freed stays with its process (glibc keeps it), so
   * the next task would start from there. Linux (/proc) only.
   */
  retireAboveAnonymousBytes?: number;
  /**
   * The child processes are watched (every MEMORY_CHECK_MS) and the largest is killed once their
   * anonymous resident memory and this process's together pass this (0: never); its tasks fail
   * saying so. The kernel's out-of-memory killer would kill it too, but late: near a container's
   * limit it first takes back the pages of every process's code, which they read again at once,
   * and the container crawls meanwhile. Linux (/proc) only.
   */
  stopAboveCombinedAnonymousBytes?: number;
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
  /** Runs while child processes live, with stopAboveCombinedAnonymousBytes set. */
  private memoryTimer: NodeJS.Timeout | null = null;

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
      idleMs: 0,
      isolation: 'thread',
      oomScoreAdj: null,
      retireAboveAnonymousBytes: 0,
      stopAboveCombinedAnonymousBytes: 0,
      ...opts,
    };
    if (this.processes && (opts.workerData !== undefined || opts.resourceLimits))
      throw new Error('a pool of processes takes no workerData or resourceLimits');
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

  /** Workers that have loaded their module (a task posted to one starts without a wait to load). */
  get readyWorkers(): number {
    let n = 0;
    for (const s of this.slots) if (s.ready && !s.retiring) n++;
    return n;
  }

  /**
   * Starts a worker if none is running, without a task: a caller that does the work itself
   * meanwhile (the first requests after the workers stopped idle) hands it over once one is
   * ready (`readyWorkers`).
   */
  warm(): void {
    if (!this.closed && this.slots.length === 0) this.spawn();
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
      const slot = this.idlest();
      // A new worker takes tasks once it is ready.
      if ((!slot || slot.pending.size > 0) && this.slots.length < this.opts.size && this.spareDue())
        this.spawn();
      if (!slot) {
        // Workers still loading keep the process alive for the tasks that wait for them.
        for (const s of this.slots) if (!s.ready) s.worker.ref();
        return;
      }
      const job = this.queue.shift()!;
      const id = this.nextId++;
      if (slot.idleTimer) clearTimeout(slot.idleTimer);
      slot.idleTimer = null;
      slot.worker.ref(); // a task in flight keeps the process alive; an idle worker does not
      slot.pending.set(id, job);
      if (this.opts.recycleTasks?.includes(job.task) ?? true) slot.tasksRun++;
      slot.worker.post({ id, task: job.task, payload: job.payload }, job.transfer);
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

  /**
   * The ready worker with the fewest tasks in flight that can take one more, if any. A worker still
   * loading takes none: a task given to it would wait for its load (0.3-0.5 s on a slow day) where
   * a busy one may answer first.
   */
  private idlest(): Slot | undefined {
    let best: Slot | undefined;
    for (const s of this.slots) {
      if (!s.ready || s.retiring || s.pending.size >= this.opts.maxInFlight) continue;
      if (!best || s.pending.size < best.pending.size) best = s;
    }
    return best;
  }

  private spawn(): Slot {
    const slot: Slot = {
      worker: null as unknown as Runner,
      pid: null,
      tasksRun: 0,
      retiring: false,
      idleTimer: null,
      pending: new Map(),
      started: new Set(),
      ready: false,
      stoppedFor: null,
    };
    const answered = (msg: Answer) => this.answered(slot, msg);
    slot.worker = this.processes ? this.spawnProcess(slot, answered) : this.spawnThread(slot, answered);
    slot.worker.unref();
    this.slots.push(slot);
    return slot;
  }

  private spawnThread(slot: Slot, answered: (msg: Answer) => void): Runner {
    // Without execArgv a worker inherits the parent's flags; extra flags replace them.
    const worker = new Worker(this.url, {
      name: this.opts.name,
      ...(this.opts.execArgv.length > 0 ? { execArgv: this.opts.execArgv } : {}),
      ...compileCacheEnv(),
      workerData: this.opts.workerData,
      resourceLimits: this.opts.resourceLimits,
    });
    worker.on('message', answered);
    worker.on('error', (err) => this.fail(slot, err));
    worker.on('exit', (code) => {
      if (slot.pending.size > 0) this.fail(slot, new Error(`worker exited with code ${code}`));
      this.remove(slot);
      if (!slot.ready) this.failStart(new Error(`worker exited with code ${code} before it was ready`));
    });
    return {
      post: (message, transfer) => worker.postMessage(message, transfer),
      ref: () => worker.ref(),
      unref: () => worker.unref(),
      terminate: () => worker.terminate(),
    };
  }

  private spawnProcess(slot: Slot, answered: (msg: Answer) => void): Runner {
    const child: ChildProcess = fork(fileURLToPath(this.url), [], {
      execArgv: [...process.execArgv, ...this.opts.execArgv],
      serialization: 'advanced', // typed arrays and bigints, copied
      // stderr passed on, its start kept: why a process that cannot start ended goes in its error.
      stdio: ['ignore', 'inherit', 'pipe', 'ipc'],
      ...compileCacheEnv(),
    });
    let startOutput = '';
    const stderr = child.stderr as Socket;
    stderr.on('data', (chunk: Buffer) => {
      process.stderr.write(chunk);
      if (!slot.ready && startOutput.length < 16_384) startOutput += chunk.toString();
    });
    slot.pid = child.pid ?? null;
    this.watchMemory();
    if (this.opts.oomScoreAdj !== null && child.pid !== undefined) {
      try {
        writeFileSync(`/proc/${child.pid}/oom_score_adj`, String(this.opts.oomScoreAdj));
      } catch {
        // Not Linux, or /proc read-only: the kernel then picks by size alone.
      }
    }
    child.on('message', answered);
    child.on('error', (err) => this.fail(slot, err));
    child.on('exit', (code, signal) => {
      // Tasks it had not started (it died idle, killed to free memory, say) run in another,
      // unless the pool is closing.
      for (const [id, job] of slot.pending) {
        if (slot.started.has(id) || this.closed) continue;
        slot.pending.delete(id);
        this.queue.unshift(job);
      }
      const ended = (startError: string | null) =>
        new WorkerProcessEnded(this.opts.name, code, signal, startError, slot.stoppedFor);
      if (slot.pending.size > 0) this.fail(slot, ended(null));
      else if (!slot.ready) {
        this.remove(slot);
        // Its stderr may still hold the error when it exits: read to its end first. Killed by a
        // signal (the out-of-memory killer, while another read held the memory) it did not fail
        // to start: that is no error of its own, and the next try may work.
        const failed = () => {
          const why = signal !== null ? null : (lastErrorLine(startOutput) ?? 'see its output above');
          this.failStart(ended(why));
        };
        if (stderr.closed) failed();
        else stderr.once('close', failed);
      } else {
        this.remove(slot);
        this.dispatch();
      }
    });
    return {
      // A process that died idle fails the send; its exit hands the task to another.
      post: (message) => child.send(message, () => {}),
      ref: () => {
        child.ref();
        child.channel?.ref();
        stderr.ref();
      },
      unref: () => {
        child.unref();
        child.channel?.unref();
        stderr.unref(); // the pipe would keep this process alive as much as the child
      },
      terminate: () =>
        new Promise<void>((resolve) => {
          if (child.exitCode !== null || child.signalCode !== null) return resolve();
          child.once('exit', () => resolve());
          child.ref(); // an unreferenced child's exit would not keep the loop waiting for it
          child.kill();
        }),
    };
  }

  private answered(slot: Slot, msg: Answer): void {
    if ('ready' in msg) {
      slot.ready = true;
      this.dispatch();
      if (slot.pending.size === 0) {
        // Given nothing (started by warm(), or its tasks went to a busy worker first).
        slot.worker.unref();
        this.idleStop(slot);
      }
      return;
    }
    if ('started' in msg) {
      slot.started.add(msg.id);
      return;
    }
    const p = slot.pending.get(msg.id)?.p;
    slot.pending.delete(msg.id);
    slot.started.delete(msg.id);
    if (slot.pending.size === 0) slot.worker.unref();
    if (p) {
      if (msg.ok) p.resolve(msg.result);
      else
        p.reject(
          Object.assign(new Error(msg.error), msg.returned === undefined ? {} : { returned: msg.returned }),
        );
    }
    if (this.opts.recycleAfter > 0 && slot.tasksRun >= this.opts.recycleAfter) slot.retiring = true;
    if (slot.pending.size === 0 && this.opts.retireAboveAnonymousBytes > 0 && slot.pid !== null) {
      const rss = anonymousBytes(slot.pid);
      if (rss !== null && rss > this.opts.retireAboveAnonymousBytes) slot.retiring = true;
    }
    if (slot.retiring && slot.pending.size === 0) this.retire(slot);
    this.dispatch();
    if (slot.pending.size === 0 && !slot.retiring) this.idleStop(slot);
  }

  private get processes(): boolean {
    return this.opts.isolation === 'process';
  }

  /**
   * While child processes live: kills the largest once theirs and this process's anonymous memory
   * together pass stopAboveCombinedAnonymousBytes (one at a time: the next look sees it gone).
   */
  private watchMemory(): void {
    const ceiling = this.opts.stopAboveCombinedAnonymousBytes;
    if (ceiling <= 0 || this.memoryTimer) return;
    this.memoryTimer = setInterval(() => {
      const live = this.slots.filter((s) => s.pid !== null);
      if (live.length === 0 || this.closed) {
        clearInterval(this.memoryTimer!);
        this.memoryTimer = null;
        return;
      }
      if (live.some((s) => s.stoppedFor !== null)) return;
      const own = anonymousBytes('self');
      if (own === null) return;
      const held = live.map((slot) => ({ slot, bytes: anonymousBytes(slot.pid!) ?? 0 }));
      const total = held.reduce((sum, h) => sum + h.bytes, own);
      if (total <= ceiling) return;
      const largest = held.reduce((a, b) => (b.bytes > a.bytes ? b : a));
      const others = total - own - largest.bytes;
      largest.slot.stoppedFor =
        `it held ${mib(largest.bytes)} MiB and its parent ${mib(own)} MiB` +
        (others > 0 ? ` (its siblings ${mib(others)} MiB)` : '') +
        `, past the ${mib(ceiling)} MiB they may hold together`;
      try {
        process.kill(largest.slot.pid!, 'SIGKILL');
      } catch {
        // It ended meanwhile.
      }
    }, MEMORY_CHECK_MS);
    this.memoryTimer.unref();
  }

  /**
   * Stops a worker once it has been idle: a spare (a worker beyond the first, in a pool that starts
   * them late) after spareIdleMs, any worker after idleMs.
   */
  private idleStop(slot: Slot): void {
    const isSpare = () => this.opts.spareAfterMs > 0 && this.slots.indexOf(slot) >= 1;
    const ms = Math.min(
      isSpare() ? this.opts.spareIdleMs : Number.POSITIVE_INFINITY,
      this.opts.idleMs > 0 ? this.opts.idleMs : Number.POSITIVE_INFINITY,
    );
    if (ms === Number.POSITIVE_INFINITY) return;
    if (slot.idleTimer) clearTimeout(slot.idleTimer);
    slot.idleTimer = setTimeout(() => {
      slot.idleTimer = null;
      // A spare that became the first (the first stopped meanwhile) stays, unless idleMs says.
      if (slot.pending.size === 0 && (this.opts.idleMs > 0 || isSpare())) this.retire(slot);
    }, ms);
    slot.idleTimer.unref();
  }

  private fail(slot: Slot, err: Error): void {
    const lost = err instanceof WorkerLost ? err : new WorkerLost(err.message, { cause: err });
    for (const job of slot.pending.values()) job.p.reject(lost);
    slot.pending.clear();
    this.remove(slot);
    void slot.worker.terminate();
    if (!slot.ready) this.failStart(err);
    else this.dispatch();
  }

  /**
   * A worker ended before it was ready (its module failed to load, or it was killed starting). The
   * tasks waiting go to a worker that is ready, if any; else they fail with why, rather than each
   * starting another that may fail alike.
   */
  private failStart(err: Error): void {
    if (this.closed) return;
    if (this.readyWorkers > 0) this.dispatch();
    else for (const q of this.queue.splice(0)) q.p.reject(err);
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

  /**
   * Waits for tasks in flight, then stops every worker. Queued tasks not yet started are rejected.
   * Until the last worker has exited a timer keeps the process alive: on Node 22.15 the event loop
   * ran empty while a server's close waited here for a decoder still loading to exit (the test
   * process then ended mid-stop: 3 times in ~3,700 runs of two tenancy tests on a loaded machine,
   * the two traced both here).
   */
  async close(): Promise<void> {
    this.closed = true;
    if (this.spareTimer) clearTimeout(this.spareTimer);
    this.spareTimer = null;
    if (this.memoryTimer) clearInterval(this.memoryTimer);
    this.memoryTimer = null;
    for (const q of this.queue.splice(0)) q.p.reject(new Error('worker pool is closed'));
    const hold = setInterval(() => {}, CLOSE_HOLD_MS);
    try {
      while (this.slots.some((s) => s.pending.size > 0)) await new Promise((r) => setTimeout(r, 5));
      await Promise.all(this.slots.splice(0).map((s) => s.worker.terminate()));
    } finally {
      clearInterval(hold);
    }
  }
}

/** A process's anonymous resident memory (RssAnon), or null where /proc does not tell. */
function anonymousBytes(pid: number | 'self'): number | null {
  try {
    const m = /^RssAnon:\s+(\d+) kB/m.exec(readFileSync(`/proc/${pid}/status`, 'latin1'));
    return m ? Number(m[1]) * 1024 : null;
  } catch {
    return null;
  }
}

/**
 * The compile cache the process enabled (bin/otelake.js does) serves the workers too: a worker
 * then loads compiled code instead of stripping the types of every module again (~10 MiB of RSS
 * less per worker thread, measured with the server's four).
 */
function compileCacheEnv(): { env?: NodeJS.ProcessEnv } {
  const cache = module.getCompileCacheDir?.();
  return cache ? { env: { ...process.env, NODE_COMPILE_CACHE: cache } } : {};
}

function mib(bytes: number): number {
  return Math.round(bytes / 1048576);
}

export type TaskHandlers = Record<string, (payload: never) => unknown | Promise<unknown>>;

/**
 * Worker side: answers tasks posted by a WorkerPool. A result may be `{ value, transfer }` built
 * with `transferResult` to hand buffers back without copying.
 */
export function serveTasks(handlers: TaskHandlers): void {
  const port = taskPort();
  port.onTask(async (msg) => {
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
  port.postMessage({ ready: true });
}

/** Where tasks come from: the parent thread's port, or a child process's channel to its parent. */
function taskPort(): {
  onTask(listener: (msg: TaskMessage) => void): void;
  postMessage(message: Answer, transfer?: Transferable[]): void;
} {
  if (!isMainThread && parentPort) {
    const port = parentPort;
    return {
      onTask: (listener) => port.on('message', listener),
      postMessage: (message, transfer) => port.postMessage(message, transfer),
    };
  }
  const send = process.send?.bind(process);
  if (!send) throw new Error('serveTasks must run in a worker thread or a forked process');
  // A terminal's Ctrl-C reaches the whole process group: the parent decides when this one stops,
  // and it stops with the parent's channel (the parent exited or ended it).
  process.on('SIGINT', () => {});
  process.once('disconnect', () => process.exit(0));
  return {
    onTask: (listener) =>
      process.on('message', (msg: TaskMessage) => {
        send({ id: msg.id, started: true }); // from here on, a death fails the task
        listener(msg);
      }),
    postMessage: (message) => send(message),
  };
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
