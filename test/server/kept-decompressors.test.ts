// The decompressors a decoder keeps across bodies (src/server/kept-decompressors.ts, each a kept
// stream of src/storage/kept-zlib.ts) against Node's one-shot calls, and a decoder whose bodies all
// inflate into one buffer.

import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mock, test } from 'node:test';
import * as zlib from 'node:zlib';
import { logsRequest } from '../../bench/otlp-payloads.ts';
import { loadProtobuf, type ProtoCodec, type Signal } from '../../src/otlp/index.ts';
import { decompress } from '../../src/server/body.ts';
import { type DecodeResult, RequestDecoder } from '../../src/server/decode.ts';
import {
  checkZstdFrames,
  KeptDecompressors,
  zstdDecompressFrames,
} from '../../src/server/kept-decompressors.ts';
import { OutputTooLargeError } from '../../src/storage/kept-zlib.ts';
import { ARRIVAL_MS, DEFAULT_SETTINGS } from '../otlp/helpers.ts';
import { jsonForms, protobufForm, randomRequest } from '../otlp/random-requests.ts';

const LIMIT = 1 << 20;

/** Text-like bytes that deflate well, different for each seed. */
function payload(bytes: number, seed: number): Buffer {
  const words = ['span', 'http.route', '/api/v1/orders', 'GET', 'service.name', 'checkout', `${seed}`];
  let text = '';
  for (let i = 0; text.length < bytes; i++) text += `${words[(i * 7 + seed) % words.length]} ${i % 97};`;
  return Buffer.from(text.slice(0, bytes));
}

/** What the one-shot call makes of a body, or its error's message. */
function oneShot(f: (b: Buffer) => Buffer, body: Buffer): Buffer | string {
  try {
    return f(body);
  } catch (err) {
    return (err as Error).message;
  }
}

const zstdCompress = (zlib as unknown as { zstdCompressSync: (b: Buffer) => Buffer }).zstdCompressSync;

test('every decompressor keeps one context on this Node', () => {
  const kept = new KeptDecompressors();
  // Fails where Node's internals changed: bodies would then each take a one-shot call again.
  for (const decompressor of [kept.gunzip, kept.inflate, kept.inflateRaw, kept.zstd])
    assert.equal(decompressor?.keepsContext, true);
});

test('gzip: bodies of growing and shrinking sizes, each as gunzipSync makes it, in one output buffer', () => {
  const { gunzip } = new KeptDecompressors();
  const sizes = [66_000, 0, 1, 100, 5_000, 300_000, 17, 70_000];
  const buffers = new Set<ArrayBufferLike>();
  sizes.forEach((n, seed) => {
    const plain = payload(n, seed);
    const body = zlib.gzipSync(plain);
    const out = gunzip.transform(body, body.readUInt32LE(body.length - 4) + 1, LIMIT);
    assert.ok(out.equals(plain), `${n} bytes`);
    buffers.add(out.buffer);
  });
  // One buffer for the first body, and one when a body outgrew it (300,000 bytes).
  assert.equal(buffers.size, 2);
});

test('gzip: a size hint that is wrong either way costs nothing but a copy', () => {
  const { gunzip } = new KeptDecompressors();
  const plain = payload(200_000, 3);
  const body = zlib.gzipSync(plain);
  for (const hint of [1, 64, 1000, 199_999, 200_000, 200_001, 900_000]) {
    assert.ok(gunzip.transform(body, hint, LIMIT).equals(plain), `hint ${hint}`);
  }
});

test('gzip: several members make one body, trailing zeros are ignored, as gunzipSync does', () => {
  const { gunzip } = new KeptDecompressors();
  const parts = [payload(30_000, 1), payload(10, 2), payload(50_000, 3)];
  const members = Buffer.concat(parts.map((p) => zlib.gzipSync(p)));
  // The trailer of the last member announces its own size only.
  assert.ok(gunzip.transform(members, 50_001, LIMIT).equals(Buffer.concat(parts)));
  const padded = Buffer.concat([zlib.gzipSync(parts[0]!), Buffer.alloc(7)]);
  assert.ok(gunzip.transform(padded, 30_001, LIMIT).equals(zlib.gunzipSync(padded)));
});

