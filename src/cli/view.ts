// `otelake view`: the newest rows of one table, read-only through the read module (safe while a
// server writes the same instance), as a table fitting the terminal; with --follow, then the rows
// committed later, one line each, until Ctrl-C. Without --table, a picker on a terminal; elsewhere
// an error listing the tables.

import { stat } from 'node:fs/promises';
import type { JsonValue, ReadQuery } from '../read/index.ts';
import { type ColumnType, SCHEMAS, TABLE_NAMES, type TableName } from '../schema/tables.ts';
import { InstanceLayout } from '../storage/layout.ts';
import { CliError, UsageError } from './errors.ts';
import type { ViewFlags } from './flags.ts';
import { fitColumns, grid, oneLine, outputWidth, panel, truncate } from './render.ts';

/**
 * Characters of a value read at most: no cell shows more than a line of the terminal, so longer
 * values are cut when read (a 50 MB log body costs the viewer a few KB).
 */
export const VIEW_FIELD_CHARS = 1000;
/** How often --follow looks for new commits. */
export const FOLLOW_POLL_MS = 500;

/** Columns shown when --select is not given: time, service, and what identifies a row of the table. */
export const DEFAULT_COLUMNS: Readonly<Record<TableName, readonly string[]>> = {
  spans: ['event_ts', 'service_name', 'name', 'duration_ns', 'status_code', 'trace_id', 'span_id'],
  span_events: ['event_ts', 'service_name', 'span_name', 'name', 'trace_id', 'span_id'],
  span_links: [
    'event_ts',
    'service_name',
    'span_name',
    'trace_id',
    'span_id',
    'linked_trace_id',
    'linked_span_id',
  ],
  logs: ['event_ts', 'service_name', 'severity_text', 'body', 'trace_id', 'span_id'],
  metrics_points: [
    'event_ts',
    'service_name',
    'metric_name',
    'metric_type',
    'value_double',
    'value_int',
    'attributes',
  ],
  metrics_hist: ['event_ts', 'service_name', 'metric_name', 'metric_type', 'count', 'sum', 'min', 'max'],
};

/** Default columns left out, in this order, when the terminal is too narrow for all of them. */
const HIDE_FIRST: Readonly<Record<TableName, readonly string[]>> = {
  spans: ['span_id', 'trace_id', 'status_code'],
  span_events: ['span_id', 'trace_id'],
  span_links: ['span_id', 'trace_id', 'span_name'],
  logs: ['span_id', 'trace_id'],
  metrics_points: ['attributes', 'metric_type'],
  metrics_hist: ['min', 'max', 'metric_type'],
};

const DESCRIPTIONS: Readonly<Record<TableName, string>> = {
  spans: 'spans of traces',
  span_events: 'events recorded on spans',
  span_links: 'links from spans to other spans',
  logs: 'log records',
  metrics_points: 'gauge and sum metric points',
  metrics_hist: 'histogram, exponential histogram and summary metric points',
};

const NUMERIC: ReadonlySet<ColumnType> = new Set<ColumnType>(['long', 'integer', 'double']);

async function pickTable(): Promise<TableName> {
  if (!process.stdin.isTTY || !process.stdout.isTTY) {
    throw new UsageError(
      `no --table given, and the table picker needs a terminal; choose one with --table: ${TABLE_NAMES.join(', ')}`,
    );
  }
  const { select } = await import('@inquirer/prompts');
  return select<TableName>({
    message: 'Table to view',
    choices: TABLE_NAMES.map((t) => ({ value: t, name: t, description: DESCRIPTIONS[t] })),
    pageSize: TABLE_NAMES.length,
  });
}

/** One cell as text: timestamps ISO 8601 (UTC, microseconds), int64 exact, lists and objects as JSON. */
export function cellText(value: unknown): string {
  if (value === null || value === undefined) return '';
  if (typeof value === 'string') return value;
  if (typeof value === 'number' || typeof value === 'boolean' || typeof value === 'bigint')
    return String(value);
  return JSON.stringify(value);
}

export interface Rendered {
  text: string;
  /** Default columns left out because the width was too small for them. */
  hidden: string[];
}

/**
 * The rows as text: a grid when the columns fit the width, else one panel per row. Timestamps
 * are cut last. When the natural widths do not fit, the `hideable` columns go first: those empty
 * in every row, then the others in the given order (only default columns are ever hideable).
 */
