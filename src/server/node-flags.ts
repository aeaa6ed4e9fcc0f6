// Node flags and environment of a server process (`otelake start` in the background and its reload
// mode, `npm start`, the benchmarks' servers). They have to be on the command line: V8 sizes a heap
// when the process starts, and a flag set later changes nothing.
//
// --max-semi-space-size=4: young generations of 4 MiB semi-spaces instead of V8's up to 16. A V8
// flag is the process's: it sizes every isolate's young generation, the workers' too (it wins over
// their resourceLimits). The main thread's garbage is a request's strings and promises, which die
// young either way, and smaller scavenges stall the event loop for less (measured at 2, against
// V8's default: p99 at half rate 12-20 -> 11-14 ms for logs and 32-41 -> 19-21 ms for spans over
// JSON, peak RSS 50-70 MiB lower). It was 2 until it showed in the workers: each scavenge has a
// fixed cost, and a decode worker scavenged every ~10 requests (trace-gc, 11 s of logs over
// protobuf: 2,888 scavenges in the two decoders, 1.48 s; at 4: 1,505, 0.99 s; all threads'
// collections 2.9 -> 2.0 s). Interleaved 8 s runs (bench/server-load.ts, default options), CPU s
// per 1M items at 2 against 4, medians: spans over JSON 9.4 -> 8.2, logs over protobuf 5.8 -> 5.5,
// spans over protobuf 8.7 -> 8.6, logs over JSON 5.9 -> 6.0; peak RSS ~5 MiB higher at the median
// (4 MiB: 234-259; 2 MiB: 227-262). At 6 or 8, peak RSS 264-304 MiB.
//
// --heap-growing-percent=100: after a full collection an isolate's old generation may grow to twice
// what survived before the next one. V8 otherwise sizes that room by its estimate of how fast it
// collects against how fast the isolate allocates, and for the event loop (~16 MB live, most of it
// the modules' code) it left ~3 MB: under load the loop ran a full collection every ~130 ms (104 in
// 14 s at half load, spans over JSON, each a 2-8 ms pause with V8's helper threads marking ~230 ms
// a second), as the batches waiting for their file outlive the young generation. With the flag: 5
// in those 14 s (122 without, in the run beside it). Three interleaved pairs of 8 s runs, default
// options (docs/benchmarks.md): half-load p99 of spans over JSON 9.1-10.5 ms against 15.1-19.0,
// spans over protobuf 6.2-8.4 against 13.2-16.1, log records and metric points the same or lower
// (5.9-6.4 against 6.2-6.9), peak RSS 195-219 MiB against 206-240. Like the other, it applies to
// every isolate; the workers collected as often as without it.
export const SERVER_NODE_FLAGS: readonly string[] = ['--max-semi-space-size=4', '--heap-growing-percent=100'];

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
// full load, default options (bench/server-load.ts --seconds 60, with 2 MiB semi-spaces then; at
// 4 MiB: 296 and 297): peak RSS 328-341 -> 279 MiB (logs over protobuf) and 327-332 -> 267 MiB
// (spans over JSON); 8 s runs: 264-296 -> 236-247 and 267-290 -> 232-242 MiB, CPU per item within
// the runs' noise (docs/benchmarks.md). withServerEnv keeps values already set; `npm start` sets
// them on its command line.
export const SERVER_ENV: Readonly<Record<string, string>> = {
  MALLOC_ARENA_MAX: '2',
  MALLOC_MMAP_THRESHOLD_: '2097152',
  MALLOC_TRIM_THRESHOLD_: '4194304',
};

/** `env` with the server's settings added where it does not set them itself. */
export function withServerEnv(env: NodeJS.ProcessEnv): NodeJS.ProcessEnv {
  return { ...SERVER_ENV, ...env };
}

/** Whether a process started with these flags and environment has the server's settings. */
export function hasServerSettings(execArgv: readonly string[], env: NodeJS.ProcessEnv): boolean {
  // Nothing for withServerFlags and withServerEnv to add.
  return (
    withServerFlags(execArgv).length === execArgv.length && Object.keys(SERVER_ENV).every((k) => k in env)
  );
}

/**
 * Makes this process one with the server's flags and environment when it lacks them (`otelake
 * start --foreground` run by hand or as a container's entrypoint): the same process, its program
 * replaced (execve), so its pid, terminal and signals stay. Where that cannot be (Windows), the
 * process runs on as it is.
 */
export function becomeServerProcess(): void {
  if (hasServerSettings(process.execArgv, process.env)) return;
  if (typeof process.execve !== 'function' || process.platform === 'win32') return;
  try {
    process.execve(
      process.execPath,
      [process.execPath, ...withServerFlags(process.execArgv), ...process.argv.slice(1)],
      withServerEnv(process.env),
    );
  } catch {
    // The program could not be replaced (a sandbox forbids it, say): it serves as it is.
  }
}
