// The buffer the attribute writers of both readers (wire.ts, json-attributes.ts) write JSON text
// into, byte by byte. A mapping runs to its end alone, so one buffer, kept from request to
// request, serves them all.

const SCRATCH_BYTES = 64 * 1024;
const SCRATCH_KEPT = 1024 * 1024;
let scratch = Buffer.allocUnsafe(SCRATCH_BYTES);

/** After a request: a list of megabytes grew the buffer, which is not kept for the requests after. */
export function shrinkScratch(): void {
  if (scratch.length > SCRATCH_KEPT) scratch = Buffer.allocUnsafe(SCRATCH_BYTES);
}

export abstract class JsonTextWriter {
  /** The text written so far is out[0, len). */
  protected out: Buffer = scratch;
  protected len = 0;

  protected byte(c: number): void {
    this.reserve(1);
    this.out[this.len++] = c;
  }

  /** Makes room for `n` more bytes. */
  protected reserve(n: number): void {
    if (this.len + n <= this.out.length) return;
    const bigger = Buffer.allocUnsafe(Math.max(this.out.length * 2, this.len + n));
    this.out.copy(bigger, 0, 0, this.len);
    this.out = scratch = bigger;
  }
}
