// Readers for the scalar values of a decoded OTLP message. One decoded tree comes either from
// JSON.parse (ids as hex or base64 strings, int64 as strings, numbers or bigint, doubles possibly
// "NaN"/"Infinity", snake_case keys possible) or from protobufjs (ids as Uint8Array, int64 as
// Long, bytes as Uint8Array); every reader here accepts both forms so one mapper serves both.

import { LossyJsonNumber, OtlpDecodeError } from './errors.ts';

/** A node of a decoded message: a parsed JSON object or a protobufjs message. */
// biome-ignore lint/suspicious/noExplicitAny: decoded OTLP trees are dynamic, checked field by field
export type Msg = any;

/** Mutable counters shared by the readers while one request is mapped. */
export interface MapState {
  invalidIds: number;
}

const INT_RE = /^-?\d+$/;
const INT64_MIN = -(1n << 63n);
const UINT64_MAX = (1n << 64n) - 1n;
const INT64_MAX = (1n << 63n) - 1n;
const SAFE_MAX = 9007199254740992n; // 2^53: integers up to this magnitude are exact as JSON numbers

interface LongLike {
  low: number;
  high: number;
}

function isLong(v: object): v is LongLike {
  return typeof (v as LongLike).low === 'number' && typeof (v as LongLike).high === 'number';
}

// The two's complement bits of a protobufjs Long, as a signed 64-bit value.
function longToBigInt(v: LongLike): bigint {
  if (v.high === 0 && v.low >= 0) return BigInt(v.low);
  return (BigInt(v.high | 0) << 32n) + BigInt(v.low >>> 0);
}

function typeName(v: unknown): string {
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'array';
  return typeof v;
}

export function fail(field: string, expected: string, got: unknown): never {
  throw new OtlpDecodeError(`${field}: expected ${expected}, got ${typeName(got)}`);
}

function parseInt64String(s: string, field: string, signed: boolean): bigint {
  if (!INT_RE.test(s)) throw new OtlpDecodeError(`${field}: "${s.slice(0, 40)}" is not an integer`);
  const b = BigInt(s);
  if (b < INT64_MIN || b > (signed ? INT64_MAX : UINT64_MAX))
    throw new OtlpDecodeError(`${field}: ${s} is outside the ${signed ? 'int64' : '64-bit'} range`);
  // uint64 values above 2^63 keep their bits in the signed long column.
  return b > INT64_MAX ? BigInt.asIntN(64, b) : b;
}

/**
 * An int64/uint64/fixed64 field as bigint; 0n when absent (proto3 default). `signed` (int64,
 * sfixed64: an attribute's intValue, a point's asInt) refuses a value above 2^63 - 1, which an
 * unsigned field keeps as its bits.
 */
export function int64(v: unknown, field: string, signed = false): bigint {
  switch (typeof v) {
    case 'string':
      return parseInt64String(v, field, signed);
    case 'number':
      if (Number.isSafeInteger(v)) return BigInt(v);
      if (Number.isInteger(v)) throw new LossyJsonNumber(field);
      return fail(field, 'an integer', v);
    case 'bigint':
      return v;
    case 'undefined':
      return 0n;
    case 'object':
      if (v === null) return 0n;
      if (isLong(v)) return longToBigInt(v);
      return fail(field, 'an integer', v);
    default:
      return fail(field, 'an integer', v);
  }
}

/** An int32/uint32 field (or an enum given as number, numeric string or name); 0 when absent. */
export function int32(v: unknown, field: string, names?: Readonly<Record<string, number>>): number {
  if (typeof v === 'number') {
    if ((v | 0) === v) return v;
    if (Number.isInteger(v)) throw new OtlpDecodeError(`${field}: ${v} is outside the 32-bit range`);
    return fail(field, 'an integer', v);
  }
  if (v === undefined || v === null) return 0;
  if (typeof v === 'string') {
    if (names !== undefined && Object.hasOwn(names, v)) return names[v]!;
    if (INT_RE.test(v)) return int32(Number(v), field);
    throw new OtlpDecodeError(`${field}: "${v.slice(0, 40)}" is not an integer`);
  }
  return fail(field, 'an integer', v);
}

export const INT32_MAX = 2 ** 31 - 1;

/**
 * A uint32 field (OTLP's dropped_*_count) for an int32 column: a count beyond 2^31 - 1 is held at
 * it rather than refusing the request (it is legal OTLP, and only says "very many were dropped").
 */
export function droppedCount(v: unknown, field: string): number {
  const n = typeof v === 'string' && INT_RE.test(v) ? Number(v) : v;
  if (typeof n === 'number' && Number.isInteger(n) && n > INT32_MAX && n <= 0xffffffff) return INT32_MAX;
  return int32(v, field);
}

