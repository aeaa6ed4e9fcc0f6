// The buffer the attribute writers of both readers (wire.ts, json-attributes.ts) write JSON text
// into, byte by byte, numbers included (as digits, without String where that spells them). A
// mapping runs to its end alone, so one buffer, kept from request to request, serves them all.

import { jsonDouble, jsonInt, jsonText } from './values.ts';

const SCRATCH_BYTES = 64 * 1024;
const SCRATCH_KEPT = 1024 * 1024;
let scratch: Buffer = Buffer.allocUnsafe(SCRATCH_BYTES);
let scratchView: DataView = new DataView(scratch.buffer, scratch.byteOffset, scratch.byteLength);

/** Makes `b` the kept buffer (and its DataView). */
function keepScratch(b: Buffer): void {
  scratch = b;
  scratchView = new DataView(b.buffer, b.byteOffset, b.byteLength);
}

/** After a request: a list of megabytes grew the buffer, which is not kept for the requests after. */
export function shrinkScratch(): void {
  if (scratch.length > SCRATCH_KEPT) keepScratch(Buffer.allocUnsafe(SCRATCH_BYTES));
}

export abstract class JsonTextWriter {
  /** The text written so far is out[0, len). */
  protected out: Buffer = scratch;
  /** `out` as a DataView, to write four bytes at a time. */
  protected outView: DataView = scratchView;
  protected len = 0;

  protected byte(c: number): void {
    this.reserve(1);
    this.out[this.len++] = c;
  }

  /** A double as JSON text (`jsonText(jsonDouble(x))`), without String(x) when it has few decimals. */
  protected double(x: number): void {
    this.reserve(MAX_NUMBER_BYTES);
    const end = writeShortDouble(this.out, this.len, x);
    if (end >= 0) this.len = end;
    else this.asciiText(jsonText(jsonDouble(x)));
  }

  /** An int64 given as its two 32-bit halves as JSON text (`jsonText(jsonInt(...))`). */
  protected int64(low: number, high: number): void {
    // Within ±2^32 (nearly every attribute): the digits are written straight away.
    if (high === 0 || (high === -1 && low !== 0)) {
      this.reserve(MAX_NUMBER_BYTES);
      let o = this.len;
      if (high !== 0) this.out[o++] = 0x2d;
      this.len = writeDigits(this.out, o, high === 0 ? low >>> 0 : 4294967296 - (low >>> 0));
    } else this.asciiText(jsonText(jsonInt({ low, high }, 'intValue')));
  }

  /** Text of ASCII characters only, a byte each. */
  protected asciiText(s: string): void {
    this.reserve(s.length);
    const out = this.out;
    let o = this.len;
    for (let i = 0; i < s.length; i++) out[o++] = s.charCodeAt(i);
    this.len = o;
  }

  /** Makes room for `n` more bytes. */
  protected reserve(n: number): void {
    if (this.len + n <= this.out.length) return;
    const bigger = Buffer.allocUnsafe(Math.max(this.out.length * 2, this.len + n));
    this.out.copy(bigger, 0, 0, this.len);
    keepScratch(bigger);
    this.out = scratch;
    this.outView = scratchView;
  }
}

/** The longest text `writeShortDouble` and `int64` write: a sign, 10 digits, a point, 3 decimals. */
const MAX_NUMBER_BYTES = 16;
const POW10 = [1, 10, 100, 1000];

/**
 * Writes `x` into `out` at `o` as String(x) spells it, when |x| < 1e9 and at most three decimals
 * spell it; returns the end, or -1 for any other number (the caller takes String's). String(x)
 * costs ~150 ns a double; this, a few multiplications.
 *
 * Why it is String's spelling: below 1e9 the doubles that read back as `x` span less than
 * 1.2e-7, so at most one decimal of three places or fewer reads back as `x`, and
 * `Math.round(|x| * 10^k)` finds it (the product is off by far less than 0.5). The fewest places
 * that read back are the fewest significant digits, which is the spelling String chooses.
 */
export function writeShortDouble(out: Buffer, o: number, x: number): number {
  const a = x < 0 ? -x : x;
  if (!(a < 1e9)) return -1; // NaN too
  for (let k = 0; k <= 3; k++) {
    const p = POW10[k]!;
    const d = Math.round(a * p);
    if (d / p !== a) continue;
    if (x < 0) out[o++] = 0x2d;
    const whole = Math.floor(d / p);
    o = writeDigits(out, o, whole);
    if (k > 0) {
      // The fewest places: the last digit is not 0.
      out[o++] = 0x2e;
      let frac = d - whole * p;
      for (let i = o + k - 1; i >= o; i--) {
        const q = Math.floor(frac / 10);
        out[i] = 0x30 + frac - q * 10;
        frac = q;
      }
      o += k;
    }
    return o;
  }
  return -1;
}

/** Writes the decimal digits of `n`, a non-negative safe integer; returns the end. */
function writeDigits(out: Buffer, o: number, n: number): number {
  let len = 1;
  for (let t = n; t >= 10; t = Math.floor(t / 10)) len++;
  for (let i = o + len - 1; i >= o; i--) {
    const q = Math.floor(n / 10);
    out[i] = 0x30 + n - q * 10;
    n = q;
  }
  return o + len;
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
