// JSON bodies are mapped straight from their bytes (src/otlp/json-reader.ts). These tests hold that
// mapping to the reference: JSON.parse's tree mapped by tree.ts, for the same body. Each case also
// checks which route took the body, so an equality reached through the fallback is not mistaken
// for the reader working. (The other signals' JSON: json-bodies.test.ts.)

import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import { tracesRequest } from '../../bench/otlp-payloads.ts';
import { type Mapped, mapJsonTree } from '../../src/otlp/tree.ts';
import type { RefusedProject } from '../../src/schema/project.ts';
import { CTX, mapBody, outcome, type Routed } from './helpers.ts';

type Outcome = Mapped | { error: string };

/** The reference: JSON.parse's tree, mapped by tree.ts. */
function viaTree(body: Uint8Array, headerProjectId?: string): Outcome {
  return outcome(() => mapJsonTree('traces', body, { ...CTX, headerProjectId }));
}

/** What the server does: the reader, falling back to the tree; with the route taken. */
function served(body: Uint8Array, headerProjectId?: string): Routed | { error: string } {
  return outcome(() => mapBody('traces', 'json', body, headerProjectId));
}

function viaService(body: Uint8Array, headerProjectId?: string): Outcome {
  const m = served(body, headerProjectId);
  if ('error' in m) return m;
  const { route: _, ...mapped } = m;
  return mapped;
}

/** Both routes give the same rows or the same error; returns whether the reader took the body. */
function assertSame(body: Uint8Array | string, label: string, headerProjectId?: string): boolean {
  const bytes = typeof body === 'string' ? Buffer.from(body) : body;
  assert.deepEqual(viaService(bytes, headerProjectId), viaTree(bytes, headerProjectId), label);
  const m = served(bytes, headerProjectId);
  return !('error' in m) && m.route === 'reader';
}

function assertFast(body: Uint8Array | string, label: string, headerProjectId?: string): Mapped {
  assert.ok(assertSame(body, label, headerProjectId), `${label}: the reader took it`);
  const bytes = typeof body === 'string' ? Buffer.from(body) : body;
  return viaService(bytes, headerProjectId) as Mapped;
}

function assertDeclined(body: Uint8Array | string, label: string): Outcome {
  assert.equal(assertSame(body, label), false, `${label}: left to the tree`);
  return viaTree(typeof body === 'string' ? Buffer.from(body) : body);
}

const fixture = (name: string) => readFileSync(new URL(`../fixtures/otlp/${name}.json`, import.meta.url));

const TRACE = '5b8efff798038103d269b633813fc60c';
const SPAN = 'eee19b7ec3c1b174';

/** A request of one resource and scope around the given span JSON texts. */
function request(spans: string[], resource = '{}', scope = '{}'): string {
  return `{"resourceSpans":[{"resource":${resource},"scopeSpans":[{"scope":${scope},"spans":[${spans.join(',')}]}]}]}`;
}
const span = (attributes: string, more = '') =>
  `{"traceId":"${TRACE}","spanId":"${SPAN}","name":"s","startTimeUnixNano":"1700000000000000000",` +
  `"endTimeUnixNano":"1700000000000000100","attributes":${attributes}${more}}`;

test('JSON traces map straight from the bytes to the rows of the parsed tree', () => {
  const m = assertFast(fixture('trace'), 'official example');
  assert.equal(m.items, 1);
  for (const seed of [1, 2, 3]) {
    const tree = tracesRequest(100, seed);
    assert.equal(assertFast(JSON.stringify(tree), `bench payload ${seed}`).items, 100);
    assertFast(JSON.stringify(tree, null, 2), `bench payload ${seed}, indented`);
    assertFast(JSON.stringify(tree, null, '\t').replaceAll('\n', '\r\n'), `bench payload ${seed}, CRLF`);
  }
  assert.equal(assertFast(Buffer.alloc(0), 'empty body').items, 0);
  assert.equal(assertFast('{}', 'empty request').items, 0);
  assertFast('{"resourceSpans":null}', 'null list');
  assertFast('{"resourceSpans":[{"scopeSpans":[{"spans":null}]}]}', 'null spans');
  assertFast(' \n{"resourceSpans":[]}\n ', 'whitespace around');
  assertFast('{"resourceSpans":[{"resource":{"attributes":[]},"scopeSpans":[]}]}', 'no spans');
  const bom = Buffer.from([0xef, 0xbb, 0xbf]);
  assert.equal(
    assertFast(Buffer.concat([bom, Buffer.from(JSON.stringify(tracesRequest(2, 1)))]), 'byte order mark')
      .items,
    2,
  );
});

