// `otelake init`: the instance layout and a baseline configs/options.json with every default.
// Idempotent: existing options are kept (and checked), never overwritten.

import { mkdir } from 'node:fs/promises';
import { dirname, relative } from 'node:path';
import { InstanceLayout } from '../storage/layout.ts';
import { defaultOptions, loadSavedOptions, mergeOptions, saveOptions } from '../storage/options.ts';
import { CliError } from './errors.ts';
import type { InstanceFlags } from './flags.ts';

export interface InitResult {
  layout: InstanceLayout;
  /** false when configs/options.json already existed and was kept. */
  wroteOptions: boolean;
}

export async function initInstance(dir: string, instanceId: string): Promise<InitResult> {
  const layout = new InstanceLayout(dir, instanceId);
  await mkdir(dirname(layout.optionsFile), { recursive: true });
  await mkdir(dirname(layout.daysIndex), { recursive: true });
  await mkdir(layout.daysDir, { recursive: true });
  const saved = await loadSavedOptions(layout.optionsFile).catch((err: Error) => {
    throw new CliError(err.message);
  });
  if (saved !== undefined) {
    try {
      mergeOptions(defaultOptions(), saved);
    } catch (err) {
      throw new CliError(`${layout.optionsFile}: ${(err as Error).message}`);
    }
    return { layout, wroteOptions: false };
  }
  await saveOptions(layout.optionsFile, defaultOptions());
  return { layout, wroteOptions: true };
}

export async function initCommand(flags: InstanceFlags): Promise<void> {
  const { layout, wroteOptions } = await initInstance(flags.dir, flags.instanceId);
  const shown = relative(process.cwd(), layout.root) || '.';
  if (wroteOptions) {
    process.stdout.write(`initialized instance '${layout.instanceId}' at ${shown}\n`);
    process.stdout.write(`  options: ${relative(process.cwd(), layout.optionsFile)} (defaults)\n`);
  } else {
    process.stdout.write(
      `instance '${layout.instanceId}' at ${shown} already initialized; kept ${relative(process.cwd(), layout.optionsFile)}\n`,
    );
  }
}
