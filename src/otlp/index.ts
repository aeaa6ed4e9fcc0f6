// OTLP decoding (JSON and protobuf), mapping to table rows, and response bodies.
//   const req = decodeRequest('traces', body, 'json', null);   // throws OtlpDecodeError -> 400
//   const { tables, items, invalidIds } = mapRequest('traces', req, ctx); // may throw it too
// Protobuf traces and logs are read straight from the bytes by mapRequest (wire*.ts).

export { OtlpDecodeError } from './errors.ts';
export { type MapContext, type Mapped, mapRequest } from './map.ts';
export { loadProtobuf, PROTOBUF_PACKAGE, type ProtoCodec, protobufInstalled } from './proto.ts';
export { type BodyFormat, decodeRequest, type ExportRequest, type Signal } from './request.ts';
export { type ExportOutcome, encodeExportResponse, encodeStatus, rpcCodeForHttpStatus } from './response.ts';
