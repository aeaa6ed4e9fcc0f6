// `otelake ship` and `otelake view --storage s3` as a user runs them (separate processes).

import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { type AddressInfo, createServer, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { readPid } from '../../src/cli/pidfile.ts';
import { renderHealth } from '../../src/cli/status.ts';
import { freePort, killQuietly, LAUNCHER, otelake, runProcess, waitFor } from '../cli/helpers.ts';
import { DAY, DAY_MS } from './helpers.ts';
import { type S3Server, startS3Server } from './s3-server.ts';

const CHILD = fileURLToPath(new URL('../fixtures/ship-child.ts', import.meta.url));

let server: S3Server;
let dir: string;
const noS3: NodeJS.ProcessEnv = {};
for (const k of Object.keys(process.env)) if (/^(S3_|CLOUD_)/.test(k)) noS3[k] = undefined;

before(async () => {
  server = await startS3Server();
  dir = await mkdtemp(join(tmpdir(), 'otelake-ship-cli-'));
  const env = { ...noS3, OTELAKE_TEST_NOW: String(DAY_MS), NODE_TEST_CONTEXT: undefined };
  for (const instance of ['cli', 'nos3']) {
    const r = await runProcess(process.execPath, [CHILD, dir, instance, 'ingest', '40'], { env });
    assert.equal(r.code, 0, r.stderr);
  }
});
after(async () => {
  await server?.stop({ removeData: true });
  await rm(dir, { recursive: true, force: true });
});

describe('otelake ship', () => {
  test('ships a day with plain progress lines and a summary; view reads it back from S3', async () => {
    const env = { ...noS3, ...server.env };
    const view = (storage: string) =>
      otelake(
        [
          'view',
          '-D',
          dir,
          '-I',
          'cli',
          '-t',
          'logs',
          '-S',
          storage,
          '-n',
          '4',
          '-s',
          'body,severity_number',
        ],
        { env },
      );
    const local = await view('local');
    assert.equal(local.code, 0, local.stderr);
    const r = await otelake(['ship', '-D', dir, '-I', 'cli', '--day', DAY], { env });
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout, new RegExp(`^${DAY}: seal$`, 'm'));
    assert.match(r.stdout, new RegExp(`^${DAY}: upload \\d+/\\d+ files`, 'm'));
    assert.match(r.stdout, /logs\s+│?\s*40\b/);
    assert.match(r.stdout, new RegExp(`day ${DAY}: shipped \\(cleaned; \\d+ files`));
    const s3 = await view('s3');
    assert.equal(s3.code, 0, s3.stderr);
    assert.equal(s3.stdout, local.stdout, 'the same rows from S3');
    assert.equal((await view('auto')).stdout, local.stdout);
    const again = await otelake(['ship', '-D', dir, '-I', 'cli', '--all'], { env });
    assert.equal(again.code, 0, again.stderr);
    assert.match(again.stdout, /nothing to ship/);
    assert.equal(existsSync(join(dir, 'cli', 'otelake.pid')), false, 'the pidfile is let go');
  });

  test('holds the instance pidfile while it ships, so that a server cannot start on the same log meanwhile', async () => {
    const env = { ...noS3, OTELAKE_TEST_NOW: String(DAY_MS), NODE_TEST_CONTEXT: undefined };
    const ingest = await runProcess(process.execPath, [CHILD, dir, 'held', 'ingest', '10'], { env });
    assert.equal(ingest.code, 0, ingest.stderr);
    // An S3 endpoint that takes connections and never answers: the upload waits on it.
    const sockets: Socket[] = [];
    const silent = createServer((socket) => sockets.push(socket));
    await new Promise<void>((ok) => silent.listen(0, '127.0.0.1', ok));
    const endpoint = `http://127.0.0.1:${(silent.address() as AddressInfo).port}`;
    const pidFile = join(dir, 'held', 'otelake.pid');
    const ship = spawn(process.execPath, [LAUNCHER, 'ship', '-D', dir, '-I', 'held', '--day', DAY], {
      env: { ...process.env, ...noS3, ...server.env, CLOUD_ENDPOINT_URL: endpoint },
      stdio: 'ignore',
    });
    try {
      await waitFor('otelake ship to hold the pidfile', async () => (await readPid(pidFile)) === ship.pid);
      const start = await otelake(['start', '-D', dir, '-I', 'held', '--port', String(await freePort())], {
        env: noS3,
      });
      assert.equal(start.code, 1, start.stdout);
      assert.match(
        start.stderr,
        new RegExp(`otelake is already running for instance 'held' \\(pid ${ship.pid}\\)`),
      );
    } finally {
      killQuietly(ship);
      for (const socket of sockets) socket.destroy();
      silent.close();
    }
  });

  test('refuses the current day, a missing flag and incomplete settings, naming the variables', async () => {
    const today = new Date().toISOString().slice(0, 10);
    const current = await otelake(['ship', '-D', dir, '-I', 'nos3', '--day', today], { env: server.env });
    assert.equal(current.code, 1);
    assert.match(current.stderr, /is the current UTC day/);
    const none = await otelake(['ship', '-D', dir, '-I', 'nos3'], { env: noS3 });
    assert.equal(none.code, 2);
    assert.match(none.stderr, /--day YYYY-MM-DD\) or --all/);
    const unset = await otelake(['ship', '-D', dir, '-I', 'nos3', '--all'], {
      env: { ...noS3, S3_BUCKET: 'b' },
    });
    assert.equal(unset.code, 1);
    assert.match(unset.stderr, /missing: accessKeyId \(CLOUD_ACCESS_KEY_ID or S3_ACCESS_KEY_ID\)/);
    const wrong = await otelake(['ship', '-D', dir, '-I', 'nos3', '--day', DAY], {
      env: { ...server.env, CLOUD_SECRET_ACCESS_KEY: 'not-the-secret-at-all' },
    });
    assert.equal(wrong.code, 1);
    assert.match(wrong.stdout, /failed at upload \(phase sealed\): .*SignatureDoesNotMatch/);
    assert.doesNotMatch(wrong.stdout + wrong.stderr, /not-the-secret-at-all/);
  });
});

test('otelake status shows the shipper', () => {
  const text = renderHealth(
    {
      status: 'ok',
      shipper: {
        enabled: true,
        configured: true,
        missing: [],
        state: 'shipping',
        day: DAY,
        step: 'upload',
        bytes_done: 3 * 1024 * 1024,
        bytes_total: 12 * 1024 * 1024,
        files_done: 4,
        files_total: 19,
        days_pending: 2,
        next_retry_at: null,
        last_shipped: { day: '2026-11-19', at: '2026-11-20T00:01:00.000Z' },
        last_error: {
          at: '2026-11-20T00:00:40.000Z',
          day: DAY,
          step: 'upload',
          message: 'cannot reach the object storage',
        },
      },
    },
    'http://127.0.0.1:4318',
    Date.parse('2026-11-21T00:00:00Z'),
    100,
  );
  assert.match(text, /state\s+│?\s*shipping 2026-11-20: upload, 3\.0 MiB of 12\.0 MiB, 4\/19 files/);
  assert.match(text, /days pending\s+│?\s*2/);
  assert.match(text, /last shipped\s+│?\s*2026-11-19/);
  assert.match(text, /last error\s+│?\s*2026-11-20T00:00:40\.000Z .*2026-11-20 upload: cannot reach/);
});
