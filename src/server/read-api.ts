// GET /api/<table>: the read query model over HTTP. Query parameters are snake_case; results are
// JSON `{ rows, count }`, newest first, int64 values as decimal strings, streamed as rows are read
// (a slice of rows in memory at a time). Reads are bounded: at most `max_concurrent_reads` at once
// (503 + Retry-After beyond), `read_response_limit_bytes` per response (then it ends early, saying
// so), string values cut at `read_field_limit_chars`; a client that goes away cancels its query.

import { Readable } from 'node:stream';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Logger } from '../index.ts';
import {
  type CutValue,
  DamagedTableError,
  type JsonChunk,
  type ReadQuery,
  StorageUnavailableError,
  validateQuery,
} from '../read/index.ts';
import { isValidProjectId, PROJECT_ID_RULE } from '../schema/project.ts';
import type { TableName } from '../schema/tables.ts';
import { validateDay } from '../storage/layout.ts';
import { ObjectStoreError } from '../storage/object-store.ts';
import type { ServerConfig } from '../storage/options.ts';
import { WorkerProcessEnded } from '../storage/worker-pool.ts';
import { OPENAPI_DOCUMENT, OPENAPI_PATH, READ_ROUTES } from './openapi.ts';
import { noteRefusal } from './refusals.ts';

const DEFAULT_LIMIT = 100;
export const MAX_LIMIT = 10_000;
/** Seconds a refused read is asked to wait before it tries again. */
const RETRY_AFTER_S = 1;
/** Seconds a read whose process was killed (for memory, most likely) is asked to wait. */
const MEMORY_RETRY_AFTER_S = 5;
/** A response whose client reads nothing for this long is closed (its query cancelled). */
export const SEND_STALL_MS = 30_000;
/** Bytes of an answer kept for its end: the count, the keys of the lists, the incomplete note. */
const TAIL_BYTES = 512;

/** HTTP parameter -> field of the read query model. */
const PARAMS: Record<string, keyof ReadQuery> = {
  date_from: 'dateFrom',
  date_to: 'dateTo',
  since: 'since',
  until: 'until',
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
      case 'project_id':
        // The rule the server holds ingested project ids to: another id names no row it stored.
        if (!isValidProjectId(text))
          throw new ParamError(param, `use ${PROJECT_ID_RULE}, got ${JSON.stringify(text)}`);
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
  noteRefusal(reply, message);
  const error = status === 400 ? 'Bad Request' : status === 503 ? 'Service Unavailable' : 'Error';
  return reply.code(status).send({ error, message, ...extra });
}

/** The read limits of the server (server_config, max_concurrent_reads resolved: ServerLimits). */
export type ReadLimits = Pick<ServerConfig, 'read_response_limit_bytes' | 'read_field_limit_chars'> & {
  max_concurrent_reads: number;
};

/** Counters of the read endpoints, for /healthz. */
export interface ReadStats {
  /** Reads being answered now (at most max_concurrent_reads). */
  in_flight: number;
  /** max_concurrent_reads as in force (its default follows the memory limit). */
  max_in_flight: number;
  completed: number;
  /** Refused with 503 because max_concurrent_reads were in flight. */
  refused: number;
  /** Stopped because the client went away (or stopped reading) before the end. */
  cancelled: number;
  /** Failed after their answer had started (the connection is closed mid-answer). */
  failed: number;
  /** Ended early at read_response_limit_bytes. */
  cut_short: number;
}

/** The 400 a read query error deserves, or null when it is not the caller's mistake. */
function badRequest(err: unknown): { message: string; parameter?: string } | null {
  // The read path refuses what it cannot serve (e.g. storage=s3 without S3 settings).
  if (err instanceof StorageUnavailableError) return { message: err.message, parameter: 'storage' };
  if (err instanceof TypeError) return { message: toHttpNames(err.message) };
  return null;
}

