// Graceful shutdown: runServer in a child process takes requests, gets SIGTERM while requests are
// in flight and rows are still held in memory, and exits 0; reopening the instance shows every
// row of every request answered 200.

import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { after, test } from 'node:test';
import { Logger } from '../../src/index.ts';
import { closeReadWorkers } from '../../src/read/index.ts';
import { getJson } from './helpers/harness.ts';

const CHILD = new URL('./helpers/run-server.ts', import.meta.url).pathname;

after(() => closeReadWorkers());

function logsBody(batch: number, size: number): string {
  return JSON.stringify({
    resourceLogs: [
      {
        resource: { attributes: [{ key: 'service.name', value: { stringValue: 'shutdown-test' } }] },
        scopeLogs: [
          {
            logRecords: Array.from({ length: size }, (_, i) => ({
              timeUnixNano: String(1_700_000_000_000_000_000n + BigInt(batch * size + i)),
              body: { stringValue: `b${batch}-r${i}` },
            })),
          },
        ],
      },
    ],
  });
}

test('SIGTERM: requests in flight finish, held rows are flushed, exit code 0, nothing accepted is lost', async () => {
  const dir = await mkdtemp(join(tmpdir(), 'otelake-sigterm-'));
  try {
    // Batches that never fill and a long max age: only the shutdown flush writes these rows.
    const options = {
      aggregator_config: { max_age_s: 300, min_batch_rows: 1_000_000, max_batch_rows: 1_000_000 },
      producer_config: { max_queue_size: 1_000_000 },
    };
    const child = spawn(process.execPath, [CHILD, dir, 'sig', JSON.stringify(options)], {
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
    const messages: string[] = [];
    const url = await new Promise<string>((resolve, reject) => {
      createInterface({ input: child.stdout! }).on('line', (line) => {
        const msg = (JSON.parse(line) as { msg: string }).msg;
        messages.push(msg);
        const m = /listening on (http:\/\/\S+)/.exec(msg);
        if (m) resolve(m[1]!);
      });
      child.on('exit', () => reject(new Error(`server exited early: ${messages.join(' | ')}`)));
    });

    const size = 50;
    const accepted: number[] = [];
    let batch = 0;
    const send = async (b: number) => {
      try {
        const res = await fetch(`${url}/v1/logs`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', 'x-project-id': 'sig' },
          body: logsBody(b, size),
        });
        await res.arrayBuffer();
        if (res.status === 200) accepted.push(b);
      } catch {
        // Connection refused or closed once the server stops listening: not accepted.
      }
    };
    for (let i = 0; i < 20; i++) await send(batch++);
    const health = (await getJson(`${url}/healthz`)).body;
    assert.equal(health.aggregator.rows_written, 0, 'nothing written before the signal');
    assert.equal(health.producer.accepted, 20 * size);

    // Keep 8 clients sending while the signal arrives.
    let stop = false;
    const clients = Array.from({ length: 8 }, async () => {
      while (!stop) await send(batch++);
    });
    await new Promise((r) => setTimeout(r, 100));
    child.kill('SIGTERM');
    const code = await exited;
    stop = true;
    await Promise.all(clients);
    assert.equal(code, 0, messages.join(' | '));
    assert.ok(messages.some((m) => /SIGTERM: stopping/.test(m)));
    assert.ok(messages.some((m) => /stopped cleanly/.test(m)));
    assert.ok(accepted.length > 20, `accepted ${accepted.length} requests`);

    const logger = await Logger.open({ instanceId: 'sig', instanceDir: dir, handleSignals: false });
    try {
      const rows = await logger.read('logs', { projectId: 'sig', select: ['body'] });
      const stored = new Set(rows.map((r) => r['body'] as string));
      const expected = accepted.flatMap((b) => Array.from({ length: size }, (_, i) => `b${b}-r${i}`));
      for (const body of expected) assert.ok(stored.has(body), `row ${body} was accepted but not stored`);
      assert.equal(rows.length, expected.length, 'no row stored twice or from a refused request');
    } finally {
      await logger.stop({ flush: 'none' });
    }
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});

test('only loopback hosts count as loopback (the server warns about the others)', async () => {
  const { isLoopback } = await import('../../src/server/index.ts');
  for (const h of ['127.0.0.1', '127.1.2.3', 'localhost', '::1']) assert.equal(isLoopback(h), true, h);
  for (const h of ['0.0.0.0', '::', '192.168.1.10', 'example.com', '128.0.0.1'])
    assert.equal(isLoopback(h), false, h);
});
