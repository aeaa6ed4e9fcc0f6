import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import { loadProtobuf, type Signal } from '../../src/otlp/index.ts';
import type { Mapped } from '../../src/otlp/tree.ts';
import { FIXTURE_LOG_ATTRIBUTES, jsonToProtobuf, mapJsonText, mapProtobuf, normalized } from './helpers.ts';

const fixture = (name: string) => readFileSync(new URL(`../fixtures/otlp/${name}.json`, import.meta.url));

function mapJson(signal: Signal, name: string, headerProjectId?: string): Mapped {
  return mapJsonText(signal, fixture(name).toString(), headerProjectId);
}

const RESOURCE = '{"service.name":"my.service"}';
const SCOPE_ATTRS = '{"my.scope.attribute":"some scope attribute"}';

function assertScope(row: Record<string, unknown>) {
  assert.equal(row.project_id, 'default-project');
  assert.equal(row.service_name, 'my.service');
  assert.equal(row.resource_attributes, RESOURCE);
  assert.equal(row.resource_dropped_attributes_count, 0);
  assert.equal(row.resource_schema_url, null);
  assert.equal(row.scope_name, 'my.library');
  assert.equal(row.scope_version, '1.0.0');
  assert.equal(row.scope_attributes, SCOPE_ATTRS);
  assert.equal(row.scope_dropped_attributes_count, 0);
  assert.equal(row.scope_schema_url, null);
}

test('trace.json maps to one span row', () => {
  const m = mapJson('traces', 'trace');
  assert.equal(m.items, 1);
  assert.equal(m.invalidIds, 0);
  assert.deepEqual(Object.keys(m.tables), ['spans']);
  const span = m.tables.spans![0]!;
  assertScope(span);
  assert.equal(span.trace_id, '5b8efff798038103d269b633813fc60c');
  assert.equal(span.span_id, 'eee19b7ec3c1b174');
  assert.equal(span.parent_span_id, 'eee19b7ec3c1b173');
  assert.equal(span.name, "I'm a server span");
  assert.equal(span.kind, 2);
  assert.equal(span.start_time_unix_nano, 1544712660000000000n);
  assert.equal(span.end_time_unix_nano, 1544712661000000000n);
  assert.equal(normalized('spans', span).duration_ns, 1000000000n);
  assert.equal(span.event_ts, 1544712660000000n);
  assert.equal(span.attributes, '{"my.span.attr":"some value"}');
  assert.equal(span.status_code, 0);
  assert.equal(span.status_message, null);
  assert.equal(span.flags, 0n);
  assert.equal(span.events_count, 0);
  assert.equal(span.links_count, 0);
});

test('logs.json maps attributes of every AnyValue type', () => {
  const m = mapJson('logs', 'logs', 'from-header');
  assert.equal(m.items, 1);
  const log = m.tables.logs![0]!;
  assert.equal(log.project_id, 'from-header');
  assert.equal(log.time_unix_nano, 1544712660300000000n);
  assert.equal(log.observed_time_unix_nano, 1544712660300000000n);
  assert.equal(log.event_ts, null, 'derived by the normalizer');
  assert.equal(normalized('logs', log).event_ts, 1544712660300000n);
  assert.equal(log.severity_number, 10);
  assert.equal(log.severity_text, 'Information');
  assert.equal(log.body, 'Example log record');
  assert.equal(log.trace_id, '5b8efff798038103d269b633813fc60c');
  assert.equal(log.span_id, 'eee19b7ec3c1b174');
  assert.deepEqual(JSON.parse(log.attributes as string), FIXTURE_LOG_ATTRIBUTES);
});

test('events.json: event name and a kvlist body as JSON', () => {
  const log = mapJson('logs', 'events').tables.logs![0]!;
  assertScope(log);
  assert.equal(log.event_name, 'browser.page_view');
  assert.equal(log.severity_number, 9);
  assert.equal(log.severity_text, 'test severity text');
  assert.equal(log.trace_id, null);
  assert.equal(log.span_id, null);
  assert.equal(log.attributes, '{"event.attribute":"some event attribute"}');
  assert.deepEqual(JSON.parse(log.body as string), {
    type: 0,
    url: 'https://www.guidgenerator.com/online-guid-generator.aspx',
    referrer: 'https://wwww.google.com',
    title: 'Free Online GUID Generator',
  });
});

