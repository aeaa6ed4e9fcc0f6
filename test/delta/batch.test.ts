import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  Arena,
  BatchBuilder,
  batchFromRows,
  type ColumnBatch,
  type ColumnData,
  int64Extremes,
  joinBatches,
  type PackedBatch,
  packBatch,
  transferables,
  unpackBatch,
  utf8Value,
} from '../../src/delta/batch.ts';
import { computeStats } from '../../src/delta/stats.ts';
import { SCHEMAS } from '../../src/schema/tables.ts';
import { cells as table } from './cells.ts';
import { makeRows } from './rows.ts';

const schema = SCHEMAS.logs;
const names = schema.columns.map((c) => c.name);
const bodyIdx = names.indexOf('body');

function decode(col: ColumnData, n: number): (string | null)[] {
  assert.equal(col.kind, 'utf8');
  if (col.kind !== 'utf8') return [];
  return Array.from({ length: n }, (_, i) => utf8Value(col, i));
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

  it('store a repeat row without bytes; a slice starting on a repeat gets its value', () => {
    const bodies = ['a', 'a', null, 'a', 'bé', 'bé', null, null, 'bé', 'c'];
    const batch = build(bodies);
    const body = batch.columns['body']!;
    assert.ok(body.kind === 'utf8');
    if (body.kind !== 'utf8') return;
    assert.deepEqual([...body.repeats!], [0, 1, 0, 1, 0, 1, 0, 0, 1, 0]);
    // Only "a", "bé" and "c" are stored.
    assert.equal(body.offsets[bodies.length], 1 + 3 + 1);
    assert.deepEqual(decode(body, bodies.length), bodies);
    for (let from = 0; from < bodies.length; from++) {
      const slice = new BatchBuilder(schema, 2);
      slice.appendBatch(batch, from, bodies.length);
      const got = slice.finish();
      assert.deepEqual(decode(got.columns['body']!, got.numRows), bodies.slice(from), `from ${from}`);
      const col = got.columns['body']!;
      assert.ok(col.kind === 'utf8' && col.repeats?.[0] === 0, `from ${from}: the first row holds its value`);
      // Joined after the rows before it, the slice reads the same.
      const head = new BatchBuilder(schema, 2);
      head.appendBatch(batch, 0, from);
      const joined = joinBatches([head.finish(), got], names);
      assert.deepEqual(decode(joined.columns['body']!, bodies.length), bodies, `joined at ${from}`);
    }
  });
});

describe('BatchBuilder batches of batches (the server path)', () => {
  for (const name of Object.keys(SCHEMAS) as (keyof typeof SCHEMAS)[]) {
    it(`${name}: small packed batches, unpacked, appended in ranges or joined equal the rows pushed one by one`, () => {
      const s = SCHEMAS[name];
      const names = s.columns.map((c) => c.name);
      const rows = makeRows(s, 700, 11);
      const expected = table(batchFromRows(s, rows));
      // A reused builder makes one small batch per "request", each packed into one buffer: by the
      // builder itself (the decoders) or from its views, in turn.
      const small = new BatchBuilder(s, 8);
      const pieces: PackedBatch[] = [];
      for (let at = 0; at < rows.length; ) {
        const n = 1 + ((at * 7) % 90);
        for (const r of rows.slice(at, at + n)) small.push(r);
        const packed = pieces.length % 2 === 0 ? small.pack() : packBatch(small.view());
        small.clear();
        assert.deepEqual(transferables(packed), [packed.packed], 'one buffer per packed batch');
        assert.deepEqual(table(unpackBatch(packed, names)), expected.slice(at, at + n));
        pieces.push(packed);
        at += n;
      }
      // Appended in uneven ranges, as the aggregator splits a request where its hold limit falls.
      const target = new BatchBuilder(s, 4);
      for (const p of pieces) {
        const mid = p.numRows >> 1;
        target.appendBatch(unpackBatch(p, names), 0, mid);
        target.appendBatch(unpackBatch(p, names), mid, p.numRows);
      }
      const got = target.finish();
      assert.equal(got.numRows, rows.length);
      assert.deepEqual(table(got), expected);
      assert.deepEqual(computeStats(s, got), computeStats(s, batchFromRows(s, rows)));
      // The writer's worker joins the pieces in one go.
      const joined = joinBatches(pieces, names);
      assert.equal(joined.numRows, rows.length);
      assert.deepEqual(table(joined), expected);
      assert.deepEqual(computeStats(s, joined), computeStats(s, batchFromRows(s, rows)));
    });
  }

  it('a slice of a packed batch owns its buffers: moving it to a worker leaves the rest readable', () => {
    // metrics_hist has list columns; the aggregator slices a queued batch where its hold limit
    // falls and transfers the slice to the Parquet worker while the rest of the batch waits.
    const s = SCHEMAS.metrics_hist;
    const names = s.columns.map((c) => c.name);
    const rows = makeRows(s, 64, 5);
    const packed = packBatch(batchFromRows(s, rows));
    const slice = new BatchBuilder(s, 32);
    slice.appendBatch(unpackBatch(packed, names), 0, 32);
    const head = slice.view();
    assert.ok(!transferables(head).includes(packed.packed), 'the slice refers to the packed buffer');
    structuredClone(head, { transfer: transferables(head) }); // as postMessage to a worker
    assert.equal(packed.packed.detached, false);
    assert.deepEqual(table(unpackBatch(packed, names)).slice(32), table(batchFromRows(s, rows)).slice(32));
  });

  it('a string column given as plain strings appends like an encoded one', () => {
    const plain: ColumnBatch = build(['a', null, 'ü']);
    const strings: ColumnBatch = {
      numRows: 3,
      columns: { ...plain.columns, body: { kind: 'string', values: ['a', null, 'ü'] } },
    };
    const b = new BatchBuilder(schema, 2);
    b.appendBatch(strings);
    b.appendBatch(plain, 1);
    assert.deepEqual(decode(b.finish().columns['body']!, 5), ['a', null, 'ü', null, 'ü']);
  });
});

