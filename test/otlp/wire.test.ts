// Protobuf bodies are mapped straight from their bytes (src/otlp/protobuf-reader.ts). These tests
// hold that mapping to the reference: protobufjs' message tree mapped by tree.ts, for the same bytes.

import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import { logsRequest, metricsRequest, tracesRequest } from '../../bench/otlp-payloads.ts';
import { loadProtobuf, OtlpDecodeError, type ProtoCodec, type Signal } from '../../src/otlp/index.ts';
import { type Mapped, mapTree } from '../../src/otlp/tree.ts';
import { RefusedProject } from '../../src/schema/project.ts';
import { CTX, jsonToProtobuf, mapBody, mapJson } from './helpers.ts';

const codec = (await loadProtobuf()) as ProtoCodec;

/** The reference: protobufjs decodes the body into a message tree, which tree.ts maps. */
function viaTree(bytes: Uint8Array, headerProjectId?: string, signal: Signal = 'traces'): Mapped {
  return mapTree(signal, codec.decodeRequest(signal, bytes), { ...CTX, headerProjectId });
}

/** The body read by the protobuf reader, as the server reads it. */
function wired(signal: Signal, bytes: Uint8Array, headerProjectId?: string): Mapped {
  const { route, ...mapped } = mapBody(signal, 'protobuf', bytes, headerProjectId);
  assert.equal(route, 'reader');
  return mapped;
}

function outcome(f: () => Mapped): Mapped | { error: string } {
  try {
    return f();
  } catch (err) {
    assert.ok(err instanceof OtlpDecodeError, `only OtlpDecodeError is thrown, got ${err}`);
    return { error: 'refused' };
  }
}

/** Both routes give the same rows, or both refuse the body. */
function assertSame(
  bytes: Uint8Array,
  label: string,
  headerProjectId?: string,
  signal: Signal = 'traces',
): Mapped | { error: string } {
  const direct = outcome(() => wired(signal, bytes, headerProjectId));
  const tree = outcome(() => viaTree(bytes, headerProjectId, signal));
  assert.deepEqual(direct, tree, label);
  return direct;
}

const example = (name: string) =>
  JSON.parse(readFileSync(new URL(`../fixtures/otlp/${name}.json`, import.meta.url), 'utf8'));

// --- a small protobuf writer for bodies protobufjs would not write (field order, unknowns) ------

type Bytes = number[];
function varint(v: number | bigint): Bytes {
  let x = BigInt.asUintN(64, BigInt(v));
  const out: Bytes = [];
  while (x >= 0x80n) {
    out.push(Number(x & 0x7fn) | 0x80);
    x >>= 7n;
  }
  out.push(Number(x));
  return out;
}
const len = (field: number, payload: Bytes): Bytes => [
  ...varint((field << 3) | 2),
  ...varint(payload.length),
  ...payload,
];
const num = (field: number, v: number | bigint): Bytes => [...varint(field << 3), ...varint(v)];
const fixed64 = (field: number, v: bigint): Bytes => {
  const b = Buffer.alloc(8);
  b.writeBigUInt64LE(BigInt.asUintN(64, v));
  return [...varint((field << 3) | 1), ...b];
};
const f64 = (field: number, v: number): Bytes => {
  const b = Buffer.alloc(8);
  b.writeDoubleLE(v);
  return [...varint((field << 3) | 1), ...b];
};
const fixed32 = (field: number, v: number): Bytes => {
  const b = Buffer.alloc(4);
  b.writeUInt32LE(v);
  return [...varint((field << 3) | 5), ...b];
};
const text = (field: number, s: string | Buffer): Bytes => len(field, [...Buffer.from(s)]);
const kv = (key: string | Buffer, value?: Bytes): Bytes => [...text(1, key), ...(value ? len(2, value) : [])];
const sv = (s: string | Buffer): Bytes => text(1, s);
const iv = (v: number | bigint): Bytes => num(3, v);
/** A request of one resource, one scope, the given spans. */
const request = (spans: Bytes[], resource: Bytes = [], scope: Bytes = []): Uint8Array =>
  Uint8Array.from(
    len(1, [...len(1, resource), ...len(2, [...len(1, scope), ...spans.flatMap((s) => len(2, s))])]),
  );
