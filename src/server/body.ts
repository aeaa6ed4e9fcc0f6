// Request bodies: read into one buffer on the event loop, counting bytes as they arrive (an
// oversized body is cut off at the limit), and decompressed by the decoder (a decode worker; the
// event loop with decode_workers 0 or for a small body) with the output capped at the same limit
// (a decompression bomb stops there). Synchronous zlib in a worker takes half the CPU of streaming
// it through the event loop and the thread pool. The bytes of all bodies held at once are
// bounded by one BodyBudget.

import type { IncomingMessage, ServerResponse } from 'node:http';
import * as zlib from 'node:zlib';
import { CodecUnavailableError, decompressLz4, decompressSnappy, decompressSnappyFramed } from './codecs.ts';
import {
  checkZstdFrames,
  type KeptDecompressors,
  ZSTD_AVAILABLE,
  zstdDecompressFrames,
} from './kept-decompressors.ts';

/** A request the body reader refuses; `statusCode` is the HTTP status to answer with. */
export class BodyError extends Error {
  readonly statusCode: number;
  constructor(statusCode: number, message: string) {
    super(message);
    this.name = 'BodyError';
    this.statusCode = statusCode;
  }
}

/**
 * Undoes one coding. With `kept` (the decoder's), a node:zlib coding decompresses into a buffer the
 * next body reuses (see kept-decompressors.ts); the others ignore it.
 */
type Decompress = (body: Buffer, options: { maxOutputLength: number }, kept?: KeptDecompressors) => Buffer;

// Deflate cannot expand data more than 1032 times.
const MAX_DEFLATE_RATIO = 1032;

/**
 * The output buffer for gunzip: the size the gzip trailer announces (ISIZE), plus one byte so
 * zlib ends without asking for another. One buffer instead of 16 KiB chunks joined at the end
 * took 33 instead of 54 µs for a 48 KiB protobuf body of 100 spans, with less garbage. The
 * trailer is only a hint (a wrong one costs a larger or an extra buffer, never data), so the size
 * is bounded by what deflate can make of the body and by the limit. Undefined (zlib's default)
 * for a body too short to hold a trailer.
 */
export function gunzipBufferSize(body: Uint8Array, limit: number): number | undefined {
  const announced = gzipAnnouncedSize(body);
  if (announced === undefined) return undefined;
  return Math.max(64, Math.min(announced + 1, body.length * MAX_DEFLATE_RATIO, limit + 1));
}

/**
 * The size a gzip body's trailer announces (ISIZE: the input's length modulo 2^32), or undefined
 * for a body too short to hold a header and a trailer. A hint only: nothing checks it until the
 * body is inflated.
 */
export function gzipAnnouncedSize(body: Uint8Array): number | undefined {
  if (body.length < 18) return undefined;
  const n = body.length;
  return (body[n - 4]! | (body[n - 3]! << 8) | (body[n - 2]! << 16) | (body[n - 1]! << 24)) >>> 0;
}

/** Whether a coding (from `codingsFor`) is gzip. */
export function isGzip(coding: string): boolean {
  return coding === 'gzip' || coding === 'x-gzip';
}

const gunzip: Decompress = (body, options, kept) => {
  const size = gunzipBufferSize(body, options.maxOutputLength);
  if (kept) return kept.gunzip.transform(body, size ?? 64, options.maxOutputLength);
  return zlib.gunzipSync(body, { ...options, chunkSize: size });
};

/** Whether a body starts with a zlib header (RFC 1950: deflate method, header checksum). */
function hasZlibHeader(body: Uint8Array): boolean {
  return body.length >= 2 && (body[0]! & 0x0f) === 8 && ((body[0]! << 8) | body[1]!) % 31 === 0;
}

// HTTP's "deflate" is the zlib format (RFC 9110 8.4.1.2), which the Collector sends for both
// `deflate` and `zlib`; some clients send raw deflate under that name, which is accepted too.
const inflate: Decompress = (body, options, kept) => {
  const wrapped = hasZlibHeader(body);
  if (kept)
    return (wrapped ? kept.inflate : kept.inflateRaw).transform(
      body,
      body.length * 4,
      options.maxOutputLength,
    );
  return wrapped ? zlib.inflateSync(body, options) : zlib.inflateRawSync(body, options);
};

