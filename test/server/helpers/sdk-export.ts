// Child process for the SDK tests: sends traces, logs and metrics with the OpenTelemetry JS SDK's
// OTLP/HTTP exporters, configured only through the standard OTEL_EXPORTER_OTLP_* environment
// variables, exactly as an application would. Each exporter is wrapped to record what it was
// handed and how the export ended; that record is printed as JSON on stdout for the test to check.
//
// Environment: EXPORT_PROTOCOL=json|proto, EXPORT_TAG (marks this run's data), plus the OTEL_* ones.

import { type Attributes, context, type HrTime, SpanKind, SpanStatusCode, trace } from '@opentelemetry/api';
import { OTLPLogExporter as LogsJson } from '@opentelemetry/exporter-logs-otlp-http';
import { OTLPLogExporter as LogsProto } from '@opentelemetry/exporter-logs-otlp-proto';
import { OTLPMetricExporter as MetricsJson } from '@opentelemetry/exporter-metrics-otlp-http';
import { OTLPMetricExporter as MetricsProto } from '@opentelemetry/exporter-metrics-otlp-proto';
import { OTLPTraceExporter as TracesJson } from '@opentelemetry/exporter-trace-otlp-http';
import { OTLPTraceExporter as TracesProto } from '@opentelemetry/exporter-trace-otlp-proto';
import { resourceFromAttributes } from '@opentelemetry/resources';
import {
  BatchLogRecordProcessor,
  LoggerProvider,
  type LogRecordExporter,
  type ReadableLogRecord,
} from '@opentelemetry/sdk-logs';
import {
  AggregationType,
  DataPointType,
  MeterProvider,
  PeriodicExportingMetricReader,
  type PushMetricExporter,
  type ResourceMetrics,
} from '@opentelemetry/sdk-metrics';
import {
  BatchSpanProcessor,
  type ReadableSpan,
  type SpanExporter,
  TracerProvider,
} from '@opentelemetry/sdk-trace';

const protocol = process.env['EXPORT_PROTOCOL'] === 'proto' ? 'proto' : 'json';
const tag = process.env['EXPORT_TAG'] ?? 'run';
const serviceName = `sdk-${protocol}-${tag}`;
const resource = resourceFromAttributes({ 'service.name': serviceName, 'deployment.environment': 'test' });

type Result = { code: number; error?: string };
const results: Record<string, Result[]> = { traces: [], logs: [], metrics: [] };
const record = (signal: string) => (r: { code: number; error?: Error }) =>
  results[signal]!.push(r.error ? { code: r.code, error: r.error.message } : { code: r.code });

const ns = (t: HrTime): string => (BigInt(t[0]) * 1_000_000_000n + BigInt(t[1])).toString();

// --- traces ---------------------------------------------------------------------------------------
const sentSpans: object[] = [];
const traceInner: SpanExporter = protocol === 'proto' ? new TracesProto() : new TracesJson();
const traceExporter: SpanExporter = {
  export(spans: ReadableSpan[], done) {
    for (const s of spans) {
      const ctx = s.spanContext();
      sentSpans.push({
        traceId: ctx.traceId,
        spanId: ctx.spanId,
        parentSpanId: s.parentSpanContext?.spanId ?? null,
        name: s.name,
        kind: s.kind + 1, // OTLP numbers kinds from 1 (INTERNAL); the API from 0
        start: ns(s.startTime),
        end: ns(s.endTime),
        statusCode: s.status.code,
        statusMessage: s.status.message ?? null,
        attributes: s.attributes,
        scope: { name: s.instrumentationScope.name, version: s.instrumentationScope.version ?? null },
        events: s.events.map((e) => ({ name: e.name, time: ns(e.time), attributes: e.attributes ?? {} })),
        links: s.links.map((l) => ({
          traceId: l.context.traceId,
          spanId: l.context.spanId,
          attributes: l.attributes ?? {},
        })),
      });
    }
    traceInner.export(spans, (r) => {
      record('traces')(r);
      done(r);
    });
  },
  shutdown: () => traceInner.shutdown(),
  forceFlush: () => traceInner.forceFlush?.() ?? Promise.resolve(),
};

