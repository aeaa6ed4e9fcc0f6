// The fastify application: OTLP/HTTP ingest, /healthz, and the read API over one logger.

import Fastify, { type FastifyInstance, type FastifyServerOptions, LogController } from 'fastify';
import type { Logger } from '../index.ts';
import { TokenFile } from '../storage/tokens.ts';
import { VERSION } from '../version.ts';
import { registerAccess } from './access.ts';
import { registerCors } from './cors.ts';
import { Decoders } from './decode.ts';
import { ProjectRates } from './fairness.ts';
import { registerIngestRoutes } from './ingest.ts';
import { ServerLimits } from './limits.ts';
import { LoopDelay } from './loop-delay.ts';
import { READ_ROUTES } from './openapi.ts';
import { registerReadRoutes } from './read-api.ts';
import { logRefusals, noteRefusal } from './refusals.ts';

export interface BuildServerOptions {
  /** fastify's logger setting (pino options, or true/false). Default: off. */
  log?: FastifyServerOptions['logger'];
  /** false serves JSON only. Default: protobuf when the optional `protobufjs` package is installed. */
  protobuf?: boolean;
  /** How long an ingest request may wait for room in a full queue; default: the logger's block_timeout_s. */
  ingestWaitMs?: number;
  /** Bodies up to this many bytes are decoded on the event loop; default INLINE_BODY_BYTES (decode.ts), 0: none. */
  inlineBodyBytes?: number;
}

/** A fastify app serving `logger`; call `listen()` on it, and `close()` before stopping the logger. */
export async function buildServer(logger: Logger, opts: BuildServerOptions = {}): Promise<FastifyInstance> {
  const server = logger.options.server_config; // validated with the options (default_project_id too)
  const limits = new ServerLimits(server);
  const app = Fastify({
    ...limits.fastifyOptions(),
    logger: opts.log ?? false,
    // One line per request would cost more than the request at ingest rates; errors are still logged.
    logController: new LogController({ disableRequestLogging: true }),
    // Bodies are read by the ingest handlers with their own (post-decompression) limit.
    bodyLimit: server.body_limit_bytes,
    forceCloseConnections: 'idle',
  });
  limits.register(app);
  const plan = limits.memoryPlan();
  if (plan !== null) app.log.info(plan);

  logRefusals(app);

  const decoders = await Decoders.create({
    settings: logger.validation,
    limits: {
      countLimit: server.attribute_count_limit,
      valueLengthLimit: server.attribute_value_length_limit,
      maxRows: limits.maxRowsPerRequest,
    },
    workers: limits.decodeWorkers,
    ...(opts.protobuf === undefined ? {} : { protobuf: opts.protobuf }),
    ...(opts.inlineBodyBytes === undefined ? {} : { inlineBodyBytes: opts.inlineBodyBytes }),
  });
  // After the last request: fastify runs onClose hooks once in-flight requests are answered.
  app.addHook('onClose', async () => decoders.close());

  app.setErrorHandler((err: Error & { statusCode?: number }, request, reply) => {
    const status = err.statusCode !== undefined && err.statusCode >= 400 ? err.statusCode : 500;
    if (status >= 500) request.log.error({ err }, 'request failed');
    noteRefusal(reply, err.message);
    // A Content-Type header fastify cannot even parse: same plain-text 415 as any unsupported type.
    if (status === 415) return reply.code(415).type('text/plain; charset=utf-8').send(`${err.message}\n`);
    return reply
      .code(status)
      .send({ error: status >= 500 ? 'Internal Server Error' : 'Bad Request', message: err.message });
  });

  // A path no route takes: under /api/ most likely a table's name for its path (the metric tables
  // are /api/metrics/points and /hist), so the read endpoints are listed.
  app.setNotFoundHandler((request, reply) => {
    const path = request.url.split('?')[0]!;
    const reads = path.startsWith('/api/')
      ? `; the read endpoints: ${READ_ROUTES.map((r) => r.path).join(', ')}, and /api/openapi.json`
      : '';
    noteRefusal(reply, 'no such route');
    return reply
      .code(404)
      .send({ error: 'Not Found', message: `no route for ${request.method} ${path}${reads}` });
  });

  // The event loop's delay for /healthz, sampled while requests come (loop-delay.ts).
  const loopDelay = new LoopDelay();
  app.addHook('onRequest', (_request, _reply, done) => {
    loopDelay.request();
    done();
  });
  app.addHook('onClose', async () => loopDelay.close());

  // CORS for browser SDKs, when configured: its hook answers a preflight before the access hook.
  await registerCors(app, server);

  // Before the routes: every request passes the Host rule and, with auth on, shows its token.
  const tokens = new TokenFile(logger.layout.tokensFile);
  tokens.onProblem = (problem) =>
    problem === null ? app.log.info('the tokens file is usable again') : app.log.error(problem);
  const access = registerAccess(app, { tokens, requireAuth: server.require_auth });

  const startedAt = Date.now();
  app.get('/healthz', async () => {
    const mem = process.memoryUsage();
    const problems = logger.problems();
    const tokenProblem = access.problem();
    if (tokenProblem !== null) problems.push(tokenProblem);
    return {
      status: problems.length === 0 ? 'ok' : 'degraded',
      problems,
      // Whether requests need a token; nothing of any project's data is shown here.
      auth: { enabled: access.enabled(), required: server.require_auth },
      version: VERSION,
      uptime_s: Math.round((Date.now() - startedAt) / 100) / 10,
      pid: process.pid,
      instance_id: logger.layout.instanceId,
      protobuf: decoders.protobuf,
      memory: {
        rss: mem.rss,
        heap_used: mem.heapUsed,
        heap_total: mem.heapTotal,
        external: mem.external,
        limit: limits.memoryLimit.bytes,
      },
      event_loop_delay_ms: loopDelay.stats(),
      http: limits.stats(),
      decode: { threads: limits.decodeWorkers, ...decoders.stats() },
      ...logger.stats(),
      reads: reads.stats(),
    };
  });

  registerIngestRoutes(app, {
    logger,
    decoders,
    bodies: limits.bodies,
    bodyLimitBytes: server.body_limit_bytes,
    defaultProjectId: server.default_project_id,
    rates: server.project_max_rows_per_s === null ? null : new ProjectRates(server.project_max_rows_per_s),
    ...(opts.ingestWaitMs === undefined ? {} : { ingestWaitMs: opts.ingestWaitMs }),
  });
  const reads = registerReadRoutes(app, logger, {
    ...server,
    max_concurrent_reads: limits.maxConcurrentReads,
  });
  return app;
}