test("a resource's project.id: a valid string is the project, anything else refuses its rows; the header wins", () => {
  const resource = (value: string) => `{"attributes":[{"key":"project.id","value":${value}}]}`;
  const cases: [string, string, string | null][] = [
    ['valid', '{"stringValue":"shop-1"}', 'shop-1'],
    ['empty', '{"stringValue":""}', null],
    ['int', '{"intValue":"7"}', null],
    ['bool', '{"boolValue":true}', null],
    ['empty value', '{}', null],
    ['no value', 'null', null],
    ['a list', '{"arrayValue":{"values":[{"stringValue":"shop"}]}}', null],
    ['a space', '{"stringValue":"a b"}', null],
    ['escaped', '{"stringValue":"sh\\u006fp"}', 'shop'],
  ];
  for (const [label, value, project] of cases) {
    const body = request([span('[]')], resource(value));
    assertSame(body, label);
    const m = viaService(Buffer.from(body));
    const got = (m as Mapped).tables.spans![0]!['project_id'];
    if (project === null)
      assert.match((got as RefusedProject).reason, /^invalid resource attribute project\.id/, label);
    else assert.equal(got, project, label);
    assertSame(body, `${label}, with header`, 'hdr');
    assert.equal((viaService(Buffer.from(body), 'hdr') as Mapped).tables.spans![0]!['project_id'], 'hdr');
  }
  const none = viaService(Buffer.from(request([span('[]')]))) as Mapped;
  assert.equal(none.tables.spans![0]!['project_id'], CTX.defaultProjectId, 'no project.id: the default');
});

test('long lists (keys looked up in a Set past the first ones), repeats among them, map as in the tree', () => {
  const list = (n: number, key: (i: number) => string) =>
    JSON.stringify(Array.from({ length: n }, (_, i) => ({ key: key(i), value: { intValue: String(i) } })));
  assertFast(request([span(list(300, (i) => `k${i}`))]), '300 keys');
  // A repeat is met in the Set, of a key compared before it was built or of one added to it.
  assertFast(request([span(list(300, (i) => `k${i % 299}`))]), '300 keys, the last repeating the first');
  assertFast(
    request([span(list(300, (i) => `k${i === 299 ? 100 : i}`))]),
    '300 keys, the last repeating the 101st',
  );
  assertFast(request([span(list(33, (i) => `k${i % 32}`))]), 'the 33rd key repeating the first');
  assertFast(request([span('[]')], `{"attributes":${list(500, (i) => `r${i}`)}}`), 'a resource of 500 keys');
});

