// The tree route: a request parsed into a message tree, then mapped from the tree into table rows
// (src/schema/tables.ts), one object per row, every column in schema order. Bodies take the
// readers' route (map.ts); JSON bodies the JSON reader declines (snake_case keys, odd forms,
// invalid JSON) are parsed with JSON.parse and mapped here, which also words the errors. Trees of
// protobufjs map here too: the tests hold the readers' rows equal to this route's.

import { type RefusedProject, resourceProjectId } from '../schema/project.ts';
import type { Row, TableName } from '../schema/tables.ts';
import { nanosToMicros } from '../schema/time.ts';
import { MAX_HELD_ROWS, rowCap, tooManyRows } from './columns.ts';
import { LossyJsonNumber, OtlpDecodeError, TooManyRowsError } from './errors.ts';
import type { MapContext, Signal } from './request.ts';
import {
  attributesJson,
  bodyText,
  bool,
  double,
  doubleList,
  droppedCount,
  fail,
  flags,
  id,
  int32,
  int64,
  int64List,
  jsonDouble,
  jsonInt,
  keyValuesJs,
  list,
  type MapState,
  type Msg,
  obj,
  optionalDouble,
  SEVERITY_NUMBER,
  SPAN_KIND,
  STATUS_CODE,
  str,
  stringAttribute,
  TEMPORALITY,
} from './values.ts';

export interface Mapped {
  tables: Partial<Record<TableName, Row[]>>;
  /** Spans, log records or metric data points in the request: the rows of the item tables. */
  items: number;
  /** Ids present but invalid (bad length or characters), stored as null; all-zero ids: null, not counted. */
  invalidIds: number;
}

/**
 * Values a body read through JSON.parse may hold per row the request may make: a log record with
 * a few attributes is some 30, an empty one 1.
 */
const TREE_VALUES_PER_ROW = 16;

/**
 * Whether the JSON text holds more than `most` values, counted as the objects, arrays and commas
 * outside strings (a bound from above of the values JSON.parse makes, less one per list). Stops at
 * the first past `most`.
 */
export function jsonValuesOver(body: Uint8Array, most: number): boolean {
  let n = 0;
  let inString = false;
  for (let i = 0; i < body.length; i++) {
    const b = body[i]!;
    if (inString) {
      if (b === 0x5c)
        i++; // a backslash: the next byte is escaped
      else if (b === 0x22) inString = false;
    } else if (b === 0x22) inString = true;
    else if ((b === 0x7b || b === 0x5b || b === 0x2c) && ++n > most) return true;
  }
  return false;
}

/** The top-level repeated field of each request, in both spellings. */
const RESOURCE_FIELD: Readonly<Record<Signal, readonly [string, string]>> = {
  traces: ['resourceSpans', 'resource_spans'],
  logs: ['resourceLogs', 'resource_logs'],
  metrics: ['resourceMetrics', 'resource_metrics'],
};

/**
 * Parses a JSON request body and maps its tree. Throws OtlpDecodeError for a body that is not an
 * OTLP request (invalid JSON, a top level that is not an object, a field of the wrong type).
 */
export function mapJsonTree(signal: Signal, body: Uint8Array, ctx: MapContext): Mapped {
  // JSON.parse holds every value of the body at once: `[{},{},...]` is one object per 3 bytes, and
  // a few KB of gzip inflate to millions. Counted first, against the request's cap on rows.
  const most = rowCap(ctx.maxRows) * TREE_VALUES_PER_ROW;
  if (jsonValuesOver(body, most)) {
    throw new TooManyRowsError(
      `a JSON body of more than ${most} values in a form read through JSON.parse (one the reader ` +
        'declines, e.g. snake_case keys): send smaller batches, or OTLP/JSON as the SDKs write it',
    );
  }
  const text = utf8(body);
  let root: unknown;
  try {
    root = text.length === 0 ? {} : JSON.parse(text);
  } catch (err) {
    throw new OtlpDecodeError(`invalid JSON body: ${(err as Error).message}`);
  }
  checkShape(signal, root);
  try {
    return mapTree(signal, root, ctx);
  } catch (err) {
    if (!(err instanceof LossyJsonNumber)) throw err;
  }
  // A JSON number beyond 2^53 in an int64 field: parse the body again, exactly, and map again.
  try {
    return mapTree(signal, JSON.parse(quoteBigIntegers(text)), ctx);
  } catch (err) {
    if (!(err instanceof LossyJsonNumber)) throw err;
    throw new OtlpDecodeError(
      `${err.message}: an integer beyond 2^53 written with a fraction or exponent cannot be read exactly; ` +
        'send int64 values as decimal strings',
    );
  }
}

