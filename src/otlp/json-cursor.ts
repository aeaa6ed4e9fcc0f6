// A strict, byte-level JSON cursor over a request body, for the JSON reader (json-reader.ts), which
// reads OTLP/JSON where it stands instead of building JSON.parse's tree. It accepts only valid
// JSON, and only the shapes its callers take: on anything else it throws DECLINED, and the body is
// mapped through JSON.parse's tree instead (tree.ts), which decides (and words any error). So the
// reader never has to reproduce an error message, only the rows of the bodies it accepts.

import { isUtf8 } from 'node:buffer';

/** Thrown (one shared instance: no stack to capture) when the cursor declines the body. */
export const DECLINED: Error = Object.freeze(new Error('declined by the JSON fast path'));

// Byte classes inside a string: 0 plain ASCII; 1 ends the plain run (quote, backslash, control
// character, or a byte of a multi-byte UTF-8 sequence).
const STRING_CLASS = new Uint8Array(256);
for (let c = 0; c < 0x20; c++) STRING_CLASS[c] = 1;
for (let c = 0x80; c < 0x100; c++) STRING_CLASS[c] = 1;
STRING_CLASS[0x22] = 1;
STRING_CLASS[0x5c] = 1;

// Lowercase hex digits' values; 0xff for every other byte.
const HEX_VALUE = new Uint8Array(256).fill(0xff);
for (let c = 0; c < 16; c++) HEX_VALUE[c.toString(16).charCodeAt(0)] = c;

const WORDS = new DataView(new ArrayBuffer(8));
const POW10 = [1, 10, 100, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9];
const TWO_16 = 0x1_0000;
const TWO_32 = 0x1_0000_0000;

/**
 * hi * 10^9 + lo (hi < 10^10, lo < 10^9: a decimal of up to 19 digits) as an int64, the bits of a
 * uint64 above 2^63 kept: built from two exact 32-bit words in doubles, as four BigInt operations
 * cost twice as much (27 against 59-106 ns here; timestamps in nanoseconds have 19 digits).
 */
function int64Of(hi: number, lo: number): bigint {
  // With hi = h1 * 2^16 + h0: the value is a * 2^16 + b, a = h1 * 10^9 and b = h0 * 10^9 + lo, both
  // below 2^53 and so exact; a * 2^16 is split at 2^32 and b added, with its carry.
  const h1 = Math.floor(hi / TWO_16);
  const a = h1 * 1e9;
  const b = (hi - h1 * TWO_16) * 1e9 + lo;
  const a1 = Math.floor(a / TWO_16);
  const low = (a - a1 * TWO_16) * TWO_16 + (b % TWO_32);
  const carry = low >= TWO_32 ? 1 : 0;
  WORDS.setUint32(0, low - carry * TWO_32, true);
  WORDS.setUint32(4, a1 + Math.floor(b / TWO_32) + carry, true);
  return WORDS.getBigInt64(0, true);
}

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const COMMA = 0x2c;
const COLON = 0x3a;
const OPEN_OBJECT = 0x7b;
const CLOSE_OBJECT = 0x7d;
const OPEN_ARRAY = 0x5b;
const CLOSE_ARRAY = 0x5d;

// Values nested deeper than this are declined (JSON.parse takes them; they are no OTLP shape).
const MAX_SKIP_DEPTH = 200;

/** What `key` returns at the end of an object, and takes as `prev` for an object's first key. */
export const END_OF_OBJECT = -2;
export const FIRST_KEY = -3;
/** The id of a key not in the set. */
export const UNKNOWN_KEY = -1;

/** A scalar as JSON.parse gives it. */
export type Scalar = string | number | boolean | null;

/**
 * Known object keys, found by a hash computed while the key is read and then compared byte for
 * byte, so an unknown key costs no string.
 */
export class KeySet {
  private readonly names: readonly Buffer[];
  /** Each key's bytes and closing quote, compared where a key is expected. */
  readonly quoted: readonly Literal[];
  /**
   * The key that followed each key (last index: that began an object) the last time: writers
   * keep their order, so most keys are found by one comparison, without hashing.
   */
  readonly next: Int16Array;
  private readonly slots: Int32Array;
  private readonly hashes: Int32Array;
  private readonly mask: number;

