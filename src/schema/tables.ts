// The single source of truth for the six tables: column names, types, nullability and the column
// that orders rows. The Delta schemaString, the Parquet/polars types, validation, default
// projections and read filters are all derived from these definitions.

export const TABLE_NAMES = [
  'spans',
  'span_events',
  'span_links',
  'logs',
  'metrics_points',
  'metrics_hist',
] as const;
export type TableName = (typeof TABLE_NAMES)[number];

/** Scalar column types, named as in the Delta protocol. */
export type ScalarType = 'string' | 'long' | 'integer' | 'double' | 'boolean' | 'timestamp';
/** Lists hold no nulls; the list itself may be null. */
export type ListType = { list: 'long' | 'double' };
export type ColumnType = ScalarType | ListType;

/**
 * JS representation of a value of each type in a row:
 * string -> string, long -> bigint, integer -> number (int32), double -> number,
 * boolean -> boolean, timestamp -> bigint microseconds since the epoch (UTC),
 * list long -> bigint[], list double -> number[]. Any value may be null unless `required`.
 */
export interface ColumnDef {
  readonly name: string;
  readonly type: ColumnType;
  /** Checked by validation (`validate_required`): a row without it is rejected. */
  readonly required: boolean;
  /** The Delta schema's `nullable`. Only the columns every stored row has are `false`. */
  readonly nullable: boolean;
  /**
   * A string taken from an enclosing message (the resource, the scope, the metric, the span of an
   * event or link), so that it repeats down runs of rows: data files store it dictionary-encoded.
   */
  readonly enclosing?: true;
}

export interface TableSchema {
  readonly name: TableName;
  readonly columns: readonly ColumnDef[];
  /** Columns by name, for validation and projection checks. */
  readonly byName: ReadonlyMap<string, ColumnDef>;
}

const col = (name: string, type: ColumnType, required = false): ColumnDef => ({
  name,
  type,
  required,
  nullable: true,
});
/** A string column whose value comes from an enclosing message (ColumnDef.enclosing). */
const enclosing = (name: string): ColumnDef => ({ ...col(name, 'string'), enclosing: true });

// Identity columns every table starts with; every stored row has the first two, whatever the
// validation settings, so they are the only non-nullable columns.
const HEAD: ColumnDef[] = [
  { name: 'project_id', type: 'string', required: true, nullable: false, enclosing: true },
  { name: 'event_ts', type: 'timestamp', required: true, nullable: false },
  enclosing('service_name'),
];

// Resource and instrumentation scope, at the end of every table. Attributes are JSON objects
// serialized as strings (values keep their JSON type; int64 beyond 2^53 as strings; bytes base64).
const TAIL: ColumnDef[] = [
  enclosing('resource_attributes'),
  col('resource_dropped_attributes_count', 'integer'),
  enclosing('resource_schema_url'),
  enclosing('scope_name'),
  enclosing('scope_version'),
  enclosing('scope_attributes'),
  col('scope_dropped_attributes_count', 'integer'),
  enclosing('scope_schema_url'),
];

// Columns shared by the two metric tables.
const METRIC_IDENTITY: ColumnDef[] = [
  enclosing('metric_name'),
  enclosing('description'),
  enclosing('unit'),
  enclosing('metric_type'),
  /** Metric.metadata as a JSON object string. */
  enclosing('metric_metadata'),
  col('aggregation_temporality', 'integer'),
  col('start_time_unix_nano', 'long'),
  col('time_unix_nano', 'long', true),
];

const METRIC_POINT_TAIL: ColumnDef[] = [
  col('attributes', 'string'),
  col('flags', 'long'),
  /** Exemplars as a JSON array string (filtered attributes, time, value, trace and span id). */
  col('exemplars', 'string'),
];

