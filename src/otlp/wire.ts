// Protobuf wire format read straight from a request body: a bounds-checked cursor, and the writer
// of KeyValue lists and AnyValues as JSON text. The protobuf reader (protobuf-reader.ts) walks a
// request with them, without a message tree. Field numbers of KeyValue and AnyValue are those of
// proto/opentelemetry/proto/common/v1/common.proto.

import { isUtf8 } from 'node:buffer';
import { OtlpDecodeError } from './errors.ts';
import { JsonTextWriter, ObjectKeys } from './json-text.ts';
import { attributesJson, bodyText, MAX_ANY_VALUE_DEPTH, type Msg } from './values.ts';

/** Wire types (the low 3 bits of a tag). */
export const VARINT = 0;
export const I64 = 1;
export const LEN = 2;
export const I32 = 5;
const GROUP_START = 3;
const GROUP_END = 4;

/** A tag: field number and wire type, as they appear on the wire. */
export function tag(field: number, wireType: number): number {
  return (field << 3) | wireType;
}

function invalid(what: string): OtlpDecodeError {
  return new OtlpDecodeError(`invalid protobuf body: ${what}`);
}

// Unknown groups nested deeper are refused rather than overflowing the stack (protoc's limit).
const MAX_GROUP_DEPTH = 100;

/**
 * A cursor over one protobuf body. Every read takes the end of the message it is in and throws
 * OtlpDecodeError when a value runs past it, so a truncated or lying length is refused, never
 * read beyond. A field whose wire type is not the one its number has is skipped as unknown.
 */
export class WireCursor {
  readonly buf: Buffer;
  /** The same bytes, read four at a time where strings are scanned and copied. */
  readonly view: DataView;
  pos = 0;
  /** The high 32 bits of the last `varint64`; its low 32 bits are what it returned. */
  hi = 0;

  constructor(body: Uint8Array) {
    this.buf = Buffer.from(body.buffer, body.byteOffset, body.byteLength);
    this.view = new DataView(body.buffer, body.byteOffset, body.byteLength);
  }

  /** A varint's low 32 bits, unsigned (tags, lengths, uint32, and int32/enum via `| 0`). */
  uint32(end: number): number {
    const buf = this.buf;
    let p = this.pos;
    if (p >= end) throw invalid('a value runs past the end of its message');
    let b = buf[p++]!;
    if (b < 0x80) {
      this.pos = p;
      return b;
    }
    let v = b & 0x7f;
    for (let shift = 7; ; shift += 7) {
      if (p >= end) throw invalid('a value runs past the end of its message');
      if (shift > 63) throw invalid('a varint longer than 10 bytes');
      b = buf[p++]!;
      if (shift < 32) v |= (b & 0x7f) << shift;
      if (b < 0x80) break;
    }
    this.pos = p;
    return v >>> 0;
  }

  /**
   * A field's tag (its number and wire type). As protobuf's parsers hold it: at most 32 bits (the
   * low 32 bits of a longer one would alias another field) and a field number of 1 or more. One
   * byte, the common case, is read here; the rest by `longTag`.
   */
  tag(end: number): number {
    const p = this.pos;
    if (p < end) {
      const b = this.buf[p]!;
      if (b >= 8 && b < 0x80) {
        this.pos = p + 1;
        return b;
      }
    }
    return this.longTag(end);
  }

  private longTag(end: number): number {
    const start = this.pos;
    const t = this.uint32(end);
    this.within32Bits(start, 'tag');
    if (t < 8) throw invalid(`field number 0 at offset ${start}`);
    return t;
  }

  /** Refuses the varint read from `start` when it runs past 32 bits. */
  private within32Bits(start: number, what: string): void {
    const n = this.pos - start;
    if (n > 5 || (n === 5 && this.buf[this.pos - 1]! > 0x0f))
      throw invalid(`a ${what} beyond 32 bits at offset ${start}`);
  }

  /** A 64-bit varint: returns its low 32 bits, leaves the high 32 bits in `hi` (both unsigned). */
  varint64(end: number): number {
    const buf = this.buf;
    let p = this.pos;
    let lo = 0;
    let hi = 0;
    for (let shift = 0; ; shift += 7) {
      if (p >= end) throw invalid('a value runs past the end of its message');
      if (shift > 63) throw invalid('a varint longer than 10 bytes');
      const b = buf[p++]!;
      const bits = b & 0x7f;
      if (shift < 28) lo |= bits << shift;
      else if (shift === 28) {
        lo |= bits << 28;
        hi |= bits >>> 4;
      } else hi |= bits << (shift - 32);
      if (b < 0x80) break;
    }
    this.pos = p;
    this.hi = hi >>> 0;
    return lo >>> 0;
  }

