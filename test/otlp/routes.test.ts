// Every body mapped both ways: the readers' route (what the server does: src/otlp/map.ts) and the
// tree route (JSON.parse's or protobufjs' tree mapped by tree.ts, the route JSON logs and all
// metrics took before the readers did). The rows must be identical, and so must the cells the
// server's decode step builds from them (validated and normalized, with each validation setting),
// its rejections and their reasons; or both routes refuse the body. Each body also says which
// route it must take, so an equality reached through the fallback never counts as the reader's.

import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { mock, test } from 'node:test';
import { logsRequest, metricsRequest, tracesRequest } from '../../bench/otlp-payloads.ts';
import { BatchBuilder, packBatch, unpackBatch } from '../../src/delta/batch.ts';
import {
  type BodyFormat,
  loadProtobuf,
  OtlpDecodeError,
  type ProtoCodec,
  type Route,
  type Signal,
} from '../../src/otlp/index.ts';
import { type Mapped, mapJsonTree, mapTree } from '../../src/otlp/tree.ts';
import { type Row, SCHEMAS, type TableName } from '../../src/schema/tables.ts';
import { RowNormalizer, type ValidationSettings } from '../../src/schema/validate.ts';
import { type DecodeResult, RequestDecoder } from '../../src/server/decode.ts';
import { isValidProjectId, PROJECT_ID_RULE } from '../../src/server/project.ts';
import { cells } from '../delta/cells.ts';
import { CTX, jsonToProtobuf, mapBody, outcome } from './helpers.ts';
import { jsonForms, protobufForm, randomRequest } from './random-requests.ts';

const codec = (await loadProtobuf()) as ProtoCodec;

// A log without an observed time gets its arrival: one clock for both routes.
mock.method(Date, 'now', () => 1_763_700_000_123);

const SETTINGS: readonly ValidationSettings[] = [
  {
    validateRequired: true,
    validateTypes: true,
    normalizeServiceName: true,
    defaultServiceName: 'unknown_service',
    strictColumns: true,
  },
  {
    validateRequired: false,
    validateTypes: false,
    normalizeServiceName: false,
    defaultServiceName: 'fallback-svc',
    strictColumns: false,
  },
];

function treeOf(signal: Signal, format: BodyFormat, body: Uint8Array, headerProjectId?: string): Mapped {
  const ctx = { ...CTX, headerProjectId };
  return format === 'json'
    ? mapJsonTree(signal, body, ctx)
    : mapTree(signal, codec.decodeRequest(signal, body), ctx);
}

/** A decode result as plain values: each table's cells and its reasons in the order met. */
type Cells =
  | {
      tables: Partial<Record<TableName, { cells: unknown[][]; reasons: [string, number][] }>>;
      invalidIds: number;
    }
  | { status: number; message: string };

function servedCells(r: DecodeResult): Cells {
  if (!r.ok) return { status: r.status, message: r.message };
  const tables: Extract<Cells, { tables: unknown }>['tables'] = {};
  for (const [table, t] of Object.entries(r.tables) as [
    TableName,
    NonNullable<(typeof r.tables)['spans']>,
  ][]) {
    const names = SCHEMAS[table].columns.map((c) => c.name);
    tables[table] = { cells: cells(unpackBatch(t.batch, names)), reasons: Object.entries(t.reasons) };
  }
  return { tables, invalidIds: r.invalidIds };
}

/**
 * The decode step as it was built on the tree route: the tree's rows, the project ids checked,
 * each row object validated and normalized (RowNormalizer.normalize) into a column builder.
 */
