import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { test } from 'node:test';
import { promisify } from 'node:util';
import {
  encodeExportResponse,
  encodeStatus,
  loadProtobuf,
  PROTOBUF_PACKAGE,
  rpcCodeForHttpStatus,
  type Signal,
} from '../../src/otlp/index.ts';

const RESPONSE_TYPES: Record<Signal, [string, string]> = {
  traces: ['opentelemetry.proto.collector.trace.v1.ExportTraceServiceResponse', 'rejectedSpans'],
  logs: ['opentelemetry.proto.collector.logs.v1.ExportLogsServiceResponse', 'rejectedLogRecords'],
  metrics: ['opentelemetry.proto.collector.metrics.v1.ExportMetricsServiceResponse', 'rejectedDataPoints'],
};

test('JSON export responses', async () => {
  const text = (b: Uint8Array) => Buffer.from(b).toString();
  assert.equal(text(encodeExportResponse('traces', { rejected: 0 }, 'json')), '{}');
  assert.deepEqual(
    JSON.parse(text(encodeExportResponse('traces', { rejected: 3, message: 'bad "ids"' }, 'json'))),
    {
      partialSuccess: { rejectedSpans: 3, errorMessage: 'bad "ids"' },
    },
  );
  assert.deepEqual(JSON.parse(text(encodeExportResponse('logs', { rejected: 2n }, 'json'))), {
    partialSuccess: { rejectedLogRecords: 2 },
  });
  assert.deepEqual(
    JSON.parse(text(encodeExportResponse('metrics', { rejected: 0, message: 'warning' }, 'json'))),
    {
      partialSuccess: { errorMessage: 'warning' },
    },
  );
  // The count is a JSON number, which a proto3 JSON reader (here protobufjs) takes for the int64.
  const codec = (await loadProtobuf())!;
  for (const signal of ['traces', 'logs', 'metrics'] as const) {
    const [typeName, field] = RESPONSE_TYPES[signal];
    const type = codec.root.lookupType(typeName);
    const json = JSON.parse(text(encodeExportResponse(signal, { rejected: 2 ** 40, message: 'm' }, 'json')));
    assert.deepEqual(type.toObject(type.fromObject(json), { longs: String }), {
      partialSuccess: { [field]: String(2 ** 40), errorMessage: 'm' },
    });
  }
});

test('protobuf export responses decode with the OTLP types', async () => {
  const codec = (await loadProtobuf())!;
  for (const signal of ['traces', 'logs', 'metrics'] as const) {
    const [typeName, field] = RESPONSE_TYPES[signal];
    const type = codec.root.lookupType(typeName);
    assert.equal(encodeExportResponse(signal, { rejected: 0 }, 'protobuf').length, 0);
    for (const rejected of [1, 300, 2 ** 40]) {
      const body = encodeExportResponse(signal, { rejected, message: 'résumé: 2 bad' }, 'protobuf');
      const decoded = type.toObject(type.decode(body), { longs: String }) as Record<
        string,
        Record<string, unknown>
      >;
      assert.deepEqual(decoded, {
        partialSuccess: { [field]: String(rejected), errorMessage: 'résumé: 2 bad' },
      });
    }
    const warningOnly = type.toObject(
      type.decode(encodeExportResponse(signal, { rejected: 0, message: 'w' }, 'protobuf')),
    );
    assert.deepEqual(warningOnly, { partialSuccess: { errorMessage: 'w' } });
  }
});

test('google.rpc.Status bodies in JSON and protobuf', async () => {
  assert.deepEqual(JSON.parse(Buffer.from(encodeStatus(3, 'invalid JSON body', 'json')).toString()), {
    code: 3,
    message: 'invalid JSON body',
  });
  const codec = (await loadProtobuf())!;
  const status = codec.root.lookupType('google.rpc.Status');
  for (const code of [3, 8, 14, -1]) {
    const decoded = status.toObject(status.decode(encodeStatus(code, 'queue full', 'protobuf')));
    assert.deepEqual(decoded, { code, message: 'queue full' });
  }
  assert.equal(rpcCodeForHttpStatus(400), 3);
  assert.equal(rpcCodeForHttpStatus(429), 8);
  assert.equal(rpcCodeForHttpStatus(503), 14);
  assert.equal(rpcCodeForHttpStatus(500), 13);
});

test('loadProtobuf is cached, and resolves null when protobufjs is missing', async () => {
  assert.equal(await loadProtobuf(), await loadProtobuf());
  // A child process where resolving the package fails, as in an install without optional deps.
  const script = `
    import { registerHooks } from 'node:module';
    registerHooks({ resolve(specifier, context, next) {
      if (specifier === ${JSON.stringify(PROTOBUF_PACKAGE)}) {
        throw Object.assign(new Error('Cannot find package'), { code: 'ERR_MODULE_NOT_FOUND' });
      }
      return next(specifier, context);
    } });
    const { loadProtobuf } = await import(${JSON.stringify(new URL('../../src/otlp/index.ts', import.meta.url).href)});
    console.log(JSON.stringify(await loadProtobuf()));`;
  const { stdout } = await promisify(execFile)(process.execPath, ['--input-type=module', '-e', script]);
  assert.equal(stdout.trim(), 'null');
});
