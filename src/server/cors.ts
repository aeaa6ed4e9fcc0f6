// CORS for the OTLP routes, so that a web page's OpenTelemetry SDK (OpenTelemetry JS's exporters in
// a browser) can send to the server from another origin. Off unless server_config.cors_allowed_origins
// lists origins. As the Collector's OTLP receiver does it: an allowed origin is echoed back with
// credentials allowed (a sendBeacon of JSON is sent with credentials, and a page may send cookies
// or a token), and a preflight is answered before authentication, as browsers send it without the
// Authorization header. Answers to /v1/* carry the headers, refusals included, so that the page can
// read why it was refused. /api/* and /healthz get none: they are no SDK's.

import cors, { type FastifyCorsOptions } from '@fastify/cors';
import type { FastifyInstance } from 'fastify';
import type { ServerConfig } from '../storage/options.ts';
import { isIngestRoute } from './ingest.ts';

/** Request headers a page may always send: the OTLP body's own, a token, a project. */
export const CORS_REQUEST_HEADERS = ['Content-Type', 'Content-Encoding', 'Authorization', 'X-Project-Id'];

/** An origin pattern with one `*` as a regular expression; `*` stands for any run of host characters. */
function originMatcher(origin: string): string | RegExp {
  const star = origin.indexOf('*');
  if (star < 0) return origin;
  const quote = (s: string) => s.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&');
  return new RegExp(`^${quote(origin.slice(0, star))}[^/?#\\s]*${quote(origin.slice(star + 1))}$`);
}

/** Registers CORS when origins are configured; before the access hook, so a preflight needs no token. */
export async function registerCors(app: FastifyInstance, server: ServerConfig): Promise<void> {
  const origins = server.cors_allowed_origins;
  if (origins.length === 0) return;
  const anyHeader = server.cors_allowed_headers.includes('*');
  const options: FastifyCorsOptions = {
    // true echoes whichever origin asked: a fixed `*` is refused by browsers with credentials.
    origin: origins.includes('*') ? true : origins.map(originMatcher),
    credentials: true,
    methods: ['POST'],
    maxAge: server.cors_max_age_s,
    // Without a list the plugin allows whatever headers the preflight asks for.
    ...(anyHeader ? {} : { allowedHeaders: [...CORS_REQUEST_HEADERS, ...server.cors_allowed_headers] }),
  };
  const off: FastifyCorsOptions = { origin: false };
  await app.register(cors, {
    delegator: (request, callback) => {
      const path = request.url.split('?', 1)[0];
      callback(null, isIngestRoute(path) ? options : off);
    },
  });
}
