// The write-ahead log. A request is acknowledged only once its rows are in the log and synced to
// disk; one synced write (O_DSYNC) serves every request that arrived while the previous one ran
// (group commit). With O_DSYNC the event loop makes that write itself, at the end of the loop's
// turn, so that it holds every record decoded in that turn: handing it to libuv's threads cost two
// thread wake-ups per write, and on busy cores each could wait a time slice (see writeAt). While
// the loop is saturated, or after a slow write, libuv's pool makes it instead (write-path.ts).
// Each row gets a sequence number; the Delta commit that stores rows records, in a `txn` action,
// the sequence number it covers up to, so that replay after a crash writes every row exactly once
// (`replay` here, and the logger's, which skips what the tables have). A segment whose rows are all
// committed (or given up) is kept as a spare or deleted (see below).
//
// Segment `<ordinal>.wal`: a 64-byte header (magic, the log's epoch, the first sequence number,
// and how many bytes of the previous segment are valid when a failed write could not be cut off
// there), then records. A record is one request's rows for every table it feeds, so a request is
// durable whole or not at all: length, CRC-32 of the payload, payload. Payload: the entry count,
// one 32-byte header per entry (table, rows, first sequence number, day, bytes), then each entry's
// packed batch (delta/batch.ts), 8-byte aligned. Replay reads a segment up to its first invalid
// record: a torn tail is a write that was never acknowledged.
//
// Segments are written ahead and reused. A sync that extends a file must also commit the file
// system's journal, and on ext4 that commit waits for whatever else is being written (the Parquet
// files): that made the log's sync tail. So once a segment is half full under load, the next one
// is prepared: zeros written to its full size and synced (`spare-<n>.wal-spare`), a chunk at a
// time, as the log's syncs still wait behind what the disk is flushing. A segment whose rows are
// all committed becomes a spare again instead of being deleted (the log's folder synced before it
// can be written over, so that the commits that emptied it are on disk first: see dropIfDone).
// Writing into a spare changes no metadata, and its sync waits for no journal commit. A spare's
// old records cannot be taken for new ones: since `OTLKWAL2` a record's CRC starts from the epoch
// and the segment's ordinal, which never repeat, and replay also wants each record to continue
// the sequence numbers.

import { randomUUID } from 'node:crypto';
import { constants, writevSync } from 'node:fs';
import { type FileHandle, mkdir, open, readdir, rename, stat, unlink } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { crc32 as zlibCrc32 } from 'node:zlib';
import type { PackedBatch } from '../delta/batch.ts';
import { TABLE_NAMES, type TableName } from '../schema/tables.ts';
import { diskFullNote, fsyncPath } from '../storage/files.ts';
import { WritePath } from './write-path.ts';

/**
 * CRC-32 (zlib's polynomial): @node-rs/crc32's, 3-4x faster than zlib's on a 35 KB record (3.7-5.1
 * against 14.2-14.4 µs, on the event loop for every request), or zlib's where that package's
 * native binary does not load. Both give the same values, so either reads what the other wrote.
 */
const crc32 = ((): ((data: Uint8Array, seed?: number) => number) => {
  try {
    return (createRequire(import.meta.url)('@node-rs/crc32') as { crc32: typeof zlibCrc32 }).crc32;
  } catch {
    return zlibCrc32;
  }
})();

export interface WalEntry {
  table: TableName;
  /** The UTC day the rows are filed under. */
  day: string;
  batch: PackedBatch;
}

/** An entry as it is in the log: its rows have sequence numbers `seq` .. `seq + rows - 1`. */
export interface LoggedEntry extends WalEntry {
  seq: number;
}

export interface WalOptions {
  /** A segment is closed once it holds this many bytes (a record is never split). Default 64 MiB. */
  segmentBytes?: number;
  /**
   * Open segments with O_DSYNC, so that a write returns once its data is on disk (one call).
   * Default: where the platform has O_DSYNC (not on Windows); false: each write is followed by
   * fdatasync, the same guarantee in two calls.
   */
  dsync?: boolean;
  /**
   * With O_DSYNC the event loop writes the log itself (see writeAt); a write that takes longer than
   * this (a slow or stalled disk) hands the next ones to libuv's pool for a while (write-path.ts),
   * so that the loop keeps serving other requests while the disk is slow. Default 50 ms.
   */
  eventLoopWriteMaxMs?: number;
}