  constructor(names: readonly string[]) {
    this.names = names.map((n) => Buffer.from(n, 'latin1'));
    this.quoted = names.map((n) => new Literal(`${n}"`));
    this.next = new Int16Array(names.length + 1).fill(-1);
    let size = 64;
    while (size < names.length * 4) size *= 2;
    this.mask = size - 1;
    this.slots = new Int32Array(size).fill(-1);
    this.hashes = new Int32Array(size);
    this.names.forEach((bytes, id) => {
      const h = hashBytes(bytes, 0, bytes.length);
      let slot = h & this.mask;
      while (this.slots[slot] !== -1) slot = (slot + 1) & this.mask;
      this.slots[slot] = id;
      this.hashes[slot] = h;
    });
  }

  /** An empty key order, for `JsonCursor.key`: a caller reading objects of several kinds keeps one a kind. */
  newOrder(): Int16Array {
    return new Int16Array(this.next.length).fill(-1);
  }

  /** The id (index in `names`) of the key in buf[start, end) with hash `h`, or -1. */
  find(buf: Buffer, start: number, end: number, h: number): number {
    for (let slot = h & this.mask; ; slot = (slot + 1) & this.mask) {
      const id = this.slots[slot]!;
      if (id === -1) return -1;
      if (this.hashes[slot] !== h) continue;
      const name = this.names[id]!;
      if (name.length !== end - start) continue;
      let k = 0;
      while (k < name.length && name[k] === buf[start + k]) k++;
      if (k === name.length) return id;
    }
  }
}

function hashBytes(buf: Uint8Array, start: number, end: number): number {
  let h = 0;
  for (let i = start; i < end; i++) h = (Math.imul(h, 31) + buf[i]!) | 0;
  return h;
}

/** A byte string the body is compared with four bytes at a time. */
export class Literal {
  readonly length: number;
  private readonly words: readonly number[];
  private readonly tail: readonly number[];

  constructor(text: string) {
    const bytes = Buffer.from(text, 'latin1');
    this.length = bytes.length;
    const whole = bytes.length & ~3;
    this.words = Array.from({ length: whole / 4 }, (_, i) => bytes.readUInt32LE(i * 4));
    this.tail = [...bytes.subarray(whole)];
  }

  /** Whether the body has this byte string at `p`. */
  at(j: JsonCursor, p: number): boolean {
    if (p + this.length > j.end) return false;
    const view = j.view;
    const words = this.words;
    for (let i = 0; i < words.length; i++) if (view.getUint32(p + i * 4, true) !== words[i]) return false;
    const tail = this.tail;
    const from = p + words.length * 4;
    for (let i = 0; i < tail.length; i++) if (view.getUint8(from + i) !== tail[i]) return false;
    return true;
  }
}

export class JsonCursor {
  readonly buf: Buffer;
  /** The same bytes, for `Literal.at`, and their length. */
  readonly view: DataView;
  readonly end: number;
  pos = 0;
  /** Where the last string read (`string`, `key`) starts and ends, quotes excluded. */
  strStart = 0;
  strEnd = 0;
  /** Whether it has escapes (its value is then JSON.parse's) or bytes above 0x7f. */
  strEscaped = false;
  strNonAscii = false;

  /** Declines a body that is not valid UTF-8 (the tree path decodes it with replacement characters). */
  constructor(body: Uint8Array) {
    this.buf = Buffer.from(body.buffer, body.byteOffset, body.byteLength);
    this.view = new DataView(body.buffer, body.byteOffset, body.byteLength);
    this.end = body.byteLength;
    if (!isUtf8(this.buf)) throw DECLINED;
    // A byte order mark is skipped, as the tree path's decoding drops it.
    if (this.buf[0] === 0xef && this.buf[1] === 0xbb && this.buf[2] === 0xbf) this.pos = 3;
  }