const ids = [...text(1, Buffer.alloc(16, 0xab)), ...text(2, Buffer.alloc(8, 0xcd))];

test('protobuf traces map straight from the bytes to the rows of the message tree', () => {
  for (let seed = 1; seed <= 5; seed++) {
    const bytes = jsonToProtobuf('traces', tracesRequest(100, seed), codec);
    const m = assertSame(bytes, `benchmark request ${seed}`) as Mapped;
    assert.equal(m.items, 100);
  }
  const trace = jsonToProtobuf('traces', example('trace'), codec);
  assertSame(trace, 'official trace.json example');
  assertSame(trace, 'with X-Project-Id', 'from-header');
  assertSame(new Uint8Array(0), 'empty body');
});

test('attribute values of every kind are written as the JSON of the message tree', () => {
  const cases: [string, Bytes[]][] = [
    ['strings', [kv('a', sv('plain')), kv('b', sv('')), kv('c', sv('ünïcødé ✓ 😀'))]],
    ['escapes', [kv('q"k', sv('say "hi"\\ \n\t\r\b\f \u0001 \u001f end')), kv('\u2028', sv('\u2028'))]],
    // Strings are copied four bytes at a time until a byte needs a look: one at every position (the
    // last of a key, amid a value), and the bytes next to those that do (space, '!', '#', '[', ']',
    // DEL), which need none.
    ...['"', '\\', '\n', '\u0001', '\u001f', 'é', '😀', ' ', '!', '#', '[', ']', '\u007f'].map(
      (c): [string, Bytes[]] => [
        `${JSON.stringify(c)} at every position`,
        Array.from({ length: 14 }, (_, at) => {
          const s = `${'abcdefghijklm'.slice(0, at)}${c}${'nopqrstuvwxyz'.slice(at)}`;
          return kv(s.slice(0, at + c.length), sv(s));
        }),
      ],
    ),
    // Longer than the buffer texts are written into (64 KiB), which then grows.
    ['a long value', [kv('a', sv('b')), kv('long', sv(`${'x'.repeat(100_000)}é"`)), kv('c', sv('after it'))]],
    [
      'ints',
      [0, 1, -1, 2 ** 53 - 1, 2 ** 53, 2 ** 53 + 1, -(2 ** 53), -(2n ** 63n), 2n ** 63n - 1n].map((v, i) =>
        kv(`i${i}`, iv(v)),
      ),
    ],
    [
      'doubles',
      [0, -0, 1.5, -2.25e-300, 1e21, Number.NaN, Infinity, -Infinity, 2 ** 60].map((v, i) =>
        kv(`d${i}`, f64(4, v)),
      ),
    ],
    ['bools', [kv('t', num(2, 1)), kv('f', num(2, 0)), kv('big', num(2, 2n ** 40n))]],
    ['bytes', [kv('e', text(7, Buffer.alloc(0))), kv('x', text(7, Buffer.from([0, 255, 1, 2, 3])))]],
    ['no value', [kv('none'), kv('empty', []), text(2, '')]],
    ['no key', [len(2, sv('v'))]],
    [
      'arrays',
      [kv('arr', len(5, [...len(1, sv('a')), ...len(1, []), ...len(1, iv(3)), ...len(1, len(5, []))]))],
    ],
    [
      'kvlist',
      [kv('map', len(6, [...len(1, kv('x', sv('y'))), ...len(1, kv('n', len(6, len(1, kv('z', iv(1))))))]))],
    ],
    [
      'last member wins',
      [
        kv('a', [...sv('s'), ...iv(5)]),
        kv('b', [...iv(5), ...sv('s')]),
        kv('c', [...f64(4, 1), ...num(2, 1)]),
      ],
    ],
    ['repeated key', [kv('k', sv('first')), kv('other', iv(1)), kv('k', sv('last'))]],
    ['integer-like keys', [kv('b', iv(1)), kv('10', iv(2)), kv('2', iv(3)), kv('007', iv(4))]],
    [
      'repeated key in a nested map',
      [kv('m', len(6, [...len(1, kv('x', iv(1))), ...len(1, kv('x', iv(2)))]))],
    ],
    ['__proto__ key', [kv('__proto__', sv('p')), kv('constructor', iv(1))]],
    // Past the first keys an object's keys are looked up in a Set: repeats are found there too.
    ['300 keys', Array.from({ length: 300 }, (_, i) => kv(`k${i}`, iv(i)))],
    ['300 keys, one repeated', Array.from({ length: 300 }, (_, i) => kv(`k${i % 299}`, iv(i)))],
    [
      '300 keys, the last repeating the 101st',
      Array.from({ length: 300 }, (_, i) => kv(`k${i === 299 ? 100 : i}`, iv(i))),
    ],
    [
      'a map of 300 keys',
      [kv('m', len(6, Array.from({ length: 300 }, (_, i) => len(1, kv(`x${i % 250}`, iv(i)))).flat()))],
    ],
    [
      // Each object has its own keys: the map's are no repeats of the list's, nor the list's after it of the map's.
      'a map in a long list, with the keys of the list',
      Array.from({ length: 40 }, (_, i) =>
        i === 35
          ? kv('m', len(6, Array.from({ length: 40 }, (_, k) => len(1, kv(`k${k}`, iv(k)))).flat()))
          : kv(`k${i}`, iv(i)),
      ),
    ],
    [
      'unknown fields',
      [
        [...num(9, 1), ...kv('k', [...sv('v'), ...num(15, 3), ...fixed32(16, 1)])],
        kv('u', [...text(8, 'unknown'), ...iv(2)]),
      ],
    ],
  ];
  for (const [label, attributes] of cases) {
    const span = [...ids, ...attributes.flatMap((a) => len(9, a))];
    const m = assertSame(request([span]), label) as Mapped;
    assert.equal(m.items, 1, label);
    assert.equal(typeof JSON.parse(m.tables.spans![0]!.attributes as string), 'object', label);
  }
  // A KeyValue list split over several occurrences of the field is one object.
  const split = [...ids, ...len(9, kv('a', iv(1))), ...num(6, 2), ...len(9, kv('b', iv(2)))];
  const m = assertSame(request([split]), 'attributes in two runs') as Mapped;
  assert.equal(m.tables.spans![0]!.attributes, '{"a":1,"b":2}');
});

