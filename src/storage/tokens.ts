// Access tokens of an instance, in configs/tokens.json: for each token its id, name, project,
// scopes, times and the SHA-256 of the token, never the token itself. `otelake token` writes the
// file; the server re-reads it when it changes, so a new or revoked token counts at the next request.
//
// A token is `otelake_<id>_<secret>`: the prefix lets secret scanners recognize one, the id (12
// hex digits, also shown by `token list`) finds its entry, the secret is 32 random bytes
// (base64url). Its hash is a plain SHA-256: a slow password hash (scrypt, argon2) exists to make
// guessing low-entropy passwords from a stolen hash expensive, but 256 random bits cannot be
// guessed either way, and a fast hash keeps the check at about a microsecond per request. Hashes
// are compared in constant time.

import { hash, randomBytes, timingSafeEqual } from 'node:crypto';
import { readFileSync, statSync } from 'node:fs';
import { mkdir, open, rename, rm, stat, writeFile } from 'node:fs/promises';
import { dirname } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { isValidProjectId, PROJECT_ID_RULE } from '../schema/project.ts';
import { fsyncPath, readTextIfExists } from './files.ts';

export const TOKEN_SCOPES = ['ingest', 'read'] as const;
export type TokenScope = (typeof TOKEN_SCOPES)[number];

/** One token's entry in tokens.json. */
export interface TokenRecord {
  id: string;
  name: string | null;
  project: string;
  scopes: TokenScope[];
  /** `sha256:<hex>` of the whole token. */
  hash: string;
  created_at: string;
  /** When it was revoked; a revoked token is kept (auth stays on) but never accepted. */
  revoked_at: string | null;
}

const PREFIX = 'otelake_';
const TOKEN = /^otelake_([0-9a-f]{12})_[A-Za-z0-9_-]{43}$/;
const ID = /^[0-9a-f]{12}$/;
const HASH = /^sha256:[0-9a-f]{64}$/;
const NAME = /^[\x20-\x7e]{1,64}$/;

function sha256(token: string): Buffer {
  return hash('sha256', token, 'buffer');
}

export function validateScopes(scopes: readonly unknown[]): TokenScope[] {
  if (scopes.length === 0) throw new TypeError(`no scope: use one or more of ${TOKEN_SCOPES.join(', ')}`);
  for (const s of scopes) {
    if (!TOKEN_SCOPES.includes(s as TokenScope))
      throw new TypeError(`unknown scope ${JSON.stringify(s)}: use ${TOKEN_SCOPES.join(', ')}`);
  }
  return TOKEN_SCOPES.filter((s) => scopes.includes(s));
}

export function validateTokenName(name: unknown): string {
  if (typeof name !== 'string' || !NAME.test(name))
    throw new TypeError(`invalid token name ${JSON.stringify(name)}: use 1-64 printable ASCII characters`);
  return name;
}

/** Checks one entry of tokens.json; throws naming what is wrong. */
function checkRecord(r: unknown, i: number): TokenRecord {
  const bad = (what: string): never => {
    throw new TypeError(`token ${i + 1}: ${what}`);
  };
  if (typeof r !== 'object' || r === null || Array.isArray(r)) bad('not an object');
  const t = r as Record<string, unknown>;
  if (typeof t['id'] !== 'string' || !ID.test(t['id'])) bad('invalid id');
  if (t['name'] !== null) validateTokenName(t['name']);
  if (!isValidProjectId(t['project'])) bad(`invalid project: use ${PROJECT_ID_RULE}`);
  if (!Array.isArray(t['scopes'])) bad('scopes must be a list');
  validateScopes(t['scopes'] as unknown[]);
  if (typeof t['hash'] !== 'string' || !HASH.test(t['hash'])) bad('invalid hash');
  if (typeof t['created_at'] !== 'string') bad('invalid created_at');
  if (t['revoked_at'] !== null && typeof t['revoked_at'] !== 'string') bad('invalid revoked_at');
  return t as unknown as TokenRecord;
}

/** The entries of a tokens.json text; throws when it is not a valid one. */
export function parseTokens(text: string): TokenRecord[] {
  let doc: unknown;
  try {
    doc = JSON.parse(text);
  } catch (err) {
    throw new TypeError(`not valid JSON: ${(err as Error).message}`);
  }
  const list = (doc as { tokens?: unknown } | null)?.tokens;
  if (!Array.isArray(list)) throw new TypeError('expected {"tokens": [...]}');
  const records = list.map(checkRecord);
  if (new Set(records.map((r) => r.id)).size !== records.length)
    throw new TypeError('two tokens share an id');
  return records;
}

/** The tokens of a file (none when it does not exist). */
export async function readTokens(file: string): Promise<TokenRecord[]> {
  const text = await readTextIfExists(file);
  if (text === undefined) return [];
  try {
    return parseTokens(text);
  } catch (err) {
    throw new Error(`${file}: ${(err as Error).message}`);
  }
}

/** Runs `fn` holding `<file>.lock`, so that two token commands never lose each other's change. */
async function withLock<T>(file: string, fn: () => Promise<T>): Promise<T> {
  const lock = `${file}.lock`;
  await mkdir(dirname(file), { recursive: true });
  const deadline = Date.now() + 5000;
  for (;;) {
    try {
      await (await open(lock, 'wx')).close();
      break;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
      // A lock left by a command that died: a change takes milliseconds.
      const age = await stat(lock).then(
        (s) => Date.now() - s.mtimeMs,
        () => 0,
      );
      if (age > 30_000) await rm(lock, { force: true });
      else if (Date.now() > deadline)
        throw new Error(`${lock} is held by another otelake token command; remove it if none is running`);
      else await sleep(20);
    }
  }
  try {
    return await fn();
  } finally {
    await rm(lock, { force: true });
  }
}