function utf8(body: Uint8Array): string {
  const text = Buffer.from(body.buffer, body.byteOffset, body.byteLength).toString('utf8');
  return text.charCodeAt(0) === 0xfeff ? text.slice(1) : text;
}

function checkShape(signal: Signal, root: unknown): asserts root is Msg {
  if (typeof root !== 'object' || root === null || Array.isArray(root)) {
    throw new OtlpDecodeError(
      `the JSON body must be an object, got ${Array.isArray(root) ? 'array' : typeof root}`,
    );
  }
  const [camel, snake] = RESOURCE_FIELD[signal];
  const r = root as Record<string, unknown>;
  const list = r[camel] ?? r[snake];
  if (list !== undefined && list !== null && !Array.isArray(list)) {
    throw new OtlpDecodeError(`${camel}: expected an array, got ${typeof list}`);
  }
}

/**
 * The JSON text with every integer literal of 16 digits or more (possibly beyond 2^53) turned into
 * a string, which the int64 readers take exactly. Strings are skipped, so their content is never
 * touched. Linear, and only used for the rare body that writes big int64 values as numbers.
 */
export function quoteBigIntegers(text: string): string {
  const n = text.length;
  let out = '';
  let copied = 0;
  let i = 0;
  while (i < n) {
    const c = text.charCodeAt(i);
    if (c === 0x22) {
      i = skipString(text, i + 1);
    } else if (c === 0x2d || (c >= 0x30 && c <= 0x39)) {
      const start = i;
      if (c === 0x2d) i++;
      const digitsFrom = i;
      while (i < n && isDigit(text.charCodeAt(i))) i++;
      const next = i < n ? text.charCodeAt(i) : 0;
      if (next === 0x2e || next === 0x65 || next === 0x45) {
        // A fraction or exponent: a double, left as it is.
        while (i < n && isNumberChar(text.charCodeAt(i))) i++;
      } else if (i - digitsFrom >= 16) {
        out += `${text.slice(copied, start)}"${text.slice(start, i)}"`;
        copied = i;
      }
    } else i++;
  }
  return copied === 0 ? text : out + text.slice(copied);
}

// Index after the closing quote of a string whose content starts at `i`.
function skipString(text: string, i: number): number {
  for (;;) {
    const quote = text.indexOf('"', i);
    if (quote === -1) return text.length; // unterminated: JSON.parse reports it
    let backslashes = 0;
    for (let k = quote - 1; k >= i && text.charCodeAt(k) === 0x5c; k--) backslashes++;
    i = quote + 1;
    if (backslashes % 2 === 0) return i;
  }
}

function isDigit(c: number): boolean {
  return c >= 0x30 && c <= 0x39;
}

function isNumberChar(c: number): boolean {
  return isDigit(c) || c === 0x2e || c === 0x65 || c === 0x45 || c === 0x2b || c === 0x2d;
}

/**
 * Maps a decoded request tree (JSON.parse's or protobufjs') to rows. Throws OtlpDecodeError when a
 * field has the wrong type. Tables without rows are left out of `tables`.
 */
