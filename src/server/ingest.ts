// POST /v1/traces, /v1/logs, /v1/metrics: OTLP/HTTP export requests in JSON or protobuf, optionally
// compressed, mapped to table rows and handed to the logger's pipeline. Answers follow the OTLP
// specification: an Export*ServiceResponse (with partial_success when rows were refused) in the
// request's encoding, a google.rpc.Status for failures, plain text for an unsupported content type.

import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Logger, RequestOutcome, RequestResult, RequestTables } from '../index.ts';
import {
  type BodyFormat,
  encodeExportResponse,
  encodeStatus,
  PROTOBUF_PACKAGE,
  rpcCodeForHttpStatus,
  type Signal,
} from '../otlp/index.ts';
import { isValidProjectId, PROJECT_ID_RULE } from '../schema/project.ts';
import type { TableName } from '../schema/tables.ts';
import { WorkerLost } from '../storage/worker-pool.ts';
import { type BodyBudget, BodyError, closeAfterAnswer, codingsFor, readBody } from './body.ts';
import type { DecodedTable, DecodeResult, Decoders } from './decode.ts';
import type { ProjectRates } from './fairness.ts';
import { sentProjectId } from './project-header.ts';
import { noteRefusal } from './refusals.ts';

type Format = BodyFormat;

interface SignalRoute {
  signal: Signal;
  path: string;
  /** Tables whose rows are the signal's items (what partial_success counts). */
  itemTables: readonly TableName[];
  itemWord: string;
}

const SIGNAL_ROUTES: readonly SignalRoute[] = [
  { signal: 'traces', path: '/v1/traces', itemTables: ['spans'], itemWord: 'spans' },
  { signal: 'logs', path: '/v1/logs', itemTables: ['logs'], itemWord: 'log records' },
  {
    signal: 'metrics',
    path: '/v1/metrics',
    itemTables: ['metrics_points', 'metrics_hist'],
    itemWord: 'data points',
  },
];

const CONTENT_TYPE: Record<Format, string> = {
  json: 'application/json',
  protobuf: 'application/x-protobuf',
};

/** Seconds a client is asked to wait before retrying (queue full, bodies in flight, server stopping). */
const RETRY_AFTER_S = 1;

/** Request outcomes answered 503 + Retry-After, with what they mean to the client. */
const RETRY_LATER: Partial<Record<RequestOutcome, string>> = {
  queue_full: 'the ingest queue is full',
  unavailable: 'the rows cannot be stored right now',
  stopped: 'the server is not accepting data (stopping)',
  not_started: 'the server is not accepting data (not started)',
};

export interface IngestRouteOptions {
  logger: Logger;
  /** Where bodies are decoded, mapped and normalized (worker threads, or inline); also whether protobuf is. */
  decoders: Decoders;
  /** Bytes of request bodies held at once: a body that does not fit is answered 503. */
  bodies: BodyBudget;
  bodyLimitBytes: number;
  defaultProjectId: string;
  /** The per-project ingest rate (server_config.project_max_rows_per_s), or null for none. */
  rates: ProjectRates | null;
  /** How long a request may wait for room in a full queue (drop_policy block); default from the logger. */
  ingestWaitMs?: number;
}

/** The body format named by a Content-Type header (parameters such as charset are ignored). */
export function formatOf(contentType: string | undefined): Format | null {
  if (contentType === undefined) return null;
  const semi = contentType.indexOf(';');
  const media = (semi === -1 ? contentType : contentType.slice(0, semi)).trim().toLowerCase();
  if (media === 'application/json') return 'json';
  if (media === 'application/x-protobuf' || media === 'application/protobuf') return 'protobuf';
  return null;
}

function sendText(reply: FastifyReply, status: number, text: string): FastifyReply {
  noteRefusal(reply, text);
  return reply
    .code(status)
    .type('text/plain; charset=utf-8')
    .send(text + '\n');
}

/** A body as a Buffer view without copying (fastify sends Buffers as they are). */
function asBuffer(bytes: Uint8Array): Buffer {
  return Buffer.isBuffer(bytes) ? bytes : Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
}

/** A failure answered with a google.rpc.Status in the request's encoding. */
function sendStatus(reply: FastifyReply, status: number, message: string, format: Format): FastifyReply {
  noteRefusal(reply, message);
  return reply
    .code(status)
    .type(CONTENT_TYPE[format])
    .send(asBuffer(encodeStatus(rpcCodeForHttpStatus(status), message, format)));
}

/**
 * 503 with Retry-After (429: a project over its rate or queue share): the client should send the
 * same request again later.
 */
function sendRetryLater(
  reply: FastifyReply,
  why: string,
  format: Format,
  status: 503 | 429 = 503,
  seconds = RETRY_AFTER_S,
): FastifyReply {
  reply.header('retry-after', String(seconds));
  return sendStatus(reply, status, `${why}; retry after ${seconds} s`, format);
}

/**
 * The answer to an OTLP export arriving while the server stops: 503 with Retry-After and a
 * google.rpc.Status in the request's encoding (JSON unless it is protobuf), and the connection
 * closed, so that the client retries against the next server.
 */
