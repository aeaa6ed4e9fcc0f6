// The OTLP/HTTP server: ingest on /v1/*, health on /healthz, reads on /api/*.

export { type BuildServerOptions, buildServer } from './app.ts';
export { BodyError, readBody, SUPPORTED_ENCODINGS } from './body.ts';
export { formatOf, SIGNAL_ROUTES } from './ingest.ts';
export { OPENAPI_DOCUMENT } from './openapi.ts';
export { DEFAULT_LIMIT, MAX_LIMIT, ParamError, parseReadParams, READ_ROUTES } from './read-api.ts';
export { isLoopback, type RunningServer, type RunServerOptions, runServer } from './run.ts';
export { SERVICE_VERSION } from './version.ts';