/**
 * The JSON answer, a slice of rows at a time: `{"rows":[...],"count":n}`, then
 * `"truncated_values"` when values were cut and `"incomplete"` when the byte limit ended it early.
 * The rows' text comes from the read's worker; here it is only measured and passed on.
 */
async function* answer(
  first: JsonChunk | undefined,
  rest: AsyncGenerator<JsonChunk>,
  limits: ReadLimits,
  stats: ReadStats,
): AsyncGenerator<Uint8Array> {
  const limit = limits.read_response_limit_bytes;
  const cuts: CutValue[] = [];
  let count = 0;
  let bytes = 0;
  let full = false;
  let head = '{"rows":[';
  let chunk = first;
  try {
    while (chunk !== undefined && !full) {
      const cutsOf = Map.groupBy(chunk.cuts, (c) => c.row);
      // Each row's text starts with a comma; the answer's first row goes without it.
      const from = count === 0 ? 1 : 0;
      let to = from;
      for (let i = 0; i < chunk.ends.length; i++) {
        const rowCuts = (cutsOf.get(i) ?? []).map((c) => ({ ...c, row: count }));
        const end = chunk.ends[i]!;
        const size = end - to + rowCuts.reduce((n, c) => n + JSON.stringify(c).length + 1, 0);
        if (bytes + size + TAIL_BYTES > limit) {
          full = true;
          break;
        }
        bytes += size;
        to = end;
        cuts.push(...rowCuts);
        count++;
      }
      if (head !== '') yield Buffer.from(head);
      head = '';
      if (to > from) yield chunk.json.subarray(from, to);
      if (full) break;
      const next = await rest.next();
      chunk = next.done ? undefined : next.value;
    }
  } finally {
    // Ended early, cancelled or failed: the read stops here.
    await rest.return(undefined);
  }
  let tail = `${head}],"count":${count}`;
  if (cuts.length > 0) tail += `,"truncated_values":${JSON.stringify(cuts)}`;
  if (full) {
    stats.cut_short++;
    const incomplete = {
      reason: 'response_limit',
      message:
        `the answer reached server_config.read_response_limit_bytes (${limit} bytes) after ${count} rows; ` +
        'ask for fewer rows (limit), fewer columns (select) or a narrower query',
    };
    tail += `,"incomplete":${JSON.stringify(incomplete)}`;
  }
  yield Buffer.from(`${tail}}`);
}

