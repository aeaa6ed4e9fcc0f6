// Child process of the CLI flow test: an application instrumented with the OpenTelemetry JS SDK,
// configured only by OTEL_EXPORTER_OTLP_ENDPOINT, sends spans (with an event), logs and metrics
// over OTLP/HTTP JSON, then shuts its providers down (which flushes). Prints what it sent as JSON.
//
// Environment: SEND_SERVICE (service.name), SEND_LOGS (how many log records), SEND_PREFIX (body text).

import { context, SpanKind, trace } from '@opentelemetry/api';
import { OTLPLogExporter } from '@opentelemetry/exporter-logs-otlp-http';
import { OTLPMetricExporter } from '@opentelemetry/exporter-metrics-otlp-http';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { resourceFromAttributes } from '@opentelemetry/resources';
import { BatchLogRecordProcessor, LoggerProvider } from '@opentelemetry/sdk-logs';
import { MeterProvider, PeriodicExportingMetricReader } from '@opentelemetry/sdk-metrics';
import { BatchSpanProcessor, TracerProvider } from '@opentelemetry/sdk-trace';

const service = process.env['SEND_SERVICE'] ?? 'cli-test';
const logCount = Number(process.env['SEND_LOGS'] ?? '5');
const prefix = process.env['SEND_PREFIX'] ?? 'message';
const resource = resourceFromAttributes({ 'service.name': service });

const failures: string[] = [];
const checked = <
  T extends { export: (items: never, done: (r: { code: number; error?: Error }) => void) => void },
>(
  exporter: T,
  signal: string,
): T => {
  const original = exporter.export.bind(exporter);
  exporter.export = ((items: never, done: (r: { code: number; error?: Error }) => void) =>
    original(items, (r) => {
      if (r.code !== 0) failures.push(`${signal}: ${r.error?.message ?? r.code}`);
      done(r);
    })) as T['export'];
  return exporter;
};

const tracerProvider = new TracerProvider({
  resource,
  spanProcessors: [new BatchSpanProcessor({ exporter: checked(new OTLPTraceExporter(), 'traces') })],
});
const tracer = tracerProvider.getTracer('cli-test');
const root = tracer.startSpan('GET /checkout', { kind: SpanKind.SERVER });
root.addEvent('cart.loaded', { items: 3 });
const child = tracer.startSpan(
  'SELECT carts',
  { kind: SpanKind.CLIENT },
  trace.setSpan(context.active(), root),
);
child.end();
root.end();

const loggerProvider = new LoggerProvider({
  resource,
  processors: [new BatchLogRecordProcessor({ exporter: checked(new OTLPLogExporter(), 'logs') })],
});
const logger = loggerProvider.getLogger('cli-test');
const start = Date.now() - logCount;
for (let i = 0; i < logCount; i++) {
  logger.emit({
    severityNumber: i % 2 === 0 ? 9 : 17,
    severityText: i % 2 === 0 ? 'INFO' : 'ERROR',
    body: `${prefix} ${i}`,
    timestamp: start + i, // strictly increasing: the newest is the last one
  });
}

const meterProvider = new MeterProvider({
  resource,
  readers: [
    new PeriodicExportingMetricReader({
      exporter: checked(new OTLPMetricExporter(), 'metrics'),
      exportIntervalMillis: 600_000,
    }),
  ],
});
const meter = meterProvider.getMeter('cli-test');
meter.createCounter('orders.placed').add(4, { shop: 'berlin' });
meter.createHistogram('checkout.duration', { unit: 'ms' }).record(42);

await Promise.all([tracerProvider.shutdown(), loggerProvider.shutdown(), meterProvider.shutdown()]);
process.stdout.write(`${JSON.stringify({ service, logs: logCount, spans: 2, failures })}\n`);
process.exitCode = failures.length === 0 ? 0 : 1;
