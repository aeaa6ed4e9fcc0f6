// A request body to table rows, the one route every body takes: the reader of its encoding walks
// it (protobuf-reader.ts, json-reader.ts), and the signal's mapper turns the walk into columns
// (map-traces.ts, map-logs.ts, map-metrics.ts), handed to a RowSink row by row. A JSON body the
// JSON reader declines is parsed with JSON.parse and mapped from the tree instead (tree.ts).

import { SCHEMAS, type TableName } from '../schema/tables.ts';
import type { RowSink } from './columns.ts';
import { LossyJsonNumber, OtlpDecodeError, TooManyRowsError } from './errors.ts';
import { DECLINED } from './json-cursor.ts';
import { JsonReader } from './json-reader.ts';
import { shrinkScratch } from './json-text.ts';
import { LogMapper } from './map-logs.ts';
import { MetricMapper } from './map-metrics.ts';
import { TraceMapper } from './map-traces.ts';
import { ProtobufReader } from './protobuf-reader.ts';
import type { OtlpReader } from './reader.ts';
import type { BodyFormat, MapContext, Signal } from './request.ts';
import { mapJsonTree } from './tree.ts';
import type { Walked } from './walk.ts';

/** Which way a body was mapped: by a reader, or (a JSON body the reader declined) from JSON.parse's tree. */
export type Route = 'reader' | 'tree';

export interface MapOutcome extends Walked {
  route: Route;
}

/**
 * Maps a request body (decompressed) into `sink`. Throws OtlpDecodeError for a body that is not
 * an OTLP request; the rows given before that are to be dropped.
 */
export function mapRequest(
  signal: Signal,
  format: BodyFormat,
  body: Uint8Array,
  ctx: MapContext,
  sink: RowSink,
): MapOutcome {
  try {
    if (format === 'protobuf')
      return { route: 'reader', ...walk(signal, new ProtobufReader(body), ctx, sink) };
    return { route: 'reader', ...walk(signal, new JsonReader(body), ctx, sink) };
  } catch (err) {
    // Whatever the JSON reader cannot take as it stands, the tree decides, and words the error; a
    // body too large to hold is no better there.
    if (err instanceof TooManyRowsError) throw err;
    const declined = err === DECLINED || err instanceof OtlpDecodeError || err instanceof LossyJsonNumber;
    if (format === 'protobuf' || !declined) throw err;
  } finally {
    shrinkScratch();
  }
  sink.restart();
  const mapped = mapJsonTree(signal, body, ctx);
  for (const [table, rows] of Object.entries(mapped.tables) as [TableName, Record<string, unknown>[]][]) {
    const names = SCHEMAS[table].columns.map((c) => c.name);
    const values = new Array<unknown>(names.length);
    for (const row of rows) {
      for (let j = 0; j < names.length; j++) values[j] = row[names[j]!] ?? null;
      sink.row(table, values, 0);
    }
  }
  return { route: 'tree', items: mapped.items, invalidIds: mapped.invalidIds };
}

function walk(signal: Signal, r: OtlpReader, ctx: MapContext, sink: RowSink): Walked {
  const mapper =
    signal === 'traces'
      ? new TraceMapper(r, ctx)
      : signal === 'logs'
        ? new LogMapper(r, ctx)
        : new MetricMapper(r, ctx);
  return mapper.walk(sink);
}
