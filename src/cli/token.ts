// `otelake token create|list|revoke`: the access tokens of an instance (configs/tokens.json holds
// their hashes). A running server sees a change at its next request; no restart is needed.

import { relative } from 'node:path';
import { InstanceLayout } from '../storage/layout.ts';
import { createToken, readTokens, revokeToken, type TokenScope } from '../storage/tokens.ts';
import { CliError } from './errors.ts';
import type { InstanceFlags } from './flags.ts';
import { grid } from './render.ts';

export interface TokenCreateFlags extends InstanceFlags {
  project: string;
  scope: TokenScope[];
  name?: string;
}

function shown(file: string): string {
  return relative(process.cwd(), file) || file;
}

/** A tokens.json that cannot be read, or a held lock: a failure the user acts on, not a bug. */
function reported(err: unknown): never {
  if (err instanceof Error && typeof (err as NodeJS.ErrnoException).code !== 'string')
    throw new CliError(err.message);
  throw err;
}

/** Prints the new token alone on stdout (for `TOKEN=$(otelake token create ...)`), the rest on stderr. */
export async function tokenCreateCommand(flags: TokenCreateFlags): Promise<void> {
  const layout = new InstanceLayout(flags.dir, flags.instanceId);
  const { token, record } = await createToken(layout.tokensFile, {
    project: flags.project,
    scopes: flags.scope,
    name: flags.name ?? null,
  }).catch(reported);
  process.stdout.write(`${token}\n`);
  process.stderr.write(
    `created token ${record.id} for project '${record.project}' (${record.scopes.join(', ')}) ` +
      `in ${shown(layout.tokensFile)}.\n` +
      'It is shown only this once: only its hash is stored. Clients send it as ' +
      "'Authorization: Bearer <token>' (SDKs: OTEL_EXPORTER_OTLP_HEADERS='authorization=Bearer <token>').\n" +
      `Authentication is on for instance '${layout.instanceId}', also on a running server.\n`,
  );
}

export async function tokenListCommand(flags: InstanceFlags): Promise<void> {
  const layout = new InstanceLayout(flags.dir, flags.instanceId);
  const records = await readTokens(layout.tokensFile).catch(reported);
  if (records.length === 0) {
    process.stdout.write(
      `no tokens in ${shown(layout.tokensFile)}: authentication is off unless server_config.require_auth\n`,
    );
    return;
  }
  const rows = records.map((r) => [
    r.id,
    r.name ?? '',
    r.project,
    r.scopes.join(','),
    r.created_at,
    r.revoked_at === null ? 'active' : `revoked ${r.revoked_at}`,
  ]);
  const head = ['id', 'name', 'project', 'scopes', 'created', 'state'];
  process.stdout.write(`${grid(head, rows) ?? rows.map((r) => r.join('  ')).join('\n')}\n`);
}

export async function tokenRevokeCommand(flags: InstanceFlags, id: string): Promise<void> {
  const layout = new InstanceLayout(flags.dir, flags.instanceId);
  const result = await revokeToken(layout.tokensFile, id).catch(reported);
  if (result === null) {
    throw new CliError(
      `no token ${JSON.stringify(id)} in ${shown(layout.tokensFile)} ('otelake token list' shows them)`,
    );
  }
  const { record, already } = result;
  process.stdout.write(
    already
      ? `token ${record.id} was already revoked (${record.revoked_at})\n`
      : `revoked token ${record.id} (project '${record.project}'); a running server refuses it from its next request\n`,
  );
}
