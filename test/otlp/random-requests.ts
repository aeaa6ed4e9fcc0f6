// Random OTLP export requests of every signal, for the tests that hold the readers' route equal to
// the tree route: a canonical tree (the OTLP/JSON shape with hex ids and int64 as strings, which
// protobufjs also encodes), its JSON text in the other forms OTLP/JSON allows (numbers for int64,
// enum names, upper-case or base64 ids, "NaN", keys in any order, nulls, unknown fields,
// whitespace), and its protobuf bytes with the fields of every message in a random order.

import * as protobuf from 'protobufjs';
import type { ProtoCodec, Signal } from '../../src/otlp/index.ts';
import { SEVERITY_NUMBER, SPAN_KIND, STATUS_CODE, TEMPORALITY } from '../../src/otlp/values.ts';
import { prng } from '../delta/rows.ts';
import { jsonToProtobuf } from './helpers.ts';

type Rand = () => number;
type Tree = Record<string, unknown>;

const pick = <T>(r: Rand, xs: readonly T[]): T => xs[Math.floor(r() * xs.length)]!;
const chance = (r: Rand, p: number) => r() < p;
const upTo = (r: Rand, n: number) => Math.floor(r() * (n + 1));

function hex(r: Rand, bytes: number): string {
  // Mostly valid ids; sometimes empty or all zero (null), or of the wrong length (null and counted).
  const roll = r();
  if (roll < 0.05) return '';
  if (roll < 0.08) return '00'.repeat(bytes);
  const n = roll < 0.1 ? bytes + 1 : bytes;
  return Array.from({ length: n }, () =>
    Math.floor(r() * 256)
      .toString(16)
      .padStart(2, '0'),
  ).join('');
}

const TIMES = ['0', '1', '-1500', '1700000000123456789', '9223372036854775807', '18446744073709551615'];
function time(r: Rand): string {
  return chance(r, 0.2) ? pick(r, TIMES) : String(1763700000000000000n + BigInt(Math.floor(r() * 1e12)));
}

const DOUBLES = [0, -0, 1.5, -2.25e-300, 1e21, 0.1, Number.NaN, Infinity, -Infinity];
const double = (r: Rand) => (chance(r, 0.4) ? pick(r, DOUBLES) : Math.round(r() * 1e6) / 64);

const STRINGS = ['', 'GET /api', 'ünïcødé ✓ 😀', 'say "hi"\\ \n\t', '\u2028', 'x'.repeat(300)];
const text = (r: Rand) => (chance(r, 0.5) ? pick(r, STRINGS) : `s${upTo(r, 999)}`);

const KEYS = ['http.route', 'a', 'a', 'k1', '10', '__proto__', 'ключ', 'service.name', 'project.id'];

function anyValue(r: Rand, depth: number): Tree {
  switch (upTo(r, depth > 2 ? 4 : 7)) {
    case 0:
      return { stringValue: text(r) };
    case 1:
      return {
        intValue: pick(r, [
          '0',
          '-7',
          '4294967295',
          '-4294967295',
          '-4294967296',
          '4294967296',
          '9007199254740993',
          '-9223372036854775808',
          String(upTo(r, 1e6)),
        ]),
      };
    case 2:
      return { boolValue: chance(r, 0.5) };
    case 3:
      return { doubleValue: double(r) };
    case 4:
      return {};
    case 5:
      return { bytesValue: Buffer.from(text(r)).toString('base64') };
    case 6:
      return { arrayValue: { values: Array.from({ length: upTo(r, 3) }, () => anyValue(r, depth + 1)) } };
    default:
      return { kvlistValue: { values: attributes(r, depth + 1) } };
  }
}

function attributes(r: Rand, depth = 0): Tree[] {
  return Array.from({ length: upTo(r, 4) }, () =>
    chance(r, 0.05) ? { key: pick(r, KEYS) } : { key: pick(r, KEYS), value: anyValue(r, depth) },
  );
}

/** Sets each of `fields` on `o` with probability `p`. */
function some(r: Rand, o: Tree, fields: Record<string, () => unknown>, p = 0.7): Tree {
  for (const [k, make] of Object.entries(fields)) if (chance(r, p)) o[k] = make();
  return o;
}

