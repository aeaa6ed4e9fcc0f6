// The OTLP/HTTP server: ingest on /v1/*, health on /healthz, reads on /api/*.

export { type BuildServerOptions, buildServer } from './app.ts';
export { isLoopback, type RunningServer, type RunServerOptions, runServer } from './run.ts';
