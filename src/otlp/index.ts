// OTLP request bodies (JSON and protobuf) mapped to table rows, and response bodies.
//   const { items, invalidIds } = mapRequest('traces', 'json', body, ctx, sink);
// throws OtlpDecodeError (400) for a body that is no OTLP request, TooManyRowsError (413) for one
// of more rows of a table than the server takes in one request (MapContext.maxRows). The rows go to `sink` (a
// RowSink) one by one, as column values in the table's column order; a resource whose project.id
// attribute is not a project id gives rows whose project is a RefusedProject, for the sink to refuse.

export { MAX_HELD_ROWS, type RowSink, rowCap, tooManyRows } from './columns.ts';
export { OtlpDecodeError, TooManyRowsError } from './errors.ts';
export { type MapOutcome, mapRequest, type Route } from './map.ts';
export { loadProtobuf, PROTOBUF_PACKAGE, type ProtoCodec, protobufInstalled } from './proto.ts';
export type { BodyFormat, MapContext, Signal } from './request.ts';
export { type ExportOutcome, encodeExportResponse, encodeStatus, rpcCodeForHttpStatus } from './response.ts';