test('gzip: a corrupt, truncated or foreign body fails as gunzipSync fails, and the next body inflates', () => {
  const { gunzip } = new KeptDecompressors();
  const plain = payload(40_000, 5);
  const good = zlib.gzipSync(plain);
  const badCrc = Buffer.from(good);
  badCrc[badCrc.length - 6]! ^= 0xff;
  const badData = Buffer.from(good);
  badData[good.length >> 1]! ^= 0x55;
  const trailingGarbage = Buffer.concat([good, Buffer.from('not gzip')]);
  const bad = [badCrc, badData, good.subarray(0, good.length - 3), good.subarray(0, 100), trailingGarbage];
  for (const body of [...bad, randomBytes(500), Buffer.alloc(0)]) {
    const expected = oneShot(zlib.gunzipSync, body);
    assert.equal(typeof expected, 'string', 'gunzipSync refuses it');
    assert.throws(() => gunzip.transform(body, 40_001, LIMIT), { message: expected as string });
    assert.ok(gunzip.transform(good, 40_001, LIMIT).equals(plain), 'the next body');
  }
});

test('gzip: a body that inflates past the limit is refused, whatever its trailer says, and the next inflates', () => {
  const { gunzip } = new KeptDecompressors();
  const limit = 100_000;
  const fits = payload(limit, 2);
  for (const n of [limit + 1, 5 * limit]) {
    const body = zlib.gzipSync(payload(n, 1));
    for (const hint of [64, n + 1]) {
      assert.throws(() => gunzip.transform(body, hint, limit), OutputTooLargeError);
      assert.ok(gunzip.transform(zlib.gzipSync(fits), 64, limit).equals(fits), 'the next body');
    }
  }
});

test('deflate: zlib-wrapped and raw bodies, as inflateSync and inflateRawSync make them', () => {
  const kept = new KeptDecompressors();
  for (const [n, seed] of [
    [50_000, 1],
    [10, 2],
    [400_000, 3],
  ] as const) {
    const plain = payload(n, seed);
    assert.ok(kept.inflate.transform(zlib.deflateSync(plain), n, LIMIT).equals(plain));
    assert.ok(kept.inflateRaw.transform(zlib.deflateRawSync(plain), 64, LIMIT).equals(plain));
  }
  // Bytes after the end of the stream are ignored, as Node's one-shot calls ignore them.
  const plain = payload(5000, 4);
  const trailing = Buffer.from('trailing bytes');
  assert.ok(
    kept.inflate.transform(Buffer.concat([zlib.deflateSync(plain), trailing]), 64, LIMIT).equals(plain),
  );
  assert.ok(
    kept.inflateRaw.transform(Buffer.concat([zlib.deflateRawSync(plain), trailing]), 64, LIMIT).equals(plain),
  );
  const bad = zlib.deflateSync(payload(1000, 1));
  bad[bad.length - 1]! ^= 1; // the Adler-32 checksum
  assert.throws(() => kept.inflate.transform(bad, 1000, LIMIT), {
    message: oneShot(zlib.inflateSync, bad) as string,
  });
});

test('an output over 8 MiB is its own buffer, which the next body does not overwrite', () => {
  const { gunzip } = new KeptDecompressors();
  const big = payload(9 << 20, 1);
  const out = gunzip.transform(zlib.gzipSync(big), (9 << 20) + 1, 16 << 20);
  gunzip.transform(zlib.gzipSync(payload(100_000, 2)), 100_001, 16 << 20);
  gunzip.transform(zlib.gzipSync(payload(10 << 20, 3)), (10 << 20) + 1, 16 << 20);
  assert.ok(out.equals(big));
});

