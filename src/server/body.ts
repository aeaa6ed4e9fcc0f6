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
 * At most this many codings besides identity. Each may inflate up to the body limit, so stacked
 * ones add up: a 64 KB body of seven gzip layers, each ~56 MB, took 0.37 s of CPU to undo
 * against 0.05 s for one layer. No exporter stacks codings (the Collector takes one); HTTP allows it.
 */
const MAX_CODINGS = 2;

/**
 * The codings to undo, in order, for a Content-Encoding header (codings are listed in the order
 * applied). Throws a BodyError (415) naming an unknown coding, or for more than MAX_CODINGS.
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
  if (out.length > MAX_CODINGS) {
    throw new BodyError(
      415,
      `Content-Encoding "${header.slice(0, 100)}" stacks ${out.length} codings: at most ${MAX_CODINGS} are undone`,
    );
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
 * How long a body may wait for room in all before it is refused (503): the bodies ahead of it
 * finish being read and decoded meanwhile, as long as their clients send. In all, not each time:
 * bodies let in a chunk at a time as room came back kept waiting anew, and ran into the request
 * timeout (408, which OTLP clients do not retry) instead.
 */
export const BODY_WAIT_MS = 2000;

/** A body waiting for room: what it needs, and what to do when it gets it or is refused. */
interface Waiter {
  lease: BodyLease;
  bytes: number;
  admit: () => void;
  refuse: () => void;
  timer: NodeJS.Timeout;
}

/**
 * The bytes of request bodies the server holds at once (server_config.max_body_bytes_in_flight),
 * from the first byte read until the request is answered: the body as it arrives while it is read
 * and decoded, then the rows decoded from it until they are queued. One accounting for every
 * stage, so that a flood of large, slow or stalled uploads is refused (503) instead of held in
 * memory.
 *
 * Bytes count as they arrive, not as announced: four connections announcing 64 MiB and sending a
 * byte a second held the whole default budget while it counted announced lengths, and every other
 * client got 503 until the request timeout (a security review). A body whose next bytes do not fit
 * is not refused at once either: it stops reading and waits (first come, first served, up to
 * BODY_WAIT_MS) while the bodies ahead of it are read and decoded. Refused part way, its bytes
 * would be garbage: eight Collector-size uploads into a 256 MiB container got the server killed
 * for its memory so. While bodies wait, or when the budget is spent, a new body is refused
 * before any of it is read. When every body holding bytes is waiting, none can finish: the
 * newest is refused, and its room goes to the oldest.
 */
export class BodyBudget {
  readonly limit: number;
  private held = 0;
  /** Requests refused because their body did not fit. */
  refused = 0;
  /** Leases holding bytes now. */
  private holders = 0;
  private readonly waiting: Waiter[] = [];
  private nextSerial = 0;

  constructor(limit: number) {
    if (!(Number.isSafeInteger(limit) && limit > 0)) throw new TypeError('the body budget must be > 0 bytes');
    this.limit = limit;
  }

  /** Bytes held now. */
  get bytes(): number {
    return this.held;
  }

  /** Bodies waiting for room now. */
  get waiters(): number {
    return this.waiting.length;
  }

  /** A handle for one request's bytes; release it once the request is answered. */
  lease(): BodyLease {
    return new BodyLease(this, this.nextSerial++);
  }

  /** Whether `n` more bytes fit beside `own` bytes already held by the asking request. */
  fits(n: number, own: number): boolean {
    // A body alone always fits: a budget below body_limit_bytes still serves one large body.
    return this.held === own || this.held + n <= this.limit;
  }

  /** Whether a new body is refused before it is read: bodies wait for room, or none is left. */
  spent(): boolean {
    return this.waiting.length > 0 || (this.holders > 0 && this.held >= this.limit);
  }

  /** Called by a lease whose bytes change by `delta` (`was`: what it held before). */
  changed(delta: number, was: number): void {
    this.held += delta;
    const now = was + delta;
    if (was === 0 && now > 0) this.holders++;
    else if (was > 0 && now === 0) this.holders--;
    if (delta < 0) this.admitWaiting();
  }

  /**
   * Queues `lease` for `bytes` more; `admit` is called once they are taken for it, `refuse` at
   * `deadline` (a Date.now() time) or to end a standstill. `cancel` (the returned function) takes
   * it out of the queue without either. Neither is called before `wait` returns: its caller
   * keeps `cancel` until then. Called from within, an older body whose wait ended a standstill
   * was admitted (the newer one refused gave its bytes back at once) before its reader knew it
   * waited, and then waited for ever: its request never answered, its bytes held.
   */
  wait(lease: BodyLease, bytes: number, deadline: number, admit: () => void, refuse: () => void): () => void {
    const waiter: Waiter = {
      lease,
      bytes,
      admit,
      refuse,
      timer: setTimeout(() => this.refuseWaiter(waiter), Math.max(0, deadline - Date.now())),
    };
    this.waiting.push(waiter);
    queueMicrotask(() => this.admitWaiting());
    return () => this.remove(waiter);
  }

  /** The waiters whose bytes fit now, in order; then, at a standstill, the newest is refused. */
  private admitWaiting(): void {
    while (this.waiting.length > 0) {
      const first = this.waiting[0]!;
      if (first.lease.grow(first.bytes)) {
        this.remove(first);
        first.admit();
        continue;
      }
      // Every body holding bytes waits: none will give any back. The newest of them is refused,
      // and gives its bytes back once answered.
      let newest: Waiter | null = null;
      let waitingHolders = 0;
      for (const w of this.waiting) {
        if (w.lease.bytes === 0) continue;
        waitingHolders++;
        if (newest === null || w.lease.serial > newest.lease.serial) newest = w;
      }
      if (newest === null || waitingHolders < this.holders) return;
      this.refuseWaiter(newest);
    }
  }

