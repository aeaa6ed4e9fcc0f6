// Worker thread of the Delta engine, off the main event loop: writes data files (parquet-writer.ts)
// and checkpoints (checkpoint-writer.ts), and joins files in compaction, or rewrites them with
// polars (synchronous API, so a native panic is a catchable error).

import { open, rename, stat, unlink } from 'node:fs/promises';
import type pl from 'nodejs-polars';
import type { ColumnDef, TableSchema } from '../schema/tables.ts';
import { diskFullNote, fsyncPath } from '../storage/files.ts';
import { exposeGc, ReturnedInput, serveTasks } from '../storage/worker-pool.ts';
import type { Action } from './actions.ts';
import { Arena, type Batches, batchList, checkBatch, isPacked, joinBatches, transferables } from './batch.ts';
import type { CheckpointContent } from './checkpoint.ts';
import { encodeCheckpoint } from './checkpoint-writer.ts';
import { dropUnsoundColumnIndexes } from './column-index.ts';
import { type Concatenated, concatParquet, mergeRowGroups, NotConcatenable } from './parquet-concat.ts';
import { writeParquetFile } from './parquet-writer.ts';
import { computeStats, type FileStats } from './stats.ts';

export interface WriteBatchTask {
  /** The table's name, for the errors of a batch that does not fit its columns. */
  table: string;
  path: string;
  columns: readonly ColumnDef[];
  batch: Batches;
  zstdLevel: number;
  rowGroupSize: number;
  /** Sync the file before it is reported written (DeltaTable option `fsync`). */
  fsync: boolean;
}

/** How a compaction may join its inputs without rewriting their rows (else it rewrites them). */
export interface JoinPlan {
  /** Copy the inputs' row groups as they are (concatParquet) when each has at least this many rows. */
  copyRowGroupsFrom: number | null;
  /**
   * Otherwise join them into row groups of up to `rowGroupSize` rows, page by page
   * (mergeRowGroups: files of parquet-writer.ts only). The seal's OPTIMIZE rewrites instead:
   * polars' larger pages and dictionaries make the day's files ~13% smaller.
   */
  mergeRowGroups: boolean;
}

export interface CompactTask extends JoinPlan {
  inputs: readonly string[];
  path: string;
  zstdLevel: number;
  rowGroupSize: number;
  fsync: boolean;
}

export interface CompactedFile extends WrittenFile {
  /** Rows in the written file, read from its footer. */
  rows: number;
}

export interface CheckpointTask {
  path: string;
  tempPath: string;
  content: CheckpointContent;
  fsync: boolean;
}

function sink(frame: pl.LazyDataFrame, path: string, zstdLevel: number, rowGroupSize: number): void {
  frame
    .sinkParquet(path, {
      compression: 'zstd',
      compressionLevel: zstdLevel,
      statistics: true,
      rowGroupSize,
    })
    .collectSync();
}

export interface WrittenFile {
  size: number;
  modificationTime: number;
}

export interface WrittenBatch extends WrittenFile {
  stats: FileStats;
}

/** `polarsIndexes`: the file may hold column indexes polars wrote, which may be unsound. */
async function finished(path: string, fsync: boolean, polarsIndexes: boolean): Promise<WrittenFile> {
  if (polarsIndexes) await dropUnsoundColumnIndexes(path);
  // Synced before it is committed: a commit must never point at a file lost with the page cache.
  if (fsync) await fsyncPath(path);
  const st = await stat(path);
  return { size: st.size, modificationTime: Math.floor(st.mtimeMs) };
}

// A young-generation collection after every ~50k rows written: it was how the batches' buffers and
// polars' frames were freed, the worker's small heap seldom asking for one. Written batches are now
// released at once (transfer(0) below) and polars only rewrites in compaction; kept, not measured
// again without it. Not after every file: with 1,000-row files that was a collection per file, ~5%
// of library ingest.
const collect = exposeGc();
const COLLECT_EVERY_ROWS = 50_000;
let rowsSinceCollect = 0;

/** Where batch parts are joined; free again once a file is written (before any await). */
const joinArena = new Arena();