export function mapTree(signal: Signal, root: Msg, ctx: MapContext): Mapped {
  const st: TreeState = { invalidIds: 0, maxRows: rowCap(ctx.maxRows) };
  const tables: Partial<Record<TableName, Row[]>> = {};
  let items: number;
  if (signal === 'traces') {
    const spans: Row[] = [];
    const events: Row[] = [];
    const links: Row[] = [];
    mapTraces(root, ctx, st, spans, events, links);
    if (spans.length > 0) tables.spans = spans;
    if (events.length > 0) tables.span_events = events;
    if (links.length > 0) tables.span_links = links;
    items = spans.length;
  } else if (signal === 'logs') {
    const logs: Row[] = [];
    mapLogs(root, ctx, st, logs);
    if (logs.length > 0) tables.logs = logs;
    items = logs.length;
  } else {
    const points: Row[] = [];
    const hist: Row[] = [];
    mapMetrics(root, ctx, st, points, hist);
    if (points.length > 0) tables.metrics_points = points;
    if (hist.length > 0) tables.metrics_hist = hist;
    items = points.length + hist.length;
  }
  return { tables, items, invalidIds: st.invalidIds };
}

// --- resource and scope ----------------------------------------------------------------------

interface ResourceCols {
  project_id: string | RefusedProject;
  service_name: string | null;
  resource_attributes: string;
  resource_dropped_attributes_count: number;
  resource_schema_url: string | null;
}

interface ScopeCols {
  scope_name: string | null;
  scope_version: string | null;
  scope_attributes: string;
  scope_dropped_attributes_count: number;
  scope_schema_url: string | null;
}

function resourceCols(rx: Msg, ctx: MapContext): ResourceCols {
  const resource = obj(rx.resource, 'resource');
  const attrs = resource?.attributes;
  return {
    project_id: resourceProjectId(ctx, stringAttribute(attrs, 'project.id')),
    service_name: stringAttribute(attrs, 'service.name') || null,
    resource_attributes: attributesJson(attrs),
    resource_dropped_attributes_count: droppedCount(
      resource?.droppedAttributesCount ?? resource?.dropped_attributes_count,
      'resource.droppedAttributesCount',
    ),
    resource_schema_url: str(rx.schemaUrl ?? rx.schema_url, 'schemaUrl'),
  };
}

function scopeCols(sx: Msg): ScopeCols {
  const scope = obj(sx.scope, 'scope');
  if (scope === null) {
    return {
      scope_name: null,
      scope_version: null,
      scope_attributes: '{}',
      scope_dropped_attributes_count: 0,
      scope_schema_url: str(sx.schemaUrl ?? sx.schema_url, 'schemaUrl'),
    };
  }
  return {
    scope_name: str(scope.name, 'scope.name'),
    scope_version: str(scope.version, 'scope.version'),
    scope_attributes: attributesJson(scope.attributes),
    scope_dropped_attributes_count: droppedCount(
      scope.droppedAttributesCount ?? scope.dropped_attributes_count,
      'scope.droppedAttributesCount',
    ),
    scope_schema_url: str(sx.schemaUrl ?? sx.schema_url, 'schemaUrl'),
  };
}

/** What mapping a tree keeps: the ids found invalid, and the request's cap on rows per list. */
interface TreeState extends MapState {
  maxRows: number;
}

/** A repeated message field: every element must be an object; at most `max` of them. */
function items(v: unknown, field: string, max = MAX_HELD_ROWS): readonly Msg[] {
  const arr = list(v, field);
  if (arr.length > max) throw tooManyRows(max, field);
  for (let i = 0; i < arr.length; i++) {
    const x = arr[i];
    if (typeof x !== 'object' || x === null || Array.isArray(x)) fail(`${field}[${i}]`, 'an object', x);
  }
  return arr;
}

// --- traces ----------------------------------------------------------------------------------

