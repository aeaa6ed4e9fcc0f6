// A process killed between any two phases (or in the middle of the upload): the next start of the
// instance finishes the day from its last recorded phase, with equal counts.

import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { runProcess } from '../cli/helpers.ts';
import { DAY, DAY_MS, NEXT_DAY_MS, phaseLines, phases, remoteTables } from './helpers.ts';
import { type S3Server, startS3Server } from './s3-server.ts';

const CHILD = fileURLToPath(new URL('../fixtures/ship-child.ts', import.meta.url));
const ROWS = 120;

let server: S3Server;
let dir: string;

before(async () => {
  server = await startS3Server();
  dir = await mkdtemp(join(tmpdir(), 'otelake-resume-'));
});
after(async () => {
  await server?.stop({ removeData: true });
  await rm(dir, { recursive: true, force: true });
});

function child(instance: string, now: number, ...args: string[]) {
  const env: NodeJS.ProcessEnv = {
    ...server.env,
    OTELAKE_TEST_NOW: String(now),
    NODE_TEST_CONTEXT: undefined,
  };
  return runProcess(process.execPath, [CHILD, dir, instance, ...args], { env, timeoutMs: 60_000 });
}

describe('resume after a kill', () => {
  for (const killAfter of ['open', 'sealed', 'upload', 'uploaded', 'verified']) {
    test(`killed ${killAfter === 'upload' ? 'in the middle of the upload' : `after ${killAfter}`}: the next start finishes the day`, async () => {
      const instance = `kill-${killAfter}`;
      const ingest = await child(instance, DAY_MS, 'ingest', String(ROWS));
      assert.equal(ingest.code, 0, ingest.stderr);
      if (killAfter !== 'open') {
        const killed = await child(instance, NEXT_DAY_MS, 'ship', killAfter);
        assert.equal(killed.signal, 'SIGKILL', killed.stderr);
      }
      const index = join(dir, instance, 'index', 'days.jsonl');
      const before = await phases(index);
      const resumed = await child(instance, NEXT_DAY_MS, 'resume');
      assert.equal(resumed.code, 0, resumed.stderr);
      const stats = JSON.parse(resumed.stdout.trim());
      assert.equal(stats.last_shipped.day, DAY, resumed.stdout);
      const after = await phases(index);
      // Resumed from where it stopped: no phase recorded twice.
      assert.deepEqual(after.slice(0, before.length), before);
      assert.deepEqual(after, ['open', 'sealed', 'uploaded', 'verified', 'cleaned']);
      const sealed = (await phaseLines(index)).find((l) => l.phase === 'sealed')!.tables!;
      assert.equal(sealed['logs']!.rows, ROWS);
      const remote = await remoteTables(server.env, instance);
      for (const [t, s] of Object.entries(sealed))
        assert.deepEqual(remote[t], { rows: s.rows, version: s.version }, t);
      assert.equal(existsSync(join(dir, instance, 'staging', 'days', DAY)), false);
    });
  }
});
