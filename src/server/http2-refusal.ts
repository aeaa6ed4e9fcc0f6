// The answer to a client that opens a connection in HTTP/2 without TLS (h2c), as an OTLP/gRPC
// exporter does: the Java SDK's default protocol is grpc, so an exporter given only
// OTEL_EXPORTER_OTLP_ENDPOINT=http://host:4318 sends the HTTP/2 preface here. An HTTP/1.1 "400"
// means nothing to it (okhttp reports FRAME_SIZE_ERROR: 4740180, the bytes "HTT"); in its own
// protocol it is told why: the server's SETTINGS (RFC 9113 §3.4: a server's preface), then GOAWAY
// with HTTP_1_1_REQUIRED and the reason as its debug data, which some clients print (grpc-go does;
// okhttp reports ConnectionShutdownException): the server's log says it too (limits.ts).

/** What an HTTP/2 client's connection preface starts with (RFC 9113 §3.4). */
const PREFACE = Buffer.from('PRI * HTTP/2.0\r\n');

const SETTINGS = 0x4;
const GOAWAY = 0x7;
/** RFC 9113 §7: "The endpoint requires that HTTP/1.1 be used instead of HTTP/2." */
const HTTP_1_1_REQUIRED = 0xd;

export const HTTP2_REASON =
  'otelake serves OTLP over HTTP/1.1, not HTTP/2 or gRPC: set the exporter to http/protobuf or ' +
  'http/json (OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf)';

/** Whether the bytes a connection opened with (a parse error's rawPacket) are HTTP/2's preface. */
export function isHttp2Preface(bytes: Uint8Array | undefined): boolean {
  if (bytes === undefined || bytes.length < PREFACE.length) return false;
  return PREFACE.equals(bytes.subarray(0, PREFACE.length));
}

/** The server's empty SETTINGS frame and a GOAWAY frame (stream 0, no stream processed). */
export function http2Refusal(): Buffer {
  const debug = Buffer.from(HTTP2_REASON);
  const goaway = frame(GOAWAY, 8 + debug.length);
  goaway.writeUInt32BE(0, 9); // last stream id: none was processed
  goaway.writeUInt32BE(HTTP_1_1_REQUIRED, 13);
  debug.copy(goaway, 17);
  return Buffer.concat([frame(SETTINGS, 0), goaway]);
}

/** A frame of `length` payload bytes on stream 0, no flags: its 9-byte header filled in. */
function frame(type: number, length: number): Buffer {
  const f = Buffer.alloc(9 + length);
  f.writeUIntBE(length, 0, 3);
  f.writeUInt8(type, 3);
  return f; // flags 0, stream id 0
}