  /** Skips whitespace; returns the next byte (-1 at the end). */
  peek(): number {
    const buf = this.buf;
    let p = this.pos;
    for (;;) {
      const c = buf[p];
      if (c !== undefined && c > 0x20) {
        this.pos = p;
        return c;
      }
      if (c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09) p++;
      else {
        this.pos = p;
        return c === undefined ? -1 : c;
      }
    }
  }

  /** True when only whitespace is left. */
  atEnd(): boolean {
    return this.peek() === -1;
  }

  /** Enters an object: true; or reads a `null`: false. Anything else is declined. */
  object(): boolean {
    return this.enter(OPEN_OBJECT);
  }

  /** Enters an array: true; or reads a `null`: false. Anything else is declined. */
  array(): boolean {
    return this.enter(OPEN_ARRAY);
  }

  private enter(open: number): boolean {
    const c = this.peek();
    if (c === open) {
      this.pos++;
      return true;
    }
    if (c !== 0x6e) throw DECLINED;
    this.literal('null');
    return false;
  }

  /**
   * The next key of the object entered as an id of `keys` (-1 when unknown), the cursor left at
   * its value; END_OF_OBJECT at its end. `prev` is the id of the key read before in this object
   * (FIRST_KEY for none); `order`, the keys' usual order (KeySet.next). Keys with escapes are
   * declined (they may spell a known key).
   */
  key(prev: number, keys: KeySet, order: Int16Array = keys.next): number {
    const buf = this.buf;
    let c = this.peek();
    if (c === CLOSE_OBJECT) {
      this.pos++;
      return END_OF_OBJECT;
    }
    if (prev !== FIRST_KEY) {
      if (c !== COMMA) throw DECLINED;
      this.pos++;
      c = this.peek();
    }
    if (c !== QUOTE) throw DECLINED;
    const after = prev === FIRST_KEY ? order.length - 1 : prev === UNKNOWN_KEY ? -1 : prev;
    const guess = after < 0 ? -1 : order[after]!;
    if (guess >= 0) {
      const q = keys.quoted[guess]!;
      if (q.at(this, this.pos + 1)) {
        this.pos += 1 + q.length;
        this.colon();
        return guess;
      }
    }
    const h = this.hashedString();
    if (this.strEscaped) throw DECLINED;
    this.colon();
    const id = keys.find(buf, this.strStart, this.strEnd, h);
    if (after >= 0 && id >= 0) order[after] = id;
    return id;
  }

  private colon(): void {
    if (this.peek() !== COLON) throw DECLINED;
    this.pos++;
  }

  /** Whether the array entered has another element (`first`: none read yet); moves past `]` if not. */
  next(first: boolean): boolean {
    const c = this.peek();
    if (c === CLOSE_ARRAY) {
      this.pos++;
      return false;
    }
    if (!first) {
      if (c !== COMMA) throw DECLINED;
      this.pos++;
    }
    return true;
  }

  /** Reads a string (the cursor at its quote, after whitespace): sets str*; returns its hash. */
  private hashedString(): number {
    const buf = this.buf;
    let p = this.pos + 1;
    const start = p;
    let h = 0;
    let escaped = false;
    let nonAscii = false;
    for (;;) {
      const c = buf[p]!;
      if (STRING_CLASS[c] === 0) {
        h = (Math.imul(h, 31) + c) | 0;
        p++;
        continue;
      }
      if (c === QUOTE) break;
      if (c === BACKSLASH) {
        escaped = true;
        p = this.escape(p);
      } else if (c >= 0x80) {
        nonAscii = true;
        h = (Math.imul(h, 31) + c) | 0;
        p++;
      } else throw DECLINED; // a control character, or the end of the body (undefined)
    }
    this.strStart = start;
    this.strEnd = p;
    this.strEscaped = escaped;
    this.strNonAscii = nonAscii;
    this.pos = p + 1;
    return h;
  }