function mapTraces(root: Msg, ctx: MapContext, st: TreeState, out: Row[], outEvents: Row[], outLinks: Row[]) {
  for (const rs of items(root.resourceSpans ?? root.resource_spans, 'resourceSpans')) {
    const r = resourceCols(rs, ctx);
    for (const ss of items(rs.scopeSpans ?? rs.scope_spans, 'scopeSpans')) {
      const s = scopeCols(ss);
      for (const sp of items(ss.spans, 'spans', st.maxRows)) {
        const traceId = id(sp.traceId ?? sp.trace_id, 16, 'span.traceId', st);
        const spanId = id(sp.spanId ?? sp.span_id, 8, 'span.spanId', st);
        const name = str(sp.name, 'span.name');
        const start = int64(sp.startTimeUnixNano ?? sp.start_time_unix_nano, 'span.startTimeUnixNano');
        const end = int64(sp.endTimeUnixNano ?? sp.end_time_unix_nano, 'span.endTimeUnixNano');
        const eventTs = nanosToMicros(start);
        const status = obj(sp.status, 'span.status');
        const events = items(sp.events, 'span.events', st.maxRows);
        const links = items(sp.links, 'span.links', st.maxRows);
        out.push({
          event_ts: eventTs,
          trace_id: traceId,
          span_id: spanId,
          parent_span_id: id(sp.parentSpanId ?? sp.parent_span_id, 8, 'span.parentSpanId', st),
          trace_state: str(sp.traceState ?? sp.trace_state, 'span.traceState'),
          flags: flags(sp.flags, 'span.flags'),
          name,
          kind: int32(sp.kind, 'span.kind', SPAN_KIND),
          start_time_unix_nano: start,
          end_time_unix_nano: end,
          duration_ns: null, // derived by RowNormalizer, as for rows given to the library
          status_code: status === null ? 0 : int32(status.code, 'span.status.code', STATUS_CODE),
          status_message: status === null ? null : str(status.message, 'span.status.message'),
          attributes: attributesJson(sp.attributes),
          dropped_attributes_count: droppedCount(
            sp.droppedAttributesCount ?? sp.dropped_attributes_count,
            'span.droppedAttributesCount',
          ),
          events_count: events.length,
          dropped_events_count: droppedCount(
            sp.droppedEventsCount ?? sp.dropped_events_count,
            'span.droppedEventsCount',
          ),
          links_count: links.length,
          dropped_links_count: droppedCount(
            sp.droppedLinksCount ?? sp.dropped_links_count,
            'span.droppedLinksCount',
          ),
          // The resource's and scope's columns, project_id and service_name among them.
          ...r,
          ...s,
        });
        for (const ev of events) {
          const time = int64(ev.timeUnixNano ?? ev.time_unix_nano, 'event.timeUnixNano');
          outEvents.push({
            event_ts: nanosToMicros(time),
            trace_id: traceId,
            span_id: spanId,
            span_name: name,
            time_unix_nano: time,
            name: str(ev.name, 'event.name'),
            attributes: attributesJson(ev.attributes),
            dropped_attributes_count: droppedCount(
              ev.droppedAttributesCount ?? ev.dropped_attributes_count,
              'event.droppedAttributesCount',
            ),
            // The resource's and scope's columns, project_id and service_name among them.
            ...r,
            ...s,
          });
        }
        for (const ln of links) {
          outLinks.push({
            event_ts: eventTs,
            trace_id: traceId,
            span_id: spanId,
            span_name: name,
            linked_trace_id: id(ln.traceId ?? ln.trace_id, 16, 'link.traceId', st),
            linked_span_id: id(ln.spanId ?? ln.span_id, 8, 'link.spanId', st),
            trace_state: str(ln.traceState ?? ln.trace_state, 'link.traceState'),
            flags: flags(ln.flags, 'link.flags'),
            attributes: attributesJson(ln.attributes),
            dropped_attributes_count: droppedCount(
              ln.droppedAttributesCount ?? ln.dropped_attributes_count,
              'link.droppedAttributesCount',
            ),
            // The resource's and scope's columns, project_id and service_name among them.
            ...r,
            ...s,
          });
        }
      }
    }
  }
}

// --- logs ------------------------------------------------------------------------------------