describe('packBatch', () => {
  it('rebases a string column whose offsets do not start at 0, and packs plain string arrays as utf8', () => {
    const bytes = new TextEncoder().encode('xyzabcdé');
    const col: ColumnData = {
      kind: 'utf8',
      bytes,
      offsets: Int32Array.of(3, 4, 6, 9),
      valid: null,
      repeats: null,
    };
    const packed = packBatch({ numRows: 3, columns: { s: col } });
    assert.deepEqual(decode(unpackBatch(packed, ['s']).columns['s']!, 3), ['a', 'bc', 'dé']);
    const strings = packBatch({ numRows: 3, columns: { s: { kind: 'string', values: ['a', null, 'a'] } } });
    assert.deepEqual(decode(unpackBatch(strings, ['s']).columns['s']!, 3), ['a', null, 'a']);
    assert.throws(() => unpackBatch(packed, ['s', 't']), /1 columns, expected 2/);
  });

  it('rebases a list column whose offsets do not start at 0, nulls and empty lists kept', () => {
    const col: ColumnData = {
      kind: 'list_long',
      items: BigInt64Array.of(9n, 9n, 1n, 2n, 3n),
      offsets: Int32Array.of(2, 4, 4, 4, 5),
      valid: Uint8Array.of(1, 0, 1, 1),
    };
    const packed = packBatch({ numRows: 4, columns: { l: col } });
    assert.deepEqual(table(unpackBatch(packed, ['l'])), [[[1n, 2n]], [null], [[]], [[3n]]]);
  });
});

describe('joinBatches', () => {
  it('joins parts given as columns in any key order, plain strings included, with packed ones', () => {
    const s = SCHEMAS.metrics_hist;
    const names = s.columns.map((c) => c.name);
    const rows = makeRows(s, 30, 8);
    const first = batchFromRows(s, rows.slice(0, 10));
    const reordered: ColumnBatch = {
      numRows: 10,
      columns: Object.fromEntries(Object.entries(batchFromRows(s, rows.slice(10, 20)).columns).reverse()),
    };
    const metric = reordered.columns['metric_name']!;
    const plain: ColumnBatch = {
      ...reordered,
      columns: { ...reordered.columns, metric_name: { kind: 'string', values: decode(metric, 10) } },
    };
    const joined = joinBatches([first, plain, packBatch(batchFromRows(s, rows.slice(20)))], names);
    assert.deepEqual(table(joined), table(batchFromRows(s, rows)));
  });

  it('refuses a truncated packed part and parts whose columns differ', () => {
    const s = SCHEMAS.logs;
    const names = s.columns.map((c) => c.name);
    const whole = packBatch(batchFromRows(s, makeRows(s, 20, 2)));
    const cut = { numRows: 20, packed: whole.packed.slice(0, whole.packed.byteLength - 64) };
    assert.throws(() => joinBatches([whole, cut], names), /truncated/);
    const other = packBatch(batchFromRows(SCHEMAS.spans, makeRows(SCHEMAS.spans, 5, 2)));
    assert.throws(() => joinBatches([whole, other], names), /columns, expected 23/);
  });
});

