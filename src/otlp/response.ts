// Response bodies: Export<Signal>ServiceResponse (with partial_success) and google.rpc.Status, in
// JSON or protobuf. The messages are tiny, so the protobuf form is written by hand: responses
// need no protobufjs.

import type { BodyFormat, Signal } from './request.ts';

export interface ExportOutcome {
  /** Items (spans, log records, data points) rejected by validation. */
  rejected: number | bigint;
  /** An English explanation; may be set with rejected = 0 as a warning. */
  message?: string;
}

const REJECTED_FIELD: Readonly<Record<Signal, string>> = {
  traces: 'rejectedSpans',
  logs: 'rejectedLogRecords',
  metrics: 'rejectedDataPoints',
};

/**
 * The body of a 200 answer. Nothing rejected and no message gives the empty message (`{}` in
 * JSON, zero bytes in protobuf); otherwise `partial_success` carries the count and the message.
 */
export function encodeExportResponse(signal: Signal, outcome: ExportOutcome, format: BodyFormat): Uint8Array {
  const rejected = BigInt(outcome.rejected);
  const message = outcome.message ?? '';
  if (rejected === 0n && message === '') return format === 'json' ? Buffer.from('{}') : new Uint8Array(0);
  if (format === 'json') {
    const fields: string[] = [];
    // A number, not proto3 JSON's canonical string: every proto3 JSON reader takes both, and the
    // Rust SDK (opentelemetry-otlp 0.33) takes only a number, else drops the partial success.
    if (rejected !== 0n) fields.push(`"${REJECTED_FIELD[signal]}":${rejected}`);
    if (message !== '') fields.push(`"errorMessage":${JSON.stringify(message)}`);
    return Buffer.from(`{"partialSuccess":{${fields.join(',')}}}`);
  }
  const partial = new ProtoWriter();
  if (rejected !== 0n) partial.varintField(1, rejected);
  if (message !== '') partial.stringField(2, message);
  const out = new ProtoWriter();
  out.bytesField(1, partial.finish());
  return out.finish();
}

/** A google.rpc.Status body for an error answer (`code` is a google.rpc.Code, e.g. 3). */
export function encodeStatus(code: number, message: string, format: BodyFormat): Uint8Array {
  if (format === 'json') return Buffer.from(JSON.stringify({ code, message }));
  const out = new ProtoWriter();
  if (code !== 0) out.varintField(1, BigInt(code));
  if (message !== '') out.stringField(2, message);
  return out.finish();
}

/** google.rpc.Code for an HTTP status, as the OTLP/HTTP spec and grpc-gateway map them. */
export function rpcCodeForHttpStatus(status: number): number {
  switch (status) {
    case 400:
      return 3; // INVALID_ARGUMENT
    case 401:
      return 16; // UNAUTHENTICATED
    case 403:
      return 7; // PERMISSION_DENIED
    case 404:
      return 5; // NOT_FOUND
    case 413:
    case 429:
      return 8; // RESOURCE_EXHAUSTED
    case 415:
      return 3;
    case 501:
      return 12; // UNIMPLEMENTED
    case 503:
      return 14; // UNAVAILABLE
    case 504:
      return 4; // DEADLINE_EXCEEDED
    default:
      return status >= 500 ? 13 : 2; // INTERNAL : UNKNOWN
  }
}

class ProtoWriter {
  private readonly bytes: number[] = [];

  private varint(v: bigint): void {
    let x = BigInt.asUintN(64, v); // negative int32/int64 are written as 10-byte two's complement
    while (x > 0x7fn) {
      this.bytes.push(Number(x & 0x7fn) | 0x80);
      x >>= 7n;
    }
    this.bytes.push(Number(x));
  }

  varintField(field: number, v: bigint): void {
    this.varint(BigInt(field << 3));
    this.varint(v);
  }

  bytesField(field: number, data: Uint8Array): void {
    this.varint(BigInt((field << 3) | 2));
    this.varint(BigInt(data.length));
    for (const b of data) this.bytes.push(b);
  }

  stringField(field: number, s: string): void {
    this.bytesField(field, Buffer.from(s, 'utf8'));
  }

  finish(): Uint8Array {
    return Uint8Array.from(this.bytes);
  }
}
