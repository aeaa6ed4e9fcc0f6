// Row validation and normalization against a table schema: required fields, type checks and
// coercion, defaults and computed columns. It runs once per row, before the queue, for the
// library and the server alike. Every rejection has a stable reason (see REJECT_REASONS).

import type { ProducerConfig } from '../storage/options.ts';
import { type ColumnDef, EVENT_TIME_SOURCE, type Row, type TableSchema } from './tables.ts';

/**
 * Stable rejection reasons, each followed by `:<column>` where it concerns one column:
 * - `not_an_object`: the row is not a plain object
 * - `missing_required:<column>`: a required column is absent, null or an empty string
 * - `invalid_type:<column>`: the value cannot be converted to the column's type
 * - `out_of_range:<column>`: a number outside the column type's range
 * - `unknown_column:<column>`: a key the table has no column for (with `strict_df`)
 */
export const REJECT_REASONS = [
  'not_an_object',
  'missing_required',
  'invalid_type',
  'out_of_range',
  'unknown_column',
] as const;

export type ValidationResult = { ok: true; row: Row } | { ok: false; reason: string };

export interface ValidationSettings {
  validateRequired: boolean;
  validateTypes: boolean;
  normalizeServiceName: boolean;
  defaultServiceName: string;
  /** Reject keys the table has no column for (aggregator_config.strict_df). */
  strictColumns: boolean;
}

export function validationSettings(p: ProducerConfig, strictDf: boolean): ValidationSettings {
  return {
    validateRequired: p.validate_required,
    validateTypes: p.validate_types,
    normalizeServiceName: p.normalize_service_name,
    defaultServiceName: p.default_service_name,
    strictColumns: strictDf,
  };
}

const INT64_MIN = -(2n ** 63n);
const INT64_MAX = 2n ** 63n - 1n;
const DECIMAL = /^\s*-?\d+\s*$/;
const INVALID = Symbol('invalid');
const RANGE = Symbol('range');
type Coerced = unknown | typeof INVALID | typeof RANGE;

function toLong(v: unknown): Coerced {
  let b: bigint;
  if (typeof v === 'bigint') b = v;
  else if (typeof v === 'number') {
    // A double beyond 2^53 is taken as it is: nanosecond times as numbers are already rounded to
    // ~256 ns by the caller's double; bigint or decimal strings keep every digit.
    if (!Number.isInteger(v)) return INVALID;
    b = BigInt(v);
  } else if (typeof v === 'string' && DECIMAL.test(v)) b = BigInt(v.trim());
  else return INVALID;
  return b < INT64_MIN || b > INT64_MAX ? RANGE : b;
}

function toInteger(v: unknown): Coerced {
  let n: number;
  if (typeof v === 'number') n = v;
  else if (typeof v === 'bigint') n = Number(v);
  else if (typeof v === 'string' && DECIMAL.test(v)) n = Number(v);
  else return INVALID;
  if (!Number.isInteger(n)) return INVALID;
  return n < -2147483648 || n > 2147483647 ? RANGE : n;
}

const SPECIAL_DOUBLES: Record<string, number> = {
  NaN: Number.NaN,
  Infinity: Infinity,
  '-Infinity': -Infinity,
};

function toDouble(v: unknown): Coerced {
  if (typeof v === 'number') return v;
  if (typeof v === 'bigint') return Number(v);
  if (typeof v === 'string') {
    if (v in SPECIAL_DOUBLES) return SPECIAL_DOUBLES[v];
    const n = Number(v);
    return v.trim() !== '' && !Number.isNaN(n) ? n : INVALID;
  }
  return INVALID;
}

/** Timestamps are microseconds since the epoch; a Date is accepted too. */
function toTimestamp(v: unknown): Coerced {
  if (v instanceof Date) {
    const ms = v.getTime();
    return Number.isNaN(ms) ? INVALID : BigInt(ms) * 1000n;
  }
  return toLong(v);
}

/** JSON with bigints as numbers when exact in a double, else as decimal strings. */
export function jsonWithBigints(value: unknown): string {
  return JSON.stringify(value, (_k, x) =>
    typeof x === 'bigint' ? (x >= -(2n ** 53n) && x <= 2n ** 53n ? Number(x) : x.toString()) : x,
  );
}

function toStringValue(v: unknown, def: ColumnDef): Coerced {
  if (typeof v === 'string') return v;
  if (typeof v === 'number' || typeof v === 'boolean' || typeof v === 'bigint') return String(v);
  // JSON-holding columns (attributes, exemplars, metadata, body) take objects and serialize them.
  if (typeof v === 'object' && v !== null && JSON_COLUMNS.has(def.name)) return jsonWithBigints(v);
  return INVALID;
}

