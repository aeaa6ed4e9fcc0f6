// Errors the CLI reports as one line on stderr, without a stack trace: a user mistake (exit code 2)
// or a failure the user can act on (exit code 1 unless told otherwise).

/** A mistake in how the command was called: bad flag value, unknown table, invalid day... */
export class UsageError extends Error {
  readonly exitCode = 2;
  override name = 'UsageError';
}

/** A failure that is not a bug: server unreachable, instance already running, no pidfile... */
export class CliError extends Error {
  readonly exitCode: number;
  override name = 'CliError';
  constructor(message: string, exitCode = 1) {
    super(message);
    this.exitCode = exitCode;
  }
}
