// The S3 client of otelake (AWS SDK for JavaScript v3): listing, uploads (multipart through
// lib-storage above MULTIPART_FROM bytes), reads, and a Delta log store over a shipped table, so
// that the same snapshot code opens local and remote tables. Errors say what to fix, and never
// carry a secret.

import { createReadStream } from 'node:fs';
import { readFile } from 'node:fs/promises';
import type { ListObjectsV2CommandOutput, S3Client } from '@aws-sdk/client-s3';
import { LOG_DIR } from '../delta/actions.ts';
import type { LogStore } from '../delta/table.ts';
import type { S3Settings } from './s3-config.ts';

/** Files from this size are uploaded in parts (several at once, each retried alone). */
export const MULTIPART_FROM = 16 * 1024 * 1024;
/** Size of one part of a multipart upload; at most PART_QUEUE parts of a file are in memory. */
const PART_SIZE = 16 * 1024 * 1024;
const PART_QUEUE = 4;

/** A refused or failed object-storage request, with a message saying what to fix. */
export class ObjectStoreError extends Error {
  override name = 'ObjectStoreError';
  /** S3's error code (SignatureDoesNotMatch, NoSuchBucket...) or the network error's code. */
  readonly code: string;
  /** The HTTP status, when the server answered. */
  readonly status: number | null;
  constructor(message: string, code: string, status: number | null) {
    super(message);
    this.code = code;
    this.status = status;
  }
}

const CREDENTIAL_CODES = new Set([
  'SignatureDoesNotMatch',
  'InvalidAccessKeyId',
  'InvalidToken',
  'ExpiredToken',
  'AccessDenied',
  'InvalidClientTokenId',
]);
const NETWORK_CODES =
  /^(ECONNREFUSED|ECONNRESET|ENOTFOUND|EAI_AGAIN|ETIMEDOUT|EHOSTUNREACH|ENETUNREACH|EPIPE)$/;

interface SdkError {
  name?: string;
  Code?: string;
  code?: string;
  message?: string;
  $metadata?: { httpStatusCode?: number };
  errors?: { code?: string }[];
}

/** A failed SDK call as an ObjectStoreError naming the operation, the cause and what to check. */
function describeFailure(err: unknown, what: string, s: S3Settings): ObjectStoreError {
  const e = (err ?? {}) as SdkError;
  const status = e.$metadata?.httpStatusCode ?? null;
  const code =
    e.Code ??
    (e.code && NETWORK_CODES.test(e.code) ? e.code : undefined) ??
    e.errors?.[0]?.code ??
    e.name ??
    'Error';
  const cause = e.message ? e.message : code;
  let message: string;
  if (NETWORK_CODES.test(code) || code === 'TimeoutError' || code === 'RequestTimeout') {
    message = `cannot reach the object storage at ${s.endpointUrl} (${code}) while trying to ${what}`;
  } else if (CREDENTIAL_CODES.has(code)) {
    message = `the object storage at ${s.endpointUrl} refused the credentials (${code}: ${cause}) while trying to ${what}; check the access key, the secret and the session token`;
  } else if (code === 'NoSuchBucket') {
    message = `bucket ${s.bucket} does not exist at ${s.endpointUrl}`;
  } else {
    message = `object storage request failed while trying to ${what}: ${code}${status ? ` (HTTP ${status})` : ''}: ${cause}`;
  }
  return new ObjectStoreError(s.redact(message), code, status);
}

function isNotFound(err: unknown): boolean {
  const e = err as SdkError;
  return e?.name === 'NoSuchKey' || e?.Code === 'NoSuchKey' || e?.$metadata?.httpStatusCode === 404;
}

type Sdk = typeof import('@aws-sdk/client-s3') & typeof import('@aws-sdk/lib-storage');
let sdk: Promise<Sdk> | null = null;

/** The AWS SDK (~34 MiB of RSS), loaded by the first request to object storage, not at start. */
function loadSdk(): Promise<Sdk> {
  sdk ??= Promise.all([import('@aws-sdk/client-s3'), import('@aws-sdk/lib-storage')]).then(
    ([s3, storage]) => ({ ...s3, ...storage }),
  );
  return sdk;
}

/**
 * A request whose connection moves no byte for this long fails (TimeoutError), is retried by the
 * SDK, then fails its step, which shipping records and retries with backoff. The SDK's
 * `requestTimeout` only logged a warning (unless `throwOnRequestTimeout`) and bounded the whole
 * request, so a server that stopped answering held a day's upload for good (seen with a stopped
 * S3 server), while a slow link moving a 16 MiB part is never cut short by this.
 */
const IDLE_TIMEOUT_MS = 120_000;

export class ObjectStore {
  readonly settings: S3Settings;
  private readonly idleTimeoutMs: number;
  private connection: Promise<{ client: S3Client; sdk: Sdk }> | null = null;

  constructor(settings: S3Settings, opts: { idleTimeoutMs?: number } = {}) {
    this.settings = settings;
    this.idleTimeoutMs = opts.idleTimeoutMs ?? IDLE_TIMEOUT_MS;
  }

  /** The client and the SDK, made on first use. */
  private connect(): Promise<{ client: S3Client; sdk: Sdk }> {
    this.connection ??= loadSdk().then((sdk) => ({ sdk, client: this.makeClient(sdk) }));
    return this.connection;
  }

