// Where the mappers put what they read: cells by column, no object per row. A mapper writes an
// item's own cells as it reads the item; the cells an item shares with others (its resource, scope,
// span, metric) are written down the item rows when that message ends, since protobuf and JSON
// may send them after the items. Once a resource ends its rows are complete, and are handed to a
// RowSink one by one, in the table's column order, where they lie in the cells (not copied out):
// the server's sink validates and normalizes each (schema/validate.ts) straight into the table's
// column builder.

import type { RefusedProject } from '../schema/project.ts';
import { SCHEMAS, type TableName } from '../schema/tables.ts';
import { TooManyRowsError } from './errors.ts';

export interface RowSink {
  /**
   * A row of `table`: `cells[at]` on, one value per column, in the table's column order, as the
   * mapper made it (null where it has none, never undefined; the derived columns left null). The
   * sink may change its row's cells in place, not others; `cells` is not the sink's to keep once
   * this returns. A list cell is a view of a larger typed array (ListCells), so a sink copies its
   * elements rather than keeping it. The first cell, the project id, is a RefusedProject for a
   * resource whose project.id breaks the rule: the sink refuses such a row, for that reason.
   */
  row(table: TableName, cells: unknown[], at: number): void;
  /** Forget the rows given so far: the body is mapped again, another way. */
  restart(): void;
}

/** The positions of `names` in `table`'s columns; a name the table lacks is an error at load. */
export function columnsOf<const N extends readonly string[]>(
  table: TableName,
  names: N,
): { readonly [K in N[number]]: number } {
  const columns = SCHEMAS[table].columns.map((c) => c.name);
  const out: Record<string, number> = {};
  for (const name of names) {
    const i = columns.indexOf(name);
    if (i < 0) throw new Error(`table ${table} has no column ${name}`);
    out[name] = i;
  }
  return out as { readonly [K in N[number]]: number };
}

/** The columns every table has, filled from the resource and the scope. */
const SHARED = [
  'project_id',
  'service_name',
  'resource_attributes',
  'resource_dropped_attributes_count',
  'resource_schema_url',
  'scope_name',
  'scope_version',
  'scope_attributes',
  'scope_dropped_attributes_count',
  'scope_schema_url',
] as const;

type SharedColumns = { readonly [K in (typeof SHARED)[number]]: number };
const SHARED_COLUMNS = new Map<TableName, SharedColumns>();

/** The columns of a resource (the project id and service name are derived from its attributes). */
export interface ResourceCells {
  /** A RefusedProject when the resource's project.id breaks the rule: the sink refuses its rows. */
  projectId: string | RefusedProject;
  serviceName: string | null;
  attributes: string;
  dropped: number;
  schemaUrl: string | null;
}

export interface ScopeCells {
  name: string | null;
  version: string | null;
  attributes: string;
  dropped: number;
  schemaUrl: string | null;
}

/** Index of a 64-bit value's high 32-bit word within its pair, in this platform's byte order. */
const HIGH_WORD = new Uint8Array(new Uint32Array([1]).buffer)[0] === 1 ? 1 : 0;

/** Elements of one chunk of list cells (see ListCells). */
const LIST_CHUNK = 4096;

/**
 * List cells (bucket counts, bounds, quantiles) as views of larger typed arrays, handed out in
 * turn and never written again: a typed array of more than 64 bytes costs V8 an allocation outside
 * its heap (0.6-1.2 µs here), a view of a shared one ~0.1 µs. A chunk is garbage once the sink
 * has copied its cells out.
 */
class ListCells<T extends Float64Array | BigInt64Array> {
  private readonly make: (n: number) => T;
  private chunk: T;
  private used = 0;

  constructor(make: (n: number) => T) {
    this.make = make;
    this.chunk = make(LIST_CHUNK);
  }

  /** A cell of `n` elements, to be filled. */
  alloc(n: number): T {
    if (this.used + n > this.chunk.length) {
      this.chunk = this.make(Math.max(LIST_CHUNK, n));
      this.used = 0;
    }
    const cell = this.chunk.subarray(this.used, this.used + n) as T;
    this.used += n;
    return cell;
  }
}

const doubleCells = new ListCells((n) => new Float64Array(n));
const int64Cells = new ListCells((n) => new BigInt64Array(n));

/** A list cell of doubles, copied element by element (faster than a typed array's `set` from an array). */
export function float64Cell(values: readonly number[]): Float64Array {
  const cell = doubleCells.alloc(values.length);
  for (let i = 0; i < values.length; i++) cell[i] = values[i]!;
  return cell;
}

/**
 * The int64 elements of a list cell (bucket counts) as a reader reads them: straight into a typed
 * array, a protobuf value as its two 32-bit halves, without a BigInt each. Reused from cell to
 * cell; `take` copies a cell's elements out.
 */
export class Int64List {
  private values = new BigInt64Array(16);
  private words = new Uint32Array(this.values.buffer);
  length = 0;

  clear(): void {
    this.length = 0;
  }

  push(v: bigint): void {
    if (this.length === this.values.length) this.grow();
    this.values[this.length++] = v;
  }

  /** An element given as its low and high 32 bits (unsigned): the int64 with those bits. */
  pushWords(lo: number, hi: number): void {
    if (this.length === this.values.length) this.grow();
    const at = 2 * this.length++;
    this.words[at + 1 - HIGH_WORD] = lo;
    this.words[at + HIGH_WORD] = hi;
  }

