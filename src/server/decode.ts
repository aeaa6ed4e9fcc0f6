// Turns one OTLP request body into normalized column batches, one per table: decompress, decode
// (JSON or protobuf), map to rows, check the project ids, validate and normalize each row, build columns.
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
import { type Row, SCHEMAS, type TableName } from '../schema/tables.ts';
import { RowNormalizer, type ValidationSettings } from '../schema/validate.ts';
import { siblingModule, WorkerPool } from '../storage/worker-pool.ts';
import { BodyError, decompress } from './body.ts';
import { isValidProjectId, PROJECT_ID_RULE } from './project.ts';

export interface DecodeTask {
  signal: Signal;
  format: BodyFormat;
  /** The body as sent: `codings` (from codingsFor) are undone here, capped at `bodyLimit` bytes. */
  body: Uint8Array;
  codings: readonly string[];
  bodyLimit: number;
  /** X-Project-Id, already checked; when absent each resource's project.id must pass the rule. */
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
    }
  /** The request as a whole is refused (400, or 413 when it inflates past the limit): nothing is stored. */
  | { ok: false; status: 400 | 413; message: string };

/** The first project id in the rows that is not acceptable, or null (rows of a request mostly share one). */
function firstInvalidProject(tables: Partial<Record<TableName, Row[]>>, known: string): string | null {
  let ok = known;
  for (const rows of Object.values(tables)) {
    for (const row of rows) {
      const project = row['project_id'];
      if (project === ok) continue;
      if (typeof project !== 'string' || !isValidProjectId(project)) return String(project);
      ok = project;
    }
  }
  return null;
}

export class RequestDecoder {
  private readonly proto: ProtoCodec | null;
  private readonly normalizers: Map<TableName, RowNormalizer> = new Map();
  /** Reused from request to request: a batch leaves packed into a buffer of its own. */
  private readonly builders: Map<TableName, BatchBuilder> = new Map();
  private readonly settings: ValidationSettings;

  constructor(proto: ProtoCodec | null, settings: ValidationSettings) {
    this.proto = proto;
    this.settings = settings;
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
      if (body.length === 0) return { ok: true, tables: {}, invalidIds: 0 };
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
      throw err;
    }
    if (task.headerProjectId === undefined) {
      const bad = firstInvalidProject(mapped.tables, task.defaultProjectId);
      if (bad !== null) {
        const message = `invalid resource attribute project.id ${JSON.stringify(bad)}: use ${PROJECT_ID_RULE}`;
        return { ok: false, status: 400, message };
      }
    }
    const tables: Partial<Record<TableName, DecodedTable>> = {};
    for (const [table, rows] of Object.entries(mapped.tables) as [TableName, Row[]][]) {
      tables[table] = this.build(table, rows);
    }
    return { ok: true, tables, invalidIds: mapped.invalidIds };
  }

  private build(table: TableName, rows: readonly Row[]): DecodedTable {
    let normalizer = this.normalizers.get(table);
    let builder = this.builders.get(table);
    if (!normalizer || !builder) {
      normalizer = new RowNormalizer(SCHEMAS[table], this.settings);
      builder = new BatchBuilder(SCHEMAS[table], 128);
      this.normalizers.set(table, normalizer);
      this.builders.set(table, builder);
    }
    const reasons: Record<string, number> = {};
    try {
      for (const row of rows) {
        const r = normalizer.normalize(row);
        if (typeof r !== 'string') builder.pushValues(r);
        else reasons[r] = (reasons[r] ?? 0) + 1;
      }
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
}

/** Young generation of a decode worker: a request's garbage (a decoded tree) is well below it. */
const DECODER_YOUNG_GENERATION_MB = 16;

export interface DecodersOptions {
  settings: ValidationSettings;
  workers: number;
  /** The codec, or null for JSON only. Default: protobuf when the optional protobufjs is installed. */
  proto?: ProtoCodec | null;
}

/**
 * Where request bodies are decoded: a pool of `workers` threads, or the calling thread with 0
 * workers (the same code either way). The bodies waiting for a worker are bounded by the server's
 * BodyBudget (body.ts), which counts every body from its first byte until it is answered.
 */
export class Decoders {
  /** Whether protobuf bodies are decoded; the ingest route refuses them (415) when not. */
  readonly protobuf: boolean;
  private readonly pool: WorkerPool | null;
  private readonly inline: RequestDecoder | null;

  /** Settles, once, whether protobuf is decoded: the ingest route and /healthz read `protobuf`. */
  static async create(o: DecodersOptions): Promise<Decoders> {
    const protobuf = o.proto !== undefined ? o.proto !== null : await protobufInstalled();
    // Decode workers build their own codec: the event loop needs one only to decode inline.
    const codec = o.workers > 0 || !protobuf ? null : (o.proto ?? (await loadProtobuf()));
    return new Decoders(o, protobuf, codec);
  }

  private constructor(o: DecodersOptions, protobuf: boolean, codec: ProtoCodec | null) {
    const { settings, workers } = o;
    this.protobuf = protobuf;
    if (workers > 0) {
      const workerData: DecoderInit = { protobuf, settings };
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
      this.inline = new RequestDecoder(codec, settings);
    }
  }

  /** Decodes a body; a body that does not own its whole buffer is copied once to cross threads. */
  async decode(task: DecodeTask): Promise<DecodeResult> {
    if (!this.pool) return this.inline!.decode(task);
    let body = task.body;
    if (body.byteOffset !== 0 || body.byteLength !== body.buffer.byteLength) body = new Uint8Array(body);
    return this.pool.run<DecodeResult>('decode', { ...task, body }, [body.buffer as ArrayBuffer]);
  }

  async close(): Promise<void> {
    await this.pool?.close();
  }
}
