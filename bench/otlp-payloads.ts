// Realistic OTLP requests for benchmarks: an HTTP service's server spans and request logs.

const kv = (key: string, value: Record<string, unknown>) => ({ key, value });
const str = (s: string) => ({ stringValue: s });
const int = (n: number) => ({ intValue: String(n) });

function hex(bytes: number, seed: number): string {
  let s = '';
  let x = seed * 2654435761 + 1;
  for (let i = 0; i < bytes; i++) {
    x = (x * 1103515245 + 12345) >>> 0;
    s += ((x >>> 16) & 0xff).toString(16).padStart(2, '0');
  }
  return s;
}

const ROUTES = ['/api/users/{id}', '/api/orders', '/api/orders/{id}/items', '/healthz', '/api/search'];
const METHODS = ['GET', 'GET', 'GET', 'POST', 'PUT'];
const STATUS = [200, 200, 200, 201, 404, 500];

function resource(service: string) {
  return {
    attributes: [
      kv('service.name', str(service)),
      kv('service.version', str('2.14.1')),
      kv('service.instance.id', str('b9f5c2d4-6a9e-4c8e-9a57-3f0e2d1c7b6a')),
      kv('deployment.environment.name', str('production')),
      kv('host.name', str('ip-10-0-3-17.eu-west-1.compute.internal')),
      kv('telemetry.sdk.name', str('opentelemetry')),
      kv('telemetry.sdk.language', str('nodejs')),
      kv('telemetry.sdk.version', str('2.0.1')),
    ],
  };
}

const T0 = 1763750000000000000n;

export function tracesRequest(spans: number, seed = 1) {
  const out = [];
  for (let i = 0; i < spans; i++) {
    const n = seed * 100000 + i;
    const start = T0 + BigInt(n) * 1_000_000n;
    const route = ROUTES[i % ROUTES.length]!;
    const status = STATUS[i % STATUS.length]!;
    out.push({
      traceId: hex(16, n),
      spanId: hex(8, n + 7),
      parentSpanId: i % 4 === 0 ? '' : hex(8, n + 13),
      name: `${METHODS[i % METHODS.length]} ${route}`,
      kind: 2,
      startTimeUnixNano: String(start),
      endTimeUnixNano: String(start + BigInt(1_000_000 + ((n * 7919) % 50_000_000))),
      flags: 1,
      attributes: [
        kv('http.request.method', str(METHODS[i % METHODS.length]!)),
        kv('http.route', str(route)),
        kv('url.path', str(route.replace('{id}', String(n % 9973)))),
        kv('url.scheme', str('https')),
        kv('http.response.status_code', int(status)),
        kv('server.address', str('api.example.com')),
        kv('server.port', int(443)),
        kv('client.address', str(`10.0.${n % 250}.${(n * 7) % 250}`)),
        kv(
          'user_agent.original',
          str('Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko)'),
        ),
        kv('network.protocol.version', str('1.1')),
      ],
      status: status >= 500 ? { code: 2, message: 'Internal Server Error' } : {},
      events:
        status >= 500
          ? [
              {
                timeUnixNano: String(start + 500_000n),
                name: 'exception',
                attributes: [
                  kv('exception.type', str('TypeError')),
                  kv('exception.message', str("Cannot read properties of undefined (reading 'id')")),
                ],
              },
            ]
          : [],
    });
  }
  return {
    resourceSpans: [
      {
        resource: resource('checkout-api'),
        scopeSpans: [
          {
            scope: { name: '@opentelemetry/instrumentation-http', version: '0.203.0' },
            spans: out,
          },
        ],
      },
    ],
  };
}

export function logsRequest(records: number, seed = 1) {
  const out = [];
  for (let i = 0; i < records; i++) {
    const n = seed * 100000 + i;
    const time = T0 + BigInt(n) * 1_000_000n;
    const status = STATUS[i % STATUS.length]!;
    const route = ROUTES[i % ROUTES.length]!;
    out.push({
      timeUnixNano: String(time),
      observedTimeUnixNano: String(time + 120_000n),
      severityNumber: status >= 500 ? 17 : 9,
      severityText: status >= 500 ? 'ERROR' : 'INFO',
      body: str(`${METHODS[i % METHODS.length]} ${route} completed with ${status} in ${(n * 7) % 900} ms`),
      attributes: [
        kv('http.request.method', str(METHODS[i % METHODS.length]!)),
        kv('http.route', str(route)),
        kv('http.response.status_code', int(status)),
        kv('duration_ms', { doubleValue: ((n * 7) % 900) + 0.25 }),
        kv('user.id', str(`u-${n % 5000}`)),
        kv('request.id', str(hex(12, n))),
      ],
      traceId: hex(16, n),
      spanId: hex(8, n + 7),
      flags: 1,
    });
  }
  return {
    resourceLogs: [
      {
        resource: resource('checkout-api'),
        scopeLogs: [{ scope: { name: 'pino', version: '9.6.0' }, logRecords: out }],
      },
    ],
  };
}

