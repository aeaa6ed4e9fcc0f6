import assert from 'node:assert/strict';
import { test } from 'node:test';
import { loadProtobuf, OtlpDecodeError } from '../../src/otlp/index.ts';
import { quoteBigIntegers } from '../../src/otlp/tree.ts';
import {
  ARRIVAL_MS,
  jsonToProtobuf,
  mapBody,
  mapJson,
  mapJsonText,
  mapProtobuf,
  normalized,
} from './helpers.ts';

const TRACE = '5b8efff798038103d269b633813fc60c';
const SPAN = 'eee19b7ec3c1b174';

function logsRequest(record: Record<string, unknown>, resourceAttributes: unknown[] = []) {
  return {
    resourceLogs: [{ resource: { attributes: resourceAttributes }, scopeLogs: [{ logRecords: [record] }] }],
  };
}

function oneLog(record: Record<string, unknown>, resourceAttributes: unknown[] = []) {
  const m = mapJson('logs', logsRequest(record, resourceAttributes));
  assert.equal(m.items, 1);
  return { row: m.tables.logs![0]!, invalidIds: m.invalidIds };
}

const attr = (key: string, value: unknown) => ({ key, value });

test('int64 beyond 2^53 stays exact as JSON string and as JSON number', () => {
  const big = '9007199254740993'; // 2^53 + 1: JSON.parse alone would round it
  for (const form of [`"${big}"`, big]) {
    const json =
      `{"resourceLogs":[{"scopeLogs":[{"logRecords":[{"timeUnixNano":${form},"observedTimeUnixNano":${form},` +
      `"attributes":[{"key":"n","value":{"intValue":${form}}},{"key":"m","value":{"intValue":"-9007199254740992"}}]}]}]}]}`;
    const row = mapJsonText('logs', json).tables.logs![0]!;
    assert.equal(row.time_unix_nano, 9007199254740993n, form);
    assert.equal(row.observed_time_unix_nano, 9007199254740993n);
    assert.equal(normalized('logs', row).event_ts, 9007199254740n);
    // Beyond 2^53 as a string, at -2^53 still a number.
    assert.equal(row.attributes, '{"n":"9007199254740993","m":-9007199254740992}');
  }
  const json =
    '{"resourceMetrics":[{"scopeMetrics":[{"metrics":[{"name":"x","sum":{"dataPoints":[' +
    '{"asInt":-9223372036854775808,"timeUnixNano":"1"},{"asInt":"9223372036854775807","timeUnixNano":"1"}]}}]}]}]}';
  const points = mapJsonText('metrics', json).tables.metrics_points!;
  assert.equal(points[0]!.value_int, -9223372036854775808n);
  assert.equal(points[1]!.value_int, 9223372036854775807n);
  assert.equal(points[0]!.value_double, null);
});

test('big integer literals are quoted for the exact parse, strings and doubles untouched', () => {
  const text =
    '{"a":12345678901234567890,"b":[-9223372036854775808, 1e300,1.5e19],' +
    '"s":"x\\"12345678901234567890\\\\","t":"99999999999999999","c":123,"d":1234567890123456.5}';
  assert.equal(
    quoteBigIntegers(text),
    '{"a":"12345678901234567890","b":["-9223372036854775808", 1e300,1.5e19],' +
      '"s":"x\\"12345678901234567890\\\\","t":"99999999999999999","c":123,"d":1234567890123456.5}',
  );
  assert.equal(quoteBigIntegers('{"a":1}'), '{"a":1}');
  // A double field written as a big integer literal still reads as a number.
  const json =
    '{"resourceMetrics":[{"scopeMetrics":[{"metrics":[{"name":"x","gauge":{"dataPoints":[' +
    '{"asDouble":12345678901234567890,"timeUnixNano":1700000000000000001}]}}]}]}]}';
  const point = mapJsonText('metrics', json).tables.metrics_points![0]!;
  assert.equal(point.value_double, Number(12345678901234567890n));
  assert.equal(point.time_unix_nano, 1700000000000000001n);
});

test('an int64 beyond 2^53 written with an exponent is refused clearly', () => {
  const json = '{"resourceLogs":[{"scopeLogs":[{"logRecords":[{"timeUnixNano":1.7e18}]}]}]}';
  assert.throws(
    () => mapJsonText('logs', json),
    (err: unknown) =>
      err instanceof OtlpDecodeError &&
      /timeUnixNano: .*send int64 values as decimal strings/.test(err.message),
  );
});