  private makeClient(sdk: Sdk): S3Client {
    const settings = this.settings;
    return new sdk.S3Client({
      endpoint: settings.endpointUrl,
      region: settings.signingRegion,
      // Path-style addressing works with AWS and with every S3-compatible server.
      forcePathStyle: true,
      credentials: {
        accessKeyId: settings.accessKeyId,
        secretAccessKey: settings.secretAccessKey,
        ...(settings.sessionToken === null ? {} : { sessionToken: settings.sessionToken }),
      },
      // Checksum headers and trailers only where S3 requires them: many S3-compatible servers
      // reject the SDK's default aws-chunked trailers. Sizes and row counts are verified instead.
      requestChecksumCalculation: 'WHEN_REQUIRED',
      responseChecksumValidation: 'WHEN_REQUIRED',
      maxAttempts: 3,
      requestHandler: { connectionTimeout: 10_000, socketTimeout: this.idleTimeoutMs },
    });
  }

  private async call<T>(what: string, fn: () => Promise<T>): Promise<T> {
    try {
      return await fn();
    } catch (err) {
      if ((err as Error)?.name === 'AbortError') throw err;
      throw describeFailure(err, what, this.settings);
    }
  }

  /** The pages of a listing of `prefix` (with `delimiter`: grouped into common prefixes). */
  private async *pages(
    prefix: string,
    delimiter?: string,
    signal?: AbortSignal,
  ): AsyncGenerator<ListObjectsV2CommandOutput> {
    const { client, sdk } = await this.connect();
    let token: string | undefined;
    do {
      const page: ListObjectsV2CommandOutput = await this.call(`list ${this.settings.uri(prefix)}`, () =>
        client.send(
          new sdk.ListObjectsV2Command({
            Bucket: this.settings.bucket,
            Prefix: prefix,
            Delimiter: delimiter,
            ContinuationToken: token,
          }),
          { abortSignal: signal },
        ),
      );
      yield page;
      token = page.IsTruncated ? page.NextContinuationToken : undefined;
    } while (token);
  }

  /** Every object under `prefix`: key (relative to the prefix) -> size in bytes. */
  async list(prefix: string, signal?: AbortSignal): Promise<Map<string, number>> {
    const out = new Map<string, number>();
    for await (const page of this.pages(prefix, undefined, signal)) {
      for (const o of page.Contents ?? []) {
        if (o.Key !== undefined) out.set(o.Key.slice(prefix.length), o.Size ?? 0);
      }
    }
    return out;
  }

  /** Names of the "folders" directly under `prefix` (keys sharing a next path segment). */
  async folders(prefix: string): Promise<string[]> {
    const out: string[] = [];
    for await (const page of this.pages(prefix, '/')) {
      for (const p of page.CommonPrefixes ?? []) {
        if (p.Prefix) out.push(p.Prefix.slice(prefix.length).replace(/\/$/, ''));
      }
    }
    return out;
  }

  /**
   * Uploads a local file of `size` bytes to `key`; `onBytes` is told about bytes sent as they go.
   * Large files go in parts, several at once: at most PART_QUEUE x PART_SIZE bytes in memory.
   */
  async upload(
    key: string,
    path: string,
    size: number,
    onBytes: (n: number) => void = () => {},
    signal?: AbortSignal,
  ): Promise<void> {
    const what = `upload ${this.settings.uri(key)}`;
    const { client, sdk } = await this.connect();
    if (size < MULTIPART_FROM) {
      const body = await readFile(path);
      await this.call(what, () =>
        client.send(
          new sdk.PutObjectCommand({
            Bucket: this.settings.bucket,
            Key: key,
            Body: body,
            ContentLength: body.length,
          }),
          { abortSignal: signal },
        ),
      );
      onBytes(body.length);
      return;
    }
    const upload = new sdk.Upload({
      client,
      params: { Bucket: this.settings.bucket, Key: key, Body: createReadStream(path) },
      partSize: PART_SIZE,
      queueSize: PART_QUEUE,
      leavePartsOnError: false,
      ...(signal ? { abortController: abortControllerOf(signal) } : {}),
    });
    let sent = 0;
    upload.on('httpUploadProgress', (p) => {
      const loaded = p.loaded ?? sent;
      if (loaded > sent) onBytes(loaded - sent);
      sent = Math.max(sent, loaded);
    });
    await this.call(what, () => upload.done());
    if (sent < size) onBytes(size - sent);
  }

  /** An object's bytes, or null when it does not exist. */
  async get(key: string, signal?: AbortSignal): Promise<Uint8Array | null> {
    const { client, sdk } = await this.connect();
    try {
      const res = await client.send(new sdk.GetObjectCommand({ Bucket: this.settings.bucket, Key: key }), {
        abortSignal: signal,
      });
      return res.Body ? await res.Body.transformToByteArray() : new Uint8Array(0);
    } catch (err) {
      if (isNotFound(err)) return null;
      if ((err as Error)?.name === 'AbortError') throw err;
      throw describeFailure(err, `read ${this.settings.uri(key)}`, this.settings);
    }
  }

  /** The Delta log of the table stored under `tableKey` (ending in '/'), listed once. */
  logStore(tableKey: string): LogStore {
    const logKey = `${tableKey}${LOG_DIR}/`;
    let names: Promise<string[]> | null = null;
    return {
      where: this.settings.uri(`${tableKey}${LOG_DIR}`),
      names: () => {
        names ??= this.list(logKey).then((m) => [...m.keys()].filter((k) => !k.includes('/')));
        return names;
      },
      read: (name) => this.get(`${logKey}${name}`),
    };
  }

  destroy(): void {
    void this.connection?.then(({ client }) => client.destroy());
  }
}

/** An AbortController that aborts with `signal` (lib-storage takes a controller, not a signal). */
function abortControllerOf(signal: AbortSignal): AbortController {
  const c = new AbortController();
  if (signal.aborted) c.abort();
  else signal.addEventListener('abort', () => c.abort(), { once: true });
  return c;
}