/** Registers the read endpoints with their limits; returns their counters. */
export function registerReadRoutes(
  app: FastifyInstance,
  logger: Logger,
  limits: ReadLimits,
): { stats(): ReadStats } {
  const stats: ReadStats = {
    in_flight: 0,
    max_in_flight: limits.max_concurrent_reads,
    completed: 0,
    refused: 0,
    cancelled: 0,
    failed: 0,
    cut_short: 0,
  };
  /**
   * Reads in flight by project ('' for reads of every project, auth off). A project holds at most
   * all slots but one, so one tenant's reads cannot keep every other out (with one slot there is
   * no share to keep).
   */
  const inFlightByProject = new Map<string, number>();
  const projectShare = Math.max(1, limits.max_concurrent_reads - 1);

  async function serve(table: TableName, request: FastifyRequest, reply: FastifyReply): Promise<unknown> {
    let query: ReadQuery;
    try {
      query = parseReadParams(table, request.query as Record<string, unknown>);
    } catch (err) {
      if (err instanceof ParamError) return sendError(reply, 400, err.message, { parameter: err.param });
      throw err;
    }
    // With auth on, only the token's project (the access hook refused asking for another).
    if (request.principal) query.projectId = request.principal.project;
    const project = query.projectId ?? '';
    const ofProject = inFlightByProject.get(project) ?? 0;
    const busy =
      stats.in_flight >= limits.max_concurrent_reads
        ? 'the server answers as many reads as it may at once (server_config.max_concurrent_reads)'
        : ofProject >= projectShare
          ? `this project's reads hold ${ofProject} of the server_config.max_concurrent_reads slots, ` +
            'the most one project may (one stays for other projects)'
          : null;
    if (busy !== null) {
      stats.refused++;
      reply.header('retry-after', String(RETRY_AFTER_S));
      return sendError(reply, 503, `${busy}; retry after ${RETRY_AFTER_S} s`);
    }

    stats.in_flight++;
    inFlightByProject.set(project, ofProject + 1);
    const controller = new AbortController();
    let settled = false;
    /** Frees the read's slot once, counting how it ended (null: refused as a bad request). */
    const settle = (outcome: 'completed' | 'cancelled' | 'failed' | null) => {
      if (settled) return;
      settled = true;
      stats.in_flight--;
      const left = inFlightByProject.get(project)! - 1;
      if (left === 0) inFlightByProject.delete(project);
      else inFlightByProject.set(project, left);
      if (outcome !== null) stats[outcome]++;
    };
    // The connection closed before the answer was complete: the client went away.
    reply.raw.on('close', () => {
      if (!reply.raw.writableFinished) {
        controller.abort(new Error('the client went away'));
        settle('cancelled');
      }
    });

    const chunks = logger.readJsonChunks(
      table,
      { ...query, maxFieldChars: limits.read_field_limit_chars },
      { signal: controller.signal },
    );
    let first: IteratorResult<JsonChunk>;
    try {
      // Errors of the query itself come before the first slice: they still get a status of their own.
      first = await chunks.next();
    } catch (err) {
      settle(null);
      // Its client went away: nobody to answer.
      if (controller.signal.aborted) return reply.hijack();
      const bad = badRequest(err);
      if (bad) return sendError(reply, 400, bad.message, bad.parameter ? { parameter: bad.parameter } : {});
      // Object storage unreachable or refusing: the failure is upstream, not this request's.
      if (err instanceof ObjectStoreError) return sendError(reply, 502, err.message);
      // The read's process could not start (a native package missing, say): the server's to mend.
      if (err instanceof WorkerProcessEnded && err.startError !== null)
        return sendError(reply, 500, `${err.message}. Ingest goes on.`);
      // The read's own process ended (killed for memory, most likely); ingest goes on. Again later,
      // once the memory other reads hold is given back, it may fit.
      if (err instanceof WorkerProcessEnded)
        return sendError(
          reply.header('retry-after', String(MEMORY_RETRY_AFTER_S)),
          503,
          `${err.message}. Ingest goes on. A narrower read (a shorter time window, a lower limit, ` +
            'a filter) or more memory for the server answers it.',
        );
      if (err instanceof DamagedTableError) {
        return reply
          .code(500)
          .send({ error: 'Damaged Table', message: err.message, table: err.table, day: err.day });
      }
      throw err;
    }

    const parts = answer(first.done ? undefined : first.value, chunks, limits, stats);
    const body = Readable.from(closeWhenStalled(parts, reply), {
      objectMode: false,
      highWaterMark: 64 * 1024,
    });
    body.on('end', () => settle('completed'));
    body.on('error', (err) => {
      if (controller.signal.aborted) return;
      request.log.error({ err }, 'read failed after its answer had started; connection closed');
      settle('failed');
      reply.raw.destroy(err);
    });
    return reply.type('application/json').send(body);
  }

  for (const { path, table } of READ_ROUTES) {
    app.get(path, (request, reply) => serve(table, request, reply));
  }
  app.get(OPENAPI_PATH, (_request, reply) => reply.send(OPENAPI_DOCUMENT));
  return { stats: () => ({ ...stats }) };
}

/** The answer's parts, closing the connection when the client takes none for SEND_STALL_MS. */
async function* closeWhenStalled<P>(parts: AsyncGenerator<P>, reply: FastifyReply): AsyncGenerator<P> {
  for await (const part of parts) {
    const timer = setTimeout(() => reply.raw.destroy(), SEND_STALL_MS);
    try {
      yield part;
    } finally {
      clearTimeout(timer);
    }
  }
}