test('int64 beyond 2^53 stays exact through protobuf', async () => {
  const codec = (await loadProtobuf())!;
  const tree = {
    resourceMetrics: [
      {
        scopeMetrics: [
          {
            metrics: [
              {
                name: 'big',
                sum: {
                  dataPoints: [
                    {
                      asInt: '-9007199254740993',
                      timeUnixNano: '18446744073709551615',
                      attributes: [attr('n', { intValue: '9223372036854775807' })],
                    },
                  ],
                },
              },
              {
                name: 'h',
                histogram: {
                  dataPoints: [{ count: '9007199254740995', bucketCounts: ['9007199254740993', '1'] }],
                },
              },
            ],
          },
        ],
      },
    ],
  };
  const m = mapProtobuf('metrics', jsonToProtobuf('metrics', tree, codec), codec);
  const point = m.tables.metrics_points![0]!;
  assert.equal(point.value_int, -9007199254740993n);
  // fixed64 beyond 2^63 keeps its bits in the signed long column.
  assert.equal(point.time_unix_nano, -1n);
  assert.equal(point.attributes, '{"n":"9223372036854775807"}');
  const hist = m.tables.metrics_hist![0]!;
  assert.equal(hist.count, 9007199254740995n);
  assert.deepEqual(hist.bucket_counts, [9007199254740993n, 1n]);
  assert.deepEqual(mapJson('metrics', tree), m);
});

test('ids: upper-case hex and base64 are converted to lower-case hex', () => {
  const b64Trace = Buffer.from(TRACE, 'hex').toString('base64');
  const b64Span = Buffer.from(SPAN, 'hex').toString('base64url').replace(/=+$/, '');
  const { row, invalidIds } = oneLog({ traceId: b64Trace, spanId: b64Span });
  assert.equal(row.trace_id, TRACE);
  assert.equal(row.span_id, SPAN);
  assert.equal(invalidIds, 0);
  const upper = oneLog({ traceId: TRACE.toUpperCase(), spanId: SPAN.toUpperCase() }).row;
  assert.equal(upper.trace_id, TRACE);
  assert.equal(upper.span_id, SPAN);
});

test('ids: wrong length and bad characters become null and are counted', () => {
  const cases: [unknown, unknown][] = [
    [TRACE.slice(2), SPAN + 'ab'],
    ['z'.repeat(32), 'g'.repeat(16)],
    [Buffer.alloc(15).toString('base64'), '!!!!'],
    // Hex of 11 bytes, which is also the unpadded base64 of 16 (and 11 digits, of 8).
    ['0102030405060708090a0b', '11121314151'],
  ];
  for (const [traceId, spanId] of cases) {
    const { row, invalidIds } = oneLog({ traceId, spanId });
    assert.equal(row.trace_id, null, String(traceId));
    assert.equal(row.span_id, null, String(spanId));
    assert.equal(invalidIds, 2, String(traceId));
  }
  // Absent, empty and all-zero ids (OTLP's "no valid context", in hex, base64 or bytes) are not invalid.
  const none: [unknown, unknown][] = [
    ['', null],
    ['0'.repeat(32), '0'.repeat(16)],
    [Buffer.alloc(16).toString('base64'), Buffer.alloc(8).toString('base64')],
  ];
  for (const [traceId, spanId] of none) {
    const { row, invalidIds } = oneLog({ traceId, spanId });
    assert.equal(row.trace_id, null, String(traceId));
    assert.equal(row.span_id, null, String(spanId));
    assert.equal(invalidIds, 0, String(traceId));
  }
});

test('invalid ids through protobuf are counted too', async () => {
  const codec = (await loadProtobuf())!;
  const type = codec.requestType('traces');
  const bytes = type
    .encode(
      type.fromObject({
        resourceSpans: [
          {
            scopeSpans: [
              {
                spans: [
                  {
                    traceId: Buffer.alloc(16),
                    spanId: Buffer.from('0102030405', 'hex'),
                    parentSpanId: Buffer.from(SPAN, 'hex'),
                    links: [{ traceId: Buffer.from(TRACE, 'hex'), spanId: Buffer.alloc(8) }],
                  },
                ],
              },
            ],
          },
        ],
      }),
    )
    .finish();
  const m = mapProtobuf('traces', bytes, codec);
  const span = m.tables.spans![0]!;
  assert.equal(span.trace_id, null);
  assert.equal(span.span_id, null);
  assert.equal(span.parent_span_id, SPAN);
  const link = m.tables.span_links![0]!;
  assert.equal(link.linked_trace_id, TRACE);
  assert.equal(link.linked_span_id, null);
  assert.equal(m.invalidIds, 1); // the 5-byte span id; all-zero ids are no ids
});