test('fields in any order, repeated, unknown or of the wrong wire type map as in the tree', () => {
  const event = [
    ...text(2, 'ev'),
    ...fixed64(1, 1_700_000_000_000_000_001n),
    ...len(3, kv('e', iv(1))),
    ...num(4, 3),
  ];
  const link = [
    ...fixed32(6, 0x101),
    ...text(3, 'ts=1'),
    ...text(2, Buffer.alloc(8, 1)),
    ...text(1, Buffer.alloc(16, 2)),
    ...num(5, 1),
  ];
  const span = [
    ...fixed32(16, 0x301),
    ...len(11, event),
    ...len(13, link),
    ...len(15, [...num(3, 2), ...text(2, 'boom'), ...num(1, 4)]),
    ...text(5, 'first name'),
    ...text(5, 'the name'),
    ...fixed64(8, 1_700_000_000_500_000_000n),
    ...fixed64(7, 1_700_000_000_000_000_000n),
    ...num(6, -1),
    ...ids,
    ...text(4, Buffer.alloc(8, 0)),
    ...num(10, 1),
    ...num(12, 2),
    ...num(14, 3),
    ...len(11, []),
    ...num(99, 5),
    ...text(100, 'unknown'),
    ...fixed64(2, 5n), // span_id with a wrong wire type: an unknown field
  ];
  const resource = [
    ...len(1, kv('service.name', sv('svc'))),
    ...num(2, 4),
    ...len(1, kv('project.id', sv('p1'))),
    ...num(7, 1),
  ];
  const scope = [
    ...text(2, 'v1'),
    ...len(3, kv('s', sv('x'))),
    ...text(1, 'lib'),
    ...num(4, 2),
    ...text(9, '?'),
  ];
  const body = Uint8Array.from(
    len(1, [
      ...text(3, 'https://schema/resource'),
      ...len(2, [...text(3, 'https://schema/scope'), ...len(2, span), ...len(1, scope), ...len(2, ids)]),
      ...len(1, resource),
      ...num(50, 1),
    ]),
  );
  const m = assertSame(body, 'shuffled') as Mapped;
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
  assert.equal(m.tables.span_links![0]!.linked_trace_id, '02'.repeat(16));
});

