// The OpenTelemetry JS SDK's own OTLP/HTTP exporters (http/json and http/protobuf), configured
// only through the standard environment variables, send to the server from a child process;
// every span, event, link, log record and data point they sent is read back through /api.

import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { after, before, describe, test } from 'node:test';
import { promisify } from 'node:util';
import { closeReadWorkers } from '../../src/read/index.ts';
import { createToken } from '../../src/storage/tokens.ts';
import { getJson, type Json, startServer, type TestServer, waitWritten } from './helpers/harness.ts';

const run = promisify(execFile);
const CHILD = new URL('./helpers/sdk-export.ts', import.meta.url).pathname;

/** The child's environment: ours without any OTEL_* variable, plus the given ones. */
function childEnv(extra: Record<string, string>): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) if (!k.startsWith('OTEL_')) env[k] = v;
  return { ...env, ...extra };
}

async function exportWithSdk(protocol: 'json' | 'proto', tag: string, otelEnv: Record<string, string>) {
  const { stdout } = await run(process.execPath, [CHILD], {
    env: childEnv({ EXPORT_PROTOCOL: protocol, EXPORT_TAG: tag, ...otelEnv }),
    timeout: 60_000,
  });
  return JSON.parse(stdout.trim().split('\n').pop()!) as Json;
}

const parse = (s: string | null) => (s === null ? null : JSON.parse(s));
const emptyToNull = (s: string | null | undefined) => (s === undefined || s === '' ? null : s);

function checkSpans(sent: Json, spans: Json[], events: Json[], links: Json[]) {
  assert.equal(spans.length, sent.spans.length);
  const byId = new Map(spans.map((r) => [r.span_id, r]));
  let eventCount = 0;
  let linkCount = 0;
  for (const s of sent.spans) {
    const row = byId.get(s.spanId);
    assert.ok(row, `span ${s.name} stored`);
    assert.equal(row.trace_id, s.traceId);
    assert.equal(row.parent_span_id, s.parentSpanId);
    assert.equal(row.name, s.name);
    assert.equal(row.kind, s.kind);
    assert.equal(row.start_time_unix_nano, s.start);
    assert.equal(row.end_time_unix_nano, s.end);
    assert.equal(row.duration_ns, String(BigInt(s.end) - BigInt(s.start)));
    assert.equal(row.status_code, s.statusCode);
    assert.equal(emptyToNull(row.status_message), emptyToNull(s.statusMessage));
    assert.deepEqual(parse(row.attributes), s.attributes);
    assert.equal(row.service_name, sent.serviceName);
    assert.equal(parse(row.resource_attributes)['deployment.environment'], 'test');
    assert.equal(row.scope_name, s.scope.name);
    assert.equal(row.scope_version, s.scope.version);
    assert.equal(row.events_count, s.events.length);
    assert.equal(row.links_count, s.links.length);
    for (const e of s.events) {
      const ev = events.find((x) => x.span_id === s.spanId && x.name === e.name);
      assert.ok(ev, `event ${e.name} stored`);
      assert.equal(ev.trace_id, s.traceId);
      assert.equal(ev.time_unix_nano, e.time);
      assert.deepEqual(parse(ev.attributes), e.attributes);
      eventCount++;
    }
    for (const l of s.links) {
      const link = links.find((x) => x.span_id === s.spanId && x.linked_span_id === l.spanId);
      assert.ok(link, 'link stored');
      assert.equal(link.linked_trace_id, l.traceId);
      assert.deepEqual(parse(link.attributes), l.attributes);
      linkCount++;
    }
  }
  assert.ok(eventCount >= 2 && linkCount >= 1);
  assert.equal(events.length, eventCount);
  assert.equal(links.length, linkCount);
}