export function refuseWhileStopping(request: FastifyRequest, reply: FastifyReply): FastifyReply {
  reply.header('connection', 'close');
  return sendRetryLater(reply, 'the server is stopping', formatOf(request.headers['content-type']) ?? 'json');
}

/** Whether `url` (a route's path) is one of the OTLP export routes. */
export function isIngestRoute(url: string | undefined): boolean {
  return SIGNAL_ROUTES.some((r) => r.path === url);
}

function headerValue(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value[value.length - 1] : value;
}

/** The partial_success message: what was refused and why, most frequent reasons first. */
function describeRejections(
  route: SignalRoute,
  rejected: number,
  reasons: Map<string, number>,
  invalidIds: number,
): string {
  const parts: string[] = [];
  if (rejected > 0) {
    const top = [...reasons.entries()]
      .sort((a, b) => b[1] - a[1])
      .slice(0, 5)
      .map(([r, n]) => `${r} (${n})`);
    let text = `${rejected} ${route.itemWord} rejected`;
    if (top.length > 0) text += `: ${top.join(', ')}`;
    parts.push(text);
  }
  if (invalidIds > 0) parts.push(`${invalidIds} invalid trace or span ids were stored as null`);
  return parts.join('; ');
}

/** 429 for a project over server_config.project_max_rows_per_s. */
function overRate(reply: FastifyReply, seconds: number, format: Format): FastifyReply {
  const why = 'the project is over its ingest rate (server_config.project_max_rows_per_s)';
  return sendRetryLater(reply, why, format, 429, seconds);
}

/** What a request's headers settle before its body is read. */
interface RequestHead {
  format: Format;
  /** X-Project-Id, or with auth on the token's project (the access hook refused another). */
  headerProject: string | undefined;
  /** The body's Content-Encoding, in the order they are undone. */
  codings: string[];
}

/**
 * The head of an export request, or the answer refusing it before its body is read: an
 * unsupported content type (protobuf too, without protobufjs), an invalid X-Project-Id, an
 * unsupported Content-Encoding, then a project over its rate.
 */
function checkHead(
  request: FastifyRequest,
  reply: FastifyReply,
  protobuf: boolean,
  rates: ProjectRates | null,
  bodyLimit: number,
): RequestHead | { refused: FastifyReply } {
  const format = formatOf(request.headers['content-type']);
  if (format === null) {
    return {
      refused: sendText(
        reply,
        415,
        `unsupported content type ${JSON.stringify(request.headers['content-type'] ?? '')}: ` +
          'send application/json or application/x-protobuf',
      ),
    };
  }
  if (format === 'protobuf' && !protobuf) {
    return {
      refused: sendText(
        reply,
        415,
        `protobuf request bodies need the optional package "${PROTOBUF_PACKAGE}": install it with ` +
          `\`npm install ${PROTOBUF_PACKAGE}\` and restart the server, or send application/json`,
      ),
    };
  }
  const headerProject = request.principal?.project ?? sentProjectId(request.headers);
  if (headerProject !== undefined && !isValidProjectId(headerProject)) {
    const why = `invalid X-Project-Id ${JSON.stringify(headerProject)}: use ${PROJECT_ID_RULE}`;
    return { refused: sendStatus(reply, 400, why, format) };
  }
  let codings: string[];
  try {
    codings = codingsFor(headerValue(request.headers['content-encoding']));
  } catch (err) {
    if (err instanceof BodyError) return { refused: sendText(reply, err.statusCode, err.message) };
    throw err;
  }
  // Refusals that sending again cannot change come before the rate's 429: a client told to wait
  // (an SDK honours Retry-After) would only be refused then. A body declared over the limit is
  // refused by readBody, which closes the connection instead of reading it.
  const oversized = Number(request.headers['content-length'] ?? 0) > bodyLimit;
  const wait = headerProject === undefined || oversized ? 0 : (rates?.retryAfter([headerProject]) ?? 0);
  if (wait > 0) return { refused: overRate(reply, wait, format) };
  return { format, headerProject, codings };
}

/**
 * The answer to a request whose rows went to the pipeline: 200 with the rows rejected (and, with
 * a dropping policy, dropped) in partial_success; 503 or 429 with Retry-After when the request
 * should be sent again.
 */
function answerIngested(
  reply: FastifyReply,
  route: SignalRoute,
  format: Format,
  result: RequestResult,
  invalidIds: number,
  dropPolicy: string,
): FastifyReply {
  if (result.outcome === 'project_full') {
    const why =
      'a project of this request holds its share of the ingest queue (producer_config.project_queue_share)';
    return sendRetryLater(reply, why, format, 429);
  }
  const retry = RETRY_LATER[result.outcome];
  if (retry !== undefined) {
    return sendRetryLater(reply, result.message ? `${retry}: ${result.message}` : retry, format);
  }
  let rejected = 0;
  const reasons = new Map<string, number>();
  for (const table of route.itemTables) {
    const r = result.tables[table];
    if (!r) continue;
    rejected += r.rejected;
    for (const [reason, n] of Object.entries(r.reasons)) reasons.set(reason, (reasons.get(reason) ?? 0) + n);
    // A dropping policy refuses rows by design: they count as rejected, not retried. Its name:
    // drop_newest, or drop_oldest when evicting every queued row still left no room (the rest
    // of the queue is reserved by requests in flight).
    if (result.outcome === 'dropped' && r.dropped > 0) {
      rejected += r.dropped;
      const why = `queue_full (${dropPolicy})`;
      reasons.set(why, (reasons.get(why) ?? 0) + r.dropped);
    }
  }
  const message = describeRejections(route, rejected, reasons, invalidIds);
  return reply
    .code(200)
    .type(CONTENT_TYPE[format])
    .send(asBuffer(encodeExportResponse(route.signal, { rejected, message }, format)));
}