export interface WalStats {
  segments: number;
  bytes: number;
  /** Segment files written ahead (or kept from use) for the next segments. */
  spare_segments: number;
  /** Rows in the log not yet committed to their tables (or given up). */
  pending_rows: number;
  groups_written: number;
  /** Where the synced writes run now: the event loop, or libuv's pool (write-path.ts). */
  write_path: 'event_loop' | 'pool';
  last_error: { at: string; message: string } | null;
}

const MAGIC = Buffer.from('OTLKWAL2');
/** Segments written before records were tied to their segment: their CRCs start from 0. */
const MAGIC_V1 = Buffer.from('OTLKWAL1');
const HEADER_BYTES = 64;
const RECORD_HEADER = 8;
const ENTRY_HEADER = 32;
const DEFAULT_SEGMENT_BYTES = 64 * 1024 * 1024;
/** An active segment this large whose rows are all committed is replaced (kept as a spare or deleted) before the next write. */
const RECYCLE_EMPTY_BYTES = 1024 * 1024;
const SEGMENT_NAME = /^(\d{12})\.wal$/;
/**
 * A write on the event loop slower than this means the disk is stalling. Under full load here the
 * loop's synced writes took 0.17 ms at the median, 1.5-2.7 ms at p99, 14-18 ms at most.
 */
const DEFAULT_EVENT_LOOP_WRITE_MAX_MS = 50;
/**
 * Writes this slow on average mean a slow disk: a group may gather (see gather). This project's
 * test disk: 0.5 ms at the median, a stall of 14-18 ms every ~5 s; throttled to 200 IOPS,
 * 2 ms at the median and 69 at p90; to 50 IOPS, 100-300 ms.
 */
const SLOW_WRITE_MS = 10;
/** The weight of the newest write in the average (writeMs). */
const WRITE_MS_WEIGHT = 0.2;
/** The longest a group waits for more records on a slow disk. */
const MAX_GATHER_MS = 50;
/** A prepared or reused segment file waiting to become the next segment. */
const SPARE_NAME = /^spare-\d+\.wal-spare$/;
/** Spares kept at most: enough for the segments a busy log goes through before they are committed. */
const MAX_SPARES = 2;
/** A spare's zeros are written, and synced, this many bytes at a time. */
const ZERO_CHUNK = 1024 * 1024;
const DAMAGED_DIR = 'damaged';
/** O_DSYNC where the platform has it (Windows has not). */
const O_DSYNC: number | undefined = constants.O_DSYNC;

const pad8 = (n: number) => (8 - (n % 8)) % 8;
const ZEROS = new Uint8Array(8);

function segmentName(ordinal: number): string {
  return `${String(ordinal).padStart(12, '0')}.wal`;
}

interface Segment {
  ordinal: number;
  path: string;
  firstSeq: number;
  bytes: number;
  /** Rows appended and not yet released. */
  live: number;
  /** Where its records' CRCs start (recordSeed). */
  seed: number;
}

/** A record's CRC starts from this, so that the records of a reused file's earlier life do not pass. */
function recordSeed(epoch: string, ordinal: number): number {
  const b = Buffer.alloc(44);
  b.write(epoch, 0, 36, 'latin1');
  b.writeBigUInt64LE(BigInt(ordinal), 36);
  return crc32(b);
}

interface Pending {
  entries: readonly WalEntry[];
  onDurable: (logged: LoggedEntry[]) => void;
  resolve: () => void;
  reject: (err: Error) => void;
}

/** A WAL segment that cannot be read (bad header): moved aside, never replayed. */
export class WalDamageError extends Error {
  override name = 'WalDamageError';
}

function encodeHeader(epoch: string, firstSeq: number, prevValidBytes: number): Buffer {
  const h = Buffer.alloc(HEADER_BYTES);
  MAGIC.copy(h, 0);
  h.write(epoch, 8, 36, 'latin1');
  h.writeBigUInt64LE(BigInt(firstSeq), 48);
  h.writeBigInt64LE(BigInt(prevValidBytes), 56);
  return h;
}

function decodeHeader(
  h: Buffer,
): { epoch: string; firstSeq: number; prevValidBytes: number; seeded: boolean } | null {
  if (h.length < HEADER_BYTES) return null;
  const seeded = h.subarray(0, 8).equals(MAGIC);
  if (!seeded && !h.subarray(0, 8).equals(MAGIC_V1)) return null;
  return {
    seeded,
    epoch: h.toString('latin1', 8, 44),
    firstSeq: Number(h.readBigUInt64LE(48)),
    prevValidBytes: Number(h.readBigInt64LE(56)),
  };
}

