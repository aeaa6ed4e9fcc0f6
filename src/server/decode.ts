// Turns one OTLP request body into normalized column batches, one per table: decompress, map
// (src/otlp: the body read as it stands, JSON or protobuf, into column values, each resource's
// project id held to the rule), apply the attribute limits, validate and normalize each row
// straight into the table's column builder, counting the rows of each project. This is the
// CPU-heavy part of ingest; the server runs it in decode worker threads (see decode-worker.ts), so
// only small batches in one buffer each come back to the event loop. A small body is decoded on
// the event loop instead: posting it to a worker and its result back costs more than decoding it.

import { BatchBuilder, type PackedBatch } from '../delta/batch.ts';
import {
  type BodyFormat,
  mapRequest,
  OtlpDecodeError,
  protobufInstalled,
  type RowSink,
  rowCap,
  type Signal,
  TooManyRowsError,
  tooManyRows,
} from '../otlp/index.ts';
import { AttributeLimiter, type AttributeLimits } from '../otlp/limits.ts';
import type { RefusedProject } from '../schema/project.ts';
import { SCHEMAS, TABLE_NAMES, type TableName } from '../schema/tables.ts';
import { RowNormalizer, type ValidationSettings } from '../schema/validate.ts';
import { siblingModule, WORKER_IDLE_MS, WorkerPool } from '../storage/worker-pool.ts';
import { BodyError, decompress, decompressAsync, gzipAnnouncedSize, isGzip, needsAsync } from './body.ts';
import { KeptDecompressors } from './kept-decompressors.ts';

export interface DecodeTask {
  signal: Signal;
  format: BodyFormat;
  /** The body as sent: `codings` (from codingsFor) are undone here, capped at `bodyLimit` bytes. */
  body: Uint8Array;
  codings: readonly string[];
  bodyLimit: number;
  /** X-Project-Id or the token's project, already checked; when absent each resource's project.id must pass the rule. */
  headerProjectId: string | undefined;
  defaultProjectId: string;
}

export interface DecodedTable {
  /** The valid rows, normalized, packed into one buffer. */
  batch: PackedBatch;
  /** Rejected rows by reason, the first one met first. */
  reasons: Record<string, number>;
}

export type DecodeResult =
  | {
      ok: true;
      tables: Partial<Record<TableName, DecodedTable>>;
      /** Ids that were present but invalid, stored as null. */
      invalidIds: number;
      /** The valid rows of `tables` (every table) by project. */
      projects: Record<string, number>;
    }
  /** The request as a whole is refused (400, or 413 when it inflates past the limit): nothing is stored. */
  | { ok: false; status: 400 | 413; message: string };

/**
 * The task with its body decompressed when one of its codings is undone off the thread
 * (`needsAsync`: lz4), else the task as it is; the refusal when the body cannot be decompressed.
 * RequestDecoder.decode takes the task then.
 */
export async function undoAsyncCodings(task: DecodeTask): Promise<DecodeTask | DecodeResult> {
  if (!needsAsync(task.codings)) return task;
  try {
    const body = await decompressAsync(asBuffer(task.body), task.codings, task.bodyLimit);
    return { ...task, body, codings: [] };
  } catch (err) {
    return refusedBody(err);
  }
}

/** A Buffer over the body's bytes, as the decompressors take it. */
function asBuffer(body: Uint8Array): Buffer {
  return Buffer.from(body.buffer, body.byteOffset, body.byteLength);
}

/** The refusal of a body that cannot be decompressed (a BodyError); any other error goes on. */
function refusedBody(err: unknown): DecodeResult {
  if (err instanceof BodyError)
    return { ok: false, status: err.statusCode as 400 | 413, message: err.message };
  throw err;
}

/** One table's rows of the request being decoded; reused from request to request. */
class TableBuild {
  readonly normalizer: RowNormalizer;
  /** A batch leaves packed into a buffer of its own, so the builder's buffers are kept. */
  readonly builder: BatchBuilder;
  /** Rows mapped, valid or not. */
  rows = 0;
  reasons: Record<string, number> = {};

  constructor(table: TableName, settings: ValidationSettings) {
    this.normalizer = new RowNormalizer(SCHEMAS[table], settings);
    this.builder = new BatchBuilder(SCHEMAS[table], 128);
  }

  clear(): void {
    this.builder.clear();
    this.rows = 0;
    this.reasons = {};
  }
}

