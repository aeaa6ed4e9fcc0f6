// CORS for the OTLP routes, so that a web page's OpenTelemetry SDK (OpenTelemetry JS's exporters in
// a browser) can send to the server from another origin. Off unless server_config.cors_allowed_origins
// lists origins. As the Collector's OTLP receiver does it: an allowed origin is echoed back with
// credentials allowed (a sendBeacon of JSON is sent with credentials, and a page may send cookies
// or a token), and a preflight is answered before authentication, as browsers send it without the
// Authorization header. Answers to /v1/* carry the headers, refusals included, so that the page can
// read why it was refused and when to retry. /api/* and /healthz get none: they are no SDK's.

import cors, { type FastifyCorsOptions } from '@fastify/cors';
import type { FastifyInstance } from 'fastify';
import type { ServerConfig } from '../storage/options.ts';
import { isIngestRoute } from './ingest.ts';

/** Request headers a page may always send: the OTLP body's own, a token, a project. */
export const CORS_REQUEST_HEADERS = ['Content-Type', 'Content-Encoding', 'Authorization', 'X-Project-Id'];

/** Whether an origin matches a pattern with one `*`, which stands for any run of characters (as the Collector's). */
function originMatcher(origin: string): (asked: string) => boolean {
  const star = origin.indexOf('*');
  if (star < 0) return (asked) => asked === origin;
  const head = origin.slice(0, star);
  const tail = origin.slice(star + 1);
  return (asked) =>
    asked.length >= head.length + tail.length && asked.startsWith(head) && asked.endsWith(tail);
}

/** Registers CORS when origins are configured; before the access hook, so a preflight needs no token. */
export async function registerCors(app: FastifyInstance, server: ServerConfig): Promise<void> {
  const origins = server.cors_allowed_origins;
  if (origins.length === 0) return;
  const matchers = origins.map(originMatcher);
  const allowed = (origin: string | undefined): boolean =>
    origin !== undefined && (origins.includes('*') || matchers.some((m) => m(origin)));
  const anyHeader = server.cors_allowed_headers.includes('*');
  const options: FastifyCorsOptions = {
    // Echo the origin that asked (decided below): a fixed `*` is refused by browsers with credentials.
    origin: true,
    credentials: true,
    methods: ['POST'],
    maxAge: server.cors_max_age_s,
    // A page's exporter waits as the server asks (429, 503) only if it may read the header.
    exposedHeaders: ['Retry-After'],
    // Without a list the plugin allows whatever headers the preflight asks for.
    ...(anyHeader ? {} : { allowedHeaders: [...CORS_REQUEST_HEADERS, ...server.cors_allowed_headers] }),
  };
  // Another route, or an origin not listed (or none: every client but a browser's), gets no CORS
  // header at all, and its OPTIONS is no preflight (405 on /v1/*).
  const off: FastifyCorsOptions = { origin: false };
  await app.register(cors, {
    delegator: (request, callback) => {
      const path = request.url.split('?', 1)[0];
      callback(null, isIngestRoute(path) && allowed(request.headers.origin) ? options : off);
    },
  });
}
