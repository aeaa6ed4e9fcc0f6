// Row validation and normalization against a table schema: required fields, type checks and
// coercion, defaults and computed columns. It runs once per row, before the queue, for the
// library and the server alike. Every rejection has a stable reason (see REJECT_REASONS).

import type { ProducerConfig } from '../storage/options.ts';
import { isValidProjectId } from './project.ts';
import { type ColumnDef, EVENT_TIME_SOURCE, type Row, type TableSchema } from './tables.ts';
import { nanosToMicros } from './time.ts';

/**
 * Stable rejection reasons, each followed by `:<column>` where it concerns one column:
 * - `not_an_object`: the row is not a plain object
 * - `missing_required:<column>`: a required column is absent, null or an empty string
 * - `invalid_type:<column>`: the value cannot be converted to the column's type
 * - `out_of_range:<column>`: a number outside the column type's range
 * - `unknown_column:<column>`: a key the table has no column for (with `strict_df`)
 * - `invalid_value:project_id`: a row object's project id breaks the project id rule (the OTLP
 *   mappers' rows have theirs checked by the mapper)
 */
export const REJECT_REASONS = [
  'not_an_object',
  'missing_required',
  'invalid_type',
  'out_of_range',
  'unknown_column',
  'invalid_value',
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

/** A normalized row: one value per schema column, in schema order. */
export type RowValues = unknown[];

/**
 * Validates and normalizes rows of one table. Rows come out positional (values in schema
 * order): the queue and the batch builder index columns instead of looking names up per row.
 */
export class RowNormalizer {
  private readonly schema: TableSchema;
  private readonly s: ValidationSettings;
  private readonly names: string[];
  private readonly defs: readonly ColumnDef[];
  private readonly fast: Uint8Array;
  private readonly serviceIdx: number;
  private readonly eventIdx: number;
  private readonly projectIdx: number;
  /** The last project id found valid: a program's rows mostly share one, so the rule runs once. */
  private validProject: unknown = null;
  private readonly sourceIdx: number;
  private readonly observedIdx: number;
  private readonly startIdx: number;
  private readonly endIdx: number;
  private readonly durationIdx: number;
  private readonly requiredIdx: number[];

  private readonly clock: () => number;

  /** `clock` (milliseconds) stamps the observed time of log rows that arrive without one. */
  constructor(schema: TableSchema, settings: ValidationSettings, clock: () => number = Date.now) {
    this.schema = schema;
    this.s = settings;
    this.clock = clock;
    this.defs = schema.columns;
    this.names = schema.columns.map((c) => c.name);
    // The common case per type, checked inline before the general coercion.
    this.fast = Uint8Array.from(
      schema.columns,
      (c) => FAST_KIND[typeof c.type === 'object' ? 'list' : c.type],
    );
    const idx = (name: string | null) => (name === null ? -1 : this.names.indexOf(name));
    this.serviceIdx = idx('service_name');
    this.eventIdx = idx('event_ts');
    this.projectIdx = idx('project_id');
    this.sourceIdx = idx(EVENT_TIME_SOURCE[schema.name]);
    this.observedIdx = schema.name === 'logs' ? idx('observed_time_unix_nano') : -1;
    this.startIdx = schema.name === 'spans' ? idx('start_time_unix_nano') : -1;
    this.endIdx = schema.name === 'spans' ? idx('end_time_unix_nano') : -1;
    this.durationIdx = schema.name === 'spans' ? idx('duration_ns') : -1;
    // event_ts is computed: a missing input time is reported by its own name first.
    this.requiredIdx = schema.columns.flatMap((c, i) => (c.required && c.name !== 'event_ts' ? [i] : []));
  }

  /** The row's values, or the rejection reason. The input is not modified. */
  normalize(input: unknown): RowValues | string {
    if (typeof input !== 'object' || input === null || Array.isArray(input)) return 'not_an_object';
    const src = input as Row;
    const names = this.names;
    const n = names.length;
    const out: RowValues = new Array(n);
    let seen = 0;
    for (let i = 0; i < n; i++) {
      const v = src[names[i]!];
      if (v !== undefined) seen++;
      out[i] = v ?? null;
    }
    const typeError = this.coerceTypes(out, 0);
    if (typeError !== null) return typeError;
    // Keys the table has no column for (counted cheaply: only rows with extra keys are scanned).
    if (this.s.strictColumns) {
      let keys = 0;
      for (const key in src) if (src[key] !== undefined) keys++;
      if (keys !== seen) {
        for (const key in src) {
          if (src[key] !== undefined && !this.schema.byName.has(key)) return `unknown_column:${key}`;
        }
      }
    }
    const reason = this.complete(out, 0);
    if (reason !== null) return reason;
    // One rule for project ids wherever they come from: a row the library is given too.
    const project = out[this.projectIdx];
    if (project !== this.validProject) {
      if (!isValidProjectId(project)) return 'invalid_value:project_id';
      this.validProject = project;
    }
    return out;
  }

  /**
   * Validates and normalizes, in place, a row given as one value per column in schema order from
   * `values[at]`, null where it has none (the OTLP mappers' rows, which have no other keys); the
   * rejection reason, or null.
   */
  normalizeValues(values: RowValues, at = 0): string | null {
    return this.coerceTypes(values, at) ?? this.complete(values, at);
  }

  /** Each value converted to its column's type (nulls stay): the first that cannot be, as a reason. */
  private coerceTypes(out: RowValues, at: number): string | null {
    const n = this.defs.length;
    for (let i = 0; i < n; i++) {
      const v = out[at + i];
      if (v === null) continue;
      const f = this.fast[i];
      if ((f === F_STRING && typeof v === 'string') || (f === F_DOUBLE && typeof v === 'number')) continue;
      if (f === F_LONG && typeof v === 'bigint' && v >= INT64_MIN && v <= INT64_MAX) continue;
      if (f === F_INTEGER && typeof v === 'number' && (v | 0) === v) continue;
      const c = coerce(this.defs[i]!, v);
      if (c === INVALID || c === RANGE) {
        // With type validation off, a value that cannot be stored becomes null instead of failing the row.
        if (!this.s.validateTypes) {
          out[at + i] = null;
          continue;
        }
        return `${c === RANGE ? 'out_of_range' : 'invalid_type'}:${this.names[i]}`;
      }
      out[at + i] = c;
    }
    return null;
  }

  /** The rules after the types: service name, derived columns, required columns; the reason, or null. */
  private complete(out: RowValues, at: number): string | null {
    const s = this.s;
    const names = this.names;
    // service_name: trimmed when normalizing; the default when missing.
    let service = out[at + this.serviceIdx] as string | null;
    if (service !== null && s.normalizeServiceName) service = service.trim();
    out[at + this.serviceIdx] = isMissing(service) ? s.defaultServiceName : service;

    const derivedError = this.computeDerived(out, at);
    if (derivedError !== null) return derivedError;

    if (s.validateRequired) {
      for (const i of this.requiredIdx) if (isMissing(out[at + i])) return `missing_required:${names[i]}`;
    }
    // The tenant key and the ordering time are stored in every row, whatever the settings.
    if (isMissing(out[at + this.projectIdx])) return 'missing_required:project_id';
    if (out[at + this.eventIdx] === null) return 'missing_required:event_ts';
    return null;
  }

  /**
   * A log's observed time defaults to its arrival (OTLP: receivers SHOULD set it when unset);
   * event_ts from the table's nanosecond time (logs fall back to the observed time); span duration.
   * The only place a log's event_ts and a span's duration are derived: the OTLP mapper leaves them null.
   */
  private computeDerived(out: RowValues, at: number): string | null {
    if (this.observedIdx >= 0 && (out[at + this.observedIdx] === null || out[at + this.observedIdx] === 0n)) {
      out[at + this.observedIdx] = BigInt(this.clock()) * 1_000_000n;
    }
    if (out[at + this.eventIdx] === null) {
      let nanos = this.sourceIdx >= 0 ? (out[at + this.sourceIdx] as bigint | null) : null;
      if (this.observedIdx >= 0 && (nanos === null || nanos === 0n)) {
        nanos = (out[at + this.observedIdx] as bigint | null) ?? nanos;
      }
      if (nanos !== null) out[at + this.eventIdx] = nanosToMicros(nanos);
    }
    if (this.durationIdx >= 0 && out[at + this.durationIdx] === null) {
      const start = out[at + this.startIdx] as bigint | null;
      const end = out[at + this.endIdx] as bigint | null;
      // 0 is OTLP's "unset": an unfinished span has no duration.
      if (start !== null && end !== null && start !== 0n && end !== 0n) {
        const duration = end - start;
        // Times near both ends of int64 give a difference beyond it, which the column would wrap.
        if (duration >= INT64_MIN && duration <= INT64_MAX) out[at + this.durationIdx] = duration;
        else if (this.s.validateTypes) return 'out_of_range:duration_ns';
      }
    }
    return null;
  }

  /** Values back to a row object keyed by column name. */
  toRow(values: RowValues): Row {
    const row: Row = {};
    for (let i = 0; i < this.names.length; i++) row[this.names[i]!] = values[i];
    return row;
  }
}

const F_OTHER = 0;
const F_STRING = 1;
const F_LONG = 2;
const F_INTEGER = 3;
const F_DOUBLE = 4;
const FAST_KIND: Record<string, number> = {
  string: F_STRING,
  long: F_LONG,
  timestamp: F_LONG,
  integer: F_INTEGER,
  double: F_DOUBLE,
  boolean: F_OTHER,
  list: F_OTHER,
};

/**
 * Validates and normalizes one row into a new object holding exactly the table's columns, each
 * value of its column's JS type (see ColumnDef). The input row is not modified.
 */
export function normalizeRow(schema: TableSchema, input: unknown, s: ValidationSettings): ValidationResult {
  const n = new RowNormalizer(schema, s);
  const r = n.normalize(input);
  return typeof r === 'string' ? { ok: false, reason: r } : { ok: true, row: n.toRow(r) };
}
