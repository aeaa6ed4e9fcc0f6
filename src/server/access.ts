// Who may do what over HTTP, decided before any handler runs:
// - The Host rule: a server bound to loopback answers only requests naming a loopback host, so
//   that a web page cannot reach it through DNS rebinding (its own name resolved to 127.0.0.1).
// - Authentication, on once the instance has a token (configs/tokens.json) or with
//   server_config.require_auth: OTLP ingest needs a token with the `ingest` scope, /api/* one
//   with `read`; the token's project is the request's project (another X-Project-Id or
//   project_id is refused). /healthz and /api/openapi.json stay open and hold no project's data.
// Refusals are 401 (no valid token) and 403 (the token may not do this, or the Host is not
// loopback); OTLP routes answer with a google.rpc.Status in the request's encoding. Tokens are
// never logged.

import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { encodeStatus, rpcCodeForHttpStatus } from '../otlp/index.ts';
import type { TokenFile, TokenScope } from '../storage/tokens.ts';
import { formatOf, isIngestRoute } from './ingest.ts';
import { isLoopback, isLoopbackHostHeader } from './loopback.ts';
import { OPENAPI_PATH } from './openapi.ts';
import { sentProjectId } from './project-header.ts';
import { noteRefusal } from './refusals.ts';

/** The token a request was made with (null when authentication is off). */
export interface Principal {
  tokenId: string;
  project: string;
  scopes: readonly TokenScope[];
}

declare module 'fastify' {
  interface FastifyRequest {
    /** Set by the access hook: the request's token, or null with authentication off. */
    principal: Principal | null;
  }
}

/** Read routes that hold no project's data. */
const OPEN_API_ROUTES = new Set([OPENAPI_PATH]);

/** The scope a route needs, or null for an open one (/healthz, the API description, 404s). */
function scopeOf(url: string | undefined): TokenScope | null {
  if (url === undefined) return null;
  if (isIngestRoute(url)) return 'ingest';
  if (url.startsWith('/api/') && !OPEN_API_ROUTES.has(url)) return 'read';
  return null;
}

/** Whether requests need a token: the instance has one (revoked ones count), or it is required. */
export function authOn(tokens: TokenFile, requireAuth: boolean): boolean {
  return requireAuth || tokens.current().any;
}

/** The token of an `Authorization: Bearer <token>` header, or null. */
function bearerToken(header: string | undefined): string | null {
  if (header === undefined) return null;
  const m = /^\s*bearer\s+(\S+)\s*$/i.exec(header);
  return m ? m[1]! : null;
}

export interface AccessOptions {
  tokens: TokenFile;
  /** Authentication on even when the instance has no token. */
  requireAuth: boolean;
}

export interface Access {
  /** Whether requests need a token now. */
  enabled(): boolean;
  /** Why tokens.json cannot be used (no token is accepted meanwhile), or null. */
  problem(): string | null;
}

/** Seconds a client is asked to wait while the tokens file cannot be used (an operator mends it). */
const TOKENS_RETRY_AFTER_S = 5;

export function registerAccess(app: FastifyInstance, opts: AccessOptions): Access {
  const { tokens, requireAuth } = opts;
  app.decorateRequest('principal', null);

  // Settled at the first request, once the server listens: bound to loopback or not.
  let loopbackOnly: boolean | undefined;
  const boundToLoopback = (): boolean => {
    if (loopbackOnly === undefined) {
      const address = app.server.address();
      loopbackOnly = typeof address === 'object' && address !== null && isLoopback(address.address);
    }
    return loopbackOnly;
  };

  app.addHook('onRequest', async (request, reply) => {
    const host = request.headers.host;
    if (host !== undefined && boundToLoopback() && !isLoopbackHostHeader(host)) {
      return refuse(
        request,
        reply,
        403,
        `this server listens on loopback only and answers requests for a loopback host, not ${JSON.stringify(host)}`,
      );
    }
    const scope = scopeOf(request.routeOptions.url);
    if (scope === null) return;
    const set = tokens.current();
    if (!requireAuth && !set.any) return;

    const token = bearerToken(request.headers.authorization);
    const record = token === null ? null : set.verify(token);
    if (record === null) {
      if (tokens.problem !== null) {
        // The fault is the server's tokens file, not the client's token: 503 has clients retry
        // until it is mended, where a 401 would have OTLP clients drop what they send meanwhile.
        reply.header('retry-after', String(TOKENS_RETRY_AFTER_S));
        // The details (a path, a parse error) are the operator's: in the log and /healthz.
        return refuse(
          request,
          reply,
          503,
          "no token can be checked now: the server's configs/tokens.json cannot be used (its log says why)",
        );
      }
      reply.header(
        'www-authenticate',
        token === null ? 'Bearer realm="otelake"' : 'Bearer realm="otelake", error="invalid_token"',
      );
      const why =
        token === null
          ? 'send a token: Authorization: Bearer <token> (otelake token create)'
          : 'the token is not valid (unknown, revoked or malformed)';
      return refuse(request, reply, 401, `authentication required: ${why}`);
    }
    if (!record.scopes.includes(scope)) {
      return refuse(request, reply, 403, `this token (${record.id}) does not have the ${scope} scope`);
    }
    const sent = sentProjectId(request.headers);
    const asked = scope === 'ingest' ? (sent === undefined ? [] : [sent]) : projectParams(request);
    const other = asked.find((p) => p !== record.project);
    if (other !== undefined) {
      const what = scope === 'ingest' ? 'X-Project-Id' : 'project_id';
      return refuse(
        request,
        reply,
        403,
        `this token is for project ${JSON.stringify(record.project)}, not ${what} ${JSON.stringify(other)}`,
      );
    }
    request.principal = { tokenId: record.id, project: record.project, scopes: record.scopes };
  });

  return {
    enabled: () => authOn(tokens, requireAuth),
    problem: () => {
      tokens.current();
      return tokens.problem;
    },
  };
}

/** Every project_id a read asks for (the parameter may be repeated). */
function projectParams(request: FastifyRequest): string[] {
  const value = (request.query as Record<string, unknown> | undefined)?.['project_id'];
  if (value === undefined) return [];
  return (Array.isArray(value) ? value : [value]).map(String);
}

/** A refusal: a google.rpc.Status for OTLP routes (in the request's encoding), else JSON. */
function refuse(
  request: FastifyRequest,
  reply: FastifyReply,
  status: 401 | 403 | 503,
  message: string,
): FastifyReply {
  noteRefusal(reply, message);
  const error = { 401: 'Unauthorized', 403: 'Forbidden', 503: 'Service Unavailable' }[status];
  if (!isIngestRoute(request.routeOptions.url)) return reply.code(status).send({ error, message });
  const format = formatOf(request.headers['content-type']) ?? 'json';
  const body = encodeStatus(rpcCodeForHttpStatus(status), message, format);
  return reply
    .code(status)
    .type(format === 'json' ? 'application/json' : 'application/x-protobuf')
    .send(Buffer.from(body.buffer, body.byteOffset, body.byteLength));
}