/** The buffers of one record (header, entry headers, packed batches) for entries numbered from `seq`. */
function encodeRecord(
  entries: readonly WalEntry[],
  seq: number,
  seed: number,
): { buffers: Uint8Array[]; bytes: number } {
  const head = Buffer.alloc(RECORD_HEADER + 4 + entries.length * ENTRY_HEADER);
  head.writeUInt32LE(entries.length, RECORD_HEADER);
  const buffers: Uint8Array[] = [head];
  let payload = head.length - RECORD_HEADER;
  entries.forEach((e, i) => {
    const at = RECORD_HEADER + 4 + i * ENTRY_HEADER;
    const size = e.batch.packed.byteLength;
    head.writeUInt8(TABLE_NAMES.indexOf(e.table), at);
    head.writeUInt32LE(e.batch.numRows, at + 4);
    head.writeBigUInt64LE(BigInt(seq), at + 8);
    head.write(e.day, at + 16, 10, 'latin1');
    head.writeUInt32LE(size, at + 28);
    seq += e.batch.numRows;
    buffers.push(new Uint8Array(e.batch.packed));
    if (pad8(size) > 0) buffers.push(ZEROS.subarray(0, pad8(size)));
    payload += size + pad8(size);
  });
  let crc = crc32(head.subarray(RECORD_HEADER), seed);
  for (let i = 1; i < buffers.length; i++) crc = crc32(buffers[i]!, crc);
  head.writeUInt32LE(payload, 0);
  head.writeUInt32LE(crc, 4);
  return { buffers, bytes: RECORD_HEADER + payload };
}

/** The entries of a record's payload, or null when it is not a valid one. */
function decodeRecord(payload: Buffer): LoggedEntry[] | null {
  if (payload.length < 4) return null;
  const n = payload.readUInt32LE(0);
  let at = 4 + n * ENTRY_HEADER;
  if (at > payload.length) return null;
  const out: LoggedEntry[] = [];
  for (let i = 0; i < n; i++) {
    const h = 4 + i * ENTRY_HEADER;
    const table = TABLE_NAMES[payload.readUInt8(h)];
    const size = payload.readUInt32LE(h + 28);
    if (table === undefined || at + size > payload.length) return null;
    // Copied into a buffer of its own: a packed batch's arrays are views from its offset 0.
    const packed = payload.buffer.slice(
      payload.byteOffset + at,
      payload.byteOffset + at + size,
    ) as ArrayBuffer;
    out.push({
      table,
      day: payload.toString('latin1', h + 16, h + 26),
      seq: Number(payload.readBigUInt64LE(h + 8)),
      batch: { numRows: payload.readUInt32LE(h + 4), packed },
    });
    at += size + pad8(size);
  }
  return out;
}

/**
 * Reads the valid records of a segment, up to `limit` bytes: the first invalid one ends it, and so
 * does one that does not continue the sequence numbers.
 */
async function* readSegment(segment: Segment, limit: number): AsyncGenerator<LoggedEntry[]> {
  const fh = await open(segment.path, 'r');
  let seq = segment.firstSeq;
  try {
    const size = Math.min((await fh.stat()).size, limit);
    let at = HEADER_BYTES;
    const head = Buffer.alloc(RECORD_HEADER);
    while (at + RECORD_HEADER <= size) {
      await fh.read(head, 0, RECORD_HEADER, at);
      const length = head.readUInt32LE(0);
      if (length === 0 || at + RECORD_HEADER + length > size) return;
      const payload = Buffer.alloc(length);
      await fh.read(payload, 0, length, at + RECORD_HEADER);
      if (crc32(payload, segment.seed) !== head.readUInt32LE(4)) return;
      const entries = decodeRecord(payload);
      if (!entries || (entries.length > 0 && entries[0]!.seq !== seq)) return;
      for (const e of entries) seq = e.seq + e.batch.numRows;
      yield entries;
      at += RECORD_HEADER + length;
    }
  } finally {
    await fh.close();
  }
}

