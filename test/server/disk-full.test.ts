// A full disk, for real: the server's instance lives on a small tmpfs (mounting one needs root,
// as CI has; elsewhere the fault-injection tests of test/wal and test/pipeline cover the same
// paths). Clients retry 503s like the Collector does. While the disk is full, requests get 503
// with Retry-After and /healthz turns degraded; once room comes back everything lands, and every
// acknowledged row is stored exactly once.

import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdir, mkdtemp, open, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, type TestContext, test } from 'node:test';
import { Logger } from '../../src/index.ts';
import { closeReadWorkers } from '../../src/read/index.ts';
import { logsBody, startChild } from './helpers/crash-loop.ts';
import { getJson } from './helpers/harness.ts';

after(() => closeReadWorkers());

/** Mounts a tmpfs of `mb` MiB at `dir`; false when this process may not. */
function mountTmpfs(dir: string, mb: number): boolean {
  if (process.getuid?.() !== 0) return false;
  try {
    execFileSync('mount', ['-t', 'tmpfs', '-o', `size=${mb}m`, 'tmpfs', dir], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

/**
 * A tmpfs of `mb` MiB mounted at `<base>/disk` in a new temporary folder; null (the test skipped)
 * when this process may not mount one.
 */
async function smallDisk(t: TestContext, mb: number): Promise<{ base: string; disk: string } | null> {
  const base = await mkdtemp(join(tmpdir(), 'otelake-full-'));
  const disk = join(base, 'disk');
  await mkdir(disk);
  if (mountTmpfs(disk, mb)) return { base, disk };
  t.skip('mounting a tmpfs needs root');
  await rm(base, { recursive: true, force: true });
  return null;
}

/** Writes `path` until the file system is full. */
async function fill(path: string): Promise<void> {
  const fh = await open(path, 'w');
  const chunk = Buffer.alloc(1024 * 1024);
  try {
    for (;;) await fh.write(chunk);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOSPC') throw err;
  } finally {
    await fh.close();
  }
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function until(what: string, cond: () => Promise<boolean> | boolean, ms = 60_000): Promise<void> {
  const end = Date.now() + ms;
  while (!(await cond())) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await sleep(100);
  }
}

test('disk full: 503 + Retry-After and degraded while writes fail; everything lands once room returns', async (t) => {
  const mounted = await smallDisk(t, 48);
  if (mounted === null) return;
  const { base, disk } = mounted;
  let server: Awaited<ReturnType<typeof startChild>> | null = null;
  let stop = false;
  try {
    server = await startChild(disk, 'full', {});
    const { url, child, exited, log } = server;
    const acknowledged: string[] = [];
    const refusals: { status: number; retryAfter: string | null; message: string }[] = [];
    const errors: string[] = [];
    let batch = 0;
    // Each client sends a request until it is answered 200, then the next one.
    const client = async () => {
      while (!stop) {
        const tag = `b${batch++}`;
        const size = 50 + Math.floor(Math.random() * 150);
        while (!stop) {
          let res: Response;
          let text: string;
          try {
            res = await fetch(`${url}/v1/logs`, {
              signal: AbortSignal.timeout(30_000),
              method: 'POST',
              headers: { 'content-type': 'application/json', 'x-project-id': 'full' },
              body: logsBody(tag, size),
            });
            text = await res.text();
          } catch (err) {
            errors.push(`${new Date().toISOString()} ${String((err as Error).cause ?? err)}`);
            await sleep(50);
            continue;
          }
          if (res.status === 200) {
            for (let i = 0; i < size; i++) acknowledged.push(`${tag}-r${i}`);
            break;
          }
          refusals.push({ status: res.status, retryAfter: res.headers.get('retry-after'), message: text });
          await sleep(50);
        }
      }
    };
    const clients = Array.from({ length: 4 }, client);
    await until(
      'some rows written',
      async () => (await getJson(`${url}/healthz`)).body.aggregator.rows_written > 0,
    );

    // Fill the disk.
    const ballast = join(disk, 'ballast');
    await fill(ballast);
    let degraded = null as { status: string; problems: string[] } | null;
    await until('the server to report the full disk', async () => {
      const h = (await getJson(`${url}/healthz`)).body;
      if (h.status === 'degraded') degraded = h;
      return degraded !== null && refusals.length > 0;
    });
    assert.ok(degraded);
    assert.match(degraded!.problems.join(' '), /ENOSPC|no space/i, degraded!.problems.join(' '));
    assert.ok(
      refusals.every((r) => r.status === 503 && r.retryAfter === '1'),
      JSON.stringify(refusals[0]),
    );
    await until('a refusal that says why', () => refusals.some((r) => /ENOSPC|no space/i.test(r.message)));
    const ackedWhileFull = acknowledged.length;
    await sleep(1000);

    // Room again: the kept batches land, ingest resumes, the status turns ok.
    await rm(ballast);
    await until('ok again', async () => (await getJson(`${url}/healthz`)).body.status === 'ok');
    await until('new requests acknowledged', () => acknowledged.length > ackedWhileFull + 1000);
    stop = true;
    await Promise.all(clients);
    assert.deepEqual(errors, [], 'every request is answered');
    child.kill('SIGTERM');
    assert.equal(await exited, 0, log.join('\n'));
    assert.ok(
      log.some((l) => /are failing/.test(l) && /ENOSPC|no space/i.test(l)),
      'an error line says which writes fail and why',
    );

    const logger = await Logger.open({ instanceId: 'full', instanceDir: disk, handleSignals: false });
    try {
      await logger.stop();
      const rows = await logger.read('logs', { projectId: 'full', select: ['body'], maxRows: 10_000_000 });
      const counts = new Map<string, number>();
      for (const row of rows) counts.set(row['body'] as string, (counts.get(row['body'] as string) ?? 0) + 1);
      const missing = acknowledged.filter((b) => !counts.has(b));
      assert.deepEqual(
        missing.slice(0, 5),
        [],
        `${missing.length} of ${acknowledged.length} acknowledged rows missing`,
      );
      assert.equal(rows.length, acknowledged.length, 'no row stored twice, none of a refused request');
    } finally {
      await logger.stop();
    }
  } catch (err) {
    // The server's own lines explain most failures.
    throw new Error(`${(err as Error).stack}\nserver log:\n${server?.log.slice(-20).join('\n')}`);
  } finally {
    stop = true;
    if (server && server.child.exitCode === null) {
      server.child.kill('SIGKILL');
      await server.exited;
    }
    execFileSync('umount', [disk]);
    await rm(base, { recursive: true, force: true });
  }
});

test('a server restarted while the disk is full starts (its options unsaved), replays, and lands every row once room returns', async (t) => {
  const mounted = await smallDisk(t, 32);
  if (mounted === null) return;
  const { base, disk } = mounted;
  let server: Awaited<ReturnType<typeof startChild>> | null = null;
  try {
    server = await startChild(disk, 'restart', {});
    const acknowledged: string[] = [];
    for (let i = 0; i < 20; i++) {
      const res = await fetch(`${server.url}/v1/logs`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-project-id': 'restart' },
        body: logsBody(`b${i}`, 100),
      });
      assert.equal(res.status, 200, await res.text());
      for (let r = 0; r < 100; r++) acknowledged.push(`b${i}-r${r}`);
    }
    const ballast = join(disk, 'ballast');
    await fill(ballast);
    server.child.kill('SIGKILL');
    await server.exited;

    // Other options than those saved: the start tries to save them, cannot, and runs with them.
    server = await startChild(disk, 'restart', { aggregator_config: { max_age_s: 2 } });
    const { url } = server;
    assert.equal((await getJson(`${url}/healthz`)).status, 200);
    assert.ok(
      server.log.some((l) => /cannot save the options/.test(l) && /ENOSPC|no space/i.test(l)),
      server.log.join('\n'),
    );
    await rm(ballast);
    await until('ok again', async () => (await getJson(`${url}/healthz`)).body.status === 'ok');
    server.child.kill('SIGTERM');
    assert.equal(await server.exited, 0, server.log.join('\n'));

    const logger = await Logger.open({ instanceId: 'restart', instanceDir: disk, handleSignals: false });
    try {
      await logger.stop();
      const rows = await logger.read('logs', { projectId: 'restart', select: ['body'], maxRows: 100_000 });
      assert.deepEqual(rows.map((r) => r['body']).sort(), [...acknowledged].sort());
    } finally {
      await logger.stop();
    }
  } catch (err) {
    throw new Error(`${(err as Error).stack}\nserver log:\n${server?.log.slice(-20).join('\n')}`);
  } finally {
    if (server && server.child.exitCode === null) {
      server.child.kill('SIGKILL');
      await server.exited;
    }
    execFileSync('umount', [disk]);
    await rm(base, { recursive: true, force: true });
  }
});
