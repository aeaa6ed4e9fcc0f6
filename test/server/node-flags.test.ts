import assert from 'node:assert/strict';
import { test } from 'node:test';
import { serverNodeFlags } from '../../src/server/node-flags.ts';

test('a server process gets single-threaded GC on 2 cores or fewer, once', () => {
  assert.deepEqual(serverNodeFlags(1, []), ['--single-threaded-gc']);
  assert.deepEqual(serverNodeFlags(2, ['--enable-source-maps']), ['--single-threaded-gc']);
  assert.deepEqual(serverNodeFlags(3, []), []);
  assert.deepEqual(serverNodeFlags(2, ['--single-threaded-gc']), [], 'already given by the caller');
});