  /** Checks the escape at `p` (a backslash); returns the position after it. */
  private escape(p: number): number {
    const c = this.buf[p + 1];
    if (c === 0x75) {
      for (let k = p + 2; k < p + 6; k++) if (!isHexDigit(this.buf[k])) throw DECLINED;
      return p + 6;
    }
    if (
      c === QUOTE ||
      c === BACKSLASH ||
      c === 0x2f ||
      c === 0x62 ||
      c === 0x66 ||
      c === 0x6e ||
      c === 0x72 ||
      c === 0x74
    )
      return p + 2;
    throw DECLINED;
  }

  /** The string read last, as JSON.parse gives it. */
  stringValue(): string {
    const { buf, strStart, strEnd } = this;
    if (this.strEscaped) return JSON.parse(buf.toString('utf8', strStart - 1, strEnd + 1)) as string;
    return this.strNonAscii
      ? buf.toString('utf8', strStart, strEnd)
      : buf.toString('latin1', strStart, strEnd);
  }

  /** Reads a string value if one is next (sets str*): true; false when another value is next. */
  string(): boolean {
    if (this.peek() !== QUOTE) return false;
    this.hashedString();
    return true;
  }

  /**
   * A quoted decimal of 1 to 15 digits, exact as a double (a bucket count, nearly always), as a
   * number; -1, having read nothing, for any other value.
   */
  digits15(): number {
    if (this.peek() !== QUOTE) return -1;
    const buf = this.buf;
    const start = this.pos + 1;
    let p = start;
    let v = 0;
    let c = buf[p]!;
    while (c >= 0x30 && c <= 0x39 && p - start < 15) {
      v = v * 10 + c - 0x30;
      c = buf[++p]!;
    }
    if (c !== QUOTE || p === start) return -1;
    this.pos = p + 1;
    return v;
  }

  /**
   * A quoted decimal of 1 to 19 digits, as OTLP/JSON writes int64 and uint64 values, as the bigint
   * values.ts' int64 gives for it; undefined, having read nothing, for any other value.
   */
  digits64(): bigint | undefined {
    if (this.peek() !== QUOTE) return undefined;
    const buf = this.buf;
    const start = this.pos + 1;
    let p = start;
    // One pass (a timestamp has 19 digits): the first 15 digits exactly in `head`, the rest in `tail`.
    let head = 0;
    let c = buf[p]!;
    while (c >= 0x30 && c <= 0x39 && p - start < 15) {
      head = head * 10 + c - 0x30;
      c = buf[++p]!;
    }
    let tail = 0;
    while (c >= 0x30 && c <= 0x39) {
      tail = tail * 10 + c - 0x30;
      c = buf[++p]!;
    }
    const n = p - start;
    if (c !== QUOTE || n === 0 || n > 19) return undefined;
    this.pos = p + 1;
    if (n <= 15) return BigInt(head);
    // head * 10^m + tail as hi * 10^9 + lo, two exact halves of at most 10 and 9 digits.
    const m = n - 15;
    const split = POW10[9 - m]!;
    const hi = Math.floor(head / split);
    return int64Of(hi, (head - hi * split) * POW10[m]! + tail);
  }

  /**
   * A quoted id of `byteLength` bytes in lowercase hex, not all zero, as values.ts' id gives it;
   * undefined, having read nothing, for any other value (which `id` then judges).
   */
  hexId(byteLength: number): string | undefined {
    if (this.peek() !== QUOTE) return undefined;
    const buf = this.buf;
    const start = this.pos + 1;
    const end = start + byteLength * 2;
    if (buf[end] !== QUOTE) return undefined;
    let any = 0;
    for (let i = start; i < end; i++) {
      const c = buf[i]!;
      if (HEX_VALUE[c] === 0xff) return undefined;
      any |= HEX_VALUE[c]!;
    }
    if (any === 0) return undefined;
    this.pos = end + 1;
    return buf.toString('latin1', start, end);
  }

