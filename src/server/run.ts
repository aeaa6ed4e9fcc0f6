// Runs the server for one instance: opens the logger, listens, and on SIGTERM/SIGINT stops accepting,
// lets requests in flight finish, flushes the pipeline and exits 0.

import type { FastifyBaseLogger, FastifyInstance, FastifyServerOptions } from 'fastify';
import { Logger } from '../index.ts';
import { closeReadWorkers, runReadsInProcesses } from '../read/index.ts';
import { memoryLimit, type PartialOptions } from '../storage/options.ts';
import { TokenFile } from '../storage/tokens.ts';
import { VERSION } from '../version.ts';
import { authOn } from './access.ts';
import { buildServer } from './app.ts';
import { droppingLogStream } from './log-stream.ts';
import { isLoopback } from './loopback.ts';

export interface RunServerOptions {
  /** Root directory of instances (the instance lives in `<dir>/<instanceId>`). */
  dir: string;
  instanceId: string;
  /** Bind host; default server_config.host (0.0.0.0). */
  host?: string;
  /** Bind port; default server_config.port (4318). 0 picks a free port. */
  port?: number;
  options?: PartialOptions;
  /** Install SIGTERM/SIGINT handlers that shut down gracefully and exit the process. Default true. */
  handleSignals?: boolean;
  /** fastify's logger setting. Default: info level to stdout (log-stream.ts where it is a file). */
  log?: FastifyServerOptions['logger'];
}

export interface RunningServer {
  app: FastifyInstance;
  logger: Logger;
  /** e.g. http://127.0.0.1:4318 */
  url: string;
  port: number;
  /** Stops accepting, waits for requests in flight, then stops the logger with flush 'auto'. */
  close(): Promise<void>;
}

export async function runServer(o: RunServerOptions): Promise<RunningServer> {
  // A read the memory limit cannot hold then kills its own process, not the server (query.ts).
  let memoryLimitOption: number | null = null;
  runReadsInProcesses(() => memoryLimit(memoryLimitOption).bytes);
  // The logger's own lines (writes failing, log replay) go to the server's log once it exists.
  let appLog: FastifyBaseLogger | null = null;
  const logger = await Logger.open({
    instanceId: o.instanceId,
    instanceDir: o.dir,
    // The server owns SIGTERM/SIGINT: it stops accepting and finishes requests before the logger stops.
    handleSignals: false,
    log: (level, message) =>
      appLog ? appLog[level](message) : console.error(`otelake ${level}: ${message}`),
    ...(o.options === undefined ? {} : { options: o.options }),
  });
  memoryLimitOption = logger.options.server_config.memory_limit_bytes;
  const host = o.host ?? logger.options.server_config.host;
  const port = o.port ?? logger.options.server_config.port;

  let app: FastifyInstance;
  try {
    const stream = o.log === undefined ? droppingLogStream() : null;
    app = await buildServer(logger, { log: o.log ?? { level: 'info', ...(stream ? { stream } : {}) } });
    appLog = app.log;
    await app.listen({ host, port });
  } catch (err) {
    await logger.stop({ flush: 'auto' });
    throw err;
  }
  const address = app.server.address();
  const boundPort = typeof address === 'object' && address !== null ? address.port : port;
  const url = `http://${host.includes(':') ? `[${host}]` : host}:${boundPort}`;
  app.log.info(
    `otelake ${VERSION} listening on ${url} (instance ${logger.layout.instanceId} in ${logger.layout.root})`,
  );
  if (authOn(new TokenFile(logger.layout.tokensFile), logger.options.server_config.require_auth))
    app.log.info('authentication on: requests need a token (Authorization: Bearer)');
  else if (!isLoopback(host)) {
    app.log.warn(
      `listening on ${host}, beyond loopback, without authentication: anyone who can reach port ${boundPort} ` +
        "can write and read telemetry. Create a token ('otelake token create'), bind to 127.0.0.1 (--host), " +
        'or put the server behind an authenticating proxy.',
    );
  } else app.log.info("authentication off (the instance has no token; 'otelake token create' makes one)");

  let closing: Promise<void> | null = null;
  const close = (): Promise<void> => {
    closing ??= (async () => {
      try {
        await app.close();
      } finally {
        await logger.stop({ flush: 'auto' });
        await closeReadWorkers();
      }
    })();
    return closing;
  };

  if (o.handleSignals !== false) {
    const onSignal = (signal: NodeJS.Signals): void => {
      if (closing !== null) {
        app.log.warn(`${signal} again: exiting without waiting for the flush`);
        process.exit(1);
      }
      app.log.info(`${signal}: stopping; finishing requests in flight and flushing the pipeline`);
      close().then(
        () => {
          logStopped(app.log, logger);
          process.exit(0);
        },
        (err: unknown) => {
          app.log.error({ err }, 'shutdown failed');
          process.exit(1);
        },
      );
    };
    process.on('SIGTERM', onSignal);
    process.on('SIGINT', onSignal);
  }

  return { app, logger, url, port: boundPort, close };
}

/**
 * The last line of a stop: "stopped cleanly", or, when the flush gave up on rows whose writes kept
 * failing (the logger has said why), how many there are and where they are.
 */
export function logStopped(log: FastifyBaseLogger, logger: Logger): void {
  const rows = logger.unwrittenAtStop;
  if (rows === 0) log.info('stopped cleanly');
  else if (logger.options.durability === 'memory')
    log.error(`stopped; ${rows} accepted rows were not written and are lost`);
  else
    log.warn(
      `stopped; ${rows} accepted rows are not written yet: the write-ahead log keeps them for the next start`,
    );
}
