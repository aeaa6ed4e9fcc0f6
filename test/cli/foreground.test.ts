// `otelake start --foreground` (in this terminal, until Ctrl+C) and `--foreground --reload` (a
// supervisor restarting the server when the code changes), spawned as a user would.

import assert from 'node:assert/strict';
import { type ChildProcessWithoutNullStreams, spawn, spawnSync } from 'node:child_process';
import { closeSync, existsSync, openSync } from 'node:fs';
import { readFile, stat, utimes } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { stripVTControlCharacters } from 'node:util';
import { SERVER_ENV, SERVER_NODE_FLAGS } from '../../src/server/node-flags.ts';
import { alive, freePort, killQuietly, LAUNCHER, tempDir, waitFor } from './helpers.ts';

function startForeground(
  args: string[],
  cwd: string,
): { child: ChildProcessWithoutNullStreams; output: () => string } {
  const child = spawn(process.execPath, [LAUNCHER, 'start', '--foreground', ...args], { cwd });
  let text = '';
  child.stdout.setEncoding('utf8').on('data', (d: string) => {
    text += d;
  });
  child.stderr.setEncoding('utf8').on('data', (d: string) => {
    text += d;
  });
  return { child, output: () => text };
}

async function healthPid(port: number): Promise<number | null> {
  try {
    const res = await fetch(`http://127.0.0.1:${port}/healthz`, { signal: AbortSignal.timeout(5000) });
    return ((await res.json()) as { pid: number }).pid;
  } catch {
    return null;
  }
}

const exited = (child: ChildProcessWithoutNullStreams) =>
  new Promise<number | null>((done) => {
    if (child.exitCode !== null) done(child.exitCode);
    else child.once('exit', (code) => done(code));
  });