export class WriteAheadLog {
  readonly dir: string;
  /** Names this log in the Delta `txn` actions of the commits that store its rows. */
  readonly appId: string;
  private readonly epoch: string;
  private readonly segmentBytes: number;
  /** Segments are opened with O_DSYNC (else each write is followed by fdatasync). */
  private readonly dsync: boolean;
  /** Where each synced write runs (with O_DSYNC): the event loop or libuv's pool. */
  private readonly writePath: WritePath;
  /** Oldest first; the last one may be the active one. */
  private readonly segments: Segment[] = [];
  private active: { segment: Segment; fh: FileHandle } | null = null;
  /** Valid bytes of the segment before the next one, when a failed write could not be cut off. */
  private prevValidBytes = -1;
  private nextSeq: number;
  private nextOrdinal: number;
  private pending: Pending[] = [];
  private writing: Promise<void> | null = null;
  private closed = false;
  private groupsWritten = 0;
  /**
   * How long a group's write and sync takes (a moving average: one stall of a fast disk barely
   * moves it), and the records expected in the next group: the last group's (their clients,
   * answered, send again) and those that came meanwhile.
   */
  private writeMs = 0;
  private expectedGroup = 0;
  /** Wakes a group waiting for more records (gather) once it has as many as expected. */
  private gathered: (() => void) | null = null;
  private lastError: { at: string; message: string } | null = null;
  /** Told when writes start failing (the error) and when they work again (null), once each time. */
  onProblem: (err: Error | null) => void = () => {};
  /** Segments found at open, with the bytes of each that may be replayed. */
  private readonly found: { segment: Segment; limit: number }[];
  /** Found segments not yet replayed: kept whatever their count of live rows. */
  private readonly unreplayed: Set<Segment>;
  /** Spare files ready to become the next segments, and one being prepared. */
  private readonly spares: string[] = [];
  private preparing: Promise<void> | null = null;
  /** Segments being deleted or kept as spares since their last rows were released. */
  private readonly drops = new Set<Promise<void>>();
  private spareNumber = 0;
  /** Segments on their way to becoming spares. */
  private keeping = 0;
  /** The segment during which a spare could not be written (no room): not tried again in it. */
  private spareRefusedIn = -1;

  private constructor(
    dir: string,
    epoch: string,
    found: { segment: Segment; limit: number }[],
    nextSeq: number,
    opts: WalOptions,
  ) {
    this.dir = dir;
    this.epoch = epoch;
    this.appId = `otelake-wal-${epoch}`;
    this.segmentBytes = opts.segmentBytes ?? DEFAULT_SEGMENT_BYTES;
    this.dsync = (opts.dsync ?? true) && O_DSYNC !== undefined;
    this.writePath = new WritePath({
      slowWriteMs: opts.eventLoopWriteMaxMs ?? DEFAULT_EVENT_LOOP_WRITE_MAX_MS,
    });
    this.found = found;
    this.unreplayed = new Set(found.map((f) => f.segment));
    this.segments.push(...found.map((f) => f.segment));
    this.nextSeq = nextSeq;
    this.nextOrdinal = (found.at(-1)?.segment.ordinal ?? 0) + 1;
  }

  /**
   * Opens the log in `dir` (created when missing). Segments left by an earlier process are read
   * by `replay()`; new records go to a new segment. A segment with an unreadable header is moved
   * to `damaged/` (reported in `damaged`), never replayed.
   */
  /** Whether `dir` holds segments (rows an earlier process logged, committed or not); spares aside. */
  static async holdsSegments(dir: string): Promise<boolean> {
    const names = await readdir(dir).catch((err: NodeJS.ErrnoException) => {
      if (err.code === 'ENOENT') return [] as string[];
      throw err;
    });
    return names.some((n) => SEGMENT_NAME.test(n));
  }

  static async open(dir: string, opts: WalOptions = {}): Promise<{ wal: WriteAheadLog; damaged: string[] }> {
    await mkdir(dir, { recursive: true });
    const names = await readdir(dir);
    // A spare holds no row that is not committed: one left by an earlier process is only disk.
    for (const n of names) if (SPARE_NAME.test(n)) await unlink(join(dir, n)).catch(() => {});
    const ordinals = names
      .map((n) => SEGMENT_NAME.exec(n))
      .filter((m) => m !== null)
      .map((m) => Number(m[1]))
      .sort((a, b) => a - b);
    const damaged: string[] = [];
    const headers: {
      ordinal: number;
      epoch: string;
      firstSeq: number;
      prevValidBytes: number;
      seeded: boolean;
      size: number;
    }[] = [];
    for (const ordinal of ordinals) {
      const path = join(dir, segmentName(ordinal));
      const fh = await open(path, 'r');
      const buf = Buffer.alloc(HEADER_BYTES);
      let size: number;
      try {
        await fh.read(buf, 0, HEADER_BYTES, 0);
        size = (await fh.stat()).size;
      } finally {
        await fh.close();
      }
      const h = decodeHeader(buf);
      if (h && (headers.length === 0 || h.epoch === headers[0]!.epoch)) {
        headers.push({ ordinal, ...h, size });
      } else if (h === null && ordinal === ordinals.at(-1) && size < HEADER_BYTES) {
        await unlink(path); // created by a process that died before its header was synced: empty
      } else {
        await mkdir(join(dir, DAMAGED_DIR), { recursive: true });
        await rename(path, join(dir, DAMAGED_DIR, segmentName(ordinal)));
        damaged.push(join(dir, DAMAGED_DIR, segmentName(ordinal)));
      }
    }
    const found = headers.map((h, i) => {
      const next = headers[i + 1];
      const limit =
        next && next.ordinal === h.ordinal + 1 && next.prevValidBytes >= 0 ? next.prevValidBytes : h.size;
      const segment: Segment = {
        ordinal: h.ordinal,
        path: join(dir, segmentName(h.ordinal)),
        firstSeq: h.firstSeq,
        bytes: limit,
        live: 0,
        seed: h.seeded ? recordSeed(h.epoch, h.ordinal) : 0,
      };
      return { segment, limit };
    });
    const epoch = headers[0]?.epoch ?? randomUUID();
    const wal = new WriteAheadLog(dir, epoch, found, found.at(-1)?.segment.firstSeq ?? 0, opts);
    return { wal, damaged };
  }

