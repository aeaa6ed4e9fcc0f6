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
