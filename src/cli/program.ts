// The command tree of `otelake`: commands, flags, defaults and help texts exactly as in the
// specification. Each command's work lives in its own module, loaded only when it runs, so that
// `otelake status` does not pay for loading the storage engine.

import { Command, Option } from 'commander';
import { STORAGES } from '../read/filters.ts';
import { TABLE_NAMES } from '../schema/tables.ts';
import { DEFAULT_DIR, DEFAULT_INSTANCE_ID } from '../storage/layout.ts';
import { VERSION } from '../version.ts';
import {
  collectColumns,
  collectScopes,
  parseDay,
  parseDir,
  parseHost,
  parseInstanceId,
  parsePort,
  parsePositiveInt,
  parseProjectId,
  parseSeconds,
  parseTimeBoundFlag,
  parseTokenName,
} from './args.ts';
import type { InstanceFlags, ShipFlags, StartFlags, StatusFlags, StopFlags, ViewFlags } from './flags.ts';
import type { TokenCreateFlags } from './token.ts';

function instanceOptions(cmd: Command, what: string): Command {
  return cmd
    .option(
      '-I, --instance-id <id>',
      `instance ${what} (folder name under --dir)`,
      parseInstanceId,
      DEFAULT_INSTANCE_ID,
    )
    .option('-D, --dir <path>', 'root directory of instances', parseDir, DEFAULT_DIR);
}

export function buildProgram(): Command {
  const program = new Command('otelake')
    .description('OpenTelemetry (OTLP/HTTP) ingestion into Delta Lake tables')
    .version(VERSION, '-V, --version', 'print the version')
    .helpOption('-h, --help', 'show help')
    .helpCommand(false)
    .exitOverride()
    .showHelpAfterError('(run with --help for usage)');

  instanceOptions(program.command('init'), 'to create')
    .description('create the instance layout and a baseline configs/options.json (keeps existing options)')
    .action(async (flags: InstanceFlags) => (await import('./init.ts')).initCommand(flags));

  instanceOptions(program.command('start'), 'to serve')
    .description('start the OTLP/HTTP server (in the background with a pidfile, unless --foreground)')
    .option('-H, --host <host>', 'bind host (default: server_config.host, 0.0.0.0)', parseHost)
    .option('-P, --port <port>', 'bind port (default: server_config.port, 4318)', parsePort)
    .option('-R, --reload', 'restart the server when its code changes (only with --foreground)', false)
    .option('-F, --foreground', 'run in this terminal instead of in the background', false)
    .addOption(new Option('--no-pidfile', 'the supervising process owns the pidfile').hideHelp())
    .action(async (flags: StartFlags) => (await import('./start.ts')).startCommand(flags));

  instanceOptions(program.command('stop'), 'to stop')
    .description('stop the background server of an instance (graceful flush, then exit)')
    .option('-F, --force', 'kill the server if it does not stop gracefully in time', false)
    .action(async (flags: StopFlags) => (await import('./stop.ts')).stopCommand(flags));

  instanceOptions(program.command('status'), 'whose server to probe')
    .description("show a running server's health: queue, accepted/rejected/dropped rows, writes")
    .option(
      '-H, --host <host>',
      "server to probe (default: where the instance's server listens, else 127.0.0.1)",
      parseHost,
    )
    .option('-P, --port <port>', "server port (default: the instance's server, else 4318)", parsePort)
    .option('-T, --timeout <seconds>', 'HTTP timeout in seconds', parseSeconds, 5.0)
    .action(async (flags: StatusFlags) => (await import('./status.ts')).statusCommand(flags));

  instanceOptions(program.command('view'), 'to read')
    .description('show the latest rows of a table (newest first by event_ts)')
    .addOption(
      new Option('-S, --storage <storage>', 'where to read: auto, local or s3')
        .choices(STORAGES)
        .default('auto'),
    )
    .option('-n, --rows <n>', 'number of latest rows to show', parsePositiveInt, 10)
    .addOption(
      new Option('-t, --table <table>', 'table to read (a picker is shown when omitted)').choices(
        TABLE_NAMES,
      ),
    )
    .option('-s, --select <column>', 'column to show (repeatable, or comma-separated)', collectColumns)
    .option('--date-from <YYYY-MM-DD>', 'first UTC day to read, inclusive', parseDay)
    .option('--date-to <YYYY-MM-DD>', 'last UTC day to read, inclusive', parseDay)
    .option(
      '--since <time>',
      'rows with event_ts at or after this time: RFC 3339 (2026-11-20T08:00:00Z), a UTC day, or a duration back from now (15m, 2h, 1d)',
      parseTimeBoundFlag,
    )
    .option(
      '--until <time>',
      'rows with event_ts before this time (same forms as --since)',
      parseTimeBoundFlag,
    )
    .option('-f, --follow', 'keep printing rows as they are committed, oldest first, until Ctrl-C', false)
    .action(async (flags: ViewFlags) => (await import('./view.ts')).viewCommand(flags));

  const token = program
    .command('token')
    .description(
      'access tokens: each bound to one project and scopes (ingest, read); auth is on once there is one',
    )
    .helpCommand(false);
  instanceOptions(token.command('create'), 'whose server accepts the token')
    .description('make a token and print it once (only its hash is stored, in configs/tokens.json)')
    .requiredOption('--project <id>', 'the project the token writes and reads', parseProjectId)
    .requiredOption('--scope <scopes>', 'what it may do: ingest, read, or ingest,read', collectScopes)
    .option('--name <name>', 'a label for `token list`', parseTokenName)
    .action(async (flags: TokenCreateFlags) => (await import('./token.ts')).tokenCreateCommand(flags));
  instanceOptions(token.command('list'), 'whose tokens to list')
    .description('list the tokens (id, name, project, scopes, state; never a secret)')
    .action(async (flags: InstanceFlags) => (await import('./token.ts')).tokenListCommand(flags));
  instanceOptions(token.command('revoke'), 'of the token')
    .description('revoke a token by id; a running server refuses it from its next request')
    .argument('<id>', 'the token id shown by `token create` and `token list`')
    .action(async (id: string, flags: InstanceFlags) =>
      (await import('./token.ts')).tokenRevokeCommand(flags, id),
    );

  instanceOptions(program.command('ship'), 'to ship')
    .description('seal, upload to S3, verify and clean finished days now (the server must not be running)')
    .option('--day <YYYY-MM-DD>', 'the finished UTC day to ship', parseDay)
    .option('--all', 'every finished day not shipped yet, oldest first', false)
    .action(async (flags: ShipFlags) => (await import('./ship.ts')).shipCommand(flags));
  instanceOptions(program.command('check'), 'to check')
    .description(
      'validate every table of an instance (log, checkpoints, data files) and say how to repair damage',
    )
    .action(async (flags: InstanceFlags) => (await import('./check.ts')).checkCommand(flags));

  return program;
}