function treeCells(
  signal: Signal,
  format: BodyFormat,
  body: Uint8Array,
  headerProjectId: string | undefined,
  settings: ValidationSettings,
): Cells {
  let mapped: Mapped;
  try {
    mapped = treeOf(signal, format, body, headerProjectId);
  } catch (err) {
    if (!(err instanceof OtlpDecodeError)) throw err;
    return { status: 400, message: `cannot decode the request: ${err.message}` };
  }
  const entries = Object.entries(mapped.tables) as [TableName, Row[]][];
  if (headerProjectId === undefined) {
    for (const [, rows] of entries) {
      const bad = rows.find((row) => !isValidProjectId(row.project_id as string));
      if (bad !== undefined) {
        const message = `invalid resource attribute project.id ${JSON.stringify(bad.project_id)}: use ${PROJECT_ID_RULE}`;
        return { status: 400, message };
      }
    }
  }
  const tables: Extract<Cells, { tables: unknown }>['tables'] = {};
  for (const [table, rows] of entries) {
    const normalizer = new RowNormalizer(SCHEMAS[table], settings);
    const builder = new BatchBuilder(SCHEMAS[table]);
    const reasons: Record<string, number> = {};
    for (const row of rows) {
      const r = normalizer.normalize(row);
      if (typeof r === 'string') reasons[r] = (reasons[r] ?? 0) + 1;
      else builder.pushValues(r);
    }
    const names = SCHEMAS[table].columns.map((c) => c.name);
    tables[table] = {
      cells: cells(unpackBatch(packBatch(builder.view()), names)),
      reasons: Object.entries(reasons),
    };
  }
  return { tables, invalidIds: mapped.invalidIds };
}

const decoders = SETTINGS.map((s) => new RequestDecoder(true, s));
const routes: Record<Route, number> = { reader: 0, tree: 0 };

/**
 * The body mapped both ways, with and without a header project id: the same rows and the same
 * cells under every setting, or both refuse it (protobuf errors are worded by each route itself).
 * Returns the route the server took, which must be `expected`.
 */
function assertRoutesAgree(
  signal: Signal,
  format: BodyFormat,
  body: Uint8Array,
  label: string,
  expected: Route | 'refused',
): void {
  for (const header of [undefined, 'from-header']) {
    const served = outcome(() => mapBody(signal, format, body, header));
    const tree = outcome(() => treeOf(signal, format, body, header));
    if ('error' in served || 'error' in tree) {
      assert.equal(expected, 'refused', `${label}: refused (${'error' in served ? served.error : ''})`);
      if (format === 'json') assert.deepEqual(served, tree, label);
      else assert.ok('error' in served && 'error' in tree, `${label}: both routes refuse it`);
    } else {
      const { route, ...rows } = served;
      assert.equal(route, expected, `${label}: the route taken`);
      routes[route]++;
      assert.deepEqual(rows, tree, `${label}: rows`);
    }
    SETTINGS.forEach((settings, k) => {
      const task = {
        signal,
        format,
        body,
        codings: [],
        bodyLimit: 1 << 26,
        headerProjectId: header,
        defaultProjectId: CTX.defaultProjectId,
      };
      const got = servedCells(decoders[k]!.decode(task));
      const want = treeCells(signal, format, body, header, settings);
      if (format === 'protobuf' && 'status' in want)
        assert.equal((got as { status: number }).status, want.status);
      else assert.deepEqual(got, want, `${label}: cells, settings ${k}`);
    });
  }
}

/** A canonical request tree as JSON and as protobuf: the readers take both, as the tree does. */
function assertBothEncodings(signal: Signal, tree: unknown, label: string): void {
  assertRoutesAgree(signal, 'json', Buffer.from(JSON.stringify(tree)), `${label}, JSON`, 'reader');
  assertRoutesAgree(signal, 'protobuf', jsonToProtobuf(signal, tree, codec), `${label}, protobuf`, 'reader');
}

const fixture = (name: string) => readFileSync(new URL(`../fixtures/otlp/${name}.json`, import.meta.url));
const SIGNALS: readonly Signal[] = ['traces', 'logs', 'metrics'];
const PAYLOADS = { traces: tracesRequest, logs: logsRequest, metrics: metricsRequest };

test('fixtures and benchmark payloads: the reader takes every one, in both encodings, as the tree does', () => {
  const cases: [Signal, string, unknown][] = [
    ['traces', 'trace.json', JSON.parse(fixture('trace').toString())],
    ['logs', 'logs.json', JSON.parse(fixture('logs').toString())],
    ['logs', 'events.json', JSON.parse(fixture('events').toString())],
    ['metrics', 'metrics.json', JSON.parse(fixture('metrics').toString())],
  ];
  for (const signal of SIGNALS) {
    for (const [n, seed] of [
      [1, 1],
      [7, 2],
      [100, 3],
    ] as const) {
      cases.push([signal, `${signal} payload of ${n}`, PAYLOADS[signal](n, seed)]);
    }
  }
  for (const [signal, label, tree] of cases) assertBothEncodings(signal, tree, label);
  assertRoutesAgree('traces', 'json', fixture('trace'), 'trace.json as stored', 'reader');
});