  /**
   * The entries left in the log by an earlier process, oldest first. Every row yielded counts as
   * pending until it is released (committed, or skipped because its table already has it).
   */
  async *replay(): AsyncGenerator<LoggedEntry> {
    for (const { segment, limit } of this.found) {
      for await (const entries of readSegment(segment, limit)) {
        for (const e of entries) {
          segment.live += e.batch.numRows;
          this.nextSeq = Math.max(this.nextSeq, e.seq + e.batch.numRows);
          yield e;
        }
      }
      this.unreplayed.delete(segment);
      await this.dropIfDone(segment);
    }
  }

  /**
   * Appends one request's entries as one record. Once they are durable, `onDurable` is called
   * with their sequence numbers, in log order (before the promise resolves), so that the caller
   * can queue the rows in that order. Rejects when the write or sync failed: nothing of the
   * record will be replayed then.
   */
  append(entries: readonly WalEntry[], onDurable: (logged: LoggedEntry[]) => void): Promise<void> {
    if (this.closed) return Promise.reject(new Error('the write-ahead log is closed'));
    // New records go after the replayed ones: their sequence numbers must come after them.
    if (this.unreplayed.size > 0) return Promise.reject(new Error('replay the write-ahead log first'));
    return new Promise<void>((resolve, reject) => {
      this.pending.push({ entries, onDurable, resolve, reject });
      if (this.gathered && this.pending.length >= this.expectedGroup) this.gathered();
      this.writing ??= this.writeLoop();
    });
  }

  private async writeLoop(): Promise<void> {
    // A synchronous write starts at the end of this turn of the event loop, once the records of
    // every request decoded in it have joined the group.
    if (this.dsync) await new Promise((resolve) => setImmediate(resolve));
    while (this.pending.length > 0) {
      await this.gather();
      const group = this.pending;
      this.pending = [];
      let logged: LoggedEntry[][];
      const start = performance.now();
      try {
        logged = await this.writeGroup(group);
        this.writeMs += (performance.now() - start - this.writeMs) * WRITE_MS_WEIGHT;
        this.expectedGroup = group.length + this.pending.length;
      } catch (err) {
        const e = err as Error;
        if (this.lastError === null) this.onProblem(e);
        this.lastError = { at: new Date().toISOString(), message: e.message };
        for (const p of group) p.reject(e);
        continue;
      }
      if (this.lastError !== null) this.onProblem(null);
      this.lastError = null;
      for (let i = 0; i < group.length; i++) {
        const p = group[i]!;
        try {
          p.onDurable(logged[i]!);
          p.resolve();
        } catch (err) {
          p.reject(err as Error);
        }
      }
    }
    this.writing = null;
  }

  /**
   * On a slow disk (writes take SLOW_WRITE_MS or more, on average), a group waits a little for
   * the records expected (expectedGroup): up to a quarter of a write's time, at most
   * MAX_GATHER_MS. Clients answered together send again together, and without the wait their
   * requests split into a write of a few and a write of the rest (1 and 7 of eight clients at
   * 50 IOPS), each a whole slow write. While the disk keeps up, nothing waits.
   */
  private async gather(): Promise<void> {
    if (this.writeMs < SLOW_WRITE_MS || this.pending.length >= this.expectedGroup) return;
    const wait = Math.min(this.writeMs / 4, MAX_GATHER_MS);
    await new Promise<void>((resolve) => {
      const timer = setTimeout(done, wait);
      function done(): void {
        clearTimeout(timer);
        resolve();
      }
      this.gathered = done;
    });
    this.gathered = null;
  }