  /** A scalar value as JSON.parse gives it; objects and arrays are declined. */
  scalar(): Scalar {
    const c = this.peek();
    if (c === QUOTE) {
      this.hashedString();
      return this.stringValue();
    }
    if (c === 0x2d || (c >= 0x30 && c <= 0x39)) return this.number();
    if (c === 0x74) return this.literal('true');
    if (c === 0x66) return this.literal('false');
    if (c === 0x6e) return this.literal('null');
    throw DECLINED;
  }

  /** A number (the cursor at its first character), checked against JSON's grammar. */
  private number(): number {
    const buf = this.buf;
    const start = this.pos;
    let p = start;
    const negative = buf[p] === 0x2d;
    if (negative) p++;
    // The digits (fraction included) as an integer, while it stays exact.
    let mantissa = 0;
    let digits = 0;
    if (buf[p] === 0x30) p++;
    else if (isDigit(buf[p])) {
      while (isDigit(buf[p])) {
        mantissa = mantissa * 10 + (buf[p++]! - 0x30);
        digits++;
      }
    } else throw DECLINED;
    let fraction = 0;
    if (buf[p] === 0x2e) {
      p++;
      if (!isDigit(buf[p])) throw DECLINED;
      const from = p;
      while (isDigit(buf[p])) mantissa = mantissa * 10 + (buf[p++]! - 0x30);
      fraction = p - from;
      digits += fraction;
    }
    let exponent = false;
    if (buf[p] === 0x65 || buf[p] === 0x45) {
      exponent = true;
      p++;
      if (buf[p] === 0x2b || buf[p] === 0x2d) p++;
      if (!isDigit(buf[p])) throw DECLINED;
      while (isDigit(buf[p])) p++;
    }
    this.pos = p;
    // Up to 15 digits and 22 decimals, one division by an exact power of ten is rounded
    // correctly, as JSON.parse rounds; the rest is left to Number.
    if (!exponent && digits <= 15 && fraction <= 22) {
      const v = fraction === 0 ? mantissa : mantissa / POWERS_OF_TEN[fraction]!;
      return negative ? -v : v;
    }
    return Number(buf.toString('latin1', start, p));
  }

  private literal<T extends boolean | null>(word: 'true' | 'false' | 'null'): T {
    const buf = this.buf;
    const p = this.pos;
    for (let k = 0; k < word.length; k++) if (buf[p + k] !== word.charCodeAt(k)) throw DECLINED;
    this.pos = p + word.length;
    return (word === 'null' ? null : word === 'true') as T;
  }

  /** Skips any value, checking it. */
  skip(depth = 0): void {
    const c = this.peek();
    if (c === QUOTE) this.hashedString();
    else if (c === OPEN_OBJECT || c === OPEN_ARRAY) {
      if (depth >= MAX_SKIP_DEPTH) throw DECLINED;
      this.pos++;
      const close = c === OPEN_OBJECT ? CLOSE_OBJECT : CLOSE_ARRAY;
      if (this.peek() === close) {
        this.pos++;
        return;
      }
      for (;;) {
        if (c === OPEN_OBJECT) {
          if (this.peek() !== QUOTE) throw DECLINED;
          this.hashedString();
          this.colon();
        }
        this.skip(depth + 1);
        const d = this.peek();
        this.pos++;
        if (d === close) return;
        if (d !== COMMA) throw DECLINED;
      }
    } else this.scalar();
  }

  /** Skips an array of objects (or a null), checking it: the number of objects. */
  objects(): number {
    if (!this.array()) return 0;
    let n = 0;
    for (let first = true; this.next(first); first = false) {
      if (this.peek() !== OPEN_OBJECT) throw DECLINED;
      this.skip();
      n++;
    }
    return n;
  }
}

/** 10^0 to 10^22: every one a double exactly. */
const POWERS_OF_TEN = Array.from({ length: 23 }, (_, i) => 10 ** i);

function isDigit(c: number | undefined): boolean {
  return c !== undefined && c >= 0x30 && c <= 0x39;
}

function isHexDigit(c: number | undefined): boolean {
  return c !== undefined && ((c >= 0x30 && c <= 0x39) || ((c | 0x20) >= 0x61 && (c | 0x20) <= 0x66));
}
