// Query worker: runs a read query with polars' synchronous API and hands the result back as an
// Arrow IPC buffer it owns (transferred without a copy, no pointer into the scanned buffers).

import pl from 'nodejs-polars';
import type { TableName } from '../schema/tables.ts';
import { exposeGc, serveTasks, transferResult } from '../storage/worker-pool.ts';
import type { FileEntry } from './files.ts';
import type { NormalizedQuery } from './filters.ts';
import { runQuery, scanFiles } from './scan.ts';

// Polars frees native memory only when V8 collects the JS wrappers: collect after each query.
const collect = exposeGc();
const collectGarbage = (): void => collect('major');

export interface QueryTask {
  query: NormalizedQuery;
  files: FileEntry[];
  /** Rows a filtered query reads in its first round (see runQuery). */
  firstRoundRows?: number;
  /** For s3:// files (secrets: never logged). */
  cloudOptions?: Record<string, string>;
}

/** Counts the rows of a table's files by reading them (the shipper's check of a shipped table). */
export interface CountTask {
  table: TableName;
  paths: string[];
  cloudOptions?: Record<string, string>;
}

export interface QueryResult {
  ipc: Uint8Array;
}

serveTasks({
  query: ({ query, files, firstRoundRows, cloudOptions }: QueryTask) => {
    const df = runQuery(query, files, firstRoundRows, cloudOptions);
    const buf = df.writeIPC({ compression: 'uncompressed' });
    // The Buffer may be a view into a shared pool: copy it into a buffer of its own to transfer.
    const ipc = new Uint8Array(buf.byteLength);
    ipc.set(buf);
    setImmediate(collectGarbage);
    const result: QueryResult = { ipc };
    return transferResult(result, [ipc.buffer]);
  },
  count: ({ table, paths, cloudOptions }: CountTask): number => {
    const df = scanFiles(table, paths, cloudOptions).select(pl.len().alias('rows')).collectSync();
    setImmediate(collectGarbage);
    return Number(df.getColumn('rows').toArray()[0] ?? 0);
  },
});