test('a decoder inflating every body into one buffer: each result is its body, after the later bodies', async () => {
  mock.method(Date, 'now', () => ARRIVAL_MS); // a log's arrival time, the same for both decoders
  const codec = (await loadProtobuf()) as ProtoCodec;
  const limits = { countLimit: 1024, valueLengthLimit: 65_536 };
  const gzipped = new RequestDecoder(true, DEFAULT_SETTINGS, limits);
  const plain = new RequestDecoder(true, DEFAULT_SETTINGS, limits);
  const task = (signal: Signal, format: 'json' | 'protobuf', body: Uint8Array, codings: string[]) => ({
    signal,
    format,
    body,
    codings,
    bodyLimit: LIMIT,
    headerProjectId: undefined,
    defaultProjectId: 'default-project',
  });
  const decoded: [DecodeResult, DecodeResult][] = [];
  for (let seed = 1; seed <= 40; seed++) {
    for (const signal of ['traces', 'logs', 'metrics'] as const) {
      const tree = randomRequest(signal, seed);
      for (const [format, body] of [
        ['json', Buffer.from(jsonForms(tree, seed))],
        ['protobuf', protobufForm(signal, tree, codec, seed)],
      ] as const) {
        decoded.push([
          gzipped.decode(task(signal, format, zlib.gzipSync(body), ['gzip'])),
          plain.decode(task(signal, format, body, [])),
        ]);
      }
    }
  }
  // Large bodies too: the buffer grows, and the earlier results must not see it.
  const logs = Buffer.from(JSON.stringify(logsRequest(500, 9)));
  decoded.push([
    gzipped.decode(task('logs', 'json', zlib.gzipSync(logs), ['gzip'])),
    plain.decode(task('logs', 'json', logs, [])),
  ]);
  let rows = 0;
  for (const [got, want] of decoded) {
    assert.deepEqual(got, want);
    if (got.ok) for (const t of Object.values(got.tables)) rows += t.batch.numRows;
  }
  assert.ok(rows > 1000, `${rows} rows compared`);
});

test('zstd: every frame of a body is read, kept or one-shot; bytes that are no frame are refused', () => {
  const { zstd } = new KeptDecompressors();
  const parts = [payload(30_000, 1), payload(10, 2), payload(70_000, 3)];
  const frames = Buffer.concat(parts.map((p) => zstdCompress(p)));
  const whole = Buffer.concat(parts);
  assert.ok(zstd!.transform(frames, 64, LIMIT).equals(whole));
  assert.ok(zstdDecompressFrames(frames, { maxOutputLength: LIMIT }).equals(whole));
  // What Node's own call makes of it: the first frame alone up to Node 25 (hence
  // zstdDecompressFrames), every frame from Node 26 on.
  const nodeCall = (zlib as unknown as { zstdDecompressSync: (b: Buffer) => Buffer }).zstdDecompressSync;
  const readsEveryFrame = Number(process.versions.node.split('.')[0]) >= 26;
  assert.equal(nodeCall(frames).length, readsEveryFrame ? whole.length : parts[0]!.length);

  // Bytes after the last frame that are no frame, or a body of none: Node 26's zstd takes the
  // first and Node 22's a body cut short, so the decoder walks the frames itself (checkZstdFrames,
  // next test) and refuses them on any Node.
  const good = zstdCompress(parts[0]!);
  for (const bad of [Buffer.concat([good, Buffer.from('garbage!')]), Buffer.from('not zstd')]) {
    assert.throws(() => checkZstdFrames(bad), /Unknown frame descriptor/);
    const kept = new KeptDecompressors();
    for (const decompressor of [kept, undefined])
      assert.throws(() => decompress(bad, ['zstd'], LIMIT, decompressor), { statusCode: 400 });
    assert.ok(decompress(good, ['zstd'], LIMIT, kept).equals(parts[0]!), 'the next body');
  }
});

