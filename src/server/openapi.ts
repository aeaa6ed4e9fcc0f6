// The OpenAPI 3.1 description of the HTTP endpoints, served at GET /api/openapi.json. Column lists
// come from the table schemas, so the document cannot drift from what the tables hold.

import { METRIC_TYPES } from '../read/filters.ts';
import { TIME_BOUND_FORMATS } from '../read/window.ts';
import { PROJECT_ID_PATTERN } from '../schema/project.ts';
import { SCHEMAS, type TableName } from '../schema/tables.ts';
import { VERSION } from '../version.ts';

/** Where this document is served: open to all (access.ts), as it holds no project's data. */
export const OPENAPI_PATH = '/api/openapi.json';

/** The read endpoints: registered by read-api.ts, documented here. */
export const READ_ROUTES: readonly { path: string; table: TableName; title: string }[] = [
  { path: '/api/spans', table: 'spans', title: 'Spans' },
  { path: '/api/span_events', table: 'span_events', title: 'Span events' },
  { path: '/api/span_links', table: 'span_links', title: 'Span links' },
  { path: '/api/logs', table: 'logs', title: 'Log records' },
  { path: '/api/metrics/points', table: 'metrics_points', title: 'Gauge and sum data points' },
  {
    path: '/api/metrics/hist',
    table: 'metrics_hist',
    title: 'Histogram, exponential histogram and summary data points',
  },
];

/** An optional query parameter; `extra` holds serialization fields such as style. */
const query = (name: string, description: string, schema: object, extra: object = {}) => ({
  name,
  in: 'query',
  required: false,
  description,
  ...extra,
  schema,
});

const str = (name: string, description: string, schema: object = {}) =>
  query(name, description, { type: 'string', ...schema });

const day = (name: string, description: string) => str(name, description, { format: 'date' });

const hexId = (name: string, chars: number) =>
  str(name, `${chars} hex characters.`, { pattern: `^[0-9a-fA-F]{${chars}}$` });

function readParameters(table: TableName): object[] {
  const columns = SCHEMAS[table].columns.map((c) => c.name);
  const has = (c: string) => columns.includes(c);
  const params: object[] = [
    day('date_from', 'First UTC day, inclusive (YYYY-MM-DD). Default: the earliest day stored.'),
    day('date_to', 'Last UTC day, inclusive (YYYY-MM-DD). Default: the latest day stored.'),
    str('since', `Only rows with event_ts at or after this time: ${TIME_BOUND_FORMATS}.`),
    str('until', 'Only rows with event_ts before this time (same forms as since).'),
    str('project_id', 'Only rows of this project.'),
    str('service_name', 'Only rows of this service (equality).'),
  ];
  if (table === 'logs') {
    params.push(
      query('severity_ge', 'Minimum severity_number (9 INFO, 13 WARN, 17 ERROR).', {
        type: 'integer',
        minimum: 0,
        maximum: 24,
      }),
      str('body_like', 'Substring the log body must contain.'),
    );
  }
  if (has('trace_id')) params.push(hexId('trace_id', 32));
  if (has('span_id')) params.push(hexId('span_id', 16));
  if (has('name')) params.push(str('name', 'Span or event name (equality).'));
  if (has('metric_name')) {
    params.push(
      str('metric_name', 'Metric name (equality).'),
      str('metric_type', 'Metric type.', { enum: METRIC_TYPES[table] }),
    );
  }
  params.push(
    query(
      'select',
      'Columns to return: a comma-separated list, or the parameter repeated. Default: all.',
      { type: 'array', items: { type: 'string', enum: columns } },
      { style: 'form', explode: true },
    ),
    query('limit', 'Most rows returned (the newest by event_ts).', {
      type: 'integer',
      minimum: 1,
      maximum: 10000,
      default: 100,
    }),
    str('storage', 'auto: object storage for shipped days, local otherwise; local; s3.', {
      enum: ['auto', 'local', 's3'],
      default: 'auto',
    }),
  );
  return params;
}

const INT64_PATTERN = '^-?\\d+$';

function rowSchema(table: TableName): object {
  const properties: Record<string, object> = {};
  for (const c of SCHEMAS[table].columns) {
    let type: string | string[];
    let extra: object = {};
    if (typeof c.type === 'object') {
      type = 'array';
      extra = {
        items: c.type.list === 'long' ? { type: 'string', pattern: INT64_PATTERN } : { type: 'number' },
      };
    } else if (c.type === 'long') {
      type = 'string';
      extra = { pattern: INT64_PATTERN, description: 'int64 as a decimal string' };
    } else if (c.type === 'timestamp') {
      type = 'string';
      extra = { format: 'date-time' };
    } else if (c.type === 'double') {
      type = ['number', 'string'];
      extra = { description: 'NaN and ±Infinity as strings' };
    } else type = c.type;
    const types = Array.isArray(type) ? type : [type];
    properties[c.name] = { type: c.required ? type : [...types, 'null'], ...extra };
  }
  return { type: 'object', properties };
}

/** A JSON body, with a schema when the document describes one. */
const json = (schema?: object) => ({ 'application/json': schema === undefined ? {} : { schema } });

const errorResponse = {
  description: 'Invalid parameter (the message names it).',
  content: json({
    type: 'object',
    properties: { error: { type: 'string' }, message: { type: 'string' }, parameter: { type: 'string' } },
  }),
};

/** OTLP requests, and the answers to them, come in either encoding. */
const OTLP_CONTENT = { 'application/json': {}, 'application/x-protobuf': {} };

