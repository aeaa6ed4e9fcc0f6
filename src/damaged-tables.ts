// The day tables found damaged (a Delta log that gives no snapshot, a live data file missing or
// unreadable), each with its cause: found when the logger opens a table (today's at start, any day
// it writes or replays into) or when a read meets it. Ingest into a damaged table of today is
// refused (503) while every other table keeps working; /healthz lists them. An entry goes when
// the table opens cleanly again (the logger tries again now and then) or, for one a read found,
// when the logger checks the table again and finds it sound: after a later read of that day
// succeeds (which may not have touched the damaged file: another project's read skips it), and
// now and then while ingest asks for it.

import { DeltaLogError } from './delta/table.ts';
import { DamagedTableError } from './read/files.ts';
import type { TableName } from './schema/tables.ts';

export interface DamagedTable {
  table: TableName;
  day: string;
  /** What is damaged. */
  reason: string;
  /** When it was found (ISO 8601). */
  since: string;
  /** Who found it: opening the table, or a read of it. */
  found_by: 'open' | 'read';
}

/** An entry as kept: when it was last tried, and the damaged data file when the damage is one file's. */
interface Entry extends DamagedTable {
  triedAt: number;
  file: string | undefined;
}

/** The cause when `err` means the table is damaged (not a passing fault such as a full disk), else null. */
export function damageOf(err: unknown): string | null {
  if (err instanceof DamagedTableError) return err.reason;
  if (err instanceof DeltaLogError) return err.message;
  return null;
}

/** How often ingest into a damaged table of today tries to open it again (it may have been repaired). */
export const REOPEN_AFTER_MS = 10_000;

export class DamagedTables {
  private readonly entries = new Map<string, Entry>();
  private readonly clock: () => number;

  constructor(clock: () => number) {
    this.clock = clock;
  }

  /** Records the damage (`file`: the damaged data file); true when it is news (not known already with the same cause). */
  note(
    table: TableName,
    day: string,
    reason: string,
    foundBy: DamagedTable['found_by'],
    file?: string,
  ): boolean {
    const key = `${table}/${day}`;
    const known = this.entries.get(key);
    if (known && known.reason === reason) return false;
    const now = this.clock();
    this.entries.set(key, {
      table,
      day,
      reason,
      since: new Date(now).toISOString(),
      found_by: foundBy,
      triedAt: now,
      file,
    });
    return true;
  }

  get(table: TableName, day: string): (DamagedTable & { readonly file: string | undefined }) | undefined {
    return this.entries.get(`${table}/${day}`);
  }

  /** Forgets the table's damage; true when there was some. */
  clear(table: TableName, day: string): boolean {
    return this.entries.delete(`${table}/${day}`);
  }

  /** The damage reads found in `table` over these days (to check again after a read of them succeeded). */
  foundByReads(
    table: TableName,
    dateFrom: string | undefined,
    dateTo: string | undefined,
  ): { day: string; file: string | undefined }[] {
    const out: { day: string; file: string | undefined }[] = [];
    for (const e of this.entries.values()) {
      if (e.table !== table || e.found_by !== 'read') continue;
      if ((dateFrom === undefined || e.day >= dateFrom) && (dateTo === undefined || e.day <= dateTo))
        out.push({ day: e.day, file: e.file });
    }
    return out;
  }

  /** Whether it is time to try opening the damaged table again (at most every REOPEN_AFTER_MS). */
  dueForRetry(table: TableName, day: string): boolean {
    const e = this.entries.get(`${table}/${day}`);
    if (!e || this.clock() - e.triedAt < REOPEN_AFTER_MS) return false;
    e.triedAt = this.clock();
    return true;
  }

  list(): DamagedTable[] {
    return [...this.entries.values()].map(({ triedAt: _, file: __, ...e }) => e);
  }
}