function resource(r: Rand): Tree {
  // A resource's project.id is a valid one, or none: any other refuses the resource's rows (the
  // routes test holds that rule on its own cases).
  const attrs = attributes(r).filter((kv) => kv['key'] !== 'project.id');
  if (chance(r, 0.7)) attrs.push({ key: 'service.name', value: { stringValue: `svc${upTo(r, 3)}` } });
  if (chance(r, 0.3)) attrs.push({ key: 'project.id', value: { stringValue: pick(r, ['p1', 'p-2']) } });
  return some(r, {}, { attributes: () => attrs, droppedAttributesCount: () => upTo(r, 3) });
}

function scope(r: Rand): Tree {
  return some(
    r,
    {},
    {
      name: () => text(r),
      version: () => text(r),
      attributes: () => attributes(r),
      droppedAttributesCount: () => upTo(r, 3),
    },
  );
}

function span(r: Rand): Tree {
  return some(
    r,
    {},
    {
      traceId: () => hex(r, 16),
      spanId: () => hex(r, 8),
      parentSpanId: () => hex(r, 8),
      traceState: () => text(r),
      name: () => text(r),
      kind: () => upTo(r, 5),
      startTimeUnixNano: () => time(r),
      endTimeUnixNano: () => time(r),
      flags: () => upTo(r, 0x301),
      attributes: () => attributes(r),
      droppedAttributesCount: () => upTo(r, 3),
      droppedEventsCount: () => upTo(r, 3),
      droppedLinksCount: () => upTo(r, 3),
      status: () => some(r, {}, { code: () => upTo(r, 2), message: () => text(r) }),
      events: () =>
        Array.from({ length: upTo(r, 3) }, () =>
          some(
            r,
            {},
            {
              timeUnixNano: () => time(r),
              name: () => text(r),
              attributes: () => attributes(r),
              droppedAttributesCount: () => upTo(r, 3),
            },
          ),
        ),
      links: () =>
        Array.from({ length: upTo(r, 2) }, () =>
          some(
            r,
            {},
            {
              traceId: () => hex(r, 16),
              spanId: () => hex(r, 8),
              traceState: () => text(r),
              flags: () => upTo(r, 0x101),
              attributes: () => attributes(r),
              droppedAttributesCount: () => upTo(r, 3),
            },
          ),
        ),
    },
  );
}

function logRecord(r: Rand): Tree {
  return some(
    r,
    {},
    {
      timeUnixNano: () => time(r),
      observedTimeUnixNano: () => time(r),
      severityNumber: () => upTo(r, 24),
      severityText: () => text(r),
      body: () => (chance(r, 0.6) ? { stringValue: text(r) } : anyValue(r, 0)),
      attributes: () => attributes(r),
      droppedAttributesCount: () => upTo(r, 3),
      flags: () => upTo(r, 1),
      traceId: () => hex(r, 16),
      spanId: () => hex(r, 8),
      eventName: () => text(r),
    },
  );
}

function exemplar(r: Rand): Tree {
  const e = some(
    r,
    {},
    {
      timeUnixNano: () => time(r),
      traceId: () => hex(r, 16),
      spanId: () => hex(r, 8),
      filteredAttributes: () => attributes(r),
    },
  );
  const v = upTo(r, 2);
  if (v === 1) e.asDouble = double(r);
  else if (v === 2) e.asInt = pick(r, ['7', '-9007199254740993', String(upTo(r, 1000))]);
  return e;
}

function pointCommon(r: Rand, withExemplars = true): Tree {
  return some(
    r,
    {},
    {
      startTimeUnixNano: () => time(r),
      timeUnixNano: () => time(r),
      attributes: () => attributes(r),
      flags: () => upTo(r, 1),
      ...(withExemplars ? { exemplars: () => Array.from({ length: upTo(r, 2) }, () => exemplar(r)) } : {}),
    },
  );
}

// Bucket counts are uint64: some past 2^32 (a protobuf value's high half) and past 2^63 (stored
// as the int64 of the same bits).
const BIG_COUNTS = ['4294967296', '1099511627781', '9223372036854775808', '18446744073709551615'];
const counts = (r: Rand) =>
  Array.from({ length: upTo(r, 5) }, () =>
    upTo(r, 4) === 0 ? BIG_COUNTS[upTo(r, 3)]! : String(upTo(r, 1e6)),
  );

