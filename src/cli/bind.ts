// The one message per way a server's address can fail to bind, for the port probe of `start` and
// for the server itself.

import { CliError } from './errors.ts';

/** A clear CliError for an error of binding host:port, or null when `err` is about something else. */
export function bindError(err: unknown, host: string, port: number): CliError | null {
  switch ((err as NodeJS.ErrnoException).code) {
    case 'EADDRINUSE':
      return new CliError(
        `port ${port} on ${host} is already in use (another server?); choose another with --port`,
      );
    case 'EACCES':
      return new CliError(`not allowed to bind port ${port} on ${host}`);
    case 'EADDRNOTAVAIL':
    case 'ENOTFOUND':
    case 'EAI_AGAIN':
      return new CliError(`cannot bind ${host}: no such local address`);
    default:
      return null;
  }
}
