// The CLI as a user runs it, for everything that needs no running server: help, version, usage
// errors (exit code 2, no stack trace), init, stop's pidfile handling, status of a dead address.

import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { createServer } from 'node:http';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { TABLE_NAMES } from '../../src/schema/tables.ts';
import { SERVER_ENV, SERVER_NODE_FLAGS } from '../../src/server/node-flags.ts';
import { defaultOptions } from '../../src/storage/options.ts';
import { alive, freePort, killQuietly, otelake, tempDir } from './helpers.ts';

const pkg = JSON.parse(await readFile(new URL('../../package.json', import.meta.url), 'utf8'));
const envAssignments = Object.entries(SERVER_ENV)
  .map(([k, v]) => `${k}=${v}`)
  .join(' ');

function noStack(stderr: string): void {
  assert.doesNotMatch(stderr, /\n\s+at .+:\d+:\d+/, 'a user mistake must not print a stack trace');
}

describe('otelake (no server)', () => {
  let dir: { path: string; remove: () => Promise<void> };
  before(async () => {
    dir = await tempDir('cmd');
  });
  after(() => dir.remove());

  test('--version prints the package version', async () => {
    const r = await otelake(['--version']);
    assert.equal(r.code, 0);
    assert.equal(r.stdout.trim(), pkg.version);
    assert.equal(pkg.version, '0.1.1');
  });

  test('--help of every command lists its flags', async () => {
    const expected: Record<string, string[]> = {
      init: ['-I, --instance-id', '-D, --dir', './svc_data', '"default"'],
      start: ['-H, --host', '0.0.0.0', '-P, --port', '4318', '-R, --reload', '-F, --foreground'],
      stop: ['-I, --instance-id', '-D, --dir', '-F, --force'],
      status: [
        '-I, --instance-id',
        '-D, --dir',
        '-H, --host',
        '127.0.0.1',
        '-P, --port',
        '4318',
        '-T, --timeout',
        '(default: 5)',
      ],
      view: [
        '-S, --storage',
        '-n, --rows',
        '(default: 10)',
        '-t, --table',
        '-s, --select',
        '--date-from',
        '--date-to',
      ],
      token: ['create', 'list', 'revoke'],
      'token create': ['--project', '--scope', '--name', '-I, --instance-id', '-D, --dir'],
      'token revoke': ['<id>', '-D, --dir'],
    };
    for (const [command, flags] of Object.entries(expected)) {
      const r = await otelake([...command.split(' '), '--help']);
      assert.equal(r.code, 0, command);
      for (const f of flags) assert.ok(r.stdout.includes(f), `${command} --help lacks ${f}:\n${r.stdout}`);
    }
    assert.doesNotMatch((await otelake(['start', '--help'])).stdout, /--no-pidfile/, 'internal flag hidden');
    const top = await otelake(['--help']);
    for (const command of Object.keys(expected).filter((c) => !c.includes(' '))) {
      assert.match(top.stdout, new RegExp(`^  ${command} `, 'm'));
    }
  });

  test('usage errors exit with 2 and one clear line, no stack trace', async () => {
    const cases: [string[], RegExp][] = [
      [['start', '--port', 'http'], /--port <port>' argument 'http' is invalid/],
      [['status', '-P', '70000'], /port number from 1 to 65535/],
      [['status', '-T', 'soon'], /number of seconds/],
      [
        ['view', '-t', 'traces'],
        /Allowed choices are spans, span_events, span_links, logs, metrics_points, metrics_hist/,
      ],
      [['view', '-S', 'gcs'], /Allowed choices are auto, local, s3/],
      [['view', '--date-from', '2024-02-30'], /real UTC day/],
      [['view', '-n', '0'], /positive integer/],
      [['init', '-I', '../etc'], /instance-id/],
      [['init', '--dir', ''], /invalid directory "": expected a path/],
      [['token', 'create', '-D', ' ', '--project', 'p', '--scope', 'read'], /invalid directory/],
      [
        ['token', 'create', '--project', 'a b', '--scope', 'read'],
        /--project <id>' argument 'a b' is invalid/,
      ],
      [['token', 'create', '--project', 'p'], /required option '--scope <scopes>' not specified/],
      [['token', 'create', '--scope', 'read'], /required option '--project <id>' not specified/],
      [['token', 'create', '--project', 'p', '--scope', 'admin'], /unknown scope "admin": use ingest, read/],
      [['token', 'create', '--project', 'p', '--scope', 'read', '--name', ''], /printable ASCII/],
      [['token', 'revoke'], /missing required argument 'id'/],
      [['start', '--reload'], /--reload is only supported with --foreground/],
      [['frobnicate'], /unknown command 'frobnicate'/],
      [['stop', '--bogus'], /unknown option '--bogus'/],
      [[], /Usage: otelake/],
    ];
    for (const [args, message] of cases) {
      const r = await otelake(args, { cwd: dir.path });
      assert.equal(r.code, 2, `${args.join(' ')}: ${r.stderr}`);
      assert.match(r.stderr, message, args.join(' '));
      noStack(r.stderr);
    }
    // `init --dir ''` did not make the instance in the current directory.
    await assert.rejects(stat(join(dir.path, 'default')), { code: 'ENOENT' });
  });

  test('init creates the layout with every default option and is idempotent', async () => {
    const r = await otelake(['init', '-D', 'data', '-I', 'alpha'], { cwd: dir.path });
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout, /initialized instance 'alpha'/);
    const root = join(dir.path, 'data', 'alpha');
    for (const sub of ['configs', 'index', join('staging', 'days')]) {
      assert.ok((await stat(join(root, sub))).isDirectory(), sub);
    }
    const options = JSON.parse(await readFile(join(root, 'configs', 'options.json'), 'utf8'));
    assert.deepEqual(options, defaultOptions());

    // A user's edit survives a second init.
    options.producer_config.max_queue_size = 99;
    await writeFile(join(root, 'configs', 'options.json'), JSON.stringify(options));
    const again = await otelake(['init', '--dir', 'data', '--instance-id', 'alpha'], { cwd: dir.path });
    assert.equal(again.code, 0, again.stderr);
    assert.match(again.stdout, /already initialized/);
    const kept = JSON.parse(await readFile(join(root, 'configs', 'options.json'), 'utf8'));
    assert.equal(kept.producer_config.max_queue_size, 99);
  });

  test('init with the defaults uses ./svc_data/default', async () => {
    const r = await otelake(['init'], { cwd: dir.path });
    assert.equal(r.code, 0, r.stderr);
    assert.ok((await stat(join(dir.path, 'svc_data', 'default', 'configs', 'options.json'))).isFile());
  });

  test('a --dir the filesystem refuses gets one line naming the path, not a stack trace', async () => {
    await writeFile(join(dir.path, 'a-file'), 'not a folder');
    for (const args of [['init'], ['start', '--foreground', '--port', String(await freePort())]]) {
      const r = await otelake([...args, '--dir', 'a-file/data'], { cwd: dir.path });
      assert.equal(r.code, 1, r.stderr);
      assert.match(r.stderr, /^error: cannot mkdir .*a-file\/data\/default\S*: ENOTDIR\n$/);
    }
  });

  test('init refuses invalid saved options with a clear message', async () => {
    const root = join(dir.path, 'bad', 'default');
    await otelake(['init', '-D', 'bad'], { cwd: dir.path });
    await writeFile(join(root, 'configs', 'options.json'), '{"producer_config": {"max_queue_size": -1}}');
    const r = await otelake(['init', '-D', 'bad'], { cwd: dir.path });
    assert.equal(r.code, 1);
    assert.match(r.stderr, /max_queue_size/);
    noStack(r.stderr);
    // start reads them for its bind address and refuses the same way, before launching anything.
    const s = await otelake(['start', '-D', 'bad'], { cwd: dir.path });
    assert.equal(s.code, 1);
    assert.match(s.stderr, /max_queue_size/);
    noStack(s.stderr);
  });

  test('an options.json that cannot be read is named by every command that reads it, without a stack', async () => {
    const root = join(dir.path, 'unreadable', 'default');
    await otelake(['init', '-D', 'unreadable'], { cwd: dir.path });
    const file = join(root, 'configs', 'options.json');
    await rm(file);
    await mkdir(file); // a folder where the file should be
    const commands = [
      ['init'],
      ['start', '--foreground', '-H', '127.0.0.1', '-P', String(await freePort())],
      ['status'],
      ['ship', '--all'],
    ];
    for (const args of commands) {
      const r = await otelake([...args, '-D', 'unreadable'], { cwd: dir.path });
      assert.equal(r.code, 1, `${args[0]}: ${r.stderr}`);
      assert.match(
        r.stderr,
        /^error: cannot read \S*unreadable\/default\/configs\/options\.json: EISDIR/,
        args[0],
      );
      noStack(r.stderr);
    }
  });

  test('start without --host/--port binds the saved server_config address', async () => {
    const root = join(dir.path, 'bound', 'default');
    await otelake(['init', '-D', 'bound'], { cwd: dir.path });
    const port = await freePort();
    const options = JSON.parse(await readFile(join(root, 'configs', 'options.json'), 'utf8'));
    options.server_config.host = '127.0.0.1';
    options.server_config.port = port;
    await writeFile(join(root, 'configs', 'options.json'), JSON.stringify(options));
    const started = await otelake(['start', '-D', 'bound'], { cwd: dir.path });
    try {
      assert.equal(started.code, 0, started.stderr);
      assert.match(started.stdout, new RegExp(`listening on http://127\\.0\\.0\\.1:${port} `));
      const health = await fetch(`http://127.0.0.1:${port}/healthz`);
      assert.equal(health.status, 200);
      if (process.platform === 'linux') {
        // The background server runs with the server's Node flags (src/server/node-flags.ts).
        const { pid } = (await health.json()) as { pid: number };
        const cmdline = (await readFile(`/proc/${pid}/cmdline`, 'utf8')).split('\0');
        for (const flag of SERVER_NODE_FLAGS) assert.ok(cmdline.includes(flag), `${flag} in ${cmdline}`);
        // And with the server's environment (malloc settings), as `npm start` gives it too.
        const environ = (await readFile(`/proc/${pid}/environ`, 'utf8')).split('\0');
        for (const [k, v] of Object.entries(SERVER_ENV))
          assert.ok(environ.includes(`${k}=${v}`), `${k}=${v}`);
        assert.ok(pkg.scripts.start.startsWith(`${envAssignments} node `), pkg.scripts.start);
        // `npm start` writes the Node flags out too (Node refuses some in NODE_OPTIONS): the same ones.
        assert.ok(
          pkg.scripts.start.startsWith(`${envAssignments} node ${SERVER_NODE_FLAGS.join(' ')} `),
          pkg.scripts.start,
        );
      }
    } finally {
      const stopped = await otelake(['stop', '-D', 'bound'], { cwd: dir.path });
      assert.equal(stopped.code, 0, stopped.stderr);
    }
    // A flag still wins over the saved address.
    const other = await freePort();
    const flagged = await otelake(['start', '-D', 'bound', '-P', String(other)], { cwd: dir.path });
    try {
      assert.match(flagged.stdout, new RegExp(`listening on http://127\\.0\\.0\\.1:${other} `));
    } finally {
      await otelake(['stop', '-D', 'bound'], { cwd: dir.path });
    }
  });

  test('stop without a pidfile fails clearly; a stale pidfile is removed', async () => {
    const none = await otelake(['stop', '-D', 'nostop'], { cwd: dir.path });
    assert.equal(none.code, 1);
    assert.match(none.stderr, /no server is running for instance 'default' \(no pidfile/);

    await otelake(['init', '-D', 'stale'], { cwd: dir.path });
    const pidFile = join(dir.path, 'stale', 'default', 'otelake.pid');
    const gone = spawn(process.execPath, ['-e', '0']);
    await new Promise((r) => gone.once('exit', r));
    await writeFile(pidFile, `${gone.pid}\n`);
    const stale = await otelake(['stop', '-D', 'stale'], { cwd: dir.path });
    assert.equal(stale.code, 1);
    assert.match(
      stale.stderr,
      new RegExp(`removed a stale pidfile \\(process ${gone.pid} no longer exists\\)`),
    );
    await assert.rejects(stat(pidFile), { code: 'ENOENT' });
  });

  test('stop waits for a graceful exit; --force kills a server that ignores SIGTERM', async (t) => {
    await otelake(['init', '-D', 'force'], { cwd: dir.path });
    const pidFile = join(dir.path, 'force', 'default', 'otelake.pid');
    // Stand-ins for a server: their command line names otelake, like the real one's. Each says
    // when its handler is installed (before, SIGTERM's default action would end it).
    const graceful = spawn(
      process.execPath,
      [
        '-e',
        "process.on('SIGTERM', () => setTimeout(() => process.exit(0), 300)); setInterval(() => {}, 1000); console.log('ready')",
        'otelake',
      ],
      { stdio: ['ignore', 'pipe', 'ignore'] },
    );
    const stubborn = spawn(
      process.execPath,
      ['-e', "process.on('SIGTERM', () => {}); setInterval(() => {}, 1000); console.log('ready')", 'otelake'],
      { stdio: ['ignore', 'pipe', 'ignore'] },
    );
    t.after(() => {
      killQuietly(graceful);
      killQuietly(stubborn);
    });
    const ready = (c: typeof graceful) =>
      new Promise<void>((resolve, reject) => {
        c.stdout!.once('data', () => resolve());
        c.once('exit', (code) => reject(new Error(`a stand-in exited (${code}) before it was ready`)));
      });
    await Promise.all([ready(graceful), ready(stubborn)]);

    await writeFile(pidFile, `${graceful.pid}\n`);
    const ok = await otelake(['stop', '-D', 'force'], { cwd: dir.path });
    assert.equal(ok.code, 0, ok.stderr);
    assert.match(ok.stdout, /stopped/);
    assert.equal(alive(graceful.pid!), false);
    await assert.rejects(stat(pidFile), { code: 'ENOENT' });

    await writeFile(pidFile, `${stubborn.pid}\n`);
    const env = { OTELAKE_STOP_GRACE_S: '1' };
    const refused = await otelake(['stop', '-D', 'force'], { cwd: dir.path, env });
    assert.equal(refused.code, 1);
    assert.match(refused.stderr, /did not stop within 1 s; run 'otelake stop --force'/);
    assert.equal(alive(stubborn.pid!), true);

    const forced = await otelake(['stop', '-D', 'force', '-F'], { cwd: dir.path, env });
    assert.equal(forced.code, 0, forced.stderr);
    assert.match(forced.stdout, /sending SIGKILL/);
    await new Promise((r) => setTimeout(r, 100));
    assert.equal(
      stubborn.exitCode === null && stubborn.signalCode === null ? alive(stubborn.pid!) : false,
      false,
    );
    await assert.rejects(stat(pidFile), { code: 'ENOENT' });
  });

  test('status of an address where nothing listens fails on stderr', async () => {
    const port = await freePort();
    const r = await otelake(['status', '-P', String(port)]);
    assert.equal(r.code, 1);
    assert.equal(r.stdout, '');
    assert.match(
      r.stderr,
      new RegExp(`cannot get the status of otelake at http://127\\.0\\.0\\.1:${port}: connection refused`),
    );
    noStack(r.stderr);
  });

  test('status gives up after --timeout when the server does not answer', async (t) => {
    const silent = createServer(() => {});
    await new Promise<void>((ok) => silent.listen(0, '127.0.0.1', ok));
    t.after(() => {
      silent.closeAllConnections();
      silent.close();
    });
    const port = (silent.address() as { port: number }).port;
    const started = Date.now();
    const r = await otelake(['status', '-P', String(port), '-T', '0.5']);
    assert.equal(r.code, 1);
    assert.match(r.stderr, /no answer within 0\.5 s/);
    assert.ok(Date.now() - started < 5000);
  });

  test('status: an unwell server exits 1 after showing its state; a non-otelake answer is an error', async (t) => {
    let body = JSON.stringify({
      status: 'degraded',
      version: '0.1.1',
      producer: {
        queue_depth: 2048,
        queue_capacity: 2048,
        accepted: 1,
        rejected: {},
        dropped: { queue_full: 5 },
      },
    });
    const fake = createServer((_req, res) => {
      res.setHeader('content-type', 'application/json');
      res.end(body);
    });
    await new Promise<void>((ok) => fake.listen(0, '127.0.0.1', ok));
    t.after(() => fake.close());
    const port = String((fake.address() as { port: number }).port);
    const unwell = await otelake(['status', '-P', port]);
    assert.equal(unwell.code, 1);
    assert.match(unwell.stdout, /: degraded/);
    assert.match(unwell.stdout, /2,048 \/ 2,048 \(100 %\)/);
    assert.match(unwell.stdout, /dropped\s+│ 5: queue_full 5/);
    body = '<html>hello</html>';
    const other = await otelake(['status', '-P', port]);
    assert.equal(other.code, 1);
    assert.match(other.stderr, /not JSON \(is this an otelake server\?\)/);
  });

  test('view: missing instance and missing --table off a terminal are clear errors', async () => {
    const missing = await otelake(['view', '-t', 'logs', '-D', 'nowhere'], { cwd: dir.path });
    assert.equal(missing.code, 1);
    assert.match(missing.stderr, /no instance 'default' at .*nowhere.*otelake init/);

    await otelake(['init', '-D', 'picker'], { cwd: dir.path });
    const r = await otelake(['view', '-D', 'picker'], { cwd: dir.path });
    assert.equal(r.code, 2);
    assert.match(r.stderr, /no --table given/);
    assert.ok(r.stderr.includes(TABLE_NAMES.join(', ')), r.stderr);
    noStack(r.stderr);

    const col = await otelake(['view', '-D', 'picker', '-t', 'logs', '-s', 'nope'], { cwd: dir.path });
    assert.equal(col.code, 2);
    assert.match(col.stderr, /unknown column nope/);

    const order = await otelake(
      ['view', '-D', 'picker', '-t', 'logs', '--date-from', '2024-02-02', '--date-to', '2024-02-01'],
      {
        cwd: dir.path,
      },
    );
    assert.equal(order.code, 2);
    assert.match(order.stderr, /--date-from 2024-02-02 is after --date-to 2024-02-01/);
  });
});