/** Every coding the Collector's otlp_http exporter offers (its `compression`), and brotli. */
const DECOMPRESSORS: Record<string, Decompress> = {
  gzip: gunzip,
  'x-gzip': gunzip,
  deflate: inflate,
  zlib: inflate,
  br: zlib.brotliDecompressSync,
  snappy: decompressSnappy,
  'x-snappy-framed': decompressSnappyFramed,
};
/** The codings undone off the thread (`decompressAsync`). */
const ASYNC_DECOMPRESSORS: Record<
  string,
  (body: Buffer, options: { maxOutputLength: number }) => Promise<Buffer>
> = {
  lz4: decompressLz4,
};
// zstd arrived in Node 22.15 / 23.8; offered only where this Node has it.
if (ZSTD_AVAILABLE) {
  DECOMPRESSORS['zstd'] = (body, options, kept) => {
    checkZstdFrames(body);
    return kept?.zstd
      ? kept.zstd.transform(body, body.length * 4, options.maxOutputLength)
      : zstdDecompressFrames(body, options);
  };
}

/** Content codings this server decodes, for error messages and docs. */
const SUPPORTED_ENCODINGS: readonly string[] = [
  'identity',
  ...Object.keys(DECOMPRESSORS),
  ...Object.keys(ASYNC_DECOMPRESSORS),
];

/**
 * The codings to undo, in order, for a Content-Encoding header (codings are listed in the order
 * applied). Throws a BodyError (415) naming an unknown coding.
 */
export function codingsFor(header: string | undefined): string[] {
  if (header === undefined || header === '') return [];
  const out: string[] = [];
  const codings = header.split(',');
  for (let i = codings.length - 1; i >= 0; i--) {
    const coding = codings[i]!.trim().toLowerCase();
    if (coding === 'identity' || coding === '') continue;
    if (!DECOMPRESSORS[coding] && !ASYNC_DECOMPRESSORS[coding]) {
      throw new BodyError(
        415,
        `unsupported Content-Encoding "${coding}": use one of ${SUPPORTED_ENCODINGS.join(', ')}`,
      );
    }
    out.push(coding);
  }
  return out;
}

function tooLarge(limit: number, what: string): BodyError {
  return new BodyError(413, `request body ${what} exceeds the limit of ${limit} bytes`);
}

/** Whether undoing these codings takes `decompressAsync` (lz4: see decompressLz4). */
export function needsAsync(codings: readonly string[]): boolean {
  return codings.some((coding) => ASYNC_DECOMPRESSORS[coding] !== undefined);
}

/**
 * Undoes the codings (from `codingsFor`) in one synchronous call each, in the decoder: zlib's
 * output is capped at `limit` bytes, so a decompression bomb stops there instead of being inflated
 * into memory. Throws a BodyError: 413 over the limit, 400 for corrupt data. Codings for which
 * `needsAsync` holds go through `decompressAsync` instead. With `kept`, the output may be a view
 * that `kept`'s next use overwrites: for a caller that is done with it before then.
 */
export function decompress(
  body: Buffer,
  codings: readonly string[],
  limit: number,
  kept?: KeptDecompressors,
): Buffer {
  let out = body;
  for (let i = 0; i < codings.length; i++) {
    const coding = codings[i]!;
    const undo = DECOMPRESSORS[coding];
    if (!undo) throw new Error(`Content-Encoding ${coding} is undone by decompressAsync`);
    try {
      // Only the last coding may use a kept buffer: the next coding would read what it overwrites.
      out = undo(out, { maxOutputLength: limit }, i === codings.length - 1 ? kept : undefined);
    } catch (err) {
      throw refusal(err, coding, limit);
    }
  }
  return out;
}

