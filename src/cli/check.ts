// `otelake check`: validates every local table of an instance with otelake's own Delta reader
// (src/delta/check.ts) and says, for each damaged one, what is wrong and how to repair it.
// Read-only, so it may run while the server writes. Exit code 1 when a table is damaged.

import { readdir, stat } from 'node:fs/promises';
import { relative } from 'node:path';
import { checkTable, type TableCheck } from '../delta/check.ts';
import { TABLE_NAMES } from '../schema/tables.ts';
import { InstanceLayout, isDay } from '../storage/layout.ts';
import { CliError } from './errors.ts';
import type { InstanceFlags } from './flags.ts';

const isDirectory = (path: string) =>
  stat(path).then(
    (s) => s.isDirectory(),
    () => false,
  );

/** Every table folder of the instance, oldest day first, checked. */
export async function checkInstance(layout: InstanceLayout): Promise<{ day: string; check: TableCheck }[]> {
  const days = (await readdir(layout.daysDir).catch(() => [] as string[])).filter(isDay).sort();
  const out: { day: string; check: TableCheck }[] = [];
  for (const day of days) {
    for (const table of TABLE_NAMES) {
      const dir = layout.tableDir(day, table);
      if (await isDirectory(dir)) out.push({ day, check: await checkTable(dir) });
    }
  }
  return out;
}

export async function checkCommand(flags: InstanceFlags): Promise<void> {
  const layout = new InstanceLayout(flags.dir, flags.instanceId);
  if (!(await isDirectory(layout.root))) {
    throw new CliError(`no instance '${layout.instanceId}' at ${layout.root}; check --dir and --instance-id`);
  }
  const results = await checkInstance(layout);
  let damaged = 0;
  let warnings = 0;
  const lines: string[] = [];
  for (const { day, check } of results) {
    const rel = relative(process.cwd(), check.dir);
    const where = rel === '' || rel.startsWith('..') ? check.dir : rel;
    const bad = check.findings.filter((f) => f.severity === 'damaged');
    if (bad.length > 0) damaged++;
    warnings += check.findings.length - bad.length;
    const state = bad.length > 0 ? 'DAMAGED' : check.findings.length > 0 ? 'warning' : 'ok';
    const summary =
      check.version === null
        ? 'no snapshot'
        : `version ${check.version}, ${check.files} files, ${check.rows} rows`;
    lines.push(`${state.padEnd(7)} ${day} ${check.dir.split(/[\\/]/).at(-1)!.padEnd(14)} ${summary}`);
    for (const f of check.findings) {
      lines.push(`        ${f.severity}: ${f.problem}`);
      lines.push(`        repair: ${f.repair}`);
    }
    if (check.findings.length > 0) lines.push(`        (in ${where})`);
  }
  if (results.length === 0) lines.push(`no tables in ${layout.daysDir}`);
  lines.push(
    `${results.length} table${results.length === 1 ? '' : 's'} checked in instance '${layout.instanceId}': ` +
      `${damaged} damaged, ${warnings} warning${warnings === 1 ? '' : 's'}`,
  );
  process.stdout.write(`${lines.join('\n')}\n`);
  if (damaged > 0)
    throw new CliError(`${damaged} damaged table${damaged === 1 ? '' : 's'}: see the repairs above`);
}
