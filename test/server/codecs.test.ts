import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { describe, test } from 'node:test';
import * as zlib from 'node:zlib';
import { compressFrameSync } from 'lz4-napi';
import { Compressor, compressSync as snappyCompress } from 'snappy';
import { BodyError, codingsFor, decompress } from '../../src/server/body.ts';
import { isSnappyFramed } from '../../src/server/codecs.ts';

const LIMIT = 1024 * 1024;

/** A body as sent with `Content-Encoding: coding`, decoded as the server does. */
function undo(coding: string, body: Buffer, limit = LIMIT): Buffer {
  return decompress(body, codingsFor(coding), limit);
}

function refusal(fn: () => unknown): BodyError {
  try {
    fn();
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
  test('zlib and deflate: the zlib format, and raw deflate under "deflate"', () => {
    assert.ok(undo('zlib', zlib.deflateSync(payload)).equals(payload));
    assert.ok(undo('deflate', zlib.deflateSync(payload)).equals(payload));
    assert.ok(undo('deflate', zlib.deflateRawSync(payload)).equals(payload));
  });

  test('snappy: one raw block', () => {
    const block = snappyCompress(payload);
    assert.equal(isSnappyFramed(block), false);
    assert.ok(undo('snappy', block).equals(payload));
  });

  test('snappy and x-snappy-framed: the framing format, told apart by its stream identifier', async () => {
    const framed = await snappyFramed(payload);
    assert.equal(isSnappyFramed(framed), true);
    assert.ok(undo('snappy', framed).equals(payload));
    assert.ok(undo('x-snappy-framed', framed).equals(payload));
    // Two streams one after the other are one body.
    const small = randomBytes(100);
    assert.ok(
      undo('x-snappy-framed', Buffer.concat([framed, await snappyFramed(small)])).equals(
        Buffer.concat([payload, small]),
      ),
    );
    // x-snappy-framed is the framing format only.
    assert.equal(refusal(() => undo('x-snappy-framed', snappyCompress(payload))).statusCode, 400);
  });

  test('a snappy frame whose checksum does not match is 400', async () => {
    const framed = await snappyFramed(payload);
    framed[10 + 4] = framed[10 + 4]! ^ 0xff; // first chunk's checksum
    const err = refusal(() => undo('snappy', framed));
    assert.equal(err.statusCode, 400);
    assert.match(err.message, /checksum/);
  });

  test('lz4: the LZ4 frame format, more than one block', () => {
    const big = Buffer.concat(Array.from({ length: 3 }, () => payload)); // 750 KB > a 64 KiB block
    assert.ok(undo('lz4', compressFrameSync(big)).equals(big));
    // With a content checksum, as the Collector sends it: a changed byte is caught.
    const corrupt = compressFrameSync(payload, { contentChecksum: true });
    assert.ok(undo('lz4', corrupt).equals(payload));
    corrupt[corrupt.length - 20] = corrupt[corrupt.length - 20]! ^ 0xff;
    assert.equal(refusal(() => undo('lz4', corrupt)).statusCode, 400);
    assert.equal(refusal(() => undo('lz4', Buffer.from('not lz4 at all'))).statusCode, 400);
  });

  test('a body exactly at the limit passes in every coding', async () => {
    const exact = Buffer.alloc(LIMIT, 'otlp ');
    const encoders: [string, Buffer][] = [
      ['snappy', snappyCompress(exact)],
      ['x-snappy-framed', await snappyFramed(exact)],
      ['lz4', compressFrameSync(exact)],
      ['zlib', zlib.deflateSync(exact)],
    ];
    for (const [coding, body] of encoders) assert.equal(undo(coding, body).length, LIMIT, coding);
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
      const err = refusal(() => undo(coding, bomb));
      assert.equal(err.statusCode, 413, `${coding}: ${err.message}`);
      assert.match(err.message, /after decompression/);
    }
    // Inflating 64 MiB would raise the peak RSS by as much; refusing from the sizes does not.
    const grownKiB = process.resourceUsage().maxRSS - peakBefore;
    assert.ok(grownKiB < 32 * 1024, `peak RSS grew by ${grownKiB} KiB`);
  });

  test('every coding the Collector offers is known; an unknown one is 415 naming it', () => {
    for (const coding of ['gzip', 'zstd', 'deflate', 'zlib', 'snappy', 'x-snappy-framed', 'lz4']) {
      assert.deepEqual(codingsFor(coding), [coding]);
    }
    const err = refusal(() => codingsFor('compress'));
    assert.equal(err.statusCode, 415);
    assert.match(err.message, /unsupported Content-Encoding "compress".*snappy.*lz4/);
  });
});
