// A node:zlib stream kept from input to input, compressing or decompressing. Every one-shot call
// of node:zlib (gunzipSync, zstdCompressSync...) builds a stream object, a native context and an
// output buffer for one input: for a decoder's request bodies ~64 MiB of dead output piled up per
// thread until V8's next full collection (src/server/kept-decompressors.ts), for the Parquet
// writer's pages the context's setup took 8-11% of a file's CPU (src/delta/parquet-encoding.ts).
// One context used input after input, writing into one kept output buffer, makes neither.
//
// Node has no public call that writes into a given buffer, so this drives the stream's native
// handle the way Node's own synchronous calls do (`_handle.writeSync`, `_writeState`). Where a
// Node lacks them, each input takes the one-shot call instead (`keepsContext` says which).

import type { Transform } from 'node:stream';

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
export type OneShot = (input: Uint8Array, options: { maxOutputLength: number; chunkSize?: number }) => Buffer;

/** Output buffers up to this size are kept for the next input; a larger input's is its own. */
const KEPT_OUTPUT_BYTES = 8 * 1024 * 1024;

/** The largest output a caller may allow (a Buffer's, and Parquet's int32 sizes). */
export const MAX_OUTPUT_BYTES = 2 ** 31 - 1;

/** An output past the limit (as `maxOutputLength` of Node's calls). */
export class OutputTooLargeError extends Error {
  readonly code = 'ERR_BUFFER_TOO_LARGE';
}

/** One kind of node:zlib stream, kept across inputs. */
export class KeptZlibStream {
  private readonly open: () => Transform;
  /** The flush value that ends an input (Z_FINISH; ZSTD_e_end). */
  private readonly finish: number;
  private readonly oneShot: OneShot;
  private stream: (Transform & StreamInternals) | null = null;
  private output = Buffer.alloc(0);
  private supported = true;
  /**
   * Whether the context is reset after each input: zlib's inflate stops at the end of a member
   * until it is. A zstd compressor starts the next frame by itself after ZSTD_e_end, and Node's
   * reset would drop its parameters, the level among them.
   */
  private readonly resetAfterInput: boolean;

  constructor(open: () => Transform, finish: number, oneShot: OneShot, options = { resetAfterInput: true }) {
    this.open = open;
    this.finish = finish;
    this.oneShot = oneShot;
    this.resetAfterInput = options.resetAfterInput;
  }

  /** Whether inputs go through a kept context (false where this Node lacks the internals). */
  get keepsContext(): boolean {
    return this.kept() !== null;
  }

  /**
   * Stops keeping the context unless it makes of `sample` what the one-shot call makes, byte for
   * byte: for output that must read anywhere (Parquet pages), should a Node's internals change
   * their meaning. Returns this stream.
   */
  checkedWith(sample: Uint8Array): this {
    if (this.kept() === null) return this;
    const oneShot = this.oneShot(sample, { maxOutputLength: MAX_OUTPUT_BYTES });
    let same = false;
    try {
      same = this.transform(sample, oneShot.length + 64, MAX_OUTPUT_BYTES).equals(oneShot);
    } catch {
      // A context that fails on the sample is not kept either.
    }
    if (!same) {
      this.supported = false;
      this.stream?.destroy();
      this.stream = null;
    }
    return this;
  }

  /**
   * The input compressed or decompressed, as a view that stays valid only until this stream's next
   * call. When decompressing, input left after the end of a gzip member or a zstd frame is read as
   * the next one (a trailing run of zero bytes ends it, as gunzipSync has it). `sizeHint` is where
   * the output buffer starts (gzip's trailer announces the size); a wrong hint costs a copy, never
   * data. Throws OutputTooLargeError past `limit` bytes, and zlib's error for a corrupt or
   * truncated input.
   */
  transform(input: Uint8Array, sizeHint: number, limit: number): Buffer {
    sizeHint = Math.max(64, sizeHint); // zlib's smallest chunk
    const stream = this.kept();
    if (stream === null) return this.oneShot(input, { maxOutputLength: limit, chunkSize: sizeHint });
    const handle = stream._handle!;
    const state = stream._writeState!;
    const cap = limit + 1; // one byte over: an output that fills it passes the limit
    let out = this.buffer(Math.min(Math.max(sizeHint, this.output.length), cap));
    let produced = 0;
    let inOffset = 0;
    let inLeft = input.length;
    for (;;) {
      handle.writeSync(this.finish, input, inOffset, inLeft, out, produced, out.length - produced);
      if (stream.destroyed) {
        // The input was refused and Node closed the stream; the next input opens another.
        this.stream = null;
        throw stream.errored ?? new Error('zlib refused the input');
      }
      const made = out.length - state[0]! - produced;
      const read = inLeft - state[1]!;
      produced += made;
      inOffset += read;
      inLeft -= read;
      if (produced < out.length) {
        // Room left: the input ended (a truncated one is refused above), unless input is left that
        // the call got on with (a next zstd frame; gzip reads its members within one call).
        if (inLeft === 0 || (made === 0 && read === 0)) break;
        continue;
      }
      if (out.length === cap) {
        // Abandoned within an input: the next input opens another stream.
        this.stream = null;
        stream.destroy();
        throw new OutputTooLargeError(`the output passes ${limit} bytes`);
      }
      const larger = this.buffer(Math.min(out.length * 2, cap));
      out.copy(larger, 0, 0, produced);
      out = larger;
    }
    if (this.resetAfterInput) handle.reset();
    return out.subarray(0, produced);
  }

  private kept(): (Transform & StreamInternals) | null {
    if (this.stream !== null || !this.supported) return this.stream;
    const stream = this.open() as Transform & StreamInternals;
    if (typeof stream._handle?.writeSync !== 'function' || !(stream._writeState instanceof Uint32Array)) {
      this.supported = false;
      stream.destroy();
      return null;
    }
    // A refused input destroys the stream, which then emits its error; it is read from `errored`.
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