  /** Writes and syncs the records of a group; on failure the segment is cut back to before them. */
  private async writeGroup(group: readonly Pending[]): Promise<LoggedEntry[][]> {
    // The log holds only what is not committed yet: a quiet moment ends the segment (kept as a
    // spare when it is full size, else deleted).
    if (this.active && this.active.segment.live === 0 && this.active.segment.bytes >= RECYCLE_EMPTY_BYTES)
      await this.closeActive();
    const { segment, fh } = this.active ?? (await this.openSegment());
    const buffers: Uint8Array[] = [];
    const logged: LoggedEntry[][] = [];
    const firstSeq = this.nextSeq;
    let seq = firstSeq;
    let bytes = 0;
    for (const p of group) {
      const record = encodeRecord(p.entries, seq, segment.seed);
      buffers.push(...record.buffers);
      bytes += record.bytes;
      logged.push(
        p.entries.map((e) => {
          const at = seq;
          seq += e.batch.numRows;
          return { ...e, seq: at };
        }),
      );
    }
    const start = segment.bytes;
    try {
      // writev takes at most IOV_MAX (1024) buffers per call; with O_DSYNC each returns once durable.
      let at = start;
      for (let i = 0; i < buffers.length; i += 1024) {
        const chunk = buffers.slice(i, i + 1024);
        const want = chunk.reduce((n, b) => n + b.byteLength, 0);
        const bytesWritten = await this.writeAt(fh, chunk, at);
        if (bytesWritten !== want) {
          const note = await diskFullNote(segment.path);
          throw new Error(`short write to ${segment.path}: ${bytesWritten} of ${want} bytes${note}`);
        }
        at += want;
      }
      await this.synced(fh);
    } catch (err) {
      await this.cutBack(start);
      throw err;
    }
    this.nextSeq = seq;
    segment.bytes = start + bytes;
    segment.live += seq - firstSeq;
    this.groupsWritten++;
    if (segment.bytes >= this.segmentBytes) await this.closeActive();
    else if (
      segment.bytes >= this.segmentBytes / 2 &&
      this.spares.length === 0 &&
      this.spareRefusedIn !== segment.ordinal
    )
      this.preparing ??= this.prepareSpare(segment.ordinal);
    return logged;
  }

  /** How a segment is opened for writing: a new file, or a spare (O_DSYNC with `dsync`). */
  private openFlags(spare: boolean): number {
    const base = spare ? constants.O_RDWR : constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL;
    return this.dsync ? base | O_DSYNC! : base;
  }

  /**
   * Writes `buffers` at `position` of the active segment; resolves to the bytes written. With
   * O_DSYNC the event loop writes them itself and waits for the disk (a 57 KB synced write: 0.15 ms
   * at the median on this project's idle test disk; on a slower disk group commit makes fewer,
   * larger writes). Through libuv's threads, a write was two thread wake-ups, and beside two decode
   * workers and the Parquet worker on two busy cores each could wait a time slice: interleaved
   * runs (bench/server-load.ts, default options) gave half-load p99 of 5.9-8.8 against 8.1-10.2 ms
   * for logs over protobuf, with less CPU per item (docs/benchmarks.md). The pool takes the
   * writes while the loop is saturated, and for a while after a write slower than
   * `eventLoopWriteMaxMs` (write-path.ts).
   */
  private writeAt(fh: FileHandle, buffers: Uint8Array[], position: number): number | Promise<number> {
    const start = performance.now();
    if (this.dsync && this.writePath.onLoop()) {
      const bytes = writevSync(fh.fd, buffers, position);
      this.writePath.loopWrote(performance.now() - start);
      return bytes;
    }
    // On the pool the segment's O_DSYNC (when set) still makes the write return once durable.
    return fh.writev(buffers, position).then((r) => {
      this.writePath.poolWrote(performance.now() - start);
      return r.bytesWritten;
    });
  }

  /** After a write to the active segment: its data is on disk once this resolves. */
  private async synced(fh: FileHandle): Promise<void> {
    if (!this.dsync) await fh.datasync();
  }

  /** After a failed write: truncates the active segment to `bytes`, or ends it there. */
  private async cutBack(bytes: number): Promise<void> {
    const active = this.active!;
    try {
      await active.fh.truncate(bytes);
      await active.fh.datasync();
    } catch {
      // It could not be cut: the next segment's header tells replay where this one ends.
      this.prevValidBytes = bytes;
      await this.closeActive();
    }
  }