test('NaN and infinities: doubles as strings in JSON, numbers in rows, strings in attribute JSON', () => {
  const tree = {
    resourceMetrics: [
      {
        scopeMetrics: [
          {
            metrics: [
              {
                name: 'g',
                gauge: {
                  dataPoints: [
                    {
                      asDouble: 'NaN',
                      timeUnixNano: '5',
                      attributes: [attr('d', { doubleValue: 'Infinity' })],
                    },
                    {
                      asDouble: '-Infinity',
                      timeUnixNano: '5',
                      attributes: [attr('d', { doubleValue: '-Infinity' })],
                    },
                    {
                      asDouble: 'Infinity',
                      timeUnixNano: '5',
                      attributes: [attr('d', { doubleValue: 'NaN' })],
                    },
                  ],
                },
              },
              {
                name: 'h',
                histogram: {
                  dataPoints: [
                    {
                      count: '1',
                      sum: 'NaN',
                      min: '-Infinity',
                      max: 'Infinity',
                      explicitBounds: [1, 'Infinity'],
                    },
                  ],
                },
              },
            ],
          },
        ],
      },
    ],
  };
  const m = mapJson('metrics', tree);
  const [a, b, c] = m.tables.metrics_points!;
  assert.ok(Number.isNaN(a!.value_double));
  assert.equal(b!.value_double, Number.NEGATIVE_INFINITY);
  assert.equal(c!.value_double, Number.POSITIVE_INFINITY);
  assert.equal(a!.attributes, '{"d":"Infinity"}');
  assert.equal(b!.attributes, '{"d":"-Infinity"}');
  assert.equal(c!.attributes, '{"d":"NaN"}');
  const h = m.tables.metrics_hist![0]!;
  assert.ok(Number.isNaN(h.sum));
  assert.equal(h.min, Number.NEGATIVE_INFINITY);
  assert.equal(h.max, Number.POSITIVE_INFINITY);
  assert.deepEqual(h.explicit_bounds, [1, Number.POSITIVE_INFINITY]);
});

test('doubles as strings: every JSON number form is read as that number', () => {
  const forms = ['0', '-0', '7', '-0.5', '1e3', '1E-3', '123.456e+2', '1.7976931348623157e308', '5e-324'];
  const points = forms.map((v) => ({
    asDouble: v,
    timeUnixNano: '5',
    attributes: [attr('d', { doubleValue: v })],
  }));
  const m = mapJson('metrics', {
    resourceMetrics: [{ scopeMetrics: [{ metrics: [{ name: 'g', gauge: { dataPoints: points } }] }] }],
  });
  const rows = m.tables.metrics_points!;
  assert.equal(rows.length, forms.length);
  forms.forEach((v, i) => {
    assert.ok(Object.is(rows[i]!.value_double, Number(v)), v);
    assert.equal(rows[i]!.attributes, `{"d":${JSON.stringify(Number(v))}}`, v);
  });
});

test('NaN and infinities survive protobuf', async () => {
  const codec = (await loadProtobuf())!;
  const tree = {
    resourceMetrics: [
      {
        scopeMetrics: [
          {
            metrics: [
              {
                name: 'g',
                gauge: {
                  dataPoints: [{ asDouble: Number.NaN, attributes: [attr('d', { doubleValue: -Infinity })] }],
                },
              },
            ],
          },
        ],
      },
    ],
  };
  const row = mapProtobuf('metrics', jsonToProtobuf('metrics', tree, codec), codec).tables
    .metrics_points![0]!;
  assert.ok(Number.isNaN(row.value_double));
  assert.equal(row.attributes, '{"d":"-Infinity"}');
});

test('snake_case keys are accepted everywhere', () => {
  const json = {
    resource_spans: [
      {
        resource: {
          attributes: [attr('service.name', { string_value: 'svc' })],
          dropped_attributes_count: 2,
        },
        schema_url: 'https://r',
        scope_spans: [
          {
            scope: { name: 's', dropped_attributes_count: 1 },
            schema_url: 'https://s',
            spans: [
              {
                trace_id: TRACE,
                span_id: SPAN,
                parent_span_id: SPAN,
                trace_state: 'k=v',
                start_time_unix_nano: '1000',
                end_time_unix_nano: '3000',
                dropped_attributes_count: 3,
                dropped_events_count: 4,
                dropped_links_count: 5,
                attributes: [
                  attr('i', { int_value: '7' }),
                  attr('b', { bool_value: false }),
                  attr('d', { double_value: 1.5 }),
                  attr('a', { array_value: { values: [{ bytes_value: 'AQI=' }] } }),
                  attr('k', { kvlist_value: { values: [attr('x', { string_value: 'y' })] } }),
                ],
                events: [{ time_unix_nano: '2000', name: 'e', dropped_attributes_count: 6 }],
              },
            ],
          },
        ],
      },
    ],
  };
  const m = mapJson('traces', json);
  const span = m.tables.spans![0]!;
  assert.equal(span.service_name, 'svc');
  assert.equal(span.resource_dropped_attributes_count, 2);
  assert.equal(span.resource_schema_url, 'https://r');
  assert.equal(span.scope_schema_url, 'https://s');
  assert.equal(span.scope_dropped_attributes_count, 1);
  assert.equal(span.trace_id, TRACE);
  assert.equal(span.parent_span_id, SPAN);
  assert.equal(span.trace_state, 'k=v');
  assert.equal(span.duration_ns, null, 'derived by the normalizer');
  assert.equal(normalized('spans', span).duration_ns, 2000n);
  assert.equal(span.dropped_attributes_count, 3);
  assert.equal(span.dropped_events_count, 4);
  assert.equal(span.dropped_links_count, 5);
  assert.equal(span.attributes, '{"i":7,"b":false,"d":1.5,"a":["AQI="],"k":{"x":"y"}}');
  const ev = m.tables.span_events![0]!;
  assert.equal(ev.time_unix_nano, 2000n);
  assert.equal(ev.event_ts, 2n);
  assert.equal(ev.dropped_attributes_count, 6);
});

