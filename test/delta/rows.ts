// Deterministic test rows for any table schema, rich in edge values (int64 extremes, values beyond
// 2^53, astral and private-use characters, long strings, NaN/infinities, nulls, empty lists), and
// their JSON form with int64 as decimal strings (shared by unit tests, conformance and benches).

import { type ColumnDef, isListType, type Row, type TableSchema } from '../../src/schema/tables.ts';

export function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const LONGS = [
  -(2n ** 63n),
  2n ** 63n - 1n,
  2n ** 53n + 1n,
  -(2n ** 53n) - 1n,
  0n,
  -1n,
  1718000000123456789n,
];
const TIMESTAMPS = [
  0n,
  -1n,
  1718000000123456n,
  1718000000123999n,
  253402300799999999n, // 9999-12-31T23:59:59.999999Z
  -62135596800000000n, // 0001-01-01T00:00:00Z
  -123456789012345n,
];
const INTS = [-(2 ** 31), 2 ** 31 - 1, 0, -7, 42];
const DOUBLES = [0, -0, 1.5, -2.25, 1e308, -1e308, 5e-324, Math.PI];
const SPECIAL_DOUBLES = [Number.NaN, Number.POSITIVE_INFINITY, Number.NEGATIVE_INFINITY];
const STRINGS = [
  '',
  'a',
  'é',
  '😀',
  '𝄞 music',
  '中文字符',
  'z',
  '\uffff',
  '\ue000 private',
  'Ω≈ç√∫',
  'tab\tnew\nline "quoted" \\ back',
  'a long string with more than thirty-two code points 😀😀😀 and then some',
  '😀😀😀😀😀😀😀😀😀😀😀😀😀😀😀😀😀😀😀😀😀😀😀😀😀😀😀😀😀😀😀😀😀😀 beyond',
];

export interface RowOptions {
  /** Allow NaN and infinities in double columns. */
  specialDoubles?: boolean;
  /** Allow timestamps outside years 0001-9999. */
  extremeTimestamps?: boolean;
}

function pick<T>(rand: () => number, xs: readonly T[]): T {
  return xs[Math.floor(rand() * xs.length)]!;
}

function randomLong(rand: () => number): bigint {
  const hi = BigInt(Math.floor(rand() * 2 ** 32)) - 2n ** 31n;
  const lo = BigInt(Math.floor(rand() * 2 ** 32));
  return (hi << 32n) | lo;
}

function value(def: ColumnDef, rand: () => number, opts: RowOptions): unknown {
  if (def.nullable && rand() < 0.15) return null;
  const t = def.type;
  if (isListType(t)) {
    const n = rand() < 0.2 ? 0 : Math.floor(rand() * 5) + 1;
    if (t.list === 'long')
      return Array.from({ length: n }, () => (rand() < 0.3 ? pick(rand, LONGS) : randomLong(rand)));
    return Array.from({ length: n }, () => (rand() < 0.3 ? pick(rand, DOUBLES) : (rand() - 0.5) * 1e6));
  }
  switch (t) {
    case 'string':
      return rand() < 0.6 ? pick(rand, STRINGS) : `s-${Math.floor(rand() * 1e6)}-${pick(rand, STRINGS)}`;
    case 'long':
      return rand() < 0.4 ? pick(rand, LONGS) : randomLong(rand);
    case 'timestamp':
      if (opts.extremeTimestamps && rand() < 0.05) return 2n ** 60n;
      return rand() < 0.4
        ? pick(rand, TIMESTAMPS)
        : 1718000000000000n + BigInt(Math.floor(rand() * 86_400_000_000));
    case 'integer':
      return rand() < 0.4 ? pick(rand, INTS) : Math.floor((rand() - 0.5) * 2 ** 31);
    case 'double':
      if (opts.specialDoubles && rand() < 0.05) return pick(rand, SPECIAL_DOUBLES);
      return rand() < 0.4 ? pick(rand, DOUBLES) : (rand() - 0.5) * 1e9;
    case 'boolean':
      return rand() < 0.5;
  }
}

/** `count` rows; `project_id` is `key-<seq>` (unique, sortable by seq), a key for comparing. */
export function makeRows(
  schema: TableSchema,
  count: number,
  seed: number,
  firstSeq = 0,
  opts: RowOptions = {},
): Row[] {
  const rand = prng(seed);
  const rows: Row[] = [];
  for (let i = 0; i < count; i++) {
    const row: Row = {};
    for (const def of schema.columns) row[def.name] = value(def, rand, opts);
    row['project_id'] = `key-${String(firstSeq + i).padStart(8, '0')}-${pick(rand, STRINGS)}`;
    rows.push(row);
  }
  return rows;
}

/** JSON-safe form: int64 and timestamps as decimal strings, special doubles as strings. */
export function rowToJson(schema: TableSchema, row: Row): Record<string, unknown> {
  const scalar = (v: unknown): unknown => {
    if (v === null || v === undefined) return null;
    if (typeof v === 'bigint') return v.toString();
    if (typeof v === 'number') return Number.isFinite(v) ? (Object.is(v, -0) ? 0 : v) : String(v);
    if (Array.isArray(v)) return v.map(scalar);
    return v;
  };
  const out: Record<string, unknown> = {};
  for (const def of schema.columns) out[def.name] = scalar(row[def.name]);
  return out;
}