  /** A fixed32 (unsigned). */
  fixed32(end: number): number {
    return this.buf.readUInt32LE(this.take(4, end));
  }

  /** A fixed64 as signed 64 bits (uint64 values above 2^63 keep their bits, as for JSON). */
  fixed64(end: number): bigint {
    // Two 32-bit halves: several times faster than Buffer's readBigInt64LE.
    const lo = this.fixed64Words(end);
    const hi = this.hi | 0;
    return hi === 0 ? BigInt(lo) : BigInt(hi) * 4294967296n + BigInt(lo);
  }

  /** A fixed64 as `varint64` reads a varint: returns its low 32 bits, leaves the high 32 in `hi`. */
  fixed64Words(end: number): number {
    const b = this.buf;
    const p = this.take(8, end);
    this.hi = (b[p + 4]! | (b[p + 5]! << 8) | (b[p + 6]! << 16) | (b[p + 7]! << 24)) >>> 0;
    return (b[p]! | (b[p + 1]! << 8) | (b[p + 2]! << 16) | (b[p + 3]! << 24)) >>> 0;
  }

  double(end: number): number {
    return this.buf.readDoubleLE(this.take(8, end));
  }

  /** Moves past `n` bytes of a value; returns where they start. */
  private take(n: number, end: number): number {
    const p = this.pos;
    if (p + n > end) throw invalid('a value runs past the end of its message');
    this.pos = p + n;
    return p;
  }

  /** The length of a LEN field; the cursor is left at its first byte. */
  length(end: number): number {
    const start = this.pos;
    const n = this.uint32(end);
    // Its low 32 bits of a longer varint would pass the check below.
    if (this.pos - start > 4) this.within32Bits(start, 'length');
    if (n > end - this.pos) throw invalid('a length runs past the end of its message');
    return n;
  }

  /**
   * Skips the value of a field whose tag is `fieldTag` (unknown fields, groups included). A group
   * ends at the end tag of its own field number: another field's end, as a lone end tag, makes the
   * body invalid, as protobuf's parsers hold it.
   */
  skip(fieldTag: number, end: number, depth = 0): void {
    const wireType = fieldTag & 7;
    switch (wireType) {
      case VARINT:
        this.varint64(end);
        return;
      case I64:
        this.take(8, end);
        return;
      case LEN: {
        const n = this.length(end); // moves past the length's own bytes first
        this.pos += n;
        return;
      }
      case I32:
        this.take(4, end);
        return;
      case GROUP_START:
        if (depth >= MAX_GROUP_DEPTH) throw invalid(`groups nested deeper than ${MAX_GROUP_DEPTH} levels`);
        for (;;) {
          const t = this.tag(end);
          if ((t & 7) !== GROUP_END) this.skip(t, end, depth + 1);
          else if (t >>> 3 === fieldTag >>> 3) return;
          else
            throw invalid(
              `a group of field ${fieldTag >>> 3} ends as field ${t >>> 3} at offset ${this.pos}`,
            );
        }
      default:
        throw invalid(`wire type ${wireType} at offset ${this.pos}`);
    }
  }

  /** The elements of a repeated LEN field (its `tag`) in [start, end), gathered into `out`. */
  collect(start: number, end: number, fieldTag: number, out: Ranges): Ranges {
    out.reset();
    this.pos = start;
    while (this.pos < end) {
      const t = this.tag(end);
      if (t !== fieldTag) {
        this.skip(t, end);
        continue;
      }
      const n = this.length(end);
      out.push(this.pos, this.pos + n);
      this.pos += n;
    }
    return out;
  }

  /**
   * The UTF-8 text in [start, end). Invalid UTF-8 becomes U+FFFD (each maximal bad sequence, as
   * WHATWG's decoder does), as OTLP recommends (opentelemetry-proto's specification since 2026-08):
   * the Collector and many protobuf runtimes pass such strings on, and refusing the request (400,
   * final for OTLP clients) would lose every item of the batch. JSON bodies get the same.
   */
  string(start: number, end: number): string {
    const buf = this.buf;
    const view = this.view;
    let i = start;
    while (i + 4 <= end && (view.getUint32(i, true) & 0x80808080) === 0) i += 4;
    for (; i < end; i++) if (buf[i]! >= 0x80) return buf.toString('utf8', start, end);
    return start === end ? '' : buf.toString('latin1', start, end);
  }