const OTLP_STATUS = { description: 'google.rpc.Status in the request encoding', content: OTLP_CONTENT };

/** With auth on (the instance has a token): no valid bearer token. */
const UNAUTHORIZED =
  'No valid token (Authorization: Bearer <token>); only with auth on. WWW-Authenticate: Bearer.';
/** The token may not do this, or the Host is not a loopback name on a loopback-bound server. */
const FORBIDDEN =
  'The token lacks the scope or is for another project, or a server bound to loopback was asked for another Host.';

function otlpPath(service: string, item: string): object {
  const request = `Export${service}ServiceRequest`;
  const response = `Export${service}ServiceResponse`;
  return {
    post: {
      summary: `OTLP/HTTP export (${request})`,
      description:
        `An OTLP ${request}. Content-Encoding gzip, deflate, br or zstd is accepted; ` +
        'the body limit applies to the bytes received and again after decompression. The project is the X-Project-Id header, else the ' +
        'resource attribute project.id, else the configured default project; with auth on, the project of the token ' +
        '(a resource project.id is then ignored).',
      parameters: [
        {
          name: 'X-Project-Id',
          in: 'header',
          required: false,
          schema: { type: 'string', pattern: PROJECT_ID_PATTERN },
        },
      ],
      requestBody: { required: true, content: OTLP_CONTENT },
      responses: {
        '200': {
          description: `${response}; partial_success.rejected_${item} counts refused items, with a message.`,
          content: OTLP_CONTENT,
        },
        '400': OTLP_STATUS,
        '405': { description: 'Method other than POST.' },
        '408': {
          description:
            'Headers or body not received within server_config.header_timeout_s / request_timeout_s; the connection is closed.',
        },
        '401': { ...OTLP_STATUS, description: UNAUTHORIZED },
        '403': { ...OTLP_STATUS, description: FORBIDDEN },
        '413': OTLP_STATUS,
        '415': { description: 'Unsupported Content-Type or Content-Encoding (plain text).' },
        '429': {
          description:
            'The project is over server_config.project_max_rows_per_s, or holds its producer_config.project_queue_share ' +
            'of the ingest queue; retry after the Retry-After header.',
          headers: { 'Retry-After': { schema: { type: 'integer' } } },
          content: OTLP_CONTENT,
        },
        '503': {
          description:
            'The ingest queue stayed full, writes to a table the request feeds are failing, the server ' +
            'holds server_config.max_body_bytes_in_flight of request bodies, or the server is stopping; ' +
            'retry after the Retry-After header.',
          headers: { 'Retry-After': { schema: { type: 'integer' } } },
          content: OTLP_CONTENT,
        },
      },
    },
  };
}

function buildDocument(): object {
  const paths: Record<string, object> = {
    '/v1/traces': otlpPath('Trace', 'spans'),
    '/v1/logs': otlpPath('Logs', 'log_records'),
    '/v1/metrics': otlpPath('Metrics', 'data_points'),
    '/healthz': {
      get: {
        summary: 'Process and pipeline health',
        responses: {
          '200': {
            description:
              'status, whether auth is on, version, uptime, pid, memory, producer, aggregator and shipper stats; ' +
              'always open, and no project data',
            content: json(),
          },
        },
      },
    },
    [OPENAPI_PATH]: {
      get: { summary: 'This document', responses: { '200': { description: 'OpenAPI 3.1 document' } } },
    },
  };
  const schemas: Record<string, object> = {};
  for (const { path, table, title } of READ_ROUTES) {
    schemas[table] = rowSchema(table);
    paths[path] = {
      get: {
        summary: `${title}, newest first`,
        parameters: readParameters(table),
        responses: {
          '200': {
            description:
              'Matching rows, newest first by event_ts, then the nanosecond time, then the newest arrival; ' +
              'streamed. truncated_values lists string values cut at server_config.read_field_limit_chars; ' +
              'incomplete says the answer ended early at server_config.read_response_limit_bytes.',
            content: json({
              type: 'object',
              properties: {
                rows: { type: 'array', items: { $ref: `#/components/schemas/${table}` } },
                count: { type: 'integer' },
                truncated_values: {
                  type: 'array',
                  items: {
                    type: 'object',
                    properties: {
                      row: { type: 'integer' },
                      column: { type: 'string' },
                      chars: { type: 'integer', description: 'length of the whole value' },
                    },
                  },
                },
                incomplete: {
                  type: 'object',
                  properties: { reason: { const: 'response_limit' }, message: { type: 'string' } },
                },
              },
            }),
          },
          '400': errorResponse,
          '401': { description: UNAUTHORIZED, content: json() },
          '403': { description: FORBIDDEN, content: json() },
          '503': {
            description:
              'server_config.max_concurrent_reads reads are being answered; retry after Retry-After.',
            headers: { 'Retry-After': { schema: { type: 'integer' } } },
            content: json(),
          },
        },
      },
    };
  }
  return {
    openapi: '3.1.0',
    info: {
      title: 'otelake',
      version: VERSION,
      description: 'OTLP/HTTP ingestion into Delta Lake tables, and read endpoints over them.',
    },
    paths,
    // Needed once the instance has a token (or with server_config.require_auth).
    security: [{}, { bearer: [] }],
    components: { schemas, securitySchemes: { bearer: { type: 'http', scheme: 'bearer' } } },
  };
}

export const OPENAPI_DOCUMENT: object = buildDocument();
