// On a slow disk the log gathers a group for the clients answered by the last write: without
// that, clients in closed loop split into a write of a few and a write of the rest, each a whole
// slow write (eight clients at 50 IOPS: groups of 4, and 70% of the records a second). The disk is
// made slow for real: a blkio cgroup throttles the writes of a process that runs the log.

import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { mkdir, mkdtemp, rm, rmdir, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';

/** A new cgroup limiting writes to `device` (major:minor) to `iops` a second, or why not here. */
async function slowDiskCgroup(
  device: string,
  iops: number,
): Promise<{ procs: string; remove: () => Promise<void> } | string> {
  if (process.platform !== 'linux') return 'blkio cgroups are Linux';
  if (process.getuid?.() !== 0) return 'making a cgroup needs root';
  if (device.startsWith('0:')) return `the temporary directory is on a virtual device (${device})`;
  const name = `otelake-slow-disk-${process.pid}`;
  try {
    const v1 = '/sys/fs/cgroup/blkio';
    if (existsSync(join(v1, 'blkio.throttle.write_iops_device'))) {
      const dir = join(v1, name);
      await mkdir(dir);
      await writeFile(join(dir, 'blkio.throttle.write_iops_device'), `${device} ${iops}`);
      return { procs: join(dir, 'cgroup.procs'), remove: () => rmdir(dir) };
    }
    const v2 = '/sys/fs/cgroup';
    if (readFileSync(join(v2, 'cgroup.controllers'), 'utf8').split(/\s+/).includes('io')) {
      if (!readFileSync(join(v2, 'cgroup.subtree_control'), 'utf8').includes('io'))
        await writeFile(join(v2, 'cgroup.subtree_control'), '+io');
      const dir = join(v2, name);
      await mkdir(dir);
      await writeFile(join(dir, 'io.max'), `${device} wiops=${iops}`);
      return { procs: join(dir, 'cgroup.procs'), remove: () => rmdir(dir) };
    }
  } catch (err) {
    return `cannot throttle the disk: ${(err as Error).message}`;
  }
  return 'no blkio or io cgroup controller';
}

test('on a disk of 50 IOPS, eight clients in closed loop share one write a round', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'otelake-slow-disk-'));
  const { dev } = await stat(dir);
  const device = `${Math.floor(dev / 256) & 0xfff}:${(dev & 0xff) | ((dev >> 12) & 0xfff00)}`;
  const cgroup = await slowDiskCgroup(device, 50);
  if (typeof cgroup === 'string') {
    await rm(dir, { recursive: true, force: true });
    return t.skip(cgroup);
  }
  try {
    const script = fileURLToPath(new URL('fixtures/closed-loop-appends.ts', import.meta.url));
    const out = execFileSync(
      'sh',
      [
        '-c',
        `echo $$ > "${cgroup.procs}" && exec "$0" "$@"`,
        process.execPath,
        ...process.execArgv,
        script,
        dir,
        '8',
        '240',
      ],
      { encoding: 'utf8', timeout: 120_000 },
    );
    const { appends, groups } = JSON.parse(out) as { appends: number; groups: number };
    t.diagnostic(`${appends} appends in ${groups} groups`);
    assert.equal(appends, 240);
    assert.ok(appends / groups >= 6, `${(appends / groups).toFixed(1)} appends a write: the clients split`);
  } finally {
    await cgroup.remove().catch(() => {});
    await rm(dir, { recursive: true, force: true });
  }
});
