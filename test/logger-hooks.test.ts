import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { Logger } from '../src/index.ts';

const CHILD = fileURLToPath(new URL('./fixtures/logger-child.ts', import.meta.url));
let dir: string;
before(async () => {
  dir = await mkdtemp(join(tmpdir(), 'otelake-hooks-'));
});
after(async () => {
  await rm(dir, { recursive: true, force: true });
});

function run(instanceDir: string, rows: number, mode: 'signal' | 'exit', instances = 1) {
  const child = spawn(process.execPath, [CHILD, instanceDir, String(rows), mode, String(instances)], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const ingested = new Promise<void>((resolve) => {
    child.stdout.on('data', (d) => {
      if (String(d).includes('ingested')) resolve();
    });
  });
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.on('exit', (code, signal) => resolve({ code, signal })),
  );
  return { child, ingested, exited };
}

async function storedRows(instanceDir: string, instanceId = 'hooks'): Promise<number> {
  const reader = new Logger({
    instanceDir,
    instanceId,
    handleSignals: false,
    options: { auto_start: false },
  });
  await reader.ready;
  const rows = await reader.readLogs({ select: ['body'] });
  await reader.stop();
  return rows.length;
}

describe('Logger process hooks', () => {
  it('install_signal_handlers: SIGTERM flushes the pending rows, then the signal ends the process', async () => {
    const d = join(dir, 'signal');
    const p = run(d, 250, 'signal');
    await p.ingested;
    p.child.kill('SIGTERM');
    const { signal } = await p.exited;
    assert.equal(signal, 'SIGTERM', 'the process still ends by the signal it got');
    assert.equal(await storedRows(d), 250, 'rows waiting for their batch were written first');
  });

  it('one SIGTERM, two Loggers: the process ends once both have flushed', async () => {
    const d = join(dir, 'two');
    const p = run(d, 5000, 'signal', 2);
    await p.ingested;
    p.child.kill('SIGTERM');
    const { signal } = await p.exited;
    assert.equal(signal, 'SIGTERM');
    // Without a write-ahead log (the child's option here), a row not flushed would be lost.
    assert.equal(await storedRows(d, 'hooks'), 5000);
    assert.equal(await storedRows(d, 'hooks-2'), 5000);
  });

  it('atexit_hook: rows still pending when the process runs out of work are written before it exits', async () => {
    const d = join(dir, 'exit');
    const p = run(d, 120, 'exit');
    const { code } = await p.exited;
    assert.equal(code, 0);
    assert.equal(await storedRows(d), 120);
  });
});
