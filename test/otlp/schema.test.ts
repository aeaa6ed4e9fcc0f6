import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import { logsRequest, tracesRequest } from '../../bench/otlp-payloads.ts';
import { loadProtobuf, type Signal } from '../../src/otlp/index.ts';
import { SCHEMAS, type TableName } from '../../src/schema/tables.ts';
import { normalizeRow, type ValidationSettings } from '../../src/schema/validate.ts';
import { jsonToProtobuf, mapJsonText, mapProtobuf } from './helpers.ts';

const STRICT: ValidationSettings = {
  validateRequired: true,
  validateTypes: true,
  normalizeServiceName: false,
  defaultServiceName: 'unknown',
  strictColumns: true,
};

const fixture = (name: string) =>
  readFileSync(new URL(`../fixtures/otlp/${name}.json`, import.meta.url), 'utf8');

const CASES: [Signal, string][] = [
  ['traces', fixture('trace')],
  ['logs', fixture('logs')],
  ['logs', fixture('events')],
  ['metrics', fixture('metrics')],
  ['traces', JSON.stringify(tracesRequest(30))],
  ['logs', JSON.stringify(logsRequest(30))],
  [
    'traces',
    JSON.stringify({
      resourceSpans: [
        {
          scopeSpans: [
            {
              spans: [
                {
                  traceId: '0af7651916cd43dd8448eb211c80319c',
                  spanId: 'b7ad6b7169203331',
                  startTimeUnixNano: '1700000000000000000',
                  links: [
                    { traceId: '5b8efff798038103d269b633813fc60c', spanId: 'eee19b7ec3c1b174', flags: 1 },
                  ],
                },
              ],
            },
          ],
        },
      ],
    }),
  ],
];

test('mapped rows carry exactly the schema columns, in order, and pass strict validation unchanged', async () => {
  const codec = (await loadProtobuf())!;
  const seen = new Set<TableName>();
  for (const [signal, json] of CASES) {
    const fromJson = mapJsonText(signal, json);
    const fromProto = mapProtobuf(signal, jsonToProtobuf(signal, JSON.parse(json), codec), codec);
    for (const mapped of [fromJson, fromProto]) {
      for (const [table, rows] of Object.entries(mapped.tables) as [TableName, Record<string, unknown>[]][]) {
        seen.add(table);
        const names = SCHEMAS[table].columns.map((c) => c.name);
        for (const row of rows) {
          assert.deepEqual(Object.keys(row), names, table);
          const result = normalizeRow(SCHEMAS[table], row, STRICT);
          assert.ok(result.ok, `${table}: ${result.ok ? '' : result.reason}`);
          for (const name of names) {
            if (name === 'service_name') continue;
            // A log's event_ts and a span's duration are derived there (values.test.ts covers them).
            if (table === 'logs' && name === 'event_ts') continue;
            if (table === 'spans' && name === 'duration_ns') continue;
            assert.deepEqual(result.row[name], row[name], `${table}.${name}`);
          }
        }
      }
    }
  }
  assert.deepEqual([...seen].sort(), [
    'logs',
    'metrics_hist',
    'metrics_points',
    'span_events',
    'span_links',
    'spans',
  ]);
});