const DEFS: Record<TableName, ColumnDef[]> = {
  spans: [
    ...HEAD,
    col('trace_id', 'string'),
    col('span_id', 'string'),
    col('parent_span_id', 'string'),
    col('trace_state', 'string'),
    col('flags', 'long'),
    col('name', 'string'),
    col('kind', 'integer'),
    col('start_time_unix_nano', 'long', true),
    col('end_time_unix_nano', 'long'),
    col('duration_ns', 'long'),
    col('status_code', 'integer'),
    col('status_message', 'string'),
    col('attributes', 'string'),
    col('dropped_attributes_count', 'integer'),
    col('events_count', 'integer'),
    col('dropped_events_count', 'integer'),
    col('links_count', 'integer'),
    col('dropped_links_count', 'integer'),
    ...TAIL,
  ],
  span_events: [
    ...HEAD,
    col('trace_id', 'string'),
    col('span_id', 'string'),
    enclosing('span_name'),
    col('time_unix_nano', 'long', true),
    col('name', 'string'),
    col('attributes', 'string'),
    col('dropped_attributes_count', 'integer'),
    ...TAIL,
  ],
  span_links: [
    ...HEAD,
    col('trace_id', 'string'),
    col('span_id', 'string'),
    enclosing('span_name'),
    col('linked_trace_id', 'string'),
    col('linked_span_id', 'string'),
    col('trace_state', 'string'),
    col('flags', 'long'),
    col('attributes', 'string'),
    col('dropped_attributes_count', 'integer'),
    ...TAIL,
  ],
  logs: [
    ...HEAD,
    col('time_unix_nano', 'long', true),
    col('observed_time_unix_nano', 'long'),
    col('severity_number', 'integer'),
    col('severity_text', 'string'),
    /** A string body as is; any other AnyValue body as JSON. */
    col('body', 'string'),
    col('attributes', 'string'),
    col('trace_id', 'string'),
    col('span_id', 'string'),
    col('flags', 'long'),
    col('event_name', 'string'),
    col('dropped_attributes_count', 'integer'),
    col('schema_version', 'integer'),
    ...TAIL,
  ],
  metrics_points: [
    ...HEAD,
    ...METRIC_IDENTITY,
    col('is_monotonic', 'boolean'),
    col('value_double', 'double'),
    col('value_int', 'long'),
    ...METRIC_POINT_TAIL,
    ...TAIL,
  ],
  metrics_hist: [
    ...HEAD,
    ...METRIC_IDENTITY,
    col('count', 'long'),
    col('sum', 'double'),
    col('min', 'double'),
    col('max', 'double'),
    col('bucket_counts', { list: 'long' }),
    col('explicit_bounds', { list: 'double' }),
    col('scale', 'integer'),
    col('zero_count', 'long'),
    col('zero_threshold', 'double'),
    col('positive_offset', 'integer'),
    col('positive_bucket_counts', { list: 'long' }),
    col('negative_offset', 'integer'),
    col('negative_bucket_counts', { list: 'long' }),
    col('quantiles', { list: 'double' }),
    col('quantile_values', { list: 'double' }),
    ...METRIC_POINT_TAIL,
    ...TAIL,
  ],
};

function makeSchema(name: TableName): TableSchema {
  const columns = DEFS[name];
  return { name, columns, byName: new Map(columns.map((c) => [c.name, c])) };
}

export const SCHEMAS: Readonly<Record<TableName, TableSchema>> = Object.fromEntries(
  TABLE_NAMES.map((n) => [n, makeSchema(n)]),
) as Record<TableName, TableSchema>;

export function isTableName(value: unknown): value is TableName {
  return typeof value === 'string' && (TABLE_NAMES as readonly string[]).includes(value);
}

export function isListType(type: ColumnType): type is ListType {
  return typeof type === 'object';
}

/** A stored row: column name to value, as documented on ColumnDef. */
export type Row = Record<string, unknown>;

/**
 * The nanosecond column each table's `event_ts` is computed from when a row does not carry it.
 * Links have no time of their own: the mapping sets their `event_ts` to the owning span's start.
 */
export const EVENT_TIME_SOURCE: Readonly<Record<TableName, string | null>> = {
  spans: 'start_time_unix_nano',
  span_events: 'time_unix_nano',
  span_links: null,
  logs: 'time_unix_nano',
  metrics_points: 'time_unix_nano',
  metrics_hist: 'time_unix_nano',
};
