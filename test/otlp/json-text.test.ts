// ObjectKeys, the repeated-key check of both attribute writers: a repeat is found whether the keys
// are compared one by one or looked up in a Set (past the first ones), only within one object.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ObjectKeys } from '../../src/otlp/json-text.ts';

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