/** A zstd frame of one RLE block: `n` (< 256) copies of `byte`, as RFC 8878 lays it out. */
function rleFrame(byte: number, n: number): Buffer {
  const frame = Buffer.alloc(10);
  frame.writeUInt32LE(0xfd2fb528, 0);
  frame[4] = 0x20; // single segment, a 1-byte content size, no checksum, no dictionary
  frame[5] = n;
  frame.writeUIntLE(1 | (1 << 1) | (n << 3), 6, 3); // the last block, RLE, of n bytes
  frame[9] = byte;
  return frame;
}

test('zstd: a body cut short anywhere is refused (400) on any Node, kept or one-shot', () => {
  const zstdWith = (zlib as unknown as { zstdCompressSync: (b: Buffer, o: object) => Buffer })
    .zstdCompressSync;
  const checksumFlag = (zlib.constants as unknown as { ZSTD_c_checksumFlag: number }).ZSTD_c_checksumFlag;
  const skippable = Buffer.alloc(8 + 5);
  skippable.writeUInt32LE(0x184d2a53, 0);
  skippable.writeUInt32LE(5, 4);
  const plain = [payload(4_000, 1), randomBytes(300_000), Buffer.alloc(200, 0x41), payload(1_000, 2)];
  const frames = [
    skippable,
    zstdWith(plain[0]!, { params: { [checksumFlag]: 1 } }), // with a content checksum
    zstdCompress(plain[1]!), // three raw blocks: incompressible
    rleFrame(0x41, 200),
    zstdCompress(plain[3]!),
  ];
  assert.equal((frames[1]![4]! >> 2) & 1, 1, 'the frame has a checksum');
  const body = Buffer.concat(frames);
  // Where each frame ends: a body cut there is whole frames.
  const ends = new Set<number>([0]);
  let at = 0;
  for (const f of frames) {
    at += f.length;
    ends.add(at);
  }

  const kept = new KeptDecompressors();
  assert.ok(decompress(body, ['zstd'], LIMIT, kept).equals(Buffer.concat(plain)));
  assert.ok(decompress(body, ['zstd'], LIMIT).equals(Buffer.concat(plain)));
  for (let cut = 0; cut < body.length; cut++) {
    const part = body.subarray(0, cut);
    if (ends.has(cut)) assert.doesNotThrow(() => checkZstdFrames(part), `${cut}: whole frames`);
    else assert.throws(() => checkZstdFrames(part), /cut short/, `${cut}`);
    // What the decoder answers, at every byte near a frame's end and at others, kept or one-shot.
    if (ends.has(cut) || (cut % 499 !== 0 && ![...ends].some((e) => cut > e && cut < e + 12))) continue;
    for (const decompressor of [kept, undefined])
      assert.throws(() => decompress(part, ['zstd'], LIMIT, decompressor), { statusCode: 400 }, `${cut}`);
    assert.ok(decompress(frames[4]!, ['zstd'], LIMIT, kept).equals(plain[3]!), 'the next body');
  }
  // Bytes after whole frames that begin no frame (the 1-3 bytes above began one).
  assert.throws(() => checkZstdFrames(Buffer.concat([body, Buffer.from([0, 0, 0, 0])])), /Unknown frame/);
});

test('zstd: past the limit, in one frame or over several, is refused, kept or one-shot', () => {
  const { zstd } = new KeptDecompressors();
  const limit = 100_000;
  const one = zstdCompress(payload(limit + 1, 1));
  const several = Buffer.concat([zstdCompress(payload(60_000, 2)), zstdCompress(payload(40_001, 3))]);
  const fits = Buffer.concat([zstdCompress(payload(60_000, 2)), zstdCompress(payload(40_000, 3))]);
  // The code body.ts answers 413 for (Node's own call throws its RangeError with it).
  const tooLarge = { code: 'ERR_BUFFER_TOO_LARGE' };
  for (const body of [one, several]) {
    assert.throws(() => zstd!.transform(body, 64, limit), tooLarge);
    assert.throws(() => zstdDecompressFrames(body, { maxOutputLength: limit }), tooLarge);
  }
  assert.equal(zstd!.transform(fits, 64, limit).length, limit);
  assert.equal(zstdDecompressFrames(fits, { maxOutputLength: limit }).length, limit);
});
