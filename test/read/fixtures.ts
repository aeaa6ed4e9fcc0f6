// A small instance with real Delta tables over several days, projects and services, and an
// oracle computing what a query must return from the rows that were written.

import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { batchFromRows } from '../../src/delta/batch.ts';
import { closeDeltaWorkers, DeltaTable } from '../../src/delta/table.ts';
import { type Row, SCHEMAS, TABLE_NAMES, type TableName } from '../../src/schema/tables.ts';
import { InstanceLayout } from '../../src/storage/layout.ts';

export const DAYS = ['2026-03-01', '2026-03-02', '2026-03-03'] as const;
export const PROJECTS = ['alpha', 'beta', 'gamma'];
const I64_MAX = 2n ** 63n - 1n;
const I64_MIN = -(2n ** 63n);

/** Row with every column of the table (absent ones null). */
export function fullRow(table: TableName, values: Row): Row {
  const row: Row = {};
  for (const c of SCHEMAS[table].columns) row[c.name] = values[c.name] ?? null;
  return row;
}

const dayStartUs = (day: string) => BigInt(Date.parse(`${day}T00:00:00Z`)) * 1000n;
const hex = (n: number, width: number) => n.toString(16).padStart(width, '0');

/** A long value exercising the int64 edges: beyond 2^53, negative, extremes, null. */
function edgyLong(k: number): bigint | null {
  switch (k % 7) {
    case 0:
      return I64_MAX - BigInt(k);
    case 1:
      return I64_MIN + BigInt(k);
    case 2:
      return null;
    case 3:
      return 2n ** 53n + 1n + BigInt(k);
    case 4:
      return -(2n ** 53n) - BigInt(k);
    default:
      return BigInt(k);
  }
}

function logRow(k: number, ts: bigint): Row {
  return fullRow('logs', {
    project_id: PROJECTS[k % 3],
    event_ts: ts,
    service_name: k % 5 === 4 ? null : ['api', 'worker'][k % 2],
    time_unix_nano: ts * 1000n + 7n,
    observed_time_unix_nano: k % 3 === 0 ? null : ts * 1000n + 999n,
    severity_number: k % 11 === 0 ? null : (k * 5) % 25,
    severity_text: k % 11 === 0 ? null : `S${(k * 5) % 25}`,
    body:
      k % 13 === 0 ? null : k % 6 === 0 ? `error a.b in request ${k}` : k % 9 === 0 ? `axb ${k}` : `ok ${k}`,
    attributes: `{"k":${k}}`,
    trace_id: k % 4 === 3 ? null : hex(k % 12, 32),
    span_id: k % 4 === 3 ? null : hex(k % 6, 16),
    flags: edgyLong(k),
    dropped_attributes_count: k % 2 === 0 ? 0 : null,
    schema_version: -k,
  });
}

function spanRow(k: number, ts: bigint): Row {
  return fullRow('spans', {
    project_id: PROJECTS[k % 3],
    event_ts: ts,
    service_name: ['api', 'worker'][k % 2],
    trace_id: hex(k % 4, 32),
    span_id: hex(k, 16),
    parent_span_id: k % 3 === 0 ? null : hex(k - 1, 16),
    flags: edgyLong(k),
    name: ['GET /a', 'POST /b', 'db.query'][k % 3],
    kind: (k % 5) + 1,
    start_time_unix_nano: ts * 1000n,
    end_time_unix_nano: ts * 1000n + BigInt(k) * 1_000_003n,
    duration_ns: BigInt(k) * 1_000_003n,
    status_code: k % 4 === 0 ? 2 : 0,
    events_count: k % 3,
  });
}

function spanEventRow(k: number, ts: bigint): Row {
  return fullRow('span_events', {
    project_id: PROJECTS[k % 3],
    event_ts: ts,
    service_name: 'api',
    trace_id: hex(k % 4, 32),
    span_id: hex(k % 8, 16),
    span_name: 'GET /a',
    time_unix_nano: ts * 1000n + 1n,
    name: ['exception', 'retry'][k % 2],
    attributes: k % 2 === 0 ? '{"exception.type":"Error"}' : null,
  });
}

function spanLinkRow(k: number, ts: bigint): Row {
  return fullRow('span_links', {
    project_id: PROJECTS[k % 3],
    event_ts: ts,
    service_name: 'worker',
    trace_id: hex(k % 4, 32),
    span_id: hex(k % 8, 16),
    linked_trace_id: hex(k + 100, 32),
    linked_span_id: hex(k + 100, 16),
    flags: edgyLong(k),
  });
}

function pointRow(k: number, ts: bigint): Row {
  const doubles = [Number.NaN, Number.POSITIVE_INFINITY, Number.NEGATIVE_INFINITY, -0, 1.5, 2 ** 60];
  return fullRow('metrics_points', {
    project_id: PROJECTS[k % 3],
    event_ts: ts,
    service_name: ['api', 'worker'][k % 2],
    metric_name: ['cpu', 'mem', 'requests'][k % 3],
    metric_type: ['gauge', 'sum'][k % 2],
    unit: '1',
    aggregation_temporality: k % 2 === 0 ? null : 2,
    start_time_unix_nano: edgyLong(k + 1),
    time_unix_nano: ts * 1000n,
    is_monotonic: k % 3 === 0 ? null : k % 2 === 0,
    value_double: k % 2 === 0 ? doubles[(k / 2) % doubles.length] : null,
    value_int: k % 2 === 1 ? edgyLong(k) : null,
  });
}