  /** Whether [start, end) is valid UTF-8. */
  isUtf8(start: number, end: number): boolean {
    return isUtf8(this.buf.subarray(start, end));
  }
}

/**
 * The ranges of a message's repeated LEN field (or of one KeyValue list gathered from several
 * occurrences): start and end of each element, flat. Reused: `n` is reset instead of allocating.
 */
export class Ranges {
  at: number[] = [];
  n = 0;

  push(start: number, end: number): void {
    this.at[this.n++] = start;
    this.at[this.n++] = end;
  }

  reset(): void {
    this.n = 0;
  }
}

// --- KeyValue lists as JSON text --------------------------------------------------------------

const KEY = tag(1, LEN);
const VALUE = tag(2, LEN);
const STRING_VALUE = tag(1, LEN);
const BOOL_VALUE = tag(2, VARINT);
const INT_VALUE = tag(3, VARINT);
const DOUBLE_VALUE = tag(4, I64);
const ARRAY_VALUE = tag(5, LEN);
const KVLIST_VALUE = tag(6, LEN);
const BYTES_VALUE = tag(7, LEN);
const VALUES = tag(1, LEN); // ArrayValue.values and KeyValueList.values

/** The AnyValue member that counts (the last one on the wire), found by `anyValue`. */
interface Member {
  tag: number;
  start: number;
  end: number;
}

/**
 * Writes KeyValue lists as JSON text, byte for byte what `attributesJson` gives for the same list.
 * Keys and strings are copied as UTF-8 bytes (checked, escaped where JSON needs it, invalid UTF-8 as
 * U+FFFD); a list with a repeated key, an integer-like key (which a JS object reorders) or a key
 * that is not valid UTF-8 is handed to `attributesJson`.
 */
export class AttributesWriter extends JsonTextWriter {
  /** Keys of the objects being written, innermost last (for the repeated-key check). */
  private readonly keys: ObjectKeys;
  private readonly member: Member = { tag: 0, start: 0, end: 0 };
  private readonly kv: KeyValueAt = { keyStart: 0, keyEnd: 0, valueStart: -1, valueEnd: -1 };
  private readonly r: WireCursor;

  constructor(reader: WireCursor) {
    super();
    this.r = reader;
    this.keys = new ObjectKeys(reader.buf);
  }

  /** The KeyValue messages in `kvs` (ranges) as one JSON object text; '{}' when there are none. */
  json(kvs: Ranges): string {
    if (kvs.n === 0) return '{}';
    this.len = 0;
    this.keys.reset();
    if (this.object(kvs.at, kvs.n, 0)) return this.out.toString('utf8', 0, this.len);
    return attributesJson(keyValueMsgs(this.r, kvs.at, kvs.n, 0));
  }

  /** A log body (values.ts' bodyText): a string value as is, any other value as JSON, null when none. */
  body(start: number, end: number): string | null {
    const r = this.r;
    const m = lastMember(r, start, end, this.member);
    if (m.tag === 0) return null;
    if (m.tag === STRING_VALUE) return r.string(m.start, m.end);
    this.len = 0;
    this.keys.reset();
    if (this.anyValue(start, end, 0)) return this.out.toString('utf8', 0, this.len);
    return bodyText(anyValueMsg(r, start, end, 0));
  }

  /** Writes `{...}` for the KeyValues in the first `n` of `at`; false when a key needs the JS object. */
  private object(at: readonly number[], n: number, depth: number): boolean {
    const r = this.r;
    this.keys.open();
    this.byte(0x7b);
    const kv = this.kv;
    for (let i = 0; i < n; i += 2) {
      keyValue(r, at[i]!, at[i + 1]!, kv);
      const { keyStart, keyEnd, valueStart, valueEnd } = kv;
      if (!this.keys.add(keyStart, keyEnd)) return false;
      if (i > 0) this.byte(0x2c);
      // A key that was not valid UTF-8 may equal another once its bad bytes are U+FFFD: the JS object decides.
      if (!this.text(keyStart, keyEnd)) return false;
      this.byte(0x3a);
      if (valueStart < 0) this.asciiText('null');
      else if (!this.anyValue(valueStart, valueEnd, depth)) return false;
    }
    this.byte(0x7d);
    this.keys.close();
    return true;
  }