function mapLogs(root: Msg, ctx: MapContext, st: TreeState, out: Row[]) {
  for (const rl of items(root.resourceLogs ?? root.resource_logs, 'resourceLogs')) {
    const r = resourceCols(rl, ctx);
    for (const sl of items(rl.scopeLogs ?? rl.scope_logs, 'scopeLogs')) {
      const s = scopeCols(sl);
      for (const lr of items(sl.logRecords ?? sl.log_records, 'logRecords', st.maxRows)) {
        const time = int64(lr.timeUnixNano ?? lr.time_unix_nano, 'logRecord.timeUnixNano');
        const observed = int64(
          lr.observedTimeUnixNano ?? lr.observed_time_unix_nano,
          'logRecord.observedTimeUnixNano',
        );
        out.push({
          // Derived by RowNormalizer (time, else observed, else arrival), as for library rows.
          event_ts: null,
          time_unix_nano: time,
          observed_time_unix_nano: observed,
          severity_number: int32(
            lr.severityNumber ?? lr.severity_number,
            'logRecord.severityNumber',
            SEVERITY_NUMBER,
          ),
          severity_text: str(lr.severityText ?? lr.severity_text, 'logRecord.severityText'),
          body: bodyText(lr.body),
          attributes: attributesJson(lr.attributes),
          trace_id: id(lr.traceId ?? lr.trace_id, 16, 'logRecord.traceId', st),
          span_id: id(lr.spanId ?? lr.span_id, 8, 'logRecord.spanId', st),
          flags: flags(lr.flags, 'logRecord.flags'),
          event_name: str(lr.eventName ?? lr.event_name, 'logRecord.eventName'),
          dropped_attributes_count: droppedCount(
            lr.droppedAttributesCount ?? lr.dropped_attributes_count,
            'logRecord.droppedAttributesCount',
          ),
          schema_version: null,
          // The resource's and scope's columns, project_id and service_name among them.
          ...r,
          ...s,
        });
      }
    }
  }
}

// --- metrics ---------------------------------------------------------------------------------

/** The columns every point of one metric shares. */
interface MetricCols {
  r: ResourceCols;
  s: ScopeCols;
  metric_name: string | null;
  description: string | null;
  unit: string | null;
  metric_metadata: string;
}

function mapMetrics(root: Msg, ctx: MapContext, st: TreeState, points: Row[], hist: Row[]) {
  for (const rm of items(root.resourceMetrics ?? root.resource_metrics, 'resourceMetrics')) {
    const r = resourceCols(rm, ctx);
    for (const sm of items(rm.scopeMetrics ?? rm.scope_metrics, 'scopeMetrics')) {
      const s = scopeCols(sm);
      for (const metric of items(sm.metrics, 'metrics')) {
        const m: MetricCols = {
          r,
          s,
          metric_name: str(metric.name, 'metric.name'),
          description: str(metric.description, 'metric.description'),
          unit: str(metric.unit, 'metric.unit'),
          metric_metadata: attributesJson(metric.metadata),
        };
        mapMetricData(metric, m, st, points, hist);
      }
    }
  }
}

function mapMetricData(metric: Msg, m: MetricCols, st: TreeState, points: Row[], hist: Row[]) {
  const gauge = obj(metric.gauge, 'metric.gauge');
  if (gauge !== null) {
    for (const p of items(gauge.dataPoints ?? gauge.data_points, 'gauge.dataPoints', st.maxRows)) {
      points.push(numberRow(m, 'gauge', null, null, p, st));
    }
    return;
  }
  const sum = obj(metric.sum, 'metric.sum');
  if (sum !== null) {
    const temporality = temporalityOf(sum, 'sum');
    const monotonic = bool(sum.isMonotonic ?? sum.is_monotonic, 'sum.isMonotonic');
    for (const p of items(sum.dataPoints ?? sum.data_points, 'sum.dataPoints', st.maxRows)) {
      points.push(numberRow(m, 'sum', temporality, monotonic, p, st));
    }
    return;
  }
  const histogram = obj(metric.histogram, 'metric.histogram');
  if (histogram !== null) {
    const temporality = temporalityOf(histogram, 'histogram');
    for (const p of items(
      histogram.dataPoints ?? histogram.data_points,
      'histogram.dataPoints',
      st.maxRows,
    )) {
      hist.push(histogramRow(m, temporality, p, st));
    }
    return;
  }
  const exponential = obj(
    metric.exponentialHistogram ?? metric.exponential_histogram,
    'metric.exponentialHistogram',
  );
  if (exponential !== null) {
    const temporality = temporalityOf(exponential, 'exponentialHistogram');
    for (const p of items(
      exponential.dataPoints ?? exponential.data_points,
      'exponentialHistogram.dataPoints',
      st.maxRows,
    )) {
      hist.push(exponentialRow(m, temporality, p, st));
    }
    return;
  }
  const summary = obj(metric.summary, 'metric.summary');
  if (summary !== null) {
    for (const p of items(summary.dataPoints ?? summary.data_points, 'summary.dataPoints', st.maxRows)) {
      hist.push(summaryRow(m, p, st));
    }
  }
}