  private refuseWaiter(waiter: Waiter): void {
    if (!this.remove(waiter)) return;
    this.refused++;
    waiter.refuse();
  }

  private remove(waiter: Waiter): boolean {
    const at = this.waiting.indexOf(waiter);
    if (at < 0) return false;
    this.waiting.splice(at, 1);
    clearTimeout(waiter.timer);
    return true;
  }
}

/** The bytes one request holds of a BodyBudget. */
export class BodyLease {
  private held = 0;
  private released = false;
  readonly budget: BodyBudget;
  /** Leases are numbered as requests come: the higher, the newer. */
  readonly serial: number;

  constructor(budget: BodyBudget, serial: number) {
    this.budget = budget;
    this.serial = serial;
  }

  get bytes(): number {
    return this.held;
  }

  /** Takes `n` more bytes if they fit (true), else nothing (false). */
  grow(n: number): boolean {
    if (this.released) return false;
    if (!this.budget.fits(n, this.held)) return false;
    this.set(this.held + n);
    return true;
  }

  /**
   * Holds exactly `n` bytes from now on, whether they fit or not: what the request turned into
   * (its decoded rows) is already in memory, and counts until it is answered.
   */
  hold(n: number): void {
    if (this.released) return;
    this.set(n);
  }

  /** Gives the bytes back (idempotent). */
  release(): void {
    if (this.released) return;
    this.set(0);
    this.released = true;
  }

  private set(n: number): void {
    const was = this.held;
    this.held = n;
    this.budget.changed(n - was, was);
  }
}

function tooBusy(budget: BodyBudget): BodyError {
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
 * Bodies announced up to this size are copied into one buffer of that size as they arrive; larger
 * ones are kept as the chunks that came and joined at the end. The buffer is made at the first
 * chunk, before the rest has come: what a request may set aside without sending it.
 */
const PREALLOCATED_BODY_BYTES = 1024 * 1024;

/**
 * The whole body of `req` as one buffer, as sent (at most `limit` bytes), its bytes taken from
 * `lease` as they arrive (see BodyBudget: a chunk that does not fit waits for room). Rejects with
 * a BodyError: 413 over the limit (at once when announced so), 503 when the budget is spent or
 * the body waited for room in vain, 400 when the client aborts. On a refusal reading stops: once
 * answered, node reads and drops the rest of the body to keep the connection, unless the answer
 * ends it (closeAfterAnswer).
 */
export function readBody(req: IncomingMessage, limit: number, lease: BodyLease): Promise<Buffer> {
  const declared = req.headers['content-length'];
  const length = declared === undefined ? -1 : Number(declared);
  if (length > limit) return Promise.reject(tooLarge(limit, 'size (Content-Length)'));
  if (length !== 0 && lease.budget.spent()) {
    lease.budget.refused++;
    return Promise.reject(tooBusy(lease.budget));
  }
  return new Promise((resolve, reject) => {
    // A body announced up to PREALLOCATED_BODY_BYTES is copied once into place; else chunks are
    // joined at the end. `into` is allocated at the first chunk, unless that chunk is the whole
    // body: a buffer of its own, not a slice of Buffer's pool (anything under 32 KiB with the 64
    // KiB pool of newer Nodes), so that a decode worker takes it by transfer without a second
    // copy (6-7 µs, 30 KB).
    let sized = length > 0 && length <= PREALLOCATED_BODY_BYTES;
    let into: Buffer | null = null;
    const chunks: Buffer[] = [];
    let received = 0;
    let settled = false;
    let cancelWait: (() => void) | null = null;
    /** When this body has waited BODY_WAIT_MS for room, counted from its first wait. */
    let waitDeadline = 0;
    const fail = (err: Error): void => {
      if (settled) return;
      settled = true;
      cancelWait?.();
      req.off('data', onData);
      req.pause();
      // Its bytes are dropped: their room goes to the bodies waiting now, not once answered.
      lease.release();
      reject(err);
    };
    const take = (chunk: Buffer): void => {
      const next = received + chunk.length;
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
        chunks.push(chunk);
      }
      received = next;
    };
    const onData = (chunk: Buffer): void => {
      if (received + chunk.length > limit) {
        fail(tooLarge(limit, 'size'));
        return;
      }
      if (lease.grow(chunk.length)) {
        take(chunk);
        return;
      }
      // No room: stop reading until the bodies ahead give some back.
      req.pause();
      if (waitDeadline === 0) waitDeadline = Date.now() + BODY_WAIT_MS;
      cancelWait = lease.budget.wait(
        lease,
        chunk.length,
        waitDeadline,
        () => {
          cancelWait = null;
          take(chunk);
          if (req.readableEnded) finish();
          else req.resume();
        },
        () => fail(tooBusy(lease.budget)),
      );
    };
    const finish = (): void => {
      if (settled || cancelWait !== null) return; // the last chunk still waits for room
      settled = true;
      if (sized)
        resolve(into === null ? Buffer.alloc(0) : received === length ? into : into.subarray(0, received));
      else resolve(chunks.length === 1 ? chunks[0]! : joined(chunks, received));
    };
    req.on('data', onData);
    req.once('end', finish);
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
