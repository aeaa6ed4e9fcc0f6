// A writer in another process for the concurrency test: appends small batches of log rows to one
// day's table and keeps compacting and vacuuming with zero retention, so that files listed by a
// reader vanish under it. Prints the number of rows written when done.

import { batchFromRows } from '../../src/delta/batch.ts';
import { closeDeltaWorkers, DeltaTable } from '../../src/delta/table.ts';
import { SCHEMAS } from '../../src/schema/tables.ts';
import { InstanceLayout } from '../../src/storage/layout.ts';
import { fullRow } from './fixtures.ts';

const [dir, day, batches] = [process.argv[2]!, process.argv[3]!, Number(process.argv[4])];
const layout = new InstanceLayout(dir, 'live');
const table = await DeltaTable.createOrOpen(layout.tableDir(day, 'logs'), SCHEMAS.logs, { fsync: false });
const start = BigInt(Date.parse(`${day}T00:00:00Z`)) * 1000n;
let seq = 0;
for (let b = 0; b < batches; b++) {
  const rows = [];
  for (let i = 0; i < 25; i++, seq++) {
    rows.push(
      fullRow('logs', {
        project_id: 'live',
        event_ts: start + BigInt(seq) * 1000n,
        time_unix_nano: BigInt(seq),
        body: `row ${seq}`,
      }),
    );
  }
  await table.append(batchFromRows(SCHEMAS.logs, rows));
  if (b % 4 === 3) {
    await table.optimize();
    await table.vacuum({ retentionMs: 0 });
  }
}
await table.close();
await closeDeltaWorkers();
process.stdout.write(`${seq}\n`);
