// Shared helpers of the OTLP tests: a body mapped the way the server maps it (the readers' route,
// JSON falling back to the tree), held equal to the tree route (JSON.parse's or protobufjs' tree,
// src/otlp/tree.ts) for the same body; and OTLP JSON -> protobuf bytes.

import assert from 'node:assert/strict';
import {
  type BodyFormat,
  mapRequest,
  OtlpDecodeError,
  type ProtoCodec,
  type Route,
  type RowSink,
  type Signal,
} from '../../src/otlp/index.ts';
import { type Mapped, mapJsonTree, mapTree } from '../../src/otlp/tree.ts';
import { type Row, SCHEMAS, type TableName } from '../../src/schema/tables.ts';
import { RowNormalizer, type ValidationSettings, validationSettings } from '../../src/schema/validate.ts';
import { defaultOptions } from '../../src/storage/options.ts';

export const CTX = { defaultProjectId: 'default-project' };

/**
 * The rows a mapping hands on, as objects keyed by column (the derived columns still null), list
 * cells as arrays (as the tree route gives them; the readers' route gives the typed arrays the
 * column builder keeps).
 */
export class RowObjects implements RowSink {
  tables: Partial<Record<TableName, Row[]>> = {};

  row(table: TableName, cells: unknown[], at: number): void {
    const row: Row = {};
    SCHEMAS[table].columns.forEach((c, j) => {
      const v = cells[at + j];
      row[c.name] = v instanceof BigInt64Array || v instanceof Float64Array ? [...v] : v;
    });
    const rows = this.tables[table] ?? [];
    rows.push(row);
    this.tables[table] = rows;
  }

  restart(): void {
    this.tables = {};
  }
}

export type Routed = Mapped & { route: Route };

/** A body mapped the way the server maps it, with the route it took. Throws what the mapping throws. */
export function mapBody(
  signal: Signal,
  format: BodyFormat,
  body: Uint8Array,
  headerProjectId?: string,
): Routed {
  const sink = new RowObjects();
  const { route, items, invalidIds } = mapRequest(signal, format, body, { ...CTX, headerProjectId }, sink);
  return { tables: sink.tables, items, invalidIds, route };
}

/** What a mapping gives: its rows, or the error (only OtlpDecodeError is ever thrown). */
export function outcome<T>(f: () => T): T | { error: string } {
  try {
    return f();
  } catch (err) {
    assert.ok(err instanceof OtlpDecodeError, `only OtlpDecodeError is thrown, got ${err}`);
    return { error: err.message };
  }
}

function withoutRoute(m: Routed | { error: string }): Mapped | { error: string } {
  if ('error' in m) return m;
  const { route: _, ...mapped } = m;
  return mapped;
}

/** The routes the helpers below saw bodies take, for tests that count them. */
export const routesTaken: Record<Route, number> = { reader: 0, tree: 0 };

/**
 * Maps a JSON body the server's way, and holds its rows (or error) equal to those of JSON.parse's
 * tree. Returns the server's rows; throws its error.
 */
export function mapJsonText(signal: Signal, json: string, headerProjectId?: string): Mapped {
  const body = Buffer.from(json);
  const served = outcome(() => mapBody(signal, 'json', body, headerProjectId));
  const tree = outcome(() => mapJsonTree(signal, body, { ...CTX, headerProjectId }));
  const mapped = withoutRoute(served);
  assert.deepEqual(mapped, tree, `the readers' route and the tree's agree on ${json.slice(0, 200)}`);
  if ('error' in mapped) throw new OtlpDecodeError(mapped.error);
  routesTaken[(served as Routed).route]++;
  return mapped;
}

export function mapJson(signal: Signal, tree: unknown): Mapped {
  return mapJsonText(signal, JSON.stringify(tree));
}

/**
 * Maps a protobuf body the server's way, and holds its rows equal to those of protobufjs' tree
 * (or both refuse it, in their own words). Returns the server's rows; throws its error.
 */
export function mapProtobuf(
  signal: Signal,
  bytes: Uint8Array,
  codec: ProtoCodec,
  headerProjectId?: string,
): Mapped {
  const served = withoutRoute(outcome(() => mapBody(signal, 'protobuf', bytes, headerProjectId)));
  const tree = outcome(() =>
    mapTree(signal, codec.decodeRequest(signal, bytes), { ...CTX, headerProjectId }),
  );
  if ('error' in served || 'error' in tree) {
    assert.equal('error' in served, 'error' in tree, 'both routes refuse the body, or neither');
    if ('error' in served) throw new OtlpDecodeError(served.error);
  } else assert.deepEqual(served, tree, "the readers' route and protobufjs' tree agree");
  routesTaken.reader++;
  return served as Mapped;
}

/** The arrival time (ms) `normalized` stamps on logs without an observed time. */
export const ARRIVAL_MS = 1_763_700_000_123;

/** The validation settings of the default options, as the server derives them. */
const DEFAULTS = defaultOptions();
export const DEFAULT_SETTINGS: ValidationSettings = validationSettings(
  DEFAULTS.producer_config,
  DEFAULTS.aggregator_config.strict_df,
);

/** A mapped row as the pipeline stores it: normalized, with the derived columns filled in. */
export function normalized(table: TableName, row: Row): Row {
  const n = new RowNormalizer(SCHEMAS[table], DEFAULT_SETTINGS, () => ARRIVAL_MS);
  const values = n.normalize(row);
  if (typeof values === 'string') throw new Error(`${table} row rejected: ${values}`);
  return n.toRow(values);
}

const ID_KEYS = new Set(['traceId', 'spanId', 'parentSpanId', 'trace_id', 'span_id', 'parent_span_id']);

// OTLP JSON writes ids as hex where protobufjs' fromObject expects base64 or bytes.
function hexIdsToBytes(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(hexIdsToBytes);
  if (v === null || typeof v !== 'object') return v;
  const out: Record<string, unknown> = {};
  for (const [k, x] of Object.entries(v)) {
    out[k] = ID_KEYS.has(k) && typeof x === 'string' ? Buffer.from(x, 'hex') : hexIdsToBytes(x);
  }
  return out;
}

/** Encodes an OTLP JSON request tree (hex ids) as protobuf with the codec's types. */
export function jsonToProtobuf(signal: Signal, tree: unknown, codec: ProtoCodec): Uint8Array {
  const type = codec.requestType(signal);
  return type.encode(type.fromObject(hexIdsToBytes(tree) as Record<string, unknown>)).finish();
}

/** The attributes of the log record of the official logs.json example, parsed from the stored JSON. */
export const FIXTURE_LOG_ATTRIBUTES = {
  'string.attribute': 'some string',
  'boolean.attribute': true,
  'int.attribute': 10,
  'double.attribute': 637.704,
  'array.attribute': ['many', 'values'],
  'map.attribute': { 'some.map.key': 'some value' },
};
