// Protobuf support through the optional dependency protobufjs, loaded on first use. The OTLP
// definitions live in proto/ at the package root (shipped with the package).

import { fileURLToPath } from 'node:url';
import type * as Protobuf from 'protobufjs';
import { OtlpDecodeError } from './errors.ts';
import type { Signal } from './request.ts';
import type { Msg } from './values.ts';

/** The package to install for protobuf bodies (named in the 415 answer when it is missing). */
export const PROTOBUF_PACKAGE = 'protobufjs';

export interface ProtoCodec {
  /** Every OTLP type (and google.rpc.Status), for tools and tests. */
  readonly root: Protobuf.Root;
  /** The Export<Signal>ServiceRequest type of a signal. */
  requestType(signal: Signal): Protobuf.Type;
  /** Decodes a request body; ids and bytes stay Uint8Array, int64 values are Long. */
  decodeRequest(signal: Signal, body: Uint8Array): Msg;
}

const PROTO_FILES = [
  'opentelemetry/proto/collector/trace/v1/trace_service.proto',
  'opentelemetry/proto/collector/logs/v1/logs_service.proto',
  'opentelemetry/proto/collector/metrics/v1/metrics_service.proto',
  'google/rpc/status.proto',
];

const REQUEST_TYPES: Readonly<Record<Signal, string>> = {
  traces: 'opentelemetry.proto.collector.trace.v1.ExportTraceServiceRequest',
  logs: 'opentelemetry.proto.collector.logs.v1.ExportLogsServiceRequest',
  metrics: 'opentelemetry.proto.collector.metrics.v1.ExportMetricsServiceRequest',
};

// src/otlp/ and dist/otlp/ are both two levels below the package root.
const PROTO_DIR = fileURLToPath(new URL('../../proto/', import.meta.url));

/**
 * protobufjs puts the zero value of every oneof member on the message prototype (asDouble = 0,
 * stringValue = ''), which hides which member was sent; null there makes "not sent" visible.
 */
function clearOneofDefaults(pb: typeof Protobuf, ns: Protobuf.NamespaceBase): void {
  for (const nested of ns.nestedArray) {
    if (nested instanceof pb.Type) {
      const proto = nested.ctor.prototype as Record<string, unknown>;
      for (const oneof of nested.oneofsArray) for (const field of oneof.fieldsArray) proto[field.name] = null;
    }
    if (nested instanceof pb.Type || nested instanceof pb.Namespace) clearOneofDefaults(pb, nested);
  }
}

/**
 * The setter protobufjs calls with a oneof member's name each time it decodes that member. Its own
 * deletes every other member from the message: six `delete`s per attribute value, a fifth of the
 * decoding time. This one deletes only the member decoded before, if any: a later member still wins.
 */
function lastMemberWins(
  _members: string[],
): (this: Record<symbol | string, unknown>, member: string) => void {
  const decoded = Symbol('oneof member');
  return function (member) {
    const before = this[decoded] as string | undefined;
    if (before !== undefined && before !== member) delete this[before];
    this[decoded] = member;
  };
}

let loading: Promise<ProtoCodec | null> | undefined;

/** The protobuf codec, or null when protobufjs is not installed. Loaded once. */
export function loadProtobuf(): Promise<ProtoCodec | null> {
  loading ??= load();
  return loading;
}

/** The protobufjs module, or null when it is not installed. */
async function importProtobuf(): Promise<typeof Protobuf | null> {
  let pb: typeof Protobuf;
  try {
    const mod = (await import(PROTOBUF_PACKAGE)) as typeof Protobuf & { default?: typeof Protobuf };
    pb = mod.default ?? mod;
  } catch {
    return null;
  }
  // Without Long, protobufjs decodes int64 to lossy numbers.
  if (!pb.util.Long) throw new Error('protobufjs was loaded without its "long" dependency');
  return pb;
}

/** Whether protobuf bodies can be decoded (protobufjs is installed), without building the codec. */
export async function protobufInstalled(): Promise<boolean> {
  return (await importProtobuf()) !== null;
}

async function load(): Promise<ProtoCodec | null> {
  const pb = await importProtobuf();
  if (pb === null) return null;
  const root = new pb.Root();
  root.resolvePath = (_origin, target) => PROTO_DIR + target;
  await root.load(PROTO_FILES, { keepCase: false });
  root.resolveAll();
  // Message classes are set up on first use, here, with this root's own oneof setter.
  const setter = pb.util.oneOfSetter;
  pb.util.oneOfSetter = lastMemberWins as typeof setter;
  try {
    clearOneofDefaults(pb, root);
  } finally {
    pb.util.oneOfSetter = setter;
  }
  const types = {
    traces: root.lookupType(REQUEST_TYPES.traces),
    logs: root.lookupType(REQUEST_TYPES.logs),
    metrics: root.lookupType(REQUEST_TYPES.metrics),
  };
  return {
    root,
    requestType: (signal) => types[signal],
    decodeRequest(signal, body) {
      try {
        return types[signal].decode(body);
      } catch (err) {
        throw new OtlpDecodeError(`invalid protobuf body: ${(err as Error).message}`);
      }
    },
  };
}
