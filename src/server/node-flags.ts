// Node flags for a process that runs the server, added where otelake launches one (`otelake start`
// in the background, the --reload supervisor's child, the server benchmark).

import { availableParallelism } from 'node:os';

/**
 * On 2 cores or fewer, V8's GC helper threads (concurrent marking, parallel scavenges) compete for
 * the cores with the decode and Parquet workers, which keep them busy under load. Collecting on
 * each isolate's own thread cost 16.7-17.2 instead of 20.0-20.9 CPU-s per million spans
 * (bench/server-load.ts, back to back on 2 cores). Set at launch: set at run time it reaches only
 * part of the heaps.
 */
const SINGLE_THREADED_GC = '--single-threaded-gc';

export function serverNodeFlags(cores = availableParallelism(), inherited = process.execArgv): string[] {
  return cores <= 2 && !inherited.includes(SINGLE_THREADED_GC) ? [SINGLE_THREADED_GC] : [];
}
