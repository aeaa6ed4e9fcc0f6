// The otelake library: the Logger (ingest, start/stop, reads) and the types it speaks.

export type { DamagedTable } from './damaged-tables.ts';
export type { ColumnBatch } from './delta/batch.ts';
export {
  type FlushMode,
  type IngestResult,
  type IngestTuple,
  Logger,
  type LoggerInit,
  type LoggerStats,
  type LogSink,
  type ReadArgs,
  type ReadOutput,
  type RequestOutcome,
  type RequestResult,
  type RequestTables,
  type S3Config,
} from './logger.ts';
export type { AggregatorStats } from './pipeline/aggregator.ts';
export type { ProducerStats } from './pipeline/producer.ts';
export {
  DamagedTableError,
  ReadLimitError,
  type ReadQuery,
  type Storage,
  StorageUnavailableError,
} from './read/query.ts';
export {
  type ColumnDef,
  type Row,
  SCHEMAS,
  TABLE_NAMES,
  type TableName,
  type TableSchema,
} from './schema/tables.ts';
export { REJECT_REASONS } from './schema/validate.ts';
export {
  ShipError,
  type ShipProgress,
  type ShipperStats,
  type ShipSummary,
} from './shipping/shipper.ts';
export { defaultOptions, type LoggerOptions, type PartialOptions } from './storage/options.ts';
export { InstanceInUseError } from './storage/process-lock.ts';
export { VERSION } from './version.ts';
