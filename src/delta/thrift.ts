// Thrift compact protocol, generically: a struct decodes to its fields in wire order and encodes
// back to the same bytes, so that Parquet footers (FileMetaData, OffsetIndex) can have a few
// fields changed and everything else, known to this code or not, kept as written.

export const T_BOOL_TRUE = 1;
export const T_BOOL_FALSE = 2;
const T_BYTE = 3;
export const T_I16 = 4;
export const T_I32 = 5;
export const T_I64 = 6;
const T_DOUBLE = 7;
export const T_BINARY = 8;
export const T_LIST = 9;
const T_SET = 10;
const T_MAP = 11;
export const T_STRUCT = 12;

/** A struct's fields in wire order. A bool field's value is its type (T_BOOL_TRUE/FALSE). */
export type TStruct = TField[];
export interface TField {
  id: number;
  type: number;
  value: TValue;
}
export interface TList {
  elemType: number;
  /** T_SET instead of T_LIST. */
  set: boolean;
  items: TValue[];
}
export interface TMap {
  keyType: number;
  valueType: number;
  entries: [TValue, TValue][];
}
/** Integers as numbers, or bigints beyond 2^53; binary as bytes; bools in lists as their byte. */
export type TValue = number | bigint | Uint8Array | TStruct | TList | TMap;

export class ThriftError extends Error {}

// Nesting deeper than this is not a Parquet footer.
const MAX_DEPTH = 64;

export class CompactReader {
  pos: number;
  private readonly buf: Uint8Array;

  constructor(buf: Uint8Array, start = 0) {
    this.buf = buf;
    this.pos = start;
  }

  private byte(): number {
    if (this.pos >= this.buf.length) throw new ThriftError('truncated thrift data');
    return this.buf[this.pos++]!;
  }

  private varint(): bigint | number {
    let result = 0;
    let shift = 0;
    for (;;) {
      const b = this.byte();
      if (shift < 49) {
        result += (b & 0x7f) * 2 ** shift;
        if ((b & 0x80) === 0) return result;
      } else {
        // Past 7 x 7 bits a number may be inexact: finish as a bigint.
        let big = BigInt(result) + (BigInt(b & 0x7f) << BigInt(shift));
        let more = b & 0x80;
        while (more) {
          shift += 7;
          if (shift > 63) throw new ThriftError('varint too long');
          const c = this.byte();
          big += BigInt(c & 0x7f) << BigInt(shift);
          more = c & 0x80;
        }
        return big;
      }
      shift += 7;
    }
  }

  private zigzag(): number | bigint {
    const v = this.varint();
    if (typeof v === 'number') return v % 2 === 0 ? v / 2 : -(v + 1) / 2;
    const z = BigInt.asUintN(64, v);
    const r = (z >> 1n) ^ -(z & 1n);
    return Number.isSafeInteger(Number(r)) ? Number(r) : r;
  }

  private size(): number {
    const v = this.varint();
    if (typeof v !== 'number' || v > this.buf.length - this.pos) throw new ThriftError('bad length');
    return v;
  }

  struct(depth = 0): TStruct {
    if (depth > MAX_DEPTH) throw new ThriftError('thrift nested too deeply');
    const fields: TStruct = [];
    let last = 0;
    for (;;) {
      const head = this.byte();
      if (head === 0) return fields;
      const type = head & 0x0f;
      const delta = head >> 4;
      const id = delta === 0 ? Number(this.zigzag()) : last + delta;
      last = id;
      const value = type === T_BOOL_TRUE || type === T_BOOL_FALSE ? type : this.value(type, depth + 1);
      fields.push({ id, type, value });
    }
  }

  private value(type: number, depth: number): TValue {
    switch (type) {
      case T_BOOL_TRUE:
      case T_BOOL_FALSE:
      case T_BYTE:
        return this.byte(); // a bool or byte inside a list or map: one byte
      case T_I16:
      case T_I32:
      case T_I64:
        return this.zigzag();
      case T_DOUBLE: {
        if (this.pos + 8 > this.buf.length) throw new ThriftError('truncated thrift data');
        const b = this.buf.slice(this.pos, this.pos + 8);
        this.pos += 8;
        return b;
      }
      case T_BINARY: {
        const n = this.size();
        const b = this.buf.subarray(this.pos, this.pos + n);
        this.pos += n;
        return b;
      }
      case T_LIST:
      case T_SET: {
        const head = this.byte();
        const elemType = head & 0x0f;
        const n = head >> 4 === 15 ? this.size() : head >> 4;
        const items: TValue[] = [];
        for (let i = 0; i < n; i++) items.push(this.value(elemType, depth + 1));
        return { elemType, set: type === T_SET, items };
      }
      case T_MAP: {
        const n = this.size();
        const kv = n > 0 ? this.byte() : 0;
        const entries: [TValue, TValue][] = [];
        for (let i = 0; i < n; i++) {
          entries.push([this.value(kv >> 4, depth + 1), this.value(kv & 0x0f, depth + 1)]);
        }
        return { keyType: kv >> 4, valueType: kv & 0x0f, entries };
      }
      case T_STRUCT:
        return this.struct(depth);
      default:
        throw new ThriftError(`unknown thrift type ${type}`);
    }
  }
}

export class CompactWriter {
  private buf = new Uint8Array(1024);
  private pos = 0;

  bytes(): Uint8Array {
    return this.buf.subarray(0, this.pos);
  }