function temporalityOf(data: Msg, kind: string): number {
  return int32(
    data.aggregationTemporality ?? data.aggregation_temporality,
    `${kind}.aggregationTemporality`,
    TEMPORALITY,
  );
}

/** The columns every point row has: its metric's, its times, its resource's and scope's. */
function pointCols(m: MetricCols, type: string, temporality: number | null, p: Msg): Row {
  const start = int64(p.startTimeUnixNano ?? p.start_time_unix_nano, 'dataPoint.startTimeUnixNano');
  const time = int64(p.timeUnixNano ?? p.time_unix_nano, 'dataPoint.timeUnixNano');
  return {
    event_ts: nanosToMicros(time),
    metric_name: m.metric_name,
    description: m.description,
    unit: m.unit,
    metric_type: type,
    metric_metadata: m.metric_metadata,
    aggregation_temporality: temporality,
    start_time_unix_nano: start,
    time_unix_nano: time,
    // project_id and service_name among them
    ...m.r,
    ...m.s,
  };
}

function numberRow(
  m: MetricCols,
  type: 'gauge' | 'sum',
  temporality: number | null,
  monotonic: boolean | null,
  p: Msg,
  st: MapState,
): Row {
  const asDouble = p.asDouble ?? p.as_double;
  const asInt = asDouble == null ? (p.asInt ?? p.as_int) : null;
  return {
    ...pointCols(m, type, temporality, p),
    is_monotonic: monotonic,
    value_double: asDouble == null ? null : double(asDouble, 'dataPoint.asDouble'),
    value_int: asInt == null ? null : int64(asInt, 'dataPoint.asInt', true),
    attributes: attributesJson(p.attributes),
    flags: flags(p.flags, 'dataPoint.flags'),
    exemplars: exemplarsJson(p.exemplars, st),
  };
}

/** The columns of a metrics_hist row that are not shared by all three point types. */
interface HistValues {
  count: bigint;
  sum: number | null;
  min: number | null;
  max: number | null;
  bucket_counts: bigint[] | null;
  explicit_bounds: number[] | null;
  scale: number | null;
  zero_count: bigint | null;
  zero_threshold: number | null;
  positive_offset: number | null;
  positive_bucket_counts: bigint[] | null;
  negative_offset: number | null;
  negative_bucket_counts: bigint[] | null;
  quantiles: number[] | null;
  quantile_values: number[] | null;
}

function histRow(
  m: MetricCols,
  type: 'histogram' | 'exponential_histogram' | 'summary',
  temporality: number | null,
  p: Msg,
  v: HistValues,
  st: MapState,
): Row {
  return {
    ...pointCols(m, type, temporality, p),
    ...v,
    attributes: attributesJson(p.attributes),
    flags: flags(p.flags, 'dataPoint.flags'),
    exemplars: exemplarsJson(p.exemplars, st),
  };
}

function histogramRow(m: MetricCols, temporality: number, p: Msg, st: MapState): Row {
  return histRow(
    m,
    'histogram',
    temporality,
    p,
    {
      count: int64(p.count, 'histogram.count'),
      sum: optionalDouble(p.sum, 'histogram.sum'),
      min: optionalDouble(p.min, 'histogram.min'),
      max: optionalDouble(p.max, 'histogram.max'),
      bucket_counts: int64List(p.bucketCounts ?? p.bucket_counts, 'histogram.bucketCounts'),
      explicit_bounds: doubleList(p.explicitBounds ?? p.explicit_bounds, 'histogram.explicitBounds'),
      scale: null,
      zero_count: null,
      zero_threshold: null,
      positive_offset: null,
      positive_bucket_counts: null,
      negative_offset: null,
      negative_bucket_counts: null,
      quantiles: null,
      quantile_values: null,
    },
    st,
  );
}