export function registerIngestRoutes(app: FastifyInstance, opts: IngestRouteOptions): void {
  const { logger, decoders } = opts;
  const waitFor = opts.ingestWaitMs === undefined ? {} : { waitMs: opts.ingestWaitMs };

  // Bodies are read by the handlers (with the body limit) and decompressed and decoded by the
  // Decoders (worker threads, or inline with decode_workers 0); fastify only hands the raw stream
  // over, whatever the content type.
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('*', (_req, _payload, done) => done(null, undefined));

  for (const route of SIGNAL_ROUTES) {
    app.post(route.path, (request, reply) => handleExport(route, request, reply));
    app.route({
      method: ['GET', 'HEAD', 'PUT', 'DELETE', 'PATCH', 'OPTIONS'],
      url: route.path,
      exposeHeadRoute: false,
      handler: (_request, reply) =>
        sendText(reply.header('allow', 'POST'), 405, `method not allowed: use POST ${route.path}`),
    });
  }

  async function handleExport(route: SignalRoute, request: FastifyRequest, reply: FastifyReply) {
    const head = checkHead(request, reply, decoders.protobuf, opts.rates, opts.bodyLimitBytes);
    if ('refused' in head) return head.refused;
    const { format, headerProject, codings } = head;

    // The body's bytes count against the budget until the request is answered, whatever the path.
    const lease = opts.bodies.lease();
    reply.raw.once('close', () => lease.release());
    let body: Buffer;
    try {
      body = await readBody(request.raw, opts.bodyLimitBytes, lease);
    } catch (err) {
      if (!(err instanceof BodyError)) throw err;
      // Refused before the whole body was read: the connection ends after the answer.
      closeAfterAnswer(reply.raw);
      if (err.statusCode === 503) return sendRetryLater(reply, err.message, format);
      return sendStatus(reply, err.statusCode, err.message, format);
    }

    // An empty body is an empty export request: nothing to store, success.
    if (body.length === 0) {
      return reply
        .code(200)
        .type(CONTENT_TYPE[format])
        .send(asBuffer(encodeExportResponse(route.signal, { rejected: 0 }, format)));
    }

    // Decoded, mapped, checked (project ids, each row) and built into columns off the event loop.
    let decoded: DecodeResult;
    try {
      decoded = await decoders.decode({
        signal: route.signal,
        format,
        body,
        codings,
        bodyLimit: opts.bodyLimitBytes,
        headerProjectId: headerProject,
        defaultProjectId: opts.defaultProjectId,
      });
    } catch (err) {
      request.log.error({ err }, 'decoding an OTLP request failed');
      // The decoder ended with this request in hand (another one's fault, or memory): nothing says
      // the request is bad, and OTLP clients give up on a 500, so they are asked to send it again.
      if (err instanceof WorkerLost) {
        return sendRetryLater(reply, `the decoder ended before answering (${err.message})`, format);
      }
      return sendStatus(reply, 500, `internal error: ${(err as Error).message}`, format);
    }
    if (!decoded.ok) return sendStatus(reply, decoded.status, decoded.message, format);

    const { projects } = decoded;
    if (opts.rates) {
      const admission = opts.rates.admit(projects);
      if ('retryAfterS' in admission) return overRate(reply, admission.retryAfterS, format);
      // Held back to keep the project at its rate (at most MAX_WAIT_MS).
      if (admission.waitMs > 0) await new Promise((r) => setTimeout(r, admission.waitMs));
    }
    const tables: RequestTables = {};
    let decodedBytes = 0;
    for (const [table, t] of Object.entries(decoded.tables) as [TableName, DecodedTable][]) {
      tables[table] = { batch: t.batch, rejected: t.reasons };
      decodedBytes += t.batch.packed.byteLength;
    }
    // The body is gone (moved to the decoder); its rows are what the request holds until queued.
    lease.hold(decodedBytes);
    let result: RequestResult;
    try {
      result = await logger.ingestRequest(tables, { ...waitFor, projects });
    } catch (err) {
      opts.rates?.refund(projects);
      request.log.error({ err }, 'ingesting rows failed');
      return sendStatus(reply, 503, `cannot store the rows: ${(err as Error).message}`, format);
    }
    if (result.outcome !== 'accepted') opts.rates?.refund(projects);
    return answerIngested(
      reply,
      route,
      format,
      result,
      decoded.invalidIds,
      logger.options.producer_config.drop_policy,
    );
  }
}
