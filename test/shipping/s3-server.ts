// A loopback S3-compatible server for tests and benchmarks, in its own process: s3rver (which
// stores objects but does not check SigV4 signatures) behind a small front that recomputes every
// request's signature with @smithy/signature-v4 and refuses a mismatch as S3 does (403
// SignatureDoesNotMatch; 403 InvalidAccessKeyId for an unknown key). The front also counts the
// bytes it serves, so that a benchmark can report how much a query fetched.
//
// Run as a script, it prints one JSON line {"endpoint": ...} once listening. Tests use
// startS3Server(), which spawns it and stops it by its process id.

import { type ChildProcess, spawn } from 'node:child_process';
import { createHash, createHmac } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { createServer, type IncomingMessage, request, type ServerResponse } from 'node:http';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

export const TEST_S3 = {
  bucket: 'otelake-test',
  accessKeyId: 'OTELAKETESTKEY',
  secretAccessKey: 'otelake-test-secret-0123456789',
  region: 'us-east-1',
} as const;

export interface S3ServerStats {
  requests: number;
  /** Bytes of response bodies to GET requests (what readers fetched). */
  bytesServed: number;
  /** Requests refused for their signature or key. */
  refused: number;
}

export interface S3Server {
  endpoint: string;
  port: number;
  /** The environment variables that point otelake at this server (S3_PREFIX included). */
  env: Record<string, string>;
  stats(): Promise<S3ServerStats>;
  resetStats(): Promise<void>;
  /** Stops the server process (its objects stay in its folder unless `removeData`). */
  stop(opts?: { removeData?: boolean }): Promise<void>;
  readonly dataDir: string;
}

const SCRIPT = fileURLToPath(import.meta.url);

/** Starts the server in a child process (on `port`, default ephemeral; `dataDir` to reuse objects). */
export async function startS3Server(
  opts: { port?: number; dataDir?: string; prefix?: string } = {},
): Promise<S3Server> {
  const dataDir = opts.dataDir ?? (await mkdtemp(join(tmpdir(), 'otelake-s3-')));
  const env = { ...process.env };
  delete env['NODE_TEST_CONTEXT']; // a plain script, not a test file of the runner
  const child: ChildProcess = spawn(process.execPath, [SCRIPT, String(opts.port ?? 0), dataDir], {
    stdio: ['ignore', 'pipe', 'inherit'],
    env,
  });
  const endpoint = await new Promise<string>((resolve, reject) => {
    let buf = '';
    const onData = (d: Buffer) => {
      buf += d.toString('utf8');
      const nl = buf.indexOf('\n');
      if (nl >= 0) {
        child.stdout!.off('data', onData);
        resolve((JSON.parse(buf.slice(0, nl)) as { endpoint: string }).endpoint);
      }
    };
    child.stdout!.on('data', onData);
    child.once('exit', (code) => reject(new Error(`test S3 server exited (${code}) before listening`)));
  });
  const port = Number(new URL(endpoint).port);
  const control = async (path: string, method = 'GET'): Promise<unknown> => {
    const res = await fetch(`${endpoint}${path}`, { method });
    return res.json();
  };
  return {
    endpoint,
    port,
    dataDir,
    env: {
      S3_BUCKET: TEST_S3.bucket,
      CLOUD_ACCESS_KEY_ID: TEST_S3.accessKeyId,
      CLOUD_SECRET_ACCESS_KEY: TEST_S3.secretAccessKey,
      CLOUD_REGION: TEST_S3.region,
      CLOUD_ENDPOINT_URL: endpoint,
      S3_PREFIX: opts.prefix ?? 'otelake-tests',
    },
    stats: () => control('/__test/stats') as Promise<S3ServerStats>,
    resetStats: async () => {
      await control('/__test/reset', 'POST');
    },
    stop: async ({ removeData = false } = {}) => {
      if (child.exitCode === null && child.signalCode === null) {
        const exited = new Promise((r) => child.once('exit', r));
        child.kill('SIGTERM');
        await exited;
      }
      if (removeData) await rm(dataDir, { recursive: true, force: true });
    },
  };
}