test('attribute values of every kind are written as the JSON of the parsed tree', () => {
  const kv = (key: string, value: string) => `{"key":${JSON.stringify(key)},"value":${value}}`;
  const cases: [string, string[]][] = [
    [
      'strings',
      [
        kv('a', '{"stringValue":"plain"}'),
        kv('b', '{"stringValue":""}'),
        kv('ü', '{"stringValue":"ünïcødé ✓ 😀"}'),
      ],
    ],
    [
      'escapes',
      [
        kv(
          'q"k',
          '{"stringValue":"say \\"hi\\"\\\\ \\n\\t\\r\\b\\f \\u0001 \\u001F \\/ \\u00e9 \\ud83d\\ude00"}',
        ),
        kv('lone', '{"stringValue":"\\ud800"}'),
        kv('\u2028', '{"stringValue":"\u2028\u007f"}'),
      ],
    ],
    [
      'ints',
      [
        '"0"',
        '"1"',
        '"-1"',
        '"007"',
        '"-0"',
        '"9007199254740991"',
        '"9007199254740993"',
        '"-9223372036854775808"',
        '"9223372036854775807"',
        '0',
        '42',
        '-7',
        '9007199254740991',
        '123456789012345',
        '1234567890123456',
      ].map((v, i) => kv(`i${i}`, `{"intValue":${v}}`)),
    ],
    [
      'doubles',
      [
        '0',
        '-0',
        '1.5',
        '-2.25e-300',
        '1e21',
        '1E+2',
        '"NaN"',
        '"Infinity"',
        '"-Infinity"',
        '"2.5"',
        '12',
        // Written as JavaScript writes the double, or not (then JSON.stringify's form is written).
        '1.50',
        '100',
        '-0.0',
        '0.000001',
        '0.0000012',
        '0.0000001',
        '123456789012345',
        '1234567890123456',
        '99999999999999999999',
        '0.1000000000000000055511151231257827',
        '1.7976931348623157e308',
        '5e-324',
        '-12.125',
        '0.30000000000000004',
      ].map((v, i) => kv(`d${i}`, `{"doubleValue":${v}}`)),
    ],
    ['bools', [kv('t', '{"boolValue":true}'), kv('f', '{"boolValue":false}')]],
    ['bytes', [kv('e', '{"bytesValue":""}'), kv('x', '{"bytesValue":"AP8BAgM="}')]],
    [
      'no value',
      [kv('none', 'null'), kv('empty', '{}'), '{"key":"absent"}', kv('nullMember', '{"stringValue":null}')],
    ],
    ['no key', ['{"value":{"stringValue":"v"}}']],
    ['key after value', ['{"value":{"stringValue":"v"},"key":"k"}']],
    [
      'arrays',
      [kv('arr', '{"arrayValue":{"values":[{"stringValue":"a"},{},{"intValue":"3"},{"arrayValue":{}}]}}')],
    ],
    ['kvlist', [kv('map', '{"kvlistValue":{"values":[{"key":"x","value":{"stringValue":"y"}}]}}')]],
    [
      'two members',
      [kv('a', '{"stringValue":"s","intValue":"5"}'), kv('b', '{"intValue":"5","boolValue":true}')],
    ],
    [
      'repeated key',
      [kv('k', '{"stringValue":"first"}'), kv('other', '{"intValue":1}'), kv('k', '{"stringValue":"last"}')],
    ],
    [
      'integer-like keys',
      [
        kv('b', '{"intValue":1}'),
        kv('10', '{"intValue":2}'),
        kv('2', '{"intValue":3}'),
        kv('007', '{"intValue":4}'),
      ],
    ],
    ['__proto__ key', [kv('__proto__', '{"stringValue":"p"}'), kv('constructor', '{"intValue":1}')]],
    ['unknown members', ['{"key":"k","extra":[1,{"a":null}],"value":{"stringValue":"v","other":true}}']],
    ['snake_case member', [kv('s', '{"string_value":"v"}'), kv('i', '{"int_value":"3"}')]],
    ['whitespace', ['{ "key" : "k" , "value" : { "stringValue" : "v" } }', kv('n', '{ "intValue" : "12" }')]],
  ];
  for (const [label, list] of cases) {
    const m = assertFast(request([span(`[${list.join(',')}]`)]), label);
    assert.equal(typeof JSON.parse(m.tables.spans![0]!.attributes as string), 'object', label);
  }
  const m = assertFast(
    request([span('[{"key":"a","value":{"intValue":"200"}},{"key":"b","value":{"boolValue":true}}]')]),
    'compact',
  );
  assert.equal(m.tables.spans![0]!.attributes, '{"a":200,"b":true}');
  assertFast(request([span('null')]), 'null attributes');
  // Values longer than the room made for one KeyValue, and a list of megabytes, then a small one.
  const long = (n: number) => kv('long', `{"stringValue":"${'x'.repeat(n)}"}`);
  for (const n of [4090, 4100, 10_000]) {
    const list = `[${kv('a', '{"stringValue":"b"}')},${long(n)},${kv('c', '{"intValue":"1"}')}]`;
    const m = assertFast(request([span(list)]), `a value of ${n} bytes`);
    assert.equal((JSON.parse(m.tables.spans![0]!.attributes as string) as { long: string }).long.length, n);
  }
  assertFast(request([span(`[${long(3_000_000)}]`)]), 'a list of megabytes');
  assertFast(request([span(`[${kv('after', '{"stringValue":"the big one"}')}]`)]), 'a small list after it');
  // A key with escapes may spell a known one: the tree reads it.
  assertDeclined(request([span(`[${kv('k', '{"string\\u0056alue":"v"}')}]`)]), 'escaped member name');
  // A value of the wrong type is refused, with the tree's words.
  for (const bad of [
    '{"intValue":1.5}',
    '{"intValue":true}',
    '{"stringValue":3}',
    '{"doubleValue":"x"}',
    '"v"',
  ]) {
    const refused = assertDeclined(request([span(`[${kv('k', bad)}]`)]), `bad value ${bad}`);
    assert.ok('error' in refused, bad);
  }
});

