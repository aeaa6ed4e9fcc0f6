// Query worker: runs the two steps of a read with polars' synchronous API. `keys` answers which
// rows (typed arrays, transferred) and reads their first slice as `fetch` or `json` would, so that
// a small read is one task; `fetch` reads a slice of them and hands it back as an Arrow IPC
// buffer it owns (transferred without a copy, no pointer into the scanned buffers); `json` reads a
// slice as `fetch` does and hands back the rows' JSON text (the HTTP answer's, built here rather
// than on the server's event loop, which it held for hundreds of milliseconds); `range` reads
// rows by their position in their files (rows committed since a follower last looked); `count`
// counts the rows of a table's files by reading them (the shipper's check of a shipped table).

import pl, { type DataFrame } from 'nodejs-polars';
import type { TableName } from '../schema/tables.ts';
import { exposeGc, serveTasks, transferResult } from '../storage/worker-pool.ts';
import { ipcJsonText } from './arrow-json.ts';
import type { FileEntry } from './files.ts';
import type { NormalizedQuery } from './filters.ts';
import {
  type CloudOptions,
  type CutValue,
  type FetchTask,
  fetchRows,
  type RangeTask,
  type RowKeys,
  rangeRows,
  runKeys,
  scanFiles,
} from './scan.ts';
import { type FirstSlice, firstSliceRows, sliceTask } from './slices.ts';

// Polars frees native memory only when V8 collects the JS wrappers: collect after each task.
const collect = exposeGc();
const collectGarbage = (): void => collect('major');

export interface KeysTask {
  query: NormalizedQuery;
  files: FileEntry[];
  /** Rows a filtered query reads in its first round (see runKeys). */
  firstRoundRows?: number;
  /** For s3:// files. */
  cloudOptions?: CloudOptions;
  /** The first slice of rows, read in the same task once the keys are known. */
  first: FirstSlice;
}

/** The keys of a read's rows, and its first slice (null when there are no rows). */
export interface KeysResult<R> {
  keys: RowKeys;
  firstSlice: { rows: number; result: R } | null;
}

export interface CountTask {
  table: TableName;
  paths: string[];
  cloudOptions?: CloudOptions;
}

export interface FetchResult {
  ipc: Uint8Array;
  cuts: CutValue[];
}

export interface JsonResult {
  /** The rows' JSON (rowToJson's), each preceded by a comma: `,{...},{...}` (ipcJsonText). */
  json: Uint8Array;
  /** Byte offset in `json` where each row ends. */
  ends: Uint32Array;
  /** String values cut to maxFieldChars; `row` indexes the slice's rows. */
  cuts: CutValue[];
  /** Bytes of the slice's values (its Arrow form), as `fetch` counts them. */
  bytes: number;
}

/** A frame as an Arrow IPC buffer of its own, to transfer. */
function ownIpc(df: DataFrame): Uint8Array<ArrayBuffer> {
  const buf = df.writeIPC({ compression: 'uncompressed' });
  // The Buffer may be a view into a shared pool: copy it into a buffer of its own to transfer.
  const ipc = new Uint8Array(buf.byteLength);
  ipc.set(buf);
  return ipc;
}

/** Reads a slice of rows as Arrow IPC; returns it and the buffers to transfer. */
function fetchSlice(task: FetchTask): [FetchResult, ArrayBuffer[]] {
  const { df, cuts } = fetchRows(task);
  const ipc = ownIpc(df);
  return [{ ipc, cuts }, [ipc.buffer]];
}

/** Reads a slice of rows as their JSON text; returns it and the buffers to transfer. */
function jsonSlice(task: FetchTask): [JsonResult, ArrayBuffer[]] {
  const { df, cuts } = fetchRows(task);
  const ipc = df.writeIPC({ compression: 'uncompressed' });
  const { json, ends } = ipcJsonText(ipc, task.table);
  return [{ json, ends, cuts, bytes: ipc.byteLength }, [json.buffer, ends.buffer] as ArrayBuffer[]];
}

const SLICE_TASKS = { fetch: fetchSlice, json: jsonSlice };

serveTasks({
  keys: ({ query, files, firstRoundRows, cloudOptions, first }: KeysTask) => {
    const keys: RowKeys = runKeys(query, files, firstRoundRows, cloudOptions);
    const transfer = [keys.file.buffer, keys.row.buffer, keys.ts.buffer] as ArrayBuffer[];
    let firstSlice: KeysResult<FetchResult | JsonResult>['firstSlice'] = null;
    if (keys.file.length > 0) {
      const rows = firstSliceRows(keys, files, first.bytes);
      const [result, buffers] = SLICE_TASKS[first.task](sliceTask(query, keys, 0, rows, files, cloudOptions));
      firstSlice = { rows, result };
      transfer.push(...buffers);
    }
    setImmediate(collectGarbage);
    const answer: KeysResult<FetchResult | JsonResult> = { keys, firstSlice };
    return transferResult(answer, transfer);
  },
  fetch: (task: FetchTask) => {
    const [result, transfer] = fetchSlice(task);
    setImmediate(collectGarbage);
    return transferResult(result, transfer);
  },
  json: (task: FetchTask) => {
    const [result, transfer] = jsonSlice(task);
    setImmediate(collectGarbage);
    return transferResult(result, transfer);
  },
  range: (task: RangeTask) => {
    const ipc = ownIpc(rangeRows(task));
    setImmediate(collectGarbage);
    return transferResult(ipc, [ipc.buffer]);
  },
  count: ({ table, paths, cloudOptions }: CountTask): number => {
    const files = paths.map((path) => ({ path }));
    const df = scanFiles(table, files, cloudOptions).select(pl.len().alias('rows')).collectSync();
    setImmediate(collectGarbage);
    return Number(df.getColumn('rows').toArray()[0] ?? 0);
  },
});