  private async openSegment(): Promise<{ segment: Segment; fh: FileHandle }> {
    const ordinal = this.nextOrdinal;
    const path = join(this.dir, segmentName(ordinal));
    const header = encodeHeader(this.epoch, this.nextSeq, this.prevValidBytes);
    const spare = await this.takeSpare(path, header);
    const fh = spare ?? (await open(path, this.openFlags(false)));
    try {
      if (!spare) {
        await fh.write(header, 0, HEADER_BYTES, 0);
        await this.synced(fh);
      }
      await fsyncPath(this.dir);
    } catch (err) {
      await fh.close().catch(() => {});
      await unlink(path).catch(() => {});
      throw err;
    }
    this.nextOrdinal++;
    this.prevValidBytes = -1;
    const segment: Segment = {
      ordinal,
      path,
      firstSeq: this.nextSeq,
      bytes: HEADER_BYTES,
      live: 0,
      seed: recordSeed(this.epoch, ordinal),
    };
    this.segments.push(segment);
    this.active = { segment, fh };
    // The segment before it may go now, its rows all committed (see dropIfDone).
    const previous = this.segments.at(-2);
    if (previous) this.dropLater(previous);
    return this.active;
  }

  /**
   * A spare renamed to `path`, its header written first (a spare renamed with an earlier life's
   * header would be replayed as that); null when there is none or it failed.
   */
  private async takeSpare(path: string, header: Buffer): Promise<FileHandle | null> {
    const spare = this.spares.shift();
    if (spare === undefined) return null;
    let fh: FileHandle | null = null;
    try {
      fh = await open(spare, this.openFlags(true));
      await fh.write(header, 0, HEADER_BYTES, 0);
      await this.synced(fh);
      await rename(spare, path);
      return fh;
    } catch {
      await fh?.close().catch(() => {});
      await unlink(spare).catch(() => {});
      return null;
    }
  }

  private nextSparePath(): string {
    return join(this.dir, `spare-${this.spareNumber++}.wal-spare`);
  }

  /** Writes a spare ahead: zeros to the segment size, synced. Without room, segments grow as written. */
  private async prepareSpare(during: number): Promise<void> {
    const path = this.nextSparePath();
    try {
      const fh = await open(path, 'wx');
      try {
        const zeros = Buffer.alloc(ZERO_CHUNK);
        // Synced a chunk at a time: the log's own synced writes wait behind what the disk is
        // flushing. One sync of a whole 64 MiB spare held one for 80-120 ms on a slow disk (on the
        // event loop, which then moved the writes to the pool: write-path.ts); so, at most 8-14 ms.
        for (let at = 0; at < this.segmentBytes; at += ZERO_CHUNK) {
          await fh.write(zeros, 0, Math.min(ZERO_CHUNK, this.segmentBytes - at), at);
          await fh.datasync();
        }
      } finally {
        await fh.close();
      }
      if (this.closed) await unlink(path);
      else this.spares.push(path);
    } catch {
      this.spareRefusedIn = during;
      await unlink(path).catch(() => {});
    } finally {
      this.preparing = null;
    }
  }

  private async closeActive(): Promise<void> {
    const active = this.active;
    if (!active) return;
    this.active = null;
    await active.fh.close().catch(() => {});
    await this.dropIfDone(active.segment);
  }

  /**
   * Marks `rows` rows from sequence number `seq` as done (committed to their table, or given up):
   * a segment whose rows are all done is kept as a spare or deleted. The rows may span records
   * and segments (a file's rows are the consecutive entries of many requests).
   */
  release(seq: number, rows: number): void {
    while (rows > 0 && this.segments.length > 0) {
      let lo = 0;
      let hi = this.segments.length - 1;
      while (lo < hi) {
        const mid = (lo + hi + 1) >> 1;
        if (this.segments[mid]!.firstSeq <= seq) lo = mid;
        else hi = mid - 1;
      }
      const segment = this.segments[lo]!;
      const next = this.segments[lo + 1];
      // Rows before the oldest segment are in one already gone.
      const n =
        segment.firstSeq > seq
          ? Math.min(rows, segment.firstSeq - seq)
          : Math.min(rows, next ? next.firstSeq - seq : rows);
      if (segment.firstSeq <= seq) {
        segment.live -= n;
        if (segment.live <= 0) this.dropLater(segment);
      }
      seq += n;
      rows -= n;
    }
  }

  /** dropIfDone, in the background (close waits for it). */
  private dropLater(segment: Segment): void {
    const drop = this.dropIfDone(segment);
    this.drops.add(drop);
    void drop.finally(() => this.drops.delete(drop));
  }