test('unknown fields are ignored in JSON and protobuf', async () => {
  const tree = {
    futureTopLevel: { x: [1, 2] },
    resourceLogs: [
      {
        newThing: 'x',
        scopeLogs: [
          {
            logRecords: [{ body: { stringValue: 'hi', extra: 1 }, somethingNew: [1], timeUnixNano: '1000' }],
          },
        ],
      },
    ],
  };
  const row = oneLog(tree.resourceLogs[0]!.scopeLogs[0]!.logRecords[0]!).row;
  assert.equal(row.body, 'hi');
  assert.equal(mapJson('logs', tree).tables.logs!.length, 1);
  const codec = (await loadProtobuf())!;
  const known = jsonToProtobuf(
    'logs',
    { resourceLogs: tree.resourceLogs.map(({ scopeLogs }) => ({ scopeLogs })) },
    codec,
  );
  // Append field 99 (varint 1) and field 100 (length-delimited "ab") to the top-level message.
  const withUnknown = Buffer.concat([known, Buffer.from([0x98, 0x06, 0x01, 0xa2, 0x06, 0x02, 0x61, 0x62])]);
  const m = mapProtobuf('logs', withUnknown, codec);
  assert.equal(m.items, 1);
  assert.equal(m.tables.logs![0]!.body, 'hi');
});

test('enum names from generic proto3 JSON encoders are accepted', () => {
  const m = mapJson('traces', {
    resourceSpans: [
      {
        scopeSpans: [
          {
            spans: [
              {
                kind: 'SPAN_KIND_CLIENT',
                status: { code: 'STATUS_CODE_ERROR', message: 'bad' },
                startTimeUnixNano: '1',
              },
            ],
          },
        ],
      },
    ],
  });
  const span = m.tables.spans![0]!;
  assert.equal(span.kind, 3);
  assert.equal(span.status_code, 2);
  assert.equal(span.status_message, 'bad');
  assert.equal(oneLog({ severityNumber: 'SEVERITY_NUMBER_WARN3' }).row.severity_number, 15);
});

test('empty requests give zero rows', async () => {
  for (const text of [
    '',
    '{}',
    '{"resourceLogs":[]}',
    '{"resourceLogs":[{"scopeLogs":[{"logRecords":[]}]}]}',
  ]) {
    const m = mapJsonText('logs', text);
    assert.deepEqual(m, { tables: {}, items: 0, invalidIds: 0 }, text);
  }
  const codec = (await loadProtobuf())!;
  for (const signal of ['traces', 'logs', 'metrics'] as const) {
    assert.deepEqual(mapProtobuf(signal, new Uint8Array(0), codec), { tables: {}, items: 0, invalidIds: 0 });
  }
});

