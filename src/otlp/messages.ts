// The OTLP messages the mappers read, field by field: each field by the name OTLP/JSON gives it
// (lowerCamelCase), and by its number and type on the protobuf wire, as in the .proto files under
// proto/opentelemetry/proto/. A reader (reader.ts) hands a mapper the fields of a message by name,
// whatever the encoding; fields not listed here are unknown to both readers, and skipped.

import { I32, I64, LEN, VARINT } from './wire.ts';

/** Every field name a mapper reads, in any message. A name's index is its field id. */
const NAMES = [
  // envelopes
  'resourceSpans',
  'resourceLogs',
  'resourceMetrics',
  'resource',
  'scopeSpans',
  'scopeLogs',
  'scopeMetrics',
  'scope',
  'spans',
  'logRecords',
  'metrics',
  'schemaUrl',
  // resource and scope
  'attributes',
  'droppedAttributesCount',
  'name',
  'version',
  // spans, events, links, status
  'traceId',
  'spanId',
  'traceState',
  'parentSpanId',
  'flags',
  'kind',
  'startTimeUnixNano',
  'endTimeUnixNano',
  'events',
  'droppedEventsCount',
  'links',
  'droppedLinksCount',
  'status',
  'timeUnixNano',
  'message',
  'code',
  // log records
  'severityNumber',
  'severityText',
  'body',
  'observedTimeUnixNano',
  'eventName',
  // metrics
  'description',
  'unit',
  'metadata',
  'gauge',
  'sum',
  'histogram',
  'exponentialHistogram',
  'summary',
  'dataPoints',
  'aggregationTemporality',
  'isMonotonic',
  'asDouble',
  'asInt',
  'exemplars',
  'count',
  'bucketCounts',
  'explicitBounds',
  'min',
  'max',
  'scale',
  'zeroCount',
  'positive',
  'negative',
  'zeroThreshold',
  'offset',
  'quantileValues',
  'quantile',
  'value',
  'filteredAttributes',
] as const;

export type FieldName = (typeof NAMES)[number];

/** Field ids by name, for mappers: `case F.traceId:`. */
export const F = Object.fromEntries(NAMES.map((name, id) => [name, id])) as {
  readonly [K in FieldName]: number;
};

export const FIELD_NAMES: readonly FieldName[] = NAMES;

/**
 * Field types, by what a mapper reads from them. Each has one protobuf wire type; the repeated
 * numeric ones also come packed (one length-delimited run).
 */
export const STRING = 1;
/** A trace or span id: bytes on the wire, hex (or base64) in JSON. */
export const ID = 2;
export const FIXED64 = 3;
export const SFIXED64 = 4;
export const UINT64 = 5;
export const UINT32 = 6;
/** int32 and enums (JSON may name an enum value). */
export const INT32 = 7;
export const SINT32 = 8;
export const FIXED32 = 9;
export const DOUBLE = 10;
export const BOOL = 11;
/** A nested message. */
export const MESSAGE = 12;
/** A repeated nested message: the reader hands each element over as one field. */
export const MESSAGES = 13;
/** repeated KeyValue: read whole by the reader's attribute writer. */
export const ATTRIBUTES = 14;
/** An AnyValue (a log body). */
export const ANY_VALUE = 15;
export const FIXED64S = 16;
export const UINT64S = 17;
export const DOUBLES = 18;

/** The protobuf wire types a field of each type may come as. */
const WIRE_TYPES: Readonly<Record<number, readonly number[]>> = {
  [STRING]: [LEN],
  [ID]: [LEN],
  [FIXED64]: [I64],
  [SFIXED64]: [I64],
  [UINT64]: [VARINT],
  [UINT32]: [VARINT],
  [INT32]: [VARINT],
  [SINT32]: [VARINT],
  [FIXED32]: [I32],
  [DOUBLE]: [I64],
  [BOOL]: [VARINT],
  [MESSAGE]: [LEN],
  [MESSAGES]: [LEN],
  [ATTRIBUTES]: [LEN],
  [ANY_VALUE]: [LEN],
  [FIXED64S]: [LEN, I64],
  [UINT64S]: [LEN, VARINT],
  [DOUBLES]: [LEN, I64],
};

