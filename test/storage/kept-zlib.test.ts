// A kept node:zlib stream compressing (the Parquet writer's pages, src/delta/parquet-encoding.ts):
// byte for byte what the one-shot call makes, one context and one output buffer for all. Its
// decompressing use is tested with the decoders (test/server/kept-decompressors.test.ts).

import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { test } from 'node:test';
import { constants, createZstdCompress, zstdCompressSync, zstdDecompressSync } from 'node:zlib';
import { KeptZlibStream, MAX_OUTPUT_BYTES } from '../../src/storage/kept-zlib.ts';

/** Pages as a writer makes them: runs, small integers, text, and bytes that do not compress. */
function page(bytes: number, seed: number): Buffer {
  const b = Buffer.alloc(bytes);
  for (let i = 0; i < bytes; i++) b[i] = seed % 3 === 0 ? (i >> 6) & 0xff : (i * 7 + (i >> 4) * seed) & 0x3f;
  if (seed % 4 === 1) randomBytes(bytes >> 1).copy(b);
  return b;
}

const options = (level: number) => ({ params: { [constants.ZSTD_c_compressionLevel]: level } });

/** A kept zstd compressor; `keptLevel` stands for internals that make something else than `level`. */
function zstdStream(level: number, keptLevel = level): KeptZlibStream {
  return new KeptZlibStream(
    () => createZstdCompress(options(keptLevel)),
    constants.ZSTD_e_end,
    (input, limits) => zstdCompressSync(input, { ...options(level), ...limits }),
    { resetAfterInput: false },
  );
}

test('zstd: pages of growing and shrinking sizes compress as zstdCompressSync does, in one output buffer', () => {
  for (const level of [1, 3, 9]) {
    const kept = zstdStream(level);
    assert.equal(kept.keepsContext, true); // fails where Node's internals changed
    const buffers = new Set<ArrayBufferLike>();
    const sizes = [70_000, 0, 1, 300, 9_000, 1 << 20, 17, 64_000, 200_000];
    sizes.forEach((n, seed) => {
      const input = page(n, seed);
      const out = kept.transform(input, n + 1024, MAX_OUTPUT_BYTES);
      assert.ok(out.equals(zstdCompressSync(input, options(level))), `level ${level}, ${n} bytes`);
      assert.ok(zstdDecompressSync(out).equals(input));
      buffers.add(out.buffer);
    });
    // One buffer for the first page, and one when a page outgrew it (1 MiB).
    assert.equal(buffers.size, 2, `level ${level}`);
  }
});

test("zstd: an output past the hint grows the buffer within a page, and is still the one-shot call's", () => {
  for (const level of [1, 3]) {
    const kept = zstdStream(level);
    const input = page(200_000, 1); // half random bytes: ~100 KB of output from a 64-byte start
    const out = kept.transform(input, 10, MAX_OUTPUT_BYTES);
    assert.ok(out.length > 100_000);
    assert.ok(out.equals(zstdCompressSync(input, options(level))), `level ${level}`);
    const next = page(9_000, 2); // the frame after a grown one starts clean
    assert.ok(kept.transform(next, 10, MAX_OUTPUT_BYTES).equals(zstdCompressSync(next, options(level))));
  }
});

test('zstd: the output is a view the next page overwrites', () => {
  const kept = zstdStream(3);
  const first = kept.transform(page(5_000, 2), 6_000, MAX_OUTPUT_BYTES);
  const copy = Buffer.from(first);
  kept.transform(page(5_000, 5), 6_000, MAX_OUTPUT_BYTES);
  assert.equal(first.buffer, kept.transform(page(10, 1), 100, MAX_OUTPUT_BYTES).buffer);
  assert.ok(!first.equals(copy), 'the caller copies what it keeps');
});

test('zstd: a context that makes other bytes than the one-shot call on the sample is not kept', () => {
  const sample = page(4096, 2);
  assert.equal(zstdStream(3).checkedWith(sample).keepsContext, true);
  const other = zstdStream(9, 1).checkedWith(sample);
  assert.equal(other.keepsContext, false);
  const input = page(50_000, 6);
  assert.ok(other.transform(input, 60_000, MAX_OUTPUT_BYTES).equals(zstdCompressSync(input, options(9))));
});
