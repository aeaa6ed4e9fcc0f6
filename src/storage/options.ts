// Logger options: the specification's keys, their defaults, validation, and persistence in
// `configs/options.json`. A logger created without options reloads and merges the saved ones.

import { mkdir, open, rename, rm } from 'node:fs/promises';
import { isIP, isIPv6 } from 'node:net';
import { totalmem } from 'node:os';
import { dirname } from 'node:path';
import type { DeltaOptions } from '../delta/table.ts';
import { isValidProjectId, PROJECT_ID_RULE } from '../schema/project.ts';
import { readTextIfExists } from './files.ts';

export type DropPolicy = 'block' | 'drop_newest' | 'drop_oldest';
/** "wal": rows are durable in the write-ahead log before they are acknowledged; "memory": not. */
export type Durability = 'wal' | 'memory';
export const DURABILITIES: readonly Durability[] = ['wal', 'memory'];
export const DROP_POLICIES: readonly DropPolicy[] = ['block', 'drop_newest', 'drop_oldest'];

export interface ProducerConfig {
  /** Capacity of the in-memory queue, in rows. */
  max_queue_size: number;
  drop_policy: DropPolicy;
  validate_required: boolean;
  validate_types: boolean;
  normalize_service_name: boolean;
  default_service_name: string;
  /** With `block`: how long a producer may wait for room before its rows are refused (queue_full). */
  block_timeout_s: number;
  /**
   * Share of max_queue_size one project may hold (rows waiting for room, reserved or queued),
   * 0 < share <= 1; beyond it the project's requests are refused at once (HTTP 429). 1: no limit.
   */
  project_queue_share: number;
}

export interface AggregatorConfig {
  /** Seconds the oldest row of a batch may wait in memory before the batch is written. */
  max_age_s: number;
  /** Under light load, a batch smaller than this waits (at most max_age_s) for more rows. */
  min_batch_rows: number;
  max_batch_rows: number;
  /**
   * Rows held between the queue and the tables (batches building, waiting for the writer or being
   * written) at most, and at least max_batch_rows; beyond it the queue fills and the drop policy
   * applies.
   */
  max_pending_rows: number;
  /** Keep batch column types stable (coerce every value to its column's type). */
  strict_df: boolean;
}

export interface StorageConfig {
  /** A checkpoint is written after every N commits. */
  checkpoint_interval: number;
  /** In-day compaction merges this many small files of a similar size into one. */
  compact_min_files: number;
  /**
   * Files with fewer rows than this count as small; small files of a similar size holding this
   * many rows together are merged.
   */
  compact_small_file_rows: number;
  /** zstd level of data files. */
  zstd_level: number;
}

/** The Delta table options a storage_config stands for. */
export function deltaOptions(s: StorageConfig): DeltaOptions {
  return {
    checkpointInterval: s.checkpoint_interval,
    zstdLevel: s.zstd_level,
    autoCompact: { minFiles: s.compact_min_files, smallFileRows: s.compact_small_file_rows },
  };
}

/** The memory the process plans for, and where that figure comes from. */
export interface MemoryLimit {
  bytes: number;
  from: 'server_config.memory_limit_bytes' | "the cgroup's" | "the machine's";
}

/**
 * The memory the process plans for (server_config.memory_limit_bytes): the configured bytes, else
 * the limit of its cgroup (libuv reads cgroup v1 and v2) where that is below the machine's memory,
 * else the machine's memory.
 */
export function memoryLimit(configured: number | null): MemoryLimit {
  if (configured !== null) return { bytes: configured, from: 'server_config.memory_limit_bytes' };
  const machine = totalmem();
  const cgroup = process.constrainedMemory();
  return cgroup > 0 && cgroup < machine
    ? { bytes: cgroup, from: "the cgroup's" }
    : { bytes: machine, from: "the machine's" };
}

