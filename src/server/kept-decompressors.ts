// Decompressors a decoder keeps from body to body (gzip, zlib, raw deflate, zstd). Every one-shot
// call of node:zlib (gunzipSync, zstdDecompressSync...) builds a stream object, a native context
// and an output buffer for one body, and a thread frees a large buffer that dies young only at a
// full collection, which V8 starts once about 64 MiB of them has piled up: up to ~64 MiB of dead
// output per decoder. One kept context, reset between bodies, writing into one kept output
// buffer, makes no garbage per body and takes about half the CPU (bench/decompress-bodies.ts: two
// threads inflating 66 KB bodies, peak RSS 126-129 against 263-291 MiB, 28-30 against 45-50 µs of
// CPU a body).
//
// Node has no public call that decompresses into a given buffer, so this drives the stream's
// native handle the way Node's own synchronous calls do (`_handle.writeSync`, `_writeState`).
// Where a Node lacks them, each body takes the one-shot call instead (`keepsContext` says which).

import * as zlib from 'node:zlib';

/** What a node:zlib stream holds that Node's synchronous calls use; not Node's public API. */
interface StreamInternals {
  _handle?: {
    writeSync(
      flush: number,
      input: Uint8Array,
      inOffset: number,
      inLength: number,
      output: Uint8Array,
      outOffset: number,
      outLength: number,
    ): void;
    reset(): void;
  } | null;
  /** After writeSync: [output bytes left, input bytes left]. */
  _writeState?: Uint32Array;
}
type Stream = zlib.Gunzip | zlib.Inflate | zlib.InflateRaw;
type OneShot = (body: Buffer, options: { maxOutputLength: number; chunkSize?: number }) => Buffer;

/** Output buffers up to this size are kept for the next body; a larger body's is its own. */
const KEPT_OUTPUT_BYTES = 8 * 1024 * 1024;

/** The output of a body that decompresses past the limit (as `maxOutputLength` of Node's calls). */
export class DecompressedTooLargeError extends Error {
  readonly code = 'ERR_BUFFER_TOO_LARGE';
}

/** One kind of node:zlib stream, kept across bodies. */
export class KeptDecompressor {
  private readonly open: () => Stream;
  /** The flush value that ends a body (Z_FINISH; ZSTD_e_end). */
  private readonly finish: number;
  private readonly oneShot: OneShot;
  private stream: (Stream & StreamInternals) | null = null;
  private output = Buffer.alloc(0);
  private supported = true;

  constructor(open: () => Stream, finish: number, oneShot: OneShot) {
    this.open = open;
    this.finish = finish;
    this.oneShot = oneShot;
  }

  /** Whether bodies go through a kept context (false where this Node lacks the internals). */
  get keepsContext(): boolean {
    return this.kept() !== null;
  }

  /**
   * The body decompressed, as a view that stays valid only until this decompressor's next call.
   * Input left after the end of a gzip member or a zstd frame is read as the next one (a trailing
   * run of zero bytes ends it, as gunzipSync has it). `sizeHint` is where the output buffer starts
   * (gzip's trailer announces the size); a wrong hint costs a copy, never data. Throws
   * DecompressedTooLargeError past `limit` bytes, and zlib's error for a corrupt or truncated body.
   */
  decompress(body: Buffer, sizeHint: number, limit: number): Buffer {
    sizeHint = Math.max(64, sizeHint); // zlib's smallest chunk
    const stream = this.kept();
    if (stream === null) return this.oneShot(body, { maxOutputLength: limit, chunkSize: sizeHint });
    const handle = stream._handle!;
    const state = stream._writeState!;
    const cap = limit + 1; // one byte over: a body that fills it decompresses past the limit
    let out = this.buffer(Math.min(Math.max(sizeHint, this.output.length), cap));
    let produced = 0;
    let inOffset = 0;
    let inLeft = body.length;
    for (;;) {
      handle.writeSync(this.finish, body, inOffset, inLeft, out, produced, out.length - produced);
      if (stream.destroyed) {
        // The body was refused and Node closed the stream; the next body opens another.
        this.stream = null;
        throw stream.errored ?? new Error('decompression failed');
      }
      const made = out.length - state[0]! - produced;
      const read = inLeft - state[1]!;
      produced += made;
      inOffset += read;
      inLeft -= read;
      if (produced < out.length) {
        // Room left: the body ended (a truncated one is refused above), unless input is left that
        // the call got on with (a next zstd frame; gzip reads its members within one call).
        if (inLeft === 0 || (made === 0 && read === 0)) break;
        continue;
      }
      if (out.length === cap) {
        handle.reset();
        throw new DecompressedTooLargeError(`decompresses past ${limit} bytes`);
      }
      const larger = this.buffer(Math.min(out.length * 2, cap));
      out.copy(larger, 0, 0, produced);
      out = larger;
    }
    handle.reset();
    return out.subarray(0, produced);
  }

  private kept(): (Stream & StreamInternals) | null {
    if (this.stream !== null || !this.supported) return this.stream;
    const stream = this.open() as Stream & StreamInternals;
    if (typeof stream._handle?.writeSync !== 'function' || !(stream._writeState instanceof Uint32Array)) {
      this.supported = false;
      stream.destroy();
      return null;
    }
    // A refused body destroys the stream, which then emits its error; it is read from `errored`.
    stream.on('error', () => {});
    this.stream = stream;
    return stream;
  }

  /** A buffer of `n` bytes: the kept one (grown) up to KEPT_OUTPUT_BYTES, else one of its own. */
  private buffer(n: number): Buffer {
    if (n > KEPT_OUTPUT_BYTES) return Buffer.allocUnsafe(n);
    if (this.output.length < n) this.output = Buffer.allocUnsafe(n);
    return this.output.length === n ? this.output : this.output.subarray(0, n);
  }
}

// zstd arrived in Node 22.15 / 23.8.
const zstd = zlib as unknown as {
  createZstdDecompress?: () => Stream;
  zstdDecompressSync?: (
    body: Buffer,
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
      throw new DecompressedTooLargeError(`decompresses past ${options.maxOutputLength} bytes`);
    }
    if (engine.bytesWritten === 0) break; // nothing read: only zero bytes or an empty frame left
    at += engine.bytesWritten;
  }
  return parts.length === 1 ? parts[0]! : Buffer.concat(parts, size);
};

/** The decompressors of one decoder. */
export class KeptDecompressors {
  readonly gunzip = new KeptDecompressor(() => zlib.createGunzip(), zlib.constants.Z_FINISH, zlib.gunzipSync);
  readonly inflate = new KeptDecompressor(
    () => zlib.createInflate(),
    zlib.constants.Z_FINISH,
    zlib.inflateSync,
  );
  readonly inflateRaw = new KeptDecompressor(
    () => zlib.createInflateRaw(),
    zlib.constants.Z_FINISH,
    zlib.inflateRawSync,
  );
  readonly zstd: KeptDecompressor | null = ZSTD_AVAILABLE
    ? new KeptDecompressor(
        zstd.createZstdDecompress!,
        (zlib.constants as unknown as { ZSTD_e_end: number }).ZSTD_e_end,
        zstdDecompressFrames,
      )
    : null;
}