describe('start --foreground', () => {
  let dir: { path: string; remove: () => Promise<void> };
  const children: ChildProcessWithoutNullStreams[] = [];
  const pids: number[] = [];
  before(async () => {
    dir = await tempDir('fg');
  });
  after(async () => {
    for (const c of children) killQuietly(c);
    for (const p of pids) killQuietly(p);
    await dir.remove();
  });

  test('serves in this terminal, holds the pidfile, and stops cleanly on Ctrl+C (SIGINT)', async () => {
    const port = await freePort();
    const fg = startForeground(['-H', '127.0.0.1', '-P', String(port)], dir.path);
    children.push(fg.child);
    await waitFor('the server to answer', async () => (await healthPid(port)) !== null);
    assert.equal(await healthPid(port), fg.child.pid);
    if (process.platform === 'linux') {
      // Started without the server's Node flags and malloc settings, the same process took them on.
      const pid = fg.child.pid!;
      const cmdline = (await readFile(`/proc/${pid}/cmdline`, 'utf8')).split('\0');
      for (const flag of SERVER_NODE_FLAGS) assert.ok(cmdline.includes(flag), `${flag} in ${cmdline}`);
      const environ = (await readFile(`/proc/${pid}/environ`, 'utf8')).split('\0');
      for (const [k, v] of Object.entries(SERVER_ENV)) assert.ok(environ.includes(`${k}=${v}`), `${k}=${v}`);
    }
    const pidFile = join(dir.path, 'svc_data', 'default', 'otelake.pid');
    assert.equal(Number((await readFile(pidFile, 'utf8')).trim()), fg.child.pid);
    assert.match(fg.output(), new RegExp(`listening on http://127\\.0\\.0\\.1:${port}`));

    fg.child.kill('SIGINT');
    assert.equal(await exited(fg.child), 0, fg.output());
    assert.match(fg.output(), /stopped cleanly/);
    await assert.rejects(stat(pidFile), { code: 'ENOENT' });
    // Not on a terminal: JSON lines, for log collectors.
    for (const line of fg.output().trim().split('\n')) assert.doesNotThrow(() => JSON.parse(line), line);
  });

  test('a signal while the server starts is kept: the server starts, then stops cleanly', async () => {
    const port = await freePort();
    const fg = startForeground(['-I', 'starting', '-H', '127.0.0.1', '-P', String(port)], dir.path);
    children.push(fg.child);
    // The pidfile is claimed before the server starts (modules, the log, the workers, the port):
    // the signal comes while it does.
    const pidFile = join(dir.path, 'svc_data', 'starting', 'otelake.pid');
    while (!existsSync(pidFile)) {
      assert.equal(fg.child.exitCode, null, fg.output());
      await new Promise((r) => setTimeout(r, 2));
    }
    fg.child.kill('SIGTERM');
    assert.equal(await exited(fg.child), 0, fg.output());
    assert.match(fg.output(), /SIGTERM: stopping/);
    assert.match(fg.output(), /stopped cleanly/);
    await assert.rejects(stat(pidFile), { code: 'ENOENT' });
  });

  test('a connection answered before its body was read (413) does not cut the stop on SIGTERM short', async () => {
    const port = await freePort();
    const fg = startForeground(['-I', 'early', '-H', '127.0.0.1', '-P', String(port)], dir.path);
    children.push(fg.child);
    await waitFor('the server to answer', async () => (await healthPid(port)) !== null);
    // Announces a body over the limit: answered at once, the connection then lingers half-closed.
    const { connect } = await import('node:net');
    const socket = connect({ host: '127.0.0.1', port });
    socket.on('error', () => {});
    socket.write(
      'POST /v1/logs HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n' +
        `Content-Length: ${128 * 1024 * 1024}\r\n\r\n`,
    );
    socket.write(Buffer.alloc(64 * 1024));
    const answer = await new Promise<string>((done) => socket.once('data', (d) => done(String(d))));
    assert.match(answer, /^HTTP\/1\.1 413 /);

    fg.child.kill('SIGTERM');
    assert.equal(await exited(fg.child), 0, fg.output());
    assert.match(fg.output(), /stopped cleanly/);
    socket.destroy();
    await assert.rejects(stat(join(dir.path, 'svc_data', 'early', 'otelake.pid')), { code: 'ENOENT' });
  });

  test('on a terminal the log is readable lines, one per refused request among them', async (t) => {
    // `script` gives the server a pseudo-terminal, as a user's shell does.
    const hasScript = spawnSync('script', ['--version'], { stdio: 'ignore' }).status === 0;
    if (!hasScript) {
      t.skip('no `script` command to run the server on a pseudo-terminal');
      return;
    }
    const port = await freePort();
    const command = [
      process.execPath,
      LAUNCHER,
      'start',
      '-F',
      '-I',
      'tty',
      '-H',
      '127.0.0.1',
      '-P',
      String(port),
    ]
      .map((a) => `'${a}'`)
      .join(' ');
    const term = spawn('script', ['-qfec', command, '/dev/null'], { cwd: dir.path });
    children.push(term as ChildProcessWithoutNullStreams);
    let text = '';
    term.stdout.setEncoding('utf8').on('data', (d: string) => {
      text += d;
    });
    await waitFor('the server to answer', async () => (await healthPid(port)) !== null);
    const server = (await healthPid(port))!;
    pids.push(server);
    const res = await fetch(`http://127.0.0.1:${port}/v1/logs`, {
      method: 'POST',
      headers: { 'content-type': 'text/plain', 'x-project-id': 'shop' },
      body: 'x',
    });
    assert.equal(res.status, 415);
    await waitFor('the refusal in the log', async () => /refused POST/.test(text));
    process.kill(server, 'SIGINT');
    await exited(term as ChildProcessWithoutNullStreams);
    const plain = stripVTControlCharacters(text);
    assert.match(plain, /^\[\d\d:\d\d:\d\d\.\d{3}\] INFO: otelake 0\.1\.1 listening on/m);
    assert.match(
      plain,
      /^\[\d\d:\d\d:\d\d\.\d{3}\] WARN: refused POST \/v1\/logs \(127\.0\.0\.1, X-Project-Id shop\): 415 unsupported content type "text\/plain"/m,
    );
    assert.doesNotMatch(plain, /"level":/);
  });

  test('a port in use is reported clearly and leaves no pidfile', async (t) => {
    const { createServer } = await import('node:net');
    const blocker = createServer();
    await new Promise<void>((ok) => blocker.listen(0, '127.0.0.1', ok));
    t.after(() => blocker.close());
    const port = (blocker.address() as { port: number }).port;
    const fg = startForeground(['-I', 'busy', '-H', '127.0.0.1', '-P', String(port)], dir.path);
    children.push(fg.child);
    assert.equal(await exited(fg.child), 1);
    assert.match(fg.output(), new RegExp(`port ${port} on 127\\.0\\.0\\.1 is already in use`));
    assert.doesNotMatch(fg.output(), /\n\s+at /);
    await assert.rejects(stat(join(dir.path, 'svc_data', 'busy', 'otelake.pid')), { code: 'ENOENT' });
  });

  test('a log it cannot write (a full disk: /dev/full) drops lines; the server answers and stops cleanly', async (t) => {
    if (!existsSync('/dev/full')) return t.skip('no /dev/full here');
    const port = await freePort();
    const full = openSync('/dev/full', 'w');
    t.after(() => closeSync(full));
    const child = spawn(
      process.execPath,
      [LAUNCHER, 'start', '--foreground', '-I', 'full', '-H', '127.0.0.1', '-P', String(port)],
      {
        cwd: dir.path,
        stdio: ['ignore', full, 'pipe'],
      },
    );
    children.push(child as unknown as ChildProcessWithoutNullStreams);
    let errors = '';
    child.stderr!.setEncoding('utf8').on('data', (d: string) => {
      errors += d;
    });
    await waitFor('the server to answer', async () => (await healthPid(port)) !== null);
    // Each refusal is a log line (a warning) that cannot be written.
    for (let i = 0; i < 20; i++) {
      const res = await fetch(`http://127.0.0.1:${port}/v1/logs`, {
        method: 'POST',
        body: 'x',
        headers: { 'content-type': 'text/plain' },
        signal: AbortSignal.timeout(5000),
      });
      assert.equal(res.status, 415);
    }
    assert.equal(await healthPid(port), child.pid, 'still answering');
    child.kill('SIGTERM');
    assert.equal(await exited(child as unknown as ChildProcessWithoutNullStreams), 0, errors);
  });

  test('--reload restarts the server when a source file changes; SIGTERM stops both', async () => {
    const port = await freePort();
    const sup = startForeground(['-R', '-I', 'reload', '-H', '127.0.0.1', '-P', String(port)], dir.path);
    children.push(sup.child);
    await waitFor('the server to answer', async () => (await healthPid(port)) !== null);
    const first = (await healthPid(port))!;
    pids.push(first);
    assert.notEqual(first, sup.child.pid, 'the server runs in a child of the supervisor');
    const pidFile = join(dir.path, 'svc_data', 'reload', 'otelake.pid');
    assert.equal(Number((await readFile(pidFile, 'utf8')).trim()), sup.child.pid);

    // Touch a source file (its content is unchanged) as an editor saving it would.
    const source = fileURLToPath(new URL('../../src/cli/errors.ts', import.meta.url));
    const now = new Date();
    await utimes(source, now, now);
    let second: number | null = null;
    await waitFor('a restarted server', async () => {
      second = await healthPid(port);
      return second !== null && second !== first;
    });
    pids.push(second!);
    assert.equal(alive(first), false, 'the old server exited before the new one started');
    assert.match(sup.output(), /\[reload\] cli\/errors\.ts changed; restarting the server/);

    sup.child.kill('SIGTERM');
    assert.equal(await exited(sup.child), 0, sup.output());
    await waitFor('the server child to exit', () => !alive(second!));
    await assert.rejects(stat(pidFile), { code: 'ENOENT' });
  });
});
