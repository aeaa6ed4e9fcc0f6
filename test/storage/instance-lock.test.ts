// One writer per instance: a Logger holds instance.lock from its preparation to the end of its
// stop, so a program using the library cannot replay a running server's write-ahead log into the
// same tables (rows doubled, log segments deleted under the server), nor two Loggers of one process.

import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { cp, mkdir, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { InstanceInUseError, Logger } from '../../src/index.ts';
import { InstanceLayout } from '../../src/storage/layout.ts';
import { claimLock } from '../../src/storage/process-lock.ts';
import { logsBody, startChild } from '../server/helpers/crash-loop.ts';

let dir: string;
before(async () => {
  dir = await mkdtemp(join(tmpdir(), 'otelake-lock-'));
});
after(() => rm(dir, { recursive: true, force: true }));

const open = (instanceId: string, instanceDir = dir) =>
  Logger.open({ instanceDir, instanceId, handleSignals: false, log: () => {} });

/** Runs an ES module script in a new node process: what it printed. */
function runScript(script: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--input-type=module', '-e', script], {
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    let out = '';
    child.stdout.on('data', (c: Buffer) => {
      out += c.toString();
    });
    child.on('error', reject);
    child.on('exit', () => resolve(out));
  });
}

describe('instance.lock', () => {
  it('an empty lock, its maker still writing it, is not taken for a stale one', async () => {
    const maker = spawn(process.execPath, ['-e', 'setTimeout(() => {}, 10000)'], { stdio: 'ignore' });
    try {
      const file = join(dir, 'being-written', 'instance.lock');
      await mkdir(dirname(file), { recursive: true });
      await writeFile(file, ''); // made with O_EXCL, not yet written
      const claiming = claimLock(file);
      await new Promise((r) => setTimeout(r, 100));
      await writeFile(file, `${maker.pid} \n`);
      assert.deepEqual(await claiming, { held: false, holder: maker.pid });
    } finally {
      maker.kill();
    }
  });

  it('a lock whose process is gone is taken over by one process alone, however many start at once', async () => {
    // The id of a process that has ended: a lock it left after a crash.
    const gone = await runScript('process.stdout.write(String(process.pid))');
    const lockModule = new URL('../../src/storage/process-lock.ts', import.meta.url).href;
    for (let round = 0; round < 8; round++) {
      const file = join(dir, `stale-${round}`, 'instance.lock');
      await mkdir(dirname(file), { recursive: true });
      await writeFile(file, `${gone} \n`);
      const at = Date.now() + 1500; // every process claims at the same moment, once loaded
      const script =
        `import { claimLock } from ${JSON.stringify(lockModule)};` +
        `while (Date.now() < ${at}) await new Promise((r) => setTimeout(r, 1));` +
        `const c = await claimLock(${JSON.stringify(file)});` +
        "process.stdout.write(c.held ? 'held' : `refused`);" +
        'await new Promise((r) => setTimeout(r, 1000));'; // alive while the others look
      const outcomes = await Promise.all([1, 2, 3, 4].map(() => runScript(script)));
      assert.deepEqual(outcomes.toSorted(), ['held', 'refused', 'refused', 'refused'], `round ${round}`);
      assert.deepEqual((await readdir(dirname(file))).sort(), ['instance.lock'], 'no file left beside it');
    }
  });

  it('a second Logger of this process on the instance is refused until the first has stopped', async () => {
    const first = await open('twice');
    const lock = new InstanceLayout(dir, 'twice').instanceLock;
    assert.equal((await readFile(lock, 'utf8')).split(' ')[0], String(process.pid));
    await assert.rejects(open('twice'), (err: unknown) => {
      assert.ok(err instanceof InstanceInUseError);
      assert.match(err.message, /a Logger of this process already runs instance/);
      return true;
    });
    // The refused one left the lock alone.
    assert.equal((await readFile(lock, 'utf8')).split(' ')[0], String(process.pid));
    await first.stop();
    await assert.rejects(readFile(lock), { code: 'ENOENT' }, 'released at the end of the stop');
    const next = await open('twice');
    await next.stop();
  });

  it("a server's instance is refused to the library, and taken once the server is gone, its rows written once", async () => {
    const server = await startChild(dir, 'served', {
      aggregator_config: { max_age_s: 60, min_batch_rows: 100_000, max_batch_rows: 100_000 },
    });
    let exited = false;
    try {
      const res = await fetch(`${server.url}/v1/logs`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-project-id': 'lock' },
        body: logsBody('b', 10),
      });
      assert.equal(res.status, 200);
      await assert.rejects(open('served'), (err: unknown) => {
        assert.ok(err instanceof InstanceInUseError);
        assert.match(err.message, new RegExp(`in use by process ${server.child.pid} `));
        return true;
      });
      // The server crashes: its lock names a process that is gone.
      server.child.kill('SIGKILL');
      await server.exited;
      exited = true;
      const logger = await open('served');
      await logger.stop();
      const rows = await logger.read('logs', { projectId: 'lock', select: ['body'] });
      assert.deepEqual(
        rows.map((r) => r['body']).sort(),
        Array.from({ length: 10 }, (_, i) => `b-r${i}`).sort(),
      );
    } finally {
      if (!exited) {
        server.child.kill('SIGKILL');
        await server.exited;
      }
    }
  });

  it("a copy of a running instance's folder (its lock naming this process) opens", async () => {
    const running = await open('original');
    await cp(join(dir, 'original'), join(dir, 'copy'), { recursive: true });
    const copy = await open('copy');
    await copy.stop();
    await running.stop();
  });
});