/**
 * A fixed32 flags field as the bigint of a long column. A value outside 0..2^32 - 1 is refused, as
 * protobuf's JSON parsers refuse it (a protobuf body cannot carry one).
 */
export function flags(v: unknown, field: string): bigint {
  if (v === undefined || v === null || v === 0) return 0n;
  if (typeof v === 'number' && v >= 0 && v <= 0xffffffff && Number.isInteger(v)) return BigInt(v);
  const n = int64(v, field);
  if (n < 0n || n > 0xffffffffn)
    throw new OtlpDecodeError(`${field}: ${n} is outside the 32-bit unsigned range`);
  return n;
}

/** A JSON number, as protobuf's JSON mapping takes a double written as a string. */
const DOUBLE_RE = /^-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?$/;

/**
 * A double field (0 when absent): numbers, "NaN"/"Infinity"/"-Infinity" and numeric strings.
 * A string must be a JSON number that fits a double: `Number` alone would take "0x10" as 16,
 * " 1 " as 1 and "1e400" as Infinity, which protobuf's JSON parsers refuse.
 */
export function double(v: unknown, field: string): number {
  if (typeof v === 'number') return v;
  if (v === undefined || v === null) return 0;
  if (typeof v === 'string') {
    if (v === 'NaN') return Number.NaN;
    if (v === 'Infinity') return Number.POSITIVE_INFINITY;
    if (v === '-Infinity') return Number.NEGATIVE_INFINITY;
    const n = DOUBLE_RE.test(v) ? Number(v) : Number.NaN;
    if (Number.isFinite(n)) return n;
    throw new OtlpDecodeError(
      `${field}: "${v.slice(0, 40)}" is not a finite JSON number, "NaN", "Infinity" or "-Infinity"`,
    );
  }
  if (typeof v === 'bigint') return Number(v);
  return fail(field, 'a number', v);
}

/** A double field that proto3 marks optional (histogram sum/min/max): null when absent. */
export function optionalDouble(v: unknown, field: string): number | null {
  return v === undefined || v === null ? null : double(v, field);
}

export function bool(v: unknown, field: string): boolean {
  if (typeof v === 'boolean') return v;
  if (v === undefined || v === null) return false;
  return fail(field, 'a boolean', v);
}

/** A string field; "" (the proto3 default) and absent both become null. */
export function str(v: unknown, field: string): string | null {
  if (typeof v === 'string') return v === '' ? null : v;
  if (v === undefined || v === null) return null;
  return fail(field, 'a string', v);
}

/** A repeated field: an array, or empty when absent. */
export function list(v: unknown, field: string): readonly Msg[] {
  if (Array.isArray(v)) return v;
  if (v === undefined || v === null) return EMPTY;
  return fail(field, 'an array', v);
}
const EMPTY: readonly Msg[] = Object.freeze([]);

/** A nested message: an object, or null when absent. */
export function obj(v: unknown, field: string): Msg | null {
  if (typeof v === 'object') {
    if (v === null || !Array.isArray(v)) return v;
  } else if (v === undefined) return null;
  return fail(field, 'an object', v);
}

export function int64List(v: unknown, field: string): bigint[] {
  const src = list(v, field);
  const out = new Array<bigint>(src.length);
  for (let i = 0; i < src.length; i++) out[i] = int64(src[i], field);
  return out;
}

export function doubleList(v: unknown, field: string): number[] {
  const src = list(v, field);
  const out = new Array<number>(src.length);
  for (let i = 0; i < src.length; i++) out[i] = double(src[i], field);
  return out;
}

/** Enum names a generic proto3 JSON encoder may write instead of numbers. */
export const SPAN_KIND: Readonly<Record<string, number>> = {
  SPAN_KIND_UNSPECIFIED: 0,
  SPAN_KIND_INTERNAL: 1,
  SPAN_KIND_SERVER: 2,
  SPAN_KIND_CLIENT: 3,
  SPAN_KIND_PRODUCER: 4,
  SPAN_KIND_CONSUMER: 5,
};

export const STATUS_CODE: Readonly<Record<string, number>> = {
  STATUS_CODE_UNSET: 0,
  STATUS_CODE_OK: 1,
  STATUS_CODE_ERROR: 2,
};