  /** An element given as a safe integer of at least 0 (below 2^53). */
  pushSafe(v: number): void {
    const hi = Math.floor(v / 0x100000000);
    this.pushWords(v - hi * 0x100000000, hi);
  }

  /** The elements, as a list cell of their own. */
  take(): BigInt64Array {
    const cell = int64Cells.alloc(this.length);
    cell.set(this.values.subarray(0, this.length));
    return cell;
  }

  private grow(): void {
    const next = new BigInt64Array(this.values.length * 2);
    next.set(this.values);
    this.values = next;
    this.words = new Uint32Array(next.buffer);
  }
}

/**
 * Per table, null cells for as many rows as its last flush handed on (rows run alike from request to
 * request): a new set of cells is a copy of them, which V8 makes with one memory copy, where filling
 * a new array with null takes its runtime's slow path.
 */
const NULL_CELLS = new Map<TableName, unknown[]>();
/** Rows whose null cells NULL_CELLS keeps at most: a larger flush would leave its size to every request after it. */
const NULL_CELLS_MAX_ROWS = 8192;

/**
 * Rows of one table a mapper holds at once, at most. A JSON resource holds its rows to its end; 3.9
 * KB of gzip can inflate to a resource of a million empty log records, whose 30M cells V8 holds
 * in a dictionary past 32M and then fails whole-process ("invalid table size"). No body within
 * the default 64 MiB limit holds that many real items (64 bytes each).
 */
export const MAX_HELD_ROWS = 1 << 20;

/** The rows of one table a request may make: the server's cap (MapContext.maxRows), at most MAX_HELD_ROWS. */
export function rowCap(maxRows: number | undefined): number {
  return Math.min(maxRows ?? MAX_HELD_ROWS, MAX_HELD_ROWS);
}

/** A request of more rows than the server takes at once (413). */
export function tooManyRows(max: number, table: TableName | string): TooManyRowsError {
  return new TooManyRowsError(`more than ${max} ${table} rows in one request: send smaller batches`);
}

/**
 * The rows of one table a mapper has made and not yet handed on: their cells in one array, row
 * after row (`width` cells each), written by column index, null until written. A fresh array each
 * time: the young cells die with it instead of being remembered by an old one.
 */
export class TableRows {
  readonly table: TableName;
  private readonly shared: SharedColumns;
  private readonly width: number;
  private readonly maxRows: number;
  private cells: unknown[];
  /** Rows made since the last `flush`. */
  n = 0;
  /** Rows handed on. */
  flushed = 0;

  constructor(table: TableName, maxRows?: number) {
    this.table = table;
    this.maxRows = rowCap(maxRows);
    let shared = SHARED_COLUMNS.get(table);
    if (shared === undefined) {
      shared = columnsOf(table, SHARED);
      SHARED_COLUMNS.set(table, shared);
    }
    this.shared = shared;
    this.width = SCHEMAS[table].columns.length;
    this.cells = this.emptyCells();
  }

  private emptyCells(): unknown[] {
    return NULL_CELLS.get(this.table)?.slice() ?? new Array(16 * this.width).fill(null);
  }

  /** Starts a row; returns its index, for `set`. */
  add(): number {
    if ((this.n + 1) * this.width > this.cells.length) this.grow();
    return this.n++;
  }

  /** Twice the rows' room (at most maxRows), the new cells null (as the sink takes them: never undefined). */
  private grow(): void {
    const cells = this.cells;
    const size = cells.length;
    const most = this.maxRows * this.width;
    if (size >= most) throw tooManyRows(this.maxRows, this.table);
    const next = Math.min(Math.max(2 * size, this.width), most);
    cells.length = next;
    cells.fill(null, size);
  }

  set(column: number, row: number, value: unknown): void {
    this.cells[row * this.width + column] = value;
  }

  /** Sets `column` of the rows made since `from` (a row index). */
  fill(column: number, from: number, value: unknown): void {
    const cells = this.cells;
    const width = this.width;
    for (let i = from * width + column, end = this.n * width; i < end; i += width) cells[i] = value;
  }

  /** Forgets the rows made since `from`. */
  truncate(from: number): void {
    this.cells.fill(null, from * this.width, this.n * this.width);
    this.n = from;
  }

  fillResource(from: number, r: ResourceCells): void {
    const s = this.shared;
    this.fill(s.project_id, from, r.projectId);
    this.fill(s.service_name, from, r.serviceName);
    this.fill(s.resource_attributes, from, r.attributes);
    this.fill(s.resource_dropped_attributes_count, from, r.dropped);
    this.fill(s.resource_schema_url, from, r.schemaUrl);
  }

  fillScope(from: number, scope: ScopeCells): void {
    const s = this.shared;
    this.fill(s.scope_name, from, scope.name);
    this.fill(s.scope_version, from, scope.version);
    this.fill(s.scope_attributes, from, scope.attributes);
    this.fill(s.scope_dropped_attributes_count, from, scope.dropped);
    this.fill(s.scope_schema_url, from, scope.schemaUrl);
  }

  /** Hands every row on to `sink`, and starts over with empty cells. */
  flush(sink: RowSink): void {
    const n = this.n;
    if (n === 0) return;
    const cells = this.cells;
    const width = this.width;
    for (let i = 0, at = 0; i < n; i++, at += width) sink.row(this.table, cells, at);
    if (n <= NULL_CELLS_MAX_ROWS && NULL_CELLS.get(this.table)?.length !== n * width)
      NULL_CELLS.set(this.table, new Array(n * width).fill(null));
    this.flushed += n;
    this.n = 0;
    this.cells = this.emptyCells();
  }
}