const JSON_COLUMNS = new Set([
  'attributes',
  'resource_attributes',
  'scope_attributes',
  'exemplars',
  'metric_metadata',
  'body',
]);

function toList(v: unknown, element: 'long' | 'double'): Coerced {
  if (element === 'long' && v instanceof BigInt64Array) return v;
  if (element === 'double' && v instanceof Float64Array) return v;
  if (!Array.isArray(v)) return INVALID;
  const out = new Array(v.length);
  for (let i = 0; i < v.length; i++) {
    const x = element === 'long' ? toLong(v[i]) : toDouble(v[i]);
    if (x === INVALID || x === RANGE) return x;
    out[i] = x;
  }
  return out;
}

function coerce(def: ColumnDef, v: unknown): Coerced {
  const t = def.type;
  if (typeof t === 'object') return toList(v, t.list);
  switch (t) {
    case 'string':
      return toStringValue(v, def);
    case 'long':
      return toLong(v);
    case 'integer':
      return toInteger(v);
    case 'double':
      return toDouble(v);
    case 'boolean':
      return typeof v === 'boolean' ? v : v === 'true' ? true : v === 'false' ? false : INVALID;
    case 'timestamp':
      return toTimestamp(v);
  }
}

function isMissing(v: unknown): boolean {
  return v === undefined || v === null || v === '';
}

/**
 * Validates and normalizes one row into a new object holding exactly the table's columns, each
 * value of its column's JS type (see ColumnDef). The input row is not modified.
 */
export function normalizeRow(schema: TableSchema, input: unknown, s: ValidationSettings): ValidationResult {
  if (typeof input !== 'object' || input === null || Array.isArray(input))
    return { ok: false, reason: 'not_an_object' };
  const src = input as Row;
  if (s.strictColumns) {
    for (const key in src) {
      if (!schema.byName.has(key) && src[key] !== undefined)
        return { ok: false, reason: `unknown_column:${key}` };
    }
  }
  const row: Row = {};
  for (const def of schema.columns) {
    const v = src[def.name];
    if (v === undefined || v === null) {
      row[def.name] = null;
      continue;
    }
    const c = coerce(def, v);
    if (c === INVALID || c === RANGE) {
      // With type validation off, a value that cannot be stored becomes null instead of failing the row.
      if (!s.validateTypes) {
        row[def.name] = null;
        continue;
      }
      return { ok: false, reason: `${c === RANGE ? 'out_of_range' : 'invalid_type'}:${def.name}` };
    }
    row[def.name] = c;
  }

  // service_name: trimmed when normalizing; the default when missing.
  let service = row['service_name'] as string | null;
  if (service !== null && s.normalizeServiceName) service = service.trim();
  row['service_name'] = isMissing(service) ? s.defaultServiceName : service;

  computeDerived(schema, row);

  if (s.validateRequired) {
    // event_ts is computed: name the input column it missed instead (checked first, below).
    for (const def of schema.columns) {
      if (def.required && def.name !== 'event_ts' && isMissing(row[def.name])) {
        return { ok: false, reason: `missing_required:${def.name}` };
      }
    }
  }
  // The tenant key and the ordering time are stored in every row, whatever the settings.
  if (isMissing(row['project_id'])) return { ok: false, reason: 'missing_required:project_id' };
  if (row['event_ts'] === null) return { ok: false, reason: 'missing_required:event_ts' };
  return { ok: true, row };
}

/** event_ts from the table's nanosecond time (logs fall back to the observed time); span duration. */
function computeDerived(schema: TableSchema, row: Row): void {
  if (row['event_ts'] === null) {
    const source = EVENT_TIME_SOURCE[schema.name];
    let nanos = source ? (row[source] as bigint | null) : null;
    if (schema.name === 'logs' && (nanos === null || nanos === 0n)) {
      nanos = (row['observed_time_unix_nano'] as bigint | null) ?? nanos;
    }
    if (nanos !== null) row['event_ts'] = floorDiv(nanos, 1000n);
  }
  if (schema.name === 'spans' && row['duration_ns'] === null) {
    const start = row['start_time_unix_nano'] as bigint | null;
    const end = row['end_time_unix_nano'] as bigint | null;
    if (start !== null && end !== null) row['duration_ns'] = end - start;
  }
}

function floorDiv(a: bigint, b: bigint): bigint {
  const q = a / b;
  return a % b !== 0n && a < 0n ? q - 1n : q;
}
