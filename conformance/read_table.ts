// Opens a Delta table with otelake's engine and prints its version, live files and row count as
// JSON (the conformance tests use it on tables another engine maintained).
//
//   node conformance/read_table.ts <table-dir>

import { DeltaTable } from '../src/delta/table.ts';

const dir = process.argv[2];
if (!dir) {
  console.error('usage: node conformance/read_table.ts <table-dir>');
  process.exit(2);
}
const t = await DeltaTable.open(dir);
process.stdout.write(
  JSON.stringify({ version: t.version, files: t.files.map((f) => f.path), rowCount: t.rowCount() }),
);
