// Parsers of flag values. Each throws commander's InvalidArgumentError, which commander turns into
// "error: option '...' argument '...' is invalid. <reason>" and the CLI into exit code 2.

import { InvalidArgumentError } from 'commander';
import { nowUs, parseTimeBound, TIME_BOUND_FORMATS } from '../read/window.ts';
import { isValidProjectId, PROJECT_ID_RULE } from '../schema/project.ts';
import { validateDay, validateDir, validateInstanceId } from '../storage/layout.ts';
import { isValidHost, MAX_WAIT_S } from '../storage/options.ts';
import { type TokenScope, validateScopes, validateTokenName } from '../storage/tokens.ts';

export function parsePort(value: string): number {
  const n = Number(value);
  if (!/^\d+$/.test(value.trim()) || !Number.isInteger(n) || n < 1 || n > 65535) {
    throw new InvalidArgumentError('Expected a port number from 1 to 65535.');
  }
  return n;
}

export function parsePositiveInt(value: string): number {
  const n = Number(value);
  if (!/^\d+$/.test(value.trim()) || !Number.isSafeInteger(n) || n < 1) {
    throw new InvalidArgumentError('Expected a positive integer.');
  }
  return n;
}

export function parseSeconds(value: string): number {
  const n = Number(value);
  if (value.trim() === '' || !Number.isFinite(n) || n <= 0 || n > MAX_WAIT_S) {
    throw new InvalidArgumentError(`Expected a number of seconds greater than 0, at most ${MAX_WAIT_S}.`);
  }
  return n;
}

export function parseDay(value: string): string {
  try {
    return validateDay(value);
  } catch {
    throw new InvalidArgumentError('Expected a real UTC day as YYYY-MM-DD.');
  }
}

/** An event-time bound (`--since`, `--until`): checked here, resolved against now by the read. */
export function parseTimeBoundFlag(value: string): string {
  try {
    parseTimeBound('value', value, nowUs());
  } catch {
    throw new InvalidArgumentError(`Expected ${TIME_BOUND_FORMATS}.`);
  }
  return value;
}

export function parseInstanceId(value: string): string {
  try {
    return validateInstanceId(value);
  } catch {
    throw new InvalidArgumentError(
      "Use 1-128 letters, digits, '.', '_' or '-', starting with a letter or digit.",
    );
  }
}

export function parseDir(value: string): string {
  try {
    return validateDir(value);
  } catch (err) {
    throw new InvalidArgumentError(`${(err as Error).message}.`);
  }
}

export function parseProjectId(value: string): string {
  if (!isValidProjectId(value)) throw new InvalidArgumentError(`Use ${PROJECT_ID_RULE}.`);
  return value;
}

/** `--scope ingest,read` (or the flag repeated). */
export function collectScopes(value: string, previous: TokenScope[] | undefined): TokenScope[] {
  try {
    return validateScopes([...(previous ?? []), ...value.split(',').map((s) => s.trim())]);
  } catch (err) {
    throw new InvalidArgumentError(`${(err as Error).message}.`);
  }
}

export function parseTokenName(value: string): string {
  try {
    return validateTokenName(value);
  } catch {
    throw new InvalidArgumentError('Use 1-64 printable ASCII characters.');
  }
}

export function parseHost(value: string): string {
  const host = value.trim();
  if (!isValidHost(host)) throw new InvalidArgumentError('Expected a host name or IP address (no port).');
  return host;
}

/** `--select` is repeatable; a comma-separated list in one value is accepted too. */
export function collectColumns(value: string, previous: string[] | undefined): string[] {
  const names = value
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s !== '');
  if (names.length === 0) throw new InvalidArgumentError('Expected a column name.');
  return [...(previous ?? []), ...names];
}