test('random requests of every signal, in every JSON form and with protobuf fields in any order', () => {
  for (const signal of SIGNALS) {
    for (let seed = 1; seed <= 40; seed++) {
      const tree = randomRequest(signal, seed);
      const label = `${signal} request ${seed}`;
      assertBothEncodings(signal, tree, label);
      assertRoutesAgree(signal, 'json', Buffer.from(jsonForms(tree, seed)), `${label}, JSON forms`, 'reader');
      assertRoutesAgree(
        signal,
        'protobuf',
        protobufForm(signal, tree, codec, seed),
        `${label}, protobuf shuffled`,
        'reader',
      );
    }
  }
});

/** A request of one resource and scope around `item` (a JSON text) of `signal`. */
function around(signal: Signal, item: string, resource = '{}'): string {
  const [r, s, i] = {
    traces: ['resourceSpans', 'scopeSpans', 'spans'],
    logs: ['resourceLogs', 'scopeLogs', 'logRecords'],
    metrics: ['resourceMetrics', 'scopeMetrics', 'metrics'],
  }[signal];
  return `{"${r}":[{"resource":${resource},"${s}":[{"scope":{"name":"lib"},"${i}":[${item}]}]}]}`;
}
const gauge = (points: string) => `{"name":"g","gauge":{"dataPoints":[${points}]}}`;

