// Every body mapped both ways: the readers' route (what the server does: src/otlp/map.ts) and the
// tree route (JSON.parse's or protobufjs' tree mapped by tree.ts, the route JSON logs and all
// metrics took before the readers did). The rows must be identical, and so must the cells the
// server's decode step builds from them (attributes limited, validated and normalized, with each
// validation setting), its rejections and their reasons; or both routes refuse the body (a
// resource's project.id that breaks the rule, for one). Each body also says which route it must
// take, so an equality reached through the fallback never counts as the reader's.

import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { mock, test } from 'node:test';
import { logsRequest, metricsRequest, tracesRequest } from '../../bench/otlp-payloads.ts';
import { BatchBuilder, packBatch, unpackBatch } from '../../src/delta/batch.ts';
import { TableRows } from '../../src/otlp/columns.ts';
import {
  type BodyFormat,
  loadProtobuf,
  OtlpDecodeError,
  type ProtoCodec,
  type Route,
  type Signal,
} from '../../src/otlp/index.ts';
import { AttributeLimiter, type AttributeLimits } from '../../src/otlp/limits.ts';
import { type Mapped, mapJsonTree, mapTree } from '../../src/otlp/tree.ts';
import { HAND_ON_ROWS, READ_AHEAD_BYTES } from '../../src/otlp/walk.ts';
import { RefusedProject } from '../../src/schema/project.ts';
import { type Row, SCHEMAS, type TableName } from '../../src/schema/tables.ts';
import { RowNormalizer, type ValidationSettings } from '../../src/schema/validate.ts';
import { type DecodeResult, RequestDecoder, SPAN_REJECTED } from '../../src/server/decode.ts';
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

/** The attribute limits of each setting: the defaults, and limits that most random items break. */
const LIMITS: readonly AttributeLimits[] = [
  { countLimit: 1024, valueLengthLimit: 65_536 },
  { countLimit: 3, valueLengthLimit: 6 },
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
 * The decode step as it was built on the tree route: the tree's rows (those of a resource whose
 * project.id breaks the rule refused), their attributes limited, each row object validated and
 * normalized (RowNormalizer.normalize) into a column builder.
 */
function treeCells(
  signal: Signal,
  format: BodyFormat,
  body: Uint8Array,
  headerProjectId: string | undefined,
  settings: ValidationSettings,
  limits: AttributeLimits,
): Cells {
  let mapped: Mapped;
  try {
    mapped = treeOf(signal, format, body, headerProjectId);
  } catch (err) {
    if (!(err instanceof OtlpDecodeError)) throw err;
    return { status: 400, message: `cannot decode the request: ${err.message}` };
  }
  const entries = Object.entries(mapped.tables) as [TableName, Row[]][];
  const tables: Extract<Cells, { tables: unknown }>['tables'] = {};
  const limiter = new AttributeLimiter(limits);
  const rejectedSpans = new Set<string>();
  const spanKey = (row: Row) => `${row['trace_id'] ?? null}/${row['span_id'] ?? null}`;
  for (const [table, rows] of entries) {
    const names = SCHEMAS[table].columns.map((c) => c.name);
    const normalizer = new RowNormalizer(SCHEMAS[table], settings);
    const builder = new BatchBuilder(SCHEMAS[table]);
    const reasons: Record<string, number> = {};
    for (const tableRow of rows) {
      const project = tableRow['project_id'];
      if (project instanceof RefusedProject) {
        reasons[project.reason] = (reasons[project.reason] ?? 0) + 1;
        continue;
      }
      if (table !== 'spans' && rejectedSpans.has(spanKey(tableRow))) {
        reasons[SPAN_REJECTED] = (reasons[SPAN_REJECTED] ?? 0) + 1;
        continue;
      }
      const values = names.map((name) => tableRow[name] ?? null);
      limiter.apply(table, values);
      const row = Object.fromEntries(names.map((name, j) => [name, values[j]]));
      const r = normalizer.normalize(row);
      if (typeof r === 'string') {
        reasons[r] = (reasons[r] ?? 0) + 1;
        if (table === 'spans') rejectedSpans.add(spanKey(tableRow));
      } else builder.pushValues(r);
    }
    tables[table] = {
      cells: cells(unpackBatch(packBatch(builder.view()), names)),
      reasons: Object.entries(reasons),
    };
  }
  return { tables, invalidIds: mapped.invalidIds };
}

