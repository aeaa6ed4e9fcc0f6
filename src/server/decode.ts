// Turns one OTLP request body into normalized column batches, one per table: decompress, decode
// (JSON or protobuf), map to rows (project ids checked), apply the attribute limits, validate and
// normalize each row, build columns.
// This is the CPU-heavy part of ingest; the server runs it in decode worker threads (see
// decode-worker.ts), so only small batches in one buffer each come back to the event loop.

import { BatchBuilder, type PackedBatch, packBatch } from '../delta/batch.ts';
import {
  type BodyFormat,
  decodeRequest,
  loadProtobuf,
  mapRequest,
  OtlpDecodeError,
  type ProtoCodec,
  protobufInstalled,
  type Signal,
} from '../otlp/index.ts';
import { AttributeLimiter, type AttributeLimits } from '../otlp/limits.ts';
import { InvalidProjectIdError } from '../schema/project.ts';
import { type Row, SCHEMAS, type TableName } from '../schema/tables.ts';
import { RowNormalizer, type ValidationSettings } from '../schema/validate.ts';
import { siblingModule, WorkerPool } from '../storage/worker-pool.ts';
import { BodyError, decompress } from './body.ts';

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
      /** Rows of `tables` (every table) by project. */
      projects: Record<string, number>;
    }
  /** The request as a whole is refused (400, or 413 when it inflates past the limit): nothing is stored. */
  | { ok: false; status: 400 | 413; message: string }
  /** Too many bodies wait for a decode worker: the client is asked to retry later (503). */
  | { ok: false; busy: true; message: string };

export class RequestDecoder {
  private readonly proto: ProtoCodec | null;
  private readonly normalizers: Map<TableName, RowNormalizer> = new Map();
  /** Reused from request to request: a batch leaves packed into a buffer of its own. */
  private readonly builders: Map<TableName, BatchBuilder> = new Map();
  private readonly settings: ValidationSettings;
  private readonly limiter: AttributeLimiter;

  constructor(proto: ProtoCodec | null, settings: ValidationSettings, limits: AttributeLimits) {
    this.proto = proto;
    this.settings = settings;
    this.limiter = new AttributeLimiter(limits);
  }

  decode(task: DecodeTask): DecodeResult {
    let body = task.body;
    if (task.codings.length > 0) {
      try {
        body = decompress(
          Buffer.from(body.buffer, body.byteOffset, body.byteLength),
          task.codings,
          task.bodyLimit,
        );
      } catch (err) {
        if (err instanceof BodyError)
          return { ok: false, status: err.statusCode as 400 | 413, message: err.message };
        throw err;
      }
      // An empty body is an empty export request, as when it comes uncompressed.
      if (body.length === 0) return { ok: true, tables: {}, invalidIds: 0, projects: {} };
    }
    let mapped: ReturnType<typeof mapRequest>;
    try {
      const decoded = decodeRequest(task.signal, body, task.format, this.proto);
      mapped = mapRequest(task.signal, decoded, {
        headerProjectId: task.headerProjectId,
        defaultProjectId: task.defaultProjectId,
      });
    } catch (err) {
      if (err instanceof OtlpDecodeError) {
        return { ok: false, status: 400, message: `cannot decode the request: ${err.message}` };
      }
      if (err instanceof InvalidProjectIdError) return { ok: false, status: 400, message: err.message };
      throw err;
    }
    const tables: Partial<Record<TableName, DecodedTable>> = {};
    const projects: Record<string, number> = {};
    for (const [table, rows] of Object.entries(mapped.tables) as [TableName, Row[]][]) {
      this.limiter.apply(table, rows);
      tables[table] = this.build(table, rows, projects);
    }
    return { ok: true, tables, invalidIds: mapped.invalidIds, projects };
  }

  /** Normalizes and packs the rows of a table, counting the valid ones by project into `projects`. */
  private build(table: TableName, rows: readonly Row[], projects: Record<string, number>): DecodedTable {
    let normalizer = this.normalizers.get(table);
    let builder = this.builders.get(table);
    if (!normalizer || !builder) {
      normalizer = new RowNormalizer(SCHEMAS[table], this.settings);
      builder = new BatchBuilder(SCHEMAS[table], 128);
      this.normalizers.set(table, normalizer);
      this.builders.set(table, builder);
    }
    const reasons: Record<string, number> = {};
    // Rows come in runs of one project (a resource's): counted a run at a time.
    let project = '';
    let run = 0;
    try {
      for (const row of rows) {
        const r = normalizer.normalize(row);
        if (typeof r === 'string') {
          reasons[r] = (reasons[r] ?? 0) + 1;
          continue;
        }
        builder.pushValues(r);
        if (row['project_id'] !== project) {
          if (run > 0) projects[project] = (projects[project] ?? 0) + run;
          project = row['project_id'] as string;
          run = 0;
        }
        run++;
      }
      if (run > 0) projects[project] = (projects[project] ?? 0) + run;
      return { batch: packBatch(builder.view()), reasons };
    } finally {
      builder.clear(); // empty for the next request, even after a failure
    }
  }
}