export interface ServerConfig {
  host: string;
  port: number;
  /** Largest accepted request body after decompression, in bytes. */
  body_limit_bytes: number;
  /**
   * Memory the server plans for, in bytes: the defaults of max_body_bytes_in_flight and
   * decode_workers, and how the seal compacts, follow it. null: the memory limit of the process's
   * cgroup (a container's limit), else the machine's memory.
   */
  memory_limit_bytes: number | null;
  /**
   * Bytes of request bodies held at once, from the first byte read until the request is answered
   * (as sent while read and decoded, then as decoded rows): a new body beyond it gets 503 +
   * Retry-After. A body alone is always let in. null: an eighth of what the memory limit leaves
   * beyond 128 MiB, at most 256 MiB.
   */
  max_body_bytes_in_flight: number | null;
  /** Seconds from a request's first byte until its headers must be in (else 408, connection closed). */
  header_timeout_s: number;
  /** Seconds from a request's first byte until its whole body must be in (else 408, connection closed). */
  request_timeout_s: number;
  /** Seconds an idle keep-alive connection stays open waiting for the next request. */
  idle_timeout_s: number;
  /**
   * Client connections open at once; a connection beyond them is closed as soon as it is accepted.
   * null: what the process's open-file limit leaves beside a reserve for the tables, the log and
   * reads (server/limits.ts), no limit where that is unknown.
   */
  max_connections: number | null;
  /** Project of requests with neither an X-Project-Id header nor a project.id resource attribute. */
  default_project_id: string;
  /**
   * Threads that decode, map and validate request bodies: null for one per core, at most one per
   * 256 MiB of the memory limit; 0 to do it on the event loop.
   */
  decode_workers: number | null;
  /**
   * Reads answered at once by /api/*; more get 503 with Retry-After. null: 4, or 1 with a memory
   * limit below 1 GiB.
   */
  max_concurrent_reads: number | null;
  /** Largest /api/* answer: it ends early (saying so) before it would exceed this. */
  read_response_limit_bytes: number;
  /** String values longer than this are cut to this many characters in /api/* answers. */
  read_field_limit_chars: number;
  /**
   * Authentication on even without a token in configs/tokens.json (every request but /healthz is
   * then refused until one is made). Without it, authentication is on once the instance has a token.
   */
  require_auth: boolean;
  /** Rows per second one project may ingest (over about a second); beyond it 429. null: no limit. */
  project_max_rows_per_s: number | null;
  /** Attributes an item (span, event, link, log record), resource or scope keeps; the others are dropped and counted. */
  attribute_count_limit: number;
  /** Characters an attribute's string value keeps (also inside arrays and maps); longer ones are cut. */
  attribute_value_length_limit: number;
  /**
   * Web origins whose pages may send OTLP to /v1/* (CORS, for browser SDKs): `https://app.example.com`,
   * one `*` within an origin (`https://*.example.com`), or `*` for any. Empty: CORS off.
   */
  cors_allowed_origins: string[];
  /**
   * Request headers such pages may send besides Content-Type, Content-Encoding, Authorization and
   * X-Project-Id; `*` for any.
   */
  cors_allowed_headers: string[];
  /** Seconds a browser may keep a preflight's answer (Access-Control-Max-Age). */
  cors_max_age_s: number;
}

export interface LoggerOptions {
  durability: Durability;
  auto_start: boolean;
  install_signal_handlers: boolean;
  atexit_hook: boolean;
  shipper_enabled: boolean;
  producer_config: ProducerConfig;
  aggregator_config: AggregatorConfig;
  storage_config: StorageConfig;
  server_config: ServerConfig;
}

/** Options as a caller may give them: every group and field optional. */
export type PartialOptions = Partial<{
  [K in keyof LoggerOptions]: LoggerOptions[K] extends object ? Partial<LoggerOptions[K]> : LoggerOptions[K];
}>;

export function defaultOptions(): LoggerOptions {
  return {
    durability: 'wal',
    auto_start: true,
    install_signal_handlers: true,
    atexit_hook: true,
    shipper_enabled: true,
    producer_config: {
      max_queue_size: 2048,
      drop_policy: 'block',
      validate_required: true,
      validate_types: true,
      normalize_service_name: true,
      default_service_name: 'unknown_service',
      block_timeout_s: 5,
      project_queue_share: 1,
    },
    aggregator_config: {
      max_age_s: 0.5,
      min_batch_rows: 100,
      max_batch_rows: 1000,
      max_pending_rows: 65_536,
      strict_df: true,
    },
    storage_config: {
      checkpoint_interval: 100,
      compact_min_files: 64,
      compact_small_file_rows: 100_000,
      zstd_level: 3,
    },
    server_config: {
      host: '0.0.0.0',
      port: 4318,
      body_limit_bytes: 64 * 1024 * 1024,
      memory_limit_bytes: null,
      max_body_bytes_in_flight: null,
      header_timeout_s: 10,
      request_timeout_s: 60,
      // Longer than the 60 s idle timeout of common load balancers and clients: they close first.
      idle_timeout_s: 72,
      max_connections: null,
      default_project_id: 'default',
      decode_workers: null,
      max_concurrent_reads: null,
      read_response_limit_bytes: 64 * 1024 * 1024,
      read_field_limit_chars: 1024 * 1024,
      require_auth: false,
      project_max_rows_per_s: null,
      attribute_count_limit: 1024,
      attribute_value_length_limit: 65_536,
      cors_allowed_origins: [],
      cors_allowed_headers: [],
      // Chromium's own limit; a preflight cached longer is asked again anyway.
      cors_max_age_s: 7200,
    },
  };
}

