// Shared helpers of the OTLP tests: decode+map in one call, and OTLP JSON -> protobuf bytes.

import { type Mapped, mapRequest, type ProtoCodec, type Signal } from '../../src/otlp/index.ts';
import { decodeRequest } from '../../src/otlp/request.ts';
import { type Row, SCHEMAS, type TableName } from '../../src/schema/tables.ts';
import { RowNormalizer } from '../../src/schema/validate.ts';

export const CTX = { defaultProjectId: 'default-project' };

export function mapJsonText(signal: Signal, json: string, headerProjectId?: string): Mapped {
  const req = decodeRequest(signal, Buffer.from(json), 'json', null);
  return mapRequest(signal, req, { ...CTX, headerProjectId });
}

export function mapJson(signal: Signal, tree: unknown): Mapped {
  return mapJsonText(signal, JSON.stringify(tree));
}

export function mapProtobuf(signal: Signal, bytes: Uint8Array, codec: ProtoCodec): Mapped {
  return mapRequest(signal, decodeRequest(signal, bytes, 'protobuf', codec), CTX);
}

/** The arrival time (ms) `normalized` stamps on logs without an observed time. */
export const ARRIVAL_MS = 1_763_700_000_123;

/** A mapped row as the pipeline stores it: normalized, with the derived columns filled in. */
export function normalized(table: TableName, row: Row): Row {
  const settings = {
    validateRequired: true,
    validateTypes: true,
    normalizeServiceName: true,
    defaultServiceName: 'unknown_service',
    strictColumns: true,
  };
  const n = new RowNormalizer(SCHEMAS[table], settings, () => ARRIVAL_MS);
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
