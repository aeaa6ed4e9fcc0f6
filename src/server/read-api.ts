// GET /api/<table>: the read query model over HTTP. Query parameters are snake_case, results are
// JSON `{ rows, count }`, newest first, with int64 values as decimal strings.

import type { FastifyInstance, FastifyReply } from 'fastify';
import type { Logger } from '../index.ts';
import {
  DamagedTableError,
  type ReadQuery,
  rowToJson,
  StorageUnavailableError,
  validateQuery,
} from '../read/index.ts';
import type { TableName } from '../schema/tables.ts';
import { validateDay } from '../storage/layout.ts';
import { OPENAPI_DOCUMENT, READ_ROUTES } from './openapi.ts';

const DEFAULT_LIMIT = 100;
const MAX_LIMIT = 10_000;

/** HTTP parameter -> field of the read query model. */
const PARAMS: Record<string, keyof ReadQuery> = {
  date_from: 'dateFrom',
  date_to: 'dateTo',
  project_id: 'projectId',
  service_name: 'serviceName',
  severity_ge: 'severityGe',
  body_like: 'bodyLike',
  trace_id: 'traceId',
  span_id: 'spanId',
  name: 'name',
  metric_name: 'metricName',
  metric_type: 'metricType',
  select: 'select',
  limit: 'maxRows',
  storage: 'storage',
};
const QUERY_PARAMETERS: readonly string[] = Object.keys(PARAMS);

/** A request parameter that cannot be used; the message names the parameter. */
class ParamError extends Error {
  readonly param: string;
  constructor(param: string, message: string) {
    super(`invalid parameter ${param}: ${message}`);
    this.name = 'ParamError';
    this.param = param;
  }
}

function single(param: string, value: unknown): string {
  if (Array.isArray(value)) throw new ParamError(param, 'given more than once');
  return String(value);
}

function integer(param: string, text: string, min: number, max: number): number {
  if (!/^-?\d+$/.test(text)) throw new ParamError(param, `expected an integer, got ${JSON.stringify(text)}`);
  const n = Number(text);
  if (n < min || n > max) throw new ParamError(param, `expected ${min}..${max}, got ${text}`);
  return n;
}

function hexId(param: string, text: string, length: number): string {
  if (text.length !== length || !/^[0-9a-fA-F]+$/.test(text)) {
    throw new ParamError(param, `expected ${length} hex characters, got ${JSON.stringify(text)}`);
  }
  return text.toLowerCase();
}

/** Turns the HTTP query string of a read endpoint into a validated read query. */
function parseReadParams(table: TableName, raw: Record<string, unknown>): ReadQuery {
  const q: Record<string, unknown> = { maxRows: DEFAULT_LIMIT };
  for (const [param, value] of Object.entries(raw)) {
    const field = PARAMS[param];
    if (field === undefined) {
      throw new ParamError(param, `unknown parameter; known: ${QUERY_PARAMETERS.join(', ')}`);
    }
    if (param === 'select') {
      const list = (Array.isArray(value) ? value : [value])
        .flatMap((v) => String(v).split(','))
        .map((s) => s.trim())
        .filter((s) => s.length > 0);
      if (list.length === 0) throw new ParamError(param, 'expected one or more column names');
      q[field] = list;
      continue;
    }
    const text = single(param, value);
    switch (param) {
      case 'date_from':
      case 'date_to':
        try {
          q[field] = validateDay(text, param);
        } catch (err) {
          throw new ParamError(param, (err as Error).message);
        }
        break;
      case 'severity_ge':
        q[field] = integer(param, text, 0, 24);
        break;
      case 'limit':
        q[field] = integer(param, text, 1, MAX_LIMIT);
        break;
      case 'trace_id':
        q[field] = hexId(param, text, 32);
        break;
      case 'span_id':
        q[field] = hexId(param, text, 16);
        break;
      case 'storage':
        if (text !== 'auto' && text !== 'local' && text !== 's3') {
          throw new ParamError(param, `expected auto, local or s3, got ${JSON.stringify(text)}`);
        }
        q[field] = text;
        break;
      default:
        if (text.length === 0) throw new ParamError(param, 'expected a non-empty value');
        q[field] = text;
    }
  }
  if (typeof q['dateFrom'] === 'string' && typeof q['dateTo'] === 'string' && q['dateFrom'] > q['dateTo']) {
    throw new ParamError('date_from', `${q['dateFrom']} is after date_to ${q['dateTo']}`);
  }
  const query = q as ReadQuery;
  try {
    validateQuery(table, query);
  } catch (err) {
    if (err instanceof TypeError) throw new ParamError(paramNamed(err.message), toHttpNames(err.message));
    throw err;
  }
  return query;
}

const CAMEL_TO_PARAM = new Map(Object.entries(PARAMS).map(([p, f]) => [f as string, p]));

/** The HTTP parameter a query-model error message is about: its messages start with the name. */
function paramNamed(message: string): string {
  const m = /^(?:invalid )?(\w+)/.exec(message);
  return (m && CAMEL_TO_PARAM.get(m[1]!)) ?? 'query';
}

/** A query-model message with its field names replaced by the HTTP parameter names. */
function toHttpNames(message: string): string {
  let out = message;
  for (const [field, param] of CAMEL_TO_PARAM) out = out.replace(new RegExp(`\\b${field}\\b`, 'g'), param);
  return out;
}

function sendError(reply: FastifyReply, status: number, message: string, extra?: object): FastifyReply {
  return reply.code(status).send({ error: status === 400 ? 'Bad Request' : 'Error', message, ...extra });
}

export function registerReadRoutes(app: FastifyInstance, logger: Logger): void {
  for (const { path, table } of READ_ROUTES) {
    app.get(path, async (request, reply) => {
      let query: ReadQuery;
      try {
        query = parseReadParams(table, request.query as Record<string, unknown>);
      } catch (err) {
        if (err instanceof ParamError) return sendError(reply, 400, err.message, { parameter: err.param });
        throw err;
      }
      let rows: Record<string, unknown>[];
      try {
        rows = (await logger.read(table, query, { returnAs: 'objects' })) as Record<string, unknown>[];
      } catch (err) {
        // The read path refuses what it cannot serve (e.g. storage=s3 without S3 settings).
        if (err instanceof StorageUnavailableError) {
          return sendError(reply, 400, err.message, { parameter: 'storage' });
        }
        if (err instanceof DamagedTableError) {
          request.log.error(err.message);
          return reply
            .code(500)
            .send({ error: 'Damaged Table', message: err.message, table: err.table, day: err.day });
        }
        if (err instanceof TypeError) return sendError(reply, 400, toHttpNames(err.message));
        throw err;
      }
      const out = new Array(rows.length);
      for (let i = 0; i < rows.length; i++) out[i] = rowToJson(rows[i]!, table);
      return reply.type('application/json').send(JSON.stringify({ rows: out, count: out.length }));
    });
  }
  app.get('/api/openapi.json', (_request, reply) => reply.send(OPENAPI_DOCUMENT));
}