  private async dropIfDone(segment: Segment): Promise<void> {
    if (segment.live > 0 || this.active?.segment === segment || this.unreplayed.has(segment)) return;
    // The newest segment stays while an older one does (rows not yet committed): the next open
    // numbers rows on from the newest segment left, and the tables' `txn` versions may already
    // count this one's rows. Without it, new rows would get numbers the tables already have, and
    // replay would skip them. It goes once the next segment is open (openSegment).
    if (segment === this.segments.at(-1) && this.segments.length > 1) return;
    const i = this.segments.indexOf(segment);
    if (i < 0) return;
    this.segments.splice(i, 1);
    // A full-size file is kept as a spare (its blocks are written): the next segment reuses it.
    if (!this.closed && this.spares.length + this.keeping < MAX_SPARES) {
      this.keeping++;
      try {
        const size = await stat(segment.path).then(
          (st) => st.size,
          () => 0,
        );
        if (size >= this.segmentBytes && !this.closed) {
          const spare = this.nextSparePath();
          await rename(segment.path, spare);
          // The commits that emptied the segment (a link in each table's `_delta_log`) and this
          // rename are metadata, which the file system's journal commits in order; the header a
          // spare gets when it is taken (takeSpare) is data, on disk without waiting for the
          // journal. So the folder is synced before the spare can be taken, which commits the
          // journal up to the rename and the tables' commits with it (ext4, XFS: one journal,
          // committed in order). Otherwise a power loss could keep the new header but not the
          // commits: the rows in neither a table nor the log.
          try {
            await fsyncPath(this.dir);
          } catch {
            await unlink(spare).catch(() => {});
            return;
          }
          this.spares.push(spare);
          return;
        }
      } catch {
        // Deleted instead.
      } finally {
        this.keeping--;
      }
    }
    await unlink(segment.path).catch(() => {});
  }

  /**
   * Reads logged rows back (a batch lost with a worker that died, rows held since the replay):
   * the rows of the ranges, in order, as slices of the entries of `table` and `day` that hold them
   * (a range may span many), each with its entry's first sequence number.
   */
  async read(
    table: TableName,
    day: string,
    ranges: readonly { seq: number; rows: number }[],
  ): Promise<{ batch: PackedBatch; from: number; to: number; seq: number }[]> {
    const out: { batch: PackedBatch; from: number; to: number; seq: number }[] = [];
    let i = 0;
    // The next row to find: ranges come in log order.
    let at = ranges[0]?.seq ?? 0;
    for (const segment of [...this.segments]) {
      if (i >= ranges.length) break;
      for await (const entries of readSegment(segment, segment.bytes)) {
        for (const e of entries) {
          if (e.table !== table || e.day !== day) continue;
          const end = e.seq + e.batch.numRows;
          while (i < ranges.length && at >= e.seq && at < end) {
            const r = ranges[i]!;
            const to = Math.min(r.seq + r.rows, end);
            out.push({ batch: e.batch, from: at - e.seq, to: to - e.seq, seq: e.seq });
            at = to;
            if (at === r.seq + r.rows) at = ranges[++i]?.seq ?? 0;
          }
        }
      }
    }
    if (i < ranges.length) throw new Error(`rows from ${at} are no longer in the write-ahead log`);
    return out;
  }

  /** Rows of the log not yet released. */
  get pendingRows(): number {
    let n = 0;
    for (const s of this.segments) n += s.live;
    return n;
  }

  stats(): WalStats {
    return {
      segments: this.segments.length,
      bytes: this.segments.reduce((n, s) => n + s.bytes, 0),
      spare_segments: this.spares.length,
      pending_rows: this.pendingRows,
      groups_written: this.groupsWritten,
      write_path: this.dsync ? this.writePath.current : 'pool',
      last_error: this.lastError,
    };
  }

  /**
   * Resolves once the appends made so far are durable or have failed, and the segments released
   * so far are kept as spares or deleted.
   */
  async settled(): Promise<void> {
    while (this.writing) await this.writing;
    await Promise.all(this.drops);
  }

  /** Waits for the writes under way; later appends fail. Deletes the log when nothing is pending. */
  async close(): Promise<void> {
    this.closed = true;
    await this.settled();
    const active = this.active;
    this.active = null;
    if (active) await active.fh.close().catch(() => {});
    for (const s of [...this.segments]) await this.dropIfDone(s);
    await Promise.all([...this.drops, this.preparing]);
    for (const spare of this.spares.splice(0)) await unlink(spare).catch(() => {});
  }
}
