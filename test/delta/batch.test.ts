import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { BatchBuilder, type ColumnBatch, type ColumnData } from '../../src/delta/batch.ts';
import { computeStats } from '../../src/delta/stats.ts';
import { SCHEMAS } from '../../src/schema/tables.ts';

const schema = SCHEMAS.logs;
const names = schema.columns.map((c) => c.name);
const bodyIdx = names.indexOf('body');

function decode(col: ColumnData, n: number): (string | null)[] {
  assert.equal(col.kind, 'utf8');
  if (col.kind !== 'utf8') return [];
  const buf = Buffer.from(col.bytes.buffer, col.bytes.byteOffset, col.bytes.length);
  return Array.from({ length: n }, (_, i) =>
    col.valid && col.valid[i] !== 1 ? null : buf.toString('utf8', col.offsets[i], col.offsets[i + 1]),
  );
}

function build(bodies: (string | null)[], capacity = 4): ColumnBatch {
  const b = new BatchBuilder(schema, capacity);
  for (const body of bodies) {
    const values: unknown[] = names.map(() => null);
    values[names.indexOf('project_id')] = 'p';
    values[names.indexOf('event_ts')] = 1n;
    values[bodyIdx] = body;
    b.pushValues(values);
  }
  return b.finish();
}

describe('BatchBuilder string columns', () => {
  it('encode ASCII, multi-byte, astral and null values across chunks and growth', () => {
    const pool = ['plain', '', 'épée', '日本語', '🚀 launch', null, 'x'.repeat(3000), 'naïve'];
    const bodies = Array.from({ length: 2000 }, (_, i) => pool[i % pool.length]!);
    const batch = build(bodies);
    assert.equal(batch.numRows, 2000);
    assert.deepEqual(decode(batch.columns['body']!, 2000), bodies);
  });

  it('store a lone surrogate as U+FFFD without shifting its neighbours', () => {
    const bodies = ['a\uD83D', '\uDE80b', 'ok'];
    assert.deepEqual(decode(build(bodies).columns['body']!, 3), ['a\uFFFD', '\uFFFDb', 'ok']);
  });

  it('give the same stats as plain string arrays, comparing by code point', () => {
    // U+FF61 sorts before U+1F600 by code point but after it by UTF-16 units.
    // Repeated values (marked as repeats by the builder) must not hide a minimum or maximum.
    const bodies = ['m', 'm', '\uFF61', '\u{1F600}', '\u{1F600}', 'a', null, 'a', 'zz', 'zz'];
    const batch = build(bodies);
    const stats = computeStats(schema, batch);
    const asStrings = computeStats(schema, {
      numRows: batch.numRows,
      columns: { ...batch.columns, body: { kind: 'string', values: bodies } },
    });
    assert.deepEqual(stats, asStrings);
    assert.equal(stats.minValues['body'], 'a');
    assert.equal(stats.maxValues['body'], '\u{1F600}');
    assert.equal(stats.nullCount['body'], 1);
    const body = batch.columns['body']!;
    assert.ok(body.kind === 'utf8' && body.repeats);
    if (body.kind === 'utf8') assert.deepEqual([...body.repeats!], [0, 1, 0, 0, 1, 0, 0, 1, 0, 1]);
  });
});
