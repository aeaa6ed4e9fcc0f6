// Decoding of an OTLP/HTTP request body (JSON or protobuf) into the message tree the mapper reads;
// protobuf traces and logs skip the tree: the mapper reads their bytes (wire-traces.ts, wire-logs.ts),
// and so do JSON traces, which get a tree only when that fast path declines (json-traces.ts).

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
   * protobufjs message (ids and bytes as Uint8Array, int64 as Long); null when `wire` is set, and
   * for JSON traces until `parseJson`. Only the outer list is checked here; `mapRequest` checks
   * the rest while it reads.
   */
  root: Msg;
  /** Protobuf traces and logs: the body itself, which `mapRequest` reads without a message tree. */
  readonly wire: Uint8Array | null;
  /** JSON only: the body text, parsed again exactly if an int64 JSON number beyond 2^53 shows up. */
  text: string | null;
  /** JSON only: the body, read by `mapRequest` first without a tree (traces) or by `parseJson`. */
  readonly json: Uint8Array | null;
}

/** The top-level repeated field of each request, in both spellings. */
const RESOURCE_FIELD: Readonly<Record<Signal, readonly [string, string]>> = {
  traces: ['resourceSpans', 'resource_spans'],
  logs: ['resourceLogs', 'resource_logs'],
  metrics: ['resourceMetrics', 'resource_metrics'],
};

/**
 * Decodes a request body. Throws OtlpDecodeError for bodies that are not an OTLP message
 * (truncated or invalid JSON, a top level that is not an object, a resource list that is not an
 * array, invalid protobuf metrics); invalid protobuf traces and logs are found by `mapRequest`,
 * which reads their bytes. For protobuf, `proto` must be the codec from `loadProtobuf()`.
 */
export function decodeRequest(
  signal: Signal,
  body: Uint8Array,
  format: BodyFormat,
  proto: ProtoCodec | null,
): ExportRequest {
  if (format === 'protobuf') {
    if (proto === null) throw new Error('protobuf bodies need the optional package protobufjs');
    if (signal !== 'metrics') return { signal, format, root: null, text: null, wire: body, json: null };
    return { signal, format, root: proto.decodeRequest(signal, body), text: null, wire: null, json: null };
  }
  const req: ExportRequest = { signal, format, root: null, text: null, wire: null, json: body };
  if (signal !== 'traces') parseJson(req);
  return req;
}

/**
 * Parses a JSON request's body into its tree (`root`, and `text`): OtlpDecodeError when it is not
 * an OTLP message.
 */
export function parseJson(req: ExportRequest): Msg {
  if (req.json === null) throw new Error('only JSON requests are parsed');
  const text = utf8(req.json);
  let root: unknown;
  try {
    root = text.length === 0 ? {} : JSON.parse(text);
  } catch (err) {
    throw new OtlpDecodeError(`invalid JSON body: ${(err as Error).message}`);
  }
  checkShape(req.signal, root);
  req.text = text;
  req.root = root;
  return root;
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

/**
 * The JSON text with every integer literal of 16 digits or more (possibly beyond 2^53) turned into
 * a string, which the int64 readers take exactly. Strings are skipped, so their content is never
 * touched. Linear, and only used for the rare body that writes big int64 values as numbers.
 */
export function quoteBigIntegers(text: string): string {
  const n = text.length;
  let out = '';
  let copied = 0;
  let i = 0;
  while (i < n) {
    const c = text.charCodeAt(i);
    if (c === 0x22) {
      i = skipString(text, i + 1);
    } else if (c === 0x2d || (c >= 0x30 && c <= 0x39)) {
      const start = i;
      if (c === 0x2d) i++;
      const digitsFrom = i;
      while (i < n && isDigit(text.charCodeAt(i))) i++;
      const next = i < n ? text.charCodeAt(i) : 0;
      if (next === 0x2e || next === 0x65 || next === 0x45) {
        // A fraction or exponent: a double, left as it is.
        while (i < n && isNumberChar(text.charCodeAt(i))) i++;
      } else if (i - digitsFrom >= 16) {
        out += `${text.slice(copied, start)}"${text.slice(start, i)}"`;
        copied = i;
      }
    } else i++;
  }
  return copied === 0 ? text : out + text.slice(copied);
}

// Index after the closing quote of a string whose content starts at `i`.
function skipString(text: string, i: number): number {
  for (;;) {
    const quote = text.indexOf('"', i);
    if (quote === -1) return text.length; // unterminated: JSON.parse reports it
    let backslashes = 0;
    for (let k = quote - 1; k >= i && text.charCodeAt(k) === 0x5c; k--) backslashes++;
    i = quote + 1;
    if (backslashes % 2 === 0) return i;
  }
}

function isDigit(c: number): boolean {
  return c >= 0x30 && c <= 0x39;
}

function isNumberChar(c: number): boolean {
  return isDigit(c) || c === 0x2e || c === 0x65 || c === 0x45 || c === 0x2b || c === 0x2d;
}

/** Parses a JSON request's text again with big integer literals kept exact; replaces its root. */
export function reparseJsonExact(req: ExportRequest): Msg {
  if (req.text === null) throw new Error('only JSON requests can be parsed again');
  req.root = JSON.parse(quoteBigIntegers(req.text));
  return req.root;
}