test('malformed bodies throw OtlpDecodeError with a useful message', async () => {
  const bad: [string, RegExp][] = [
    ['{"resourceLogs":[{"scopeLogs":[', /invalid JSON body/],
    ['[1,2]', /must be an object/],
    ['"x"', /must be an object/],
    ['{"resourceLogs":{}}', /resourceLogs: expected an array, got object/],
    ['{"resourceLogs":[{"scopeLogs":"x"}]}', /scopeLogs: expected an array, got string/],
    [
      '{"resourceLogs":[{"scopeLogs":[{"logRecords":[null]}]}]}',
      /logRecords\[0\]: expected an object, got null/,
    ],
    [
      '{"resourceLogs":[{"scopeLogs":[{"logRecords":[{"traceId":5}]}]}]}',
      /logRecord.traceId: expected a hex string/,
    ],
    [
      '{"resourceLogs":[{"scopeLogs":[{"logRecords":[{"timeUnixNano":"12abc"}]}]}]}',
      /timeUnixNano: "12abc" is not an integer/,
    ],
    [
      '{"resourceLogs":[{"scopeLogs":[{"logRecords":[{"timeUnixNano":1.5}]}]}]}',
      /timeUnixNano: expected an integer/,
    ],
    [
      '{"resourceLogs":[{"scopeLogs":[{"logRecords":[{"severityNumber":"loud"}]}]}]}',
      /severityNumber: "loud"/,
    ],
    [
      '{"resourceLogs":[{"scopeLogs":[{"logRecords":[{"attributes":[{"key":1}]}]}]}]}',
      /attribute key: expected a string/,
    ],
    [
      '{"resourceLogs":[{"scopeLogs":[{"logRecords":[{"attributes":{}}]}]}]}',
      /attributes: expected an array/,
    ],
    ['{"resourceLogs":[{"resource":[]}]}', /resource: expected an object, got array/],
    [
      '{"resourceLogs":[{"scopeLogs":[{"logRecords":[{"body":{"intValue":"x1"}}]}]}]}',
      /intValue: "x1" is not an integer/,
    ],
    [
      '{"resourceLogs":[{"scopeLogs":[{"logRecords":[{"timeUnixNano":"99999999999999999999"}]}]}]}',
      /outside the 64-bit range/,
    ],
    // flags is a fixed32: protobuf's JSON parsers refuse what a protobuf body cannot carry.
    ...['4294967296', '"4294967296"', '-1', '"-1"', '9007199254740991'].map((v): [string, RegExp] => [
      `{"resourceLogs":[{"scopeLogs":[{"logRecords":[{"flags":${v}}]}]}]}`,
      /logRecord\.flags: -?\d+ is outside the 32-bit unsigned range/,
    ]),
    [
      `{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"${'ab'.repeat(16)}","spanId":"${'cd'.repeat(8)}","flags":4294967296}]}]}]}`,
      /flags: 4294967296 is outside the 32-bit unsigned range/,
    ],
    // A double as a string is a JSON number a double holds: not hex, padded, empty or overflowing.
    ...['0x10', ' 1', '1 ', '', '1e400', '-1e400', '+1', '.5', '1.', 'infinity', '1_0'].flatMap(
      (v): [string, RegExp][] => [
        [
          `{"resourceMetrics":[{"scopeMetrics":[{"metrics":[{"name":"g","gauge":{"dataPoints":[{"asDouble":"${v}"}]}}]}]}]}`,
          /asDouble: ".*" is not a finite JSON number/,
        ],
        [
          `{"resourceLogs":[{"scopeLogs":[{"logRecords":[{"attributes":[{"key":"d","value":{"doubleValue":"${v}"}}]}]}]}]}`,
          /doubleValue: ".*" is not a finite JSON number/,
        ],
      ],
    ),
  ];
  const signalOf = (text: string) =>
    text.startsWith('{"resourceSpans"')
      ? 'traces'
      : text.startsWith('{"resourceMetrics"')
        ? 'metrics'
        : 'logs';
  for (const [text, message] of bad) {
    assert.throws(
      () => mapJsonText(signalOf(text), text),
      (err: unknown) => err instanceof OtlpDecodeError && message.test(err.message),
      text,
    );
  }
  const codec = (await loadProtobuf())!;
  for (const bytes of [
    Buffer.from([0x0a, 0x10, 0x01]),
    Buffer.from('not protobuf at all'),
    Buffer.from([0xff, 0xff, 0xff]),
  ]) {
    assert.throws(
      () => mapProtobuf('traces', bytes, codec),
      (err: unknown) => err instanceof OtlpDecodeError && /invalid protobuf body/.test(err.message),
    );
  }
});