export const SEVERITY_NUMBER: Readonly<Record<string, number>> = Object.fromEntries([
  ['SEVERITY_NUMBER_UNSPECIFIED', 0],
  ...['TRACE', 'DEBUG', 'INFO', 'WARN', 'ERROR', 'FATAL'].flatMap((level, i) =>
    ['', '2', '3', '4'].map((suffix, j) => [`SEVERITY_NUMBER_${level}${suffix}`, i * 4 + j + 1] as const),
  ),
]);

export const TEMPORALITY: Readonly<Record<string, number>> = {
  AGGREGATION_TEMPORALITY_UNSPECIFIED: 0,
  AGGREGATION_TEMPORALITY_DELTA: 1,
  AGGREGATION_TEMPORALITY_CUMULATIVE: 2,
};

// --- ids -----------------------------------------------------------------------------------

const HEX32 = /^[0-9a-f]{32}$/;
const HEX16 = /^[0-9a-f]{16}$/;
const ZERO32 = '0'.repeat(32);
const ZERO16 = '0'.repeat(16);
const BASE64 = /^[A-Za-z0-9+/_-]+={0,2}$/;
const HEX_DIGITS = /^[0-9a-fA-F]+$/;

function bytesToHex(b: Uint8Array): string {
  return (b instanceof Buffer ? b : Buffer.from(b.buffer, b.byteOffset, b.byteLength)).toString('hex');
}

/**
 * A trace id (16 bytes) or span id (8 bytes) as lowercase hex. Hex strings in any case, base64
 * strings and bytes are accepted; absent, empty and all zero give null (all zero is how OTLP
 * writes "no valid context": SDKs send it for a link kept for its attributes, or a log record
 * outside a span), and an id of the wrong length or with bad characters gives null and is
 * counted in `st.invalidIds`.
 */
export function id(v: unknown, byteLength: 16 | 8, field: string, st: MapState): string | null {
  if (typeof v === 'string') {
    if (v.length === byteLength * 2) {
      const hex = byteLength === 16 ? HEX32 : HEX16;
      let s = v;
      if (!hex.test(s)) {
        s = s.toLowerCase();
        if (!hex.test(s)) return invalidId(st);
      }
      return s === (byteLength === 16 ? ZERO32 : ZERO16) ? null : s;
    }
    if (v.length === 0) return null;
    // Hex digits alone are hex of the wrong length, not base64: 22 of them (11 bytes) were read as
    // the 16 bytes of their unpadded base64, a made-up id stored without a word.
    if (BASE64.test(v) && !HEX_DIGITS.test(v)) {
      const bytes = Buffer.from(v, 'base64');
      if (bytes.length === byteLength) return bytesId(bytes, byteLength, st);
    }
    return invalidId(st);
  }
  if (v instanceof Uint8Array) {
    if (v.length === 0) return null;
    return bytesId(v, byteLength, st);
  }
  // protobufjs' default for an absent bytes field is an empty array.
  if (v === undefined || v === null || (Array.isArray(v) && v.length === 0)) return null;
  return fail(field, 'a hex string', v);
}

function bytesId(b: Uint8Array, byteLength: number, st: MapState): string | null {
  if (b.length !== byteLength) return invalidId(st);
  let any = 0;
  for (let i = 0; i < b.length; i++) any |= b[i]!;
  return any === 0 ? null : bytesToHex(b);
}

function invalidId(st: MapState): null {
  st.invalidIds++;
  return null;
}

// --- attributes and AnyValue as JSON text ----------------------------------------------------

// Attribute maps and AnyValues are converted to plain JS values and serialized with
// JSON.stringify: measured twice as fast as writing the JSON text by hand (bench/otlp-attributes.ts).
// Consequence: integer-like keys ("0", "1") come first, as in any JS object.

/** A double as a JSON value: NaN and infinities as the strings "NaN", "Infinity", "-Infinity". */
export function jsonDouble(n: number): number | string {
  return Number.isFinite(n) ? n : String(n);
}

/** An int64 as a JSON value: a number when |v| <= 2^53, else a decimal string. */
export function jsonInt(v: unknown, field: string): number | string {
  if (typeof v === 'number' && Number.isSafeInteger(v)) return v;
  if (typeof v === 'string' && v.length < 16 && INT_RE.test(v)) return Number(v);
  if (typeof v === 'object' && v !== null && isLong(v)) {
    const n = v.high * 4294967296 + (v.low >>> 0);
    if (Number.isSafeInteger(n)) return n;
  }
  const b = int64(v, field, true);
  return b >= -SAFE_MAX && b <= SAFE_MAX ? Number(b) : String(b);
}

/** An int64 or double as `jsonInt` or `jsonDouble` gives it, as JSON text. */
export function jsonText(v: number | string): string {
  return typeof v === 'number' ? String(v) : `"${v}"`;
}

