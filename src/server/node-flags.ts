// Node flags of a server process (`otelake start` in the background and its reload mode, `npm
// start`, the benchmarks' servers). They have to be on the command line: V8 sizes a heap when the
// process starts, and a flag set later changes nothing.
//
// --max-semi-space-size=2: the main thread's young generation at 4 MiB instead of V8's 32. Its
// garbage is a request's strings and promises, which die young either way; smaller scavenges
// stall the event loop for less. Three back-to-back pairs under load (bench/server-load.ts,
// default options): p99 at half rate 12-20 -> 11-14 ms (logs) and 32-41 -> 19-21 ms (spans over
// JSON), event-loop delay p99 5.8-7.3 -> 4.1-5.5 ms, peak RSS 50-70 MiB lower, throughput within
// the runs' noise. The workers set their own young generation (resourceLimits).
export const SERVER_NODE_FLAGS: readonly string[] = ['--max-semi-space-size=2'];

/** `execArgv` with the server's flags added where it does not set them itself. */
export function withServerFlags(execArgv: readonly string[]): string[] {
  const name = (flag: string) => flag.split('=')[0];
  const own = new Set(execArgv.map(name));
  return [...execArgv, ...SERVER_NODE_FLAGS.filter((f) => !own.has(name(f)))];
}