export interface MessageType {
  /** The .proto name, for error messages. */
  readonly name: string;
  /** The type of each field id in this message; 0 for names the message does not have. */
  readonly types: Uint8Array;
  /** Protobuf: the field id of each tag (field number << 3 | wire type); -1 for an unknown tag. */
  readonly tags: Int16Array;
  /** Whether the reader notes the service.name and project.id attributes (a Resource). */
  readonly names: boolean;
}

function message(
  name: string,
  fields: Partial<Record<FieldName, readonly [number: number, type: number]>>,
  names = false,
): MessageType {
  const types = new Uint8Array(NAMES.length);
  // Every OTLP field number is below 32: tags fit in a byte.
  const tags = new Int16Array(256).fill(-1);
  for (const [field, [number, type]] of Object.entries(fields) as [FieldName, [number, number]][]) {
    const id = F[field];
    types[id] = type;
    for (const wireType of WIRE_TYPES[type]!) tags[(number << 3) | wireType] = id;
  }
  return { name, types, tags, names };
}

// --- common and resource -----------------------------------------------------------------------

export const RESOURCE = message(
  'Resource',
  { attributes: [1, ATTRIBUTES], droppedAttributesCount: [2, UINT32] },
  true,
);

export const SCOPE = message('InstrumentationScope', {
  name: [1, STRING],
  version: [2, STRING],
  attributes: [3, ATTRIBUTES],
  droppedAttributesCount: [4, UINT32],
});

// --- traces --------------------------------------------------------------------------------------

export const TRACES_REQUEST = message('ExportTraceServiceRequest', { resourceSpans: [1, MESSAGES] });

export const RESOURCE_SPANS = message('ResourceSpans', {
  resource: [1, MESSAGE],
  scopeSpans: [2, MESSAGES],
  schemaUrl: [3, STRING],
});

export const SCOPE_SPANS = message('ScopeSpans', {
  scope: [1, MESSAGE],
  spans: [2, MESSAGES],
  schemaUrl: [3, STRING],
});

export const SPAN = message('Span', {
  traceId: [1, ID],
  spanId: [2, ID],
  traceState: [3, STRING],
  parentSpanId: [4, ID],
  name: [5, STRING],
  kind: [6, INT32],
  startTimeUnixNano: [7, FIXED64],
  endTimeUnixNano: [8, FIXED64],
  attributes: [9, ATTRIBUTES],
  droppedAttributesCount: [10, UINT32],
  events: [11, MESSAGES],
  droppedEventsCount: [12, UINT32],
  links: [13, MESSAGES],
  droppedLinksCount: [14, UINT32],
  status: [15, MESSAGE],
  flags: [16, FIXED32],
});

export const EVENT = message('Span.Event', {
  timeUnixNano: [1, FIXED64],
  name: [2, STRING],
  attributes: [3, ATTRIBUTES],
  droppedAttributesCount: [4, UINT32],
});

export const LINK = message('Span.Link', {
  traceId: [1, ID],
  spanId: [2, ID],
  traceState: [3, STRING],
  attributes: [4, ATTRIBUTES],
  droppedAttributesCount: [5, UINT32],
  flags: [6, FIXED32],
});

export const STATUS = message('Status', { message: [2, STRING], code: [3, INT32] });

// --- logs ----------------------------------------------------------------------------------------

export const LOGS_REQUEST = message('ExportLogsServiceRequest', { resourceLogs: [1, MESSAGES] });

export const RESOURCE_LOGS = message('ResourceLogs', {
  resource: [1, MESSAGE],
  scopeLogs: [2, MESSAGES],
  schemaUrl: [3, STRING],
});

export const SCOPE_LOGS = message('ScopeLogs', {
  scope: [1, MESSAGE],
  logRecords: [2, MESSAGES],
  schemaUrl: [3, STRING],
});

export const LOG_RECORD = message('LogRecord', {
  timeUnixNano: [1, FIXED64],
  severityNumber: [2, INT32],
  severityText: [3, STRING],
  body: [5, ANY_VALUE],
  attributes: [6, ATTRIBUTES],
  droppedAttributesCount: [7, UINT32],
  flags: [8, FIXED32],
  traceId: [9, ID],
  spanId: [10, ID],
  observedTimeUnixNano: [11, FIXED64],
  eventName: [12, STRING],
});

// --- metrics -------------------------------------------------------------------------------------

export const METRICS_REQUEST = message('ExportMetricsServiceRequest', { resourceMetrics: [1, MESSAGES] });

