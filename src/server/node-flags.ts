// Node flags and environment of a server process (`otelake start` in the background and its reload mode, `npm
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

// The environment a server process starts with: glibc's malloc reads it when the process starts,
// so, like the flags, it has to be there from the start. By default glibc raises its threshold for
// serving a large block with its own mmap whenever such a block is freed (up to 32 MiB): once a
// file's buffers had been freed, later ones came from the threads' arenas, which kept what was
// freed, and RSS crept up under sustained load. Fixed: blocks from 2 MiB are mapped and unmapped;
// an arena keeps up to 4 MiB free at its top, so that zstd's ~1.3 MiB context, made for every
// page, is not handed back and faulted in again each time (at the default 128 KiB: 25 times the
// page faults, +65% compression CPU); two arenas serve all threads instead of one each. 60 s at
// full load, default options (bench/server-load.ts --seconds 60): peak RSS 328-341 -> 279 MiB
// (logs over protobuf) and 327-332 -> 267 MiB (spans over JSON); 8 s runs: 264-296 -> 236-247 and
// 267-290 -> 232-242 MiB, CPU per item within the runs' noise (docs/benchmarks.md). withServerEnv
// keeps values already set; `npm start` sets them on its command line.
export const SERVER_ENV: Readonly<Record<string, string>> = {
  MALLOC_ARENA_MAX: '2',
  MALLOC_MMAP_THRESHOLD_: '2097152',
  MALLOC_TRIM_THRESHOLD_: '4194304',
};

/** `env` with the server's settings added where it does not set them itself. */
export function withServerEnv(env: NodeJS.ProcessEnv): NodeJS.ProcessEnv {
  return { ...SERVER_ENV, ...env };
}