export interface DecoderInit {
  /** Decode protobuf bodies (the optional protobufjs package is there). */
  protobuf: boolean;
  settings: ValidationSettings;
  limits: AttributeLimits;
}

/** Young generation of a decode worker: a request's garbage (a decoded tree) is well below it. */
const DECODER_YOUNG_GENERATION_MB = 16;

/** Bytes of bodies that may wait for or be in a decode worker, at least (see Decoders). */
const DECODE_BACKLOG_BYTES = 256 * 1024 * 1024;

export interface DecodersOptions {
  settings: ValidationSettings;
  limits: AttributeLimits;
  workers: number;
  /** The codec, or null for JSON only. Default: protobuf when the optional protobufjs is installed. */
  proto?: ProtoCodec | null;
  backlogBytes?: number;
}

/**
 * Where request bodies are decoded: a pool of `workers` threads, or the calling thread with 0
 * workers (the same code either way). The bodies read but not yet decoded are bounded by
 * `backlogBytes` (one body is always let in): beyond it a request is answered "busy" at once
 * instead of holding its body in memory.
 */
export class Decoders {
  /** Whether protobuf bodies are decoded; the ingest route refuses them (415) when not. */
  readonly protobuf: boolean;
  private readonly pool: WorkerPool | null;
  private readonly inline: RequestDecoder | null;
  private readonly backlogBytes: number;
  private pendingBytes = 0;

  /** Settles, once, whether protobuf is decoded: the ingest route and /healthz read `protobuf`. */
  static async create(o: DecodersOptions): Promise<Decoders> {
    const protobuf = o.proto !== undefined ? o.proto !== null : await protobufInstalled();
    // Decode workers build their own codec: the event loop needs one only to decode inline.
    const codec = o.workers > 0 || !protobuf ? null : (o.proto ?? (await loadProtobuf()));
    return new Decoders(o, protobuf, codec);
  }

  private constructor(o: DecodersOptions, protobuf: boolean, codec: ProtoCodec | null) {
    const { settings, limits, workers } = o;
    this.protobuf = protobuf;
    this.backlogBytes = o.backlogBytes ?? DECODE_BACKLOG_BYTES;
    if (workers > 0) {
      const workerData: DecoderInit = { protobuf, settings, limits };
      // Two tasks per worker: it decodes the next body while the event loop queues the last one.
      this.pool = new WorkerPool(siblingModule(import.meta.url, 'decode-worker'), {
        size: workers,
        workerData,
        maxInFlight: 2,
        // V8 grew a busy decoder's heap to ~170 MB, ~60 MB of it young (peak server RSS 1.1-1.2 GB with
        // gzip bodies); capped, RSS stayed at 830-900 MiB at the same throughput.
        resourceLimits: { maxYoungGenerationSizeMb: DECODER_YOUNG_GENERATION_MB },
      });
      this.inline = null;
    } else {
      this.pool = null;
      this.inline = new RequestDecoder(codec, settings, limits);
    }
  }

  /** Decodes a body; a body that does not own its whole buffer is copied once to cross threads. */
  async decode(task: DecodeTask): Promise<DecodeResult> {
    if (!this.pool) return this.inline!.decode(task);
    const size = task.body.byteLength;
    if (this.pendingBytes > 0 && this.pendingBytes + size > this.backlogBytes) {
      return { ok: false, busy: true, message: 'the decode workers are busy' };
    }
    let body = task.body;
    if (body.byteOffset !== 0 || body.byteLength !== body.buffer.byteLength) body = new Uint8Array(body);
    this.pendingBytes += size;
    try {
      return await this.pool.run<DecodeResult>('decode', { ...task, body }, [body.buffer as ArrayBuffer]);
    } finally {
      this.pendingBytes -= size;
    }
  }

  async close(): Promise<void> {
    await this.pool?.close();
  }
}
