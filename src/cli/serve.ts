// The server in this process (`otelake start --foreground`): runs until SIGINT, SIGTERM or SIGHUP
// (StopSignals, which the caller made before claiming the pidfile), then stops accepting, finishes
// requests in flight and flushes the pipeline before returning, so that the caller removes the
// pidfile only once everything is written.

import { resolve } from 'node:path';
import type { InstanceLayout } from '../storage/layout.ts';
import { OptionsFileError } from '../storage/options.ts';
import { InstanceInUseError } from '../storage/process-lock.ts';
import { bindError } from './bind.ts';
import { CliError } from './errors.ts';
import type { BoundStartFlags } from './flags.ts';
import type { StopSignals } from './stop-signals.ts';

/** On a terminal, one readable line per event (time, level, message); elsewhere JSON lines. */
async function terminalLog(): Promise<{ level: string; stream: NodeJS.WritableStream }> {
  const { default: pretty } = await import('pino-pretty');
  return {
    level: 'info',
    stream: pretty({
      colorize: true,
      sync: true,
      translateTime: 'SYS:HH:MM:ss.l',
      // Said in the message already (the refusal fields are for JSON consumers).
      ignore: 'pid,hostname,reqId,refusal,refusals_left_out',
    }),
  };
}

export interface ServeHooks {
  /** Once the server listens, with the port it bound (flags.port, or the one picked for 0). */
  onListening?: (port: number) => Promise<void>;
}

export async function serveUntilStopped(
  flags: BoundStartFlags,
  layout: InstanceLayout,
  signals: StopSignals,
  hooks: ServeHooks = {},
): Promise<void> {
  const { logStopped, runServer } = await import('../server/index.ts');
  let running: Awaited<ReturnType<typeof runServer>>;
  try {
    running = await runServer({
      dir: resolve(flags.dir),
      instanceId: layout.instanceId,
      host: flags.host,
      port: flags.port,
      // Our own handlers: the pidfile must outlive the flush, and the server must not exit for us.
      handleSignals: false,
      ...(process.stdout.isTTY ? { log: await terminalLog() } : {}),
    });
  } catch (err) {
    const bind = bindError(err, flags.host, flags.port);
    if (bind) throw bind;
    // Invalid saved options and the like, or a program using the library writing the instance:
    // the message says what to fix.
    if (err instanceof TypeError || err instanceof OptionsFileError || err instanceof InstanceInUseError)
      throw new CliError(err.message);
    throw err;
  }

  await hooks.onListening?.(running.port);
  await new Promise<void>((done, fail) => {
    let stopping = false;
    const onSignal = (signal: NodeJS.Signals): void => {
      if (stopping) {
        running.app.log.warn(`${signal} again: exiting without waiting for the flush`);
        signals.exitNow();
      }
      stopping = true;
      running.app.log.info(`${signal}: stopping; finishing requests in flight and flushing the pipeline`);
      running.close().then(() => {
        logStopped(running.app.log, running.logger);
        done();
      }, fail);
    };
    signals.handle(onSignal);
  });
}
