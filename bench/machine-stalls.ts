// How steady the machine is: one thread times a fixed piece of arithmetic (~0.3 ms) again and
// again for --seconds, and reports how much of the time it ran below a third of its usual speed
// (the median piece's), in how many episodes, and the longest.
//
// On this project's 2-core machine the whole machine (both cores at once, no steal reported)
// slowed ~10x for 10-150 ms every 1-2 s in some hours: this measured 16.8-20.3% of 5 s below a
// third of its speed on 2026-12-01, the episodes close enough to merge into runs of 0.7-0.85 s. A
// server at half load then has ~5x more work than cores for that long, and any request in such an
// episode waits tens of ms, whatever the server. bench/server-load.ts prints this before and after
// its run, so that its latency figures say what kind of hour they come from. Other processes on
// the machine slow it too: measure with nothing else running.
//
//   node bench/machine-stalls.ts [--seconds 5] [--json]

import { parseArgs } from 'node:util';

/** A slice below a third of the usual speed is "slow"; slow slices this close belong to one episode. */
const SLOW_FACTOR = 3;
const EPISODE_GAP_MS = 30;

export interface MachineStalls {
  /** Share of the time spent in slow slices, 0..1. */
  slowShare: number;
  episodes: number;
  longestMs: number;
  /** The median slice, ms. */
  sliceMs: number;
}

function slice(): number {
  let x = 0;
  for (let i = 0; i < 200_000; i++) x = (x * 31 + i) | 0;
  return x;
}

export function measureStalls(seconds: number): MachineStalls {
  for (let i = 0; i < 1000; i++) slice(); // optimized before the clock starts
  const at: number[] = [];
  const took: number[] = [];
  let sink = 0;
  const start = performance.now();
  while (performance.now() - start < seconds * 1000) {
    const t = performance.now();
    sink += slice();
    at.push(t);
    took.push(performance.now() - t);
  }
  const sliceMs = [...took].sort((a, b) => a - b)[took.length >> 1]!;
  let slowMs = 0;
  let episodes = 0;
  let longestMs = 0;
  let episodeStart = -Infinity;
  let episodeEnd = -Infinity;
  for (let i = 0; i < took.length; i++) {
    if (took[i]! <= SLOW_FACTOR * sliceMs) continue;
    slowMs += took[i]!;
    if (at[i]! - episodeEnd > EPISODE_GAP_MS) {
      episodes++;
      episodeStart = at[i]!;
    }
    episodeEnd = at[i]! + took[i]!;
    longestMs = Math.max(longestMs, episodeEnd - episodeStart);
  }
  if (sink === 0.5) console.log(''); // keeps the arithmetic from being optimized away
  return { slowShare: slowMs / (performance.now() - start), episodes, longestMs, sliceMs };
}

export function describeStalls(s: MachineStalls, seconds: number): string {
  return (
    `${(s.slowShare * 100).toFixed(1)}% of ${seconds} s below a third of its speed, ` +
    `${s.episodes} episodes, longest ${Math.round(s.longestMs)} ms`
  );
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const { values } = parseArgs({
    options: { seconds: { type: 'string', default: '5' }, json: { type: 'boolean', default: false } },
  });
  const seconds = Number(values.seconds);
  const s = measureStalls(seconds);
  console.log(values.json ? JSON.stringify(s) : describeStalls(s, seconds));
}