// ---------------------------------------------------------------------------------------------
// The server process.

/** SHA-256 (and HMAC-SHA-256 with a secret) in the shape @smithy/signature-v4 takes. */
type Data = string | ArrayBuffer | ArrayBufferView;
const bytes = (d: Data): string | Uint8Array =>
  typeof d === 'string'
    ? d
    : ArrayBuffer.isView(d)
      ? new Uint8Array(d.buffer, d.byteOffset, d.byteLength)
      : new Uint8Array(d);

class Sha256 {
  private h;
  constructor(secret?: Data) {
    this.h = secret === undefined ? createHash('sha256') : createHmac('sha256', bytes(secret));
  }
  update(data: Data): void {
    this.h.update(bytes(data));
  }
  digest(): Promise<Uint8Array> {
    return Promise.resolve(this.h.digest());
  }
  reset(): void {}
}

function s3Error(res: ServerResponse, status: number, code: string, message: string): void {
  res.writeHead(status, { 'content-type': 'application/xml' });
  res.end(
    `<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>${code}</Code><Message>${message}</Message></Error>`,
  );
}

const AUTH =
  /^AWS4-HMAC-SHA256 Credential=([^/]+)\/(\d{8})\/([^/]*)\/s3\/aws4_request, ?SignedHeaders=([^,]+), ?Signature=([0-9a-f]{64})$/;

/** Why the request's signature is refused, or null when it is right. */
async function checkSignature(req: IncomingMessage, body: Buffer): Promise<[string, string] | null> {
  const { SignatureV4 } = await import('@smithy/signature-v4');
  const m = AUTH.exec(req.headers.authorization ?? '');
  if (!m) return ['AccessDenied', 'Anonymous or malformed authorization is not allowed'];
  const [, keyId, , region, signedHeaders, signature] = m;
  if (keyId !== TEST_S3.accessKeyId) return ['InvalidAccessKeyId', 'The access key id does not exist'];
  const url = new URL(req.url ?? '/', 'http://localhost');
  const query: Record<string, string | string[]> = {};
  for (const [k, v] of url.searchParams) {
    const prev = query[k];
    query[k] = prev === undefined ? v : Array.isArray(prev) ? [...prev, v] : [prev, v];
  }
  const headers: Record<string, string> = {};
  for (const h of signedHeaders!.split(';')) {
    const v = req.headers[h];
    headers[h] = Array.isArray(v) ? v.join(',') : (v ?? '');
  }
  const payloadHash = headers['x-amz-content-sha256'] ?? req.headers['x-amz-content-sha256'];
  if (typeof payloadHash === 'string' && /^[0-9a-f]{64}$/.test(payloadHash)) {
    if (createHash('sha256').update(body).digest('hex') !== payloadHash)
      return ['XAmzContentSHA256Mismatch', 'The provided x-amz-content-sha256 does not match the body'];
  }
  const date = String(req.headers['x-amz-date'] ?? '');
  const d = /^(\d{4})(\d{2})(\d{2})T(\d{2})(\d{2})(\d{2})Z$/.exec(date);
  if (!d) return ['AccessDenied', 'x-amz-date is missing'];
  const signingDate = new Date(Date.UTC(+d[1]!, +d[2]! - 1, +d[3]!, +d[4]!, +d[5]!, +d[6]!));
  const signer = new SignatureV4({
    credentials: { accessKeyId: TEST_S3.accessKeyId, secretAccessKey: TEST_S3.secretAccessKey },
    region: region!,
    service: 's3',
    sha256: Sha256,
    uriEscapePath: false,
  });
  const host = req.headers.host ?? '';
  const signed = await signer.sign(
    { method: req.method ?? 'GET', protocol: 'http:', hostname: host, path: url.pathname, query, headers },
    { signingDate },
  );
  const expected = /Signature=([0-9a-f]{64})/.exec(String(signed.headers['authorization']))?.[1];
  if (expected !== signature)
    return [
      'SignatureDoesNotMatch',
      'The request signature we calculated does not match the signature you provided. Check your key and signing method.',
    ];
  return null;
}