export function renderRows(
  table: TableName,
  columns: readonly string[],
  rows: readonly Record<string, unknown>[],
  width = outputWidth(),
  hideable: readonly string[] = [],
): Rendered {
  const schema = SCHEMAS[table];
  const text = (r: Record<string, unknown>, c: string) => oneLine(cellText(r[c]));
  const natural = (c: string) => Math.max([...c].length, ...rows.map((r) => [...text(r, c)].length));
  let shown = [...columns];
  const hidden: string[] = [];
  const fits = () => shown.reduce((a, c) => a + natural(c), 0) + 3 * shown.length + 1 <= width;
  const empty = hideable.filter((c) => rows.every((r) => text(r, c) === ''));
  for (const c of [...empty, ...hideable.filter((h) => !empty.includes(h))]) {
    if (fits() || shown.length <= 2) break;
    if (!shown.includes(c)) continue;
    shown = shown.filter((x) => x !== c);
    hidden.push(c);
  }

  const cells = rows.map((r) => shown.map((c) => cellText(r[c])));
  const types = shown.map((c) => schema.byName.get(c)?.type);
  const align = types.map((t) => (t !== undefined && NUMERIC.has(t) ? 'right' : 'left'));
  const keep = types.map((t) => t === 'timestamp');
  const asGrid = grid(shown, cells, width, align, keep);
  if (asGrid !== null) return { text: asGrid, hidden };
  return {
    text: cells
      .map((r, i) =>
        panel(
          `row ${i + 1}`,
          shown.map((c, j) => [c, r[j]!] as const),
          width,
        ),
      )
      .join('\n'),
    hidden,
  };
}

export async function viewCommand(flags: ViewFlags): Promise<void> {
  const layout = new InstanceLayout(flags.dir, flags.instanceId);
  if (flags.dateFrom && flags.dateTo && flags.dateFrom > flags.dateTo) {
    throw new UsageError(`--date-from ${flags.dateFrom} is after --date-to ${flags.dateTo}`);
  }
  const exists = await stat(layout.root).then(
    (s) => s.isDirectory(),
    () => false,
  );
  if (!exists) {
    throw new CliError(
      `no instance '${layout.instanceId}' at ${layout.root}; create it with 'otelake init' or check --dir and --instance-id`,
    );
  }
  if (flags.select) {
    // Check the columns before a picker is shown (against every table they could belong to).
    const known = new Set(TABLE_NAMES.flatMap((t) => SCHEMAS[t].columns.map((c) => c.name)));
    const unknown = flags.select.filter((c) => !known.has(c));
    if (unknown.length > 0) {
      const table = flags.table;
      const listed = table
        ? `the ${table} table's columns: ${SCHEMAS[table].columns.map((c) => c.name).join(', ')}`
        : "no table has it; docs/data-model.md lists each table's columns";
      throw new UsageError(`unknown column ${unknown.join(', ')} in --select (${listed})`);
    }
  }
  const table = flags.table ?? (await pickTable());
  const columns = flags.select ?? DEFAULT_COLUMNS[table];
  const query: ReadQuery = {
    select: [...columns],
    maxRows: flags.rows,
    storage: flags.storage,
    maxFieldChars: VIEW_FIELD_CHARS,
    ...(flags.dateFrom ? { dateFrom: flags.dateFrom } : {}),
    ...(flags.dateTo ? { dateTo: flags.dateTo } : {}),
    ...(flags.since ? { since: flags.since } : {}),
    ...(flags.until ? { until: flags.until } : {}),
  };

  const read = await import('../read/index.ts');
  try {
    if (flags.follow) await follow(layout, table, columns, query, flags.select ? [] : HIDE_FIRST[table]);
    else await show(layout, table, columns, query, flags);
  } catch (err) {
    if (
      err instanceof read.StorageUnavailableError ||
      err instanceof read.ReadLimitError ||
      err instanceof read.DamagedTableError
    )
      throw new CliError(err.message);
    if (err instanceof TypeError) throw new UsageError(toFlagNames(err.message));
    throw err;
  } finally {
    await read.closeReadWorkers();
  }
}

/** A read-model message with its field names as the flags that set them. */
function toFlagNames(message: string): string {
  return message
    .replace(/\b(since|until)\b/g, '--$1')
    .replace(/\bdateFrom\b/g, '--date-from')
    .replace(/\bdateTo\b/g, '--date-to');
}

/** What the rows shown were chosen by, for the last line. */
function describeRange(flags: ViewFlags): string {
  let range =
    flags.dateFrom || flags.dateTo
      ? ` from ${flags.dateFrom ?? 'the first day'} to ${flags.dateTo ?? 'the last day'}`
      : '';
  if (flags.since) range += ` since ${flags.since}`;
  if (flags.until) range += ` until ${flags.until}`;
  return range;
}

async function show(
  layout: InstanceLayout,
  table: TableName,
  columns: readonly string[],
  query: ReadQuery,
  flags: ViewFlags,
): Promise<void> {
  const read = await import('../read/index.ts');
  const rows = await read.readTable(layout, table, query);
  const range = describeRange(flags);
  if (rows.length === 0) {
    process.stdout.write(`no rows in ${table}${range} (instance '${layout.instanceId}')\n`);
    return;
  }
  const json = rows.map((r) => read.rowToJson(r, table));
  const { text, hidden } = renderRows(
    table,
    columns,
    json,
    outputWidth(),
    flags.select ? [] : HIDE_FIRST[table],
  );
  process.stdout.write(`${text}\n`);
  process.stdout.write(
    `${rows.length} newest row${rows.length === 1 ? '' : 's'} of ${table}${range}, newest first (instance '${layout.instanceId}')\n`,
  );
  if (hidden.length > 0) {
    process.stdout.write(
      `not shown for lack of width: ${hidden.join(', ')} (choose columns with --select)\n`,
    );
  }
}