const BOUNDS = [0, 5, 10, 25, 50, 75, 100, 250, 500, 750, 1000, 2500, 5000, 7500, 10000];

/**
 * A metrics request of `points` data points, spread over metrics of all five kinds (gauge, sum,
 * histogram, exponential histogram, summary), five points a metric, some with exemplars.
 */
export function metricsRequest(points: number, seed = 1) {
  const metrics = [];
  const time = String(T0 + BigInt(seed) * 1_000_000_000n);
  const start = String(T0);
  for (let made = 0, m = 0; made < points; m++) {
    const kind = m % 5;
    const route = ROUTES[m % ROUTES.length]!;
    const dataPoints = [];
    for (let p = 0; p < 5 && made < points; p++, made++) {
      const n = seed * 100000 + made;
      const attributes = [
        kv('http.request.method', str(METHODS[p % METHODS.length]!)),
        kv('http.route', str(route)),
        kv('http.response.status_code', int(STATUS[n % STATUS.length]!)),
      ];
      const exemplars =
        n % 4 === 0
          ? [
              {
                timeUnixNano: time,
                asDouble: (n % 977) + 0.5,
                traceId: hex(16, n),
                spanId: hex(8, n + 7),
                filteredAttributes: [kv('client.address', str(`10.0.${n % 250}.${(n * 7) % 250}`))],
              },
            ]
          : [];
      const common = { attributes, startTimeUnixNano: start, timeUnixNano: time };
      if (kind === 0) dataPoints.push({ ...common, asDouble: (n % 1000) / 7 });
      else if (kind === 1) dataPoints.push({ ...common, asInt: String(n * 13), exemplars });
      else if (kind === 2) {
        const bucketCounts = BOUNDS.map((_, i) => String((n * (i + 3)) % 97)).concat(['1']);
        dataPoints.push({
          ...common,
          count: String(bucketCounts.reduce((a, b) => a + Number(b), 0)),
          sum: (n % 5000) * 1.5,
          min: 0.25,
          max: 9000.5,
          bucketCounts,
          explicitBounds: BOUNDS,
          exemplars,
        });
      } else if (kind === 3) {
        dataPoints.push({
          ...common,
          count: '40',
          sum: (n % 700) + 0.125,
          scale: 3,
          zeroCount: '2',
          zeroThreshold: 0.001,
          positive: { offset: -3, bucketCounts: Array.from({ length: 12 }, (_, i) => String((n + i) % 9)) },
          negative: { offset: 1, bucketCounts: ['1', '0', '2'] },
          min: -4.5,
          max: 880.25,
          exemplars,
        });
      } else {
        dataPoints.push({
          ...common,
          count: String(100 + (n % 50)),
          sum: (n % 900) * 2.25,
          quantileValues: [0, 0.5, 0.9, 0.99, 1].map((quantile, i) => ({
            quantile,
            value: (n % 40) * (i + 1),
          })),
        });
      }
    }
    const name = ['process.cpu.utilization', 'http.server.requests', 'http.server.request.duration'][
      kind % 3
    ]!;
    const unit = ['1', '{request}', 's', 's', 'ms'][kind]!;
    const metric: Record<string, unknown> = { name: `${name}.${m}`, description: `metric ${m}`, unit };
    if (kind === 0) metric.gauge = { dataPoints };
    else if (kind === 1) metric.sum = { dataPoints, aggregationTemporality: 2, isMonotonic: true };
    else if (kind === 2) metric.histogram = { dataPoints, aggregationTemporality: 2 };
    else if (kind === 3) metric.exponentialHistogram = { dataPoints, aggregationTemporality: 1 };
    else metric.summary = { dataPoints };
    metrics.push(metric);
  }
  return {
    resourceMetrics: [
      {
        resource: resource('checkout-api'),
        scopeMetrics: [{ scope: { name: '@opentelemetry/sdk-metrics', version: '2.0.1' }, metrics }],
      },
    ],
  };
}

/** OTLP JSON ids are hex; protobuf wants bytes: the tree with its ids as bytes, for protobufjs. */
export function hexIdsToBytes(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(hexIdsToBytes);
  if (value === null || typeof value !== 'object') return value;
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(value)) {
    if ((k === 'traceId' || k === 'spanId' || k === 'parentSpanId') && typeof v === 'string') {
      out[k] = Buffer.from(v, 'hex');
    } else out[k] = hexIdsToBytes(v);
  }
  return out;
}
