// How a read's rows are cut into slices: each slice holds about a number of bytes of values,
// estimated from its files' bytes per row. The calling thread cuts every slice but the first; a
// query worker cuts the first one with the keys, in the same task (query-worker.ts).

import type { FileEntry } from './files.ts';
import type { NormalizedQuery } from './filters.ts';
import type { CloudOptions, FetchPart, FetchTask, RowKeys } from './scan.ts';

/**
 * Rows of a first slice at most (the default HTTP limit fits): the first slice's size is only
 * estimated from its files' bytes per row, which well-compressed values make small; later slices
 * follow the bytes per row measured.
 */
const FIRST_CHUNK_ROWS = 128;
/** Bytes of values per byte of Parquet file, assumed until a slice is measured (zstd on logs). */
export const FIRST_EXPANSION = 4;

/** How the first slice of a read is read, given to the keys' task. */
export interface FirstSlice {
  /** The worker task that reads it: rows as Arrow IPC, or their JSON text. */
  task: 'fetch' | 'json';
  /** Bytes of values the slice aims at. */
  bytes: number;
}

/** Rows in the first slice of a read. */
export function firstSliceRows(keys: RowKeys, files: readonly FileEntry[], bytes: number): number {
  return sliceRows(keys, 0, files, bytes, FIRST_EXPANSION, FIRST_CHUNK_ROWS);
}

/** The task that reads rows [start, start + n) of the keys. */
export function sliceTask(
  q: NormalizedQuery,
  keys: RowKeys,
  start: number,
  n: number,
  files: readonly FileEntry[],
  cloudOptions: CloudOptions | undefined,
): FetchTask {
  return {
    table: q.table,
    select: q.select,
    maxFieldChars: q.maxFieldChars,
    parts: fetchParts(keys, start, n, files),
    cloudOptions,
  };
}

/** Bytes of Parquet file per row of a file (compressed: an estimate of the row's size). */
function bytesPerRow(f: FileEntry): number {
  return f.size / Math.max(1, f.numRecords ?? 1);
}

/** Bytes per row of the file holding key `i`. */
export function fileBytesPerRow(keys: RowKeys, i: number, files: readonly FileEntry[]): number {
  return bytesPerRow(files[keys.file[i]!]!);
}

/**
 * How many rows, from `start`, the next slice takes: as many as fit `bytes` (one at least), each
 * estimated from its file's bytes per row times the expansion measured so far, `maxRows` at most.
 */
export function sliceRows(
  keys: RowKeys,
  start: number,
  files: readonly FileEntry[],
  bytes: number,
  expansion: number,
  maxRows: number,
): number {
  let estimate = 0;
  let n = 0;
  while (start + n < keys.file.length && n < maxRows) {
    estimate += fileBytesPerRow(keys, start + n, files) * expansion;
    if (n > 0 && estimate > bytes) break;
    n++;
  }
  return n;
}

/** The rows [start, start + n) of the keys, grouped by file (positions ascending). */
function fetchParts(keys: RowKeys, start: number, n: number, files: readonly FileEntry[]): FetchPart[] {
  const byFile = new Map<number, { rows: number[]; positions: number[] }>();
  for (let i = 0; i < n; i++) {
    const file = keys.file[start + i]!;
    let part = byFile.get(file);
    if (!part) {
      part = { rows: [], positions: [] };
      byFile.set(file, part);
    }
    part.rows.push(keys.row[start + i]!);
    part.positions.push(i);
  }
  return [...byFile].map(([file, part]) => {
    const order = part.rows.map((_, i) => i).sort((a, b) => part.rows[a]! - part.rows[b]!);
    return {
      path: files[file]!.path,
      size: files[file]!.size,
      rowBytes: bytesPerRow(files[file]!),
      rows: Uint32Array.from(order, (i) => part.rows[i]!),
      positions: Uint32Array.from(order, (i) => part.positions[i]!),
    };
  });
}
