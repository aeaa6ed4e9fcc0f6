// Maps an ExportLogsServiceRequest, read through either reader, to logs columns.

import { columnsOf, TableRows } from './columns.ts';
import { F, LOG_RECORD, LOGS_REQUEST, RESOURCE_LOGS, SCOPE_LOGS } from './messages.ts';
import { END, type OtlpReader, type ReadId } from './reader.ts';
import type { MapContext } from './request.ts';
import { SEVERITY_NUMBER } from './values.ts';
import { RequestWalker } from './walk.ts';

const C = columnsOf('logs', [
  'time_unix_nano',
  'observed_time_unix_nano',
  'severity_number',
  'severity_text',
  'body',
  'attributes',
  'trace_id',
  'span_id',
  'flags',
  'event_name',
  'dropped_attributes_count',
]);

export class LogMapper extends RequestWalker {
  private readonly logs: TableRows;

  constructor(r: OtlpReader, ctx: MapContext) {
    const logs = new TableRows('logs', ctx.maxRows);
    super(
      r,
      ctx,
      {
        request: LOGS_REQUEST,
        resources: F.resourceLogs,
        resource: RESOURCE_LOGS,
        scopes: F.scopeLogs,
        scope: SCOPE_LOGS,
        items: F.logRecords,
        item: LOG_RECORD,
      },
      [logs],
    );
    this.logs = logs;
  }

  protected items(): number {
    return this.logs.flushed + this.logs.n;
  }

  /**
   * A log record. Its event_ts (the time, else the observed time, else the arrival) is left to the
   * normalizer, as for rows given to the library.
   */
  protected item(): void {
    const r = this.r;
    const logs = this.logs;
    const row = logs.add();
    let time = 0n;
    let observed = 0n;
    let severity = 0;
    let severityText: string | null = null;
    let body: string | null = null;
    let traceId: ReadId = null;
    let spanId: ReadId = null;
    let flags = 0n;
    let eventName: string | null = null;
    let dropped = 0;
    for (let f = r.next(); f !== END; f = r.next()) {
      switch (f) {
        case F.timeUnixNano:
          time = r.int64();
          break;
        case F.observedTimeUnixNano:
          observed = r.int64();
          break;
        case F.severityNumber:
          severity = r.int32(SEVERITY_NUMBER);
          break;
        case F.severityText:
          severityText = r.string();
          break;
        case F.body:
          body = r.body();
          break;
        case F.attributes:
          r.attributes();
          break;
        case F.traceId:
          traceId = r.id(16);
          break;
        case F.spanId:
          spanId = r.id(8);
          break;
        case F.flags:
          flags = r.flags();
          break;
        case F.eventName:
          eventName = r.string();
          break;
        case F.droppedAttributesCount:
          dropped = r.int32();
          break;
        default:
          r.skip();
      }
    }
    logs.set(C.time_unix_nano, row, time);
    logs.set(C.observed_time_unix_nano, row, observed);
    logs.set(C.severity_number, row, severity);
    logs.set(C.severity_text, row, severityText);
    logs.set(C.body, row, body);
    logs.set(C.attributes, row, r.attributesJson());
    logs.set(C.trace_id, row, this.checkId(traceId));
    logs.set(C.span_id, row, this.checkId(spanId));
    logs.set(C.flags, row, flags);
    logs.set(C.event_name, row, eventName);
    logs.set(C.dropped_attributes_count, row, dropped);
  }
}