export const RESOURCE_METRICS = message('ResourceMetrics', {
  resource: [1, MESSAGE],
  scopeMetrics: [2, MESSAGES],
  schemaUrl: [3, STRING],
});

export const SCOPE_METRICS = message('ScopeMetrics', {
  scope: [1, MESSAGE],
  metrics: [2, MESSAGES],
  schemaUrl: [3, STRING],
});

/** Metric: `gauge` to `summary` are the members of its oneof `data`. */
export const METRIC = message('Metric', {
  name: [1, STRING],
  description: [2, STRING],
  unit: [3, STRING],
  gauge: [5, MESSAGE],
  sum: [7, MESSAGE],
  histogram: [9, MESSAGE],
  exponentialHistogram: [10, MESSAGE],
  summary: [11, MESSAGE],
  metadata: [12, ATTRIBUTES],
});

export const GAUGE = message('Gauge', { dataPoints: [1, MESSAGES] });

export const SUM = message('Sum', {
  dataPoints: [1, MESSAGES],
  aggregationTemporality: [2, INT32],
  isMonotonic: [3, BOOL],
});

export const HISTOGRAM = message('Histogram', {
  dataPoints: [1, MESSAGES],
  aggregationTemporality: [2, INT32],
});

export const EXPONENTIAL_HISTOGRAM = message('ExponentialHistogram', {
  dataPoints: [1, MESSAGES],
  aggregationTemporality: [2, INT32],
});

export const SUMMARY = message('Summary', { dataPoints: [1, MESSAGES] });

/** NumberDataPoint: `asDouble` and `asInt` are the members of its oneof `value`. */
export const NUMBER_POINT = message('NumberDataPoint', {
  startTimeUnixNano: [2, FIXED64],
  timeUnixNano: [3, FIXED64],
  asDouble: [4, DOUBLE],
  exemplars: [5, MESSAGES],
  asInt: [6, SFIXED64],
  attributes: [7, ATTRIBUTES],
  flags: [8, UINT32],
});

export const HISTOGRAM_POINT = message('HistogramDataPoint', {
  startTimeUnixNano: [2, FIXED64],
  timeUnixNano: [3, FIXED64],
  count: [4, FIXED64],
  sum: [5, DOUBLE],
  bucketCounts: [6, FIXED64S],
  explicitBounds: [7, DOUBLES],
  exemplars: [8, MESSAGES],
  attributes: [9, ATTRIBUTES],
  flags: [10, UINT32],
  min: [11, DOUBLE],
  max: [12, DOUBLE],
});

export const EXPONENTIAL_POINT = message('ExponentialHistogramDataPoint', {
  attributes: [1, ATTRIBUTES],
  startTimeUnixNano: [2, FIXED64],
  timeUnixNano: [3, FIXED64],
  count: [4, FIXED64],
  sum: [5, DOUBLE],
  scale: [6, SINT32],
  zeroCount: [7, FIXED64],
  positive: [8, MESSAGE],
  negative: [9, MESSAGE],
  flags: [10, UINT32],
  exemplars: [11, MESSAGES],
  min: [12, DOUBLE],
  max: [13, DOUBLE],
  zeroThreshold: [14, DOUBLE],
});

export const BUCKETS = message('ExponentialHistogramDataPoint.Buckets', {
  offset: [1, SINT32],
  bucketCounts: [2, UINT64S],
});

export const SUMMARY_POINT = message('SummaryDataPoint', {
  startTimeUnixNano: [2, FIXED64],
  timeUnixNano: [3, FIXED64],
  count: [4, FIXED64],
  sum: [5, DOUBLE],
  quantileValues: [6, MESSAGES],
  attributes: [7, ATTRIBUTES],
  flags: [8, UINT32],
});

export const QUANTILE = message('SummaryDataPoint.ValueAtQuantile', {
  quantile: [1, DOUBLE],
  value: [2, DOUBLE],
});

/** Exemplar: `asDouble` and `asInt` are the members of its oneof `value`. */
export const EXEMPLAR = message('Exemplar', {
  timeUnixNano: [2, FIXED64],
  asDouble: [3, DOUBLE],
  spanId: [4, ID],
  traceId: [5, ID],
  asInt: [6, SFIXED64],
  filteredAttributes: [7, ATTRIBUTES],
});