/** The files joined, or null when they cannot be joined that way. */
async function orNull(join: () => Promise<Concatenated>): Promise<Concatenated | null> {
  try {
    return await join();
  } catch (err) {
    if (err instanceof NotConcatenable) return null;
    throw err;
  }
}

serveTasks({
  async writeBatch(task: WriteBatchTask) {
    try {
      const schema = { name: task.table, columns: task.columns, byName: new Map() } as unknown as TableSchema;
      const names = task.columns.map((c) => c.name);
      // Checked here, not on the event loop, where unpacking a file's ~300 packed parts (one a
      // request) to check each took 2.5-3.2 ms a file of metric points in one go. A part built
      // column by column is checked as given, before joining trips over it; packed parts, which
      // a builder made, once joined.
      const parts = batchList(task.batch);
      for (const part of parts) if (!isPacked(part)) checkBatch(task.table, task.columns, part);
      const batch = joinBatches(task.batch, names, joinArena);
      if (parts.some(isPacked)) checkBatch(task.table, task.columns, batch);
      const stats = computeStats(schema, batch);
      writeParquetFile(task.path, task.columns, batch, task);
      rowsSinceCollect += batch.numRows;
      if (rowsSinceCollect >= COLLECT_EVERY_ROWS) {
        collect('minor');
        rowsSinceCollect = 0;
      }
      // The batch is not handed back: once the file is synced, the file is the durable copy (a
      // failed commit is retried with it), and the buffers would only add GC work to the caller.
      const written: WrittenBatch = { ...(await finished(task.path, task.fsync, false)), stats };
      // Their memory goes back now, not at a collection of this worker's small heap, which the
      // writer's few JS objects seldom bring on.
      for (const b of transferables(task.batch)) b.transfer(0);
      return written;
    } catch (err) {
      // The batch came by transfer: hand its parts back so that the write can be retried.
      const message = (err as Error).message + (await diskFullNote(task.path));
      throw new ReturnedInput(message, task.batch, transferables(task.batch));
    }
  },

  async compact(task: CompactTask): Promise<CompactedFile> {
    // Without decoding a page where the inputs allow it: their row groups copied when large
    // enough, else joined into larger ones if this engine wrote them; else a rewrite.
    const joined =
      (task.copyRowGroupsFrom !== null &&
        (await orNull(() => concatParquet(task.inputs, task.path, task.copyRowGroupsFrom!)))) ||
      (task.mergeRowGroups &&
        (await orNull(() => mergeRowGroups(task.inputs, task.path, task.rowGroupSize, task.zstdLevel))));
    if (joined) return { ...(await finished(task.path, task.fsync, true)), rows: joined.rows };
    // Loaded by the first rewrite: a worker that only writes new files never needs it.
    const { default: pl } = await import('nodejs-polars');
    const scans = task.inputs.map((p) => pl.scanParquet(p));
    const frame = scans.length === 1 ? scans[0]! : pl.concat(scans);
    sink(frame, task.path, task.zstdLevel, task.rowGroupSize);
    // The row count read back from the written file's footer checks the compaction.
    const rows = pl.scanParquet(task.path).select(pl.len()).collectSync().getColumn('len');
    return { ...(await finished(task.path, task.fsync, true)), rows: Number(rows.getIndex(0)) };
  },

  async writeCheckpoint(task: CheckpointTask): Promise<{ sizeInBytes: number; actions: number }> {
    const { bytes, actions } = encodeCheckpoint(task.content);
    try {
      const fh = await open(task.tempPath, 'wx');
      try {
        await fh.writeFile(bytes);
        if (task.fsync) await fh.sync();
      } finally {
        await fh.close();
      }
      // A checkpoint of a version always holds the same state, so replacing one is harmless.
      await rename(task.tempPath, task.path);
    } catch (err) {
      await unlink(task.tempPath).catch(() => {});
      throw err;
    }
    return { sizeInBytes: bytes.length, actions };
  },

  /** A checkpoint's actions, decoded here: apache-arrow and parquet-wasm load in this thread. */
  async readCheckpoint(bytes: Uint8Array): Promise<Action[]> {
    const { decodeCheckpoint } = await import('./checkpoint.ts');
    return decodeCheckpoint(bytes);
  },
});
