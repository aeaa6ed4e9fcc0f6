// A writer process for the crash and multi-process tests. Appends batches `start`, `start+1`, ...
// (batch b holds rows of makeRows(schema, size(b), b, b * 1000)) and prints `committed <b> <v>`
// after each commit; with `count` -1 it runs until killed. Every `optimizeEvery` batches it runs
// OPTIMIZE and prints `optimized <v>`.
//
//   node test/delta/writer-child.ts <dir> <count> <start> [options-json]

import { resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { batchFromRows } from '../../src/delta/batch.ts';
import { closeDeltaWorkers, type DeltaOptions, DeltaTable } from '../../src/delta/table.ts';
import { SCHEMAS } from '../../src/schema/tables.ts';
import { makeRows } from './rows.ts';

export const CHILD_SCHEMA = SCHEMAS.logs;
export const batchSize = (b: number): number => 1 + ((b * 7) % 23);
export const batchRows = (b: number) => makeRows(CHILD_SCHEMA, batchSize(b), b, b * 1000);

async function main(): Promise<void> {
  const [dir, countArg, startArg, optsArg] = process.argv.slice(2);
  if (!dir || !countArg || !startArg)
    throw new Error('usage: writer-child.ts <dir> <count> <start> [options]');
  const count = Number(countArg);
  const start = Number(startArg);
  const opts = (optsArg ? JSON.parse(optsArg) : {}) as DeltaOptions & { optimizeEvery?: number };
  const table = await DeltaTable.createOrOpen(dir, CHILD_SCHEMA, opts);
  process.stdout.write('ready\n');
  for (let b = start; count < 0 || b < start + count; b++) {
    const r = await table.append(batchFromRows(CHILD_SCHEMA, batchRows(b)));
    process.stdout.write(`committed ${b} ${r.version}\n`);
    if (opts.optimizeEvery && (b + 1) % opts.optimizeEvery === 0) {
      const o = await table.optimize({ targetFileRows: 60 });
      if (o) process.stdout.write(`optimized ${o.version}\n`);
    }
  }
  await table.close();
  await closeDeltaWorkers();
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) await main();