function metric(r: Rand): Tree {
  const points = (make: () => Tree) => Array.from({ length: upTo(r, 4) }, make);
  const m = some(
    r,
    {},
    {
      name: () => text(r),
      description: () => text(r),
      unit: () => pick(r, ['1', 'ms', '{request}', '']),
      metadata: () => attributes(r),
    },
  );
  switch (upTo(r, 5)) {
    case 0:
      m.gauge = {
        dataPoints: points(() => {
          const p = pointCommon(r);
          if (chance(r, 0.5)) p.asDouble = double(r);
          else if (chance(r, 0.8)) p.asInt = pick(r, ['-3', '9223372036854775807', String(upTo(r, 1e9))]);
          return p;
        }),
      };
      break;
    case 1:
      m.sum = some(
        r,
        { dataPoints: points(() => ({ ...pointCommon(r), asInt: String(upTo(r, 1e9)) })) },
        {
          aggregationTemporality: () => upTo(r, 2),
          isMonotonic: () => chance(r, 0.5),
        },
      );
      break;
    case 2:
      m.histogram = some(
        r,
        {
          dataPoints: points(() =>
            some(r, pointCommon(r), {
              count: () => String(upTo(r, 1e6)),
              sum: () => double(r),
              min: () => double(r),
              max: () => double(r),
              bucketCounts: () => counts(r),
              explicitBounds: () => Array.from({ length: upTo(r, 4) }, () => double(r)),
            }),
          ),
        },
        { aggregationTemporality: () => upTo(r, 2) },
      );
      break;
    case 3:
      m.exponentialHistogram = some(
        r,
        {
          dataPoints: points(() =>
            some(r, pointCommon(r), {
              count: () => String(upTo(r, 1e6)),
              sum: () => double(r),
              min: () => double(r),
              max: () => double(r),
              scale: () => upTo(r, 40) - 20,
              zeroCount: () => String(upTo(r, 100)),
              zeroThreshold: () => double(r),
              positive: () => some(r, {}, { offset: () => upTo(r, 20) - 10, bucketCounts: () => counts(r) }),
              negative: () => some(r, {}, { offset: () => upTo(r, 20) - 10, bucketCounts: () => counts(r) }),
            }),
          ),
        },
        { aggregationTemporality: () => upTo(r, 2) },
      );
      break;
    case 4:
      m.summary = {
        dataPoints: points(() =>
          some(r, pointCommon(r, false), {
            count: () => String(upTo(r, 1e6)),
            sum: () => double(r),
            quantileValues: () =>
              Array.from({ length: upTo(r, 3) }, () =>
                some(r, {}, { quantile: () => r(), value: () => double(r) }),
              ),
          }),
        ),
      };
      break;
    default:
      break; // a metric without data: no rows
  }
  return m;
}

const ITEMS: Record<Signal, [string, string, string, (r: Rand) => Tree]> = {
  traces: ['resourceSpans', 'scopeSpans', 'spans', span],
  logs: ['resourceLogs', 'scopeLogs', 'logRecords', logRecord],
  metrics: ['resourceMetrics', 'scopeMetrics', 'metrics', metric],
};

/** A random request of `signal` in the canonical tree form. */
export function randomRequest(signal: Signal, seed: number): Tree {
  const r = prng(seed);
  const [resources, scopes, items, item] = ITEMS[signal];
  return {
    [resources]: Array.from({ length: 1 + upTo(r, 2) }, () =>
      some(
        r,
        {},
        {
          resource: () => resource(r),
          schemaUrl: () => text(r),
          [scopes]: () =>
            Array.from({ length: upTo(r, 2) + 1 }, () =>
              some(
                r,
                {},
                {
                  scope: () => scope(r),
                  schemaUrl: () => text(r),
                  [items]: () => Array.from({ length: upTo(r, 4) }, () => item(r)),
                },
                0.8,
              ),
            ),
        },
        0.8,
      ),
    ),
  };
}

// --- the JSON forms ---------------------------------------------------------------------------

const INT64 = new Set([
  'startTimeUnixNano',
  'endTimeUnixNano',
  'timeUnixNano',
  'observedTimeUnixNano',
  'count',
  'zeroCount',
  'asInt',
  'intValue',
  'bucketCounts',
]);
const IDS = new Set(['traceId', 'spanId', 'parentSpanId']);
const DOUBLE_KEYS = new Set([
  'asDouble',
  'doubleValue',
  'sum',
  'min',
  'max',
  'zeroThreshold',
  'explicitBounds',
  'quantile',
  'value',
]);
const COUNTS = new Set([
  'droppedAttributesCount',
  'droppedEventsCount',
  'droppedLinksCount',
  'flags',
  'scale',
  'offset',
]);
const SINGULAR = ['resource', 'scope', 'status', 'body', 'positive', 'negative'];
const invert = (names: Readonly<Record<string, number>>) =>
  new Map(Object.entries(names).map(([k, v]) => [v, k]));