const GROUPS = ['producer_config', 'aggregator_config', 'storage_config', 'server_config'] as const;

/** Overlays `over` onto `base` group by group; unknown keys are an error, not silently kept. */
export function mergeOptions(base: LoggerOptions, over: PartialOptions | undefined): LoggerOptions {
  const out = structuredClone(base);
  if (over === undefined) return out;
  // null, false, 0 or "" (a whole options.json holding one) are not options either.
  if (typeof over !== 'object' || over === null || Array.isArray(over))
    throw new TypeError('options must be an object');
  for (const [key, value] of Object.entries(over)) {
    if (value === undefined) continue;
    // Own keys only: `in` would take an object's built-ins (toString, constructor) for options.
    if (!Object.hasOwn(out, key)) throw new TypeError(`unknown option "${key}"`);
    if ((GROUPS as readonly string[]).includes(key)) {
      if (typeof value !== 'object' || value === null || Array.isArray(value)) {
        throw new TypeError(`option "${key}" must be an object`);
      }
      const group = out[key as (typeof GROUPS)[number]] as unknown as Record<string, unknown>;
      for (const [k, v] of Object.entries(value)) {
        if (v === undefined) continue;
        if (!Object.hasOwn(group, k)) throw new TypeError(`unknown option "${key}.${k}"`);
        group[k] = v;
      }
    } else {
      (out as unknown as Record<string, unknown>)[key] = value;
    }
  }
  validateOptions(out);
  return out;
}

function check(cond: boolean, message: string): void {
  if (!cond) throw new TypeError(`invalid option ${message}`);
}

const isPosInt = (v: unknown): boolean => Number.isSafeInteger(v) && (v as number) > 0;

/**
 * A finite number within [min, max] (JSON's 1e400 reads as Infinity, which options.json would save
 * as null, refused at the next start).
 */
const isNumberIn = (v: unknown, min: number, max: number): boolean =>
  typeof v === 'number' && Number.isFinite(v) && v >= min && v <= max;