/**
 * A bytes value as standard, padded base64, as protobuf's bytes give it: proto3 JSON also takes
 * the URL-safe alphabet and no padding, which would store the same bytes as another text.
 */
function bytesBase64(v: unknown, field: string): string {
  if (typeof v === 'string') {
    if (v === '') return v;
    if (BASE64.test(v)) return Buffer.from(v, 'base64').toString('base64');
    throw new OtlpDecodeError(`${field}: not base64`);
  }
  if (v instanceof Uint8Array) return Buffer.from(v.buffer, v.byteOffset, v.byteLength).toString('base64');
  return fail(field, 'base64 bytes', v);
}

/**
 * AnyValues nested deeper than this (arrays and maps within arrays and maps) are cut: the deeper
 * value is null. Read no further, they cannot overflow the stack; and an SDK that limits only
 * attributes (the Go SDK, to this depth) sends log bodies of any depth, which refusing would lose
 * with every record of their request.
 */
export const MAX_ANY_VALUE_DEPTH = 64;

/** An AnyValue as a JSON value (null when no value is set, or nested beyond MAX_ANY_VALUE_DEPTH). */
export function anyValueJs(v: Msg, depth = 0): unknown {
  if (v === undefined || v === null || depth > MAX_ANY_VALUE_DEPTH) return null;
  if (typeof v !== 'object' || Array.isArray(v)) return fail('AnyValue', 'an object', v);
  let x = v.stringValue ?? v.string_value;
  if (x != null) return typeof x === 'string' ? x : fail('stringValue', 'a string', x);
  x = v.intValue ?? v.int_value;
  if (x != null) return jsonInt(x, 'intValue');
  x = v.boolValue ?? v.bool_value;
  if (x != null) return bool(x, 'boolValue');
  x = v.doubleValue ?? v.double_value;
  if (x != null) return jsonDouble(double(x, 'doubleValue'));
  x = v.arrayValue ?? v.array_value;
  if (x != null) {
    const values = list(obj(x, 'arrayValue')?.values, 'arrayValue.values');
    const out = new Array<unknown>(values.length);
    for (let i = 0; i < values.length; i++) out[i] = anyValueJs(values[i], depth + 1);
    return out;
  }
  x = v.kvlistValue ?? v.kvlist_value;
  if (x != null) return keyValuesJs(list(obj(x, 'kvlistValue')?.values, 'kvlistValue.values'), depth + 1);
  x = v.bytesValue ?? v.bytes_value;
  if (x != null) return bytesBase64(x, 'bytesValue');
  return null;
}

/** A log body: a string value as is, any other value as its JSON, null when absent. */
export function bodyText(v: Msg): string | null {
  if (v === undefined || v === null) return null;
  const s = typeof v === 'object' ? (v.stringValue ?? v.string_value) : undefined;
  if (typeof s === 'string') return s;
  const value = anyValueJs(v);
  return value === null ? null : JSON.stringify(value);
}

function keyOf(kv: Msg): string {
  if (typeof kv !== 'object' || kv === null) return fail('attribute', 'an object', kv);
  const k = kv.key;
  if (typeof k === 'string') return k;
  if (k === undefined || k === null) return '';
  return fail('attribute key', 'a string', k);
}

/** A KeyValue list as a plain object; a repeated key keeps its last value. */
export function keyValuesJs(kvs: readonly Msg[], depth = 0): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (let i = 0; i < kvs.length; i++) {
    const kv = kvs[i];
    const key = keyOf(kv);
    const value = anyValueJs(kv.value, depth);
    if (key === '__proto__') {
      Object.defineProperty(out, key, { value, enumerable: true, writable: true, configurable: true });
    } else out[key] = value;
  }
  return out;
}

/** A list of KeyValue as a JSON object text; '{}' when empty. Duplicate keys: the last wins. */
export function attributesJson(v: unknown): string {
  if (v === undefined || v === null) return '{}';
  const kvs = list(v, 'attributes');
  return kvs.length === 0 ? '{}' : JSON.stringify(keyValuesJs(kvs));
}

/** The string value of one attribute (last occurrence); null when its value is not a string, undefined when absent. */
export function stringAttribute(v: unknown, key: string): string | null | undefined {
  const kvs = list(v, 'attributes');
  for (let i = kvs.length - 1; i >= 0; i--) {
    const kv = kvs[i];
    if (kv !== null && typeof kv === 'object' && kv.key === key) {
      const value = kv.value;
      const s = value == null ? undefined : (value.stringValue ?? value.string_value);
      return typeof s === 'string' ? s : null;
    }
  }
  return undefined;
}
