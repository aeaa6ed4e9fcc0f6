// Rows as they are committed, for `otelake view --follow`: a follower reads a query's answer once,
// then, at each poll, the rows committed to the table since, in commit order. It reads the commits
// of each day's Delta log that can still grow (today's, yesterday's for batches that straddle
// midnight, and any new day). Data files added by a commit (dataChange) hold the new rows; a
// compaction (no dataChange) moves rows into a new file in the order of its inputs, so a new file
// compacted away before the follower saw it is read from its place in the compacted file.

import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { commitFileName, LOG_DIR, parseCommit } from '../delta/actions.ts';
import { listLog } from '../delta/table.ts';
import type { Row, TableName } from '../schema/tables.ts';
import type { InstanceLayout } from '../storage/layout.ts';
import { listLocalDays, snapshotOf } from './files.ts';
import { type NormalizedQuery, normalizeQuery, type ReadQuery } from './filters.ts';
import { readRanges, streamRows } from './query.ts';
import type { RangePart } from './scan.ts';

/** Where a follower stands in one day's table. */
interface Cursor {
  /** The last commit applied. */
  version: number;
  /** Rows of each live data file (absolute paths). */
  rows: Map<string, number>;
}

/** Rows of a file that moved into a compacted one, from `offset` on. */
interface Moved {
  into: string;
  offset: number;
}

const DAY_MS = 86_400_000;

export class Follower {
  private readonly cursors = new Map<string, Cursor>();
  private readonly layout: InstanceLayout;
  private readonly table: TableName;
  private readonly query: ReadQuery;
  private readonly q: NormalizedQuery;
  private readonly clock: () => number;
  /** Rows committed but not found (compacted together with files of unknown size). */
  lost = 0;

  constructor(layout: InstanceLayout, table: TableName, query: ReadQuery, clock: () => number = Date.now) {
    this.layout = layout;
    this.table = table;
    this.clock = clock;
    this.query = query;
    // Every new row is wanted: the window and filters apply, the row limit does not.
    this.q = normalizeQuery(table, { ...query, maxRows: undefined });
  }

  /** The days whose tables can still get rows: yesterday, today and later (UTC), in the query's range. */
  private async liveDays(): Promise<string[]> {
    const from = new Date(this.clock() - DAY_MS).toISOString().slice(0, 10);
    const days = (await listLocalDays(this.layout)).filter(
      (d) =>
        d >= from &&
        (this.q.dateFrom === null || d >= this.q.dateFrom) &&
        (this.q.dateTo === null || d <= this.q.dateTo),
    );
    return days.sort();
  }

  /**
   * The query's answer now (newest first, as a read), after which `poll` reports what is committed
   * later, exactly: the cursors start at the versions the answer was read at.
   */
  async start(signal?: AbortSignal): Promise<Row[]> {
    for (const day of await this.liveDays()) {
      const dir = this.layout.tableDir(day, this.table);
      const snapshot = await snapshotOf(dir);
      this.cursors.set(dir, {
        version: snapshot?.version ?? -1,
        rows: new Map(snapshot?.files.map((f) => [f.path, f.numRecords]) ?? []),
      });
    }
    const versions = new Map<string, number>();
    const rows: Row[] = [];
    const opts = { versions, ...(signal ? { signal } : {}) };
    for await (const chunk of streamRows(this.layout, this.table, this.query, opts)) rows.push(...chunk.rows);
    // Commits between the snapshots above and the answer are in the answer: applied, not reported.
    for (const [dir, cursor] of this.cursors) await this.advance(dir, cursor, versions.get(dir) ?? -1, null);
    return rows;
  }

  /** Rows committed since the last call (or `start`), in commit order, that pass the query. */
  async poll(signal?: AbortSignal): Promise<Row[]> {
    const days = await this.liveDays();
    const live = new Set(days.map((d) => this.layout.tableDir(d, this.table)));
    for (const dir of this.cursors.keys()) if (!live.has(dir)) this.cursors.delete(dir);
    const parts: RangePart[] = [];
    for (const dir of live) {
      let cursor = this.cursors.get(dir);
      if (!cursor) {
        cursor = { version: -1, rows: new Map() };
        this.cursors.set(dir, cursor);
      }
      const log = await listLog(join(dir, LOG_DIR));
      const newest = log.commits.at(-1) ?? -1;
      await this.advance(dir, cursor, newest, parts);
    }
    return readRanges(this.q, parts, signal);
  }

  /**
   * Applies the commits after the cursor up to `version`; with `parts`, adds to it the rows they
   * committed (where those rows are now).
   */
  private async advance(
    dir: string,
    cursor: Cursor,
    version: number,
    parts: RangePart[] | null,
  ): Promise<void> {
    /** Files committed with new rows, in commit order, and their row counts. */
    const added = new Map<string, number>();
    const moved = new Map<string, Moved>();
    const logDir = join(dir, LOG_DIR);
    for (let v = cursor.version + 1; v <= version; v++) {
      let text: string;
      try {
        text = await readFile(join(logDir, commitFileName(v)), 'utf8');
      } catch {
        break; // not written yet (or gone): the next poll goes on from here
      }
      let inputs: string[] = [];
      for (const action of parseCommit(text, v)) {
        if (action.remove) inputs.push(join(dir, decodeURIComponent(action.remove.path)));
        const add = action.add;
        if (!add) continue;
        const path = join(dir, decodeURIComponent(add.path));
        const rows = numRecords(add.stats);
        if (add.dataChange) {
          added.set(path, rows);
        } else {
          // A compaction: its inputs (the removes before this add), in order, make up the file.
          let offset = 0;
          for (const input of inputs) {
            moved.set(input, { into: path, offset });
            offset += cursor.rows.get(input) ?? Number.NaN;
            cursor.rows.delete(input);
          }
          inputs = [];
        }
        cursor.rows.set(path, rows);
      }
      for (const input of inputs) cursor.rows.delete(input); // removes without a compaction
      cursor.version = v;
    }
    if (parts === null) return;
    for (const [path, count] of added) {
      let at = { path, start: 0 };
      for (let m = moved.get(at.path); m !== undefined; m = moved.get(at.path))
        at = { path: m.into, start: m.offset + at.start };
      if (!Number.isFinite(at.start) || !Number.isFinite(count)) {
        this.lost += Number.isFinite(count) ? count : 0;
        continue;
      }
      if (count > 0) parts.push({ path: at.path, start: at.start, count });
    }
  }
}

function numRecords(stats: string | null | undefined): number {
  if (!stats) return Number.NaN;
  const n = (JSON.parse(stats) as { numRecords?: unknown }).numRecords;
  return typeof n === 'number' ? n : Number.NaN;
}
