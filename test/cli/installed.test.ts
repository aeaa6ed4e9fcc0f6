// The CLI as installed from npm: the compiled dist/ under node_modules (where Node refuses to strip
// types, so the launcher must not pick src/ even if it is there). Builds with tsconfig.build.json
// into a package folder, then runs init, start, status and stop from it.

import assert from 'node:assert/strict';
import { cp, mkdir, readdir, readFile, stat, symlink } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { freePort, killQuietly, type RunResult, runProcess, tempDir } from './helpers.ts';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));

function run(command: string, args: readonly string[], cwd: string): Promise<RunResult> {
  return runProcess(command, args, { cwd, timeoutMs: 120_000 });
}

describe('installed package (dist under node_modules)', () => {
  let dir: { path: string; remove: () => Promise<void> };
  let launcher: string;
  let pid: number | undefined;
  before(async () => {
    dir = await tempDir('installed');
    const pkg = join(dir.path, 'node_modules', 'otelake');
    await mkdir(pkg, { recursive: true });
    await cp(join(ROOT, 'package.json'), join(pkg, 'package.json'));
    // What npm publishes: the "files" of package.json (dist/ is built below).
    const manifest = JSON.parse(await readFile(join(ROOT, 'package.json'), 'utf8')) as { files: string[] };
    for (const entry of manifest.files) {
      if (entry === 'dist') continue;
      await cp(join(ROOT, entry), join(pkg, entry), { recursive: true });
    }
    // The sources too: the launcher must still choose dist/ under node_modules.
    await cp(join(ROOT, 'src'), join(pkg, 'src'), { recursive: true });
    for (const dep of await readdir(join(ROOT, 'node_modules'))) {
      if (dep.startsWith('.')) continue;
      await symlink(join(ROOT, 'node_modules', dep), join(dir.path, 'node_modules', dep));
    }
    const tsc = join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc');
    const built = await run(
      process.execPath,
      [tsc, '-p', join(ROOT, 'tsconfig.build.json'), '--outDir', join(pkg, 'dist')],
      ROOT,
    );
    await stat(join(pkg, 'dist', 'cli', 'main.js')).catch(() => {
      throw new Error(`the build produced no dist/cli/main.js:\n${built.stdout}${built.stderr}`);
    });
    launcher = join(pkg, 'bin', 'otelake.js');
  });
  after(async () => {
    killQuietly(pid);
    await dir.remove();
  });

  test('init, start, status, stop run from dist/', async () => {
    const cwd = dir.path;
    const version = await run(process.execPath, [launcher, '--version'], cwd);
    assert.equal(version.code, 0, version.stderr);
    assert.equal(version.stdout.trim(), '0.1.1');

    assert.equal((await run(process.execPath, [launcher, 'init'], cwd)).code, 0);
    const port = String(await freePort());
    const started = await run(process.execPath, [launcher, 'start', '-H', '127.0.0.1', '-P', port], cwd);
    const m = /\(pid (\d+)\)/.exec(started.stdout);
    assert.ok(m, started.stdout + started.stderr);
    pid = Number(m[1]);
    assert.equal(started.code, 0);
    // The daemon was started through the installed package's launcher (which runs its dist/).
    const cmdline = await readFile(`/proc/${pid}/cmdline`, 'utf8').catch(() => null);
    if (cmdline !== null) assert.match(cmdline, /node_modules\/otelake\/bin\/otelake\.js/);

    const status = await run(process.execPath, [launcher, 'status', '-P', port], cwd);
    assert.equal(status.code, 0, status.stderr);
    assert.match(status.stdout, /queue\s+│ 0 \/ 2,048/);

    const stopped = await run(process.execPath, [launcher, 'stop'], cwd);
    assert.equal(stopped.code, 0, stopped.stderr);
    const view = await run(process.execPath, [launcher, 'view', '-t', 'logs'], cwd);
    assert.equal(view.code, 0, view.stderr);
    assert.match(view.stdout, /no rows in logs/);
  });
});
