// Delta log actions as they appear in commit files and checkpoints, and the log's file names.

export interface ProtocolAction {
  minReaderVersion: number;
  minWriterVersion: number;
}

export interface MetadataAction {
  id: string;
  name?: string | null;
  description?: string | null;
  format: { provider: string; options: Record<string, string> };
  schemaString: string;
  partitionColumns: string[];
  configuration: Record<string, string>;
  createdTime?: number | null;
}

export interface AddAction {
  /** URI-encoded path relative to the table root. */
  path: string;
  partitionValues: Record<string, string | null>;
  size: number;
  modificationTime: number;
  dataChange: boolean;
  stats?: string | null;
  tags?: Record<string, string> | null;
}

export interface RemoveAction {
  path: string;
  deletionTimestamp?: number | null;
  dataChange: boolean;
  extendedFileMetadata?: boolean | null;
  partitionValues?: Record<string, string | null> | null;
  size?: number | null;
}

export interface TxnAction {
  appId: string;
  version: number;
  lastUpdated?: number | null;
}

export type CommitInfo = Record<string, unknown>;

/** One line of a commit file: exactly one of these keys is set. */
export interface Action {
  protocol?: ProtocolAction;
  metaData?: MetadataAction;
  add?: AddAction;
  remove?: RemoveAction;
  txn?: TxnAction;
  commitInfo?: CommitInfo;
}

export const LOG_DIR = '_delta_log';
export const LAST_CHECKPOINT = '_last_checkpoint';

const COMMIT_NAME = /^(\d{20})\.json$/;
const CHECKPOINT_NAME = /^(\d{20})\.checkpoint\.parquet$/;
/** Temporary files of this writer inside `_delta_log`; readers ignore them by name. */
export const TEMP_PREFIXES = ['_commit_', '_checkpoint_', '_last_checkpoint_'] as const;

const pad20 = (v: number): string => String(v).padStart(20, '0');

export const commitFileName = (version: number): string => `${pad20(version)}.json`;
export const checkpointFileName = (version: number): string => `${pad20(version)}.checkpoint.parquet`;

export function parseCommitVersion(name: string): number | null {
  const m = COMMIT_NAME.exec(name);
  return m ? Number(m[1]) : null;
}

export function parseCheckpointVersion(name: string): number | null {
  const m = CHECKPOINT_NAME.exec(name);
  return m ? Number(m[1]) : null;
}

/** A commit file's content: one JSON action per line, ending with a newline. */
export function commitContent(lines: readonly string[]): string {
  return `${lines.join('\n')}\n`;
}

export function parseCommit(text: string, version: number): Action[] {
  const out: Action[] = [];
  for (const line of text.split('\n')) {
    if (line.trim() === '') continue;
    try {
      out.push(JSON.parse(line) as Action);
    } catch (err) {
      throw new Error(`corrupt Delta commit ${version}: ${(err as Error).message}`);
    }
  }
  return out;
}

/** Parses `interval <n> <unit>` durations of Delta table properties into milliseconds. */
export function parseIntervalMs(value: string | undefined, fallbackMs: number): number {
  if (!value) return fallbackMs;
  const m = /^\s*interval\s+(\d+)\s+(\w+?)s?\s*$/i.exec(value);
  if (!m) return fallbackMs;
  const units: Record<string, number> = {
    millisecond: 1,
    second: 1000,
    minute: 60_000,
    hour: 3_600_000,
    day: 86_400_000,
    week: 604_800_000,
  };
  const unit = units[m[2]!.toLowerCase()];
  return unit === undefined ? fallbackMs : Number(m[1]) * unit;
}

/** Default `delta.deletedFileRetentionDuration`: tombstones younger than this stay in checkpoints. */
export const DEFAULT_TOMBSTONE_RETENTION_MS = 7 * 86_400_000;

/**
 * `delta.deletedFileRetentionDuration` of the tables this engine creates. In-day compaction
 * removes a busy table's files all day long, and each tombstone stays in memory and in every
 * checkpoint for the retention: with the protocol's week that grows with the day (at full load
 * ~900,000 by its end, ~310 MiB of the main thread's heap, rewritten every 100 commits). A day's
 * files are only read at their latest version, and the seal vacuums with zero retention; an hour
 * still covers any scan that started before a compaction.
 */
export const CREATED_TOMBSTONE_RETENTION = 'interval 60 minutes';

/** Default `delta.logRetentionDuration`: log entries older than this may be cleaned up. */
export const DEFAULT_LOG_RETENTION_MS = 30 * 86_400_000;

/**
 * `delta.logRetentionDuration` of the tables this engine creates, as their tombstones': with the
 * protocol's 30 days nothing of a day's log went before its seal, and a busy table's `_delta_log`
 * grew by a commit a second or more all day (~9,500 entries in 30 minutes of a compacting table):
 * every checkpoint, and every reader opening the table, lists the whole folder. The commits after
 * the newest checkpoint an hour old stay, so versions of the last hour can still be read.
 */
export const CREATED_LOG_RETENTION = 'interval 60 minutes';
