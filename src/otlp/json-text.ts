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

/** Keys an object may have before `ObjectKeys` looks them up in a Set instead of comparing each. */
const KEYS_COMPARED = 32;

/**
 * The keys of the JSON objects an attribute writer is writing, innermost last, as byte ranges of
 * the body: a JS object keeps one value per key and orders integer-like keys first, so a list
 * with such a key goes the parsed way. A few keys are compared byte by byte; past KEYS_COMPARED
 * an object's keys also go into a Set (as latin1 strings: one character per byte, equal exactly
 * when the bytes are), so a list of 60,000 keys costs linear time, not quadratic.
 */
export class ObjectKeys {
  private readonly buf: Buffer;
  /** Start and end of each key, flat. */
  private readonly at: number[] = [];
  private n = 0;
  /** Per open object: where its keys start in `at`, and its Set once it has KEYS_COMPARED keys. */
  private readonly from: number[] = [];
  private readonly sets: (Set<string> | null)[] = [];
  private depth = -1;

  constructor(buf: Buffer) {
    this.buf = buf;
  }

  /** Forgets every object (a new list). */
  reset(): void {
    this.n = 0;
    this.depth = -1;
  }

  /** Starts an object, inside the one open (if any). */
  open(): void {
    const d = ++this.depth;
    this.from[d] = this.n;
    this.sets[d] = null;
  }

  /** Ends the innermost object. */
  close(): void {
    this.n = this.from[this.depth--]!;
  }

  /** Records a key of the innermost object; false when it repeats one or looks like an array index. */
  add(start: number, end: number): boolean {
    const buf = this.buf;
    let digits = end > start;
    for (let i = start; i < end && digits; i++) digits = buf[i]! >= 0x30 && buf[i]! <= 0x39;
    if (digits) return false;
    const at = this.at;
    const from = this.from[this.depth]!;
    if (this.n - from < 2 * KEYS_COMPARED) {
      const len = end - start;
      for (let k = from; k < this.n; k += 2) {
        const s = at[k]!;
        if (at[k + 1]! - s === len && equalRange(buf, s, start, len)) return false;
      }
    } else {
      let set = this.sets[this.depth]!;
      if (set === null) {
        set = new Set();
        for (let k = from; k < this.n; k += 2) set.add(buf.toString('latin1', at[k]!, at[k + 1]!));
        this.sets[this.depth] = set;
      }
      const key = buf.toString('latin1', start, end);
      if (set.has(key)) return false;
      set.add(key);
    }
    at[this.n++] = start;
    at[this.n++] = end;
    return true;
  }
}

function equalRange(buf: Buffer, a: number, b: number, n: number): boolean {
  for (let i = 0; i < n; i++) if (buf[a + i] !== buf[b + i]) return false;
  return true;
}