/** Why an event or link was rejected: its span was. */
export const SPAN_REJECTED = 'span_rejected';

/**
 * Where spans, span_events and span_links keep a row's trace and span id: the same columns, right
 * after the shared head (checked at load).
 */
const TRACE_ID = SCHEMAS.spans.columns.findIndex((c) => c.name === 'trace_id');
for (const table of ['spans', 'span_events', 'span_links'] as const) {
  const names = SCHEMAS[table].columns.map((c) => c.name);
  if (names[TRACE_ID] !== 'trace_id' || names[TRACE_ID + 1] !== 'span_id')
    throw new Error(`${table}: trace_id and span_id are not at ${TRACE_ID} and ${TRACE_ID + 1}`);
}

/** A span's identity within a request: its trace and span id (null when invalid or absent). */
function spanKey(cells: unknown[], at: number): string {
  return `${cells[at + TRACE_ID]}/${cells[at + TRACE_ID + 1]}`;
}

export class RequestDecoder implements RowSink {
  private readonly protobuf: boolean;
  private readonly settings: ValidationSettings;
  private readonly builds: Partial<Record<TableName, TableBuild>> = {};
  private readonly limiter: AttributeLimiter;
  /** Rows of one table a request may make (413 beyond): the decoded rows are what a tiny body can inflate to. */
  private readonly maxRows: number;
  /** A body is decompressed into a buffer the next one reuses: mapping is done with it by then. */
  private readonly decompressors = new KeptDecompressors();
  /**
   * Spans of this request that were rejected (by trace and span id): their events and links are
   * rejected too, so that no table holds rows of a span the spans table does not. Null while none.
   */
  private rejectedSpans: Set<string> | null = null;
  /** Valid rows by project, the current run of rows of one project not yet added. */
  private projects: Record<string, number> = {};
  private runProject = '';
  private run = 0;

  /** `protobuf`: whether protobuf bodies are decoded (the optional protobufjs package is there). */
  constructor(protobuf: boolean, settings: ValidationSettings, limits: DecodeLimits) {
    this.protobuf = protobuf;
    this.settings = settings;
    this.limiter = new AttributeLimiter(limits);
    this.maxRows = rowCap(limits.maxRows);
  }

  decode(task: DecodeTask): DecodeResult {
    if (task.format === 'protobuf' && !this.protobuf) {
      throw new Error('protobuf bodies need the optional package protobufjs');
    }
    let body = task.body;
    if (task.codings.length > 0) {
      try {
        body = decompress(asBuffer(body), task.codings, task.bodyLimit, this.decompressors);
      } catch (err) {
        return refusedBody(err);
      }
      // An empty body is an empty export request, as when it comes uncompressed.
      if (body.length === 0) return { ok: true, tables: {}, invalidIds: 0, projects: {} };
    }
    try {
      let invalidIds: number;
      try {
        ({ invalidIds } = mapRequest(
          task.signal,
          task.format,
          body,
          {
            headerProjectId: task.headerProjectId,
            defaultProjectId: task.defaultProjectId,
            maxRows: this.maxRows,
          },
          this,
        ));
      } catch (err) {
        if (err instanceof TooManyRowsError) return { ok: false, status: err.status, message: err.message };
        if (err instanceof OtlpDecodeError) {
          return { ok: false, status: 400, message: `cannot decode the request: ${err.message}` };
        }
        throw err;
      }
      const builds = TABLE_NAMES.flatMap((table) => {
        const t = this.builds[table];
        return t === undefined || t.rows === 0 ? [] : [[table, t] as const];
      });
      const tables: Partial<Record<TableName, DecodedTable>> = {};
      for (const [table, t] of builds) tables[table] = { batch: t.builder.pack(), reasons: t.reasons };
      this.endRun();
      return { ok: true, tables, invalidIds, projects: this.projects };
    } finally {
      this.restart(); // empty for the next request, even after a failure
      this.limiter.forget();
    }
  }