  /** Starts over, keeping the buffer. */
  reset(): void {
    this.pos = 0;
  }

  private room(n: number): void {
    if (this.pos + n <= this.buf.length) return;
    const next = new Uint8Array(Math.max(this.buf.length * 2, this.pos + n));
    next.set(this.buf.subarray(0, this.pos));
    this.buf = next;
  }

  private byte(b: number): void {
    this.room(1);
    this.buf[this.pos++] = b;
  }

  private varint(v: number | bigint): void {
    if (typeof v === 'bigint') {
      let x = BigInt.asUintN(64, v);
      while (x >= 0x80n) {
        this.byte(Number(x & 0x7fn) | 0x80);
        x >>= 7n;
      }
      this.byte(Number(x));
      return;
    }
    let x = v;
    while (x >= 0x80) {
      this.byte((x % 0x80) | 0x80);
      x = Math.floor(x / 0x80);
    }
    this.byte(x);
  }

  private zigzag(v: number | bigint): void {
    if (typeof v === 'bigint' || !Number.isSafeInteger(v * 2)) {
      const b = BigInt(v);
      this.varint(BigInt.asUintN(64, (b << 1n) ^ (b >> 63n)));
    } else this.varint(v >= 0 ? v * 2 : -v * 2 - 1);
  }

  private raw(b: Uint8Array): void {
    this.room(b.length);
    this.buf.set(b, this.pos);
    this.pos += b.length;
  }

  struct(fields: TStruct): void {
    let last = 0;
    for (const f of fields) {
      const delta = f.id - last;
      if (delta > 0 && delta <= 15) this.byte((delta << 4) | f.type);
      else {
        this.byte(f.type);
        this.zigzag(f.id);
      }
      last = f.id;
      if (f.type !== T_BOOL_TRUE && f.type !== T_BOOL_FALSE) this.value(f.type, f.value);
    }
    this.byte(0);
  }

  private value(type: number, v: TValue): void {
    switch (type) {
      case T_BOOL_TRUE:
      case T_BOOL_FALSE:
      case T_BYTE:
        this.byte(v as number);
        return;
      case T_I16:
      case T_I32:
      case T_I64:
        this.zigzag(v as number | bigint);
        return;
      case T_DOUBLE:
        this.raw(v as Uint8Array);
        return;
      case T_BINARY:
        this.varint((v as Uint8Array).length);
        this.raw(v as Uint8Array);
        return;
      case T_LIST:
      case T_SET: {
        const l = v as TList;
        const n = l.items.length;
        if (n < 15) this.byte((n << 4) | l.elemType);
        else {
          this.byte(0xf0 | l.elemType);
          this.varint(n);
        }
        for (const item of l.items) this.value(l.elemType, item);
        return;
      }
      case T_MAP: {
        const m = v as TMap;
        this.varint(m.entries.length);
        if (m.entries.length === 0) return;
        this.byte((m.keyType << 4) | m.valueType);
        for (const [k, x] of m.entries) {
          this.value(m.keyType, k);
          this.value(m.valueType, x);
        }
        return;
      }
      case T_STRUCT:
        this.struct(v as TStruct);
        return;
      default:
        throw new ThriftError(`unknown thrift type ${type}`);
    }
  }
}

export function decodeStruct(buf: Uint8Array): TStruct {
  const r = new CompactReader(buf);
  const s = r.struct();
  if (r.pos !== buf.length) throw new ThriftError('trailing bytes after thrift struct');
  return s;
}

/**
 * One writer for every struct: a page header is ~20-30 bytes, and a 1 KiB buffer made for each
 * was 5-6% of the CPU of writing a small Parquet file.
 */
const writer = new CompactWriter();

export function encodeStruct(s: TStruct): Uint8Array {
  writer.reset();
  writer.struct(s);
  return writer.bytes().slice();
}

// --- field access --------------------------------------------------------------------------

export function field(s: TStruct, id: number): TField | undefined {
  return s.find((f) => f.id === id);
}

/** An integer field as a number (offsets and sizes of a Parquet file fit in one), or undefined. */
export function intField(s: TStruct, id: number): number | undefined {
  const v = field(s, id)?.value;
  if (v === undefined) return undefined;
  if (typeof v === 'number') return v;
  if (typeof v === 'bigint') throw new ThriftError(`field ${id} is beyond 2^53`);
  throw new ThriftError(`field ${id} is not an integer`);
}

export function structField(s: TStruct, id: number): TStruct | undefined {
  const f = field(s, id);
  if (f === undefined) return undefined;
  if (f.type !== T_STRUCT) throw new ThriftError(`field ${id} is not a struct`);
  return f.value as TStruct;
}

export function listField(s: TStruct, id: number): TList | undefined {
  const f = field(s, id);
  if (f === undefined) return undefined;
  if (f.type !== T_LIST) throw new ThriftError(`field ${id} is not a list`);
  return f.value as TList;
}

/** The structs of a list-of-struct field ([] when absent). */
export function structItems(s: TStruct, id: number): TStruct[] {
  const l = listField(s, id);
  if (l === undefined) return [];
  if (l.elemType !== T_STRUCT) throw new ThriftError(`field ${id} is not a list of structs`);
  return l.items as TStruct[];
}

/** Sets an integer field that is present; the others stay absent. */
export function setInt(s: TStruct, id: number, value: number): void {
  const f = field(s, id);
  if (f !== undefined) f.value = value;
}