describe('joinBatches with an arena', () => {
  it('reuses one buffer from join to join, whatever the previous join left in it', () => {
    const s = SCHEMAS.spans;
    const names = s.columns.map((c) => c.name);
    const arena = new Arena();
    const pieces = (seed: number, count: number): PackedBatch[] => {
      const out: PackedBatch[] = [];
      for (let i = 0; i < count; i++) out.push(packBatch(batchFromRows(s, makeRows(s, 20 + i, seed + i))));
      return out;
    };
    const first = pieces(1, 6);
    const joined1 = joinBatches(first, names, arena);
    assert.deepEqual(table(joined1), table(joinBatches(first, names)));
    // The first join sized the arena; the second fills its buffer, the third writes over it:
    // nulls and repeats must not leak from the rows before.
    const second = pieces(50, 5);
    const joined2 = joinBatches(second, names, arena);
    assert.deepEqual(table(joined2), table(joinBatches(second, names)));
    const buffers = new Set(transferables(joined2));
    assert.equal(buffers.size, 1, 'every column of the join lives in the arena');
    const third = pieces(90, 5);
    const joined3 = joinBatches(third, names, arena);
    assert.deepEqual(transferables(joined3), [...buffers], 'the same buffer, reused');
    assert.deepEqual(table(joined3), table(joinBatches(third, names)));
    assert.deepEqual(computeStats(s, joined3), computeStats(s, joinBatches(third, names)));
  });
});

describe('int64Extremes', () => {
  it('finds the rows of the smallest and largest valid value, as BigInt comparison does', () => {
    // Values that differ only in the low word (whose top bit is set: unsigned), only in the high
    // word, across zero, and the int64 range's ends.
    const edge = [
      -(2n ** 63n),
      2n ** 63n - 1n,
      0n,
      -1n,
      1n,
      0x7fffffffn,
      0x80000000n,
      0xffffffffn,
      0x100000000n,
      -0x80000000n,
      -0x80000001n,
      -0x100000000n,
      1_718_000_000_000_000_000n,
    ];
    let seed = 7;
    const next = () => {
      seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31;
      return seed;
    };
    for (let round = 0; round < 300; round++) {
      const n = 1 + (next() % 40);
      const values = new BigInt64Array(n);
      for (let i = 0; i < n; i++) {
        const pick = next() % 3;
        values[i] =
          pick === 0
            ? edge[next() % edge.length]!
            : BigInt.asIntN(64, (BigInt(next()) << 33n) ^ (BigInt(next()) << 2n) ^ BigInt(next()));
      }
      const valid = round % 2 === 0 ? null : Uint8Array.from({ length: n }, () => (next() % 4 === 0 ? 0 : 1));
      const from = next() % n;
      const to = from + (next() % (n - from + 1));
      let want: [bigint, bigint] | null = null;
      for (let i = from; i < to; i++) {
        if (valid !== null && valid[i] !== 1) continue;
        const v = values[i]!;
        if (want === null) want = [v, v];
        else if (v < want[0]) want[0] = v;
        else if (v > want[1]) want[1] = v;
      }
      const rows = int64Extremes(values, valid, from, to);
      const got = rows === null ? null : [values[rows[0]]!, values[rows[1]]!];
      assert.deepEqual(got, want, `round ${round}: ${[...values.subarray(from, to)]}`);
      if (rows !== null)
        for (const r of rows) assert.ok(r >= from && r < to && (valid === null || valid[r] === 1));
    }
  });

  it('reads a view that starts inside its buffer', () => {
    const buffer = new BigInt64Array([5n, -9n, 3n, 2n ** 40n, -(2n ** 40n)]).buffer;
    const view = new BigInt64Array(buffer, 16, 3);
    assert.deepEqual(int64Extremes(view, null, 0, 3), [2, 1]);
  });
});

describe('packed batches', () => {
  it('hold zeros in the gaps between their arrays, though the buffer is not zero-filled', () => {
    // Odd lengths everywhere (7 rows: validity and repeats of 7 bytes, strings of odd sizes), and
    // memory freed after being filled with 0xab, for the allocator to hand out again.
    const s = SCHEMAS.metrics_hist;
    const names = s.columns.map((c) => c.name);
    const rows = makeRows(s, 7, 4);
    const b = new BatchBuilder(s, 8);
    for (const r of rows) b.push(r);
    for (let round = 0; round < 300; round++) {
      const packed = b.pack();
      for (let k = 0; k < 20; k++) Buffer.allocUnsafeSlow(packed.packed.byteLength).fill(0xab);
      const bytes = new Uint8Array(packed.packed);
      const header = new Int32Array(packed.packed, 0, 1 + names.length * 6);
      const used = new Uint8Array(bytes.length);
      used.fill(1, 0, header.byteLength);
      const mark = (at: number, length: number) => {
        if (at >= 0) used.fill(1, at, at + length);
      };
      names.forEach((_, j) => {
        const [kind, a, n, c, d, e] = header.subarray(1 + j * 6, 7 + j * 6);
        const size = [1, 8, 8, 4, 8, 1, 8, 8][kind!]!;
        mark(a!, (kind === 0 || kind! >= 6 ? n! : 7) * size);
        mark(c!, 8 * 4);
        mark(d!, 7);
        mark(e!, 7);
      });
      for (let i = 0; i < bytes.length; i++)
        if (!used[i]) assert.equal(bytes[i], 0, `round ${round}, gap byte ${i}`);
      assert.deepEqual(table(unpackBatch(packed, names)), table(batchFromRows(s, rows)));
    }
  });
});