test('service.name and project.id: the last occurrence counts, and only a string value', () => {
  const cases: [string, Bytes][] = [
    ['last wins', [...len(1, kv('service.name', sv('a'))), ...len(1, kv('service.name', sv('b')))]],
    ['last is not a string', [...len(1, kv('service.name', sv('a'))), ...len(1, kv('service.name', iv(1)))]],
    ['empty', [...len(1, kv('service.name', sv(''))), ...len(1, kv('project.id', sv('')))]],
    ['project', [...len(1, kv('project.id', sv('proj-x')))]],
    ['no value', [...len(1, kv('service.name')), ...len(1, kv('project.id', []))]],
  ];
  const projects: string[] = [];
  for (const [label, resource] of cases) {
    const m = assertSame(request([ids], resource), label) as Mapped;
    const project = m.tables.spans![0]!['project_id'];
    projects.push(project instanceof RefusedProject ? 'refused' : (project as string));
    const h = assertSame(request([ids], resource), `${label}, with header`, 'hdr') as Mapped;
    assert.equal(h.tables.spans![0]!['project_id'], 'hdr', `${label}: the header wins over project.id`);
  }
  // An empty project.id, or one without a string value, refuses the resource's rows.
  assert.deepEqual(projects, [CTX.defaultProjectId, CTX.defaultProjectId, 'refused', 'proj-x', 'refused']);
});

test("project.id of the wrong type or invalid refuses its resource's rows alone, on both routes", () => {
  const cases: [string, Bytes, string][] = [
    ['int', [...len(1, kv('project.id', iv(7)))], '(not a string value)'],
    ['space', [...len(1, kv('project.id', sv('a b')))], '"a b"'],
    ['dot-dot', [...len(1, kv('project.id', sv('a..b')))], '"a..b"'],
    ['too long', [...len(1, kv('project.id', sv('p'.repeat(129))))], `"${'p'.repeat(129)}"`],
  ];
  const good = [...len(1, kv('project.id', sv('good')))];
  for (const [label, resource, shown] of cases) {
    // Two resources: the bad one between two good ones.
    const one = (r: Bytes) => len(1, [...len(1, r), ...len(2, [...len(2, ids), ...len(2, ids)])]);
    const body = Uint8Array.from([...one(good), ...one(resource), ...one(good)]);
    const m = assertSame(body, label) as Mapped;
    const projects = m.tables.spans!.map((row) => row['project_id']);
    assert.deepEqual(projects.slice(0, 2), ['good', 'good'], label);
    assert.deepEqual(projects.slice(4), ['good', 'good'], label);
    for (const p of projects.slice(2, 4)) {
      assert.ok(p instanceof RefusedProject, label);
      assert.equal(p.reason.startsWith(`invalid resource attribute project.id ${shown}: use `), true, label);
    }
  }
});

test('ids of the wrong length are null and counted; empty and all-zero ids are null', () => {
  const spans = [
    [...text(1, Buffer.alloc(15, 1)), ...text(2, Buffer.alloc(8, 1))],
    [...text(1, Buffer.alloc(16, 0)), ...text(2, Buffer.alloc(9, 1))],
    [...text(1, Buffer.alloc(0)), ...text(2, Buffer.alloc(0)), ...text(4, Buffer.alloc(0))],
    [...ids, ...text(4, Buffer.alloc(8, 0xff))],
  ];
  const m = assertSame(request(spans), 'ids') as Mapped;
  assert.equal(m.invalidIds, 2); // the 15-byte trace id and the 9-byte span id
  assert.equal(m.tables.spans![1]!['trace_id'], null); // all zero
});