function checkLogs(sent: Json, logs: Json[]) {
  assert.equal(logs.length, sent.logs.length);
  for (const l of sent.logs) {
    const body = typeof l.body === 'string' ? l.body : JSON.stringify(l.body);
    const row = logs.find((r) =>
      typeof l.body === 'string' ? r.body === body : r.body?.startsWith('{') && r.event_name === l.eventName,
    );
    assert.ok(row, `log ${body} stored`);
    if (typeof l.body !== 'string') assert.deepEqual(JSON.parse(row.body), l.body);
    assert.equal(row.time_unix_nano, l.time);
    assert.equal(row.observed_time_unix_nano, l.observed);
    assert.equal(row.severity_number, l.severityNumber);
    assert.equal(row.severity_text, l.severityText);
    assert.equal(row.event_name, l.eventName);
    assert.equal(row.trace_id, l.traceId);
    assert.equal(row.span_id, l.spanId);
    assert.deepEqual(parse(row.attributes), l.attributes);
    assert.equal(row.service_name, sent.serviceName);
    assert.equal(row.scope_name, l.scope.name);
    assert.equal(row.scope_version, l.scope.version);
  }
}

function checkMetrics(sent: Json, points: Json[], hist: Json[]) {
  const sentPoints = sent.points.filter((p: Json) => p.type === 'sum' || p.type === 'gauge');
  const sentHist = sent.points.filter((p: Json) => p.type !== 'sum' && p.type !== 'gauge');
  assert.equal(points.length, sentPoints.length);
  assert.equal(hist.length, sentHist.length);
  assert.deepEqual([...new Set(sent.points.map((p: Json) => p.type))].sort(), [
    'exponential_histogram',
    'gauge',
    'histogram',
    'sum',
  ]);
  const find = (rows: Json[], p: Json) =>
    rows.find(
      (r) => r.metric_name === p.name && JSON.stringify(parse(r.attributes)) === JSON.stringify(p.attributes),
    );
  for (const p of sent.points) {
    const row = find(p.type === 'sum' || p.type === 'gauge' ? points : hist, p);
    assert.ok(row, `point of ${p.name} ${JSON.stringify(p.attributes)} stored`);
    assert.equal(row.metric_type, p.type);
    assert.equal(emptyToNull(row.description), emptyToNull(p.description));
    assert.equal(emptyToNull(row.unit), emptyToNull(p.unit));
    assert.equal(row.time_unix_nano, p.time);
    assert.equal(row.service_name, sent.serviceName);
    assert.equal(row.scope_name, 'otelake-sdk-test');
    if (p.type === 'gauge') {
      assert.equal(row.value_double, p.value);
      assert.equal(row.aggregation_temporality, null);
      continue;
    }
    assert.equal(row.start_time_unix_nano, p.start);
    // The SDK numbers temporalities from 0 (DELTA); OTLP from 1.
    assert.equal(row.aggregation_temporality, p.temporality + 1);
    if (p.type === 'sum') {
      assert.equal(row.value_double, p.value);
      assert.equal(row.is_monotonic, p.isMonotonic);
      continue;
    }
    assert.equal(row.count, String(p.count));
    assert.equal(row.sum, p.sum);
    assert.equal(row.min, p.min);
    assert.equal(row.max, p.max);
    if (p.type === 'histogram') {
      assert.deepEqual(row.explicit_bounds, p.bounds);
      assert.deepEqual(row.bucket_counts, p.counts.map(String));
    } else {
      assert.equal(row.scale, p.scale);
      assert.equal(row.zero_count, String(p.zeroCount));
      assert.equal(row.positive_offset, p.positive.offset);
      assert.deepEqual(row.positive_bucket_counts, p.positive.bucketCounts.map(String));
      assert.deepEqual(row.negative_bucket_counts ?? [], p.negative.bucketCounts.map(String));
    }
  }
}