/**
 * Writes the entries atomically and durably (temp file, sync, rename, sync of the directory): a
 * revocation must survive a crash. Readable by the owner only.
 */
async function writeTokens(file: string, records: readonly TokenRecord[]): Promise<void> {
  const tmp = `${file}.${process.pid}.tmp`;
  await writeFile(tmp, `${JSON.stringify({ tokens: records }, null, 2)}\n`, { mode: 0o600 });
  await fsyncPath(tmp);
  await rename(tmp, file);
  await fsyncPath(dirname(file));
}

export interface NewToken {
  project: string;
  scopes: readonly TokenScope[];
  name?: string | null;
}

/** Makes a token, stores its hash; the token itself is returned once and kept nowhere. */
export async function createToken(
  file: string,
  o: NewToken,
  now = new Date(),
): Promise<{ token: string; record: TokenRecord }> {
  if (!isValidProjectId(o.project))
    throw new TypeError(`invalid project ${JSON.stringify(o.project)}: use ${PROJECT_ID_RULE}`);
  const scopes = validateScopes(o.scopes);
  const name = o.name === undefined || o.name === null ? null : validateTokenName(o.name);
  return withLock(file, async () => {
    const records = await readTokens(file);
    let id: string;
    do id = randomBytes(6).toString('hex');
    while (records.some((r) => r.id === id));
    const token = `${PREFIX}${id}_${randomBytes(32).toString('base64url')}`;
    const record: TokenRecord = {
      id,
      name,
      project: o.project,
      scopes,
      hash: `sha256:${sha256(token).toString('hex')}`,
      created_at: now.toISOString(),
      revoked_at: null,
    };
    await writeTokens(file, [...records, record]);
    return { token, record };
  });
}

/** Revokes a token by id: its entry stays, marked; null when there is no such token. */
export async function revokeToken(
  file: string,
  id: string,
  now = new Date(),
): Promise<{ record: TokenRecord; already: boolean } | null> {
  return withLock(file, async () => {
    const records = await readTokens(file);
    const record = records.find((r) => r.id === id);
    if (!record) return null;
    if (record.revoked_at !== null) return { record, already: true };
    record.revoked_at = now.toISOString();
    await writeTokens(file, records);
    return { record, already: false };
  });
}

/** What a request presented as a token, checked against the instance's tokens. */
export class TokenSet {
  readonly records: readonly TokenRecord[];
  private readonly byId: Map<string, { record: TokenRecord; digest: Buffer }>;

  constructor(records: readonly TokenRecord[]) {
    this.records = records;
    this.byId = new Map(
      records
        .filter((r) => r.revoked_at === null)
        .map((r) => [r.id, { record: r, digest: Buffer.from(r.hash.slice('sha256:'.length), 'hex') }]),
    );
  }

  /** Whether the instance has any token (revoked ones count: revoking the last one does not open it). */
  get any(): boolean {
    return this.records.length > 0;
  }

  /** The active token `token` is, or null. */
  verify(token: string): TokenRecord | null {
    const m = TOKEN.exec(token);
    const entry = m ? this.byId.get(m[1]!) : undefined;
    // The same work whether or not the id is known.
    const digest = sha256(token);
    const ok = timingSafeEqual(digest, entry?.digest ?? UNMATCHABLE);
    return ok && entry ? entry.record : null;
  }
}

/** A digest no token has (all zeros is not a SHA-256 output anyone can find). */
const UNMATCHABLE = Buffer.alloc(32);

/**
 * The server's view of tokens.json: `current()` costs one stat of the file (a few microseconds)
 * and re-reads it when its inode, size or modification time changed, so a token made or revoked
 * counts from the next request on, without a restart. A file that cannot be read or parsed
 * accepts no token (and keeps auth on) until it is mended: `problem` says why.
 */
export class TokenFile {
  readonly path: string;
  private seen = '';
  private set = new TokenSet([]);
  /** Why the file cannot be used, or null. */
  problem: string | null = null;
  /** Called once for each new problem (and with null when it is mended). */
  onProblem: (problem: string | null) => void = () => {};

  constructor(path: string) {
    this.path = path;
  }

  current(): TokenSet {
    let st: ReturnType<typeof statSync>;
    try {
      st = statSync(this.path, { throwIfNoEntry: false });
    } catch (err) {
      return this.failed(`cannot stat ${this.path}: ${(err as Error).message}`);
    }
    const key = st ? `${st.ino}:${st.size}:${st.mtimeMs}` : 'none';
    if (key === this.seen) return this.set;
    this.seen = key;
    if (!st) return this.use(new TokenSet([]));
    try {
      return this.use(new TokenSet(parseTokens(readFileSync(this.path, 'utf8'))));
    } catch (err) {
      return this.failed(`${this.path} cannot be used, so no token is accepted: ${(err as Error).message}`);
    }
  }

  private use(set: TokenSet): TokenSet {
    this.set = set;
    if (this.problem !== null) {
      this.problem = null;
      this.onProblem(null);
    }
    return set;
  }

  /** No token is accepted, and auth stays on: a broken file must not open the instance. */
  private failed(problem: string): TokenSet {
    this.set = BROKEN;
    if (problem !== this.problem) {
      this.problem = problem;
      this.onProblem(problem);
    }
    return this.set;
  }
}

/** A token set that has tokens (auth on) but accepts none. */
const BROKEN = new (class extends TokenSet {
  override get any(): boolean {
    return true;
  }
  override verify(): null {
    return null;
  }
})([]);
