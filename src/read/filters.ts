// The read query model shared by the library, the HTTP /api endpoints and the CLI viewer: its
// parameters, their validation, and the normalized form (plain data) the scan is built from.

import { isValidProjectId, PROJECT_ID_RULE } from '../schema/project.ts';
import { isTableName, SCHEMAS, TABLE_NAMES, type TableName } from '../schema/tables.ts';
import { validateDay } from '../storage/layout.ts';
import { nowUs, parseTimeBound } from './window.ts';

export type Storage = 'auto' | 'local' | 's3';
export const STORAGES: readonly Storage[] = ['auto', 'local', 's3'];

export interface ReadQuery {
  /** First UTC day (YYYY-MM-DD), inclusive; omitted -> the earliest day present. */
  dateFrom?: string;
  /** Last UTC day (YYYY-MM-DD), inclusive; omitted -> the latest day present. */
  dateTo?: string;
  /**
   * Rows with event_ts at or after this instant: an RFC 3339 instant, a UTC day (its midnight), a
   * Date, or a duration back from now (`15m`, `2h`, `1h30m`).
   */
  since?: string | Date;
  /** Rows with event_ts before this instant (same forms as `since`). */
  until?: string | Date;
  projectId?: string;
  serviceName?: string;
  /** logs: minimum severity_number. */
  severityGe?: number;
  /** logs: literal, case-sensitive substring of body. */
  bodyLike?: string;
  /** spans, span_events, span_links, logs: 32 hex characters (any case). */
  traceId?: string;
  /** spans, span_events, span_links, logs: 16 hex characters (any case). */
  spanId?: string;
  /** Span name (spans) or event name (span_events). */
  name?: string;
  /** metrics_points, metrics_hist. */
  metricName?: string;
  metricType?: string;
  /** Columns to return, in this order; default all columns of the table. */
  select?: string[];
  /** Keep only the newest rows by event_ts; default all. */
  maxRows?: number;
  /**
   * Library results collected in memory: refuse (ReadLimitError) a result larger than this many
   * bytes of values; default 256 MiB. Ignored by row streams and lazy frames.
   */
  maxBytes?: number;
  /** Cut string values longer than this many characters to their first this many; default: never. */
  maxFieldChars?: number;
  storage?: Storage;
}

type FilterOp = 'eq' | 'ge' | 'contains';
const OTHER_PARAMS = [
  'dateFrom',
  'dateTo',
  'since',
  'until',
  'select',
  'maxRows',
  'maxBytes',
  'maxFieldChars',
  'storage',
] as const;
type FilterParam = Exclude<keyof ReadQuery, (typeof OTHER_PARAMS)[number]>;

/** Each filter parameter, the column it tests and how. A filter applies to every table that has the column. */
const FILTERS: Readonly<Record<FilterParam, { column: string; op: FilterOp }>> = {
  projectId: { column: 'project_id', op: 'eq' },
  serviceName: { column: 'service_name', op: 'eq' },
  severityGe: { column: 'severity_number', op: 'ge' },
  bodyLike: { column: 'body', op: 'contains' },
  traceId: { column: 'trace_id', op: 'eq' },
  spanId: { column: 'span_id', op: 'eq' },
  name: { column: 'name', op: 'eq' },
  metricName: { column: 'metric_name', op: 'eq' },
  metricType: { column: 'metric_type', op: 'eq' },
};

const ALL_PARAMS: readonly string[] = [...OTHER_PARAMS, ...Object.keys(FILTERS)];

/** The metric types each metrics table holds (the values `metricType` accepts). */
export const METRIC_TYPES: Readonly<Partial<Record<TableName, readonly string[]>>> = {
  metrics_points: ['gauge', 'sum'],
  metrics_hist: ['histogram', 'exponential_histogram', 'summary'],
};

/** Default of `maxBytes`: the largest result a library read collects in memory. */
export const DEFAULT_MAX_BYTES = 256 * 1024 * 1024;

/** One row predicate; values are already of the column's type. */
export interface RowFilter {
  column: string;
  op: FilterOp;
  value: string | number;
}