  private anyValue(start: number, end: number, depth: number): boolean {
    if (depth > MAX_ANY_VALUE_DEPTH) {
      this.asciiText('null'); // cut, as values.ts' anyValueJs does
      return true;
    }
    const r = this.r;
    const m = lastMember(r, start, end, this.member);
    switch (m.tag) {
      case STRING_VALUE:
        this.text(m.start, m.end);
        return true;
      case BOOL_VALUE:
        r.pos = m.start;
        this.asciiText(r.varint64(end) !== 0 || r.hi !== 0 ? 'true' : 'false');
        return true;
      case INT_VALUE:
        r.pos = m.start;
        this.int64(r.varint64(end), r.hi | 0);
        return true;
      case DOUBLE_VALUE:
        r.pos = m.start;
        this.double(r.double(end));
        return true;
      case BYTES_VALUE:
        this.byte(0x22);
        this.asciiText(r.buf.toString('base64', m.start, m.end));
        this.byte(0x22);
        return true;
      case ARRAY_VALUE: {
        const items = listRanges(r, m.start, m.end);
        this.byte(0x5b);
        for (let k = 0; k < items.n; k += 2) {
          if (k > 0) this.byte(0x2c);
          if (!this.anyValue(items.at[k]!, items.at[k + 1]!, depth + 1)) return false;
        }
        this.byte(0x5d);
        return true;
      }
      case KVLIST_VALUE: {
        const kvs = listRanges(r, m.start, m.end);
        return this.object(kvs.at, kvs.n, depth + 1);
      }
      default:
        this.asciiText('null');
        return true;
    }
  }

  /**
   * A string field's bytes as a JSON string; false when they are not valid UTF-8 (written with
   * U+FFFD in their place, see WireCursor.string).
   */
  private text(start: number, end: number): boolean {
    const buf = this.r.buf;
    const view = this.r.view;
    this.reserve(end - start + 2);
    const out = this.out;
    const outView = this.outView;
    let o = this.len;
    out[o++] = 0x22;
    let nonAscii = false;
    let i = start;
    // Four bytes at a time while none needs a look (the traces' decode step 0.91-0.97x): none is
    // beyond ASCII (its top bit), below 0x20 (`(x - 0x20202020) & ~x` sets the top bit of such a
    // byte, exactly when no byte is beyond ASCII), '"' or '\\' (a zero byte of x ^ their bytes).
    for (; i + 4 <= end; i += 4) {
      const x = view.getUint32(i, true);
      const q = x ^ 0x22222222;
      const b = x ^ 0x5c5c5c5c;
      const look =
        (x & 0x80808080) |
        ((x - 0x20202020) & ~x & 0x80808080) |
        ((q - 0x01010101) & ~q & 0x80808080) |
        ((b - 0x01010101) & ~b & 0x80808080);
      if (look !== 0) break;
      outView.setUint32(o, x, true);
      o += 4;
    }
    for (; i < end; i++) {
      const c = buf[i]!;
      if (c < 0x20 || c === 0x22 || c === 0x5c) {
        // Needs escaping (rare): JSON.stringify writes it as a JS object's value would be.
        return this.escaped(start, end);
      }
      if (c >= 0x80) nonAscii = true;
      out[o++] = c;
    }
    if (nonAscii && !this.r.isUtf8(start, end)) return this.escaped(start, end);
    out[o++] = 0x22;
    this.len = o;
    return true;
  }

  /** The text through JSON.stringify, invalid UTF-8 as U+FFFD; whether it was valid UTF-8. */
  private escaped(start: number, end: number): boolean {
    const json = JSON.stringify(this.r.string(start, end));
    this.reserve(json.length * 3);
    this.len += this.out.write(json, this.len, 'utf8');
    return this.r.isUtf8(start, end);
  }
}

/** Where a KeyValue's key and value are (value -1: absent; key absent: the empty range). */
interface KeyValueAt {
  keyStart: number;
  keyEnd: number;
  valueStart: number;
  valueEnd: number;
}

/** Finds the key and value of the KeyValue in [start, end) (the last of each counts). */
function keyValue(r: WireCursor, start: number, end: number, kv: KeyValueAt): void {
  kv.keyStart = kv.keyEnd = 0;
  kv.valueStart = kv.valueEnd = -1;
  r.pos = start;
  while (r.pos < end) {
    const t = r.tag(end);
    if (t !== KEY && t !== VALUE) {
      r.skip(t, end);
      continue;
    }
    const n = r.length(end);
    if (t === KEY) {
      kv.keyStart = r.pos;
      kv.keyEnd = r.pos += n;
    } else {
      kv.valueStart = r.pos;
      kv.valueEnd = r.pos += n;
    }
  }
}

