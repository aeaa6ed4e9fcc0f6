// Entry point of the `otelake` command. Exit codes: 0 success, 1 failure, 2 usage error,
// 130 interrupted. User mistakes and expected failures print one line on stderr, never a stack.

import { CommanderError } from 'commander';
import { CliError, UsageError } from './errors.ts';
import { buildProgram } from './program.ts';

/** Runs the CLI with `argv` (without the node and script paths); resolves to the exit code. */
export async function runCli(argv: readonly string[]): Promise<number> {
  const program = buildProgram();
  try {
    await program.parseAsync(argv as string[], { from: 'user' });
    return typeof process.exitCode === 'number' ? process.exitCode : 0;
  } catch (err) {
    return reportError(err);
  }
}

function reportError(err: unknown): number {
  if (err instanceof CommanderError) {
    // commander has already printed the message (or the help / version).
    if (err.code === 'commander.helpDisplayed' || err.code === 'commander.version') return 0;
    return 2; // a usage error, or help shown because no command was given
  }
  if (err instanceof UsageError) {
    process.stderr.write(`error: ${err.message}\n(run with --help for usage)\n`);
    return err.exitCode;
  }
  if (err instanceof CliError) {
    process.stderr.write(`error: ${err.message}\n`);
    return err.exitCode;
  }
  if (err instanceof Error && err.name === 'ExitPromptError') {
    process.stderr.write('cancelled\n');
    return 130;
  }
  // The filesystem refused (a --dir that is a file, read-only, full...): the path says what to fix.
  const fsErr = err as NodeJS.ErrnoException;
  if (fsErr instanceof Error && typeof fsErr.code === 'string' && typeof fsErr.path === 'string') {
    const full = fsErr.code === 'ENOSPC' ? ' (the disk is full: free some space, then run it again)' : '';
    process.stderr.write(`error: cannot ${fsErr.syscall ?? 'use'} ${fsErr.path}: ${fsErr.code}${full}\n`);
    return 1;
  }
  // A bug or an unexpected failure: the stack helps whoever reports it.
  process.stderr.write(
    `otelake: unexpected error: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`,
  );
  return 1;
}

/** Runs the CLI on this process's arguments and exits with its code once output is flushed. */
export async function main(): Promise<void> {
  const code = await runCli(process.argv.slice(2));
  // Exit explicitly: an idle keep-alive socket or a finished prompt must not hold the process open.
  process.stdout.write('', () => process.stderr.write('', () => process.exit(code)));
}
