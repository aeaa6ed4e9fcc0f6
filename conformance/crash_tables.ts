// Kills a loaded otelake server with SIGKILL again and again (test/server/helpers/crash-loop.ts),
// then opens the instance once more, which replays the write-ahead log, and stops it cleanly.
// Prints, as one JSON document, the tables an independent reader must read and the bodies of
// every acknowledged row, which must each be there exactly once.
//
//   node conformance/crash_tables.ts <out-dir> [cycles=10]

import { readdir } from 'node:fs/promises';
import { join } from 'node:path';
import { Logger } from '../src/index.ts';
import { closeReadWorkers } from '../src/read/index.ts';
import { crashLoop } from '../test/server/helpers/crash-loop.ts';

const [out, cycles] = process.argv.slice(2);
const result = await crashLoop({ dir: out!, instanceId: 'crash', cycles: Number(cycles ?? 10), minOk: 51 });
const logger = await Logger.open({ instanceId: 'crash', instanceDir: out!, handleSignals: false });
await logger.stop();
await closeReadWorkers();
const daysDir = join(out!, 'crash', 'staging', 'days');
const tables = (await readdir(daysDir)).map((day) => join(daysDir, day, 'otel', 'logs'));
process.stdout.write(JSON.stringify({ tables, acknowledged: result.acknowledged, ok: result.ok }));
