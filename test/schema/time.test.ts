import assert from 'node:assert/strict';
import { test } from 'node:test';
import { floorDiv, nanosToMicros } from '../../src/schema/time.ts';

test('floor division rounds toward negative infinity, for times before 1970 too', () => {
  assert.equal(floorDiv(1999n, 1000n), 1n);
  assert.equal(floorDiv(-1n, 1000n), -1n);
  assert.equal(floorDiv(-1000n, 1000n), -1n);
  assert.equal(floorDiv(-1001n, 1000n), -2n);
  assert.equal(floorDiv(5n, -2n), -3n);
  assert.equal(nanosToMicros(1_700_000_000_123_456_789n), 1_700_000_000_123_456n);
  assert.equal(nanosToMicros(-1n), -1n);
});