function exponentialRow(m: MetricCols, temporality: number, p: Msg, st: MapState): Row {
  const positive = obj(p.positive, 'exponentialHistogram.positive');
  const negative = obj(p.negative, 'exponentialHistogram.negative');
  return histRow(
    m,
    'exponential_histogram',
    temporality,
    p,
    {
      count: int64(p.count, 'exponentialHistogram.count'),
      sum: optionalDouble(p.sum, 'exponentialHistogram.sum'),
      min: optionalDouble(p.min, 'exponentialHistogram.min'),
      max: optionalDouble(p.max, 'exponentialHistogram.max'),
      bucket_counts: null,
      explicit_bounds: null,
      scale: int32(p.scale, 'exponentialHistogram.scale'),
      zero_count: int64(p.zeroCount ?? p.zero_count, 'exponentialHistogram.zeroCount'),
      zero_threshold: double(p.zeroThreshold ?? p.zero_threshold, 'exponentialHistogram.zeroThreshold'),
      positive_offset: positive === null ? null : int32(positive.offset, 'positive.offset'),
      positive_bucket_counts:
        positive === null
          ? null
          : int64List(positive.bucketCounts ?? positive.bucket_counts, 'positive.bucketCounts'),
      negative_offset: negative === null ? null : int32(negative.offset, 'negative.offset'),
      negative_bucket_counts:
        negative === null
          ? null
          : int64List(negative.bucketCounts ?? negative.bucket_counts, 'negative.bucketCounts'),
      quantiles: null,
      quantile_values: null,
    },
    st,
  );
}

function summaryRow(m: MetricCols, p: Msg, st: MapState): Row {
  const qs = items(p.quantileValues ?? p.quantile_values, 'summary.quantileValues');
  const quantiles = new Array<number>(qs.length);
  const values = new Array<number>(qs.length);
  for (let i = 0; i < qs.length; i++) {
    quantiles[i] = double(qs[i].quantile, 'quantileValues.quantile');
    values[i] = double(qs[i].value, 'quantileValues.value');
  }
  return histRow(
    m,
    'summary',
    null,
    p,
    {
      count: int64(p.count, 'summary.count'),
      sum: double(p.sum, 'summary.sum'),
      min: null,
      max: null,
      bucket_counts: null,
      explicit_bounds: null,
      scale: null,
      zero_count: null,
      zero_threshold: null,
      positive_offset: null,
      positive_bucket_counts: null,
      negative_offset: null,
      negative_bucket_counts: null,
      quantiles,
      quantile_values: values,
    },
    st,
  );
}

/** Exemplars as a JSON array text, null when there are none. */
function exemplarsJson(v: unknown, st: MapState): string | null {
  const exemplars = items(v, 'exemplars');
  if (exemplars.length === 0) return null;
  const out = new Array<Record<string, unknown>>(exemplars.length);
  for (let i = 0; i < exemplars.length; i++) {
    const e = exemplars[i];
    const asDouble = e.asDouble ?? e.as_double;
    const asInt = asDouble == null ? (e.asInt ?? e.as_int) : null;
    const x: Record<string, unknown> = {
      filtered_attributes: keyValuesJs(
        list(e.filteredAttributes ?? e.filtered_attributes, 'filteredAttributes'),
      ),
      time_unix_nano: String(int64(e.timeUnixNano ?? e.time_unix_nano, 'exemplar.timeUnixNano')),
    };
    if (asDouble != null) x.as_double = jsonDouble(double(asDouble, 'exemplar.asDouble'));
    else if (asInt != null) x.as_int = jsonInt(asInt, 'exemplar.asInt');
    x.trace_id = id(e.traceId ?? e.trace_id, 16, 'exemplar.traceId', st);
    x.span_id = id(e.spanId ?? e.span_id, 8, 'exemplar.spanId', st);
    out[i] = x;
  }
  return JSON.stringify(out);
}