const ENUMS: Record<string, Map<number, string>> = {
  kind: invert(SPAN_KIND),
  code: invert(STATUS_CODE),
  severityNumber: invert(SEVERITY_NUMBER),
  aggregationTemporality: invert(TEMPORALITY),
};

/** One scalar as OTLP/JSON may write it, `key` being its field. */
function jsonScalar(r: Rand, key: string, v: unknown): unknown {
  if (typeof v === 'number' && !Number.isFinite(v)) return String(v); // NaN and infinities: always strings
  if (INT64.has(key) && typeof v === 'string' && chance(r, 0.3)) {
    const n = Number(v);
    if (Number.isSafeInteger(n)) return n;
  }
  if (IDS.has(key) && typeof v === 'string' && v.length > 0 && chance(r, 0.3)) {
    return chance(r, 0.5) ? v.toUpperCase() : Buffer.from(v, 'hex').toString('base64');
  }
  if (key in ENUMS && typeof v === 'number' && chance(r, 0.3)) return ENUMS[key]!.get(v) ?? v;
  if ((COUNTS.has(key) || DOUBLE_KEYS.has(key)) && typeof v === 'number' && chance(r, 0.15)) return String(v);
  return v;
}

/**
 * The JSON text of a canonical tree in other allowed forms: keys shuffled, scalars rewritten, some
 * fields given twice or as null, some unknown fields added, random whitespace.
 */
export function jsonForms(tree: unknown, seed: number): string {
  const r = prng(seed);
  const space = () => (chance(r, 0.1) ? pick(r, [' ', '\n  ', '\t', '\r\n']) : '');
  const write = (key: string, v: unknown): string => {
    if (Array.isArray(v)) return `[${v.map((x) => space() + write(key, x)).join(',')}${space()}]`;
    if (v !== null && typeof v === 'object') {
      const entries = Object.entries(v as Tree);
      if (chance(r, 0.1)) entries.push(['someFutureField', { x: [1, 'two'] }]);
      if (chance(r, 0.1)) entries.push(['droppedAttributesCount', null]);
      // A message field given twice: the last one counts, whole.
      for (const k of SINGULAR)
        if (k in (v as Tree) && chance(r, 0.1)) entries.push([k, pick(r, [null, {}])]);
      for (let i = entries.length - 1; i > 0; i--) {
        const j = Math.floor(r() * (i + 1));
        [entries[i], entries[j]] = [entries[j]!, entries[i]!];
      }
      return `{${entries.map(([k, x]) => `${space()}${JSON.stringify(k)}${space()}:${space()}${write(k, x)}`).join(',')}}`;
    }
    return JSON.stringify(jsonScalar(r, key, v));
  };
  return write('', tree);
}

// --- the protobuf forms -----------------------------------------------------------------------

function varint(n: number): number[] {
  const out: number[] = [];
  while (n > 0x7f) {
    out.push((n & 0x7f) | 0x80);
    n >>>= 7;
  }
  out.push(n);
  return out;
}

/** The message's fields in a random order, recursively (repeated elements keep their order among themselves only by chance). */
function shuffleFields(bytes: Uint8Array, type: protobuf.Type, r: Rand): Buffer {
  const reader = protobuf.Reader.create(bytes);
  const fields: Buffer[] = [];
  while (reader.pos < reader.len) {
    const start = reader.pos;
    const tag = reader.uint32();
    const field = type.fieldsById[tag >>> 3];
    const child = field?.resolvedType;
    if ((tag & 7) === 2 && child instanceof protobuf.Type) {
      const n = reader.uint32();
      const inner = shuffleFields(bytes.subarray(reader.pos, reader.pos + n), child, r);
      reader.skip(n);
      fields.push(Buffer.from([...varint(tag), ...varint(inner.length), ...inner]));
    } else {
      reader.skipType(tag & 7);
      fields.push(Buffer.from(bytes.subarray(start, reader.pos)));
    }
  }
  for (let i = fields.length - 1; i > 0; i--) {
    const j = Math.floor(r() * (i + 1));
    [fields[i], fields[j]] = [fields[j]!, fields[i]!];
  }
  return Buffer.concat(fields);
}

/** The protobuf bytes of a canonical tree, the fields of every message in a random order. */
export function protobufForm(signal: Signal, tree: unknown, codec: ProtoCodec, seed: number): Uint8Array {
  const bytes = jsonToProtobuf(signal, tree, codec);
  return shuffleFields(bytes, codec.requestType(signal), prng(seed));
}
