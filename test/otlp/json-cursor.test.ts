// The JSON cursor's quoted int64 reader against BigInt's own parsing: every length of 1 to 19
// digits, the powers of two where the words carry, and values past 2^63 (kept as their bits).
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { JsonCursor } from '../../src/otlp/json-cursor.ts';

const read = (digits: string) => new JsonCursor(Buffer.from(`"${digits}"`)).digits64();

test('quoted decimals of 1-19 digits read as the int64 BigInt makes of them', () => {
  let seed = 11;
  const digit = () => {
    seed = (seed * 1103515245 + 12345) % 2 ** 31;
    return String(seed % 10);
  };
  const values = ['0', '7', '9007199254740991', '9007199254740993', '18446744073709551615'.slice(0, 19)];
  for (let e = 0n; e < 64n; e++) for (const d of [-1n, 0n, 1n]) values.push(String((1n << e) + d));
  values.push(String(10n ** 18n), String(10n ** 19n - 1n), String(2n ** 63n - 1n), String(2n ** 63n));
  for (let i = 0; i < 2000; i++) values.push(Array.from({ length: 1 + (i % 19) }, digit).join(''));
  for (const v of values) {
    if (v.length > 19) continue;
    assert.equal(read(v), BigInt.asIntN(64, BigInt(v)), v);
  }
  // 20 digits and what is not a quoted decimal are left to the general reader.
  assert.equal(read('18446744073709551615'), undefined);
  assert.equal(read('12a'), undefined);
  assert.equal(read(''), undefined);
});

test('quoted decimals of 1-15 digits read as exact numbers; any other value is left unread', () => {
  const cursor = (text: string) => new JsonCursor(Buffer.from(text));
  for (const v of ['0', '1', '4294967295', '4294967296', '999999999999999', '000123']) {
    assert.equal(cursor(`"${v}"`).digits15(), Number(v), v);
  }
  // 16 digits (beyond 2^53 from here on), an empty string, a sign, a bare number: -1, and the
  // cursor has not moved, so the int64 reader still reads the first.
  for (const text of ['"9007199254740993"', '""', '"-1"', '12', '"1e3"']) {
    const c = cursor(text);
    assert.equal(c.digits15(), -1, text);
    assert.equal(c.digits64(), text === '"9007199254740993"' ? 9007199254740993n : undefined, text);
  }
});