/** The value (last member) of the AnyValue in [start, end); tag 0 when it has none. */
function lastMember(r: WireCursor, start: number, end: number, m: Member): Member {
  m.tag = 0;
  r.pos = start;
  while (r.pos < end) {
    const t = r.tag(end);
    const at = r.pos;
    switch (t) {
      case STRING_VALUE:
      case ARRAY_VALUE:
      case KVLIST_VALUE:
      case BYTES_VALUE: {
        const n = r.length(end);
        m.tag = t;
        m.start = r.pos;
        m.end = r.pos += n;
        break;
      }
      case BOOL_VALUE:
      case INT_VALUE:
      case DOUBLE_VALUE:
        r.skip(t, end);
        m.tag = t;
        m.start = at;
        m.end = r.pos;
        break;
      default:
        r.skip(t, end);
    }
  }
  return m;
}

/** The element ranges of an ArrayValue (AnyValues) or a KeyValueList (KeyValues). */
function listRanges(r: WireCursor, start: number, end: number): Ranges {
  return r.collect(start, end, VALUES, new Ranges());
}

// --- the object route, for the lists a JS object must order ----------------------------------

/** KeyValue messages as the message objects values.ts reads (strings, bigint ints, Uint8Array bytes). */
function keyValueMsgs(r: WireCursor, at: readonly number[], n: number, depth: number): Msg[] {
  const out: Msg[] = [];
  const kv: KeyValueAt = { keyStart: 0, keyEnd: 0, valueStart: -1, valueEnd: -1 };
  for (let i = 0; i < n; i += 2) {
    keyValue(r, at[i]!, at[i + 1]!, kv);
    const key = r.string(kv.keyStart, kv.keyEnd);
    const value = kv.valueStart < 0 ? null : anyValueMsg(r, kv.valueStart, kv.valueEnd, depth);
    out.push({ key, value });
  }
  return out;
}

function anyValueMsg(r: WireCursor, start: number, end: number, depth: number): Msg {
  if (depth > MAX_ANY_VALUE_DEPTH) return {}; // cut: no value
  const m = lastMember(r, start, end, { tag: 0, start: 0, end: 0 });
  r.pos = m.start;
  switch (m.tag) {
    case STRING_VALUE:
      return { stringValue: r.string(m.start, m.end) };
    case BOOL_VALUE:
      return { boolValue: r.varint64(end) !== 0 || r.hi !== 0 };
    case INT_VALUE: {
      const low = r.varint64(end);
      return { intValue: { low, high: r.hi | 0 } }; // read as protobufjs' Long is
    }
    case DOUBLE_VALUE:
      return { doubleValue: r.double(end) };
    case BYTES_VALUE:
      return { bytesValue: r.buf.subarray(m.start, m.end) };
    case ARRAY_VALUE: {
      const items = listRanges(r, m.start, m.end);
      const values: Msg[] = [];
      for (let i = 0; i < items.n; i += 2)
        values.push(anyValueMsg(r, items.at[i]!, items.at[i + 1]!, depth + 1));
      return { arrayValue: { values } };
    }
    case KVLIST_VALUE: {
      const kvs = listRanges(r, m.start, m.end);
      return { kvlistValue: { values: keyValueMsgs(r, kvs.at, kvs.n, depth + 1) } };
    }
    default:
      return {};
  }
}

/**
 * The string value of the last KeyValue named `key` in `kvs`: null when its value is not a
 * string, undefined when there is none (values.ts' stringAttribute).
 */
export function stringAttribute(r: WireCursor, kvs: Ranges, key: Buffer): string | null | undefined {
  const kv: KeyValueAt = { keyStart: 0, keyEnd: 0, valueStart: -1, valueEnd: -1 };
  for (let i = kvs.n - 2; i >= 0; i -= 2) {
    keyValue(r, kvs.at[i]!, kvs.at[i + 1]!, kv);
    const { keyStart, keyEnd, valueStart, valueEnd } = kv;
    if (keyEnd - keyStart !== key.length || !key.equals(r.buf.subarray(keyStart, keyEnd))) continue;
    if (valueStart < 0) return null;
    const m = lastMember(r, valueStart, valueEnd, { tag: 0, start: 0, end: 0 });
    return m.tag === STRING_VALUE ? r.string(m.start, m.end) : null;
  }
  return undefined;
}
