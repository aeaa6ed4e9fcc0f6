// Worker thread of the Delta engine: writes data files with polars (synchronous API, so a native
// panic is a catchable error) and checkpoints with parquet-wasm, off the main event loop.

import { open, rename, stat, unlink } from 'node:fs/promises';
import pl from 'nodejs-polars';
import type { ColumnDef, TableSchema } from '../schema/tables.ts';
import { diskFullNote, fsyncPath } from '../storage/files.ts';
import { exposeGc, ReturnedInput, serveTasks } from '../storage/worker-pool.ts';
import { Arena, type Batches, joinBatches, transferables } from './batch.ts';
import type { CheckpointContent } from './checkpoint.ts';
import { dropUnsoundColumnIndexes } from './column-index.ts';
import { batchFrame } from './frame.ts';
import { concatParquet, NotConcatenable } from './parquet-concat.ts';
import { computeStats, type FileStats } from './stats.ts';

export interface WriteBatchTask {
  path: string;
  columns: readonly ColumnDef[];
  batch: Batches;
  zstdLevel: number;
  rowGroupSize: number;
  /** Sync the file before it is reported written (DeltaTable option `fsync`). */
  fsync: boolean;
}

export interface CompactTask {
  inputs: readonly string[];
  path: string;
  zstdLevel: number;
  rowGroupSize: number;
  fsync: boolean;
  /**
   * Copy the inputs' row groups as they are (concatParquet) when each has at least this many rows;
   * otherwise, and when null, the rows are rewritten into row groups of `rowGroupSize`.
   */
  copyRowGroupsFrom: number | null;
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

async function finished(path: string, fsync: boolean): Promise<WrittenFile> {
  await dropUnsoundColumnIndexes(path);
  // Synced before it is committed: a commit must never point at a file lost with the page cache.
  if (fsync) await fsyncPath(path);
  const st = await stat(path);
  return { size: st.size, modificationTime: Math.floor(st.mtimeMs) };
}

// Polars frees a frame's native memory only when V8 collects its JS wrapper, which the worker's
// small heap rarely asks for: a young-generation collection after every ~50k rows written frees
// the frames' buffers (peak server RSS 833 instead of 991-1036 MiB at 85k spans/s). Not after
// every file: with 1,000-row files that was a collection per file, ~5% of library ingest.
const collect = exposeGc();
const COLLECT_EVERY_ROWS = 50_000;
let rowsSinceCollect = 0;

/** Where batch parts are joined; free again once a file's frame is written (before any await). */
const joinArena = new Arena();

serveTasks({
  async writeBatch(task: WriteBatchTask) {
    try {
      const schema = { name: 'batch', columns: task.columns, byName: new Map() } as unknown as TableSchema;
      const names = task.columns.map((c) => c.name);
      const batch = joinBatches(task.batch, names, joinArena);
      const stats = computeStats(schema, batch);
      sink(batchFrame(task.columns, batch), task.path, task.zstdLevel, task.rowGroupSize);
      rowsSinceCollect += batch.numRows;
      if (rowsSinceCollect >= COLLECT_EVERY_ROWS) {
        collect('minor');
        rowsSinceCollect = 0;
      }
      // The batch is not handed back: once the file is synced, the file is the durable copy (a
      // failed commit is retried with it), and the buffers would only add GC work to the caller.
      const written: WrittenBatch = { ...(await finished(task.path, task.fsync)), stats };
      return written;
    } catch (err) {
      // The batch came by transfer: hand its parts back so that the write can be retried.
      // Polars reports a write that ran out of room as "Invalid thrift: transport error".
      const message = (err as Error).message + (await diskFullNote(task.path));
      throw new ReturnedInput(message, task.batch, transferables(task.batch));
    }
  },

  async compact(task: CompactTask): Promise<CompactedFile> {
    if (task.copyRowGroupsFrom !== null) {
      try {
        const { rows } = await concatParquet(task.inputs, task.path, task.copyRowGroupsFrom);
        return { ...(await finished(task.path, task.fsync)), rows };
      } catch (err) {
        if (!(err instanceof NotConcatenable)) throw err;
      }
    }
    const scans = task.inputs.map((p) => pl.scanParquet(p));
    const frame = scans.length === 1 ? scans[0]! : pl.concat(scans);
    sink(frame, task.path, task.zstdLevel, task.rowGroupSize);
    // The row count read back from the written file's footer checks the compaction.
    const rows = pl.scanParquet(task.path).select(pl.len()).collectSync().getColumn('len');
    return { ...(await finished(task.path, task.fsync)), rows: Number(rows.getIndex(0)) };
  },

  async writeCheckpoint(task: CheckpointTask): Promise<{ sizeInBytes: number; actions: number }> {
    // apache-arrow and parquet-wasm (~20 MiB a worker) are loaded by the first checkpoint only.
    const { encodeCheckpoint } = await import('./checkpoint.ts');
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
});
