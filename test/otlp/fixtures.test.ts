import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import { decodeRequest, type Mapped, mapRequest, type Signal } from '../../src/otlp/index.ts';

const fixture = (name: string) => readFileSync(new URL(`../fixtures/otlp/${name}.json`, import.meta.url));

function mapJson(signal: Signal, name: string, headerProjectId?: string): Mapped {
  const req = decodeRequest(signal, fixture(name), 'json', null);
  return mapRequest(signal, req, { defaultProjectId: 'default-project', headerProjectId });
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
  assert.equal(span.duration_ns, 1000000000n);
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
  assert.equal(log.event_ts, 1544712660300000n);
  assert.equal(log.severity_number, 10);
  assert.equal(log.severity_text, 'Information');
  assert.equal(log.body, 'Example log record');
  assert.equal(log.trace_id, '5b8efff798038103d269b633813fc60c');
  assert.equal(log.span_id, 'eee19b7ec3c1b174');
  assert.deepEqual(JSON.parse(log.attributes as string), {
    'string.attribute': 'some string',
    'boolean.attribute': true,
    'int.attribute': 10,
    'double.attribute': 637.704,
    'array.attribute': ['many', 'values'],
    'map.attribute': { 'some.map.key': 'some value' },
  });
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
