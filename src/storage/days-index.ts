// `index/days.jsonl`: one JSON line per day phase, append-only, never rewritten.

import { appendFile, mkdir } from 'node:fs/promises';
import { dirname } from 'node:path';
import { readTextIfExists } from './files.ts';

export type DayPhase = 'open' | 'sealed' | 'uploaded' | 'verified' | 'cleaned' | 'failed';

export interface DayPhaseLine {
  day: string;
  phase: DayPhase;
  at: string;
  tables?: Record<string, { rows: number; version: number }>;
  step?: string;
  error?: string;
}

export async function appendDayPhase(
  file: string,
  line: Omit<DayPhaseLine, 'at'> & { at?: string },
): Promise<void> {
  await mkdir(dirname(file), { recursive: true });
  const full: DayPhaseLine = { ...line, at: line.at ?? new Date().toISOString() };
  await appendFile(file, JSON.stringify(full) + '\n');
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
