// Inflaters a decoder keeps from body to body. Every one-shot zlib call (gunzipSync, inflateSync)
// builds a stream object, a native zlib context and an output buffer for one body, and a thread
// frees those buffers only at a full collection, which V8 starts once about 64 MiB of them has
// piled up: up to ~64 MiB of dead output per decoder. One kept zlib context, reset between bodies,
// writing into one kept output buffer, makes no garbage per body and takes half the CPU (in a
// reproduction, two threads inflating 66 KB bodies: peak RSS 125 against 262-278 MiB, 27 against
// 51-65 µs a body).
//
// Node has no public call that inflates into a given buffer, so this drives the zlib stream's
// native handle the way Node's own synchronous calls do (`_handle.writeSync`, `_writeState`). Where
// a Node lacks them, each body takes the one-shot call instead (`keepsContext` says which).

import * as zlib from 'node:zlib';

/** What a zlib stream holds that Node's synchronous calls use; not part of Node's public API. */
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

/** Output buffers up to this size are kept for the next body; a larger body's is its own. */
const KEPT_OUTPUT_BYTES = 8 * 1024 * 1024;

/** The output of a body that inflates past the limit (`maxOutputLength` of Node's calls). */
export class InflatedTooLargeError extends Error {
  readonly code = 'ERR_BUFFER_TOO_LARGE';
}

/** One kind of zlib stream (gzip, zlib or raw deflate), kept across bodies. */
export class KeptInflater {
  private readonly open: () => Stream;
  private readonly oneShot: (body: Uint8Array, options: zlib.ZlibOptions) => Buffer;
  private stream: (Stream & StreamInternals) | null = null;
  private output = Buffer.alloc(0);
  private supported = true;

  constructor(open: () => Stream, oneShot: (body: Uint8Array, options: zlib.ZlibOptions) => Buffer) {
    this.open = open;
    this.oneShot = oneShot;
  }

  /** Whether bodies go through a kept zlib context (false where this Node lacks the internals). */
  get keepsContext(): boolean {
    return this.kept() !== null;
  }

  /**
   * The body inflated, as a view that stays valid only until this inflater's next call.
   * `sizeHint` is where the output buffer starts (gzip's trailer announces the size); a wrong
   * hint costs a copy, never data. Throws InflatedTooLargeError past `limit` bytes, and zlib's
   * error for a corrupt or truncated body.
   */
  inflate(body: Uint8Array, sizeHint: number, limit: number): Buffer {
    sizeHint = Math.max(64, sizeHint); // zlib's smallest chunk
    const stream = this.kept();
    if (stream === null) return this.oneShot(body, { maxOutputLength: limit, chunkSize: sizeHint });
    const handle = stream._handle!;
    const state = stream._writeState!;
    const cap = limit + 1; // one byte over: a body that fills it inflates past the limit
    let out = this.buffer(Math.min(Math.max(sizeHint, this.output.length), cap));
    let produced = 0;
    let inOffset = 0;
    let inLeft = body.length;
    for (;;) {
      handle.writeSync(zlib.constants.Z_FINISH, body, inOffset, inLeft, out, produced, out.length - produced);
      if (stream.destroyed) {
        // zlib refused the body and Node closed the stream; the next body opens another.
        this.stream = null;
        throw stream.errored ?? new Error('zlib failed');
      }
      produced = out.length - state[0]!;
      inOffset += inLeft - state[1]!;
      inLeft = state[1]!;
      if (produced < out.length) break; // room left: the body ended (zlib reports a truncated one)
      if (out.length === cap) {
        handle.reset();
        throw new InflatedTooLargeError(`inflates past ${limit} bytes`);
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

/** The inflaters of one decoder: gzip, zlib-wrapped and raw deflate. */
export class KeptInflaters {
  readonly gunzip = new KeptInflater(() => zlib.createGunzip(), zlib.gunzipSync);
  readonly inflate = new KeptInflater(() => zlib.createInflate(), zlib.inflateSync);
  readonly inflateRaw = new KeptInflater(() => zlib.createInflateRaw(), zlib.inflateRawSync);
}
