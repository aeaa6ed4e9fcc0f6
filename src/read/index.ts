// The read path's public API (library, HTTP /api endpoints, CLI viewer).
export {
  closeReadWorkers,
  type FileEntry,
  filtersOf,
  isoFromMicros,
  type JsonValue,
  type NormalizedQuery,
  normalizeQuery,
  type ReadOptions,
  type ReadQuery,
  type RowFilter,
  readTable,
  rowToJson,
  STORAGES,
  type Storage,
  StorageUnavailableError,
  validateQuery,
} from './query.ts';