test('fields in any order, repeated, unknown, and ids and numbers of every form map as in the tree', () => {
  const event =
    '{"name":"ev","timeUnixNano":"1700000000000000001","attributes":[{"key":"e","value":{"intValue":1}}],"droppedAttributesCount":3}';
  const link = `{"flags":257,"traceState":"ts=1","spanId":"0101010101010101","traceId":"${'02'.repeat(16)}","droppedAttributesCount":1,"attributes":[]}`;
  const shuffled =
    `{"flags":769,"events":[${event},{"unknown":[1,2,{}]}],"links":[${link}],` +
    '"status":{"code":2,"message":"boom"},"name":"first name","name":"the name",' +
    '"endTimeUnixNano":"1700000000500000000","startTimeUnixNano":"1700000000000000000","kind":-1,' +
    `"traceId":"${TRACE}","spanId":"${SPAN}","parentSpanId":"0000000000000000","droppedAttributesCount":1,` +
    '"droppedEventsCount":2,"droppedLinksCount":3,"extra":{"deep":[[[{"x":"y"}]]]},"traceState":"a=b"}';
  const body =
    '{"resourceSpans":[{"schemaUrl":"https://schema/early","scopeSpans":[{"schemaUrl":"https://schema/scope",' +
    `"spans":[${shuffled},{"traceId":"${TRACE}"}],"scope":{"version":"v1","attributes":[{"key":"s","value":{"stringValue":"x"}}],` +
    '"name":"lib","droppedAttributesCount":2}}],"resource":{"attributes":[{"key":"service.name","value":{"stringValue":"svc"}},' +
    '{"key":"project.id","value":{"stringValue":"p1"}}],"droppedAttributesCount":4},"schemaUrl":"https://schema/resource","x":1}],"y":[]}';
  const m = assertFast(body, 'shuffled');
  assert.equal(m.items, 2);
  const row = m.tables.spans![0]!;
  assert.equal(row.name, 'the name');
  assert.equal(row.service_name, 'svc');
  assert.equal(row.project_id, 'p1');
  assert.equal(row.resource_schema_url, 'https://schema/resource');
  assert.equal(row.scope_name, 'lib');
  assert.equal(row.kind, -1);
  assert.equal(row.events_count, 2);
  assert.equal(m.invalidIds, 0); // an all-zero parent span id is no parent, not an invalid id
  assert.equal(m.tables.span_events!.length, 2);
  assert.equal(m.tables.span_events![0]!.scope_name, 'lib');
  assert.equal(m.tables.span_links![0]!.linked_trace_id, '02'.repeat(16));
  assertFast(body, 'shuffled, with a header project', 'from-header');

  // The last of a repeated resource, scope or status counts, whole.
  assertFast(
    request(
      [span('[]', ',"status":{"code":2},"status":{"message":"m"}')],
      '{"attributes":[{"key":"service.name","value":{"stringValue":"a"}}]},"resource":{}',
      '{"name":"x"},"scope":null',
    ),
    'repeated resource, scope and status',
  );
  for (const [label, ids] of [
    ['upper-case hex', `"traceId":"${TRACE.toUpperCase()}","spanId":"${SPAN.toUpperCase()}"`],
    [
      'base64',
      `"traceId":"${Buffer.from(TRACE, 'hex').toString('base64')}","spanId":"${Buffer.from(SPAN, 'hex').toString('base64')}"`,
    ],
    ['wrong length', `"traceId":"${TRACE}ab","spanId":"${SPAN.slice(2)}"`],
    ['not hex', `"traceId":"${TRACE.slice(1)}g","spanId":"zz${SPAN.slice(2)}"`],
    ['all zero', `"traceId":"${'0'.repeat(32)}","spanId":"${'0'.repeat(16)}"`],
    ['empty and null', '"traceId":"","spanId":null,"parentSpanId":""'],
    ['escaped', `"traceId":"\\u0035${TRACE.slice(1)}","spanId":"${SPAN}"`],
  ]) {
    assertFast(request([`{${ids},"name":"n"}`]), `ids: ${label}`);
  }
  for (const [label, fields] of [
    ['int64 as numbers', '"startTimeUnixNano":1700000000000000,"endTimeUnixNano":0'],
    ['int64 strings of every length', '"startTimeUnixNano":"1","endTimeUnixNano":"9223372036854775807"'],
    [
      'uint64 beyond 2^63',
      '"startTimeUnixNano":"18446744073709551615","endTimeUnixNano":"9999999999999999999"',
    ],
    ['leading zeros and sign', '"startTimeUnixNano":"0001","endTimeUnixNano":"-5"'],
    ['enum names', '"kind":"SPAN_KIND_CLIENT","status":{"code":"STATUS_CODE_ERROR"}'],
    ['numeric strings', '"kind":"3","flags":"256","droppedAttributesCount":"2"'],
    ['nulls', '"kind":null,"flags":null,"status":null,"events":null,"links":null,"traceState":null'],
  ]) {
    assertFast(request([`{"traceId":"${TRACE}",${fields}}`]), label);
  }
});