async function serve(port: number, dataDir: string): Promise<void> {
  const require = createRequire(import.meta.url);
  const S3rver = require('s3rver') as new (
    o: object,
  ) => { run(): Promise<{ port: number }>; close(): Promise<void> };
  // s3rver checks only that the access key exists: register the test key.
  const { DUMMY_ACCOUNT } = require('s3rver/lib/models/account.js') as {
    DUMMY_ACCOUNT: { createKeyPair(id: string, secret: string): void };
  };
  DUMMY_ACCOUNT.createKeyPair(TEST_S3.accessKeyId, TEST_S3.secretAccessKey);
  // s3rver's listing with a delimiter misses prefixes more than one folder deep (its walk stops
  // early): list everything under the prefix and group the keys as S3 does.
  type Listed = { objects: { key: string }[]; commonPrefixes: string[]; isTruncated: boolean };
  const Store = require('s3rver/lib/stores/filesystem.js') as {
    prototype: { listObjects(bucket: string, o: Record<string, unknown>): Promise<Listed> };
  };
  const listObjects = Store.prototype.listObjects;
  Store.prototype.listObjects = async function (bucket, o) {
    const delimiter = o['delimiter'] as string | undefined;
    if (!delimiter) return listObjects.call(this, bucket, o);
    const all = await listObjects.call(this, bucket, {
      ...o,
      delimiter: '',
      maxKeys: Number.POSITIVE_INFINITY,
    });
    const prefix = (o['prefix'] as string | undefined) ?? '';
    const common = new Set<string>();
    const objects = all.objects.filter((obj) => {
      const i = obj.key.slice(prefix.length).indexOf(delimiter);
      if (i >= 0) common.add(obj.key.slice(0, prefix.length + i + 1));
      return i < 0;
    });
    return { objects, commonPrefixes: [...common].sort(), isTruncated: false };
  };
  const backend = new S3rver({
    address: '127.0.0.1',
    port: 0,
    silent: true,
    directory: dataDir,
    configureBuckets: [{ name: TEST_S3.bucket }],
  });
  const { port: backendPort } = await backend.run();
  const stats: S3ServerStats = { requests: 0, bytesServed: 0, refused: 0 };

  const front = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      void (async () => {
        if (req.url === '/__test/stats') return void res.end(JSON.stringify(stats));
        if (req.url === '/__test/reset') {
          Object.assign(stats, { requests: 0, bytesServed: 0, refused: 0 });
          return void res.end('{}');
        }
        stats.requests++;
        const body = Buffer.concat(chunks);
        const refusal = await checkSignature(req, body);
        if (refusal) {
          stats.refused++;
          return s3Error(res, 403, refusal[0], refusal[1]);
        }
        const headers = { ...req.headers, 'content-length': String(body.length) };
        delete headers['transfer-encoding'];
        const up = request(
          { host: '127.0.0.1', port: backendPort, method: req.method, path: req.url, headers },
          (answer) => {
            res.writeHead(answer.statusCode ?? 502, answer.headers);
            answer.on('data', (c: Buffer) => {
              if (req.method === 'GET') stats.bytesServed += c.length;
            });
            answer.pipe(res);
          },
        );
        up.on('error', (err) => s3Error(res, 502, 'InternalError', err.message));
        up.end(body);
      })().catch((err: Error) => s3Error(res, 500, 'InternalError', err.message));
    });
  });
  await new Promise<void>((resolve) => front.listen(port, '127.0.0.1', resolve));
  const address = front.address() as { port: number };
  process.stdout.write(`${JSON.stringify({ endpoint: `http://127.0.0.1:${address.port}` })}\n`);
  process.once('SIGTERM', () => {
    front.close();
    front.closeAllConnections();
    void backend.close().finally(() => process.exit(0));
  });
}

if (process.argv[1] === SCRIPT) await serve(Number(process.argv[2] ?? 0), process.argv[3]!);