function histRow(k: number, ts: bigint): Row {
  return fullRow('metrics_hist', {
    project_id: PROJECTS[k % 3],
    event_ts: ts,
    service_name: 'api',
    metric_name: ['latency', 'size'][k % 2],
    metric_type: ['histogram', 'exponential_histogram', 'summary'][k % 3],
    time_unix_nano: ts * 1000n,
    count: edgyLong(k),
    sum: k % 4 === 0 ? Number.NaN : k * 0.25,
    bucket_counts: k % 5 === 0 ? null : k % 5 === 1 ? [] : [I64_MAX, I64_MIN, BigInt(k), 2n ** 53n + 1n],
    explicit_bounds: k % 5 === 0 ? null : [0.5, Number.POSITIVE_INFINITY, -k],
    scale: k % 3 === 1 ? -k : null,
    zero_count: BigInt(-k),
    positive_offset: -k,
    positive_bucket_counts: [BigInt(k)],
    quantiles: k % 3 === 2 ? [0.5, 0.99] : null,
    quantile_values: k % 3 === 2 ? [Number.NaN, 1e300] : null,
  });
}

const MAKERS: Record<TableName, (k: number, ts: bigint) => Row> = {
  logs: logRow,
  spans: spanRow,
  span_events: spanEventRow,
  span_links: spanLinkRow,
  metrics_points: pointRow,
  metrics_hist: histRow,
};

/** Rows per append (a file each); two appends per day whose event times interleave. */
const ROWS_PER_FILE: Record<TableName, number> = {
  logs: 40,
  spans: 12,
  span_events: 8,
  span_links: 6,
  metrics_points: 12,
  metrics_hist: 10,
};

export interface Fixture {
  dir: string;
  layout: InstanceLayout;
  /** Every row written, per table and day. */
  rows: Record<TableName, Map<string, Row[]>>;
  cleanup(): Promise<void>;
}

/** Appends rows to a day's table through the Delta engine (one data file). */
export async function appendRows(
  layout: InstanceLayout,
  day: string,
  table: TableName,
  rows: Row[],
): Promise<void> {
  const dt = await DeltaTable.createOrOpen(layout.tableDir(day, table), SCHEMAS[table], { fsync: false });
  try {
    await dt.append(batchFromRows(SCHEMAS[table], rows));
  } finally {
    await dt.close();
  }
}

/**
 * Three days of every table (two interleaved files per day), plus a fourth day folder holding
 * only a spans table, so that the other tables skip it.
 */
export async function makeFixture(): Promise<Fixture> {
  const dir = await mkdtemp(join(tmpdir(), 'otelake-read-'));
  const layout = new InstanceLayout(dir, 'test');
  const rows = Object.fromEntries(TABLE_NAMES.map((t) => [t, new Map<string, Row[]>()])) as Fixture['rows'];
  let k = 0;
  for (const table of TABLE_NAMES) {
    for (const day of DAYS) {
      const n = ROWS_PER_FILE[table];
      const files: Row[][] = [[], []];
      for (let i = 0; i < 2 * n; i++) {
        // Unique times; the two files interleave (even / odd rows), a few µs apart.
        const ts = dayStartUs(day) + BigInt(i) * 1_000_003n + BigInt(k % 997);
        files[i % 2]!.push(MAKERS[table](k++, ts));
      }
      for (const f of files) await appendRows(layout, day, table, f);
      rows[table].set(day, files.flat());
    }
  }
  const extraDay = '2026-03-04';
  const extra = [spanRow(k++, dayStartUs(extraDay) + 5n)];
  await appendRows(layout, extraDay, 'spans', extra);
  rows.spans.set(extraDay, extra);
  await closeDeltaWorkers();
  return {
    dir,
    layout,
    rows,
    cleanup: () => rm(dir, { recursive: true, force: true }),
  };
}

/** What a query must return: rows of the days in range passing `keep`, newest first, limited, projected. */
export function expected(
  fx: Fixture,
  table: TableName,
  opts: {
    keep?: (r: Row) => boolean;
    maxRows?: number;
    select?: string[];
    dateFrom?: string;
    dateTo?: string;
  } = {},
): Row[] {
  const all: Row[] = [];
  for (const [day, rows] of fx.rows[table]) {
    if (opts.dateFrom && day < opts.dateFrom) continue;
    if (opts.dateTo && day > opts.dateTo) continue;
    all.push(...rows);
  }
  const kept = all.filter(opts.keep ?? (() => true));
  kept.sort((a, b) => ((a.event_ts as bigint) > (b.event_ts as bigint) ? -1 : 1));
  const limited = opts.maxRows === undefined ? kept : kept.slice(0, opts.maxRows);
  if (!opts.select) return limited;
  return limited.map((r) => Object.fromEntries(opts.select!.map((c) => [c, r[c]])));
}