test('invalid UTF-8 is stored as U+FFFD (where protobufjs refuses the body): the rows of the body with U+FFFD in its place', () => {
  const fffd = (bytes: number[], s: string) => [Buffer.from(bytes), Buffer.from(s)] as const;
  const cases: [string, (s: Buffer) => Bytes[]][] = [
    ['in a name', (s) => [[...ids, ...text(5, s)]]],
    ['in an attribute', (s) => [[...ids, ...len(9, kv('k', sv(s)))]]],
    ['in a key', (s) => [[...ids, ...len(9, kv(s, sv('v')))]]],
    ['in a nested key', (s) => [[...ids, ...len(9, kv('k', len(6, len(1, kv(s, sv('v'))))))]]],
    ['in an event name', (s) => [[...ids, ...len(11, text(2, s))]]],
  ];
  const strings = [
    fffd([0x61, 0xff, 0x62], 'a\uFFFDb'),
    fffd([0x22, 0xc3], '"\uFFFD'), // also escaped for JSON
    fffd([0xe2, 0x82, 0x61], '\uFFFDa'), // a cut three-byte sequence: one U+FFFD
    fffd([0xed, 0xa0, 0x80], '\uFFFD\uFFFD\uFFFD'), // a UTF-16 surrogate's bytes
  ];
  // Strings are read four bytes at a time: a bad byte anywhere in a longer one is found too.
  for (let at = 0; at < 9; at++) {
    const long = Buffer.from('abcdefghi');
    long[at] = 0xff;
    strings.push([long, Buffer.from(`${'abcdefghi'.slice(0, at)}\uFFFD${'abcdefghi'.slice(at + 1)}`)]);
  }
  for (const [label, spans] of cases) {
    for (const [bad, good] of strings) {
      const what = `${label}: ${bad.toString('hex')}`;
      assert.deepEqual(wired('traces', request(spans(bad))), viaTree(request(spans(good))), what);
    }
  }
  // Two keys that differ only in their bad bytes are one key once stored: the last value counts.
  const twice = [
    [
      ...ids,
      ...len(9, kv(Buffer.from([0x61, 0xff]), sv('x'))),
      ...len(9, kv(Buffer.from([0x61, 0xfe]), sv('y'))),
    ],
  ];
  const row = wired('traces', request(twice)).tables.spans![0]!;
  assert.equal(row['attributes'], JSON.stringify({ 'a\uFFFD': 'y' }));
});

test("dropped counts are uint32: one past int32's range is held at 2^31 - 1 on both routes, not refused", () => {
  for (const count of [2 ** 31 - 1, 2 ** 31, 2 ** 32 - 1]) {
    const span = [...ids, ...num(10, count), ...num(12, count), ...num(14, count)];
    const row = (assertSame(request([span], [...num(2, count)]), `${count}`) as Mapped).tables.spans![0]!;
    for (const column of ['dropped_attributes_count', 'dropped_events_count', 'dropped_links_count'])
      assert.equal(row[column], 2 ** 31 - 1, `${column} ${count}`);
    assert.equal(row['resource_dropped_attributes_count'], 2 ** 31 - 1);
    const json = mapJson('traces', {
      resourceSpans: [
        {
          resource: { droppedAttributesCount: count },
          scopeSpans: [
            {
              spans: [
                { traceId: 'ab'.repeat(16), spanId: 'cd'.repeat(8), droppedEventsCount: String(count) },
              ],
            },
          ],
        },
      ],
    });
    assert.equal(json.tables.spans![0]!['dropped_events_count'], 2 ** 31 - 1, `JSON ${count}`);
    assert.equal(json.tables.spans![0]!['resource_dropped_attributes_count'], 2 ** 31 - 1, `JSON ${count}`);
  }
});

