// The read path's public API (library, HTTP /api endpoints, CLI viewer).
export * from './query.ts';