const tracerProvider = new TracerProvider({
  resource,
  spanProcessors: [new BatchSpanProcessor({ exporter: traceExporter })],
});
const tracer = tracerProvider.getTracer('otelake-sdk-test', '1.2.3');
const linkTarget = tracer.startSpan('link-target');
linkTarget.end();
const root = tracer.startSpan(`GET /orders/${tag}`, {
  kind: SpanKind.SERVER,
  attributes: {
    'http.request.method': 'GET',
    'http.response.status_code': 200,
    'url.path': `/orders/${tag}`,
    ratio: 0.25,
    cached: false,
    'tags.list': ['a', 'b'],
    'ids.list': [1, 2, 3],
  },
  links: [{ context: linkTarget.spanContext(), attributes: { 'link.kind': 'follows' } }],
});
root.addEvent('cache.miss', { 'cache.key': `k-${tag}`, attempt: 2 });
root.addEvent('plain-event');
for (let i = 0; i < 3; i++) {
  const child = tracer.startSpan(
    `db.query ${i}`,
    { kind: SpanKind.CLIENT, attributes: { 'db.system': 'postgresql', 'db.rows': i * 10 } },
    trace.setSpan(context.active(), root),
  );
  if (i === 2) child.setStatus({ code: SpanStatusCode.ERROR, message: 'deadlock detected' });
  child.end();
}
root.setStatus({ code: SpanStatusCode.OK });
root.end();

// --- logs -----------------------------------------------------------------------------------------
const sentLogs: object[] = [];
const logInner: LogRecordExporter = protocol === 'proto' ? new LogsProto() : new LogsJson();
const logExporter: LogRecordExporter = {
  export(logs: ReadableLogRecord[], done) {
    for (const l of logs) {
      sentLogs.push({
        time: ns(l.hrTime),
        observed: ns(l.hrTimeObserved),
        severityNumber: l.severityNumber ?? null,
        severityText: l.severityText ?? null,
        body: l.body ?? null,
        eventName: l.eventName ?? null,
        attributes: l.attributes,
        traceId: l.spanContext?.traceId ?? null,
        spanId: l.spanContext?.spanId ?? null,
        scope: { name: l.instrumentationScope.name, version: l.instrumentationScope.version ?? null },
      });
    }
    logInner.export(logs, (r) => {
      record('logs')(r);
      done(r);
    });
  },
  shutdown: () => logInner.shutdown(),
  forceFlush: () => logInner.forceFlush?.() ?? Promise.resolve(),
};
const loggerProvider = new LoggerProvider({
  resource,
  processors: [new BatchLogRecordProcessor({ exporter: logExporter })],
});
const otelLogger = loggerProvider.getLogger('otelake-sdk-test', '1.2.3');
// Severity numbers of the logs data model: INFO 9, WARN 13, ERROR 17, DEBUG 5.
const levels: [number, string][] = [
  [9, 'INFO'],
  [13, 'WARN'],
  [17, 'ERROR'],
];
for (let i = 0; i < 6; i++) {
  const [severityNumber, severityText] = levels[i % 3]!;
  otelLogger.emit({
    severityNumber,
    severityText,
    body: `order ${i} of ${tag} processed`,
    timestamp: Date.now() - 1000 + i,
    attributes: { 'order.id': i, 'order.total': 10.5 * i, 'customer.vip': i % 2 === 0 },
  });
}
otelLogger.emit({
  severityNumber: 5,
  body: { structured: true, count: 3, items: ['x', 'y'] },
  eventName: 'checkout.completed',
  attributes: {},
});

