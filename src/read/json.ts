// JSON-safe form of a read row for the HTTP layer: int64 as decimal strings (exact), event_ts and
// other timestamps as ISO 8601 strings with microseconds, NaN and infinities as strings.

import { type ColumnType, isListType, type Row, SCHEMAS, type TableName } from '../schema/tables.ts';

export type JsonValue = string | number | boolean | null | JsonValue[] | { [key: string]: JsonValue };

/** Largest millisecond value a JS Date holds. */
const DATE_LIMIT_MS = 8_640_000_000_000_000n;

/** `2024-06-10T08:00:00.123456Z` from microseconds since the epoch (UTC); any int64 value. */
export function isoFromMicros(us: bigint): string {
  let ms = us / 1000n;
  let sub = us % 1000n;
  if (sub < 0n) {
    ms -= 1n;
    sub += 1000n;
  }
  if (ms > DATE_LIMIT_MS || ms < -DATE_LIMIT_MS) return us.toString();
  const iso = new Date(Number(ms)).toISOString();
  return `${iso.slice(0, -1)}${sub.toString().padStart(3, '0')}Z`;
}

function jsonNumber(n: number): number | string {
  return Number.isFinite(n) ? n : String(n);
}

/** A value of a row as rowToJson gives it, by its column's type (list items by the list's). */
export function toJsonValue(v: unknown, type: ColumnType | undefined): JsonValue {
  if (v === null || v === undefined) return null;
  if (type === 'timestamp' && typeof v === 'bigint') return isoFromMicros(v);
  if (typeof v === 'bigint') return v.toString();
  if (typeof v === 'number') return jsonNumber(v);
  if (Array.isArray(v) || ArrayBuffer.isView(v)) {
    const items = Array.from(v as ArrayLike<unknown>);
    const inner = type !== undefined && isListType(type) ? type.list : undefined;
    return items.map((x) => toJsonValue(x, inner));
  }
  if (typeof v === 'string' || typeof v === 'boolean') return v;
  return String(v);
}

/** A row as JSON-safe values, keys in the row's order. */
export function rowToJson(row: Row, table: TableName): Record<string, JsonValue> {
  const schema = SCHEMAS[table];
  const out: Record<string, JsonValue> = {};
  for (const [name, value] of Object.entries(row))
    out[name] = toJsonValue(value, schema.byName.get(name)?.type);
  return out;
}