const decoders = SETTINGS.map((s, k) => new RequestDecoder(true, s, LIMITS[k]!));
const routes: Record<Route, number> = { reader: 0, tree: 0 };

/**
 * The body mapped both ways, with and without a header project id: the same rows and the same
 * cells under every setting, or both refuse it (protobuf errors are worded by each route itself).
 * The route the server took must be `expected`, with a header project too.
 */
function assertRoutesAgree(
  signal: Signal,
  format: BodyFormat,
  body: Uint8Array,
  label: string,
  route: Route | 'refused',
): void {
  for (const header of [undefined, 'from-header']) {
    const served = outcome(() => mapBody(signal, format, body, header));
    const tree = outcome(() => treeOf(signal, format, body, header));
    if ('error' in served || 'error' in tree) {
      assert.equal(route, 'refused', `${label}: refused (${'error' in served ? served.error : ''})`);
      if (format === 'json') assert.deepEqual(served, tree, label);
      else assert.ok('error' in served && 'error' in tree, `${label}: both routes refuse it`);
    } else {
      const { route: taken, ...rows } = served;
      assert.equal(taken, route, `${label}: the route taken`);
      routes[taken]++;
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
      const want = treeCells(signal, format, body, header, settings, LIMITS[k]!);
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
    // Signed fields (sfixed64, int64) end at 2^63 - 1: beyond, a value would be stored with its
    // sign flipped. An unsigned one (a time, a count) keeps its bits.
    ['metrics', 'an asInt of 2^63', around('metrics', gauge('{"asInt":"9223372036854775808"}')), 'refused'],
    [
      'metrics',
      'an asInt of 2^64 - 1',
      around('metrics', gauge('{"asInt":18446744073709551615}')),
      'refused',
    ],
    [
      'metrics',
      'an exemplar asInt of 2^63',
      around('metrics', gauge('{"asInt":"1","exemplars":[{"asInt":"9223372036854775808"}]}')),
      'refused',
    ],
    [
      'logs',
      'an intValue of 2^63',
      around('logs', '{"attributes":[{"key":"i","value":{"intValue":"9223372036854775808"}}]}'),
      'refused',
    ],
    [
      'metrics',
      'an asInt of 2^63 - 1 and a time of 2^64 - 1',
      around('metrics', gauge('{"asInt":"9223372036854775807","timeUnixNano":"18446744073709551615"}')),
      'reader',
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

test('protobuf: a message field given twice keeps its last message whole, where protobufjs merges', () => {
  // The one documented departure from protobufjs (protobuf-reader.ts, docs/data-model.md).
  const ResourceLogs = codec.root.lookupType('opentelemetry.proto.logs.v1.ResourceLogs');
  const resourceLogs = (o: Record<string, unknown>) =>
    ResourceLogs.encode(ResourceLogs.fromObject(o)).finish();
  const attribute = (key: string, v: string) => ({ key, value: { stringValue: v } });
  const twice = Buffer.concat([
    resourceLogs({
      resource: { attributes: [attribute('service.name', 'first')] },
      scopeLogs: [{ logRecords: [{ body: { stringValue: 'x' } }] }],
    }),
    resourceLogs({ resource: { attributes: [attribute('host.name', 'h')] } }),
  ]);
  const body = field(1, twice);
  const Request = codec.root.lookupType('opentelemetry.proto.collector.logs.v1.ExportLogsServiceRequest');
  const tree = Request.toObject(Request.decode(body)) as {
    resourceLogs: { resource: { attributes: unknown[] } }[];
  };
  assert.equal(tree.resourceLogs[0]!.resource.attributes.length, 2, 'protobufjs merges the two Resources');
  const row = mapBody('logs', 'protobuf', body).tables.logs![0]!;
  assert.deepEqual([row.service_name, row.resource_attributes], [null, '{"host.name":"h"}']);
});

test('protobuf: a large scope hands its rows on as they are made, with cells read ahead, as the tree maps them', () => {
  // What the walk holds at each hand-on: a table's rows made and not yet handed on.
  const held: number[] = [];
  const flush = TableRows.prototype.flush;
  const spy = mock.method(
    TableRows.prototype,
    'flush',
    function (this: TableRows, sink: Parameters<typeof flush>[0]) {
      if (this.n > 0) held.push(this.n);
      flush.call(this, sink);
    },
  );
  try {
    const names = {
      traces: ['resourceSpans', 'scopeSpans'],
      logs: ['resourceLogs', 'scopeLogs'],
      metrics: ['resourceMetrics', 'scopeMetrics'],
    } as const;
    const items = 2_000;
    for (const signal of SIGNALS) {
      const tree = PAYLOADS[signal](items, 9) as Record<string, Record<string, unknown>[]>;
      // schemaUrl comes after the items on the wire, and so do the scope and resource when shuffled.
      const resource = tree[names[signal][0]]![0]!;
      resource['schemaUrl'] = 'https://opentelemetry.io/schemas/1.26.0';
      (resource[names[signal][1]] as Record<string, unknown>[])[0]!['schemaUrl'] =
        'https://example.com/lib/1.2';
      for (const [label, body] of [
        ['in field order', jsonToProtobuf(signal, tree, codec)],
        ['fields shuffled', protobufForm(signal, tree, codec, 3)],
      ] as const) {
        assert.ok(body.length > READ_AHEAD_BYTES);
        assertRoutesAgree(signal, 'protobuf', body, `${signal}, ${items} items, ${label}`, 'reader');
        held.length = 0;
        const mapped = mapBody(signal, 'protobuf', body);
        const rows = Object.values(mapped.tables).reduce((n, t) => n + t!.length, 0);
        assert.ok(held.length >= 3, `${signal}, ${label}: handed on in ${held.length} parts`);
        // At most what one more item makes past the mark (a metric has five points).
        assert.ok(
          Math.max(...held) < HAND_ON_ROWS + 8,
          `${signal}, ${label}: held at most ${Math.max(...held)}`,
        );
        assert.equal(
          held.reduce((a, b) => a + b, 0),
          rows,
        );
      }
      // JSON reads no field twice, and a small protobuf resource is not worth reading twice: their
      // rows wait for the resource's end, each table's in one hand-on.
      const small = PAYLOADS[signal](HAND_ON_ROWS + 44, 9);
      for (const [label, body] of [
        ['JSON', Buffer.from(JSON.stringify(tree))],
        [`protobuf of ${HAND_ON_ROWS + 44} items`, jsonToProtobuf(signal, small, codec)],
      ] as const) {
        held.length = 0;
        const mapped = mapBody(signal, label === 'JSON' ? 'json' : 'protobuf', body);
        const tables = Object.values(mapped.tables).filter((t) => t!.length > 0).length;
        assert.equal(
          held.length,
          tables,
          `${signal}, ${label}: each table's rows are held to the resource's end`,
        );
      }
    }
  } finally {
    spy.mock.restore();
  }
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

/** A body of `signal` in each way the server maps one: the JSON reader, the tree (JSON it declines), protobuf. */
function eachRoute(
  signal: Signal,
  item: string,
  resource: string,
): [BodyFormat, Uint8Array, Route, string][] {
  const json = around(signal, item, resource);
  // A snake_case key is left to the tree, which reads both spellings.
  const snake = json.replace(
    /^\{"resource(Spans|Logs|Metrics)"/,
    (_, s: string) => `{"resource_${s.toLowerCase()}"`,
  );
  assert.notEqual(snake, json);
  return [
    ['json', Buffer.from(json), 'reader', 'JSON'],
    ['json', Buffer.from(snake), 'tree', 'JSON left to the tree'],
    ['protobuf', jsonToProtobuf(signal, JSON.parse(json), codec), 'reader', 'protobuf'],
  ];
}

const ITEMS: Record<Signal, (attributes: string) => string> = {
  traces: (a) =>
    `{"traceId":"5b8efff798038103d269b633813fc60c","spanId":"eee19b7ec3c1b174","name":"s","startTimeUnixNano":"1700000000000000000","endTimeUnixNano":"1700000000000000100","attributes":${a},"droppedAttributesCount":1}`,
  logs: (a) =>
    `{"timeUnixNano":"1700000000000000000","body":{"stringValue":"b"},"attributes":${a},"droppedAttributesCount":1}`,
  metrics: (a) => gauge(`{"timeUnixNano":"1700000000000000000","asInt":"1","attributes":${a}}`),
};
const ITEM_TABLE: Record<Signal, TableName> = { traces: 'spans', logs: 'logs', metrics: 'metrics_points' };

const attributeList = (pairs: [string, string][]) =>
  JSON.stringify(pairs.map(([key, value]) => ({ key, value: JSON.parse(value) })));

/** The one row of `table` a decode result holds, by column name. */
function onlyRow(r: DecodeResult, table: TableName): Record<string, unknown> {
  assert.ok(r.ok, `decoded (${'message' in r ? r.message : ''})`);
  const t = r.tables[table]!;
  const names = SCHEMAS[table].columns.map((c) => c.name);
  const rows = cells(unpackBatch(t.batch, names));
  assert.equal(rows.length, 1);
  return Object.fromEntries(names.map((name, j) => [name, rows[0]![j]]));
}

const task = (signal: Signal, format: BodyFormat, body: Uint8Array, headerProjectId?: string) => ({
  signal,
  format,
  body,
  codings: [],
  bodyLimit: 1 << 26,
  headerProjectId,
  defaultProjectId: CTX.defaultProjectId,
});

test("a resource's project.id: one rule on every route, for every signal, its rows refused alone; a header project wins", () => {
  const cases: [string, string | null, string | null][] = [
    // [label, the project.id AnyValue (null: no project.id), the project (null: refused)]
    ['valid', '{"stringValue":"shop-1"}', 'shop-1'],
    ['none', null, CTX.defaultProjectId],
    ['empty', '{"stringValue":""}', null],
    ['an int', '{"intValue":"7"}', null],
    ['no value', '{}', null],
    ['a space', '{"stringValue":"a b"}', null],
    ['dot-dot', '{"stringValue":"a..b"}', null],
    ['129 characters', `{"stringValue":"${'p'.repeat(129)}"}`, null],
  ];
  for (const signal of SIGNALS) {
    for (const [label, value, project] of cases) {
      const attrs: [string, string][] = [['service.name', '{"stringValue":"svc"}']];
      if (value !== null) attrs.push(['project.id', value]);
      const resource = `{"attributes":${attributeList(attrs)}}`;
      for (const [format, body, route, how] of eachRoute(signal, ITEMS[signal]('[]'), resource)) {
        const what = `${signal}, project.id ${label}, ${how}`;
        assertRoutesAgree(signal, format, body, what, route);
        const served = decoders[0]!.decode(task(signal, format, body));
        if (project === null) {
          assert.ok(served.ok, what);
          const item = served.tables[ITEM_TABLE[signal]]!;
          assert.equal(item.batch.numRows, 0, what);
          const [[reason, n]] = Object.entries(item.reasons) as [[string, number]];
          assert.match(reason, /^invalid resource attribute project\.id .+: use 1-128 letters/, what);
          assert.equal(n, 1, what);
          assert.deepEqual(served.projects, {}, `${what}: no rows by project`);
        } else {
          assert.equal(onlyRow(served, ITEM_TABLE[signal])['project_id'], project, what);
          assert.deepEqual(
            (served as { projects: unknown }).projects,
            { [project]: 1 },
            `${what}: rows by project`,
          );
        }
        const withHeader = decoders[0]!.decode(task(signal, format, body, 'from-header'));
        assert.equal(onlyRow(withHeader, ITEM_TABLE[signal])['project_id'], 'from-header', `${what}, header`);
      }
    }
  }
});

test('attribute limits: the same cells on every route, the first attributes kept, drops counted, values cut', () => {
  // decoders[1]: at most 3 attributes, of at most 6 characters.
  const item = attributeList([
    ['a', '{"stringValue":"0123456789"}'],
    ['b', '{"intValue":"2"}'],
    ['c', '{"arrayValue":{"values":[{"stringValue":"abcdefgh"},{"boolValue":true}]}}'],
    ['d', '{"stringValue":"d"}'],
    ['e', '{"stringValue":"e"}'],
  ]);
  const resource = `{"attributes":${attributeList([
    ['service.name', '{"stringValue":"svc"}'],
    ['r1', '{"stringValue":"long value"}'],
    ['r2', '{"doubleValue":1.5}'],
    ['r3', '{"boolValue":false}'],
  ])},"droppedAttributesCount":2}`;
  for (const signal of SIGNALS) {
    for (const [format, body, route, how] of eachRoute(signal, ITEMS[signal](item), resource)) {
      const what = `${signal}, ${how}`;
      assertRoutesAgree(signal, format, body, what, route);
      const row = onlyRow(decoders[1]!.decode(task(signal, format, body)), ITEM_TABLE[signal]);
      assert.equal(row['resource_attributes'], '{"service.name":"svc","r1":"long v","r2":1.5}', what);
      assert.equal(row['resource_dropped_attributes_count'], 2 + 1, `${what}: resource drops added`);
      if (signal === 'metrics') {
        // A point's attributes name its series: all kept, long values cut.
        assert.equal(row['attributes'], '{"a":"012345","b":2,"c":["abcdef",true],"d":"d","e":"e"}', what);
      } else {
        assert.equal(row['attributes'], '{"a":"012345","b":2,"c":["abcdef",true]}', what);
        assert.equal(row['dropped_attributes_count'], 1 + 2, `${what}: item drops added`);
      }
      // Within the default limits nothing changes.
      const plain = onlyRow(decoders[0]!.decode(task(signal, format, body)), ITEM_TABLE[signal]);
      assert.equal(plain['resource_dropped_attributes_count'], 2, what);
      assert.match(plain['attributes'] as string, /"e":"e"}$/, what);
    }
  }
});

test("a rejected span's events and links are rejected with it, on every route; another span's are kept", () => {
  const span = (id: string, start: string, end: string) =>
    `{"traceId":"5b8efff798038103d269b633813fc60c","spanId":"${id}","name":"s-${id}","startTimeUnixNano":"${start}",` +
    `"endTimeUnixNano":"${end}","events":[{"timeUnixNano":"1700000000000000050","name":"e-${id}"}],` +
    `"links":[{"traceId":"0af7651916cd43dd8448eb211c80319c","spanId":"b7ad6b7169203331"}]}`;
  // Times across 2^63 (as uint64 they are 900 ns apart): the duration does not fit int64.
  const bad = span('eee19b7ec3c1b174', '9223372036854775000', '9223372036854775900');
  const good = span('eee19b7ec3c1b175', '1700000000000000000', '1700000000000000100');
  for (const [format, body, route, how] of eachRoute('traces', `${bad},${good}`, '{}')) {
    assertRoutesAgree('traces', format, body, how, route);
    const r = decoders[0]!.decode(task('traces', format, body));
    assert.ok(r.ok, how);
    assert.deepEqual(r.tables.spans!.reasons, { 'out_of_range:duration_ns': 1 }, how);
    for (const table of ['span_events', 'span_links'] as const) {
      assert.deepEqual(r.tables[table]!.reasons, { [SPAN_REJECTED]: 1 }, `${how}: ${table}`);
      assert.equal(r.tables[table]!.batch.numRows, 1, `${how}: ${table}`);
    }
    assert.equal(onlyRow(r, 'span_events')['name'], 'e-eee19b7ec3c1b175', how);
  }
});

test('the routes counted above: the readers took all but the odd forms', () => {
  assert.ok(routes.reader > 1000, `${routes.reader} bodies read by the readers`);
  assert.ok(routes.tree >= 16, `${routes.tree} bodies left to the tree`);
});