test('deeply nested AnyValues are cut at 64 levels instead of overflowing the stack', async () => {
  const levels = 5000;
  const text =
    '{"resourceLogs":[{"scopeLogs":[{"logRecords":[{"body":' +
    '{"arrayValue":{"values":['.repeat(levels) +
    '{"stringValue":"leaf"}' +
    ']}}'.repeat(levels) +
    '}]}]}]}';
  const cut = `${'['.repeat(65)}null${']'.repeat(65)}`;
  assert.equal(mapJsonText('logs', text).tables.logs![0]!.body, cut);
  let ok: Record<string, unknown> = { stringValue: 'leaf' };
  for (let i = 0; i < 30; i++) ok = { kvlistValue: { values: [{ key: 'k', value: ok }] } };
  assert.match(oneLog({ body: ok }).row.body as string, /^\{"k":\{"k":/);
  let deep = Buffer.from([0x0a, 0x04, 0x6c, 0x65, 0x61, 0x66]); // AnyValue { string_value: "leaf" }
  for (let i = 0; i < 3000; i++) {
    // AnyValue { array_value (5): ArrayValue { values (1): deep } }
    const inner = Buffer.concat([Buffer.from([0x0a]), varint(deep.length), deep]);
    deep = Buffer.concat([Buffer.from([0x2a]), varint(inner.length), inner]);
  }
  const record = Buffer.concat([Buffer.from([0x2a]), varint(deep.length), deep]); // LogRecord.body (5)
  const scope = Buffer.concat([Buffer.from([0x12]), varint(record.length), record]); // ScopeLogs.log_records (2)
  const resource = Buffer.concat([Buffer.from([0x12]), varint(scope.length), scope]); // ResourceLogs.scope_logs (2)
  const request = Buffer.concat([Buffer.from([0x0a]), varint(resource.length), resource]);
  // The server's reader (protobufjs, which stops at 100 nested messages, is no reference here).
  assert.equal(mapBody('logs', 'protobuf', request).tables.logs![0]!.body, cut);
});

function varint(n: number): Buffer {
  const out: number[] = [];
  while (n > 0x7f) {
    out.push((n & 0x7f) | 0x80);
    n >>>= 7;
  }
  out.push(n);
  return Buffer.from(out);
}

test('duplicate attribute keys: the last one wins, short and long lists', () => {
  const short = [attr('a', { intValue: 1 }), attr('b', { intValue: 2 }), attr('a', { intValue: 3 })];
  const text = oneLog({ attributes: short }).row.attributes as string;
  assert.deepEqual(JSON.parse(text), { a: 3, b: 2 });
  assert.equal(text.match(/"a"/g)?.length, 1);
  // Keys that are special to JS objects stay plain keys.
  const special = [
    attr('__proto__', { stringValue: 'p' }),
    attr('0', { intValue: 0 }),
    attr('constructor', {}),
  ];
  const specialJson = JSON.parse(oneLog({ attributes: special }).row.attributes as string);
  assert.deepEqual(Object.entries(specialJson).sort(), [
    ['0', 0],
    ['__proto__', 'p'],
    ['constructor', null],
  ]);
  const long = Array.from({ length: 40 }, (_, i) => attr(`k${i % 20}`, { intValue: i }));
  const parsed = JSON.parse(oneLog({ attributes: long }).row.attributes as string);
  assert.equal(Object.keys(parsed).length, 20);
  assert.equal(parsed.k0, 20);
  assert.equal(parsed.k19, 39);
});

test('AnyValue: bytes as base64, nested arrays and maps, empty values, string escaping', async () => {
  const attributes = [
    attr('bytes', { bytesValue: 'AAEC/w==' }),
    attr('nested', {
      arrayValue: { values: [{ arrayValue: { values: [{ intValue: '1' }, {}] } }, { kvlistValue: {} }] },
    }),
    attr('empty', {}),
    attr('none', null),
    attr('quote"and\\slash\n', { stringValue: 'line1\nline2 "q" \u2028' }),
  ];
  const json = oneLog({ attributes }).row.attributes as string;
  assert.deepEqual(JSON.parse(json), {
    bytes: 'AAEC/w==',
    nested: [[1, null], {}],
    empty: null,
    none: null,
    'quote"and\\slash\n': 'line1\nline2 "q" \u2028',
  });
  const codec = (await loadProtobuf())!;
  const tree = logsRequest({ attributes, body: { bytesValue: 'AAEC/w==' } });
  const proto = mapProtobuf('logs', jsonToProtobuf('logs', tree, codec), codec).tables.logs![0]!;
  assert.equal(proto.attributes, json);
  assert.equal(proto.body, '"AAEC/w=="');
  // proto3 JSON's other spellings of the same bytes (URL-safe, unpadded) are stored as protobuf's.
  for (const spelling of ['AAEC_w==', 'AAEC/w', 'AAEC_w']) {
    const row = oneLog({ attributes: [attr('bytes', { bytesValue: spelling })] }).row;
    assert.equal(row.attributes, '{"bytes":"AAEC/w=="}', spelling);
  }
});

test('log bodies: string as is, other values as JSON, absent as null', () => {
  assert.equal(oneLog({ body: { stringValue: '{"not":"parsed"}' } }).row.body, '{"not":"parsed"}');
  assert.equal(oneLog({ body: { intValue: '42' } }).row.body, '42');
  assert.equal(oneLog({ body: { boolValue: true } }).row.body, 'true');
  assert.equal(oneLog({ body: { doubleValue: 2.5 } }).row.body, '2.5');
  assert.equal(oneLog({ body: { arrayValue: { values: [{ stringValue: 'a' }] } } }).row.body, '["a"]');
  assert.equal(oneLog({}).row.body, null);
  assert.equal(oneLog({ body: {} }).row.body, null);
});

test('log event_ts: the time, else the observed time, else the arrival (derived by the normalizer)', () => {
  const arrival = BigInt(ARRIVAL_MS) * 1000n;
  const cases: [time: string | undefined, observed: string | undefined, eventTs: bigint][] = [
    ['1700000000123456789', '1700000000999999999', 1700000000123456n],
    ['1700000000123456789', '0', 1700000000123456n],
    ['0', '1700000000123456789', 1700000000123456n],
    [undefined, '1700000000123456789', 1700000000123456n],
    ['0', '0', arrival],
    [undefined, undefined, arrival],
    // Before 1970: negative, floored to the microsecond; uint64 above 2^63 reads as negative.
    ['-1500', '1700000000123456789', -2n],
    ['18446744073709550116', '0', -2n],
    ['0', '-1', -1n],
    ['-1000', '-5000', -1n],
  ];
  for (const [time, observed, eventTs] of cases) {
    const { row } = oneLog({ timeUnixNano: time, observedTimeUnixNano: observed, flags: 1 });
    assert.equal(row.event_ts, null, 'left to the normalizer, key kept');
    assert.equal(row.flags, 1n);
    const stored = normalized('logs', row);
    assert.equal(stored.event_ts, eventTs, `time ${time}, observed ${observed}`);
    assert.equal(stored.time_unix_nano, time === undefined ? 0n : BigInt.asIntN(64, BigInt(time)));
  }
});

test('span and metric event_ts still come from the mapper, unchanged by the normalizer', () => {
  const spans = mapJson('traces', {
    resourceSpans: [
      {
        scopeSpans: [
          {
            spans: [
              {
                traceId: TRACE,
                spanId: SPAN,
                startTimeUnixNano: '-1500',
                events: [{ timeUnixNano: '0' }],
              },
            ],
          },
        ],
      },
    ],
  }).tables;
  const metrics = mapJson('metrics', {
    resourceMetrics: [
      {
        scopeMetrics: [
          { metrics: [{ name: 'g', gauge: { dataPoints: [{ timeUnixNano: '0', asInt: '1' }] } }] },
        ],
      },
    ],
  }).tables;
  for (const [table, row, eventTs] of [
    ['spans', spans.spans![0]!, -2n],
    ['span_events', spans.span_events![0]!, 0n],
    ['metrics_points', metrics.metrics_points![0]!, 0n],
  ] as const) {
    assert.equal(row.event_ts, eventTs, table);
    assert.equal(normalized(table, row).event_ts, eventTs, table);
  }
});

test('project id: header, else resource project.id, else the default; service name may be missing', () => {
  const resource = [attr('project.id', { stringValue: 'from-resource' })];
  const tree = logsRequest({}, resource);
  assert.equal(
    mapJsonText('logs', JSON.stringify(tree), 'from-header').tables.logs![0]!.project_id,
    'from-header',
  );
  assert.equal(mapJson('logs', tree).tables.logs![0]!.project_id, 'from-resource');
  const row = oneLog({}).row;
  assert.equal(row.project_id, 'default-project');
  assert.equal(row.service_name, null);
  assert.equal(row.resource_attributes, '{}');
  assert.equal(row.scope_name, null);
  assert.equal(row.scope_attributes, '{}');
});

test('span events and links become rows tied to their span', () => {
  const m = mapJson('traces', {
    resourceSpans: [
      {
        resource: { attributes: [attr('service.name', { stringValue: 'svc' })] },
        scopeSpans: [
          {
            spans: [
              {
                traceId: TRACE,
                spanId: SPAN,
                name: 'op',
                flags: 257,
                startTimeUnixNano: '1700000000000001999',
                endTimeUnixNano: '1700000000000000000',
                events: [
                  {
                    timeUnixNano: '1700000000500000000',
                    name: 'exception',
                    attributes: [attr('exception.type', { stringValue: 'E' })],
                  },
                  { timeUnixNano: '1700000000600000000', name: 'second' },
                ],
                links: [
                  {
                    traceId: '0af7651916cd43dd8448eb211c80319c',
                    spanId: 'b7ad6b7169203331',
                    traceState: 'a=b',
                    flags: 1,
                    droppedAttributesCount: 2,
                    attributes: [attr('l', { boolValue: true })],
                  },
                ],
              },
            ],
          },
        ],
      },
    ],
  });
  assert.equal(m.items, 1);
  const span = m.tables.spans![0]!;
  assert.equal(span.events_count, 2);
  assert.equal(span.links_count, 1);
  assert.equal(span.flags, 257n);
  assert.equal(
    normalized('spans', span).duration_ns,
    -1999n,
    'end before start: the duration the client reported',
  );
  assert.equal(span.event_ts, 1700000000000001n);
  const events = m.tables.span_events!;
  assert.equal(events.length, 2);
  assert.deepEqual(
    events.map((e) => [
      e.trace_id,
      e.span_id,
      e.span_name,
      e.name,
      e.time_unix_nano,
      e.event_ts,
      e.service_name,
    ]),
    [
      [TRACE, SPAN, 'op', 'exception', 1700000000500000000n, 1700000000500000n, 'svc'],
      [TRACE, SPAN, 'op', 'second', 1700000000600000000n, 1700000000600000n, 'svc'],
    ],
  );
  assert.equal(events[0]!.attributes, '{"exception.type":"E"}');
  assert.equal(events[1]!.attributes, '{}');
  const link = m.tables.span_links![0]!;
  assert.equal(link.trace_id, TRACE);
  assert.equal(link.span_id, SPAN);
  assert.equal(link.span_name, 'op');
  assert.equal(link.linked_trace_id, '0af7651916cd43dd8448eb211c80319c');
  assert.equal(link.linked_span_id, 'b7ad6b7169203331');
  assert.equal(link.trace_state, 'a=b');
  assert.equal(link.flags, 1n);
  assert.equal(link.dropped_attributes_count, 2);
  assert.equal(link.attributes, '{"l":true}');
  assert.equal(link.event_ts, span.event_ts);
});

test('summary quantiles, exemplars, metadata and negative buckets', async () => {
  const tree = {
    resourceMetrics: [
      {
        scopeMetrics: [
          {
            metrics: [
              {
                name: 'latency',
                unit: 'ms',
                metadata: [attr('origin', { stringValue: 'prometheus' })],
                summary: {
                  dataPoints: [
                    {
                      startTimeUnixNano: '1000',
                      timeUnixNano: '2000',
                      count: '10',
                      sum: 55.5,
                      flags: 1,
                      quantileValues: [
                        { quantile: 0.5, value: 4 },
                        { quantile: 0.99, value: 9.5 },
                        { value: 1 },
                      ],
                    },
                  ],
                },
              },
              {
                name: 'hits',
                sum: {
                  aggregationTemporality: 2,
                  isMonotonic: false,
                  dataPoints: [
                    {
                      asInt: '3',
                      timeUnixNano: '2000',
                      exemplars: [
                        {
                          timeUnixNano: '1999',
                          asDouble: 1.25,
                          traceId: TRACE,
                          spanId: SPAN,
                          filteredAttributes: [attr('user', { stringValue: 'u1' })],
                        },
                        { timeUnixNano: '1998', asInt: '7' },
                      ],
                    },
                  ],
                },
              },
              {
                name: 'exp',
                exponentialHistogram: {
                  aggregationTemporality: 2,
                  dataPoints: [
                    {
                      timeUnixNano: '2000',
                      count: '4',
                      scale: -3,
                      zeroThreshold: 0.001,
                      negative: { offset: -2, bucketCounts: ['1', '3'] },
                    },
                  ],
                },
              },
            ],
          },
        ],
      },
    ],
  };
  const m = mapJson('metrics', tree);
  assert.equal(m.items, 3);
  const [summary, exp] = m.tables.metrics_hist!;
  assert.equal(summary!.metric_type, 'summary');
  assert.equal(summary!.metric_metadata, '{"origin":"prometheus"}');
  assert.equal(summary!.unit, 'ms');
  assert.equal(summary!.count, 10n);
  assert.equal(summary!.sum, 55.5);
  assert.equal(summary!.flags, 1n);
  assert.equal(summary!.aggregation_temporality, null);
  assert.deepEqual(summary!.quantiles, [0.5, 0.99, 0]);
  assert.deepEqual(summary!.quantile_values, [4, 9.5, 1]);
  assert.equal(summary!.bucket_counts, null);
  const point = m.tables.metrics_points![0]!;
  assert.equal(point.metric_type, 'sum');
  assert.equal(point.is_monotonic, false);
  assert.equal(point.aggregation_temporality, 2);
  assert.equal(point.value_int, 3n);
  assert.equal(point.value_double, null);
  assert.deepEqual(JSON.parse(point.exemplars as string), [
    {
      filtered_attributes: { user: 'u1' },
      time_unix_nano: '1999',
      as_double: 1.25,
      trace_id: TRACE,
      span_id: SPAN,
    },
    { filtered_attributes: {}, time_unix_nano: '1998', as_int: 7, trace_id: null, span_id: null },
  ]);
  assert.equal(exp!.scale, -3);
  assert.equal(exp!.zero_threshold, 0.001);
  assert.equal(exp!.zero_count, 0n);
  assert.equal(exp!.sum, null);
  assert.equal(exp!.positive_offset, null);
  assert.equal(exp!.negative_offset, -2);
  assert.deepEqual(exp!.negative_bucket_counts, [1n, 3n]);

  const codec = (await loadProtobuf())!;
  assert.deepEqual(mapProtobuf('metrics', jsonToProtobuf('metrics', tree, codec), codec), m);
});