/** `decompress` for any codings: those of ASYNC_DECOMPRESSORS off the thread, the others as there. */
export async function decompressAsync(
  body: Buffer,
  codings: readonly string[],
  limit: number,
): Promise<Buffer> {
  let out = body;
  for (const coding of codings) {
    const undo = ASYNC_DECOMPRESSORS[coding];
    if (!undo) {
      out = decompress(out, [coding], limit);
      continue;
    }
    try {
      out = await undo(out, { maxOutputLength: limit });
    } catch (err) {
      throw refusal(err, coding, limit);
    }
  }
  return out;
}

/** The BodyError for a decompressor's failure. */
function refusal(err: unknown, coding: string, limit: number): BodyError {
  if ((err as NodeJS.ErrnoException).code === 'ERR_BUFFER_TOO_LARGE') {
    return tooLarge(limit, 'size after decompression');
  }
  if (err instanceof CodecUnavailableError) {
    return new BodyError(415, `Content-Encoding "${coding}" is not available here: ${err.message}`);
  }
  return new BodyError(400, `cannot decompress the request body: ${(err as Error).message}`);
}

/**
 * The bytes of request bodies the server holds at once (server_config.max_body_bytes_in_flight),
 * from the first byte read until the request is answered: the body as sent while it is read and
 * decoded, then the rows decoded from it until they are queued. One accounting for every stage,
 * so that a flood of large, slow or stalled uploads is refused (503) instead of held in memory.
 */
export class BodyBudget {
  readonly limit: number;
  private held = 0;
  /** Requests refused because their body did not fit. */
  refused = 0;

  constructor(limit: number) {
    if (!(Number.isSafeInteger(limit) && limit > 0)) throw new TypeError('the body budget must be > 0 bytes');
    this.limit = limit;
  }

  /** Bytes held now. */
  get bytes(): number {
    return this.held;
  }

  /** A handle for one request's bytes; release it once the request is answered. */
  lease(): BodyLease {
    return new BodyLease(this, (delta) => {
      this.held += delta;
    });
  }

  /** Whether `n` more bytes fit beside `own` bytes already held by the asking request. */
  fits(n: number, own: number): boolean {
    // A body alone always fits: a budget below body_limit_bytes still serves one large body.
    return this.held === own || this.held + n <= this.limit;
  }
}

/** The bytes one request holds of a BodyBudget. */
export class BodyLease {
  private held = 0;
  private released = false;
  readonly budget: BodyBudget;
  private readonly add: (delta: number) => void;

  constructor(budget: BodyBudget, add: (delta: number) => void) {
    this.budget = budget;
    this.add = add;
  }

  get bytes(): number {
    return this.held;
  }

  /** Takes `n` more bytes if they fit (true), else nothing (false). */
  grow(n: number): boolean {
    if (this.released) return false;
    if (!this.budget.fits(n, this.held)) return false;
    this.held += n;
    this.add(n);
    return true;
  }

  /**
   * Holds exactly `n` bytes from now on, whether they fit or not: what the request turned into
   * (its decoded rows) is already in memory, and counts until it is answered.
   */
  hold(n: number): void {
    if (this.released) return;
    this.add(n - this.held);
    this.held = n;
  }

  /** Gives the bytes back (idempotent). */
  release(): void {
    if (this.released) return;
    this.released = true;
    this.add(-this.held);
    this.held = 0;
  }
}

function tooBusy(budget: BodyBudget): BodyError {
  budget.refused++;
  return new BodyError(
    503,
    `the server holds its limit of request bodies (server_config.max_body_bytes_in_flight = ${budget.limit} bytes)`,
  );
}

/** Chunks joined into a buffer of its own (Buffer.concat takes a slice of the pool when small). */
function joined(chunks: readonly Buffer[], length: number): Buffer {
  const out = Buffer.allocUnsafeSlow(length);
  let at = 0;
  for (const c of chunks) at += c.copy(out, at);
  return out;
}

/**
 * The whole body of `req` as one buffer, as sent (at most `limit` bytes), its bytes taken from
 * `lease` before they are read (the announced Content-Length at once, else chunk by chunk).
 * Rejects with a BodyError: 413 over the limit, 503 when the body does not fit the budget, 400
 * when the client aborts. On a refusal reading stops: once answered, node reads and drops the
 * rest of the body to keep the connection, unless the answer ends it (closeAfterAnswer).
 */
