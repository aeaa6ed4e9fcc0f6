// `otelake view`: the newest rows of one table, read-only through the read module (safe while a
// server writes the same instance), as a table fitting the terminal. Without --table, a picker on
// a terminal; elsewhere an error listing the tables.

import { stat } from 'node:fs/promises';
import { type ColumnType, SCHEMAS, TABLE_NAMES, type TableName } from '../schema/tables.ts';
import { InstanceLayout } from '../storage/layout.ts';
import { CliError, UsageError } from './errors.ts';
import type { ViewFlags } from './program.ts';
import { grid, oneLine, outputWidth, panel } from './render.ts';

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
    if (unknown.length > 0) throw new UsageError(`unknown column ${unknown.join(', ')} in --select`);
  }
  const table = flags.table ?? (await pickTable());
  const columns = flags.select ?? DEFAULT_COLUMNS[table];

  const read = await import('../read/query.ts');
  let rows: Record<string, unknown>[];
  try {
    rows = await read.readTable(layout, table, {
      select: [...columns],
      maxRows: flags.rows,
      storage: flags.storage,
      ...(flags.dateFrom ? { dateFrom: flags.dateFrom } : {}),
      ...(flags.dateTo ? { dateTo: flags.dateTo } : {}),
    });
  } catch (err) {
    if (err instanceof read.StorageUnavailableError || err instanceof read.DamagedTableError)
      throw new CliError(err.message);
    if (err instanceof TypeError) throw new UsageError(err.message);
    throw err;
  } finally {
    await read.closeReadWorkers();
  }
  const range =
    flags.dateFrom || flags.dateTo
      ? ` from ${flags.dateFrom ?? 'the first day'} to ${flags.dateTo ?? 'the last day'}`
      : '';
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
