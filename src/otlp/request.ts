// Decoding of an OTLP/HTTP request body (JSON or protobuf) into the message tree the mapper reads.

import { OtlpDecodeError } from './errors.ts';
import type { ProtoCodec } from './proto.ts';
import type { Msg } from './values.ts';

export type Signal = 'traces' | 'logs' | 'metrics';
export type BodyFormat = 'json' | 'protobuf';

/** A decoded Export<Signal>ServiceRequest, ready for `mapRequest`. */
export interface ExportRequest {
  readonly signal: Signal;
  readonly format: BodyFormat;
  /**
   * The message: a parsed JSON object (lowerCamelCase or snake_case keys, values as written) or a
   * protobufjs message (ids and bytes as Uint8Array, int64 as Long). Only the outer list is checked
   * here; `mapRequest` checks the rest while it reads.
   */
  root: Msg;
  /** JSON only: the body text, parsed again exactly if an int64 JSON number beyond 2^53 shows up. */
  readonly text: string | null;
}

/** The top-level repeated field of each request, in both spellings. */
export const RESOURCE_FIELD: Readonly<Record<Signal, readonly [string, string]>> = {
  traces: ['resourceSpans', 'resource_spans'],
  logs: ['resourceLogs', 'resource_logs'],
  metrics: ['resourceMetrics', 'resource_metrics'],
};

/**
 * Decodes a request body. Throws OtlpDecodeError for bodies that are not an OTLP message
 * (truncated or invalid JSON, a top level that is not an object, a resource list that is not an
 * array, invalid protobuf). For protobuf, `proto` must be the codec from `loadProtobuf()`.
 */
export function decodeRequest(
  signal: Signal,
  body: Uint8Array,
  format: BodyFormat,
  proto: ProtoCodec | null,
): ExportRequest {
  if (format === 'protobuf') {
    if (proto === null) throw new Error('protobuf bodies need the optional package protobufjs');
    return { signal, format, root: proto.decodeRequest(signal, body), text: null };
  }
  const text = utf8(body);
  let root: unknown;
  try {
    root = text.length === 0 ? {} : JSON.parse(text);
  } catch (err) {
    throw new OtlpDecodeError(`invalid JSON body: ${(err as Error).message}`);
  }
  checkShape(signal, root);
  return { signal, format, root, text };
}

function utf8(body: Uint8Array): string {
  const text = Buffer.from(body.buffer, body.byteOffset, body.byteLength).toString('utf8');
  return text.charCodeAt(0) === 0xfeff ? text.slice(1) : text;
}

function checkShape(signal: Signal, root: unknown): asserts root is Msg {
  if (typeof root !== 'object' || root === null || Array.isArray(root)) {
    throw new OtlpDecodeError(
      `the JSON body must be an object, got ${Array.isArray(root) ? 'array' : typeof root}`,
    );
  }
  const [camel, snake] = RESOURCE_FIELD[signal];
  const r = root as Record<string, unknown>;
  const list = r[camel] ?? r[snake];
  if (list !== undefined && list !== null && !Array.isArray(list)) {
    throw new OtlpDecodeError(`${camel}: expected an array, got ${typeof list}`);
  }
}

const INT_RE = /^-?\d+$/;

// Integer literals beyond 2^53 become exact bigints (the source text is available on Node >= 22).
function exactNumbers(_key: string, value: unknown, context?: { source?: string }): unknown {
  if (typeof value === 'number' && Number.isInteger(value) && !Number.isSafeInteger(value)) {
    const source = context?.source;
    return source !== undefined && INT_RE.test(source) ? BigInt(source) : BigInt(value);
  }
  return value;
}

/** Parses a JSON request's text again with exact int64 numbers; replaces and returns its root. */
export function reparseJsonExact(req: ExportRequest): Msg {
  if (req.text === null) throw new Error('only JSON requests can be parsed again');
  // biome-ignore lint/suspicious/noExplicitAny: the reviver's third argument is missing from the lib types
  req.root = JSON.parse(req.text, exactNumbers as any);
  return req.root;
}