test('metrics.json: sum, gauge, histogram and exponential histogram', () => {
  const m = mapJson('metrics', 'metrics');
  assert.equal(m.items, 4);
  const [sum, gauge] = m.tables.metrics_points!;
  const [hist, exp] = m.tables.metrics_hist!;
  for (const row of [sum!, gauge!, hist!, exp!]) {
    assertScope(row);
    assert.equal(row.time_unix_nano, 1544712660300000000n);
    assert.equal(row.event_ts, 1544712660300000n);
    assert.equal(row.unit, '1');
    assert.equal(row.metric_metadata, '{}');
    assert.equal(row.exemplars, null);
    assert.equal(row.flags, 0n);
  }
  assert.equal(sum!.metric_name, 'my.counter');
  assert.equal(sum!.description, 'I am a Counter');
  assert.equal(sum!.metric_type, 'sum');
  assert.equal(sum!.aggregation_temporality, 1);
  assert.equal(sum!.is_monotonic, true);
  assert.equal(sum!.value_double, 5);
  assert.equal(sum!.value_int, null);
  assert.equal(sum!.start_time_unix_nano, 1544712660300000000n);
  assert.equal(sum!.attributes, '{"my.counter.attr":"some value"}');

  assert.equal(gauge!.metric_name, 'my.gauge');
  assert.equal(gauge!.metric_type, 'gauge');
  assert.equal(gauge!.aggregation_temporality, null);
  assert.equal(gauge!.is_monotonic, null);
  assert.equal(gauge!.value_double, 10);
  assert.equal(gauge!.start_time_unix_nano, 0n);
  assert.equal(gauge!.attributes, '{"my.gauge.attr":"some value"}');

  assert.equal(hist!.metric_name, 'my.histogram');
  assert.equal(hist!.metric_type, 'histogram');
  assert.equal(hist!.aggregation_temporality, 1);
  assert.equal(hist!.count, 2n);
  assert.equal(hist!.sum, 2);
  assert.equal(hist!.min, 0);
  assert.equal(hist!.max, 2);
  assert.deepEqual(hist!.bucket_counts, [1n, 1n]);
  assert.deepEqual(hist!.explicit_bounds, [1]);
  assert.equal(hist!.scale, null);
  assert.equal(hist!.quantiles, null);
  assert.equal(hist!.attributes, '{"my.histogram.attr":"some value"}');

  assert.equal(exp!.metric_name, 'my.exponential.histogram');
  assert.equal(exp!.metric_type, 'exponential_histogram');
  assert.equal(exp!.count, 3n);
  assert.equal(exp!.sum, 10);
  assert.equal(exp!.min, 0);
  assert.equal(exp!.max, 5);
  assert.equal(exp!.scale, 0);
  assert.equal(exp!.zero_count, 1n);
  assert.equal(exp!.zero_threshold, 0);
  assert.equal(exp!.positive_offset, 1);
  assert.deepEqual(exp!.positive_bucket_counts, [0n, 2n]);
  assert.equal(exp!.negative_offset, null);
  assert.equal(exp!.negative_bucket_counts, null);
  assert.equal(exp!.bucket_counts, null);
  assert.equal(exp!.explicit_bounds, null);
});

test('every fixture round-tripped through protobuf maps to identical rows', async () => {
  const codec = await loadProtobuf();
  assert.ok(codec, 'protobufjs is installed as an optional dependency');
  const cases: [Signal, string][] = [
    ['traces', 'trace'],
    ['logs', 'logs'],
    ['logs', 'events'],
    ['metrics', 'metrics'],
  ];
  for (const [signal, name] of cases) {
    const fromJson = mapJson(signal, name);
    const bytes = jsonToProtobuf(signal, JSON.parse(fixture(name).toString()), codec);
    const fromProto = mapProtobuf(signal, bytes, codec);
    assert.deepEqual(fromProto, fromJson, name);
  }
});

test('protobuf: a oneof member decoded later wins over an earlier one', async () => {
  const codec = (await loadProtobuf())!;
  const field = (n: number, bytes: number[]) => [(n << 3) | 2, bytes.length, ...bytes];
  const time = [0x09, 1, 0, 0, 0, 0, 0, 0, 0]; // time_unix_nano (fixed64) = 1
  const stringA = [0x0a, 0x01, 0x61]; // AnyValue.string_value = "a"
  const int5 = [0x18, 0x05]; // AnyValue.int_value = 5
  const bodyOf = (anyValue: number[]) => {
    const record = [...time, ...field(5, anyValue)]; // LogRecord.body
    const request = field(1, field(2, field(2, record))); // resource_logs / scope_logs / log_records
    return mapProtobuf('logs', Uint8Array.from(request), codec).tables.logs![0]!['body'];
  };
  assert.equal(bodyOf([...stringA, ...int5]), '5');
  assert.equal(bodyOf([...int5, ...stringA]), 'a');
  assert.equal(bodyOf([...stringA, ...stringA]), 'a');
});