test('bodies the fast path leaves to the tree map or are refused as by the tree', () => {
  const declined: [string, string | Buffer][] = [
    ['snake_case', `{"resource_spans":[{"scope_spans":[{"spans":[{"trace_id":"${TRACE}"}]}]}]}`],
    ['snake_case in a span', request([`{"traceId":"${TRACE}","start_time_unix_nano":"5"}`])],
    ['repeated list', `{"resourceSpans":[],"resourceSpans":[{"scopeSpans":[{"spans":[{"name":"x"}]}]}]}`],
    [
      'repeated spans',
      '{"resourceSpans":[{"scopeSpans":[{"spans":[{"name":"a"}],"spans":[{"name":"b"}]}]}]}',
    ],
    ['escaped key', `{"resourceSpans":[{"scopeSpans":[{"spans":[{"na\\u006de":"x"}]}]}]}`],
    [
      'invalid UTF-8',
      Buffer.concat([
        Buffer.from(request([span('[{"key":"k","value":{"stringValue":"')])),
        Buffer.from([0xc3, 0x28]),
        Buffer.from('"}}]'),
      ]),
    ],
    ['int64 number beyond 2^53', request([`{"traceId":"${TRACE}","startTimeUnixNano":1700000000000000001}`])],
    ['an array at the top', '[]'],
    ['null at the top', 'null'],
    ['a span that is not an object', request(['"span"'])],
    ['a null span', request(['null'])],
    ['a list that is not an array', '{"resourceSpans":{}}'],
    ['a name of the wrong type', request(['{"name":5}'])],
    ['status not an object', request(['{"status":"ok"}'])],
    ['events not objects', request(['{"events":[1]}'])],
    ['whitespace only', ' '],
  ];
  for (const [label, body] of declined) assertDeclined(body, label);
  const big = assertDeclined(declined[6]![1], 'big') as Mapped;
  assert.equal(big.tables.spans![0]!.start_time_unix_nano, 1700000000000000001n);
});