test('refused: every truncation protobufjs refuses, deep groups, a group ended as another field', () => {
  const whole = jsonToProtobuf('traces', tracesRequest(3, 7), codec);
  let refused = 0;
  for (let cut = 0; cut < whole.length; cut++) {
    const r = assertSame(whole.subarray(0, cut), `cut at ${cut}`);
    if ('error' in r) refused++;
  }
  assert.ok(refused > whole.length / 2, `${refused} of ${whole.length} truncations refused`);
  for (const [label, span] of [
    ['wire type 7', [...ids, ...varint((20 << 3) | 7)]],
    [
      'a varint of 11 bytes',
      [...ids, ...num(6, 0), 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01],
    ],
  ] as [string, Bytes][]) {
    const r = outcome(() => wired('traces', request([span])));
    assert.deepEqual(r, { error: 'refused' }, label);
  }
  // Unknown groups are skipped, nested up to protoc's limit of 100.
  const groups = (levels: number): Bytes => [
    ...Array.from({ length: levels }, () => varint((30 << 3) | 3)).flat(),
    ...Array.from({ length: levels }, () => varint((30 << 3) | 4)).flat(),
  ];
  assert.equal(wired('traces', request([[...ids, ...groups(100)]])).items, 1);
  assert.deepEqual(
    outcome(() => wired('traces', request([[...ids, ...groups(101)]]))),
    { error: 'refused' },
  );
  // A group ends at its own field's end tag (protoc and upb refuse another; protobufjs does not
  // look), and an end tag with no group open is no field at all.
  const groupOf = (start: number, endField: number): Bytes => [
    ...varint((start << 3) | 3),
    ...num(1, 7),
    ...varint((endField << 3) | 4),
  ];
  assert.equal(wired('traces', request([[...ids, ...groupOf(30, 30)]])).items, 1);
  for (const [label, span] of [
    ['a group of field 30 ended as field 31', [...ids, ...groupOf(30, 31)]],
    ['a lone end tag', [...ids, ...varint((30 << 3) | 4)]],
  ] as [string, Bytes][])
    assert.deepEqual(
      outcome(() => wired('traces', request([span]))),
      { error: 'refused' },
      label,
    );
});

test('refused as protobuf parsers refuse them: a tag or a length beyond 32 bits, field number 0', () => {
  // ExportLogsServiceRequest { resource_logs { scope_logs { log_records { severity_number: 9 } } } },
  // with the record's length, or the request's first tag, written as given.
  const record = [0x10, 0x09];
  const body = (recordLength: number[], requestTag: number[] = [0x0a]): Uint8Array => {
    const scope = [0x12, ...recordLength, ...record];
    const resource = [0x12, scope.length, ...scope];
    return Uint8Array.from([...requestTag, resource.length, ...resource]);
  };
  assert.equal(wired('logs', body([2])).items, 1);
  // Five bytes that stay within 32 bits (a padded 2, a padded tag 1/LEN) are still read.
  assert.equal(wired('logs', body([0x82, 0x80, 0x80, 0x80, 0x00])).items, 1);
  assert.equal(wired('logs', body([2], [0x8a, 0x80, 0x80, 0x80, 0x00])).items, 1);
  for (const [label, bytes] of [
    // Low 32 bits 2: the length passed the bounds check as 2.
    ['a length of 2^32 + 2', body([0x82, 0x80, 0x80, 0x80, 0x10])],
    ['a length of 2^63', body([0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01])],
    // Low 32 bits 0x0a: read as resource_logs, it made a second resource's rows.
    ['a tag of 2^32 + 0x0a', body([2], [0x8a, 0x80, 0x80, 0x80, 0x10])],
    ['field number 0', body([2], [0x02])],
  ] as [string, Uint8Array][]) {
    assert.deepEqual(
      outcome(() => wired('logs', bytes)),
      { error: 'refused' },
      label,
    );
  }
});

