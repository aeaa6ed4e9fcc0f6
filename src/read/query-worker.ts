// Query worker: runs a read query with polars' synchronous API and hands the result back as an
// Arrow IPC buffer it owns (transferred without a copy, no pointer into the scanned buffers).

import { exposeGc, serveTasks, transferResult } from '../storage/worker-pool.ts';
import type { FileEntry } from './files.ts';
import type { NormalizedQuery } from './filters.ts';
import { runQuery } from './scan.ts';

// Polars frees native memory only when V8 collects the JS wrappers: collect after each query.
const collect = exposeGc();
const collectGarbage = (): void => collect('major');

export interface QueryTask {
  query: NormalizedQuery;
  files: FileEntry[];
  /** Rows a filtered query reads in its first round (see runQuery). */
  firstRoundRows?: number;
}

export interface QueryResult {
  ipc: Uint8Array;
}

serveTasks({
  query: ({ query, files, firstRoundRows }: QueryTask) => {
    const df = runQuery(query, files, firstRoundRows);
    const buf = df.writeIPC({ compression: 'uncompressed' });
    // The Buffer may be a view into a shared pool: copy it into a buffer of its own to transfer.
    const ipc = new Uint8Array(buf.byteLength);
    ipc.set(buf);
    setImmediate(collectGarbage);
    const result: QueryResult = { ipc };
    return transferResult(result, [ipc.buffer]);
  },
});
