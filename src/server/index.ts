// The OTLP/HTTP server: ingest on /v1/*, health on /healthz, reads on /api/*.

export { type BuildServerOptions, buildServer } from './app.ts';
export { isLoopback } from './loopback.ts';
export { logStopped, type RunningServer, type RunServerOptions, runServer } from './run.ts';