test('AnyValues nest up to 64 levels, as in JSON requests; deeper ones are cut there', () => {
  // protobufjs stops at 100 nested messages (~47 AnyValue levels here), so JSON is the reference.
  const nested = (levels: number) => {
    let wire = sv('leaf');
    let json: unknown = { stringValue: 'leaf' };
    for (let i = 0; i < levels; i++) {
      wire = len(5, len(1, wire));
      json = { arrayValue: { values: [json] } };
    }
    const span = {
      traceId: 'ab'.repeat(16),
      spanId: 'cd'.repeat(8),
      attributes: [{ key: 'deep', value: json }],
    };
    return {
      wire: outcome(() => wired('traces', request([[...ids, ...len(9, kv('deep', wire))]]))),
      json: outcome(() => mapJson('traces', { resourceSpans: [{ scopeSpans: [{ spans: [span] }] }] })),
    };
  };
  const attributes = (m: ReturnType<typeof nested>['wire']) => (m as Mapped).tables.spans![0]!['attributes'];
  const ok = nested(64);
  assert.deepEqual(ok.wire, ok.json);
  assert.equal(attributes(ok.wire), `{"deep":${'['.repeat(64)}"leaf"${']'.repeat(64)}}`);
  // The array at depth 64 keeps its element, as null: the value is cut, the span kept.
  for (const levels of [65, 66, 500]) {
    const cut = nested(levels);
    assert.deepEqual(cut.wire, cut.json, `${levels} levels`);
    assert.equal(attributes(cut.wire), `{"deep":${'['.repeat(65)}null${']'.repeat(65)}}`, `${levels} levels`);
  }
});

test('corrupted bodies are refused with OtlpDecodeError or mapped, never anything else', () => {
  const whole = Buffer.from(jsonToProtobuf('traces', tracesRequest(5, 3), codec));
  let seed = 12345;
  const random = () => {
    seed = (seed * 1103515245 + 12345) & 0x7fffffff;
    return seed;
  };
  for (let i = 0; i < 2000; i++) {
    const bytes = Buffer.from(whole);
    for (let k = 0; k < 3; k++) bytes[random() % bytes.length] = random() & 0xff;
    outcome(() => wired('traces', bytes));
  }
});

test('a field of the wrong wire type is skipped as unknown, as protobuf specifies', () => {
  // protobufjs reads such a field by its number regardless of the wire type: no reference here.
  const attributes = [kv('k', [...num(1, 7), ...sv('ok')]), kv('w', fixed32(3, 5)), kv('n', num(4, 1))];
  const span = [...ids, ...fixed64(5, 1n), ...text(6, 'x'), ...attributes.flatMap((a) => len(9, a))];
  const row = wired('traces', request([span])).tables.spans![0]!;
  assert.equal(row.attributes, '{"k":"ok","w":null,"n":null}');
  assert.equal(row.name, null);
  assert.equal(row.kind, 0);
});

test('the protobuf body of every signal is read by the protobuf reader, metrics too', () => {
  const bytes = jsonToProtobuf('traces', tracesRequest(2, 1), codec);
  assert.deepEqual(wired('traces', bytes), viaTree(bytes));
  const logBytes = jsonToProtobuf('logs', logsRequest(2, 1), codec);
  assert.deepEqual(wired('logs', logBytes), viaTree(logBytes, undefined, 'logs'));
  const metricBytes = jsonToProtobuf('metrics', metricsRequest(20, 1), codec);
  const metrics = wired('metrics', metricBytes);
  assert.deepEqual(metrics, viaTree(metricBytes, undefined, 'metrics'));
  assert.equal(metrics.items, 20);
});

// --- logs ----------------------------------------------------------------------------------------

/** A logs request of one resource, one scope, the given log records. */
const logRequest = (records: Bytes[], resource: Bytes = []): Uint8Array =>
  Uint8Array.from(
    len(1, [
      ...len(1, resource),
      ...len(2, [...len(1, text(1, 'scope')), ...records.flatMap((r) => len(2, r))]),
    ]),
  );

