// List cells handed to a row sink are views of shared chunks (src/otlp/columns.ts): each must keep
// its own elements while later cells are made, across the end of a chunk.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { float64Cell, Int64List } from '../../src/otlp/columns.ts';

test('list cells keep their elements while later cells fill their chunk and the next', () => {
  const list = new Int64List();
  const longs: BigInt64Array[] = [];
  const doubles: Float64Array[] = [];
  // 2,000 cells of up to 12 elements: several chunks of 4,096 elements, and one longer than a chunk.
  for (let i = 0; i < 2000; i++) {
    const n = i === 1000 ? 5000 : i % 13;
    list.clear();
    for (let k = 0; k < n; k++) list.pushWords(i + k, k % 3 === 0 ? 0x8000_0000 : 1);
    longs.push(list.take());
    doubles.push(float64Cell(Array.from({ length: n }, (_, k) => i + k / 8)));
  }
  longs.forEach((cell, i) => {
    const n = i === 1000 ? 5000 : i % 13;
    assert.equal(cell.length, n);
    for (let k = 0; k < n; k++) {
      const hi = k % 3 === 0 ? 0x8000_0000n : 1n;
      assert.equal(cell[k], BigInt.asIntN(64, (hi << 32n) | BigInt(i + k)), `cell ${i} element ${k}`);
    }
  });
  doubles.forEach((cell, i) => {
    const n = i === 1000 ? 5000 : i % 13;
    assert.deepEqual(
      [...cell],
      Array.from({ length: n }, (_, k) => i + k / 8),
      `cell ${i}`,
    );
  });
});

test('int64 elements given as safe integers keep every bit, across the 32-bit boundary', () => {
  const list = new Int64List();
  const values = [0, 1, 2 ** 31, 2 ** 32 - 1, 2 ** 32, 2 ** 32 + 1, 123456789012345, 2 ** 53 - 1];
  for (const v of values) list.pushSafe(v);
  assert.deepEqual([...list.take()], values.map(BigInt));
});