describe('OpenTelemetry JS SDK exporters, configured through the environment', () => {
  let s: TestServer;
  let written = 0;
  before(async () => {
    s = await startServer();
  });
  after(async () => {
    await s.close();
    await closeReadWorkers();
  });

  const cases: { protocol: 'json' | 'proto'; form: 'base' | 'signal' }[] = [
    { protocol: 'json', form: 'base' },
    { protocol: 'proto', form: 'base' },
    { protocol: 'json', form: 'signal' },
    { protocol: 'proto', form: 'signal' },
  ];
  for (const { protocol, form } of cases) {
    test(`http/${protocol === 'json' ? 'json' : 'protobuf'} with the ${form} endpoint variable`, async () => {
      const project = `sdk-${protocol}-${form}`;
      const env: Record<string, string> =
        form === 'base'
          ? { OTEL_EXPORTER_OTLP_ENDPOINT: protocol === 'proto' ? `${s.url}/` : s.url }
          : {
              OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: `${s.url}/v1/traces`,
              OTEL_EXPORTER_OTLP_LOGS_ENDPOINT: `${s.url}/v1/logs`,
              OTEL_EXPORTER_OTLP_METRICS_ENDPOINT: `${s.url}/v1/metrics`,
            };
      env['OTEL_EXPORTER_OTLP_HEADERS'] = `x-project-id=${project}`;
      const sent = await exportWithSdk(protocol, form, env);
      for (const signal of ['traces', 'logs', 'metrics']) {
        assert.ok(sent.results[signal].length > 0, `${signal} exported`);
        for (const r of sent.results[signal]) assert.equal(r.code, 0, `${signal}: ${r.error}`);
      }
      const events = sent.spans.reduce((n: number, x: Json) => n + x.events.length, 0);
      const links = sent.spans.reduce((n: number, x: Json) => n + x.links.length, 0);
      written += sent.spans.length + events + links + sent.logs.length + sent.points.length;
      await waitWritten(s.url, written);

      const read = async (path: string) => {
        const { status, body } = await getJson(`${s.url}/api/${path}?project_id=${project}&limit=10000`);
        assert.equal(status, 200, JSON.stringify(body));
        return body.rows as Json[];
      };
      checkSpans(sent, await read('spans'), await read('span_events'), await read('span_links'));
      checkLogs(sent, await read('logs'));
      checkMetrics(sent, await read('metrics/points'), await read('metrics/hist'));
    });
  }
});

describe('with a token, configured only through OTEL_EXPORTER_OTLP_HEADERS', () => {
  let s: TestServer;
  let token: string;
  before(async () => {
    s = await startServer();
    token = (
      await createToken(s.logger.layout.tokensFile, { project: 'sdk-tenant', scopes: ['ingest', 'read'] })
    ).token;
  });
  after(() => s.close());

  for (const protocol of ['json', 'proto'] as const) {
    test(`http/${protocol === 'json' ? 'json' : 'protobuf'}: the token's project, and 401 without it`, async () => {
      const endpoint = { OTEL_EXPORTER_OTLP_ENDPOINT: s.url };
      // The SDKs read `key=value` pairs; the space of "Bearer <token>" may also be sent as %20.
      const headers =
        protocol === 'json' ? `authorization=Bearer ${token}` : `authorization=Bearer%20${token}`;
      const sent = await exportWithSdk(protocol, `token-${protocol}`, {
        ...endpoint,
        OTEL_EXPORTER_OTLP_HEADERS: headers,
      });
      for (const signal of ['traces', 'logs', 'metrics']) {
        assert.ok(sent.results[signal].length > 0, `${signal} exported`);
        for (const r of sent.results[signal]) assert.equal(r.code, 0, `${signal}: ${r.error}`);
      }
      const read = async (path: string) => {
        const deadline = Date.now() + 15_000;
        for (;;) {
          const res = await fetch(`${s.url}/api/${path}?service_name=${sent.serviceName}&limit=10000`, {
            headers: { authorization: `Bearer ${token}` },
          });
          const body = (await res.json()) as Json;
          assert.equal(res.status, 200, JSON.stringify(body));
          if (body.count > 0 || Date.now() > deadline) return body.rows as Json[];
          await new Promise((r) => setTimeout(r, 50));
        }
      };
      const spans = await read('spans');
      const logs = await read('logs');
      assert.equal(spans.length, sent.spans.length);
      assert.equal(logs.length, sent.logs.length);
      for (const row of [...spans, ...logs]) assert.equal(row.project_id, 'sdk-tenant');

      // Without the header the exporters get 401 (not retryable), which ends the SDK run in an error.
      await assert.rejects(
        exportWithSdk(protocol, `none-${protocol}`, endpoint),
        (err: Error & { stderr: string }) => /code: 401/.test(err.stderr),
      );
    });
  }
});