export function readBody(req: IncomingMessage, limit: number, lease: BodyLease): Promise<Buffer> {
  const declared = req.headers['content-length'];
  const length = declared === undefined ? -1 : Number(declared);
  if (length > limit) return Promise.reject(tooLarge(limit, 'size (Content-Length)'));
  if (length > 0 && !lease.grow(length)) return Promise.reject(tooBusy(lease.budget));
  return new Promise((resolve, reject) => {
    // With a Content-Length the bytes are copied once into place; else chunks are joined at the end.
    // `into` is allocated at the first chunk, unless that chunk is the whole body: a buffer of its
    // own, not a slice of Buffer's pool (anything under 32 KiB with the 64 KiB pool of newer
    // Nodes), so that a decode worker takes it by transfer without a second copy (6-7 µs, 30 KB).
    let sized = length > 0;
    let into: Buffer | null = null;
    const chunks: Buffer[] = [];
    let received = 0;
    let settled = false;
    const fail = (err: Error): void => {
      if (settled) return;
      settled = true;
      req.off('data', onData);
      req.pause();
      reject(err);
    };
    const onData = (chunk: Buffer): void => {
      const next = received + chunk.length;
      if (next > limit) {
        fail(tooLarge(limit, 'size'));
        return;
      }
      if (sized && next <= length) {
        // A sole chunk filling the whole length is not copied here (it is a slice of the socket's
        // buffer: crossing to a worker copies it once).
        if (received === 0 && chunk.length === length) into = chunk;
        else {
          into ??= Buffer.allocUnsafeSlow(length);
          chunk.copy(into, received);
        }
      } else {
        if (sized) {
          // More bytes than Content-Length announced: node's parser prevents it, but stay correct.
          if (into !== null) chunks.push(into.subarray(0, received));
          sized = false;
        }
        if (next > lease.bytes && !lease.grow(next - lease.bytes)) {
          fail(tooBusy(lease.budget));
          return;
        }
        chunks.push(chunk);
      }
      received = next;
    };
    req.on('data', onData);
    req.once('end', () => {
      if (settled) return;
      settled = true;
      if (sized)
        resolve(into === null ? Buffer.alloc(0) : received === length ? into : into.subarray(0, received));
      else resolve(chunks.length === 1 ? chunks[0]! : joined(chunks, received));
    });
    req.once('error', fail);
    req.once('close', () => {
      if (!req.complete) fail(new BodyError(400, 'request aborted by the client'));
    });
  });
}

/**
 * How long a connection whose upload was refused stays half-closed before it is cut: long enough
 * for the client to read the answer, which a reset would destroy in its receive buffer.
 */
const LINGER_MS = 1000;

/**
 * Ends the connection once `res` is sent, for an answer given before the body was read to the
 * end (413, 503): instead of reading the rest of a large or stalled upload, the server sends its
 * FIN after the answer and cuts the connection LINGER_MS later (at once when the client closes).
 */
export function closeAfterAnswer(res: ServerResponse): void {
  const socket = res.socket;
  if (!socket) return;
  if (!res.headersSent) {
    // Said in the answer too, or a client that pools connections (undici, Go's net/http) puts
    // this one back and may send its next request into it as it closes. Node ends an answer
    // that says so with socket.destroySoon(): closed with the upload's rest unread, the kernel
    // resets the connection and the client loses the answer (EPIPE). Only half-closed here;
    // the timer below cuts it.
    res.setHeader('connection', 'close');
    socket.destroySoon = () => {
      socket.end();
    };
  }
  res.once('finish', () => {
    socket.end();
    // node resumes reading to drop the rest of the body (on the next tick): stop it right after.
    setImmediate(() => socket.pause());
    // Not unref'd: a paused socket keeps nothing alive, so while the server closes (it waits for
    // every connection) this timer may be all the event loop has left. Unref'd, the process then
    // ended in the middle of its stop, the pipeline not flushed (otelake start: exit code 13).
    const timer = setTimeout(() => socket.destroy(), LINGER_MS);
    socket.once('close', () => clearTimeout(timer));
  });
}