test('odd JSON forms: what the reader takes, what it leaves to the tree, what both refuse', () => {
  const cases: [Signal, string, string, Route | 'refused'][] = [
    // Taken by the reader.
    ['logs', 'empty body', '', 'reader'],
    ['metrics', 'empty request', '{}', 'reader'],
    [
      'logs',
      'nulls everywhere',
      around('logs', '{"body":null,"attributes":null,"traceId":null,"timeUnixNano":null}'),
      'reader',
    ],
    ['logs', 'enum name', around('logs', '{"severityNumber":"SEVERITY_NUMBER_ERROR2"}'), 'reader'],
    [
      'logs',
      'a key given twice',
      around(
        'logs',
        '{"severityText":"a","severityText":"b","body":{"stringValue":"x"},"body":{"intValue":"5"}}',
      ),
      'reader',
    ],
    [
      'logs',
      'structured body',
      around(
        'logs',
        '{"body":{"kvlistValue":{"values":[{"key":"a","value":{"arrayValue":{"values":[{"intValue":1},{}]}}}]}}}',
      ),
      'reader',
    ],
    ['logs', 'body of two members', around('logs', '{"body":{"intValue":"1","stringValue":"s"}}'), 'reader'],
    [
      'metrics',
      'metric fields after the points',
      around(
        'metrics',
        '{"gauge":{"dataPoints":[{"asInt":"1"}]},"metadata":[{"key":"m","value":{"stringValue":"v"}}],"name":"late"}',
      ),
      'reader',
    ],
    [
      'metrics',
      'sum: temporality after the points',
      around(
        'metrics',
        '{"name":"s","sum":{"dataPoints":[{"asDouble":1}],"isMonotonic":true,"aggregationTemporality":"AGGREGATION_TEMPORALITY_DELTA"}}',
      ),
      'reader',
    ],
    [
      'metrics',
      'a data member given twice',
      around(
        'metrics',
        '{"name":"g","gauge":{"dataPoints":[{"asInt":"1"}]},"gauge":{"dataPoints":[{"asInt":"2"},{"asInt":"3"}]}}',
      ),
      'reader',
    ],
    [
      'metrics',
      'a null data member, then another',
      around('metrics', '{"name":"g","gauge":null,"sum":{"dataPoints":[{"asInt":"2"}]}}'),
      'reader',
    ],
    [
      'metrics',
      'a null value member, then another',
      around('metrics', gauge('{"asDouble":null,"asInt":"4"}')),
      'reader',
    ],
    [
      'metrics',
      'NaN, infinities, numeric strings',
      around(
        'metrics',
        '{"name":"h","histogram":{"dataPoints":[{"sum":"NaN","min":"-Infinity","max":"1e3","explicitBounds":["Infinity",2],"bucketCounts":[1,"2",null],"count":3}]}}',
      ),
      'reader',
    ],
    [
      'metrics',
      'optional doubles as null',
      around('metrics', '{"name":"h","histogram":{"dataPoints":[{"sum":null,"min":null,"max":null}]}}'),
      'reader',
    ],
    [
      'metrics',
      'exponential buckets null and empty',
      around(
        'metrics',
        '{"name":"e","exponentialHistogram":{"dataPoints":[{"positive":null,"negative":{},"scale":"-2"}]}}',
      ),
      'reader',
    ],
    [
      'metrics',
      'exemplar of every form',
      around(
        'metrics',
        gauge(
          '{"asInt":"1","exemplars":[{"asDouble":"NaN","traceId":"AAECAwQFBgcICQoLDA0ODw==","spanId":"00000000000000FF"},{},{"asInt":9007199254740991,"filteredAttributes":[{"key":"1","value":{"intValue":"2"}},{"key":"1","value":{}}]}]}',
        ),
      ),
      'reader',
    ],
    [
      'traces',
      'resource after its scopes',
      '{"resourceSpans":[{"scopeSpans":[{"spans":[{"name":"a"}],"scope":{"name":"late"},"schemaUrl":"s"}],"resource":{"attributes":[{"key":"project.id","value":{"stringValue":"late-p"}},{"key":"service.name","value":{"stringValue":" padded "}}]},"schemaUrl":"r"}]}',
      'reader',
    ],
    [
      'logs',
      'an invalid project.id',
      around('logs', '{}', '{"attributes":[{"key":"project.id","value":{"stringValue":"bad id!"}}]}'),
      'reader',
    ],
    [
      'traces',
      'a span whose duration is beyond int64',
      around(
        'traces',
        '{"startTimeUnixNano":"-9223372036854775808","endTimeUnixNano":"9223372036854775807"}',
      ),
      'reader',
    ],
    // Left to the tree.
    [
      'logs',
      'snake_case keys',
      '{"resource_logs":[{"scope_logs":[{"log_records":[{"time_unix_nano":"5","severity_number":9}]}]}]}',
      'tree',
    ],
    [
      'metrics',
      'snake_case in a point',
      around('metrics', gauge('{"as_int":"3","time_unix_nano":"1"}')),
      'tree',
    ],
    ['logs', 'an int64 number beyond 2^53', around('logs', '{"timeUnixNano":1700000000000000001}'), 'tree'],
    [
      'logs',
      'an int beyond 2^53 inside a body',
      around(
        'logs',
        '{"body":{"kvlistValue":{"values":[{"key":"n","value":{"intValue":9007199254740993}}]}}}',
      ),
      'tree',
    ],
    [
      'metrics',
      'two data members',
      around(
        'metrics',
        '{"name":"g","sum":{"dataPoints":[{"asInt":"1"}]},"gauge":{"dataPoints":[{"asInt":"2"}]}}',
      ),
      'tree',
    ],
    ['metrics', 'two value members', around('metrics', gauge('{"asInt":"1","asDouble":2.5}')), 'tree'],
    [
      'metrics',
      'a list given twice',
      around('metrics', '{"name":"g","gauge":{"dataPoints":[{"asInt":"1"}],"dataPoints":[{"asInt":"2"}]}}'),
      'tree',
    ],
    ['logs', 'an escaped key', around('logs', '{"severity\\u0054ext":"x"}'), 'tree'],
    ['logs', 'an escaped key in a body', around('logs', '{"body":{"string\\u0056alue":"s"}}'), 'tree'],
    ['logs', 'an array at the top', '[]', 'refused'],
    ['logs', 'a truncated body', around('logs', '{}').slice(0, -3), 'refused'],
    ['logs', 'a value of the wrong type', around('logs', '{"severityNumber":true}'), 'refused'],
    ['metrics', 'points that are not objects', around('metrics', gauge('1')), 'refused'],
    [
      'metrics',
      'an int64 with an exponent beyond 2^53',
      around('metrics', gauge('{"timeUnixNano":1.7e18}')),
      'refused',
    ],
  ];
  for (const [signal, label, text, route] of cases) {
    assertRoutesAgree(signal, 'json', Buffer.from(text), label, route);
  }
  const [before, after] = around('logs', '{"body":{"stringValue":"a#b"}}').split('#');
  const invalidUtf8 = Buffer.concat([Buffer.from(before!), Buffer.from([0xff]), Buffer.from(after!)]);
  assertRoutesAgree('logs', 'json', invalidUtf8, 'invalid UTF-8', 'tree');
});

