// `otelake ship --day YYYY-MM-DD | --all`: seals, uploads, verifies and cleans finished days now,
// through the library (so that whatever of a day is still to land lands first), with a progress
// bar on a terminal and plain lines otherwise. Refused while the instance's server runs: that
// process owns the write path and ships by itself (shipper_enabled).

import { stat } from 'node:fs/promises';
import { TABLE_NAMES } from '../schema/tables.ts';
import type { ShipProgress, ShipSummary } from '../shipping/shipper.ts';
import { InstanceLayout } from '../storage/layout.ts';
import { OptionsFileError } from '../storage/options.ts';
import { InstanceInUseError } from '../storage/process-lock.ts';
import { CliError, UsageError } from './errors.ts';
import type { ShipFlags } from './flags.ts';
import { claimPidFile, removePidFile } from './pidfile.ts';
import { bytes, grid, outputWidth } from './render.ts';

/** Progress as plain lines: each step, and the upload every tenth of its bytes. */
function lineReporter(out: NodeJS.WritableStream): (p: ShipProgress) => void {
  let last = '';
  let tenth = -1;
  return (p) => {
    const key = `${p.day} ${p.step}`;
    if (key !== last) {
      last = key;
      tenth = -1;
      out.write(`${p.day}: ${p.step}\n`);
    }
    if (p.step !== 'upload' || p.bytesTotal === 0) return;
    const now = Math.floor((10 * p.bytesDone) / p.bytesTotal);
    if (now === tenth) return;
    tenth = now;
    out.write(
      `${p.day}: upload ${p.filesDone}/${p.filesTotal} files, ${bytes(p.bytesDone)} of ${bytes(p.bytesTotal)}\n`,
    );
  };
}

/** Progress as a bar (bytes and files) on a terminal. */
async function barReporter(): Promise<{ report: (p: ShipProgress) => void; stop: () => void }> {
  const { SingleBar } = await import('cli-progress');
  const bar = new SingleBar({
    format: '{day} {step} [{bar}] {percentage}% {detail}',
    hideCursor: true,
    clearOnComplete: false,
    stream: process.stdout,
  });
  let started = false;
  return {
    report: (p) => {
      const upload = p.step === 'upload';
      const payload = {
        day: p.day,
        step: p.step.padEnd(6),
        detail: upload
          ? `| ${bytes(p.bytesDone)} of ${bytes(p.bytesTotal)} | ${p.filesDone}/${p.filesTotal} files`
          : '',
      };
      const total = Math.max(1, p.bytesTotal);
      if (!started) {
        bar.start(total, 0, payload);
        started = true;
      }
      bar.setTotal(total);
      bar.update(upload ? p.bytesDone : p.step === 'seal' ? 0 : total, payload);
    },
    stop: () => {
      if (started) bar.stop();
      started = false;
    },
  };
}

/** The summary of one day: per-table counts and the outcome. */
export function renderSummary(s: ShipSummary, width = outputWidth()): string {
  const rows = TABLE_NAMES.filter((t) => s.tables[t]).map((t) => {
    const x = s.tables[t]!;
    return [t, x.rows.toLocaleString('en-US'), String(x.version), bytes(x.bytes ?? null)];
  });
  const table =
    rows.length > 0
      ? grid(['table', 'rows', 'version', 'size'], rows, width, ['left', 'right', 'right', 'right'])
      : null;
  const outcome =
    s.status === 'cleaned'
      ? `day ${s.day}: shipped (${s.phase}; ${s.uploaded.files} files, ${bytes(s.uploaded.bytes)} uploaded now)`
      : `day ${s.day}: failed at ${s.error!.step} (phase ${s.phase}): ${s.error!.message}`;
  return `${table ? `${table}\n` : ''}${outcome}\n`;
}

export async function shipCommand(flags: ShipFlags): Promise<void> {
  if (flags.day === undefined && !flags.all)
    throw new UsageError('give the day to ship (--day YYYY-MM-DD) or --all');
  if (flags.day !== undefined && flags.all) throw new UsageError('--day and --all cannot be used together');
  const layout = new InstanceLayout(flags.dir, flags.instanceId);
  const exists = await stat(layout.root).then(
    (s) => s.isDirectory(),
    () => false,
  );
  if (!exists) {
    throw new CliError(`no instance '${layout.instanceId}' at ${layout.root}; check --dir and --instance-id`);
  }
  // Held for the run, as a server holds it: a server started meanwhile would replay the same
  // write-ahead log into the same tables (rows written twice, and a file the seal's VACUUM removes
  // before the server commits it).
  const claim = await claimPidFile(layout.pidFile);
  if (!claim.claimed) {
    throw new CliError(
      `the server of instance '${layout.instanceId}' is running (pid ${claim.runningPid}): it ships finished days itself when shipper_enabled is true; stop it (otelake stop) to ship by hand`,
    );
  }
  try {
    await shipDays(flags);
  } finally {
    await removePidFile(layout.pidFile, process.pid);
  }
}

/** Ships the days `flags` name through a logger of the instance (its pidfile held by the caller). */
async function shipDays(flags: ShipFlags): Promise<void> {
  const { Logger } = await import('../logger.ts');
  const { ShipError } = await import('../shipping/shipper.ts');
  const logger = await Logger.open({
    instanceDir: flags.dir,
    instanceId: flags.instanceId,
    handleSignals: false,
    autoShip: false,
  }).catch((err: unknown) => {
    // A program using the library writes the instance (it holds no pidfile); options to mend.
    if (err instanceof InstanceInUseError || err instanceof TypeError || err instanceof OptionsFileError)
      throw new CliError(err.message);
    throw err;
  });
  const bar = process.stdout.isTTY ? await barReporter() : null;
  const onProgress = bar ? bar.report : lineReporter(process.stdout);
  let failed = 0;
  try {
    const days = flags.day !== undefined ? [flags.day] : await logger.unshippedDays();
    if (days.length === 0) process.stdout.write('nothing to ship: every finished day is shipped\n');
    for (const day of days) {
      let summary: ShipSummary;
      try {
        summary = await logger.shipNow(day, { onProgress });
      } catch (err) {
        if (err instanceof ShipError) throw new CliError(err.message);
        throw err;
      } finally {
        bar?.stop();
      }
      process.stdout.write(renderSummary(summary));
      if (summary.status !== 'cleaned') failed++;
    }
  } finally {
    await logger.stop();
    const { closeReadWorkers } = await import('../read/query.ts');
    await closeReadWorkers();
  }
  if (failed > 0) process.exitCode = 1;
}
