import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { siblingModule, WorkerPool, WorkerProcessEnded } from '../../src/storage/worker-pool.ts';

const url = siblingModule(import.meta.url, 'fixtures/echo-worker');

/** Starts `n` workers and waits until each has loaded (a task goes only to a loaded worker). */
async function started(pool: WorkerPool, n: number): Promise<void> {
  await Promise.all(Array.from({ length: n }, () => pool.run('echo', null)));
  while (pool.readyWorkers < n) await new Promise((r) => setTimeout(r, 5));
}

describe('WorkerPool', () => {
  it('runs tasks, transfers typed arrays both ways and reports task errors', async () => {
    const pool = new WorkerPool(url, { name: 'otelake-test', size: 2 });
    assert.deepEqual(await pool.run('echo', { a: 1n, s: 'x' }), { a: 1n, s: 'x' });
    const input = new Float64Array([1, 2.5]);
    const out = await pool.run<Float64Array>('double', input, [input.buffer]);
    assert.equal(input.length, 0, 'the input buffer moved to the worker');
    assert.deepEqual([...out], [2, 5]);
    await assert.rejects(pool.run('fail', 'bad input'), /bad input/);
    assert.equal(await pool.run('echo', 7), 7, 'a task error leaves the worker usable');
    await pool.close();
  });

  it('gives each worker the heap limits asked for, and its thread the name', async () => {
    const pool = new WorkerPool(url, {
      name: 'otelake-test',
      size: 1,
      resourceLimits: { maxYoungGenerationSizeMb: 8 },
    });
    const me = await pool.run<{ resourceLimits: { maxYoungGenerationSizeMb: number }; threadName: string }>(
      'whoami',
      null,
    );
    assert.equal(me.resourceLimits.maxYoungGenerationSizeMb, 8);
    // Node 24 gives a worker's thread its name; Node 22 names every thread `node`.
    if (Number(process.versions.node.split('.')[0]) >= 24) {
      assert.equal(me.threadName, 'otelake-test', 'the name top -H and /proc show');
    }
    await pool.close();
  });

  it('runs at most `size` tasks at once and queues the rest', async () => {
    const pool = new WorkerPool(url, { name: 'otelake-test', size: 2 });
    await started(pool, 2);
    const runs = [pool.run('slow', 100), pool.run('slow', 100), pool.run('slow', 100)];
    await new Promise((r) => setTimeout(r, 20));
    assert.equal(pool.queuedTasks, 1);
    assert.deepEqual(await Promise.all(runs), [100, 100, 100]);
    await pool.close();
  });

  it('starts a spare worker only for a task that waited spareAfterMs, and stops it once idle', async () => {
    const pool = new WorkerPool(url, { name: 'otelake-test', size: 2, spareAfterMs: 150, spareIdleMs: 300 });
    const first = (await pool.run<{ threadId: number }>('whoami', null)).threadId;
    const slow = pool.run('slow', 3000);
    const next = pool.run<{ threadId: number }>('whoami', null);
    await new Promise((r) => setTimeout(r, 50));
    assert.equal(pool.workers, 1, 'no spare before the task has waited 150 ms');
    assert.equal(pool.queuedTasks, 1);
    const spare = (await next).threadId;
    assert.notEqual(spare, first, 'the waiting task ran on a spare, not after the slow one');
    assert.equal(pool.workers, 2);
    await new Promise((r) => setTimeout(r, 600));
    assert.equal(pool.workers, 1, 'the idle spare stopped');
    assert.equal(await slow, 3000);
    assert.equal((await pool.run<{ threadId: number }>('whoami', null)).threadId, first);
    await pool.close();
  });

  it('with idleMs, every worker stops once idle, the first too; the next task starts one', async () => {
    const pool = new WorkerPool(url, { name: 'otelake-test', size: 2, idleMs: 200 });
    const [a, b] = await Promise.all([pool.run('slow', 50), pool.run('slow', 50)]);
    assert.deepEqual([a, b], [50, 50]);
    assert.equal(pool.workers, 2);
    // A task within idleMs keeps its worker: the timer starts again from its answer.
    await new Promise((r) => setTimeout(r, 120));
    const first = (await pool.run<{ threadId: number }>('whoami', null)).threadId;
    await new Promise((r) => setTimeout(r, 120));
    assert.equal(pool.workers, 1, 'the worker idle for 240 ms stopped, the one that took a task stays');
    assert.equal((await pool.run<{ threadId: number }>('whoami', null)).threadId, first);
    await new Promise((r) => setTimeout(r, 400));
    assert.equal(pool.workers, 0, 'idle for idleMs, the first stopped too');
    const next = (await pool.run<{ threadId: number }>('whoami', null)).threadId;
    assert.notEqual(next, first, 'a new worker took the next task');
    assert.equal(pool.workers, 1);
    await pool.close();
  });

  it('without idleMs the first worker stays, however long idle', async () => {
    const pool = new WorkerPool(url, { name: 'otelake-test', size: 1, spareIdleMs: 50 });
    const first = (await pool.run<{ threadId: number }>('whoami', null)).threadId;
    await new Promise((r) => setTimeout(r, 200));
    assert.equal(pool.workers, 1);
    assert.equal((await pool.run<{ threadId: number }>('whoami', null)).threadId, first);
    await pool.close();
  });

  it('a task waits for a busy loaded worker rather than for a new one to load', async () => {
    const pool = new WorkerPool(url, { name: 'otelake-test', size: 2, workerData: { loadMs: 300 } });
    await started(pool, 1);
    const first = (await pool.run<{ threadId: number }>('whoami', null)).threadId;
    const busy = pool.run('slow', 50);
    const t0 = performance.now();
    const next = pool.run<{ threadId: number }>('whoami', null);
    assert.equal(pool.workers, 2, 'a second worker is starting');
    assert.equal((await next).threadId, first, 'the loaded worker took it once free');
    assert.ok(performance.now() - t0 < 250, `answered in ${(performance.now() - t0).toFixed(0)} ms`);
    await busy;
    await pool.close();
  });

  it('a worker that cannot load fails the tasks waiting for it, and no other starts', async () => {
    const pool = new WorkerPool(url, {
      name: 'otelake-test',
      size: 2,
      workerData: { failLoad: 'no such module' },
    });
    const runs = [pool.run('echo', 1), pool.run('echo', 2)];
    for (const run of runs) await assert.rejects(run, /no such module/);
    // Both started (one per task); the second fails as it loads, later on a busy machine.
    const deadline = Date.now() + 10_000;
    while (pool.workers > 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
    assert.equal(pool.workers, 0);
    await new Promise((r) => setTimeout(r, 100));
    assert.equal(pool.workers, 0, 'none started since');
    assert.equal(pool.queuedTasks, 0);
    await pool.close();
  });

  it('a task waiting for a worker still loading keeps the process alive until it is answered', () => {
    const fixture = new URL('./fixtures/wait-for-load.ts', import.meta.url).pathname;
    const out = spawnSync(process.execPath, [...process.execArgv, fixture], {
      encoding: 'utf8',
      timeout: 30_000,
    });
    assert.equal(out.status, 0, out.stderr);
    assert.equal(out.stdout.trim(), 'answered');
  });

  it('while it closes, the pool keeps the process alive until its workers have exited, one still loading too', async () => {
    const pool = new WorkerPool(url, { name: 'otelake-test', size: 1, workerData: { loadMs: 300 } });
    pool.warm(); // loading, unreferenced: nothing waits for it
    const timers = () => process.getActiveResourcesInfo().filter((r) => r === 'Timeout').length;
    const before = timers();
    const closing = pool.close();
    assert.equal(timers(), before + 1, 'a referenced timer holds the event loop while the worker stops');
    await closing;
    assert.equal(pool.workers, 0);
    assert.equal(timers(), before, 'and is cleared once it has exited');
  });

  it('rejects the task of a worker that dies and replaces the worker', async () => {
    const pool = new WorkerPool(url, { name: 'otelake-test', size: 1 });
    await assert.rejects(pool.run('crash', null), /exited with code 3/);
    assert.equal(await pool.run('echo', 'alive'), 'alive');
    await pool.close();
  });

  it('gives every worker its workerData, and posts up to maxInFlight tasks to one worker', async () => {
    const pool = new WorkerPool(url, {
      name: 'otelake-test',
      size: 2,
      maxInFlight: 2,
      workerData: { role: 'decode' },
    });
    await started(pool, 2);
    const runs = [100, 100, 100, 100, 100].map((ms) => pool.run<number>('busy', ms));
    await new Promise((r) => setTimeout(r, 20));
    assert.equal(pool.queuedTasks, 1, 'two workers take two tasks each, the fifth waits');
    const threads = await Promise.all(runs);
    assert.equal(new Set(threads).size, 2, 'the tasks are spread over both workers');
    const who = await pool.run<{ workerData: unknown }>('whoami', null);
    assert.deepEqual(who.workerData, { role: 'decode' });
    await pool.close();
  });

  it('recycles workers after recycleAfter tasks', async () => {
    const pool = new WorkerPool(url, { name: 'otelake-test', size: 1, recycleAfter: 2 });
    const threads: number[] = [];
    for (let i = 0; i < 5; i++) threads.push((await pool.run<{ threadId: number }>('whoami', null)).threadId);
    assert.equal(threads[0], threads[1], 'a worker runs recycleAfter tasks');
    assert.notEqual(threads[1], threads[2], 'then a new worker takes over');
    assert.equal(new Set(threads).size, 3);
    await pool.close();
    await assert.rejects(pool.run('echo', 1), /closed/);
  });

  it('counts only recycleTasks toward recycleAfter', async () => {
    const pool = new WorkerPool(url, {
      name: 'otelake-test',
      size: 1,
      recycleAfter: 2,
      recycleTasks: ['echo'],
    });
    const whoami = async () => (await pool.run<{ threadId: number }>('whoami', null)).threadId;
    const first = await whoami();
    for (let i = 0; i < 4; i++) assert.equal(await whoami(), first, 'tasks not counted keep the worker');
    assert.equal(await pool.run('echo', 1), 1);
    assert.equal(await whoami(), first, 'one counted task of two');
    assert.equal(await pool.run('echo', 2), 2);
    assert.notEqual(await whoami(), first, 'the second one retires it');
    await pool.close();
  });

  it('an aborted signal takes a waiting task out of the queue and rejects a running one at once', async () => {
    const pool = new WorkerPool(url, { name: 'otelake-test', size: 1 });
    await started(pool, 1);
    const first = new AbortController();
    const second = new AbortController();
    const running = pool.run('slow', 200, [], first.signal);
    const waiting = pool.run('echo', 'never', [], second.signal);
    assert.equal(pool.queuedTasks, 1);
    second.abort(new Error('client went away'));
    await assert.rejects(waiting, /client went away/);
    assert.equal(pool.queuedTasks, 0, 'the aborted task left the queue');
    first.abort(new Error('stop'));
    await assert.rejects(running, /stop/);
    await assert.rejects(pool.run('echo', 1, [], AbortSignal.abort(new Error('already'))), /already/);
    assert.equal(await pool.run('echo', 'next'), 'next', 'the worker serves the next task');
    await pool.close();
  });

  describe('with isolation: process', () => {
    const processes = { name: 'otelake-test', size: 1, isolation: 'process' } as const;
    type Who = { pid: number; oomScoreAdj: number };
    /** Waits, without yielding to the event loop, until `pid` has ended (a zombie or gone). */
    const waitDeadSync = (pid: number): void => {
      const end = Date.now() + 5000;
      while (Date.now() < end) {
        try {
          if (/^\d+ \(.*\) Z/.test(readFileSync(`/proc/${pid}/stat`, 'latin1'))) return;
        } catch {
          return;
        }
      }
      throw new Error(`process ${pid} did not end`);
    };

    it('runs tasks in a child process, copying typed arrays and bigints, with the oom_score_adj asked for', async () => {
      const pool = new WorkerPool(url, { ...processes, oomScoreAdj: 900 });
      const who = await pool.run<Who>('pid', null);
      assert.notEqual(who.pid, process.pid);
      assert.equal(who.oomScoreAdj, 900, 'the kernel picks it before the server when memory runs out');
      assert.deepEqual(await pool.run('echo', { a: 1n, s: 'x' }), { a: 1n, s: 'x' });
      assert.deepEqual([...(await pool.run<Float64Array>('double', new Float64Array([1, 2.5])))], [2, 5]);
      await assert.rejects(pool.run('fail', 'bad input'), /bad input/);
      assert.equal((await pool.run<Who>('pid', null)).pid, who.pid, 'a task error leaves the process usable');
      await pool.close();
      assert.throws(() => process.kill(who.pid, 0), 'close stops the process');
    });

    it('an idle child process, never closed, does not keep this process alive', () => {
      const fixture = new URL('./fixtures/exit-idle.ts', import.meta.url).pathname;
      const out = spawnSync(process.execPath, [...process.execArgv, fixture], {
        encoding: 'utf8',
        timeout: 20_000, // the child stays idle for good (idleMs 0): only a hang reaches this
      });
      assert.equal(out.status, 0, `${out.signal ?? ''} ${out.stderr}`);
      assert.equal(out.stdout.trim(), 'answered');
    });

    it('a process that cannot start fails the tasks waiting for it with the error it printed', async () => {
      process.env.OTELAKE_TEST_FAIL_LOAD = "Cannot find module 'a-native-package'";
      const pool = new WorkerPool(url, processes);
      try {
        const err = await pool.run('echo', 1).then(
          () => null,
          (e: unknown) => e,
        );
        assert.ok(err instanceof WorkerProcessEnded, String(err));
        assert.match(
          err.message,
          /^the otelake-test process could not start \(exit code 1\): Error: Cannot find module 'a-native-package'$/,
        );
        assert.equal(err.startError, "Error: Cannot find module 'a-native-package'");
      } finally {
        delete process.env.OTELAKE_TEST_FAIL_LOAD;
        await pool.close();
      }
    });

    it('a process killed before it is ready (out of memory) is no start failure: the next task gets a new one', async () => {
      const pidFile = join(tmpdir(), `otelake-test-pid-${process.pid}`);
      process.env.OTELAKE_TEST_PID_FILE = pidFile;
      process.env.OTELAKE_TEST_LOAD_MS = '20000';
      const pool = new WorkerPool(url, processes);
      try {
        const waiting = pool.run('echo', 1).then(
          () => null,
          (e: unknown) => e,
        );
        const pidOf = async () => Number(await readFile(pidFile, 'utf8').catch(() => '0'));
        while ((await pidOf()) === 0) await new Promise((r) => setTimeout(r, 20));
        const pid = await pidOf();
        delete process.env.OTELAKE_TEST_LOAD_MS;
        process.kill(pid, 'SIGKILL'); // as the kernel's out-of-memory killer does
        const err = await waiting;
        assert.ok(err instanceof WorkerProcessEnded, String(err));
        assert.equal(err.signal, 'SIGKILL');
        assert.equal(
          err.startError,
          null,
          'not a process that cannot start (the read API answers 503, not 500)',
        );
        assert.match(err.message, /killed \(SIGKILL\).*out-of-memory/);
        assert.equal(await pool.run('echo', 2), 2);
      } finally {
        delete process.env.OTELAKE_TEST_PID_FILE;
        delete process.env.OTELAKE_TEST_LOAD_MS;
        await rm(pidFile, { force: true });
        await pool.close();
      }
    });

    it('a process killed during its task fails that task alone, saying so; the next runs in a new one', async () => {
      const pool = new WorkerPool(url, processes);
      const { pid } = await pool.run<Who>('pid', null);
      const slow = pool.run('slow', 5000);
      await new Promise((r) => setTimeout(r, 100));
      process.kill(pid, 'SIGKILL'); // as the kernel's out-of-memory killer does
      const err = await slow.then(
        () => assert.fail('the task of a killed process resolved'),
        (e: unknown) => e,
      );
      assert.ok(err instanceof WorkerProcessEnded);
      assert.equal(err.signal, 'SIGKILL');
      assert.match(err.message, /killed \(SIGKILL\).*out-of-memory/);
      const next = await pool.run<Who>('pid', null);
      assert.notEqual(next.pid, pid);
      await pool.close();
    });

    it('a task sent to a process that died idle runs in a new one instead of failing', async () => {
      const pool = new WorkerPool(url, processes);
      const { pid } = await pool.run<Who>('pid', null);
      process.kill(pid, 'SIGKILL');
      waitDeadSync(pid); // dead before this process has heard of it: the task goes to its pipe
      const next = await pool.run<Who>('pid', null);
      assert.notEqual(next.pid, pid);
      await pool.close();
    });

    it("a process whose memory and this process's pass stopAboveCombinedAnonymousBytes is stopped, its task told why", async () => {
      const own =
        Number(/^RssAnon:\s+(\d+) kB/m.exec(readFileSync('/proc/self/status', 'latin1'))![1]) * 1024;
      const pool = new WorkerPool(url, {
        ...processes,
        stopAboveCombinedAnonymousBytes: own + 200 * 1024 * 1024,
      });
      try {
        const small = await pool.run<number>('hold', 16);
        const err = await pool.run('holdAndWait', { mib: 300, ms: 20_000 }).then(
          () => assert.fail('a process past the bound answered'),
          (e: unknown) => e,
        );
        assert.ok(err instanceof WorkerProcessEnded, String(err));
        assert.equal(err.signal, 'SIGKILL');
        assert.equal(err.startError, null);
        assert.match(
          err.message,
          /^the otelake-test process was stopped: it held (\d+) MiB and its parent \d+ MiB, past the \d+ MiB they may hold together, as the task needed more memory than the limit left it$/,
        );
        assert.ok(Number(/it held (\d+) MiB/.exec(err.message)![1]) >= 200, err.message);
        const next = await pool.run<number>('hold', 16);
        assert.notEqual(next, small, 'the next task runs in a new process');
      } finally {
        await pool.close();
      }
    });

    it('a process stops once idle, and once a task leaves it above retireAboveAnonymousBytes', async () => {
      const pool = new WorkerPool(url, {
        ...processes,
        idleMs: 200,
        retireAboveAnonymousBytes: 256 * 1024 * 1024,
      });
      const small = await pool.run<number>('hold', 16);
      assert.equal(await pool.run<number>('hold', 16), small, 'below the bound it stays');
      const big = await pool.run<number>('hold', 300);
      assert.equal(big, small);
      assert.notEqual((await pool.run<Who>('pid', null)).pid, big, 'holding 332 MiB, it was replaced');
      assert.equal(pool.workers, 1);
      await new Promise((r) => setTimeout(r, 500));
      assert.equal(pool.workers, 0, 'idle for idleMs, the only process stopped too');
      await pool.close();
    });
  });
});