/** A length-delimited protobuf field. */
function field(n: number, bytes: Uint8Array): Buffer {
  const out = [(n << 3) | 2];
  for (let len = bytes.length; ; len >>>= 7) {
    if (len < 0x80) {
      out.push(len);
      break;
    }
    out.push((len & 0x7f) | 0x80);
  }
  return Buffer.concat([Buffer.from(out), bytes]);
}

test('protobuf: oneof members and message fields given twice keep the last, as in protobufjs', () => {
  const Metric = codec.root.lookupType('opentelemetry.proto.metrics.v1.Metric');
  const metric = (o: Record<string, unknown>) => Metric.encode(Metric.fromObject(o)).finish();
  /** A request of one resource and scope around a Metric's bytes. */
  const request = (metricBytes: Uint8Array) => field(1, field(2, field(2, metricBytes)));
  // Three Metric messages in one: name and data given twice, the data of other members.
  const twice = Buffer.concat([
    metric({
      name: 'first',
      gauge: { dataPoints: [{ asInt: 1, exemplars: [{ traceId: Buffer.alloc(16) }] }] },
    }),
    metric({ name: 'second', sum: { dataPoints: [{ asDouble: 2 }, { asInt: 3 }], isMonotonic: true } }),
    metric({ metadata: [{ key: 'm', value: { stringValue: 'v' } }] }),
  ]);
  assertRoutesAgree('metrics', 'protobuf', request(twice), 'a metric given twice', 'reader');
  const m = mapBody('metrics', 'protobuf', request(twice));
  assert.deepEqual(
    m.tables.metrics_points!.map((p) => [
      p.metric_name,
      p.metric_type,
      p.value_double,
      p.value_int,
      p.metric_metadata,
    ]),
    [
      ['second', 'sum', 2, null, '{"m":"v"}'],
      ['second', 'sum', null, 3n, '{"m":"v"}'],
    ],
  );
  assert.equal(m.invalidIds, 0, "the gauge's exemplar id is gone with it");
  // A point with both value members: the last one counts.
  const Point = codec.root.lookupType('opentelemetry.proto.metrics.v1.NumberDataPoint');
  const both = Buffer.concat([
    Point.encode(Point.fromObject({ asDouble: 1.5 })).finish(),
    Point.encode(Point.fromObject({ asInt: 7 })).finish(),
  ]);
  const withPoint = request(Buffer.concat([metric({ name: 'g' }), field(5, field(1, both))]));
  assertRoutesAgree('metrics', 'protobuf', withPoint, 'a point with both members', 'reader');
  const point = mapBody('metrics', 'protobuf', withPoint).tables.metrics_points![0]!;
  assert.deepEqual([point.value_double, point.value_int], [null, 7n]);
});

test('number literals of every form are read as JSON.parse reads them', () => {
  let seed = 7;
  const next = () => {
    seed = (Math.imul(seed, 1664525) + 1013904223) >>> 0;
    return seed / 2 ** 32;
  };
  const literals = [
    '0',
    '-0',
    '0.0',
    '1.0',
    '-1.50',
    '1e3',
    '1E-7',
    '2.5e+2',
    '123456789012345',
    '1234567890123456',
    '0.1000000000000000055511151231257827',
    '9007199254740993.5',
    '5e-324',
    '1.7976931348623157e308',
  ];
  for (let i = 0; i < 2000; i++) {
    const v = [next() * 1e6, -next(), next() / 1e5, next() * 10 ** Math.floor(next() * 40 - 20)][i % 4]!;
    literals.push(String(v), v.toFixed(Math.floor(next() * 21)), v.toPrecision(1 + Math.floor(next() * 21)));
  }
  for (let at = 0; at < literals.length; at += 500) {
    const points = literals.slice(at, at + 500).map((v) => `{"asDouble":${v},"explicitBounds":[${v}]}`);
    const body = around('metrics', `{"name":"h","gauge":{"dataPoints":[${points.join(',')}]}}`);
    assertRoutesAgree('metrics', 'json', Buffer.from(body), `literals from ${literals[at]}`, 'reader');
  }
});

test('the routes counted above: the readers took all but the odd forms', () => {
  assert.ok(routes.reader > 1000, `${routes.reader} bodies read by the readers`);
  assert.ok(routes.tree >= 16, `${routes.tree} bodies left to the tree`);
});
