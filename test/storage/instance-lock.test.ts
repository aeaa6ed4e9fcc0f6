// One writer per instance: a Logger holds instance.lock from its preparation to the end of its
// stop, so a program using the library cannot replay a running server's write-ahead log into the
// same tables (rows doubled, log segments deleted under the server), nor two Loggers of one process.

import assert from 'node:assert/strict';
import { cp, mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { InstanceInUseError, Logger } from '../../src/index.ts';
import { InstanceLayout } from '../../src/storage/layout.ts';
import { logsBody, startChild } from '../server/helpers/crash-loop.ts';

let dir: string;
before(async () => {
  dir = await mkdtemp(join(tmpdir(), 'otelake-lock-'));
});
after(() => rm(dir, { recursive: true, force: true }));

const open = (instanceId: string, instanceDir = dir) =>
  Logger.open({ instanceDir, instanceId, handleSignals: false, log: () => {} });

describe('instance.lock', () => {
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
