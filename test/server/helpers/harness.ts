// A real server over a real logger in a temporary instance, for the server tests.

import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { FastifyInstance } from 'fastify';
import { Logger } from '../../../src/index.ts';
import { type BuildServerOptions, buildServer } from '../../../src/server/index.ts';
import { defaultOptions, mergeOptions, type PartialOptions } from '../../../src/storage/options.ts';

// biome-ignore lint/suspicious/noExplicitAny: JSON from the server, which the tests check field by field
export type Json = any;

export interface TestServer {
  url: string;
  logger: Logger;
  app: FastifyInstance;
  dir: string;
  close(): Promise<void>;
}

/** Rows are written within ~50 ms, so tests can read back soon after sending. */
const FAST_FLUSH: PartialOptions = {
  aggregator_config: { max_age_s: 0.05, min_batch_rows: 1 },
};

function merged(over: PartialOptions | undefined): PartialOptions {
  // Group-wise overlay of the test's options onto the fast-flush ones.
  const base = mergeOptions(defaultOptions(), FAST_FLUSH);
  return mergeOptions(base, over);
}

export async function startServer(options?: PartialOptions, build?: BuildServerOptions): Promise<TestServer> {
  const dir = await mkdtemp(join(tmpdir(), 'otelake-server-'));
  const logger = await Logger.open({
    instanceId: 'test',
    instanceDir: dir,
    options: merged(options),
    handleSignals: false,
  });
  const app = await buildServer(logger, build);
  await app.listen({ host: '127.0.0.1', port: 0 });
  const address = app.server.address();
  const port = typeof address === 'object' && address !== null ? address.port : 0;
  return {
    url: `http://127.0.0.1:${port}`,
    logger,
    app,
    dir,
    async close() {
      await app.close();
      await logger.stop({ flush: 'auto' });
      await rm(dir, { recursive: true, force: true });
    },
  };
}

export interface Reply {
  status: number;
  headers: Headers;
  text: string;
  bytes: Buffer;
}

export async function post(
  url: string,
  body: string | Uint8Array,
  headers: Record<string, string> = { 'content-type': 'application/json' },
): Promise<Reply> {
  const res = await fetch(url, { method: 'POST', body, headers });
  const bytes = Buffer.from(await res.arrayBuffer());
  return { status: res.status, headers: res.headers, text: bytes.toString('utf8'), bytes };
}

export async function getJson(url: string): Promise<{ status: number; body: Json }> {
  const res = await fetch(url);
  return { status: res.status, body: await res.json() };
}

/** Waits until the pipeline has written at least `rows` rows in total (per /healthz). */
export async function waitWritten(url: string, rows: number, timeoutMs = 15_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const { body } = await getJson(`${url}/healthz`);
    const written = body.aggregator.rows_written as number;
    if (written >= rows) return;
    if (Date.now() > deadline)
      throw new Error(`only ${written} of ${rows} rows written after ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

/** Waits until a decode worker has started and loaded (the server starts one as it starts). */
export async function waitDecodeWorker(url: string, timeoutMs = 15_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while ((await getJson(`${url}/healthz`)).body.decode.running < 1) {
    if (Date.now() > deadline) throw new Error(`no decode worker running after ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

/** Polls a read endpoint until it returns at least `count` rows (rows are written asynchronously). */
export async function readUntil(url: string, count: number, timeoutMs = 10_000): Promise<Json[]> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const { status, body } = await getJson(url);
    if (status !== 200) throw new Error(`GET ${url}: ${status} ${JSON.stringify(body)}`);
    if (body.count >= count || Date.now() > deadline) return body.rows;
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** A minimal protobuf reader for google.rpc.Status { int32 code = 1; string message = 2; }. */
export function decodeStatusProto(bytes: Uint8Array): { code: number; message: string } {
  let i = 0;
  const varint = (): number => {
    let v = 0;
    let shift = 0;
    for (;;) {
      const b = bytes[i++]!;
      v += (b & 0x7f) * 2 ** shift;
      if (b < 0x80) return v;
      shift += 7;
    }
  };
  let code = 0;
  let message = '';
  while (i < bytes.length) {
    const tag = varint();
    if (tag === 0x08) code = varint();
    else if (tag === 0x12) {
      const n = varint();
      message = Buffer.from(bytes.subarray(i, i + n)).toString('utf8');
      i += n;
    } else throw new Error(`unexpected tag ${tag}`);
  }
  return { code, message };
}
