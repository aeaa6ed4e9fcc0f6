// Reads a request body into one buffer, decompressing it as it streams in. Both the bytes on the wire
// and the bytes after decompression are counted as they arrive, so an oversized body or a
// decompression bomb is cut off at the limit instead of being inflated into memory.

import type { IncomingMessage } from 'node:http';
import type { Transform } from 'node:stream';
import * as zlib from 'node:zlib';

/** A request the body reader refuses; `statusCode` is the HTTP status to answer with. */
export class BodyError extends Error {
  readonly statusCode: number;
  constructor(statusCode: number, message: string) {
    super(message);
    this.name = 'BodyError';
    this.statusCode = statusCode;
  }
}

// Decompressors produce larger chunks than the 16 KiB default: fewer callbacks per request.
const INFLATE_CHUNK = 64 * 1024;

type DecoderFactory = () => Transform;

const DECODERS: Record<string, DecoderFactory> = {
  gzip: () => zlib.createGunzip({ chunkSize: INFLATE_CHUNK }),
  'x-gzip': () => zlib.createGunzip({ chunkSize: INFLATE_CHUNK }),
  // HTTP's "deflate" is the zlib format (RFC 9110 8.4.1.2).
  deflate: () => zlib.createInflate({ chunkSize: INFLATE_CHUNK }),
  br: () => zlib.createBrotliDecompress({ chunkSize: INFLATE_CHUNK }),
};
// zstd arrived in Node 22.15 / 23.8; offered only where this Node has it.
const zstd = (zlib as unknown as { createZstdDecompress?: (o: object) => Transform }).createZstdDecompress;
if (typeof zstd === 'function') DECODERS['zstd'] = () => zstd({ chunkSize: INFLATE_CHUNK });

/** Content codings this server decodes, for error messages and docs. */
export const SUPPORTED_ENCODINGS: readonly string[] = ['identity', ...Object.keys(DECODERS)];

/** The decoders to apply, in order, for a Content-Encoding header (codings are listed in the order applied). */
export function decodersFor(header: string | undefined): DecoderFactory[] {
  if (header === undefined || header === '') return [];
  const out: DecoderFactory[] = [];
  const codings = header.split(',');
  for (let i = codings.length - 1; i >= 0; i--) {
    const coding = codings[i]!.trim().toLowerCase();
    if (coding === 'identity' || coding === '') continue;
    const factory = DECODERS[coding];
    if (!factory) {
      throw new BodyError(
        415,
        `unsupported Content-Encoding "${coding}": use one of ${SUPPORTED_ENCODINGS.join(', ')}`,
      );
    }
    out.push(factory);
  }
  return out;
}

function tooLarge(limit: number, what: string): BodyError {
  return new BodyError(413, `request body ${what} exceeds the limit of ${limit} bytes`);
}

/**
 * The whole body of `req` as one buffer (at most `limit` bytes after decompression and on the wire).
 * Rejects with a BodyError (413 over the limit, 415 unknown coding, 400 corrupt compressed data).
 * On a refusal the rest of the request is left to drain, so the response can still be read by the client.
 */
export function readBody(
  req: IncomingMessage,
  contentEncoding: string | undefined,
  limit: number,
): Promise<Buffer> {
  let decoders: DecoderFactory[];
  try {
    decoders = decodersFor(contentEncoding);
  } catch (err) {
    req.resume();
    return Promise.reject(err);
  }
  const declared = req.headers['content-length'];
  if (declared !== undefined) {
    const n = Number(declared);
    if (n > limit) {
      req.resume();
      return Promise.reject(tooLarge(limit, 'size (Content-Length)'));
    }
    if (decoders.length === 0) return readPlain(req, limit, n);
  } else if (decoders.length === 0) {
    return readPlain(req, limit, -1);
  }
  return readDecoded(req, decoders, limit);
}

/** Uncompressed body: a single chunk is returned as is, a known length is copied once into place. */
function readPlain(req: IncomingMessage, limit: number, length: number): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    let into: Buffer | null = length > 0 ? Buffer.allocUnsafe(length) : null;
    const chunks: Buffer[] = [];
    let received = 0;
    let settled = false;
    const fail = (err: Error): void => {
      if (settled) return;
      settled = true;
      req.off('data', onData);
      req.resume();
      reject(err);
    };
    const onData = (chunk: Buffer): void => {
      const next = received + chunk.length;
      if (next > limit) {
        fail(tooLarge(limit, 'size'));
        return;
      }
      if (into !== null && next <= into.length) {
        // A sole chunk filling the whole length needs no copy at all.
        if (received === 0 && chunk.length === into.length) into = chunk;
        else chunk.copy(into, received);
      } else {
        if (into !== null) {
          // More bytes than Content-Length announced: node's parser prevents it, but stay correct.
          chunks.push(into.subarray(0, received));
          into = null;
        }
        chunks.push(chunk);
      }
      received = next;
    };
    req.on('data', onData);
    req.once('end', () => {
      if (settled) return;
      settled = true;
      if (into !== null) resolve(received === into.length ? into : into.subarray(0, received));
      else resolve(chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, received));
    });
    req.once('error', fail);
    req.once('close', () => {
      if (!req.complete) fail(new BodyError(400, 'request aborted by the client'));
    });
  });
}

/** Compressed body: wire bytes are fed through the decoders by hand, counting both sides. */
function readDecoded(req: IncomingMessage, factories: DecoderFactory[], limit: number): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const stages = factories.map((f) => f());
    for (let i = 0; i + 1 < stages.length; i++) stages[i]!.pipe(stages[i + 1]!);
    const first = stages[0]!;
    const last = stages[stages.length - 1]!;
    const chunks: Buffer[] = [];
    let wire = 0;
    let decoded = 0;
    let settled = false;

    const fail = (err: Error): void => {
      if (settled) return;
      settled = true;
      req.off('data', onWire);
      req.off('end', onWireEnd);
      for (const s of stages) s.destroy();
      chunks.length = 0;
      req.resume();
      reject(err);
    };
    const onWire = (chunk: Buffer): void => {
      wire += chunk.length;
      if (wire > limit) {
        fail(tooLarge(limit, 'size (compressed)'));
        return;
      }
      if (!first.write(chunk)) {
        req.pause();
        first.once('drain', () => {
          if (!settled) req.resume();
        });
      }
    };
    const onWireEnd = (): void => {
      first.end();
    };
    last.on('data', (chunk: Buffer) => {
      if (settled) return;
      decoded += chunk.length;
      if (decoded > limit) {
        fail(tooLarge(limit, 'size after decompression'));
        return;
      }
      chunks.push(chunk);
    });
    last.once('end', () => {
      if (settled) return;
      settled = true;
      resolve(chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, decoded));
    });
    for (const s of stages) {
      s.once('error', (err: Error) =>
        fail(new BodyError(400, `cannot decompress the request body: ${err.message}`)),
      );
    }
    req.on('data', onWire);
    req.once('end', onWireEnd);
    req.once('error', fail);
    req.once('close', () => {
      if (!req.complete) fail(new BodyError(400, 'request aborted by the client'));
    });
  });
}
