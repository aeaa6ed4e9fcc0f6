// Decompressors a decoder keeps from body to body (gzip, zlib, raw deflate, zstd), each a kept
// node:zlib stream (src/storage/kept-zlib.ts). Every one-shot call of node:zlib (gunzipSync,
// zstdDecompressSync...) builds an output buffer for one body, and a thread frees a large buffer
// that dies young only at a full collection, which V8 starts once about 64 MiB of them has piled
// up: up to ~64 MiB of dead output per decoder. One kept context, reset between bodies, writing
// into one kept output buffer, makes no garbage per body and takes about half the CPU
// (bench/decompress-bodies.ts: two threads inflating 66 KB bodies, peak RSS 126-129 against
// 263-291 MiB, 28-30 against 45-50 µs of CPU a body). A body's output is a view that the
// decoder's next body overwrites.

import type { Transform } from 'node:stream';
import * as zlib from 'node:zlib';
import { KeptZlibStream, type OneShot, OutputTooLargeError } from '../storage/kept-zlib.ts';

// zstd arrived in Node 22.15 / 23.8.
const zstd = zlib as unknown as {
  createZstdDecompress?: () => Transform;
  zstdDecompressSync?: (
    body: Uint8Array,
    options: object,
  ) => { buffer: Buffer; engine: { bytesWritten: number } };
};

/** Whether this Node decompresses zstd. */
export const ZSTD_AVAILABLE = typeof zstd.zstdDecompressSync === 'function';

/**
 * Node's one-shot zstd call reads the first frame only (of a body of two frames, it returns the
 * first and drops the second); this reads every frame, as the format has it (RFC 8878).
 */
export const zstdDecompressFrames: OneShot = (body, options) => {
  const parts: Buffer[] = [];
  let size = 0;
  for (let at = 0; at < body.length; ) {
    const { buffer, engine } = zstd.zstdDecompressSync!(body.subarray(at), {
      ...options,
      maxOutputLength: Math.max(1, options.maxOutputLength - size),
      info: true,
    });
    parts.push(buffer);
    size += buffer.length;
    if (size > options.maxOutputLength) {
      throw new OutputTooLargeError(`decompresses past ${options.maxOutputLength} bytes`);
    }
    if (engine.bytesWritten === 0) break; // nothing read: only zero bytes or an empty frame left
    at += engine.bytesWritten;
  }
  return parts.length === 1 ? parts[0]! : Buffer.concat(parts, size);
};

// RFC 8878: a zstd frame's magic number, and a skippable frame's (any of 16: the low 4 bits are free).
const ZSTD_FRAME_MAGIC = 0xfd2fb528;
const SKIPPABLE_FRAME_MAGIC = 0x184d2a50;
const RLE_BLOCK = 1;
const RESERVED_BLOCK = 3;
const DICTIONARY_ID_BYTES = [0, 1, 2, 4];

/** The little-endian number in the (up to) 4 bytes of `body` from `at`, and a mask of the bytes read. */
function leadingWord(body: Uint8Array, at: number): { word: number; mask: number } {
  let word = 0;
  let mask = 0;
  for (let k = 0; k < 4 && at + k < body.length; k++) {
    word |= body[at + k]! << (8 * k);
    mask |= 0xff << (8 * k);
  }
  return { word: word >>> 0, mask: mask >>> 0 };
}

/**
 * Throws unless a zstd body is whole frames, one after another. Node 22's zstd hands back what it
 * decoded of a truncated frame (often nothing: an empty request, answered 200) without an error,
 * and Node 26's takes bytes after the last frame that are no frame; Node 24 refuses both. So the
 * frames are walked here, header and block headers (RFC 8878), and such a body is refused on any
 * Node. A block the walk cannot size (a reserved type) is left to zstd, which refuses it.
 */
export function checkZstdFrames(body: Uint8Array): void {
  const end = body.length;
  const truncated = () => new Error('unexpected end of file (a zstd frame is cut short)');
  for (let at = 0; at < end; ) {
    // A magic number, whole or (at the end of the body) begun.
    const { word, mask } = leadingWord(body, at);
    const whole = mask === 0xffffffff;
    if (((SKIPPABLE_FRAME_MAGIC ^ word) & mask & ~0xf) === 0) {
      if (end - at < 8) throw truncated();
      at += 8 + leadingWord(body, at + 4).word;
      if (at > end) throw truncated();
      continue;
    }
    if (((ZSTD_FRAME_MAGIC ^ word) & mask) !== 0) {
      throw new Error(`Unknown frame descriptor (byte ${at} of the body begins no zstd frame)`);
    }
    // Frame header: its descriptor, then the window, dictionary id and content size it announces.
    if (!whole || at + 4 >= end) throw truncated();
    const descriptor = body[at + 4]!;
    const singleSegment = (descriptor >> 5) & 1;
    const sizeFlag = descriptor >> 6;
    const contentSizeBytes = sizeFlag === 0 ? singleSegment : 1 << sizeFlag;
    at += 5 + (1 - singleSegment) + DICTIONARY_ID_BYTES[descriptor & 3]! + contentSizeBytes;
    // Blocks, each a 3-byte header: last-block bit, type, size (an RLE block holds one byte).
    for (let last = 0; last === 0; ) {
      if (at + 3 > end) throw truncated();
      const header = body[at]! | (body[at + 1]! << 8) | (body[at + 2]! << 16);
      const type = (header >> 1) & 3;
      if (type === RESERVED_BLOCK) return;
      last = header & 1;
      at += 3 + (type === RLE_BLOCK ? 1 : header >>> 3);
    }
    at += (descriptor >> 2) & 1 ? 4 : 0; // the content checksum
    if (at > end) throw truncated();
  }
}

/** The decompressors of one decoder. */
export class KeptDecompressors {
  readonly gunzip = new KeptZlibStream(() => zlib.createGunzip(), zlib.constants.Z_FINISH, zlib.gunzipSync);
  readonly inflate = new KeptZlibStream(
    () => zlib.createInflate(),
    zlib.constants.Z_FINISH,
    zlib.inflateSync,
  );
  readonly inflateRaw = new KeptZlibStream(
    () => zlib.createInflateRaw(),
    zlib.constants.Z_FINISH,
    zlib.inflateRawSync,
  );
  readonly zstd: KeptZlibStream | null = ZSTD_AVAILABLE
    ? new KeptZlibStream(
        zstd.createZstdDecompress!,
        (zlib.constants as unknown as { ZSTD_e_end: number }).ZSTD_e_end,
        zstdDecompressFrames,
      )
    : null;
}
