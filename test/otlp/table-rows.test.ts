// TableRows hands each row to its sink where it lies in the cells array (src/otlp/columns.ts): a
// cell no mapper wrote must reach the sink as null, never undefined, however far the rows grew past
// the room the array was made with, and after rows were forgotten.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { type RowSink, TableRows } from '../../src/otlp/columns.ts';
import { SCHEMAS, type TableName } from '../../src/schema/tables.ts';

class Copies implements RowSink {
  rows: unknown[][] = [];
  row(_table: TableName, cells: unknown[], at: number): void {
    this.rows.push(cells.slice(at, at + SCHEMAS.logs.columns.length));
  }
  restart(): void {
    this.rows = [];
  }
}

test('rows past the first room and after a truncate reach the sink with null in every unwritten cell', () => {
  const width = SCHEMAS.logs.columns.length;
  const body = SCHEMAS.logs.columns.findIndex((c) => c.name === 'body');
  const sink = new Copies();
  // A first flush of 3 rows sizes the next array for 3; the second batch grows it several times.
  for (const rows of [3, 1000]) {
    const t = new TableRows('logs');
    for (let i = 0; i < rows + 5; i++) t.set(body, t.add(), `row ${i}`);
    t.truncate(rows); // the last 5 forgotten: their cells back to null
    for (let i = rows; i < rows + 2; i++) t.add();
    t.flush(sink);
  }
  assert.equal(sink.rows.length, 3 + 2 + 1000 + 2);
  sink.rows.forEach((row, k) => {
    assert.equal(row.length, width);
    const i = k < 5 ? k : k - 5;
    const written = k < 5 ? k < 3 : i < 1000;
    // By index, not forEach, which skips holes.
    for (let j = 0; j < width; j++) {
      if (j === body && written) assert.equal(row[j], `row ${i}`, `row ${k}`);
      else assert.equal(row[j], null, `row ${k} column ${j}`);
    }
  });
});