/** A validated query in plain data: what the scan is built from (also sent to query workers). */
export interface NormalizedQuery {
  table: TableName;
  dateFrom: string | null;
  dateTo: string | null;
  /** Event-time window: event_ts >= sinceUs and < untilUs (microseconds), null = open. */
  sinceUs: bigint | null;
  untilUs: bigint | null;
  filters: RowFilter[];
  /** Output columns in order (never empty). */
  select: string[];
  maxRows: number | null;
  maxBytes: number;
  maxFieldChars: number | null;
  storage: Storage;
}

/** Every parameter of a library read: the query's, and how the rows come back. */
const LIBRARY_ARGS: readonly string[] = [...ALL_PARAMS, 'returnAs', 'signal'];

/**
 * A library read's arguments with the specification's snake_case names (`date_from`, `max_rows`,
 * `return_as`, ...) as their camelCase parameters, as Logger's init takes `instance_dir`. A name
 * given both ways with two values is a TypeError; a name no parameter has is left as written, for
 * normalizeQuery to refuse by that name.
 */
export function camelCaseArgs<T extends object>(args: T): T {
  if (typeof args !== 'object' || args === null || Array.isArray(args)) return args;
  const raw = args as Record<string, unknown>;
  if (!Object.keys(raw).some((k) => k.includes('_'))) return args;
  const out: Record<string, unknown> = {};
  const given: Record<string, string> = {}; // each parameter's name as given
  for (const [key, value] of Object.entries(raw)) {
    const camel = key.replace(/_([a-z])/g, (_, c: string) => c.toUpperCase());
    const name = LIBRARY_ARGS.includes(camel) ? camel : key;
    if (present(out[name]) && present(value) && !sameArg(out[name], value))
      fail(`${given[name]} and ${key} are the same parameter, given two values`);
    if (present(value) || !(name in out)) {
      out[name] = value;
      given[name] = key;
    }
  }
  return out as T;
}

function sameArg(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  return Array.isArray(a) && Array.isArray(b) && a.length === b.length && a.every((v, i) => v === b[i]);
}

/** The filter parameters a table accepts. */
export function filtersOf(table: TableName): FilterParam[] {
  const schema = SCHEMAS[table];
  return (Object.keys(FILTERS) as FilterParam[]).filter((p) => schema.byName.has(FILTERS[p].column));
}

const HEX = /^[0-9a-fA-F]+$/;
const INT32_MAX = 2_147_483_647;

function fail(message: string): never {
  throw new TypeError(message);
}

/** A value for an error message (JSON.stringify throws on bigint and drops undefined). */
function show(v: unknown): string {
  if (typeof v === 'bigint') return `${v}n`;
  if (typeof v === 'number') return String(v);
  try {
    return JSON.stringify(v) ?? String(v);
  } catch {
    return String(v);
  }
}

function present(v: unknown): boolean {
  return v !== undefined && v !== null;
}

function checkString(param: string, v: unknown): string {
  if (typeof v !== 'string') fail(`invalid ${param} ${show(v)}: expected a string`);
  // As over HTTP: an empty bodyLike would match every body, an empty name no row (a missing
  // service name is stored as the default one).
  if (v.length === 0) fail(`invalid ${param} "": expected a non-empty string`);
  return v;
}

function checkHexId(param: string, v: unknown, length: number): string {
  const s = checkString(param, v);
  if (s.length !== length || !HEX.test(s))
    fail(`invalid ${param} ${show(s)}: expected ${length} hexadecimal characters`);
  return s.toLowerCase();
}

/**
 * Validates a query for a table and returns its normalized form. Throws a TypeError whose
 * message names the offending parameter.
 */