test('every rule of JSON holds in skipped values as in read ones', () => {
  const invalid = [
    '{"a":1,}',
    '[1,]',
    '[,1]',
    '{,}',
    '{"a" 1}',
    '{"a":1 "b":2}',
    '{1:2}',
    "{'a':1}",
    '01',
    '-',
    '1.',
    '.5',
    '1e',
    '1e+',
    '+1',
    '0x10',
    'tru',
    'nul',
    'True',
    'NaN',
    '"bad \\x escape"',
    '"bad \\u12 escape"',
    '"raw \t tab"',
    '"unterminated',
    '[1',
    '{"a":[}]',
  ];
  for (const value of invalid) {
    for (const [where, body] of [
      ['unknown span field', request([`{"traceId":"${TRACE}","unknown":${value}}`])],
      ['unknown top-level field', `{"x":${value},"resourceSpans":[]}`],
      ['read field', request([`{"name":${value}}`])],
      ['attribute value', request([span(`[{"key":"k","value":{"stringValue":${value}}}]`)])],
    ]) {
      const label = `${value} in ${where}`;
      assertSame(body!, label);
      assert.ok('error' in viaService(Buffer.from(body!)), `${label} is refused`);
    }
  }
  const valid = [
    '{"a":[1,{"b":[]}],"c":{}}',
    '-0.5e-3',
    '1E9',
    '0',
    '"\\u00e9\\n"',
    'true',
    'null',
    '[[[]]]',
  ];
  for (const value of valid) assertFast(request([`{"traceId":"${TRACE}","unknown":${value}}`]), value);
});

/** A small deterministic generator for the mutation test. */
function random(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    return s / 2 ** 32;
  };
}

test('invalid JSON is refused with the words of the tree, at every truncation and after random edits', () => {
  const body = Buffer.from(
    request(
      [
        span(
          '[{"key":"http.route","value":{"stringValue":"/a/{id}"}},{"key":"n","value":{"intValue":"443"}},{"key":"d","value":{"doubleValue":1.5}}]',
          ',"kind":2,"status":{"code":1},"events":[{"timeUnixNano":"1700000000000000050","name":"e"}],' +
            `"links":[{"traceId":"${TRACE}","spanId":"${SPAN}"}]`,
        ),
      ],
      '{"attributes":[{"key":"service.name","value":{"stringValue":"svc"}}]}',
      '{"name":"lib","version":"1"}',
    ),
  );
  assert.ok(assertFast(body, 'the body itself').items === 1);
  for (let n = 0; n < body.length; n++) {
    const cut = body.subarray(0, n);
    assertSame(cut, `cut at ${n}`);
    if (n > 0) assert.ok('error' in viaService(cut), `cut at ${n} is refused`);
  }
  const next = random(7);
  const bytes = [...'"\\{}[],: 0a\ne-.9ftn'].map((c) => c.charCodeAt(0)).concat([0x01, 0xff, 0x80]);
  let taken = 0;
  let refused = 0;
  for (let i = 0; i < 3000; i++) {
    const at = Math.floor(next() * body.length);
    const edit = Math.floor(next() * 3);
    const b = bytes[Math.floor(next() * bytes.length)]!;
    const mutated =
      edit === 0
        ? Buffer.concat([body.subarray(0, at), Buffer.from([b]), body.subarray(at + 1)])
        : edit === 1
          ? Buffer.concat([body.subarray(0, at), Buffer.from([b]), body.subarray(at)])
          : Buffer.concat([body.subarray(0, at), body.subarray(at + 1)]);
    if (assertSame(mutated, `edit ${i}: ${edit} at ${at} with ${b}`)) taken++;
    else if ('error' in viaTree(mutated)) refused++;
  }
  // Both kinds of outcome were met: the comparison above was not vacuous.
  assert.ok(taken > 300, `the fast path took ${taken} edited bodies`);
  assert.ok(refused > 300, `the tree refused ${refused} edited bodies`);
});

test('a double attribute is written as JSON.stringify writes the parsed value, for any literal', () => {
  const next = random(11);
  const literals: string[] = [];
  for (let i = 0; i < 3000; i++) {
    const x = next();
    const v = [x * 1e6, -x, x / 1e5, x * 10 ** Math.floor(next() * 30 - 12), Math.round(x * 1e4) / 100][
      i % 5
    ]!;
    literals.push(String(v), v.toFixed(Math.floor(next() * 8)), v.toPrecision(1 + Math.floor(next() * 17)));
  }
  const kv = (v: string, i: number) => `{"key":"d${i}","value":{"doubleValue":${v}}}`;
  for (let at = 0; at < literals.length; at += 300) {
    const list = literals.slice(at, at + 300).map(kv);
    const m = assertFast(request([span(`[${list.join(',')}]`)]), `literals from ${literals[at]}`);
    const parsed = JSON.parse(m.tables.spans![0]!.attributes as string) as Record<string, number>;
    assert.equal(Object.keys(parsed).length, list.length);
  }
});
