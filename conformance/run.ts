// `npm run test:conformance`: prepares a Python venv with independent readers (conformance/.venv,
// reinstalled only when requirements.txt or the interpreter changes) and runs the pytest suite.
// Extra arguments go to pytest, e.g. `node conformance/run.ts -k checkpoint`.

import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const root = dirname(here);
const venv = join(here, '.venv');
const venvPython = join(venv, process.platform === 'win32' ? 'Scripts/python.exe' : 'bin/python');
const stamp = join(venv, '.requirements-hash');
const requirements = join(here, 'requirements.txt');
const WHEELS = '/opt/wheels';

function run(cmd: string, args: string[], opts: { quiet?: boolean } = {}): number {
  const r = spawnSync(cmd, args, { stdio: opts.quiet ? 'ignore' : 'inherit', cwd: root });
  if (r.error) throw r.error;
  return r.status ?? 1;
}

function output(cmd: string, args: string[]): string | null {
  const r = spawnSync(cmd, args, { encoding: 'utf8' });
  return r.status === 0 ? r.stdout.trim() : null;
}

/** A Python >= 3.10 from PATH (OTELAKE_PYTHON wins). */
function findPython(): string {
  const candidates = [
    process.env.OTELAKE_PYTHON,
    'python3.13',
    'python3.12',
    'python3.11',
    'python3.10',
    'python3',
  ];
  for (const c of candidates) {
    if (!c) continue;
    const v = output(c, ['-c', 'import sys; print("%d.%d" % sys.version_info[:2])']);
    if (v && Number(v.split('.')[0]) === 3 && Number(v.split('.')[1]) >= 10) return c;
  }
  throw new Error('conformance needs Python >= 3.10 on PATH (or OTELAKE_PYTHON)');
}

function ensureVenv(): void {
  const python = findPython();
  const version = output(python, ['-c', 'import sys; print(sys.version)']) ?? '';
  const want = createHash('sha256').update(readFileSync(requirements)).update(version).digest('hex');
  if (existsSync(stamp) && existsSync(venvPython) && readFileSync(stamp, 'utf8').trim() === want) return;
  console.log(`conformance: preparing ${venv} with ${python}`);
  rmSync(venv, { recursive: true, force: true });
  if (run(python, ['-m', 'venv', venv]) !== 0) throw new Error('python -m venv failed');
  const pip = [
    '-m',
    'pip',
    'install',
    '--disable-pip-version-check',
    '--quiet',
    ...(existsSync(WHEELS) ? ['--find-links', WHEELS] : []),
    '-r',
    requirements,
  ];
  if (run(venvPython, pip) !== 0) throw new Error('pip install of conformance/requirements.txt failed');
  writeFileSync(stamp, want);
}

ensureVenv();
// Helper scripts spawned by the tests use this very Node binary.
const env = {
  ...process.env,
  OTELAKE_NODE: process.execPath,
  PATH: `${dirname(process.execPath)}:${process.env.PATH ?? ''}`,
};
const r = spawnSync(venvPython, ['-m', 'pytest', '-q', join(here, 'tests'), ...process.argv.slice(2)], {
  stdio: 'inherit',
  cwd: root,
  env,
});
if (r.error) throw r.error;
process.exit(r.status ?? 1);