/** Room a column is given before any row is seen: what its values usually take. */
function typicalWidth(table: TableName, column: string): number {
  const type = SCHEMAS[table].byName.get(column)?.type;
  if (type === 'timestamp') return 27;
  if (/trace_id$/.test(column)) return 32;
  if (/span_id$/.test(column)) return 16;
  if (type !== undefined && NUMERIC.has(type)) return 12;
  return column === 'body' || column === 'name' || column === 'attributes' ? 60 : 16;
}

/**
 * One line per row for --follow, columns at widths fixed up front (from the first rows and what
 * each column usually takes) so that later lines stay aligned; a header line first. When the
 * columns do not fit, the `hideable` ones go first, in order (only default columns are).
 */
export function lineFormat(
  table: TableName,
  columns: readonly string[],
  first: readonly Record<string, JsonValue>[],
  width: number,
  hideable: readonly string[] = [],
): { header: string; line: (row: Record<string, JsonValue>) => string } {
  const naturalOf = (c: string) =>
    Math.max(c.length, typicalWidth(table, c), ...first.map((r) => [...oneLine(cellText(r[c]))].length));
  let shown = [...columns];
  const room = (cols: readonly string[]) =>
    cols.reduce((a, c) => a + naturalOf(c), 0) + 2 * (cols.length - 1);
  for (const c of hideable) {
    if (room(shown) <= width || shown.length <= 2) break;
    shown = shown.filter((x) => x !== c);
  }
  const natural = shown.map(naturalOf);
  // fitColumns counts a border of 3 per column and 1 more; lines use 2 spaces between columns.
  const widths =
    fitColumns(
      natural,
      shown.map((c) => c.length),
      width + shown.length + 3,
    ) ?? natural.map((n) => Math.min(n, 20));
  const right = shown.map((c) => {
    const type = SCHEMAS[table].byName.get(c)?.type;
    return type !== undefined && NUMERIC.has(type);
  });
  const format = (cells: string[]) =>
    cells
      .map((cell, i) => {
        const text = truncate(oneLine(cell), widths[i]!);
        if (i === cells.length - 1 && !right[i]) return text;
        return right[i] ? text.padStart(widths[i]!) : text.padEnd(widths[i]!);
      })
      .join('  ')
      .trimEnd();
  return {
    header: format([...shown]),
    line: (row) => format(shown.map((c) => cellText(row[c]))),
  };
}

/**
 * --follow: the newest rows (oldest first), then every row committed later, as it is committed,
 * until Ctrl-C (exit code 130) or the end of the output (a closed pipe).
 */
async function follow(
  layout: InstanceLayout,
  table: TableName,
  columns: readonly string[],
  query: ReadQuery,
  hideable: readonly string[],
): Promise<void> {
  const read = await import('../read/index.ts');
  const { Follower } = await import('../read/follow.ts');
  const stop = new AbortController();
  const onSigint = () => {
    process.exitCode = 130;
    stop.abort(new Error('interrupted'));
  };
  const onOutputError = () => stop.abort(new Error('output closed'));
  process.once('SIGINT', onSigint);
  process.stdout.on('error', onOutputError);
  const stopped = new Promise<void>((resolve) => stop.signal.addEventListener('abort', () => resolve()));
  try {
    const follower = new Follower(layout, table, query);
    const first = (await follower.start(stop.signal)).reverse().map((r) => read.rowToJson(r, table));
    const { header, line } = lineFormat(table, columns, first, outputWidth(), hideable);
    const print = (rows: readonly Record<string, JsonValue>[]) => {
      if (rows.length > 0) process.stdout.write(`${rows.map(line).join('\n')}\n`);
    };
    process.stdout.write(`${header}\n`);
    print(first);
    let lost = 0;
    while (!stop.signal.aborted) {
      await Promise.race([new Promise((r) => setTimeout(r, FOLLOW_POLL_MS)), stopped]);
      if (stop.signal.aborted) break;
      print((await follower.poll(stop.signal)).map((r) => read.rowToJson(r, table)));
      if (follower.lost > lost) {
        process.stderr.write(
          `${follower.lost - lost} committed rows could not be shown (compacted before they were read)\n`,
        );
        lost = follower.lost;
      }
    }
  } catch (err) {
    if (!stop.signal.aborted) throw err;
  } finally {
    process.removeListener('SIGINT', onSigint);
    process.stdout.removeListener('error', onOutputError);
  }
}
