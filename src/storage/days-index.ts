// `index/days.jsonl`: one JSON line per day phase, append-only, never rewritten. This module is its
// only reader and writer: the shipper records phases here, reads choose a day's storage from it,
// and the logger learns which days are finished (`finishedDays`): write-ahead-log replay skips
// them, and no row goes into one after a restart.

import { mkdir, open } from 'node:fs/promises';
import { dirname } from 'node:path';
import { readTextIfExists } from './files.ts';

export type DayPhase = 'open' | 'sealed' | 'uploaded' | 'verified' | 'cleaned' | 'failed';

/** The phases a day moves through, in order (`failed` lines sit beside them). */
export const DAY_PHASES = ['open', 'sealed', 'uploaded', 'verified', 'cleaned'] as const;
export type DayProgress = (typeof DAY_PHASES)[number];

/** What a phase line records about one table of the day. */
export interface TablePhaseStats {
  rows: number;
  version: number;
  /** Bytes of the table's files (data and log). */
  bytes?: number;
  /** Files of the table (data and log). */
  files?: number;
}

export interface DayPhaseLine {
  day: string;
  phase: DayPhase;
  at: string;
  tables?: Record<string, TablePhaseStats>;
  /** `failed` lines: the step that failed (seal, upload, verify, clean) and why. */
  step?: string;
  error?: string;
}

export async function appendDayPhase(
  file: string,
  line: Omit<DayPhaseLine, 'at'> & { at?: string },
): Promise<void> {
  await mkdir(dirname(file), { recursive: true });
  const full: DayPhaseLine = { ...line, at: line.at ?? new Date().toISOString() };
  // Synced: the line of a phase is on disk before whatever follows it (cleaning after `verified`).
  const fh = await open(file, 'a');
  try {
    await fh.appendFile(JSON.stringify(full) + '\n');
    await fh.sync();
  } finally {
    await fh.close();
  }
}

/** Every phase line; a torn last line (crash while appending) is skipped. */
export async function readDayPhases(file: string): Promise<DayPhaseLine[]> {
  const text = await readTextIfExists(file);
  if (text === undefined) return [];
  const out: DayPhaseLine[] = [];
  for (const line of text.split('\n')) {
    if (!line.trim()) continue;
    try {
      out.push(JSON.parse(line) as DayPhaseLine);
    } catch {
      // a partial line from an interrupted append: the phase did not happen
    }
  }
  return out;
}

/** Where a day stands, from its lines. */
export interface DayState {
  day: string;
  /** The furthest phase reached (failures aside). */
  phase: DayProgress;
  /** The counts recorded by the seal (what the remote copy must equal), when sealed. */
  sealed: Record<string, TablePhaseStats> | null;
  /** The failure recorded after the last phase, if any. */
  failure: { step: string; error: string; at: string } | null;
  /** Failures recorded since the last phase. */
  failures: number;
}

/** Each day's state, by day. */
export function dayStates(lines: readonly DayPhaseLine[]): Map<string, DayState> {
  const out = new Map<string, DayState>();
  for (const line of lines) {
    if (typeof line.day !== 'string') continue;
    let s = out.get(line.day);
    if (!s) {
      s = { day: line.day, phase: 'open', sealed: null, failure: null, failures: 0 };
      out.set(line.day, s);
    }
    if (line.phase === 'failed') {
      s.failure = { step: line.step ?? 'unknown', error: line.error ?? '', at: line.at };
      s.failures++;
      continue;
    }
    const rank = DAY_PHASES.indexOf(line.phase);
    if (rank < 0) continue;
    // A phase may be recorded again (a day sealed anew after a crash): the furthest one counts.
    if (rank >= DAY_PHASES.indexOf(s.phase)) s.phase = line.phase;
    if (line.phase === 'sealed' && line.tables) s.sealed = line.tables;
    if (rank > 0) {
      s.failure = null;
      s.failures = 0;
    }
  }
  return out;
}

export async function readDayStates(file: string): Promise<Map<string, DayState>> {
  return dayStates(await readDayPhases(file));
}

/** Phases after which a day is finished: its tables take no more rows. */
const FINISHED_PHASES: ReadonlySet<DayPhase> = new Set(['sealed', 'uploaded', 'verified', 'cleaned']);

/** Days with a line of a finished phase (sealed or further along), in the order of their first. */
export function finishedDays(lines: readonly DayPhaseLine[]): Set<string> {
  const out = new Set<string>();
  for (const l of lines) if (FINISHED_PHASES.has(l.phase)) out.add(l.day);
  return out;
}
