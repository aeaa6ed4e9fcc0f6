// The table picker of `otelake view` on a real pseudo-terminal: util-linux `script` (or, where
// it is missing, Python's pty module) gives the CLI a terminal; the test types arrow keys and
// Enter like a user and reads what the terminal shows.

import assert from 'node:assert/strict';
import { type ChildProcessWithoutNullStreams, spawn, spawnSync } from 'node:child_process';
import { after, before, describe, test } from 'node:test';
import { Logger } from '../../src/index.ts';
import { LAUNCHER, tempDir } from './helpers.ts';

const DOWN = '\u001b[B';
const ENTER = '\r';
const CTRL_C = '\u0003';

const quote = (s: string) => `'${s.replace(/'/g, `'\\''`)}'`;

/** Runs a command on a pseudo-terminal; stdin of the returned process is typed into it. */
function onTerminal(args: readonly string[], cwd: string): ChildProcessWithoutNullStreams {
  const command = [process.execPath, LAUNCHER, ...args].map(quote).join(' ');
  const env = { ...process.env, COLUMNS: '120', LINES: '40', TERM: 'xterm-256color' };
  const hasScript = spawnSync('script', ['--version'], { encoding: 'utf8' }).stdout?.includes('util-linux');
  if (hasScript) return spawn('script', ['-qfec', command, '/dev/null'], { cwd, env });
  const python = ['python3', 'python'].find((p) => spawnSync(p, ['--version']).status === 0);
  assert.ok(python, 'the picker test needs util-linux `script` or Python 3 to provide a pseudo-terminal');
  const driver =
    'import os, pty, sys\nsys.exit(os.waitstatus_to_exitcode(pty.spawn(["/bin/sh", "-c", sys.argv[1]])))\n';
  return spawn(python, ['-c', driver, command], { cwd, env });
}

interface Session {
  output: () => string;
  waitFor: (pattern: RegExp, timeoutMs?: number) => Promise<void>;
  type: (keys: string) => void;
  exit: Promise<number | null>;
}

function session(args: readonly string[], cwd: string): Session {
  const child = onTerminal(args, cwd);
  let text = '';
  child.stdout.setEncoding('utf8').on('data', (d: string) => {
    text += d;
  });
  child.stderr.setEncoding('utf8').on('data', (d: string) => {
    text += d;
  });
  const killer = setTimeout(() => child.kill('SIGKILL'), 60_000);
  const exit = new Promise<number | null>((done) =>
    child.on('close', (code) => {
      clearTimeout(killer);
      done(code);
    }),
  );
  return {
    output: () => text,
    type: (keys) => child.stdin.write(keys),
    exit,
    waitFor: async (pattern, timeoutMs = 30_000) => {
      const deadline = Date.now() + timeoutMs;
      // biome-ignore lint/suspicious/noControlCharactersInRegex: strips terminal escape sequences
      while (!pattern.test(text.replace(/\u001b\[[0-9;?]*[A-Za-z]/g, ''))) {
        if (Date.now() > deadline) throw new Error(`terminal never showed ${pattern}; it shows:\n${text}`);
        await new Promise((r) => setTimeout(r, 50));
      }
    },
  };
}

describe('view: the interactive table picker', () => {
  let dir: { path: string; remove: () => Promise<void> };
  before(async () => {
    dir = await tempDir('picker');
    const logger = await Logger.open({
      instanceDir: `${dir.path}/svc_data`,
      instanceId: 'default',
      options: { install_signal_handlers: false, atexit_hook: false },
    });
    const now = BigInt(Date.now()) * 1_000_000n;
    for (let i = 0; i < 3; i++) {
      const [ok, reason] = await logger.ingestLog({
        project_id: 'p1',
        service_name: 'picker-svc',
        time_unix_nano: now + BigInt(i) * 1_000_000n,
        severity_text: 'WARN',
        body: `picked row ${i}`,
      });
      assert.ok(ok, reason ?? '');
    }
    await logger.stop({ flush: 'auto' });
  });
  after(() => dir.remove());

  test('arrow keys and Enter choose a table, whose newest rows are shown', async () => {
    const s = session(['view', '-n', '2'], dir.path);
    await s.waitFor(/Table to view[\s\S]*spans[\s\S]*metrics_hist/);
    // The list starts on spans; logs is the fourth entry.
    for (let i = 0; i < 3; i++) s.type(DOWN);
    await s.waitFor(/log records/); // the highlighted entry's description
    s.type(ENTER);
    await s.waitFor(/2 newest rows of logs/);
    assert.equal(await s.exit, 0, s.output());
    const shown = s.output();
    assert.match(shown, /picked row 2/);
    assert.match(shown, /picked row 1/);
    assert.doesNotMatch(shown, /picked row 0/);
    assert.match(shown, /picker-svc/);
  });

  test('choosing an empty table says so; Ctrl+C cancels with exit code 130', async () => {
    const empty = session(['view'], dir.path);
    await empty.waitFor(/Table to view/);
    empty.type(ENTER); // spans: nothing was sent
    await empty.waitFor(/no rows in spans/);
    assert.equal(await empty.exit, 0);

    const cancelled = session(['view'], dir.path);
    await cancelled.waitFor(/Table to view/);
    cancelled.type(CTRL_C);
    assert.equal(await cancelled.exit, 130, cancelled.output());
    assert.match(cancelled.output(), /cancelled/);
  });
});
