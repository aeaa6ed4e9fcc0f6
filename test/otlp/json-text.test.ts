// ObjectKeys, the repeated-key check of both attribute writers: a repeat is found whether the keys
// are compared one by one or looked up in a Set (past the first ones), only within one object.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ObjectKeys, writeShortDouble } from '../../src/otlp/json-text.ts';

/** A body of the given keys, one after another, and the range of each. */
function body(keys: readonly string[]): { keys: ObjectKeys; range: (i: number) => [number, number] } {
  const buf = Buffer.from(keys.join(''));
  const starts: number[] = [];
  let at = 0;
  for (const k of keys) {
    starts.push(at);
    at += Buffer.byteLength(k);
  }
  return { keys: new ObjectKeys(buf), range: (i) => [starts[i]!, starts[i]! + Buffer.byteLength(keys[i]!)] };
}

test('a repeated key is found among few keys and among many, wherever the first one stands', () => {
  for (const n of [2, 31, 32, 33, 100, 5000]) {
    for (const first of new Set([0, Math.floor((n - 1) / 2), n - 2])) {
      const names = Array.from({ length: n - 1 }, (_, i) => `key.${i}`);
      names.push(names[first]!);
      const { keys, range } = body(names);
      keys.open();
      for (let i = 0; i < n - 1; i++) assert.equal(keys.add(...range(i)), true, `${n} keys: key ${i} is new`);
      assert.equal(keys.add(...range(n - 1)), false, `${n} keys: the last repeats key ${first}`);
    }
  }
});

test('keys of equal length and bytes beyond ASCII are told apart by every byte', () => {
  const names = Array.from(
    { length: 64 },
    (_, i) => `é${String.fromCharCode(0x41 + (i % 26))}${i >= 26 ? 'x' : ''}${i >= 52 ? 'y' : ''}`,
  );
  names.push('éA', 'éAx', 'éB');
  const { keys, range } = body(names);
  keys.open();
  for (let i = 0; i < 64; i++) assert.equal(keys.add(...range(i)), true, names[i]);
  for (let i = 64; i < names.length; i++) assert.equal(keys.add(...range(i)), false, `${names[i]} repeats`);
});

test('each object has its own keys; closing one leaves those of the object around it', () => {
  const names = Array.from({ length: 50 }, (_, i) => `k${i}`);
  const { keys, range } = body(names);
  for (const before of [10, 40]) {
    keys.reset();
    keys.open();
    for (let i = 0; i < before; i++) assert.ok(keys.add(...range(i)));
    keys.open(); // a map among the list's values: the list's keys are new in it
    for (let i = 0; i < 50; i++) assert.ok(keys.add(...range(i)), `inner k${i}`);
    assert.equal(keys.add(...range(45)), false, 'a repeat inside the map');
    keys.close();
    for (let i = before; i < 50; i++) assert.ok(keys.add(...range(i)), `outer k${i}: added in the map only`);
    assert.equal(keys.add(...range(3)), false, 'a repeat of the list, after the map');
  }
  keys.reset();
  keys.open();
  assert.ok(keys.add(...range(3)), 'a new list');
});

test('an integer-like key (which a JS object orders first) is refused; an empty key is not', () => {
  const { keys, range } = body(['123', '1a', '', '0']);
  keys.open();
  assert.equal(keys.add(...range(0)), false);
  assert.equal(keys.add(...range(1)), true);
  assert.equal(keys.add(...range(2)), true);
  assert.equal(keys.add(...range(3)), false);
});

test('a double of three decimals or fewer below 1e9 is written as String spells it; any other is left to String', () => {
  const out = Buffer.alloc(32);
  const written = (x: number) => {
    const end = writeShortDouble(out, 0, x);
    return end < 0 ? null : out.toString('latin1', 0, end);
  };
  for (const [x, text] of [
    [0, '0'],
    [-0, '0'],
    [7, '7'],
    [-7, '-7'],
    [0.001, '0.001'],
    [-0.05, '-0.05'],
    [123.25, '123.25'],
    [0.1 + 0.2, null], // 0.30000000000000004
    [999999999.999, '999999999.999'],
    [1e9, null],
    [0.0005, null],
    [1.0005, null],
    [2 ** 52 + 0.5, null],
    [Number.NaN, null],
    [Number.POSITIVE_INFINITY, null],
    [Number.NEGATIVE_INFINITY, null],
  ] as const)
    assert.equal(written(x), text, `${x}`);
  // Decimals of 0-5 places across magnitudes, and the doubles next to them: what is written is String's.
  let seed = 7;
  const rand = () => {
    seed = (Math.imul(seed, 1103515245) + 12345) >>> 0;
    return seed / 2 ** 32;
  };
  let fast = 0;
  for (let i = 0; i < 200_000; i++) {
    const places = i % 6;
    const x = Math.round(rand() * 10 ** ((i % 12) - 3 + places)) / 10 ** places;
    for (const y of [x, -x, x * (1 + Number.EPSILON), x + 1e-9]) {
      const text = written(y);
      if (text === null) continue;
      fast++;
      assert.equal(text, String(y));
    }
  }
  assert.ok(fast > 300_000, `${fast} written without String`);
});