/** A DNS name's labels (underscores allowed, as some internal names have them), at most 253 characters. */
const HOST_NAME =
  /^(?=.{1,253}$)[A-Za-z0-9_](?:[A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?(?:\.[A-Za-z0-9_](?:[A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?)*\.?$/;

/** A host to bind or reach: a DNS name, an IPv4 address, or an IPv6 address (bracketed or not). */
export function isValidHost(host: unknown): host is string {
  if (typeof host !== 'string') return false;
  const bare = host.startsWith('[') && host.endsWith(']') ? host.slice(1, -1) : host;
  if (bare !== host) return isIPv6(bare);
  return isIP(host) !== 0 || HOST_NAME.test(host);
}

/** The longest wait a timer takes (2^31 - 1 ms, ~24.8 days); a longer one would fire at once. */
export const MAX_WAIT_S = 2_147_483;

/** Checks every option's type and range, a section at a time: a TypeError names the first one wrong. */
export function validateOptions(o: LoggerOptions): void {
  check(DURABILITIES.includes(o.durability), `durability: expected one of ${DURABILITIES.join(', ')}`);
  for (const k of ['auto_start', 'install_signal_handlers', 'atexit_hook', 'shipper_enabled'] as const) {
    check(typeof o[k] === 'boolean', `${k}: expected a boolean`);
  }
  validateProducer(o.producer_config);
  validateAggregator(o.aggregator_config);
  validateStorage(o.storage_config);
  validateServer(o.server_config);
}

function validateProducer(p: ProducerConfig): void {
  check(isPosInt(p.max_queue_size), 'producer_config.max_queue_size: expected a positive integer');
  check(
    DROP_POLICIES.includes(p.drop_policy),
    `producer_config.drop_policy: expected one of ${DROP_POLICIES.join(', ')}`,
  );
  for (const k of ['validate_required', 'validate_types', 'normalize_service_name'] as const) {
    check(typeof p[k] === 'boolean', `producer_config.${k}: expected a boolean`);
  }
  check(
    typeof p.default_service_name === 'string' && p.default_service_name.length > 0,
    'producer_config.default_service_name: expected a non-empty string',
  );
  check(
    isNumberIn(p.block_timeout_s, 0, MAX_WAIT_S),
    `producer_config.block_timeout_s: expected 0 <= seconds <= ${MAX_WAIT_S}`,
  );
  check(
    typeof p.project_queue_share === 'number' && p.project_queue_share > 0 && p.project_queue_share <= 1,
    'producer_config.project_queue_share: expected a number > 0 and <= 1',
  );
}

function validateAggregator(a: AggregatorConfig): void {
  check(
    isNumberIn(a.max_age_s, Number.MIN_VALUE, MAX_WAIT_S),
    `aggregator_config.max_age_s: expected 0 < seconds <= ${MAX_WAIT_S}`,
  );
  check(isPosInt(a.min_batch_rows), 'aggregator_config.min_batch_rows: expected a positive integer');
  check(isPosInt(a.max_batch_rows), 'aggregator_config.max_batch_rows: expected a positive integer');
  check(
    a.min_batch_rows <= a.max_batch_rows,
    'aggregator_config.min_batch_rows: must not exceed max_batch_rows',
  );
  check(isPosInt(a.max_pending_rows), 'aggregator_config.max_pending_rows: expected a positive integer');
  check(typeof a.strict_df === 'boolean', 'aggregator_config.strict_df: expected a boolean');
}

function validateStorage(s: StorageConfig): void {
  check(isPosInt(s.checkpoint_interval), 'storage_config.checkpoint_interval: expected a positive integer');
  // A compaction merges files: one alone would be rewritten as itself.
  check(
    Number.isSafeInteger(s.compact_min_files) && s.compact_min_files >= 2,
    'storage_config.compact_min_files: expected an integer >= 2',
  );
  check(
    isPosInt(s.compact_small_file_rows),
    'storage_config.compact_small_file_rows: expected a positive integer',
  );
  check(isPosInt(s.zstd_level) && s.zstd_level <= 22, 'storage_config.zstd_level: expected an integer 1..22');
}

function validateServer(v: ServerConfig): void {
  check(
    isValidHost(v.host),
    `server_config.host ${JSON.stringify(v.host)}: expected a host name or IP address`,
  );
  check(Number.isInteger(v.port) && v.port >= 1 && v.port <= 65535, 'server_config.port: expected 1..65535');
  check(isPosInt(v.body_limit_bytes), 'server_config.body_limit_bytes: expected a positive integer');
  check(
    v.memory_limit_bytes === null || isPosInt(v.memory_limit_bytes),
    "server_config.memory_limit_bytes: expected null (the cgroup's limit or the machine's memory) or a positive integer",
  );
  check(
    v.max_body_bytes_in_flight === null || isPosInt(v.max_body_bytes_in_flight),
    'server_config.max_body_bytes_in_flight: expected null (from the memory limit) or a positive integer',
  );
  for (const k of ['header_timeout_s', 'request_timeout_s', 'idle_timeout_s'] as const) {
    check(
      typeof v[k] === 'number' && v[k] > 0 && v[k] <= 86_400,
      `server_config.${k}: expected 0 < seconds <= 86400`,
    );
  }
  check(
    v.header_timeout_s <= v.request_timeout_s,
    'server_config.header_timeout_s: must not exceed request_timeout_s',
  );
  check(
    v.max_connections === null || isPosInt(v.max_connections),
    'server_config.max_connections: expected null (from the open-file limit) or a positive integer',
  );
  check(
    isValidProjectId(v.default_project_id),
    `server_config.default_project_id ${JSON.stringify(v.default_project_id)}: use ${PROJECT_ID_RULE}`,
  );
  check(
    v.decode_workers === null || (Number.isInteger(v.decode_workers) && v.decode_workers >= 0),
    'server_config.decode_workers: expected null (one per core) or an integer >= 0',
  );
  check(
    v.max_concurrent_reads === null || isPosInt(v.max_concurrent_reads),
    'server_config.max_concurrent_reads: expected null (from the memory limit) or a positive integer',
  );
  check(
    Number.isSafeInteger(v.read_response_limit_bytes) && v.read_response_limit_bytes >= 4096,
    'server_config.read_response_limit_bytes: expected an integer >= 4096',
  );
  check(
    isPosInt(v.read_field_limit_chars),
    'server_config.read_field_limit_chars: expected a positive integer',
  );
  check(typeof v.require_auth === 'boolean', 'server_config.require_auth: expected a boolean');
  check(
    // Less than a row a second limits nothing a service sends; far less broke the header: 1e-300
    // answered `Retry-After: 1e+300`.
    v.project_max_rows_per_s === null || isNumberIn(v.project_max_rows_per_s, 1, Number.MAX_VALUE),
    'server_config.project_max_rows_per_s: expected null (no limit) or a number >= 1',
  );
  check(
    isPosInt(v.attribute_count_limit),
    'server_config.attribute_count_limit: expected a positive integer',
  );
  check(
    isPosInt(v.attribute_value_length_limit),
    'server_config.attribute_value_length_limit: expected a positive integer',
  );
  check(
    Array.isArray(v.cors_allowed_origins) && v.cors_allowed_origins.every(isCorsOrigin),
    'server_config.cors_allowed_origins: expected a list of origins (scheme://host[:port], at most one *), or "*"',
  );
  check(
    Array.isArray(v.cors_allowed_headers) &&
      v.cors_allowed_headers.every((h) => typeof h === 'string' && HEADER_NAME.test(h)),
    'server_config.cors_allowed_headers: expected a list of header names, or "*"',
  );
  check(
    Number.isSafeInteger(v.cors_max_age_s) && v.cors_max_age_s >= 0 && v.cors_max_age_s <= 86_400,
    'server_config.cors_max_age_s: expected an integer 0..86400',
  );
}

/** An HTTP header name (RFC 9110's token), which `*` also is. */
const HEADER_NAME = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;

/** `*`, or an origin as browsers send it (scheme://host[:port], no path) with at most one `*`. */
function isCorsOrigin(v: unknown): boolean {
  if (typeof v !== 'string') return false;
  if (v === '*') return true;
  return /^[A-Za-z][A-Za-z0-9+.-]*:\/\/[^\s/?#]+$/.test(v) && v.indexOf('*') === v.lastIndexOf('*');
}

/** options.json cannot be read or is not JSON; the message names the file. */
export class OptionsFileError extends Error {
  override name = 'OptionsFileError';
}

export async function loadSavedOptions(file: string): Promise<PartialOptions | undefined> {
  let text: string | undefined;
  try {
    text = await readTextIfExists(file);
  } catch (err) {
    // A folder on the way is a file: there is no options file (the command's mkdir says why).
    if ((err as NodeJS.ErrnoException).code === 'ENOTDIR') return undefined;
    // A directory or an unreadable file: named, as a broken file is (one line, no stack).
    throw new OptionsFileError(`cannot read ${file}: ${(err as Error).message}`);
  }
  if (text === undefined) return undefined;
  try {
    return JSON.parse(text) as PartialOptions;
  } catch (err) {
    // V8's message quotes the text around the error, newlines and all: kept to one line.
    throw new OptionsFileError(
      `${file} is not valid JSON: ${(err as Error).message.replace(/\s*\n\s*/g, ' ')}`,
    );
  }
}

/**
 * Writes the options atomically (temp file synced, then renamed), so a crash or a power loss never
 * leaves half a file; nothing is written when the file already holds them (every start saves them,
 * and a start on a full disk must not fail for it). A temp file is removed when writing fails.
 */
export async function saveOptions(file: string, options: LoggerOptions): Promise<void> {
  const text = JSON.stringify(options, null, 2) + '\n';
  if ((await readTextIfExists(file)) === text) return;
  await mkdir(dirname(file), { recursive: true });
  const tmp = `${file}.${process.pid}.tmp`;
  try {
    const fh = await open(tmp, 'w');
    try {
      await fh.writeFile(text);
      await fh.sync();
    } finally {
      await fh.close();
    }
    await rename(tmp, file);
  } catch (err) {
    await rm(tmp, { force: true });
    throw err;
  }
}

/** Saved options (if any) overlaid with the given ones, on top of the defaults. */
export async function resolveOptions(
  file: string,
  given: PartialOptions | undefined,
): Promise<LoggerOptions> {
  const saved = await loadSavedOptions(file);
  let fromSaved: LoggerOptions;
  try {
    fromSaved = mergeOptions(defaultOptions(), saved);
  } catch (err) {
    // Which file to mend: the saved options, not the ones a program gave.
    if (err instanceof TypeError) throw new TypeError(`${file}: ${err.message}`);
    throw err;
  }
  return mergeOptions(fromSaved, given);
}
