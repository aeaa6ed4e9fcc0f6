// Conformance helper: writes a finished day into an instance as the library would (a fake clock
// puts the rows on DAY), and prints what was written: rows per table, read back locally.
// Usage: node conformance/ship_day.ts <dir> <instance> <rows>
// Shipping is done afterwards by the real CLI (`otelake ship`), against the suite's S3 server.

import { Logger } from '../src/index.ts';
import { closeReadWorkers } from '../src/read/query.ts';

export const DAY = '2026-11-20';
const [dir, instanceId, rows] = [process.argv[2]!, process.argv[3]!, Number(process.argv[4])];
const logger = await Logger.open({
  instanceDir: dir,
  instanceId,
  clock: () => Date.parse(`${DAY}T10:00:00Z`),
  handleSignals: false,
  options: { shipper_enabled: false, aggregator_config: { min_batch_rows: 1, max_batch_rows: 500 } },
});
const base = BigInt(Date.parse(`${DAY}T09:00:00Z`)) * 1_000_000n;
for (let i = 0; i < rows; i++) {
  await logger.ingestLog({
    project_id: i % 3 === 0 ? 'shop' : 'blog',
    time_unix_nano: base + BigInt(i) * 1_000_000n,
    severity_number: i % 4 === 0 ? 17 : 9,
    body: `message ${i} ${'é'.repeat(i % 5)}`,
    service_name: `svc-${i % 4}`,
  });
}
const spans = Array.from({ length: Math.ceil(rows / 10) }, (_, i) => ({
  project_id: 'shop',
  trace_id: i.toString(16).padStart(32, '0'),
  span_id: (i + 1).toString(16).padStart(16, '0'),
  name: `op-${i % 3}`,
  start_time_unix_nano: base + BigInt(i) * 1_000_000n,
  end_time_unix_nano: base + BigInt(i) * 1_000_000n + 5_000n,
}));
const r = await logger.ingestRows('spans', spans);
if (r.accepted !== spans.length) throw new Error(`spans refused: ${r.firstError}`);
await logger.whenDayLanded(DAY);
await logger.stop();
const counts = {
  logs: (await logger.readLogs({ dateFrom: DAY, dateTo: DAY, storage: 'local' })).length,
  spans: (await logger.readSpans({ dateFrom: DAY, dateTo: DAY, storage: 'local' })).length,
};
await closeReadWorkers();
process.stdout.write(`${JSON.stringify({ day: DAY, counts })}\n`);
