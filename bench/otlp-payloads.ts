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