export function normalizeQuery(table: TableName, q: ReadQuery = {}, now = nowUs()): NormalizedQuery {
  if (!isTableName(table)) fail(`invalid table ${show(table)}: one of ${TABLE_NAMES.join(', ')}`);
  if (typeof q !== 'object' || q === null || Array.isArray(q)) fail('invalid query: expected an object');
  const schema = SCHEMAS[table];
  const raw = q as Record<string, unknown>;

  for (const key of Object.keys(raw)) {
    if (!ALL_PARAMS.includes(key) && present(raw[key]))
      fail(`unknown query parameter ${JSON.stringify(key)}: one of ${ALL_PARAMS.join(', ')}`);
  }

  const dateFrom = present(q.dateFrom) ? validateDay(q.dateFrom, 'dateFrom') : null;
  const dateTo = present(q.dateTo) ? validateDay(q.dateTo, 'dateTo') : null;
  if (dateFrom && dateTo && dateFrom > dateTo)
    fail(`invalid dateFrom ${dateFrom}: it is after dateTo ${dateTo}`);
  const sinceUs = present(q.since) ? parseTimeBound('since', q.since, now) : null;
  const untilUs = present(q.until) ? parseTimeBound('until', q.until, now) : null;
  if (sinceUs !== null && untilUs !== null && sinceUs >= untilUs)
    fail(`invalid since ${show(q.since)}: it is not before until ${show(q.until)}`);

  const allowed = filtersOf(table);
  const filters: RowFilter[] = [];
  for (const param of Object.keys(FILTERS) as FilterParam[]) {
    const v = raw[param];
    if (!present(v)) continue;
    if (!allowed.includes(param))
      fail(`${param} is not a filter of table ${table}: filters of ${table} are ${allowed.join(', ')}`);
    const { column, op } = FILTERS[param];
    let value: string | number;
    if (param === 'severityGe') {
      // Any int32, as library rows may carry any severity number (HTTP holds it to 0-24 before).
      if (typeof v !== 'number' || !Number.isInteger(v) || v < -INT32_MAX - 1 || v > INT32_MAX)
        fail(`invalid severityGe ${show(v)}: expected an integer severity number (int32)`);
      value = v;
    } else if (param === 'metricType') {
      const types = METRIC_TYPES[table] ?? [];
      if (!types.includes(v as string))
        fail(`invalid metricType ${show(v)}: the metric types of ${table} are ${types.join(', ')}`);
      value = v as string;
    } else if (param === 'traceId') value = checkHexId(param, v, 32);
    else if (param === 'spanId') value = checkHexId(param, v, 16);
    else if (param === 'projectId') {
      // The rule ingest holds project ids to, as over HTTP: another id names no stored row.
      value = checkString(param, v);
      if (!isValidProjectId(value)) fail(`invalid projectId ${show(value)}: use ${PROJECT_ID_RULE}`);
    } else value = checkString(param, v);
    filters.push({ column, op, value });
  }

  let select = schema.columns.map((c) => c.name);
  if (present(q.select)) {
    if (!Array.isArray(q.select) || q.select.length === 0)
      fail(`invalid select ${show(q.select)}: expected a non-empty list of column names`);
    const unknown = q.select.filter((c) => typeof c !== 'string' || !schema.byName.has(c));
    if (unknown.length > 0)
      fail(
        `invalid select: unknown column${unknown.length > 1 ? 's' : ''} ${unknown.map(show).join(', ')} ` +
          `for table ${table}; valid columns: ${select.join(', ')}`,
      );
    select = [...new Set(q.select)];
  }

  const maxRows = present(q.maxRows) ? positiveInt('maxRows', q.maxRows) : null;

  const maxBytes = present(q.maxBytes) ? positiveInt('maxBytes', q.maxBytes) : DEFAULT_MAX_BYTES;
  const maxFieldChars = present(q.maxFieldChars) ? positiveInt('maxFieldChars', q.maxFieldChars) : null;

  let storage: Storage = 'auto';
  if (present(q.storage)) {
    if (!STORAGES.includes(q.storage as Storage))
      fail(`invalid storage ${show(q.storage)}: one of ${STORAGES.join(', ')}`);
    storage = q.storage as Storage;
  }

  return {
    table,
    dateFrom,
    dateTo,
    sinceUs,
    untilUs,
    filters,
    select,
    maxRows,
    maxBytes,
    maxFieldChars,
    storage,
  };
}

function positiveInt(param: string, n: unknown): number {
  if (typeof n !== 'number' || !Number.isSafeInteger(n) || n < 1)
    fail(`invalid ${param} ${show(n)}: expected a positive integer`);
  return n;
}

/** Throws a TypeError naming the parameter when the query is not valid for the table. */
export function validateQuery(table: TableName, q: ReadQuery): void {
  normalizeQuery(table, q);
}
