import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { describe, test } from 'node:test';
import * as zlib from 'node:zlib';
import { compressFrameSync } from 'lz4-napi';
import { Compressor, compressSync as snappyCompress } from 'snappy';
import { BodyError, codingsFor, decompress, decompressAsync } from '../../src/server/body.ts';
import { isSnappyFramed } from '../../src/server/codecs.ts';

const LIMIT = 1024 * 1024;

/** A body as sent with `Content-Encoding: coding`, decoded as the server does. */
function undo(coding: string, body: Buffer, limit = LIMIT): Promise<Buffer> {
  return decompressAsync(body, codingsFor(coding), limit);
}

async function refusal(fn: () => unknown): Promise<BodyError> {
  try {
    await fn();
  } catch (err) {
    assert.ok(err instanceof BodyError, `expected a BodyError, got ${String(err)}`);
    return err;
  }
  assert.fail('expected a refusal');
}

/** The snappy framing format as snappy's own streaming encoder writes it. */
async function snappyFramed(data: Buffer): Promise<Buffer> {
  const c = new Compressor();
  const head = c.update(data);
  return Buffer.concat([head, await c.finish()]);
}

// Compressible and incompressible parts, over several 64 KiB frame chunks and LZ4 blocks.
const payload = Buffer.concat([
  randomBytes(70_000),
  Buffer.alloc(150_000, 'otlp span '),
  randomBytes(30_000),
]);

describe('the codings of the Collector', () => {
  test('zlib and deflate: the zlib format, and raw deflate under "deflate"', async () => {
    assert.ok((await undo('zlib', zlib.deflateSync(payload))).equals(payload));
    assert.ok((await undo('deflate', zlib.deflateSync(payload))).equals(payload));
    assert.ok((await undo('deflate', zlib.deflateRawSync(payload))).equals(payload));
  });

  test('snappy: one raw block', async () => {
    const block = snappyCompress(payload);
    assert.equal(isSnappyFramed(block), false);
    assert.ok((await undo('snappy', block)).equals(payload));
  });

  test('snappy and x-snappy-framed: the framing format, told apart by its stream identifier', async () => {
    const framed = await snappyFramed(payload);
    assert.equal(isSnappyFramed(framed), true);
    assert.ok((await undo('snappy', framed)).equals(payload));
    assert.ok((await undo('x-snappy-framed', framed)).equals(payload));
    // Two streams one after the other are one body.
    const small = randomBytes(100);
    assert.ok(
      (await undo('x-snappy-framed', Buffer.concat([framed, await snappyFramed(small)]))).equals(
        Buffer.concat([payload, small]),
      ),
    );
    // x-snappy-framed is the framing format only.
    assert.equal((await refusal(() => undo('x-snappy-framed', snappyCompress(payload)))).statusCode, 400);
  });

  test('a snappy frame whose checksum does not match is 400', async () => {
    const framed = await snappyFramed(payload);
    framed[10 + 4] = framed[10 + 4]! ^ 0xff; // first chunk's checksum
    const err = await refusal(() => undo('snappy', framed));
    assert.equal(err.statusCode, 400);
    assert.match(err.message, /checksum/);
  });

  test('lz4: the LZ4 frame format, more than one block', async () => {
    const big = Buffer.concat(Array.from({ length: 3 }, () => payload)); // 750 KB > a 64 KiB block
    assert.ok((await undo('lz4', compressFrameSync(big))).equals(big));
    // With a content checksum, as the Collector sends it: a changed byte is caught.
    const corrupt = compressFrameSync(payload, { contentChecksum: true });
    assert.ok((await undo('lz4', corrupt)).equals(payload));
    corrupt[corrupt.length - 20] = corrupt[corrupt.length - 20]! ^ 0xff;
    assert.equal((await refusal(() => undo('lz4', corrupt))).statusCode, 400);
    assert.equal((await refusal(() => undo('lz4', Buffer.from('not lz4 at all')))).statusCode, 400);
  });

  test('lz4 is undone off the thread, and what it allocates is freed', async () => {
    // lz4-napi's decompressFrameSync kept ~128 KiB of every 66 KB body: 2,000 bodies grew RSS by
    // ~250 MiB. decompressAsync (its decompressFrame) frees them; the synchronous path refuses lz4.
    const body = compressFrameSync(Buffer.alloc(66_000, 'otlp log record '));
    assert.throws(() => decompress(body, ['lz4'], LIMIT), /decompressAsync/);
    for (let i = 0; i < 200; i++) await undo('lz4', body); // warm up
    const before = process.memoryUsage().rss;
    for (let i = 0; i < 2_000; i++) assert.equal((await undo('lz4', body)).length, 66_000);
    const grownMiB = (process.memoryUsage().rss - before) / 2 ** 20;
    assert.ok(grownMiB < 100, `RSS grew by ${grownMiB.toFixed(0)} MiB over 2,000 lz4 bodies`);
  });

  test('a body exactly at the limit passes in every coding', async () => {
    const exact = Buffer.alloc(LIMIT, 'otlp ');
    const encoders: [string, Buffer][] = [
      ['snappy', snappyCompress(exact)],
      ['x-snappy-framed', await snappyFramed(exact)],
      ['lz4', compressFrameSync(exact)],
      ['zlib', zlib.deflateSync(exact)],
    ];
    for (const [coding, body] of encoders) assert.equal((await undo(coding, body)).length, LIMIT, coding);
  });

  test('bombs are refused with 413 from the sizes they announce, without inflating', async () => {
    const zeros = Buffer.alloc(64 * 1024 * 1024);
    const bombs: [string, Buffer][] = [
      ['snappy', snappyCompress(zeros)],
      ['x-snappy-framed', await snappyFramed(zeros)],
      ['lz4', compressFrameSync(zeros)],
    ];
    // A raw block whose length preamble announces 4 GiB - 1: refused before decoding.
    bombs.push(['snappy', Buffer.from([0xff, 0xff, 0xff, 0xff, 0x0f, 0x00])]);
    const peakBefore = process.resourceUsage().maxRSS;
    for (const [coding, bomb] of bombs) {
      assert.ok(bomb.length < 4 * 1024 * 1024, `${coding} bomb of ${bomb.length} bytes`);
      const err = await refusal(() => undo(coding, bomb));
      assert.equal(err.statusCode, 413, `${coding}: ${err.message}`);
      assert.match(err.message, /after decompression/);
    }
    // Inflating 64 MiB would raise the peak RSS by as much; refusing from the sizes does not.
    const grownKiB = process.resourceUsage().maxRSS - peakBefore;
    assert.ok(grownKiB < 32 * 1024, `peak RSS grew by ${grownKiB} KiB`);
  });

  test('every coding the Collector offers is known; an unknown one is 415 naming it', async () => {
    for (const coding of ['gzip', 'zstd', 'deflate', 'zlib', 'snappy', 'x-snappy-framed', 'lz4']) {
      assert.deepEqual(codingsFor(coding), [coding]);
    }
    const err = await refusal(() => codingsFor('compress'));
    assert.equal(err.statusCode, 415);
    assert.match(err.message, /unsupported Content-Encoding "compress".*snappy.*lz4/);
  });
});