  /** A mapped row: its attributes limited, then validated and normalized into the table's builder. */
  row(table: TableName, cells: unknown[], at: number): void {
    let t = this.builds[table];
    if (t === undefined) {
      t = new TableBuild(table, this.settings);
      this.builds[table] = t;
    }
    if (++t.rows > this.maxRows) throw tooManyRows(this.maxRows, table);
    // Every table's first column: a valid id, or a RefusedProject (the resource's project.id broke the rule).
    const project = cells[at];
    if (typeof project !== 'string') {
      const { reason } = project as RefusedProject;
      t.reasons[reason] = (t.reasons[reason] ?? 0) + 1;
      return;
    }
    // A span's rows come before its events' and links' (walk.ts hands the tables on in order).
    if (this.rejectedSpans !== null && table !== 'spans' && this.rejectedSpans.has(spanKey(cells, at))) {
      t.reasons[SPAN_REJECTED] = (t.reasons[SPAN_REJECTED] ?? 0) + 1;
      return;
    }
    this.limiter.apply(table, cells, at);
    const reason = t.normalizer.normalizeValues(cells, at);
    if (reason !== null) {
      t.reasons[reason] = (t.reasons[reason] ?? 0) + 1;
      if (table === 'spans') {
        this.rejectedSpans ??= new Set();
        this.rejectedSpans.add(spanKey(cells, at));
      }
      return;
    }
    t.builder.pushValues(cells, at);
    // Rows come in runs of one project (a resource's): counted a run at a time.
    if (project !== this.runProject) {
      this.endRun();
      this.runProject = project;
    }
    this.run++;
  }

  private endRun(): void {
    if (this.run > 0) this.projects[this.runProject] = (this.projects[this.runProject] ?? 0) + this.run;
    this.run = 0;
  }

  restart(): void {
    for (const t of Object.values(this.builds)) t.clear();
    this.rejectedSpans = null;
    this.projects = {};
    this.run = 0;
  }
}

/** The attribute limits, and the rows of one table a request may make (default MAX_HELD_ROWS). */
export interface DecodeLimits extends AttributeLimits {
  maxRows?: number;
}

export interface DecoderInit {
  /** Decode protobuf bodies (the optional protobufjs package is there). */
  protobuf: boolean;
  settings: ValidationSettings;
  limits: DecodeLimits;
}

/**
 * Young generation of a decode worker: a request's garbage (its strings and cells) is well below
 * it. A process started with --max-semi-space-size (the server: node-flags.ts) sizes every
 * isolate's by that flag instead.
 */
const DECODER_YOUNG_GENERATION_MB = 16;

/**
 * While no decode worker has loaded, bodies up to this size (as sent and decompressed) are decoded
 * on the event loop rather than waiting for one: an SDK's batch of 512 items (~50-250 KB), not a
 * Collector's 8,192, which would hold the loop longer than the wait.
 */
const WARMING_BODY_BYTES = 512 * 1024;

/**
 * Bodies of at most this many bytes, as sent and decompressed, are decoded on the event loop even
 * when there are decode workers. Posting a body to a worker and its result back cost ~55-120 µs of
 * CPU on a slow day of this project's 2-core machine (two threads woken, the result serialized),
 * about what decoding 10 items does; 8 KiB decode there in ~0.1-0.3 ms. With 10-item requests
 * (1.8-7.2 KB, what an SDK sends under light load) the server took 4-29% less CPU per item
 * (median 23%) and 0.88-1.23x the items/s (median 1.08x: the event loop, now ~80% busy, is the
 * limit), the decode workers never started (peak RSS 168-194 against 211-249 MiB), and the
 * half-load p99 was no higher (docs/benchmarks.md). Not more: at 32 KiB, with 30-item requests
 * (9-20 KB) decoded there, the half-load p99 over protobuf was 20.1-26.7 ms against 10.5-19.6 in
 * the workers, and logs over JSON went 11-26% slower. The bench's 100-item requests (24-99 KB) go
 * to the workers.
 */
export const INLINE_BODY_BYTES = 8 * 1024;

export interface DecodersOptions {
  settings: ValidationSettings;
  limits: DecodeLimits;
  workers: number;
  /** Whether protobuf bodies are decoded. Default: when the optional protobufjs is installed. */
  protobuf?: boolean;
  /** Bodies decoded on the event loop even with workers (INLINE_BODY_BYTES; 0: none). */
  inlineBodyBytes?: number;
}

/** Bodies decoded so far, by where (/healthz `decode`). */
export interface DecodeStats {
  /** Bodies decoded on the event loop and by the workers since start. */
  event_loop: number;
  workers: number;
  /** Workers running now, their module loaded (they stop after WORKER_IDLE_MS idle). */
  running: number;
}

/**
 * Where request bodies are decoded: a pool of `workers` threads, or the calling thread with 0
 * workers and for a small body (the same code either way). The bodies waiting for a worker are
 * bounded by the server's BodyBudget (body.ts), which counts every body from its first byte until
 * it is answered.
 */