test('protobuf logs map straight from the bytes to the rows of the message tree', () => {
  for (let seed = 1; seed <= 5; seed++) {
    const bytes = jsonToProtobuf('logs', logsRequest(100, seed), codec);
    const m = assertSame(bytes, `benchmark request ${seed}`, undefined, 'logs') as Mapped;
    assert.equal(m.items, 100);
  }
  for (const name of ['logs', 'events']) {
    const bytes = jsonToProtobuf('logs', example(name), codec);
    assertSame(bytes, `official ${name}.json example`, undefined, 'logs');
    assertSame(bytes, `${name}.json with X-Project-Id`, 'from-header', 'logs');
  }
  assertSame(new Uint8Array(0), 'empty body', undefined, 'logs');
});

test('log bodies and fields of every kind, in any order, map as in the tree', () => {
  const bodies: [string, Bytes | null][] = [
    ['absent', null],
    ['no value', []],
    ['string', sv('hello "world"')],
    ['empty string', sv('')],
    ['int', iv(-42)],
    ['big int', iv(2n ** 62n)],
    ['double NaN', f64(4, Number.NaN)],
    ['bool', num(2, 1)],
    ['bytes', text(7, Buffer.from([1, 2, 250]))],
    ['array', len(5, [...len(1, sv('a')), ...len(1, iv(1)), ...len(1, [])])],
    ['map', len(6, [...len(1, kv('k', sv('v'))), ...len(1, kv('n', f64(4, 1.25)))])],
    ['map with a repeated key', len(6, [...len(1, kv('k', sv('first'))), ...len(1, kv('k', sv('last')))])],
    ['map with integer-like keys', len(6, [...len(1, kv('b', iv(1))), ...len(1, kv('1', iv(2)))])],
    ['last member wins', [...iv(1), ...sv('s')]],
  ];
  const records = bodies.map(([, body], i) => [
    ...(body === null ? [] : len(5, body)),
    ...text(12, 'event.name'),
    ...len(6, kv('i', iv(i))),
    ...num(99, 1),
    ...text(10, Buffer.alloc(8, 0x11)),
    ...fixed64(11, 1_700_000_000_000_000_000n + BigInt(i)),
    ...fixed32(8, 1),
    ...text(3, 'WARN'),
    ...num(2, 13),
    ...text(9, Buffer.alloc(16, 0x22)),
    ...num(7, 2),
    ...fixed64(1, BigInt(i)),
    ...len(6, kv('j', sv('x'))),
  ]);
  const resource = [...len(1, kv('service.name', sv('svc'))), ...len(1, kv('project.id', sv('p')))];
  const m = assertSame(logRequest(records, resource), 'bodies', undefined, 'logs') as Mapped;
  assert.equal(m.items, bodies.length);
  const rows = m.tables.logs!;
  assert.equal(rows[0]!.body, null);
  assert.equal(rows[2]!.body, 'hello "world"');
  assert.equal(rows[12]!.body, '{"1":2,"b":1}');
  assert.equal(rows[0]!.attributes, '{"i":0,"j":"x"}');
  assert.equal(rows[0]!.service_name, 'svc');
  assert.equal(rows[0]!.severity_text, 'WARN');
  // An all-zero id (none) and a wrong one (counted); a truncated record; bad UTF-8 in a body.
  const ids = [...text(9, Buffer.alloc(16, 0)), ...text(10, Buffer.alloc(7, 1))];
  assert.equal((assertSame(logRequest([ids]), 'ids', undefined, 'logs') as Mapped).invalidIds, 1);
  const whole = jsonToProtobuf('logs', logsRequest(2, 9), codec);
  for (let cut = 0; cut < whole.length; cut++)
    assertSame(whole.subarray(0, cut), `cut at ${cut}`, undefined, 'logs');
  const bad = logRequest([len(5, sv(Buffer.from([0x61, 0xff])))]);
  const good = logRequest([len(5, sv('a\uFFFD'))]);
  assert.deepEqual(wired('logs', bad), viaTree(good, undefined, 'logs'));
  assert.equal(wired('logs', bad).tables.logs![0]!.body, 'a\uFFFD');
});