// --- metrics --------------------------------------------------------------------------------------
const sentPoints: object[] = [];
const metricInner: PushMetricExporter = protocol === 'proto' ? new MetricsProto() : new MetricsJson();
const metricExporter: PushMetricExporter = {
  export(metrics: ResourceMetrics, done) {
    for (const sm of metrics.scopeMetrics) {
      for (const m of sm.metrics) {
        for (const p of m.dataPoints) {
          const base = {
            name: m.descriptor.name,
            description: m.descriptor.description,
            unit: m.descriptor.unit,
            start: ns(p.startTime),
            time: ns(p.endTime),
            attributes: p.attributes as Attributes,
            temporality: m.aggregationTemporality,
          };
          if (m.dataPointType === DataPointType.SUM || m.dataPointType === DataPointType.GAUGE) {
            sentPoints.push({
              ...base,
              type: m.dataPointType === DataPointType.SUM ? 'sum' : 'gauge',
              isMonotonic: m.dataPointType === DataPointType.SUM ? m.isMonotonic : null,
              value: p.value,
              valueType: m.descriptor.valueType,
            });
          } else if (m.dataPointType === DataPointType.HISTOGRAM) {
            const v = p.value as {
              count: number;
              sum?: number;
              min?: number;
              max?: number;
              buckets: { boundaries: number[]; counts: number[] };
            };
            sentPoints.push({
              ...base,
              type: 'histogram',
              count: v.count,
              sum: v.sum ?? null,
              min: v.min ?? null,
              max: v.max ?? null,
              bounds: v.buckets.boundaries,
              counts: v.buckets.counts,
            });
          } else {
            const v = p.value as {
              count: number;
              sum?: number;
              min?: number;
              max?: number;
              scale: number;
              zeroCount: number;
              positive: { offset: number; bucketCounts: number[] };
              negative: { offset: number; bucketCounts: number[] };
            };
            sentPoints.push({
              ...base,
              type: 'exponential_histogram',
              count: v.count,
              sum: v.sum ?? null,
              min: v.min ?? null,
              max: v.max ?? null,
              scale: v.scale,
              zeroCount: v.zeroCount,
              positive: v.positive,
              negative: v.negative,
            });
          }
        }
      }
    }
    metricInner.export(metrics, (r) => {
      record('metrics')(r);
      done(r);
    });
  },
  shutdown: () => metricInner.shutdown(),
  forceFlush: () => metricInner.forceFlush(),
  selectAggregationTemporality: metricInner.selectAggregationTemporality?.bind(metricInner),
};
const meterProvider = new MeterProvider({
  resource,
  views: [
    {
      instrumentName: 'payload.size',
      aggregation: { type: AggregationType.EXPONENTIAL_HISTOGRAM, options: { maxSize: 160 } },
    },
  ],
  readers: [new PeriodicExportingMetricReader({ exporter: metricExporter, exportIntervalMillis: 600_000 })],
});
const meter = meterProvider.getMeter('otelake-sdk-test', '1.2.3');
const requests = meter.createCounter('http.requests', { description: 'requests served', unit: '{request}' });
requests.add(5, { route: '/orders', code: 200 });
requests.add(2, { route: '/orders', code: 500 });
const inflight = meter.createUpDownCounter('queue.depth', { description: 'items waiting', unit: '{item}' });
inflight.add(7.5);
inflight.add(-2.25);
const latency = meter.createHistogram('http.duration', {
  unit: 'ms',
  advice: { explicitBucketBoundaries: [10, 50, 100] },
});
for (const v of [3, 12, 48, 51, 250]) latency.record(v, { route: '/orders' });
const sizes = meter.createHistogram('payload.size', { unit: 'By' });
for (const v of [0, 1, 100, 1000, 12345]) sizes.record(v);
meter
  .createObservableGauge('cpu.temperature', { unit: 'Cel' })
  .addCallback((r) => r.observe(61.5, { core: 'c0' }));

// --- flush all and report -------------------------------------------------------------------------
await Promise.all([tracerProvider.shutdown(), loggerProvider.shutdown(), meterProvider.shutdown()]);
process.stdout.write(
  JSON.stringify({ protocol, serviceName, results, spans: sentSpans, logs: sentLogs, points: sentPoints }) +
    '\n',
);