export class Decoders {
  /** Whether protobuf bodies are decoded; the ingest route refuses them (415) when not. */
  readonly protobuf: boolean;
  private readonly pool: WorkerPool | null;
  /** Decodes on the event loop: every body without workers, small ones with them. */
  private readonly inline: RequestDecoder;
  private readonly inlineBodyBytes: number;
  private readonly counts = { event_loop: 0, workers: 0 };

  /** Settles, once, whether protobuf is decoded: the ingest route and /healthz read `protobuf`. */
  static async create(o: DecodersOptions): Promise<Decoders> {
    return new Decoders(o, o.protobuf ?? (await protobufInstalled()));
  }

  private constructor(o: DecodersOptions, protobuf: boolean) {
    const { settings, limits, workers } = o;
    this.protobuf = protobuf;
    this.inline = new RequestDecoder(protobuf, settings, limits);
    this.inlineBodyBytes = o.inlineBodyBytes ?? INLINE_BODY_BYTES;
    if (workers > 0) {
      const workerData: DecoderInit = { protobuf, settings, limits };
      // Two tasks per worker: it decodes the next body while the event loop queues the last one.
      this.pool = new WorkerPool(siblingModule(import.meta.url, 'decode-worker'), {
        name: 'otelake-decode',
        size: workers,
        workerData,
        maxInFlight: 2,
        // V8 grew a busy decoder's heap to ~170 MB, ~60 MB of it young (peak server RSS 1.1-1.2 GB with
        // gzip bodies); capped, RSS stayed at 830-900 MiB at the same throughput.
        resourceLimits: { maxYoungGenerationSizeMb: DECODER_YOUNG_GENERATION_MB },
        idleMs: WORKER_IDLE_MS,
      });
    } else this.pool = null;
  }

  /**
   * Decodes a body: on the event loop without workers or when it is small (`small`), else in a
   * worker; a body that does not own its whole buffer is copied once to cross threads.
   */
  async decode(task: DecodeTask): Promise<DecodeResult> {
    let limit = this.inlineBodyBytes;
    if (this.pool && this.pool.readyWorkers === 0) {
      // No worker has loaded (the first body, or they stopped idle): one starts now, which takes
      // 0.3-0.4 s on a slow day. Bodies up to WARMING_BODY_BYTES are decoded here meanwhile.
      this.pool.warm();
      limit = Math.max(limit, WARMING_BODY_BYTES);
    }
    const here = this.pool ? this.small(task, limit) : task;
    if (here !== null) {
      this.counts.event_loop++;
      const ready = await undoAsyncCodings(here);
      return 'ok' in ready ? ready : this.inline.decode(ready);
    }
    this.counts.workers++;
    let body = task.body;
    if (body.byteOffset !== 0 || body.byteLength !== body.buffer.byteLength) body = new Uint8Array(body);
    return this.pool!.run<DecodeResult>('decode', { ...task, body }, [body.buffer as ArrayBuffer]);
  }

  /**
   * The task with its body decompressed when that body is at most `inlineBodyBytes` both as sent
   * and decompressed (the output is capped there, so a small compressed body that expands far
   * costs the event loop no more); null for any other, which a worker decodes (and words the
   * error of one that cannot be decompressed).
   */
  private small(task: DecodeTask, inlineBodyBytes: number): DecodeTask | null {
    const limit = Math.min(inlineBodyBytes, task.bodyLimit);
    const body = task.body;
    if (body.length > limit || needsAsync(task.codings)) return null;
    if (task.codings.length === 0) return task;
    // A gzip body whose trailer announces more than the limit goes to a worker untried: inflating
    // its first 8 KiB here only to give up cost the event loop 30-60 µs a request. A trailer that
    // understates is caught by the capped output below, as before.
    const first = task.codings[0]!;
    if (isGzip(first) && (gzipAnnouncedSize(body) ?? 0) > limit) return null;
    try {
      const plain = decompress(asBuffer(body), task.codings, limit);
      return { ...task, body: plain, codings: [] };
    } catch (err) {
      if (err instanceof BodyError) return null;
      throw err;
    }
  }

  stats(): DecodeStats {
    return { ...this.counts, running: this.pool?.readyWorkers ?? 0 };
  }

  async close(): Promise<void> {
    await this.pool?.close();
  }
}
